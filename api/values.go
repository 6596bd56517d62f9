package api

import (
	"fmt"
	"net/http"

	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/jsonenc"
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

func (s *Server) answerValues(w http.ResponseWriter, r *http.Request, f ValueFilter) error {
	mode, err := encodingOf(r)
	if err != nil {
		return err
	}
	vals := s.b.LastValues(f)
	p, err := paginate(r, vals, func(v *FieldValue) string { return v.Group + "\x00" + v.Writer + "\x00" + v.Field })
	if err != nil {
		return err
	}
	out := Page[LastValue]{Items: make([]LastValue, len(p.Items)), NextCursor: p.NextCursor}
	opts := jsonenc.Options{Mode: mode}
	for i := range p.Items {
		v := &p.Items[i]
		js, err := jsonenc.AppendDataValue(nil, &v.Value, opts)
		if err != nil {
			return fmt.Errorf("encoding the value of %s/%s/%s: %w", v.Group, v.Writer, v.Field, err)
		}
		if len(js) == 0 {
			js = []byte("{}")
		}
		out.Items[i] = LastValue{Group: v.Group, Writer: v.Writer, Field: v.Field, Node: v.Node, Value: js}
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) getValues(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := ValueFilter{Group: q.Get("group"), Writer: q.Get("writer"), Node: q.Get("node")}
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
	return s.answerValues(w, r, ValueFilter{Group: g.Name})
}

func (s *Server) getWriterValues(w http.ResponseWriter, r *http.Request) error {
	g, d, err := lookupWriter(s.b.Config(), r)
	if err != nil {
		return err
	}
	return s.answerValues(w, r, ValueFilter{Group: g.Name, Writer: d.Name})
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
