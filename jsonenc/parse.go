package jsonenc

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The decoder parses into a small tree first: decoding is not on the hot path
// (round-trip tests, REST bodies, subscribers), and a tree makes the "UaType
// may come after Value" and duplicate-key rules of Part 6 easy to honour.

type kind uint8

const (
	kNull kind = iota
	kBool
	kNum
	kStr
	kObj
	kArr
)

var kindNames = [...]string{"null", "boolean", "number", "string", "object", "array"}

func (k kind) String() string { return kindNames[k] }

// node is a parsed JSON value. For objects keys[i] names vals[i]; for arrays
// vals holds the elements; s is the unescaped string or the number literal.
type node struct {
	kind kind
	b    bool
	s    string
	keys []string
	vals []node
}

// get returns the member called key, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != kObj {
		return nil
	}
	for i := range n.keys {
		if n.keys[i] == key {
			return &n.vals[i]
		}
	}
	return nil
}

// ErrSyntax wraps JSON syntax errors.
var ErrSyntax = errors.New("jsonenc: invalid JSON")

// parseLimits bound a document while it is parsed (see DecoderOptions).
type parseLimits struct {
	depth, array, str, values, input int
}

type parser struct {
	in     []byte
	pos    int
	depth  int
	values int // values parsed so far
	lim    parseLimits
	// Elements and member names of the open arrays and objects, stacked: a
	// finished array or object takes an exactly sized copy of its part. Growing
	// every node's slice by append instead would allocate five times the
	// largest array (append grows large slices by a quarter).
	vals []node
	keys []string
}

// push appends to a stack, doubling it when full.
func push[T any](s []T, x T) []T {
	if len(s) == cap(s) {
		g := make([]T, len(s), 2*cap(s)+16)
		copy(g, s)
		s = g
	}
	return append(s, x)
}

// parseJSON parses one JSON document (surrounding whitespace allowed). The
// limits are checked as the parser goes, before the node they would grow.
func parseJSON(in []byte, lim parseLimits) (node, error) {
	if len(in) > lim.input {
		return node{}, fmt.Errorf("%w: document of %d bytes, limit %d", ErrLimitExceeded, len(in), lim.input)
	}
	p := parser{in: in, lim: lim}
	n, err := p.value()
	if err != nil {
		return node{}, err
	}
	p.ws()
	if p.pos != len(p.in) {
		return node{}, p.errf("data after the JSON value")
	}
	return n, nil
}

func (p *parser) errf(format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", ErrSyntax, p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) ws() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) lit(s string) bool {
	if len(p.in)-p.pos >= len(s) && string(p.in[p.pos:p.pos+len(s)]) == s {
		p.pos += len(s)
		return true
	}
	return false
}

func (p *parser) limitf(format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", ErrLimitExceeded, p.pos, fmt.Sprintf(format, args...))
}

// value parses one value. Nodes are returned by value, not filled in through a
// pointer: the recursion would make the pointed-to element escape to the heap.
func (p *parser) value() (node, error) {
	var n node
	p.values++
	if p.values > p.lim.values {
		return n, p.limitf("more than %d values", p.lim.values)
	}
	p.ws()
	if p.pos >= len(p.in) {
		return n, p.errf("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str()
		n.kind, n.s = kStr, s
		return n, err
	case c == 't':
		if p.lit("true") {
			n.kind, n.b = kBool, true
			return n, nil
		}
	case c == 'f':
		if p.lit("false") {
			n.kind = kBool
			return n, nil
		}
	case c == 'n':
		if p.lit("null") {
			n.kind = kNull
			return n, nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return n, p.errf("unexpected character %q", p.in[p.pos])
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > p.lim.depth {
		return fmt.Errorf("%w: more than %d levels", ErrTooDeep, p.lim.depth)
	}
	return nil
}

func (p *parser) object() (node, error) {
	n := node{kind: kObj}
	if err := p.enter(); err != nil {
		return n, err
	}
	defer func() { p.depth-- }()
	p.pos++ // {
	vbase, kbase := len(p.vals), len(p.keys)
	defer func() { p.vals, p.keys = p.vals[:vbase], p.keys[:kbase] }()
	var seen map[string]struct{}
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return n, nil
	}
	for {
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return n, p.errf("want a member name")
		}
		k, err := p.str()
		if err != nil {
			return n, err
		}
		keys := p.keys[kbase:]
		// Duplicates: a scan for small objects, a set for large ones, so that
		// an object of a million members costs no 10^12 comparisons.
		if seen != nil {
			if _, dup := seen[k]; dup {
				return n, p.errf("duplicate member %q", k)
			}
			seen[k] = struct{}{}
		} else {
			for _, have := range keys {
				if have == k {
					return n, p.errf("duplicate member %q", k)
				}
			}
			if len(keys) == 32 {
				seen = make(map[string]struct{}, 64)
				for _, have := range keys {
					seen[have] = struct{}{}
				}
				seen[k] = struct{}{}
			}
		}
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return n, p.errf("want ':'")
		}
		p.pos++
		if len(keys) == p.lim.array {
			return n, p.limitf("object of more than %d members", p.lim.array)
		}
		v, err := p.value()
		if err != nil {
			return n, err
		}
		p.keys, p.vals = push(p.keys, k), push(p.vals, v)
		p.ws()
		if p.pos >= len(p.in) {
			return n, p.errf("unexpected end of input in object")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			n.keys = append([]string(nil), p.keys[kbase:]...)
			n.vals = append([]node(nil), p.vals[vbase:]...)
			return n, nil
		default:
			return n, p.errf("want ',' or '}'")
		}
	}
}

func (p *parser) array() (node, error) {
	n := node{kind: kArr, vals: []node{}}
	if err := p.enter(); err != nil {
		return n, err
	}
	defer func() { p.depth-- }()
	p.pos++ // [
	base := len(p.vals)
	defer func() { p.vals = p.vals[:base] }()
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return n, nil
	}
	for {
		if len(p.vals)-base == p.lim.array {
			return n, p.limitf("array of more than %d elements", p.lim.array)
		}
		v, err := p.value()
		if err != nil {
			return n, err
		}
		p.vals = push(p.vals, v)
		p.ws()
		if p.pos >= len(p.in) {
			return n, p.errf("unexpected end of input in array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			n.vals = append([]node(nil), p.vals[base:]...)
			return n, nil
		default:
			return n, p.errf("want ',' or ']'")
		}
	}
}

func (p *parser) number() (node, error) {
	var n node
	start := p.pos
	if p.in[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		s := p.pos
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
		}
		return p.pos - s
	}
	intStart := p.pos
	nd := digits()
	if nd == 0 || (nd > 1 && p.in[intStart] == '0') {
		return n, p.errf("invalid number")
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return n, p.errf("invalid number")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return n, p.errf("invalid number")
		}
	}
	n.kind, n.s = kNum, string(p.in[start:p.pos])
	return n, nil
}

// str parses a JSON string at p.pos (on the opening quote). Invalid UTF-8 and
// unpaired surrogates become U+FFFD.
func (p *parser) str() (string, error) {
	p.pos++ // "
	start := p.pos
	// Fast path: no escapes, valid UTF-8.
	for p.pos < len(p.in) {
		if p.pos-start > p.lim.str {
			return "", p.limitf("string of more than %d bytes", p.lim.str)
		}
		c := p.in[p.pos]
		if c == '"' {
			s := p.in[start:p.pos]
			p.pos++
			if utf8.Valid(s) {
				return string(s), nil
			}
			p.pos = start
			break
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.pos++
	}
	var b []byte
	b = append(b, p.in[start:p.pos]...)
	for {
		if p.pos >= len(p.in) {
			return "", p.errf("unterminated string")
		}
		// Both the input consumed and the result are bounded: escapes shrink
		// the text, but an invalid byte becomes a 3-byte U+FFFD.
		if p.pos-start > p.lim.str || len(b) > p.lim.str {
			return "", p.limitf("string of more than %d bytes", p.lim.str)
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(b), nil
		case c < 0x20:
			return "", p.errf("control character in string")
		case c == '\\':
			p.pos++
			if p.pos >= len(p.in) {
				return "", p.errf("unterminated escape")
			}
			e := p.in[p.pos]
			p.pos++
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return "", p.errf("invalid \\u escape")
				}
				if utf16.IsSurrogate(r) {
					r2 := utf8.RuneError
					save := p.pos
					if p.lit(`\u`) {
						if x, ok := p.hex4(); ok {
							r2 = x
						}
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
					} else {
						p.pos = save
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", p.errf("invalid escape \\%c", e)
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.in[p.pos:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, p.in[p.pos:p.pos+size]...)
			}
			p.pos += size
		}
	}
}

func (p *parser) hex4() (rune, bool) {
	if len(p.in)-p.pos < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.in[p.pos:p.pos+4]), 16, 16)
	if err != nil {
		return 0, false
	}
	p.pos += 4
	return rune(v), true
}
