package publishednodes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/uagate/gateway/bridge/config"
)

// Reading a file: the JSON is tokenised by encoding/json into a tree that
// keeps every key's and value's position, then walked into []Entry the way
// OPC Publisher's reader takes it: keys matched case-insensitively (and
// trimmed), numbers and booleans given as strings accepted, a warning for
// every key that is not mapped. The positions let every issue name its
// line and column.

// maxDepth bounds the nesting of a file; the model is four levels deep.
const maxDepth = 64

// maxIssues bounds the issues collected from one file.
const maxIssues = 200

// jnode is a JSON value with its position.
type jnode struct {
	kind    byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' boolean, '0' null
	text    string
	b       bool
	members []jmember
	elems   []*jnode
	at      config.Position
}

type jmember struct {
	key string
	at  config.Position // of the key
	val *jnode
}

func (n *jnode) kindName() string {
	switch n.kind {
	case 'o':
		return "an object"
	case 'a':
		return "an array"
	case 's':
		return "a string"
	case 'n':
		return "a number"
	case 'b':
		return "a boolean"
	}
	return "null"
}

// stripComments blanks // and /* */ comments outside strings (the files of
// OPC Publisher's documentation have them), keeping every other byte and
// every newline where it was so that positions stay right.
func stripComments(data []byte) []byte {
	out := bytes.Clone(data)
	inString, escaped := false, false
	for i := 0; i < len(out); i++ {
		c := out[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			out[i], out[i+1] = ' ', ' '
			for i += 2; i < len(out); i++ {
				if out[i] == '*' && i+1 < len(out) && out[i+1] == '/' {
					out[i], out[i+1] = ' ', ' '
					i++
					break
				}
				if out[i] != '\n' {
					out[i] = ' '
				}
			}
		}
	}
	return out
}

// blankTrailingCommas blanks a comma before a closing bracket or brace
// (outside strings; comments already blanked), which OPC Publisher's JSON
// reader accepts and encoding/json does not.
func blankTrailingCommas(data []byte) []byte {
	inString, escaped := false, false
	for i, c := range data {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == ',':
			j := i + 1
			for j < len(data) && strings.IndexByte(" \t\r\n", data[j]) >= 0 {
				j++
			}
			if j < len(data) && (data[j] == '}' || data[j] == ']') {
				data[i] = ' '
			}
		}
	}
	return data
}

// IsFile reports whether data is a published nodes file: a JSON array whose
// first element is an object with an EndpointUrl (comments allowed).
func IsFile(data []byte) bool {
	s := bytes.TrimSpace(stripComments(bytes.TrimPrefix(data, []byte(config.BOM))))
	if len(s) == 0 || s[0] != '[' {
		return false
	}
	s = bytes.TrimSpace(s[1:])
	if len(s) == 0 || s[0] != '{' {
		return false
	}
	// The key may come after others: a cheap look into the start is
	// enough to tell the formats apart; the parser does the rest.
	return bytes.Contains(bytes.ToLower(s[:min(len(s), 1<<16)]), []byte(`"endpointurl"`))
}

// tokenizer builds the tree of a JSON text.
type tokenizer struct {
	data  []byte
	dec   *json.Decoder
	lines []int // offsets of the line starts
}

func (t *tokenizer) position(off int) config.Position {
	line := sort.Search(len(t.lines), func(i int) bool { return t.lines[i] > off }) - 1
	return config.Position{Line: line + 1, Column: utf8.RuneCount(t.data[t.lines[line]:off]) + 1}
}

// next returns the next token and where it starts.
func (t *tokenizer) next() (json.Token, config.Position, error) {
	off := int(t.dec.InputOffset())
	for off < len(t.data) && strings.IndexByte(" \t\r\n,:", t.data[off]) >= 0 {
		off++
	}
	tok, err := t.dec.Token()
	return tok, t.position(off), err
}

// syntaxError names the position of a decoding error.
func (t *tokenizer) syntaxError(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &positioned{t.position(int(min(se.Offset, int64(len(t.data))))), "malformed JSON: " + strings.TrimPrefix(se.Error(), "json: ")}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &positioned{t.position(len(t.data)), "malformed JSON: unexpected end of the file"}
	}
	return &positioned{t.position(int(t.dec.InputOffset())), "malformed JSON: " + err.Error()}
}

type positioned struct {
	at  config.Position
	msg string
}

func (p *positioned) Error() string { return p.msg }

// value reads one value whose first token is tok.
func (t *tokenizer) value(tok json.Token, at config.Position, depth int) (*jnode, error) {
	if depth > maxDepth {
		return nil, &positioned{at, fmt.Sprintf("nested deeper than %d levels", maxDepth)}
	}
	n := &jnode{at: at}
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			n.kind = 'o'
			for {
				k, kat, err := t.next()
				if err != nil {
					return nil, t.syntaxError(err)
				}
				if k == json.Delim('}') {
					return n, nil
				}
				vt, vat, err := t.next()
				if err != nil {
					return nil, t.syntaxError(err)
				}
				val, err := t.value(vt, vat, depth+1)
				if err != nil {
					return nil, err
				}
				n.members = append(n.members, jmember{key: k.(string), at: kat, val: val})
			}
		}
		n.kind = 'a'
		for {
			et, eat, err := t.next()
			if err != nil {
				return nil, t.syntaxError(err)
			}
			if et == json.Delim(']') {
				return n, nil
			}
			e, err := t.value(et, eat, depth+1)
			if err != nil {
				return nil, err
			}
			n.elems = append(n.elems, e)
		}
	case string:
		n.kind, n.text = 's', v
	case json.Number:
		n.kind, n.text = 'n', string(v)
	case bool:
		n.kind, n.b, n.text = 'b', v, strconv.FormatBool(v)
	default:
		n.kind = '0'
	}
	return n, nil
}

// parseTree parses data (comments blanked) into one JSON value.
func parseTree(data []byte) (*jnode, error) {
	t := &tokenizer{data: data, lines: []int{0}}
	for i, c := range data {
		if c == '\n' {
			t.lines = append(t.lines, i+1)
		}
	}
	t.dec = json.NewDecoder(bytes.NewReader(data))
	t.dec.UseNumber()
	tok, at, err := t.next()
	if err != nil {
		return nil, t.syntaxError(err)
	}
	root, err := t.value(tok, at, 0)
	if err != nil {
		return nil, err
	}
	if _, at, err := t.next(); err != io.EOF {
		if err != nil {
			return nil, t.syntaxError(err)
		}
		return nil, &positioned{at, "malformed JSON: more after the array"}
	}
	return root, nil
}

// fileDecoder walks the tree into the model, collecting issues.
type fileDecoder struct {
	file  string
	errs  []config.Issue
	warns []config.Issue
	// values and keys map a member's path ("[2].OpcNodes[0].QueueSize") to
	// the position of its value and of its key; an object's path to its
	// first key.
	values map[string]config.Position
	keys   map[string]config.Position
}

func (d *fileDecoder) issue(list *[]config.Issue, at config.Position, path, format string, args ...any) {
	if len(*list) >= maxIssues {
		return
	}
	*list = append(*list, config.Issue{File: d.file, Line: at.Line, Column: at.Column, Path: path, Message: fmt.Sprintf(format, args...)})
	if len(*list) == maxIssues {
		*list = append(*list, config.Issue{File: d.file, Message: "too many issues; stopped"})
	}
}

// locate returns the position of path, or of the nearest enclosing path
// that has one.
func (d *fileDecoder) locate(path string, atKey bool) config.Position {
	for {
		if atKey {
			if p, ok := d.keys[path]; ok {
				return p
			}
		}
		if p, ok := d.values[path]; ok {
			return p
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			return config.Position{}
		}
		path = path[:i]
	}
}

// structFields maps the lower-cased JSON names of a struct type to field
// indexes.
var structFields = sync.OnceValue(func() map[reflect.Type]map[string]int {
	out := map[reflect.Type]map[string]int{}
	for _, t := range []reflect.Type{reflect.TypeFor[Entry](), reflect.TypeFor[OpcNode](), reflect.TypeFor[EventFilter](), reflect.TypeFor[SelectClause]()} {
		m := map[string]int{}
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			m[strings.ToLower(name)] = i
		}
		out[t] = m
	}
	return out
})

var ignoredOf = map[reflect.Type][]string{
	reflect.TypeFor[Entry]():        entryIgnored,
	reflect.TypeFor[OpcNode]():      nodeIgnored,
	reflect.TypeFor[SelectClause](): selectIgnored,
}

// decode stores n into v (addressable), reporting problems under path.
func (d *fileDecoder) decode(n *jnode, v reflect.Value, path string) {
	if path != "" {
		d.values[path] = n.at
	}
	if n.kind == '0' {
		return // null: the member is not given
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.decode(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		d.decodeObject(n, v, path)
	case reflect.Slice:
		if n.kind != 'a' {
			d.issue(&d.errs, n.at, path, "want a JSON array, got %s", n.kindName())
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.elems), len(n.elems))
		for i, e := range n.elems {
			d.decode(e, s.Index(i), path+"["+strconv.Itoa(i)+"]")
		}
		v.Set(s)
	case reflect.String:
		if n.kind == 'o' || n.kind == 'a' {
			d.issue(&d.errs, n.at, path, "want a string, got %s", n.kindName())
			return
		}
		v.SetString(n.text) // a number or boolean taken as its text
	case reflect.Bool:
		b, err := strconv.ParseBool(n.text) // "true" as a string, as some tools write
		if n.kind != 'b' && (n.kind != 's' || err != nil) {
			d.issue(&d.errs, n.at, path, "want true or false, got %s", n.kindName())
			return
		}
		v.SetBool(b)
	case reflect.Float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(n.text), 64)
		if (n.kind != 'n' && n.kind != 's') || err != nil {
			d.issue(&d.errs, n.at, path, "want a number, got %s", n.kindName())
			return
		}
		v.SetFloat(f)
	case reflect.Interface:
		v.Set(reflect.ValueOf(n.generic()))
	}
}

func (d *fileDecoder) decodeObject(n *jnode, v reflect.Value, path string) {
	if n.kind != 'o' {
		d.issue(&d.errs, n.at, path, "want a JSON object, got %s", n.kindName())
		return
	}
	if len(n.members) > 0 {
		d.values[path] = n.members[0].at // an object is where its first key is
	}
	fields := structFields()[v.Type()]
	seen := map[int]string{}
	for _, m := range n.members {
		name := strings.TrimSpace(m.key)
		i, known := fields[strings.ToLower(name)]
		if !known {
			if documented(ignoredOf[v.Type()], name) {
				d.issue(&d.warns, m.at, path+"."+name, "%s is not supported; ignored", name)
			} else {
				d.issue(&d.warns, m.at, path+"."+name, "unknown key %q; ignored", m.key)
			}
			continue
		}
		canonical, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if prev, dup := seen[i]; dup {
			d.issue(&d.warns, m.at, path+"."+canonical, "%s is given twice (also as %q): the last one is used", name, prev)
		}
		seen[i] = m.key
		d.keys[path+"."+canonical] = m.at
		d.decode(m.val, v.Field(i), path+"."+canonical)
	}
}

func documented(list []string, key string) bool {
	for _, k := range list {
		if strings.EqualFold(k, key) {
			return true
		}
	}
	return false
}

// generic converts n to what encoding/json would decode into an any.
func (n *jnode) generic() any {
	switch n.kind {
	case 'o':
		m := make(map[string]any, len(n.members))
		for _, x := range n.members {
			m[x.key] = x.val.generic()
		}
		return m
	case 'a':
		s := make([]any, len(n.elems))
		for i, e := range n.elems {
			s[i] = e.generic()
		}
		return s
	case 's':
		return n.text
	case 'n':
		f, _ := strconv.ParseFloat(n.text, 64)
		return f
	case 'b':
		return n.b
	}
	return nil
}

// parseFile reads a published nodes file into entries, with the positions
// of their members ("[i]…" paths).
func parseFile(data []byte, file string) ([]Entry, *fileDecoder) {
	d := &fileDecoder{file: file, values: map[string]config.Position{}, keys: map[string]config.Position{}}
	root, err := parseTree(blankTrailingCommas(stripComments(bytes.TrimPrefix(data, []byte(config.BOM)))))
	if err != nil {
		var p *positioned
		errors.As(err, &p)
		d.issue(&d.errs, p.at, "", "%s", p.msg)
		return nil, d
	}
	if root.kind != 'a' {
		d.issue(&d.errs, root.at, "", "want a JSON array of entries, got %s", root.kindName())
		return nil, d
	}
	entries := make([]Entry, len(root.elems))
	for i, e := range root.elems {
		d.decode(e, reflect.ValueOf(&entries[i]).Elem(), "["+strconv.Itoa(i)+"]")
	}
	return entries, d
}
