package api

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uagate/gateway/bridge/config"
)

// The configuration resources as the REST API reads and writes them: the
// writer groups, dataset writers and fields of bridge/config, with
// lowerCamelCase JSON members and durations as "1s"/"250ms" strings (or
// numbers of milliseconds). Members left out take the configuration's
// defaults.

// Duration is a time.Duration in JSON: "1.5s", "250ms", or a number of
// milliseconds.
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, time.Duration(d).String()), nil
}

// UnmarshalJSON reads a duration string or a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		s, err := strconv.Unquote(string(b))
		if err != nil {
			return problemf(ErrMalformedJSON, "malformed duration string")
		}
		v, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return problemf(ErrInvalid, "duration %q: want a number with a unit (\"500ms\", \"1s\", \"2m\")", s)
		}
		*d = Duration(v)
		return nil
	}
	ms, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return problemf(ErrInvalid, "duration %s: want a string (\"1s\") or a number of milliseconds", b)
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

// WriterGroup is a writer group: one subscription's dataset writers.
type WriterGroup struct {
	Name                       string          `json:"name" doc:"unique; the <WriterGroup> topic level"`
	Endpoint                   string          `json:"endpoint" doc:"name of the endpoint it subscribes to"`
	PublishingInterval         *Duration       `json:"publishingInterval,omitempty" doc:"default 1s"`
	KeyFrameCount              int             `json:"keyFrameCount,omitempty" doc:"every n-th DataSetMessage is a key frame; default 10"`
	KeepAlive                  *Duration       `json:"keepAlive,omitempty" doc:"ua-keepalive after this long without change; default 10 x publishingInterval"`
	MaxMessageSize             int             `json:"maxMessageSize,omitempty" doc:"bytes; larger NetworkMessages are split; default 256 KiB"`
	MessageShape               string          `json:"messageShape,omitempty" doc:"single (default) or batched"`
	FieldEncoding              string          `json:"fieldEncoding,omitempty" doc:"variant (default), dataValue or raw"`
	FieldContent               []string        `json:"fieldContent,omitempty" doc:"members of a dataValue field beside its Value: statusCode, sourceTimestamp, serverTimestamp, sourcePicoSeconds, serverPicoSeconds; default the first three"`
	Encoding                   string          `json:"encoding,omitempty" doc:"compact (default) or verbose"`
	Format                     string          `json:"format,omitempty" doc:"part14 (default) or samples"`
	MaxUnacked                 int             `json:"maxUnacked,omitempty" doc:"notification messages not yet confirmed by at-least-once sinks before Publish stops; default 64"`
	MaxNotificationsPerPublish int             `json:"maxNotificationsPerPublish,omitempty" doc:"most values in one notification message of the subscription; default 1000; negative: the server's own bound"`
	Nodes                      *NodeDefaults   `json:"nodes,omitempty" doc:"monitored-item defaults of the group's fields"`
	Writers                    []DataSetWriter `json:"writers" doc:"the dataset writers"`
	// Status is read-only: ignored in requests.
	Status *GroupStatus `json:"status,omitempty" doc:"runtime counters (read-only, ignored in requests)"`
}

// NodeDefaults are the monitored-item settings the fields of a group
// inherit.
type NodeDefaults struct {
	SamplingInterval *Duration `json:"samplingInterval,omitempty"`
	QueueSize        uint32    `json:"queueSize,omitempty"`
	DiscardOldest    *bool     `json:"discardOldest,omitempty"`
	Deadband         *Deadband `json:"deadband,omitempty"`
	Trigger          string    `json:"trigger,omitempty" doc:"status, statusValue (default) or statusValueTimestamp"`
	Heartbeat        *Duration `json:"heartbeat,omitempty"`
}

// Deadband of a data change filter.
type Deadband struct {
	Type  string  `json:"type" doc:"none, absolute or percent"`
	Value float64 `json:"value"`
}

// DataSetWriter is a dataset: a named, ordered list of fields.
type DataSetWriter struct {
	ID     uint16         `json:"id,omitempty" doc:"DataSetWriterId; default its position (1-based)"`
	Name   string         `json:"name" doc:"unique in the group; the <DataSetWriter> topic level"`
	Fields []Field        `json:"fields" doc:"the monitored nodes"`
	Browse []BrowseSelect `json:"browse,omitempty" doc:"adds the Variables found by browsing"`
}

// Field is one monitored node and the dataset field it is written as.
type Field struct {
	Name             string       `json:"name,omitempty" doc:"unique in the writer; default the node id"`
	Node             string       `json:"node" doc:"node id (ns=, nsu= or i= form)"`
	SamplingInterval *Duration    `json:"samplingInterval,omitempty"`
	QueueSize        uint32       `json:"queueSize,omitempty"`
	DiscardOldest    *bool        `json:"discardOldest,omitempty"`
	Deadband         *Deadband    `json:"deadband,omitempty"`
	Trigger          string       `json:"trigger,omitempty"`
	Heartbeat        *Duration    `json:"heartbeat,omitempty"`
	Events           *EventSelect `json:"events,omitempty" doc:"makes it an event field: the node is an event notifier"`
}

// EventSelect is an event filter.
type EventSelect struct {
	Select []string `json:"select,omitempty" doc:"browse paths relative to BaseEventType"`
	OfType string   `json:"ofType,omitempty" doc:"event type node id"`
}

// BrowseSelect selects every Variable below a node.
type BrowseSelect struct {
	Root      string   `json:"root"`
	Depth     int      `json:"depth,omitempty"`
	Name      string   `json:"name,omitempty"`
	DataTypes []string `json:"dataTypes,omitempty"`
	MaxNodes  int      `json:"maxNodes,omitempty"`
}

func durPtr(d config.Duration) *Duration {
	if d == 0 {
		return nil
	}
	v := Duration(d)
	return &v
}

func cfgDur(d *Duration) config.Duration {
	if d == nil {
		return 0
	}
	return config.Duration(*d)
}

func durPtrP(d *config.Duration) *Duration {
	if d == nil {
		return nil
	}
	v := Duration(*d)
	return &v
}

func cfgDurP(d *Duration) *config.Duration {
	if d == nil {
		return nil
	}
	v := config.Duration(*d)
	return &v
}

func deadbandOf(d config.Deadband) *Deadband {
	if d.Type == "" && d.Value == 0 {
		return nil
	}
	return &Deadband{Type: d.Type, Value: d.Value}
}

func cfgDeadband(d *Deadband) config.Deadband {
	if d == nil {
		return config.Deadband{}
	}
	return config.Deadband{Type: d.Type, Value: d.Value}
}

func boolPtr(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}

// groupOf converts a configured writer group.
func groupOf(g *config.WriterGroup) WriterGroup {
	out := WriterGroup{
		Name: g.Name, Endpoint: g.Endpoint, PublishingInterval: durPtr(g.PublishingInterval),
		KeyFrameCount: g.KeyFrameCount, KeepAlive: durPtr(g.KeepAlive), MaxMessageSize: g.MaxMessageSize,
		MessageShape: g.MessageShape, FieldEncoding: g.FieldEncoding, FieldContent: slices.Clone(g.FieldContent), Encoding: g.Encoding, Format: g.Format,
		MaxUnacked: g.MaxUnacked, MaxNotificationsPerPublish: g.MaxNotificationsPerPublish, Writers: make([]DataSetWriter, len(g.Writers)),
	}
	n := g.Nodes
	if n.SamplingInterval != nil || n.QueueSize != 0 || n.DiscardOldest != nil || n.Deadband != (config.Deadband{}) || n.Trigger != "" || n.Heartbeat != 0 {
		out.Nodes = &NodeDefaults{SamplingInterval: durPtrP(n.SamplingInterval), QueueSize: n.QueueSize,
			DiscardOldest: boolPtr(n.DiscardOldest), Deadband: deadbandOf(n.Deadband), Trigger: n.Trigger, Heartbeat: durPtr(n.Heartbeat)}
	}
	for i := range g.Writers {
		out.Writers[i] = writerOf(&g.Writers[i])
	}
	return out
}

// config converts the resource into a configured writer group.
func (g *WriterGroup) config() config.WriterGroup {
	out := config.WriterGroup{
		Name: g.Name, Endpoint: g.Endpoint, PublishingInterval: cfgDur(g.PublishingInterval),
		KeyFrameCount: g.KeyFrameCount, KeepAlive: cfgDur(g.KeepAlive), MaxMessageSize: g.MaxMessageSize,
		MessageShape: g.MessageShape, FieldEncoding: g.FieldEncoding, FieldContent: slices.Clone(g.FieldContent), Encoding: g.Encoding, Format: g.Format,
		MaxUnacked: g.MaxUnacked, MaxNotificationsPerPublish: g.MaxNotificationsPerPublish, Writers: make([]config.DataSetWriter, len(g.Writers)),
	}
	if n := g.Nodes; n != nil {
		out.Nodes = config.NodeDefaults{SamplingInterval: cfgDurP(n.SamplingInterval), QueueSize: n.QueueSize,
			DiscardOldest: boolPtr(n.DiscardOldest), Deadband: cfgDeadband(n.Deadband), Trigger: n.Trigger, Heartbeat: cfgDur(n.Heartbeat)}
	}
	for i := range g.Writers {
		out.Writers[i] = g.Writers[i].config()
	}
	return out
}

func writerOf(w *config.DataSetWriter) DataSetWriter {
	out := DataSetWriter{ID: w.ID, Name: w.Name, Fields: make([]Field, len(w.Fields))}
	for i := range w.Fields {
		out.Fields[i] = fieldOf(&w.Fields[i])
	}
	for _, b := range w.Browse {
		out.Browse = append(out.Browse, BrowseSelect{Root: b.Root, Depth: b.Depth, Name: b.Name,
			DataTypes: append([]string(nil), b.DataTypes...), MaxNodes: b.MaxNodes})
	}
	return out
}

func (w *DataSetWriter) config() config.DataSetWriter {
	out := config.DataSetWriter{ID: w.ID, Name: w.Name, Fields: make([]config.Field, len(w.Fields))}
	for i := range w.Fields {
		out.Fields[i] = w.Fields[i].config()
	}
	for _, b := range w.Browse {
		out.Browse = append(out.Browse, config.BrowseSelect{Root: b.Root, Depth: b.Depth, Name: b.Name,
			DataTypes: append([]string(nil), b.DataTypes...), MaxNodes: b.MaxNodes})
	}
	return out
}

func fieldOf(f *config.Field) Field {
	out := Field{Name: f.Name, Node: f.Node, SamplingInterval: durPtrP(f.SamplingInterval), QueueSize: f.QueueSize,
		DiscardOldest: boolPtr(f.DiscardOldest), Deadband: deadbandOf(f.Deadband), Trigger: f.Trigger, Heartbeat: durPtr(f.Heartbeat)}
	if f.Events != nil {
		out.Events = &EventSelect{Select: append([]string(nil), f.Events.Select...), OfType: f.Events.OfType}
	}
	return out
}

func (f *Field) config() config.Field {
	out := config.Field{Name: f.Name, Node: f.Node, SamplingInterval: cfgDurP(f.SamplingInterval), QueueSize: f.QueueSize,
		DiscardOldest: boolPtr(f.DiscardOldest), Deadband: cfgDeadband(f.Deadband), Trigger: f.Trigger, Heartbeat: cfgDur(f.Heartbeat)}
	if f.Events != nil {
		out.Events = &config.EventSelect{Select: append([]string(nil), f.Events.Select...), OfType: f.Events.OfType}
	}
	return out
}
