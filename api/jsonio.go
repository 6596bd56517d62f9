package api

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
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

func unmarshalStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return problemf(ErrMalformedJSON, "the request body is empty; a JSON object is expected")
	}
	// A first pass checks the syntax, refuses duplicate members (which
	// decoders resolve silently, the last one winning) and notes where
	// each value ends, to name the member of a type error.
	at, err := scanJSON(body)
	if err != nil {
		return err
	}
	dec := stdjson.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typ *stdjson.UnmarshalTypeError
		if errors.As(err, &typ) {
			field := at[typ.Offset]
			if field == "" {
				field = "/" + strings.ReplaceAll(typ.Field, ".", "/")
			}
			return fieldProblemf(ErrInvalid, field, "%s: wrong JSON type (%s), want %s", field, typ.Value, typeWord(typ.Type.Kind().String()))
		}
		return jsonProblem(err)
	}
	// A second value (or garbage) after the first is a malformed body, not
	// something to ignore silently.
	var extra stdjson.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return problemf(ErrMalformedJSON, "unexpected data after the JSON value")
	}
	return nil
}

// scanJSON walks the first JSON value of body: it refuses duplicate
// members of an object and returns, by the offset just after each value
// (after the opening bracket of an object or array), the value's JSON
// pointer (/writers/0/name).
func scanJSON(body []byte) (map[int64]string, error) {
	type level struct {
		ptr  string
		obj  bool
		keys map[string]bool
		key  string // the member whose value comes next (objects)
		n    int    // the next index (arrays)
	}
	at := map[int64]string{}
	dec := stdjson.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []*level
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) > 0 {
				return nil, problemf(ErrMalformedJSON, "malformed JSON: unexpected end of input")
			}
			return at, nil
		}
		if err != nil {
			return nil, jsonProblem(err)
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(stdjson.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return at, nil
			}
			continue
		}
		if top != nil && top.obj && top.key == "" {
			k, _ := tok.(string) // the decoder gives a member name here
			if top.keys[k] {
				ptr := top.ptr + "/" + escapePointer(k)
				return nil, fieldProblemf(ErrMalformedJSON, ptr, "member %q appears twice in %s", k, pointerName(top.ptr))
			}
			top.keys[k] = true
			top.key = k
			continue
		}
		// A value.
		ptr := ""
		switch {
		case top == nil:
		case top.obj:
			ptr = top.ptr + "/" + escapePointer(top.key)
			top.key = ""
		default:
			ptr = top.ptr + "/" + strconv.Itoa(top.n)
			top.n++
		}
		at[dec.InputOffset()] = ptr
		if d, ok := tok.(stdjson.Delim); ok {
			stack = append(stack, &level{ptr: ptr, obj: d == '{', keys: map[string]bool{}})
			continue
		}
		if top == nil {
			return at, nil // a scalar body
		}
	}
}

// escapePointer escapes a member name for a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
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
	var ssyn *stdjson.SyntaxError
	switch {
	case errors.As(err, &ssyn):
		return problemf(ErrMalformedJSON, "malformed JSON at byte %d: %s", ssyn.Offset, strings.TrimPrefix(ssyn.Error(), "json: "))
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
