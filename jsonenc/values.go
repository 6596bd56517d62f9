package jsonenc

import (
	"encoding/base64"
	"strconv"

	"github.com/uagate/gateway/uastack/ua"
)

// WriteGuid writes g as a lowercase 8-4-4-4-12 string; the null Guid as null
// (an array element; fields use FieldGuid).
func (e *Encoder) WriteGuid(g ua.Guid) {
	if g.IsNull() {
		e.WriteNull()
		return
	}
	e.comma()
	e.b = append(e.b, '"')
	e.b = g.AppendText(e.b)
	e.b = append(e.b, '"')
	e.done()
}

// WriteByteString writes p as standard base64 in a string; nil as null, an
// empty slice as "".
func (e *Encoder) WriteByteString(p []byte) {
	if p == nil {
		e.WriteNull()
		return
	}
	e.comma()
	e.b = append(e.b, '"')
	// A ByteString longer than the flush threshold is encoded in pieces of a
	// multiple of 3 bytes (so that base64 needs no padding in between),
	// flushing between them.
	if len(p) > e.threshold {
		for len(p) > 3*pieceSize/2 {
			e.b = base64.StdEncoding.AppendEncode(e.b, p[:3*pieceSize/2])
			p = p[3*pieceSize/2:]
			if len(e.b) >= e.threshold && e.err == nil {
				e.flush()
			}
		}
	}
	e.b = base64.StdEncoding.AppendEncode(e.b, p)
	e.b = append(e.b, '"')
	e.done()
}

// WriteXmlElement writes the XML text as a JSON string.
func (e *Encoder) WriteXmlElement(x ua.XmlElement) { e.WriteString(string(x)) }

// namespaceURI returns the URI of namespace index ns, or "".
func (e *Encoder) namespaceURI(ns uint16) string {
	if ns == 0 {
		return UANamespace
	}
	if int(ns) < len(e.opts.NamespaceURIs) {
		return e.opts.NamespaceURIs[ns]
	}
	return ""
}

func (e *Encoder) serverURI(i uint32) string {
	if uint64(i) < uint64(len(e.opts.ServerURIs)) {
		return e.opts.ServerURIs[i]
	}
	return ""
}

// appendURI appends a namespace or server URI percent-encoding ';' and '%'
// (Part 6 §5.1.12) and escaping for JSON.
func appendURI(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ';':
			b = appendEscaped(b, s[start:i])
			b = append(b, "%3B"...)
			start = i + 1
		case '%':
			b = appendEscaped(b, s[start:i])
			b = append(b, "%25"...)
			start = i + 1
		}
	}
	return appendEscaped(b, s[start:])
}

// appendIdentifier appends the i=/s=/g=/b= part of n, JSON-escaped.
func appendIdentifier(b []byte, n *ua.NodeID) []byte {
	switch n.Type {
	case ua.IDString:
		b = append(b, "s="...)
		return appendEscaped(b, n.Text)
	case ua.IDGuid:
		b = append(b, "g="...)
		return n.Guid.AppendText(b)
	case ua.IDOpaque:
		b = append(b, "b="...)
		return appendBase64String(b, n.Text)
	default:
		b = append(b, "i="...)
		return strconv.AppendUint(b, uint64(n.Numeric), 10)
	}
}

// appendBase64String base64-encodes s without converting it to []byte.
func appendBase64String(b []byte, s string) []byte {
	const enc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	i := 0
	for ; i+3 <= len(s); i += 3 {
		v := uint(s[i])<<16 | uint(s[i+1])<<8 | uint(s[i+2])
		b = append(b, enc[v>>18&0x3F], enc[v>>12&0x3F], enc[v>>6&0x3F], enc[v&0x3F])
	}
	switch len(s) - i {
	case 1:
		v := uint(s[i]) << 16
		b = append(b, enc[v>>18&0x3F], enc[v>>12&0x3F], '=', '=')
	case 2:
		v := uint(s[i])<<16 | uint(s[i+1])<<8
		b = append(b, enc[v>>18&0x3F], enc[v>>12&0x3F], enc[v>>6&0x3F], '=')
	}
	return b
}

// appendNodeIDText appends the 1.05 string form of n (without quotes):
// "i=85", "nsu=<uri>;s=Foo", or "ns=<i>;s=Foo" when the URI is unknown.
func (e *Encoder) appendNodeIDText(b []byte, n *ua.NodeID) []byte {
	if n.Namespace != 0 {
		if u := e.namespaceURI(n.Namespace); u != "" {
			b = append(b, "nsu="...)
			b = appendURI(b, u)
			b = append(b, ';')
		} else {
			b = append(b, "ns="...)
			b = strconv.AppendUint(b, uint64(n.Namespace), 10)
			b = append(b, ';')
		}
	}
	return appendIdentifier(b, n)
}

// WriteNodeID writes a NodeId: in 1.05 modes the string form ("i=2255",
// "nsu=http://x/;s=Foo"); in the 1.04 modes the object form (Annex H.2). A
// null NodeId is written as null.
func (e *Encoder) WriteNodeID(n ua.NodeID) { e.writeNodeID(&n) }

func (e *Encoder) writeNodeID(n *ua.NodeID) {
	if n.IsNull() {
		e.WriteNull()
		return
	}
	if e.opts.Mode.is105() {
		e.comma()
		e.b = append(e.b, '"')
		e.b = e.appendNodeIDText(e.b, n)
		e.b = append(e.b, '"')
		e.done()
		return
	}
	e.StartObject()
	e.writeLegacyIDFields(n)
	if n.Namespace != 0 {
		e.fieldNameASCII("Namespace")
		e.writeLegacyNamespace(n.Namespace)
	}
	e.EndObject()
}

func (e *Encoder) writeLegacyIDFields(n *ua.NodeID) {
	if n.Type != ua.IDNumeric {
		e.fieldNameASCII("IdType")
		e.WriteUint(uint64(n.Type))
	}
	e.fieldNameASCII("Id")
	switch n.Type {
	case ua.IDString:
		e.WriteString(n.Text)
	case ua.IDGuid:
		e.comma()
		e.b = append(e.b, '"')
		e.b = n.Guid.AppendText(e.b)
		e.b = append(e.b, '"')
		e.done()
	case ua.IDOpaque:
		e.comma()
		e.b = append(e.b, '"')
		e.b = appendBase64String(e.b, n.Text)
		e.b = append(e.b, '"')
		e.done()
	default:
		e.WriteUint(uint64(n.Numeric))
	}
}

// writeLegacyNamespace writes a namespace index: a number (Reversible) or the
// URI when known (NonReversible, every index ≥ 1 per Annex H.2).
func (e *Encoder) writeLegacyNamespace(ns uint16) {
	if e.opts.Mode == NonReversible104 {
		if u := e.namespaceURI(ns); u != "" {
			e.WriteString(u)
			return
		}
	}
	e.WriteUint(uint64(ns))
}

// WriteExpandedNodeID writes an ExpandedNodeId: "[svu=<uri>;|svr=<i>;]<node-id>"
// in 1.05 modes, the Annex H.3 object in the 1.04 modes; null as null.
func (e *Encoder) WriteExpandedNodeID(x ua.ExpandedNodeID) { e.writeExpandedNodeID(&x) }

func (e *Encoder) writeExpandedNodeID(x *ua.ExpandedNodeID) {
	if x.IsNull() {
		e.WriteNull()
		return
	}
	if e.opts.Mode.is105() {
		e.comma()
		e.b = append(e.b, '"')
		if x.ServerIndex != 0 {
			if u := e.serverURI(x.ServerIndex); u != "" {
				e.b = append(e.b, "svu="...)
				e.b = appendURI(e.b, u)
			} else {
				e.b = append(e.b, "svr="...)
				e.b = strconv.AppendUint(e.b, uint64(x.ServerIndex), 10)
			}
			e.b = append(e.b, ';')
		}
		if x.NamespaceURI != "" {
			if x.NamespaceURI != UANamespace {
				e.b = append(e.b, "nsu="...)
				e.b = appendURI(e.b, x.NamespaceURI)
				e.b = append(e.b, ';')
			}
			e.b = appendIdentifier(e.b, &x.NodeID)
		} else {
			e.b = e.appendNodeIDText(e.b, &x.NodeID)
		}
		e.b = append(e.b, '"')
		e.done()
		return
	}
	e.StartObject()
	e.writeLegacyIDFields(&x.NodeID)
	if x.NamespaceURI != "" {
		e.fieldNameASCII("Namespace")
		e.WriteString(x.NamespaceURI)
	} else if x.Namespace != 0 {
		e.fieldNameASCII("Namespace")
		e.writeLegacyNamespace(x.Namespace)
	}
	if x.ServerIndex != 0 {
		e.fieldNameASCII("ServerUri")
		if u := e.serverURI(x.ServerIndex); u != "" && e.opts.Mode == NonReversible104 {
			e.WriteString(u)
		} else {
			e.WriteUint(uint64(x.ServerIndex))
		}
	}
	e.EndObject()
}

// WriteStatusCode writes a StatusCode as an array element or a value: in
// 1.05 modes {"Code":n} ({} for Good) plus "Symbol" in Verbose; a number in
// Reversible104; {"Code":n,"Symbol":s} in NonReversible104.
func (e *Encoder) WriteStatusCode(s ua.StatusCode) {
	switch e.opts.Mode {
	case Reversible104:
		e.WriteUint(uint64(s))
		return
	}
	e.StartObject()
	if s != 0 {
		e.fieldNameASCII("Code")
		e.WriteUint(uint64(s))
		if e.opts.Mode != Compact {
			if name := s.Name(); name != "" {
				e.fieldNameASCII("Symbol")
				e.WriteString(name)
			}
		}
	}
	e.EndObject()
}

// WriteQualifiedName writes a QualifiedName: "Name", "nsu=<uri>;Name" or the
// abnormal "<i>:Name" in 1.05 modes; {"Name":..,"Uri":..} in the 1.04 modes.
// The null QualifiedName is written as null.
func (e *Encoder) WriteQualifiedName(q ua.QualifiedName) {
	if q.IsNull() {
		e.WriteNull()
		return
	}
	if e.opts.Mode.is105() {
		e.comma()
		e.b = append(e.b, '"')
		if q.NamespaceIndex != 0 {
			if u := e.namespaceURI(q.NamespaceIndex); u != "" {
				e.b = append(e.b, "nsu="...)
				e.b = appendURI(e.b, u)
				e.b = append(e.b, ';')
			} else {
				e.b = strconv.AppendUint(e.b, uint64(q.NamespaceIndex), 10)
				e.b = append(e.b, ':')
			}
		}
		e.b = appendEscaped(e.b, q.Name)
		e.b = append(e.b, '"')
		e.done()
		return
	}
	e.StartObject()
	e.fieldNameASCII("Name")
	e.WriteString(q.Name)
	if q.NamespaceIndex != 0 {
		e.fieldNameASCII("Uri")
		e.writeLegacyNamespace(q.NamespaceIndex)
	}
	e.EndObject()
}

// WriteLocalizedText writes {"Locale":..,"Text":..} (each omitted when empty);
// in NonReversible104 just the text. The null LocalizedText is null (an empty
// string in NonReversible104).
func (e *Encoder) WriteLocalizedText(l ua.LocalizedText) {
	if e.opts.Mode == NonReversible104 {
		e.WriteString(l.Text)
		return
	}
	if l.IsNull() {
		e.WriteNull()
		return
	}
	e.StartObject()
	if l.Locale != "" {
		e.fieldNameASCII("Locale")
		e.WriteString(l.Locale)
	}
	if l.Text != "" {
		e.fieldNameASCII("Text")
		e.WriteString(l.Text)
	}
	e.EndObject()
}

// WriteDiagnosticInfo writes a DiagnosticInfo (Part 6 §5.4.2.13): the fields
// present in its Mask, the inner status when not Good, the inner diagnostic
// info when present; nil as null.
func (e *Encoder) WriteDiagnosticInfo(di *ua.DiagnosticInfo) {
	if di == nil {
		e.WriteNull()
		return
	}
	e.StartObject()
	if e.err != nil {
		return
	}
	if di.Mask&ua.DiagHasSymbolicID != 0 {
		e.fieldNameASCII("SymbolicId")
		e.WriteInt32(di.SymbolicID)
	}
	if di.Mask&ua.DiagHasNamespaceURI != 0 {
		e.fieldNameASCII("NamespaceUri")
		e.WriteInt32(di.NamespaceURI)
	}
	if di.Mask&ua.DiagHasLocale != 0 {
		e.fieldNameASCII("Locale")
		e.WriteInt32(di.Locale)
	}
	if di.Mask&ua.DiagHasLocalizedText != 0 {
		e.fieldNameASCII("LocalizedText")
		e.WriteInt32(di.LocalizedText)
	}
	if di.Mask&ua.DiagHasAdditionalInfo != 0 {
		e.fieldNameASCII("AdditionalInfo")
		e.WriteString(di.AdditionalInfo)
	}
	if di.Mask&ua.DiagHasInnerStatusCode != 0 && di.InnerStatusCode != 0 {
		e.fieldNameASCII("InnerStatusCode")
		e.WriteStatusCode(di.InnerStatusCode)
	}
	if di.InnerDiagnosticInfo != nil {
		e.fieldNameASCII("InnerDiagnosticInfo")
		e.WriteDiagnosticInfo(di.InnerDiagnosticInfo)
	}
	e.EndObject()
}

// WriteEnum writes an enumeration value: a number in Compact and
// Reversible104, "<Name>_<Value>" in Verbose and NonReversible104 ("<Value>"
// when name is empty).
func (e *Encoder) WriteEnum(v int32, name string) {
	if e.opts.Mode.omitDefaults() {
		e.WriteInt32(v)
		return
	}
	e.comma()
	e.b = append(e.b, '"')
	if name != "" {
		e.b = appendEscaped(e.b, name)
		e.b = append(e.b, '_')
	}
	e.b = strconv.AppendInt(e.b, int64(v), 10)
	e.b = append(e.b, '"')
	e.done()
}
