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

type parser struct {
	in       []byte
	pos      int
	depth    int
	maxDepth int
}

// parseJSON parses one JSON document (surrounding whitespace allowed).
func parseJSON(in []byte, maxDepth int) (node, error) {
	p := parser{in: in, maxDepth: maxDepth}
	var n node
	if err := p.value(&n); err != nil {
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

func (p *parser) value(n *node) error {
	p.ws()
	if p.pos >= len(p.in) {
		return p.errf("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(n)
	case c == '[':
		return p.array(n)
	case c == '"':
		s, err := p.str()
		n.kind, n.s = kStr, s
		return err
	case c == 't':
		if p.lit("true") {
			n.kind, n.b = kBool, true
			return nil
		}
	case c == 'f':
		if p.lit("false") {
			n.kind = kBool
			return nil
		}
	case c == 'n':
		if p.lit("null") {
			n.kind = kNull
			return nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(n)
	}
	return p.errf("unexpected character %q", p.in[p.pos])
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > p.maxDepth {
		return fmt.Errorf("%w: more than %d levels", ErrTooDeep, p.maxDepth)
	}
	return nil
}

func (p *parser) object(n *node) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer func() { p.depth-- }()
	p.pos++ // {
	n.kind = kObj
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return nil
	}
	for {
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return p.errf("want a member name")
		}
		k, err := p.str()
		if err != nil {
			return err
		}
		for _, have := range n.keys {
			if have == k {
				return p.errf("duplicate member %q", k)
			}
		}
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return p.errf("want ':'")
		}
		p.pos++
		n.keys = append(n.keys, k)
		n.vals = append(n.vals, node{})
		if err := p.value(&n.vals[len(n.vals)-1]); err != nil {
			return err
		}
		p.ws()
		if p.pos >= len(p.in) {
			return p.errf("unexpected end of input in object")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return nil
		default:
			return p.errf("want ',' or '}'")
		}
	}
}

func (p *parser) array(n *node) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer func() { p.depth-- }()
	p.pos++ // [
	n.kind = kArr
	n.vals = []node{}
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return nil
	}
	for {
		n.vals = append(n.vals, node{})
		if err := p.value(&n.vals[len(n.vals)-1]); err != nil {
			return err
		}
		p.ws()
		if p.pos >= len(p.in) {
			return p.errf("unexpected end of input in array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return nil
		default:
			return p.errf("want ',' or ']'")
		}
	}
}

func (p *parser) number(n *node) error {
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
		return p.errf("invalid number")
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return p.errf("invalid number")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return p.errf("invalid number")
		}
	}
	n.kind, n.s = kNum, string(p.in[start:p.pos])
	return nil
}

// str parses a JSON string at p.pos (on the opening quote). Invalid UTF-8 and
// unpaired surrogates become U+FFFD.
func (p *parser) str() (string, error) {
	p.pos++ // "
	start := p.pos
	// Fast path: no escapes, valid UTF-8.
	for p.pos < len(p.in) {
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
