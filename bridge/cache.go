package bridge

import (
	"strings"

	"github.com/uagate/gateway/uastack/ua"
)

// The last-value cache lives in the fields themselves, compactly: a
// million of them must fit beside the client's item table. A field keeps
// the value's status and timestamps and, for an inline scalar (numbers,
// Boolean, DateTime, StatusCode, null) without picoseconds, its built-in
// type and its 8-byte payload (Variant.RawBits). Anything else — strings,
// byte strings, arrays, ExtensionObjects, picoseconds … — goes into the
// group's side table g.ext, indexed by the field's payload (fieldExt): only
// fields with such values pay for a whole Variant.
//
// Notifications are borrowed from the client's pools, so a side-table value
// is copied in: a String or XmlElement is cloned (unless it is the same text
// as the cached one); anything else (arrays, ByteStrings, NodeIds,
// LocalizedTexts, ExtensionObjects …) is deep-copied by a round trip
// through the binary codec, which allocates fresh storage for every part. A
// cached Variant is never modified in place: it is replaced, so readers
// that copied it out under the group's value lock keep a consistent,
// immutable value.

// extValue is a side-table entry: what of a cached DataValue does not fit
// in its field.
type extValue struct {
	v                ua.Variant
	srcPico, srvPico uint16
}

// inlineTypes is the set of inlineType as a bit mask by TypeID.
const inlineTypes = 1<<ua.TypeNull | 1<<ua.TypeBoolean | 1<<ua.TypeSByte | 1<<ua.TypeByte |
	1<<ua.TypeInt16 | 1<<ua.TypeUInt16 | 1<<ua.TypeInt32 | 1<<ua.TypeUInt32 | 1<<ua.TypeInt64 |
	1<<ua.TypeUInt64 | 1<<ua.TypeFloat | 1<<ua.TypeDouble | 1<<ua.TypeDateTime | 1<<ua.TypeStatusCode

// inlineType reports whether a scalar of type t lives entirely inside the
// Variant's payload (no string or pointer), so that its built-in type and
// RawBits are the whole value.
func inlineType(t ua.TypeID) bool {
	return t < 32 && inlineTypes&(1<<t) != 0
}

// storeValue copies src into f's cache (g.vmu held for writing); f has a
// value from then on.
func (g *WriterGroup) storeValue(f *field, src *ua.DataValue) {
	v := &src.Value
	f.status, f.src, f.srv = src.Status, src.SourceTimestamp, src.ServerTimestamp
	f.flags |= fieldHasValue
	if !v.IsArray() && inlineType(v.Type()) && src.SourcePicoseconds|src.ServerPicoseconds == 0 {
		if f.flags&fieldExt != 0 {
			g.freeExt(f)
		}
		f.typ, f.val = byte(v.Type()), v.RawBits()
		return
	}
	if f.flags&fieldExt == 0 {
		f.val = uint64(g.allocExt())
		f.flags |= fieldExt
	}
	x := &g.ext[f.val]
	x.srcPico, x.srvPico = src.SourcePicoseconds, src.ServerPicoseconds
	f.typ = byte(v.Type())
	g.cl.store(&x.v, v)
	if x.v.IsNull() && !v.IsNull() {
		// The copy failed (cannot happen for a value just decoded from the
		// wire): keep the status honest rather than a half copy.
		f.status = ua.StatusBadEncodingError
	}
}

// loadValue fills dv with f's cached value (g.vmu held, or g.mu: only the
// dispatch path writes the cache, under both).
func (g *WriterGroup) loadValue(f *field, dv *ua.DataValue) {
	dv.Status, dv.SourceTimestamp, dv.ServerTimestamp = f.status, f.src, f.srv
	if f.flags&fieldExt != 0 {
		x := &g.ext[f.val]
		dv.Value = x.v
		dv.SourcePicoseconds, dv.ServerPicoseconds = x.srcPico, x.srvPico
		return
	}
	dv.Value.SetRawBits(ua.TypeID(f.typ), f.val)
	dv.SourcePicoseconds, dv.ServerPicoseconds = 0, 0
}

// allocExt returns a free side-table index (g.vmu held for writing).
func (g *WriterGroup) allocExt() int32 {
	if n := len(g.extFree); n > 0 {
		i := g.extFree[n-1]
		g.extFree = g.extFree[:n-1]
		return i
	}
	g.ext = append(g.ext, extValue{})
	return int32(len(g.ext) - 1)
}

// freeExt gives f's side-table entry back; its value's storage is left to
// the collector (readers may still hold a copy).
func (g *WriterGroup) freeExt(f *field) {
	i := int32(f.val)
	g.ext[i] = extValue{}
	g.extFree = append(g.extFree, i)
	f.flags &^= fieldExt
	f.val = 0
}

// cloner deep-copies values that are not inline; it is owned by the group's
// dispatch path (not safe for concurrent use).
type cloner struct {
	enc *ua.Encoder
	dec *ua.Decoder
	buf []byte
}

// store copies the Variant src into the cache slot dst (a side-table
// entry). A copy that fails leaves dst null.
func (c *cloner) store(dst, src *ua.Variant) {
	if !src.IsArray() && inlineType(src.Type()) {
		*dst = *src
		return
	}
	if !src.IsArray() && (src.Type() == ua.TypeString || src.Type() == ua.TypeXmlElement) {
		s := src.Str()
		// The same text as before (a status or timestamp change) keeps the
		// cached copy instead of cloning it again.
		if dst.IsArray() || dst.Type() != src.Type() || dst.Str() != s {
			s = strings.Clone(s)
		} else {
			s = dst.Str()
		}
		val := ua.Variant{}
		if src.Type() == ua.TypeString {
			val.SetString(s)
		} else {
			val.SetXmlElement(ua.XmlElement(s))
		}
		*dst = val
		return
	}
	c.deepCopy(dst, src)
}

// deepCopy copies src through the binary codec: the decoder allocates new
// storage for every string, slice and structure.
func (c *cloner) deepCopy(dst, src *ua.Variant) {
	if c.enc == nil {
		c.enc = ua.NewEncoder(nil)
		c.dec = ua.NewDecoder(nil, nil)
	}
	c.enc.Reset(c.buf)
	c.enc.WriteVariant(src)
	b := c.enc.Bytes()
	c.buf = b[:0]
	var val ua.Variant
	if c.enc.Err() == nil {
		c.dec.Reset(b, nil)
		c.dec.ReadVariant(&val)
	}
	if c.enc.Err() != nil || c.dec.Err() != nil {
		val = ua.Variant{}
	}
	*dst = val
	// Do not keep a large value's bytes around.
	if cap(c.buf) > 64<<10 {
		c.buf = nil
	}
}
