package wssink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/uagate/gateway/bridge/sink"
)

// Limits on what a client may ask for, so that a selection's size does not
// grow with what a peer declares.
const (
	maxSelectNames = 256 // names per list (groups, writers, fields, kinds)
	maxSelectName  = 256 // bytes per name
)

// kindBits are the kinds a selection receives, one bit per sink.Kind.
type kindBits uint16

const (
	bitData     = kindBits(1) << sink.KindData
	bitMetaData = kindBits(1) << sink.KindMetaData
	bitStatus   = kindBits(1) << sink.KindStatus
	bitField    = kindBits(1) << sink.KindField

	// defaultKinds are received when a selection names no kind. Per-field
	// messages repeat what data messages carry, so they come only when asked
	// for (kind=field) or when fields are selected.
	defaultKinds = bitData | bitMetaData | bitStatus
)

// selection is what one client receives. It is immutable once built: a
// client swaps in a new one (atomic.Pointer) when it subscribes again.
type selection struct {
	kinds   kindBits
	groups  []string // empty: every group
	writers []string // empty: every writer
	fields  []string // empty: every field
}

// match reports whether m is selected. A list restricts only the topic level
// that m has: a status message has no group, a batched writer-group message
// (Addr.Writer == "") no writer, and only per-field messages have a field.
// It runs for every message and client: no allocation, no map.
func (s *selection) match(m *sink.Message) bool {
	if m.Kind >= 16 || s.kinds&(kindBits(1)<<m.Kind) == 0 {
		return false
	}
	if m.Kind == sink.KindStatus {
		return true
	}
	if len(s.groups) > 0 && !contains(s.groups, m.Addr.Group) {
		return false
	}
	if m.Addr.Writer != "" && len(s.writers) > 0 && !contains(s.writers, m.Addr.Writer) {
		return false
	}
	if m.Kind == sink.KindField && len(s.fields) > 0 && !contains(s.fields, m.Addr.Field) {
		return false
	}
	return true
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// selectParams are the query parameters of a selection.
var selectParams = [...]string{"group", "writer", "field", "kind"}

// selectionFromQuery builds the selection the URL asks for: group, writer,
// field and kind, each repeatable and each a comma-separated list. It returns
// nil, nil when the query has none of them: the client then chooses with its
// first message.
func selectionFromQuery(q url.Values) (*selection, error) {
	present := false
	for _, p := range selectParams {
		if _, ok := q[p]; ok {
			present = true
		}
	}
	if !present {
		return nil, nil
	}
	var groups, writers, fields, kinds []string
	var err error
	if groups, err = splitParam(q, "group"); err != nil {
		return nil, err
	}
	if writers, err = splitParam(q, "writer"); err != nil {
		return nil, err
	}
	if fields, err = splitParam(q, "field"); err != nil {
		return nil, err
	}
	if kinds, err = splitParam(q, "kind"); err != nil {
		return nil, err
	}
	return newSelection(groups, writers, fields, kinds)
}

func splitParam(q url.Values, name string) ([]string, error) {
	var out []string
	for _, v := range q[name] {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			out = append(out, s)
			if len(out) > maxSelectNames {
				return nil, fmt.Errorf("%s: more than %d names", name, maxSelectNames)
			}
		}
	}
	return out, nil
}

// subscribeMessage is the first (or any later) text message of a client:
// {"subscribe":{"groups":[…],"writers":[…],"fields":[…],"kinds":[…]}}.
type subscribeMessage struct {
	Subscribe *struct {
		Groups  []string `json:"groups"`
		Writers []string `json:"writers"`
		Fields  []string `json:"fields"`
		Kinds   []string `json:"kinds"`
	} `json:"subscribe"`
}

// errNotSubscribe is returned for a text message that is not a subscription.
var errNotSubscribe = errors.New(`want {"subscribe":{"groups":[…],"writers":[…],"fields":[…],"kinds":[…]}}`)

// selectionFromMessage parses a client's subscribe message. Its size is
// bounded by the connection's read limit, which bounds the lists too.
func selectionFromMessage(p []byte) (*selection, error) {
	var msg subscribeMessage
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&msg); err != nil {
		return nil, fmt.Errorf("%w: %w", errNotSubscribe, err)
	}
	if dec.More() || msg.Subscribe == nil {
		return nil, errNotSubscribe
	}
	s := msg.Subscribe
	for _, l := range []struct {
		name string
		list []string
	}{{"groups", s.Groups}, {"writers", s.Writers}, {"fields", s.Fields}, {"kinds", s.Kinds}} {
		if len(l.list) > maxSelectNames {
			return nil, fmt.Errorf("%s: more than %d names", l.name, maxSelectNames)
		}
	}
	return newSelection(s.Groups, s.Writers, s.Fields, s.Kinds)
}

func newSelection(groups, writers, fields, kinds []string) (*selection, error) {
	for _, l := range [][]string{groups, writers, fields, kinds} {
		for _, n := range l {
			if n == "" || len(n) > maxSelectName {
				return nil, fmt.Errorf("name %.40q: want 1 to %d bytes", n, maxSelectName)
			}
		}
	}
	s := &selection{groups: groups, writers: writers, fields: fields}
	for _, k := range kinds {
		switch k {
		case "data":
			s.kinds |= bitData
		case "metadata":
			s.kinds |= bitMetaData
		case "status":
			s.kinds |= bitStatus
		case "field":
			s.kinds |= bitField
		default:
			return nil, fmt.Errorf("kind %.40q: want data, metadata, status or field", k)
		}
	}
	if s.kinds == 0 {
		s.kinds = defaultKinds
		if len(fields) > 0 {
			s.kinds |= bitField
		}
	}
	return s, nil
}
