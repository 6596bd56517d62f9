package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// The YAML decoder. goccy/go-yaml parses the text into an AST; this file walks
// the AST into the model itself rather than through yaml.Unmarshal, for three
// reasons: every error is collected (the library stops at the first), each
// unknown key is reported with its position and path, and every setting's
// position is remembered so that validation, which runs on the decoded
// structs, can name the line of the field it complains about.

// minNodeBudget is the least number of nodes one decode may visit; the budget
// grows with the file (nodeBudget), so that a few lines of nested aliases
// ("billion laughs") cannot expand into unbounded work while a large
// configuration written out in full always fits.
const minNodeBudget = 1 << 18

// nodeBudget is the budget for a file of n bytes: a node takes at least two
// bytes, so 4n leaves room for aliases used a few times over.
func nodeBudget(n int) int { return max(minNodeBudget, 4*n) }

// maxIssues bounds the issues collected from one file.
const maxIssues = 200

// origin is where a setting came from.
type origin struct {
	file         string
	line, column int
}

// positions maps a field path ("writerGroups[0].writers[1]") to where it was
// set.
type positions map[string]origin

// locate fills in the position of is from the nearest enclosing path that was
// set in the file (a defaulted field is reported at its parent).
func (p positions) locate(is *Issue) {
	if is.File != "" {
		return
	}
	for path := is.Path; ; {
		if o, ok := p[path]; ok {
			is.File, is.Line, is.Column = o.file, o.line, o.column
			return
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			if o, ok := p[""]; ok {
				is.File = o.file
			}
			return
		}
		path = path[:i]
	}
}

type decoder struct {
	file     string
	pos      positions
	errs     []Issue
	warns    []Issue
	anchors  map[string]ast.Node
	visited  int
	budget   int // of visited
	tooLarge bool
}

func newDecoder(file string) *decoder {
	return &decoder{file: file, pos: positions{"": {file: file}}, anchors: map[string]ast.Node{}, budget: minNodeBudget}
}

func (d *decoder) at(n positioned) origin {
	// A mapping is where its first key is (its own token is a ':').
	switch m := n.(type) {
	case *ast.MappingNode:
		if len(m.Values) > 0 && m.Values[0].Key != nil {
			return d.at(m.Values[0].Key)
		}
	case *ast.MappingValueNode:
		if m.Key != nil {
			return d.at(m.Key)
		}
	case *ast.DocumentNode:
		// Its GetToken is its body's, and a document may have none ("---"
		// at the end of a file): its header's position then.
		if m != nil && m.Body == nil {
			if m.Start != nil && m.Start.Position != nil {
				return origin{d.file, m.Start.Position.Line, m.Start.Position.Column}
			}
			return origin{file: d.file}
		}
	}
	if rv := reflect.ValueOf(n); n != nil && (rv.Kind() != reflect.Pointer || !rv.IsNil()) {
		if tk := n.GetToken(); tk != nil && tk.Position != nil {
			return origin{d.file, tk.Position.Line, tk.Position.Column}
		}
	}
	return origin{file: d.file}
}

func (d *decoder) errorf(n positioned, path, format string, args ...any) {
	if len(d.errs) >= maxIssues {
		return
	}
	o := d.at(n)
	d.errs = append(d.errs, Issue{File: o.file, Line: o.line, Column: o.column, Path: path, Message: fmt.Sprintf(format, args...)})
	if len(d.errs) == maxIssues {
		d.errs = append(d.errs, Issue{File: d.file, Message: "too many errors; stopped"})
	}
}

func (d *decoder) warnf(n positioned, path, format string, args ...any) {
	if len(d.warns) >= maxIssues {
		return
	}
	o := d.at(n)
	d.warns = append(d.warns, Issue{File: o.file, Line: o.line, Column: o.column, Path: path, Message: fmt.Sprintf(format, args...)})
}

// parseYAML parses data into one document body (nil for an empty file), or
// reports the syntax error.
func (d *decoder) parseYAML(data []byte) (ast.Node, bool) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		var ye yaml.Error
		if errors.As(err, &ye) {
			d.errorf(tokenNode{ye.GetToken()}, "", "%s", ye.GetMessage())
		} else {
			d.errorf(nil, "", "%v", err)
		}
		return nil, false
	}
	switch len(f.Docs) {
	case 0:
		return nil, true
	case 1:
	default:
		d.errorf(f.Docs[1], "", "more than one YAML document; want one")
		return nil, false
	}
	body := f.Docs[0].Body
	if body != nil {
		ast.Walk(anchorCollector(d.anchors), body)
	}
	return body, true
}

// tokenNode lets a bare token be positioned like a node.
type tokenNode struct{ tk *token.Token }

func (t tokenNode) GetToken() *token.Token { return t.tk }

// positioned is the part of ast.Node the issue helpers need.
type positioned interface{ GetToken() *token.Token }

type anchorCollector map[string]ast.Node

func (a anchorCollector) Visit(n ast.Node) ast.Visitor {
	if an, ok := n.(*ast.AnchorNode); ok && an.Name != nil {
		a[an.Name.GetToken().Value] = an.Value
	}
	return a
}

// resolve strips anchors, tags and aliases down to the value node.
func (d *decoder) resolve(n ast.Node) ast.Node {
	for range 64 {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		case *ast.AliasNode:
			name := ""
			if v.Value != nil {
				name = v.Value.GetToken().Value
			}
			target, ok := d.anchors[name]
			if !ok {
				return v // reported by the caller as an unknown alias
			}
			n = target
		default:
			return n
		}
	}
	return n
}

func kindName(n ast.Node) string {
	switch n.(type) {
	case nil, *ast.NullNode:
		return "null"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a sequence"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	case *ast.AliasNode:
		return "an unknown alias"
	}
	return n.Type().String()
}

// nodeDecoder is implemented by the model types that have a YAML form of
// their own (Duration, Secret).
type nodeDecoder interface {
	decodeNode(d *decoder, n ast.Node, path string)
}

var nodeDecoderType = reflect.TypeFor[nodeDecoder]()

// count counts a visited node against the budget; false once it is spent
// (reported once).
func (d *decoder) count(n positioned, path string) bool {
	if d.visited++; d.visited <= d.budget {
		return true
	}
	if !d.tooLarge {
		d.tooLarge = true
		d.errorf(n, path, "more than %d YAML nodes (aliases expanding?); stopped", d.budget)
	}
	return false
}

// decode stores node n into v (addressable), reporting problems under path.
func (d *decoder) decode(n ast.Node, v reflect.Value, path string) {
	if !d.count(n, path) {
		return
	}
	n = d.resolve(n)
	if _, ok := n.(*ast.AliasNode); ok {
		d.errorf(n, path, "alias names no anchor")
		return
	}
	if path != "" {
		if _, seen := d.pos[path]; !seen {
			d.pos[path] = d.at(n)
		}
	}
	if _, null := n.(*ast.NullNode); null || n == nil {
		return // leave the zero value: the default applies
	}
	if v.Addr().Type().Implements(nodeDecoderType) {
		v.Addr().Interface().(nodeDecoder).decodeNode(d, n, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.decode(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			d.errorf(n, path, "want a sequence, got %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
		for i, e := range seq.Values {
			d.decode(e, s.Index(i), path+"["+strconv.Itoa(i)+"]")
		}
		v.Set(s)
	case reflect.String:
		s, ok := scalarText(n)
		if !ok {
			d.errorf(n, path, "want a string, got %s", kindName(n))
			return
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := n.(*ast.BoolNode)
		if !ok {
			d.errorf(n, path, "want true or false, got %s", kindName(n))
			return
		}
		v.SetBool(b.Value)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, ok := n.(*ast.IntegerNode)
		if !ok {
			d.errorf(n, path, "want an integer, got %s", kindName(n))
			return
		}
		var x int64
		switch iv := i.Value.(type) {
		case int64:
			x = iv
		case uint64:
			if iv > math.MaxInt64 {
				d.errorf(n, path, "%d is out of range", iv)
				return
			}
			x = int64(iv)
		}
		if v.OverflowInt(x) {
			d.errorf(n, path, "%d is out of range", x)
			return
		}
		v.SetInt(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		i, ok := n.(*ast.IntegerNode)
		if !ok {
			d.errorf(n, path, "want an integer, got %s", kindName(n))
			return
		}
		var x uint64
		switch iv := i.Value.(type) {
		case int64:
			if iv < 0 {
				d.errorf(n, path, "%d is negative; want 0 or more", iv)
				return
			}
			x = uint64(iv)
		case uint64:
			x = iv
		}
		if v.OverflowUint(x) {
			d.errorf(n, path, "%d is out of range (at most %d)", x, uint64(1)<<v.Type().Bits()-1)
			return
		}
		v.SetUint(x)
	case reflect.Float32, reflect.Float64:
		f, ok := number(n)
		if !ok {
			d.errorf(n, path, "want a number, got %s", kindName(n))
			return
		}
		v.SetFloat(f)
	default:
		d.errorf(n, path, "cannot decode into %s", v.Type()) // a model type this decoder does not know
	}
}

// scalarText is the text of a string node, or of a number or boolean taken as
// a string (user: 1234).
func scalarText(n ast.Node) (string, bool) {
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		return v.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
		return n.GetToken().Value, true
	}
	return "", false
}

func number(n ast.Node) (float64, bool) {
	switch v := n.(type) {
	case *ast.IntegerNode:
		switch iv := v.Value.(type) {
		case int64:
			return float64(iv), true
		case uint64:
			return float64(iv), true
		}
	case *ast.FloatNode:
		return v.Value, true
	}
	return 0, false
}

// fieldIndex maps the YAML keys of a struct type to field indexes.
func fieldIndex(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		m[name] = i
	}
	return m
}

// mappingEntries returns the entries of a mapping with merge keys (<<)
// expanded: merged entries first, so that the mapping's own keys override them.
func (d *decoder) mappingEntries(n ast.Node, path string, depth int) ([]*ast.MappingValueNode, bool) {
	var values []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	default:
		return nil, false
	}
	if depth > 16 {
		d.errorf(n, path, "merge keys nested too deep")
		return nil, true
	}
	var merged, own []*ast.MappingValueNode
	for _, mv := range values {
		// Merges of merges multiply: count every entry against the budget.
		if !d.count(n, path) {
			return nil, true
		}
		if _, ok := mv.Key.(*ast.MergeKeyNode); !ok {
			own = append(own, mv)
			continue
		}
		srcs := []ast.Node{mv.Value}
		if seq, ok := d.resolve(mv.Value).(*ast.SequenceNode); ok {
			srcs = seq.Values
		}
		for _, src := range srcs {
			entries, ok := d.mappingEntries(d.resolve(src), path, depth+1)
			if !ok {
				d.errorf(src, path, "<< wants a mapping or a sequence of mappings, got %s", kindName(d.resolve(src)))
				continue
			}
			merged = append(merged, entries...)
		}
	}
	return append(merged, own...), true
}

func (d *decoder) decodeStruct(n ast.Node, v reflect.Value, path string) {
	entries, ok := d.mappingEntries(n, path, 0)
	if !ok {
		d.errorf(n, path, "want a mapping, got %s", kindName(n))
		return
	}
	fields := fieldIndex(v.Type())
	seen := map[string]bool{}
	// Merged entries come first; a key set by the mapping itself overrides
	// them without being a duplicate.
	for _, mv := range entries {
		key, ok := scalarText(d.resolve(mv.Key))
		if !ok {
			d.errorf(mv.Key, path, "a key must be a string, got %s", kindName(mv.Key))
			continue
		}
		sub := key
		if path != "" {
			sub = path + "." + key
		}
		idx, known := fields[key]
		if !known && strings.HasPrefix(key, "x-") {
			continue // an extension key: a place for anchors (x-defaults: &defaults …)
		}
		if !known {
			msg := fmt.Sprintf("unknown key %q", key)
			for k := range fields {
				if strings.EqualFold(k, key) {
					msg += fmt.Sprintf(" (did you mean %q?)", k)
					break
				}
			}
			d.errorf(mv.Key, sub, "%s", msg)
			continue
		}
		mine := isMergedFrom(n, mv)
		if seen[key] && mine {
			d.errorf(mv.Key, sub, "duplicate key %q", key)
			continue
		}
		if mine {
			seen[key] = true
		}
		delete(d.pos, sub) // the mapping's own key wins over a merged one
		d.pos[sub] = d.at(mv.Key)
		d.decode(mv.Value, v.Field(idx), sub)
	}
}

// isMergedFrom reports whether mv is one of the mapping n's own entries (not
// merged in with <<).
func isMergedFrom(n ast.Node, mv *ast.MappingValueNode) bool {
	switch m := n.(type) {
	case *ast.MappingNode:
		for _, x := range m.Values {
			if x == mv {
				return true
			}
		}
	case *ast.MappingValueNode:
		return m == mv
	}
	return false
}

// decodeNode reads a duration: a string ("1s", "250ms", "00:00:01") or a
// number of milliseconds.
func (x *Duration) decodeNode(d *decoder, n ast.Node, path string) {
	if f, ok := number(n); ok {
		v, err := millis(f)
		if err != nil {
			d.errorf(n, path, "%v", err)
			return
		}
		*x = v
		return
	}
	s, ok := n.(*ast.StringNode)
	if !ok {
		d.errorf(n, path, "want a duration (\"1s\", \"250ms\") or a number of milliseconds, got %s", kindName(n))
		return
	}
	v, err := ParseDuration(s.Value)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return
	}
	*x = v
}

// decodeNode reads a secret: a plain string (inline, warned about) or a
// mapping with exactly one of value, file, env. No message shows the value.
func (x *Secret) decodeNode(d *decoder, n ast.Node, path string) {
	if s, ok := scalarText(n); ok {
		x.Value = s
		d.warnf(n, path, "inline secret; prefer {file: …} or {env: …} so that it stays out of the configuration file")
		return
	}
	entries, ok := d.mappingEntries(n, path, 0)
	if !ok {
		d.errorf(n, path, "want a string or a mapping with one of value, file, env; got %s", kindName(n))
		return
	}
	set := 0
	for _, mv := range entries {
		key, _ := scalarText(d.resolve(mv.Key))
		sub := path + "." + key
		var dst *string
		switch key {
		case "value":
			dst = &x.Value
		case "file":
			dst = &x.File
		case "env":
			dst = &x.Env
		default:
			d.errorf(mv.Key, sub, "unknown key %q (want one of value, file, env)", key)
			continue
		}
		val := d.resolve(mv.Value)
		s, ok := scalarText(val)
		if !ok {
			d.errorf(mv.Value, sub, "want a string, got %s", kindName(val))
			continue
		}
		d.pos[sub] = d.at(mv.Key)
		*dst = s
		set++
	}
	if set > 1 {
		d.errorf(n, path, "give one of value, file, env, not %d", set)
	}
	if x.Value != "" {
		d.warnf(n, path+".value", "inline secret; prefer {file: …} or {env: …} so that it stays out of the configuration file")
	}
}
