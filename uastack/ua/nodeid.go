package ua

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// IDType is the kind of identifier a NodeID carries.
type IDType uint8

const (
	IDNumeric IDType = 0
	IDString  IDType = 1
	IDGuid    IDType = 2
	IDOpaque  IDType = 3
)

// NodeID identifies a node in a server's address space. It is a comparable value
// type: it can be used as a map key. The zero value is the null NodeId (ns=0;i=0).
type NodeID struct {
	Namespace uint16
	Type      IDType
	Numeric   uint32 // when Type == IDNumeric
	Text      string // the String identifier, or the Opaque bytes
	Guid      Guid   // when Type == IDGuid
}

// NewNumericNodeID returns ns=<ns>;i=<id>.
func NewNumericNodeID(ns uint16, id uint32) NodeID {
	return NodeID{Namespace: ns, Type: IDNumeric, Numeric: id}
}

// NewStringNodeID returns ns=<ns>;s=<id>.
func NewStringNodeID(ns uint16, id string) NodeID {
	return NodeID{Namespace: ns, Type: IDString, Text: id}
}

// NewGuidNodeID returns ns=<ns>;g=<id>.
func NewGuidNodeID(ns uint16, id Guid) NodeID {
	return NodeID{Namespace: ns, Type: IDGuid, Guid: id}
}

// NewOpaqueNodeID returns ns=<ns>;b=<base64 of id>.
func NewOpaqueNodeID(ns uint16, id []byte) NodeID {
	return NodeID{Namespace: ns, Type: IDOpaque, Text: string(id)}
}

// IsNull reports whether n is a null NodeId: namespace 0 and a null identifier
// (0, empty string, zero Guid or empty opaque).
func (n NodeID) IsNull() bool {
	if n.Namespace != 0 {
		return false
	}
	switch n.Type {
	case IDNumeric:
		return n.Numeric == 0
	case IDGuid:
		return n.Guid.IsNull()
	default:
		return n.Text == ""
	}
}

// Opaque returns the opaque identifier bytes (a copy).
func (n NodeID) Opaque() []byte { return []byte(n.Text) }

// AppendIdentifier appends the "i=…", "s=…", "g=…" or "b=…" part.
func (n NodeID) AppendIdentifier(b []byte) []byte {
	switch n.Type {
	case IDString:
		b = append(b, "s="...)
		return append(b, n.Text...)
	case IDGuid:
		b = append(b, "g="...)
		return n.Guid.AppendText(b)
	case IDOpaque:
		b = append(b, "b="...)
		return base64.StdEncoding.AppendEncode(b, []byte(n.Text))
	default:
		b = append(b, "i="...)
		return strconv.AppendUint(b, uint64(n.Numeric), 10)
	}
}

// AppendText appends the string form ("i=85", "ns=2;s=Foo").
func (n NodeID) AppendText(b []byte) []byte {
	if n.Namespace != 0 {
		b = append(b, "ns="...)
		b = strconv.AppendUint(b, uint64(n.Namespace), 10)
		b = append(b, ';')
	}
	return n.AppendIdentifier(b)
}

// String returns the string form ("i=85", "ns=2;s=Foo").
func (n NodeID) String() string { return string(n.AppendText(nil)) }

// ErrInvalidNodeID is returned by the parsers for malformed node ids.
var ErrInvalidNodeID = errors.New("ua: invalid node id")

// ParseNodeID parses the string form of a NodeId: "i=85", "ns=2;s=Foo",
// "ns=1;g=…", "ns=1;b=…". A bare number is taken as "i=<number>". Namespace URIs
// ("nsu=") need a namespace table: use ParseExpandedNodeID and ExpandedNodeID.Resolve.
func ParseNodeID(s string) (NodeID, error) {
	x, err := ParseExpandedNodeID(s)
	if err != nil {
		return NodeID{}, err
	}
	if x.NamespaceURI != "" || x.ServerIndex != 0 {
		return NodeID{}, fmt.Errorf("%w: %q names a namespace URI or server; resolve it with a namespace table", ErrInvalidNodeID, s)
	}
	return x.NodeID, nil
}

// MustParseNodeID is ParseNodeID for constants in code and tests; it panics on error.
func MustParseNodeID(s string) NodeID {
	n, err := ParseNodeID(s)
	if err != nil {
		panic(err)
	}
	return n
}

func parseIdentifier(s, all string) (NodeID, error) {
	if len(s) < 2 || s[1] != '=' {
		if v, err := strconv.ParseUint(s, 10, 32); err == nil {
			return NewNumericNodeID(0, uint32(v)), nil
		}
		return NodeID{}, fmt.Errorf("%w: %q: want i=, s=, g= or b= identifier", ErrInvalidNodeID, all)
	}
	v := s[2:]
	switch s[0] {
	case 'i':
		u, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return NodeID{}, fmt.Errorf("%w: %q: numeric identifier: %v", ErrInvalidNodeID, all, err)
		}
		return NodeID{Type: IDNumeric, Numeric: uint32(u)}, nil
	case 's':
		return NodeID{Type: IDString, Text: v}, nil
	case 'g':
		g, err := ParseGuid(v)
		if err != nil {
			return NodeID{}, fmt.Errorf("%w: %q: %v", ErrInvalidNodeID, all, err)
		}
		return NodeID{Type: IDGuid, Guid: g}, nil
	case 'b':
		p, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return NodeID{}, fmt.Errorf("%w: %q: opaque identifier: %v", ErrInvalidNodeID, all, err)
		}
		return NodeID{Type: IDOpaque, Text: string(p)}, nil
	}
	return NodeID{}, fmt.Errorf("%w: %q: unknown identifier type %q", ErrInvalidNodeID, all, s[0])
}

// ExpandedNodeID is a NodeID that may name its namespace by URI and its server by
// index. It is comparable.
type ExpandedNodeID struct {
	NodeID
	NamespaceURI string // overrides NodeID.Namespace when not empty
	ServerIndex  uint32
}

// NewExpandedNodeID wraps a local NodeID.
func NewExpandedNodeID(n NodeID) ExpandedNodeID { return ExpandedNodeID{NodeID: n} }

// IsNull reports whether x is null.
func (x ExpandedNodeID) IsNull() bool {
	return x.NamespaceURI == "" && x.ServerIndex == 0 && x.NodeID.IsNull()
}

// AppendText appends the string form: [svr=<n>;][nsu=<uri>;|ns=<n>;]<identifier>.
func (x ExpandedNodeID) AppendText(b []byte) []byte {
	if x.ServerIndex != 0 {
		b = append(b, "svr="...)
		b = strconv.AppendUint(b, uint64(x.ServerIndex), 10)
		b = append(b, ';')
	}
	if x.NamespaceURI != "" {
		b = append(b, "nsu="...)
		b = appendEscapedURI(b, x.NamespaceURI)
		b = append(b, ';')
		return x.NodeID.AppendIdentifier(b)
	}
	return x.NodeID.AppendText(b)
}

// String returns the string form.
func (x ExpandedNodeID) String() string { return string(x.AppendText(nil)) }

// appendEscapedURI percent-encodes the characters that would break the grammar.
func appendEscapedURI(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ';':
			b = append(b, "%3B"...)
		case '%':
			b = append(b, "%25"...)
		default:
			b = append(b, c)
		}
	}
	return b
}

func unescapeURI(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b.WriteByte(hi<<4 | lo)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ParseExpandedNodeID parses [svr=<n>;][nsu=<uri>;|ns=<n>;]<identifier>.
func ParseExpandedNodeID(s string) (ExpandedNodeID, error) {
	var x ExpandedNodeID
	rest := s
	if strings.HasPrefix(rest, "svr=") {
		i := strings.IndexByte(rest, ';')
		if i < 0 {
			return x, fmt.Errorf("%w: %q: svr= without ';'", ErrInvalidNodeID, s)
		}
		v, err := strconv.ParseUint(rest[4:i], 10, 32)
		if err != nil {
			return x, fmt.Errorf("%w: %q: server index: %v", ErrInvalidNodeID, s, err)
		}
		x.ServerIndex = uint32(v)
		rest = rest[i+1:]
	}
	var ns uint16
	switch {
	case strings.HasPrefix(rest, "ns="):
		i := strings.IndexByte(rest, ';')
		if i < 0 {
			return x, fmt.Errorf("%w: %q: ns= without ';'", ErrInvalidNodeID, s)
		}
		v, err := strconv.ParseUint(rest[3:i], 10, 16)
		if err != nil {
			return x, fmt.Errorf("%w: %q: namespace index: %v", ErrInvalidNodeID, s, err)
		}
		ns = uint16(v)
		rest = rest[i+1:]
	case strings.HasPrefix(rest, "nsu="):
		i := strings.IndexByte(rest, ';')
		if i < 0 {
			return x, fmt.Errorf("%w: %q: nsu= without ';'", ErrInvalidNodeID, s)
		}
		x.NamespaceURI = unescapeURI(rest[4:i])
		if x.NamespaceURI == "" {
			return x, fmt.Errorf("%w: %q: empty namespace URI", ErrInvalidNodeID, s)
		}
		rest = rest[i+1:]
	}
	n, err := parseIdentifier(rest, s)
	if err != nil {
		return x, err
	}
	n.Namespace = ns
	x.NodeID = n
	return x, nil
}

// Resolve returns the local NodeID, mapping NamespaceURI through the server's
// namespace array. It fails for a non-local node or an unknown URI.
func (x ExpandedNodeID) Resolve(namespaces []string) (NodeID, error) {
	if x.ServerIndex != 0 {
		return NodeID{}, fmt.Errorf("%w: %s is on another server", ErrInvalidNodeID, x)
	}
	if x.NamespaceURI == "" {
		return x.NodeID, nil
	}
	for i, u := range namespaces {
		if u == x.NamespaceURI {
			n := x.NodeID
			n.Namespace = uint16(i)
			return n, nil
		}
	}
	return NodeID{}, fmt.Errorf("%w: namespace %q is not in the server's namespace array", ErrInvalidNodeID, x.NamespaceURI)
}

// Binary encoding bytes of NodeId (Part 6 §5.2.2.9).
const (
	nodeIDTwoByte  = 0x00
	nodeIDFourByte = 0x01
	nodeIDNumeric  = 0x02
	nodeIDString   = 0x03
	nodeIDGuid     = 0x04
	nodeIDOpaque   = 0x05
	flagServerIdx  = 0x40
	flagNsURI      = 0x80
)

// WriteNodeID writes n in its most compact binary form.
func (e *Encoder) WriteNodeID(n NodeID) { e.writeNodeID(n, 0) }

func (e *Encoder) writeNodeID(n NodeID, flags byte) {
	switch n.Type {
	case IDNumeric:
		switch {
		case n.Namespace == 0 && n.Numeric <= 0xff:
			e.b = append(e.b, nodeIDTwoByte|flags, byte(n.Numeric))
		case n.Namespace <= 0xff && n.Numeric <= 0xffff:
			e.b = append(e.b, nodeIDFourByte|flags, byte(n.Namespace))
			e.WriteUInt16(uint16(n.Numeric))
		default:
			e.b = append(e.b, nodeIDNumeric|flags)
			e.WriteUInt16(n.Namespace)
			e.WriteUInt32(n.Numeric)
		}
	case IDString:
		e.b = append(e.b, nodeIDString|flags)
		e.WriteUInt16(n.Namespace)
		e.WriteStringNull(n.Text, false)
	case IDGuid:
		e.b = append(e.b, nodeIDGuid|flags)
		e.WriteUInt16(n.Namespace)
		e.WriteGuid(n.Guid)
	case IDOpaque:
		e.b = append(e.b, nodeIDOpaque|flags)
		e.WriteUInt16(n.Namespace)
		e.WriteStringNull(n.Text, false)
	default:
		e.Fail("NodeId", fmt.Errorf("identifier type %d: %w", n.Type, errUnknownType))
	}
}

// WriteExpandedNodeID writes x.
func (e *Encoder) WriteExpandedNodeID(x ExpandedNodeID) {
	var flags byte
	if x.NamespaceURI != "" {
		flags |= flagNsURI
	}
	if x.ServerIndex != 0 {
		flags |= flagServerIdx
	}
	n := x.NodeID
	if x.NamespaceURI != "" {
		n.Namespace = 0
	}
	e.writeNodeID(n, flags)
	if x.NamespaceURI != "" {
		e.WriteString(x.NamespaceURI)
	}
	if x.ServerIndex != 0 {
		e.WriteUInt32(x.ServerIndex)
	}
}

// ReadNodeID reads a NodeId.
func (d *Decoder) ReadNodeID() NodeID {
	n, flags := d.readNodeID()
	if flags != 0 {
		d.Fail("NodeId", fmt.Errorf("%w: expanded node id flags 0x%02x in a NodeId", ErrInvalidEncoding, flags))
		return NodeID{}
	}
	return n
}

func (d *Decoder) readNodeID() (NodeID, byte) {
	enc := d.ReadUInt8()
	if d.err != nil {
		return NodeID{}, 0
	}
	flags := enc & 0xc0
	switch enc & 0x3f {
	case nodeIDTwoByte:
		return NodeID{Numeric: uint32(d.ReadUInt8())}, flags
	case nodeIDFourByte:
		ns := d.ReadUInt8()
		return NodeID{Namespace: uint16(ns), Numeric: uint32(d.ReadUInt16())}, flags
	case nodeIDNumeric:
		ns := d.ReadUInt16()
		return NodeID{Namespace: ns, Numeric: d.ReadUInt32()}, flags
	case nodeIDString:
		ns := d.ReadUInt16()
		return NodeID{Namespace: ns, Type: IDString, Text: d.ReadString()}, flags
	case nodeIDGuid:
		ns := d.ReadUInt16()
		return NodeID{Namespace: ns, Type: IDGuid, Guid: d.ReadGuid()}, flags
	case nodeIDOpaque:
		ns := d.ReadUInt16()
		n, null := d.readLength("NodeId", d.limits.MaxByteStringLength)
		if null {
			return NodeID{Namespace: ns, Type: IDOpaque}, flags
		}
		p := d.next(n, "NodeId")
		if p == nil || !d.charge(n, "NodeId") {
			return NodeID{}, 0
		}
		return NodeID{Namespace: ns, Type: IDOpaque, Text: string(p)}, flags
	}
	d.Fail("NodeId", fmt.Errorf("%w: encoding byte 0x%02x", ErrInvalidEncoding, enc))
	return NodeID{}, 0
}

// ReadExpandedNodeID reads an ExpandedNodeId.
func (d *Decoder) ReadExpandedNodeID() ExpandedNodeID {
	n, flags := d.readNodeID()
	x := ExpandedNodeID{NodeID: n}
	if flags&flagNsURI != 0 {
		x.NamespaceURI = d.ReadString()
	}
	if flags&flagServerIdx != 0 {
		x.ServerIndex = d.ReadUInt32()
	}
	return x
}
