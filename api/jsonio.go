package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	json "github.com/goccy/go-json"
)

// DefaultMaxBodyBytes bounds a request body unless Options.MaxBodyBytes says
// otherwise.
const DefaultMaxBodyBytes = 1 << 20

// readBody reads the request body whole, up to limit bytes (the caller's
// MaxBytesReader enforces it); a larger body is refused before it is parsed.
// The body must be declared JSON: a body without a Content-Type is what a
// page of another site can send without a CORS preflight.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		if ct == "" {
			return nil, problemf(ErrMediaType, "the request body needs \"Content-Type: application/json\"")
		}
		return nil, problemf(ErrMediaType, "Content-Type %q: want application/json", ct)
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, problemf(ErrTooLarge, "the request body exceeds %d bytes", mb.Limit)
		}
		return nil, problemf(ErrBadRequest, "reading the request body: %v", err)
	}
	return body, nil
}

// decodeJSON decodes the request body into v strictly: one JSON value, no
// member v does not know, nothing after it.
func decodeJSON(r *http.Request, limit int64, v any) error {
	body, err := readBody(r, limit)
	if err != nil {
		return err
	}
	return unmarshalStrict(body, v)
}

// jsonPath maps a Go field path ("Writers.Fields.Node", as the decoder
// reports it) to the JSON member names of t ("/writers/fields/node"; the
// decoder does not say which array element).
func jsonPath(t reflect.Type, goPath string) string {
	var out strings.Builder
	for _, seg := range strings.Split(goPath, ".") {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		name := seg
		if t.Kind() == reflect.Struct {
			if f, ok := t.FieldByName(seg); ok {
				if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n != "" && n != "-" {
					name = n
				}
				t = f.Type
			}
		}
		out.WriteString("/" + name)
	}
	return out.String()
}

func unmarshalStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return problemf(ErrMalformedJSON, "the request body is empty; a JSON object is expected")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			field := jsonPath(reflect.TypeOf(v), typ.Field)
			return fieldProblemf(ErrInvalid, field, "%s: wrong JSON type, want %s", field, typeWord(typ.Type.Kind().String()))
		}
		return jsonProblem(err)
	}
	// A second value (or garbage) after the first is a malformed body, not
	// something to ignore silently.
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return problemf(ErrMalformedJSON, "unexpected data after the JSON value")
	}
	return nil
}

// unmarshalLenient decodes body into v, ignoring members v does not know
// (for payloads of other products, which carry many settings we do not
// implement).
func unmarshalLenient(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return problemf(ErrMalformedJSON, "the request body is empty; a JSON value is expected")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return jsonProblem(err)
	}
	return nil
}

// jsonProblem maps a decoding error to a problem.
func jsonProblem(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn) && strings.Contains(syn.Error(), "'\x00'"):
		// The parser reads a NUL past the end of the input.
		return problemf(ErrMalformedJSON, "malformed JSON: unexpected end of input")
	case errors.As(err, &syn):
		return problemf(ErrMalformedJSON, "malformed JSON at byte %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		field := "/" + strings.ReplaceAll(typ.Field, ".", "/")
		if typ.Field == "" {
			field = ""
		}
		return fieldProblemf(ErrInvalid, field, "%s: wrong JSON type, want %s", pointerName(field), typeWord(typ.Type.Kind().String()))
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return fieldProblemf(ErrUnknownField, name, "unknown field %q", name)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(msg, "unexpected end of JSON input") {
		return problemf(ErrMalformedJSON, "malformed JSON: unexpected end of input")
	}
	var k *problemKind
	if errors.As(err, &k) { // from a type's own UnmarshalJSON
		return err
	}
	return problemf(ErrMalformedJSON, "malformed JSON: %s", strings.TrimPrefix(msg, "json: "))
}

func pointerName(field string) string {
	if field == "" {
		return "the body"
	}
	return field
}

// typeWord names a Go kind in JSON words.
func typeWord(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "struct", "map", "ptr":
		return "object"
	case "float32", "float64":
		return "number"
	default:
		return "integer"
	}
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding the response: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
	return nil
}
