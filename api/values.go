package api

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"

	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/ua"
)

// LastValue is a field's last value: a Part 6 DataValue.
type LastValue struct {
	Group  string          `json:"group"`
	Writer string          `json:"writer"`
	Field  string          `json:"field"`
	Node   string          `json:"node"`
	Value  json.RawMessage `json:"value" doc:"OPC UA JSON DataValue (Part 6 §5.4.2.18): Value (a Variant with UaType), Status, SourceTimestamp, ServerTimestamp" schema:"object"`
}

var pEncoding = param{"encoding", "OPC UA JSON encoding of the values: compact (default) or verbose", "string"}

// encodingOf returns the jsonenc mode the request asks for.
func encodingOf(r *http.Request) (jsonenc.Mode, error) {
	switch e := r.URL.Query().Get("encoding"); e {
	case "", "compact":
		return jsonenc.Compact, nil
	case "verbose":
		return jsonenc.Verbose, nil
	default:
		return 0, fieldProblemf(ErrInvalid, "encoding", "encoding %q: want compact or verbose", e)
	}
}

// valueCursor is the cursor of the last values: the writer group (name and
// position in the configuration) and the slot its next page starts at
// (bridge.WriterGroup.LastValues). The numbers are int64 so that one too
// large for them fails to decode; those outside [0, MaxInt32] are refused.
type valueCursor struct {
	Group string `json:"k"`
	Slot  int64  `json:"i"`
	Index int64  `json:"g"`
}

// answerValues answers a page of the last values of the groups f.Group
// selects (every group when ""), in configuration order, each group's in
// its field order. Each group reads its own page, so a page costs its size,
// not the number of fields.
func (s *Server) answerValues(w http.ResponseWriter, r *http.Request, f valueFilter) error {
	mode, err := encodingOf(r)
	if err != nil {
		return err
	}
	limit, err := pageLimit(r)
	if err != nil {
		return err
	}
	groups := s.b.Config().WriterGroups
	start, from := 0, 0
	var cur valueCursor
	if found, err := decodeCursor(r, &cur, func() bool {
		return cur.Group != "" && cur.Slot >= 0 && cur.Slot <= math.MaxInt32 && cur.Index >= 0 && cur.Index <= math.MaxInt32
	}); err != nil {
		return err
	} else if found {
		// The group may have moved: continue where it is now; when it is
		// gone, with the group that took its place.
		start = min(int(cur.Index), len(groups))
		if start < len(groups) && groups[start].Name == cur.Group {
			from = int(cur.Slot)
		} else if i := slices.IndexFunc(groups, func(g config.WriterGroup) bool { return g.Name == cur.Group }); i >= 0 {
			start, from = i, int(cur.Slot)
		}
	}
	out := Page[LastValue]{Items: []LastValue{}}
	opts := jsonenc.Options{Mode: mode}
	bf := bridge.ValueFilter{Writer: f.Writer, Node: f.Node}
	for gi := start; gi < len(groups); gi++ {
		name := groups[gi].Name
		if f.Group != "" && name != f.Group {
			continue
		}
		// Once the page is full this only looks for the next value.
		vals, next, err := s.b.LastValues(name, bf, from, limit-len(out.Items))
		from = 0
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnavailable) {
			continue // not running here (starting, or another replica's)
		}
		if err != nil {
			return err
		}
		for i := range vals {
			lv, err := lastValue(name, &vals[i], opts)
			if err != nil {
				return err
			}
			out.Items = append(out.Items, lv)
		}
		if next >= 0 {
			out.NextCursor = encodeCursor(valueCursor{Group: name, Slot: int64(next), Index: int64(gi)})
			break
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// lastValue is v in the API's form: a field that has no value yet reads
// BadWaitingForInitialData, or its item's Bad status when it was refused.
func lastValue(group string, v *bridge.FieldValue, opts jsonenc.Options) (LastValue, error) {
	dv := &v.Value
	if !v.HasValue {
		dv = &ua.DataValue{Status: ua.StatusBadWaitingForInitialData}
		if v.Status.IsBad() {
			dv.Status = v.Status
		}
	}
	js, err := jsonenc.AppendDataValue(nil, dv, opts)
	if err != nil {
		return LastValue{}, fmt.Errorf("encoding the value of %s/%s/%s: %w", group, v.Writer, v.Field, err)
	}
	if len(js) == 0 {
		js = []byte("{}")
	}
	return LastValue{Group: group, Writer: v.Writer, Field: v.Field, Node: v.Node, Value: js}, nil
}

// valueFilter selects last values; empty members match everything. Node is
// a node id as configured for the field.
type valueFilter struct {
	Group  string
	Writer string
	Node   string
}

func (s *Server) getValues(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := valueFilter{Group: q.Get("group"), Writer: q.Get("writer"), Node: q.Get("node")}
	c := s.b.Config()
	if f.Group != "" && findGroup(c, f.Group) < 0 {
		return fieldProblemf(ErrNotFound, "group", "writer group %q does not exist", f.Group)
	}
	if f.Writer != "" && f.Group == "" {
		return fieldProblemf(ErrInvalid, "writer", "a writer is named within a group: give group too")
	}
	if f.Writer != "" {
		g := &c.WriterGroups[findGroup(c, f.Group)]
		if findWriter(g, f.Writer) < 0 {
			return errWriterNotFound(f.Group, f.Writer)
		}
	}
	if f.Node != "" {
		if err := checkNodeID("node", f.Node); err != nil {
			return err
		}
	}
	return s.answerValues(w, r, f)
}

func (s *Server) getGroupValues(w http.ResponseWriter, r *http.Request) error {
	g, err := lookupGroup(s.b.Config(), r)
	if err != nil {
		return err
	}
	return s.answerValues(w, r, valueFilter{Group: g.Name})
}

func (s *Server) getWriterValues(w http.ResponseWriter, r *http.Request) error {
	g, d, err := lookupWriter(s.b.Config(), r)
	if err != nil {
		return err
	}
	return s.answerValues(w, r, valueFilter{Group: g.Name, Writer: d.Name})
}

// getMetadata answers with a writer's DataSetMetaData in OPC UA JSON.
func (s *Server) getMetadata(w http.ResponseWriter, r *http.Request) error {
	g, d, err := lookupWriter(s.b.Config(), r)
	if err != nil {
		return err
	}
	md, err := s.b.Metadata(g.Name, d.Name)
	if err != nil {
		return err
	}
	mode, err := encodingOf(r)
	if err != nil {
		return err
	}
	js, err := jsonenc.Append(nil, jsonenc.Options{Mode: mode}, func(e *jsonenc.Encoder) { e.WriteDataSetMetaData(md) })
	if err != nil {
		return fmt.Errorf("encoding the metadata of %s/%s: %w", g.Name, d.Name, err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(js, '\n'))
	return nil
}
