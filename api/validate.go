package api

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/uastack/ua"
)

// The checks a request body passes before anything is changed. They name
// the member at fault with a JSON pointer. The Backend validates the whole
// configuration again (cross references, limits); these make sure a bad
// request gets a precise answer even before that.

const maxNameLength = 128

// checkName checks a name used as a topic level: not empty, no MQTT
// wildcard or level separator, no control characters.
func checkName(field, what, name string) error {
	switch {
	case name == "":
		return fieldProblemf(ErrInvalid, field, "%s: a name is required", what)
	case len(name) > maxNameLength:
		return fieldProblemf(ErrInvalid, field, "%s: the name is longer than %d bytes", what, maxNameLength)
	case strings.ContainsAny(name, "/+#"):
		return fieldProblemf(ErrInvalid, field, "%s %q: a name cannot contain '/', '+' or '#' (it is a topic level)", what, name)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fieldProblemf(ErrInvalid, field, "%s %q: a name cannot contain control characters", what, name)
	}
	return nil
}

// checkNodeID checks the text of a node id (the nsu= form is resolved
// later, against the server's namespace table).
func checkNodeID(field, s string) error {
	if s == "" {
		return fieldProblemf(ErrInvalidNodeID, field, "a node id is required")
	}
	if _, err := ua.ParseExpandedNodeID(s); err != nil {
		return fieldProblemf(ErrInvalidNodeID, field, "node id %q is not valid (want \"ns=<index>;s=<name>\", \"nsu=<uri>;i=<n>\", \"i=<n>\", …)", s)
	}
	return nil
}

func checkOneOf(field, v string, allowed ...string) error {
	if v == "" {
		return nil
	}
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fieldProblemf(ErrInvalid, field, "%q is not one of %s", v, strings.Join(allowed, ", "))
}

func checkNotNegative(field string, v int) error {
	if v < 0 {
		return fieldProblemf(ErrInvalid, field, "%d is negative", v)
	}
	return nil
}

func checkDuration(field string, d *Duration) error {
	if d != nil && *d < 0 {
		return fieldProblemf(ErrInvalid, field, "a duration cannot be negative")
	}
	return nil
}

func checkDeadband(field string, d *Deadband) error {
	if d == nil {
		return nil
	}
	if err := checkOneOf(field+"/type", d.Type, "none", "absolute", "percent"); err != nil {
		return err
	}
	if d.Value < 0 || (d.Type == "percent" && d.Value > 100) {
		return fieldProblemf(ErrInvalid, field+"/value", "deadband %v out of range", d.Value)
	}
	return nil
}

// checkGroup checks a writer group resource; at is its JSON pointer ("" for
// a body that is the group).
func checkGroup(at string, g *WriterGroup) error {
	if err := checkName(at+"/name", "writer group", g.Name); err != nil {
		return err
	}
	if err := checkName(at+"/endpoint", "endpoint", g.Endpoint); err != nil {
		return err
	}
	for _, c := range []error{
		checkDuration(at+"/publishingInterval", g.PublishingInterval),
		checkNotNegative(at+"/keyFrameCount", g.KeyFrameCount),
		checkNotNegative(at+"/maxMessageSize", g.MaxMessageSize),
		checkNotNegative(at+"/maxUnacked", g.MaxUnacked),
		checkOneOf(at+"/messageShape", g.MessageShape, config.ShapeSingle, config.ShapeBatched),
		checkOneOf(at+"/fieldEncoding", g.FieldEncoding, config.FieldVariant, config.FieldDataValue, config.FieldRaw),
		checkOneOf(at+"/encoding", g.Encoding, "compact", "verbose"),
		checkOneOf(at+"/format", g.Format, config.FormatPart14, config.FormatSamples),
	} {
		if c != nil {
			return c
		}
	}
	if n := g.Nodes; n != nil {
		if err := checkMonitoring(at+"/nodes", n.SamplingInterval, n.Deadband, n.Trigger, n.Heartbeat); err != nil {
			return err
		}
	}
	names := map[string]int{}
	ids := map[uint16]int{}
	for i := range g.Writers {
		w := &g.Writers[i]
		p := fmt.Sprintf("%s/writers/%d", at, i)
		if err := checkWriter(p, w); err != nil {
			return err
		}
		if j, dup := names[w.Name]; dup {
			return fieldProblemf(ErrInvalid, p+"/name", "dataset writer %q is also writers[%d]", w.Name, j)
		}
		names[w.Name] = i
		if w.ID != 0 {
			if j, dup := ids[w.ID]; dup {
				return fieldProblemf(ErrInvalid, p+"/id", "DataSetWriterId %d is also that of writers[%d]", w.ID, j)
			}
			ids[w.ID] = i
		}
	}
	return nil
}

func checkMonitoring(at string, sampling *Duration, db *Deadband, trigger string, heartbeat *Duration) error {
	for _, c := range []error{
		checkDuration(at+"/samplingInterval", sampling),
		checkDeadband(at+"/deadband", db),
		checkOneOf(at+"/trigger", trigger, "status", "statusValue", "statusValueTimestamp"),
		checkDuration(at+"/heartbeat", heartbeat),
	} {
		if c != nil {
			return c
		}
	}
	return nil
}

// checkWriter checks a dataset writer resource.
func checkWriter(at string, w *DataSetWriter) error {
	if err := checkName(at+"/name", "dataset writer", w.Name); err != nil {
		return err
	}
	seen := map[string]int{}
	for i := range w.Fields {
		p := fmt.Sprintf("%s/fields/%d", at, i)
		if err := checkField(p, &w.Fields[i]); err != nil {
			return err
		}
		k := w.Fields[i].key()
		if j, dup := seen[k]; dup {
			return fieldProblemf(ErrInvalid, p+"/name", "field %q is also fields[%d]", k, j)
		}
		seen[k] = i
	}
	for i, b := range w.Browse {
		p := fmt.Sprintf("%s/browse/%d", at, i)
		if err := checkNodeID(p+"/root", b.Root); err != nil {
			return err
		}
		if err := checkNotNegative(p+"/depth", b.Depth); err != nil {
			return err
		}
		if err := checkNotNegative(p+"/maxNodes", b.MaxNodes); err != nil {
			return err
		}
	}
	return nil
}

// checkField checks a field resource.
func checkField(at string, f *Field) error {
	if err := checkNodeID(at+"/node", f.Node); err != nil {
		return err
	}
	if f.Name != "" {
		if len(f.Name) > maxNameLength || strings.IndexFunc(f.Name, unicode.IsControl) >= 0 {
			return fieldProblemf(ErrInvalid, at+"/name", "field name %q: at most %d bytes, no control characters", f.Name, maxNameLength)
		}
	}
	if err := checkMonitoring(at, f.SamplingInterval, f.Deadband, f.Trigger, f.Heartbeat); err != nil {
		return err
	}
	if f.Events != nil && f.Events.OfType != "" {
		return checkNodeID(at+"/events/ofType", f.Events.OfType)
	}
	return nil
}

// key is what names a field in its writer: its name, or its node when it
// has none (the runtime defaults the name to it).
func (f *Field) key() string {
	if f.Name != "" {
		return f.Name
	}
	return f.Node
}

func cfgFieldKey(f *config.Field) string {
	if f.Name != "" {
		return f.Name
	}
	return f.Node
}
