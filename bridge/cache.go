package bridge

import (
	"strings"

	"github.com/uagate/gateway/uastack/ua"
)

// The last-value cache lives in the field table's slots (fields.go),
// compactly: a million of them must fit beside the client's item table
// (TestFieldSize). A field keeps the value's status and source timestamp
// and, for an inline scalar (numbers, Boolean, DateTime, StatusCode, null)
// without picoseconds whose server timestamp is within ±214 s of its source
// timestamp, the distance between the two, its built-in type and its 8-byte
// payload (Variant.RawBits). Anything else — strings, byte strings, arrays,
// ExtensionObjects, picoseconds, a missing or distant timestamp … — goes
// into the side table ext, indexed by the field's payload (fieldExt), with
// the server timestamp: only fields with such values pay for a whole
// Variant. The monitored item's status (the server's answer) is in the map
// itemSt, for the items not answered Good only.
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
	srv              ua.DateTime
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
func (t *fieldTable) storeValue(f *field, src *ua.DataValue) {
	v := &src.Value
	f.status, f.src = src.Status, src.SourceTimestamp
	f.flags |= fieldHasValue
	// The server timestamp is kept as its distance from the source's, which
	// fits 32 bits (±214 s) for every server that stamps both; one that
	// does not (no source timestamp, a device clock minutes off) has the
	// value in the side table.
	d := src.ServerTimestamp - src.SourceTimestamp
	if !v.IsArray() && inlineType(v.Type()) && src.SourcePicoseconds|src.ServerPicoseconds == 0 && d == ua.DateTime(int32(d)) {
		if f.flags&fieldExt != 0 {
			t.freeExt(f)
		}
		f.typ, f.val, f.srvd = byte(v.Type()), v.RawBits(), int32(d)
		return
	}
	if f.flags&fieldExt == 0 {
		f.val = uint64(t.allocExt())
		f.flags |= fieldExt
	}
	f.srvd = 0
	x := &t.ext[f.val]
	x.srv, x.srcPico, x.srvPico = src.ServerTimestamp, src.SourcePicoseconds, src.ServerPicoseconds
	f.typ = byte(v.Type())
	t.cl.store(&x.v, v)
	if x.v.IsNull() && !v.IsNull() {
		// The copy failed (cannot happen for a value just decoded from the
		// wire): keep the status honest rather than a half copy.
		f.status = ua.StatusBadEncodingError
	}
}

// loadValue fills dv with f's cached value (g.vmu held, or g.mu: only the
// dispatch path writes the cache, under both).
func (t *fieldTable) loadValue(f *field, dv *ua.DataValue) {
	dv.Status, dv.SourceTimestamp = f.status, f.src
	if f.flags&fieldExt != 0 {
		x := &t.ext[f.val]
		dv.Value, dv.ServerTimestamp = x.v, x.srv
		dv.SourcePicoseconds, dv.ServerPicoseconds = x.srcPico, x.srvPico
		return
	}
	dv.ServerTimestamp = f.src + ua.DateTime(f.srvd)
	dv.Value.SetRawBits(ua.TypeID(f.typ), f.val)
	dv.SourcePicoseconds, dv.ServerPicoseconds = 0, 0
}

// serverTimestamp is the ServerTimestamp of f's cached value (g.vmu or g.mu
// held, as for loadValue).
func (t *fieldTable) serverTimestamp(f *field) ua.DateTime {
	if f.flags&fieldExt != 0 {
		return t.ext[f.val].srv
	}
	return f.src + ua.DateTime(f.srvd)
}

// itemStatus is the status of slot s's monitored item (the server's answer);
// g.vmu held.
func (t *fieldTable) itemStatus(s int32) ua.StatusCode { return t.itemSt[s] }

// setItemStatus records it; g.vmu held for writing. Good is the absence of
// an entry, so the map holds only the items the server refused or
// qualified.
func (t *fieldTable) setItemStatus(s int32, st ua.StatusCode) {
	if st == ua.StatusGood {
		delete(t.itemSt, s)
		return
	}
	if t.itemSt == nil {
		t.itemSt = make(map[int32]ua.StatusCode)
	}
	t.itemSt[s] = st
}

// allocExt returns a free side-table index (g.vmu held for writing).
func (t *fieldTable) allocExt() int32 {
	if n := len(t.extFree); n > 0 {
		i := t.extFree[n-1]
		t.extFree = t.extFree[:n-1]
		return i
	}
	t.ext = append(t.ext, extValue{})
	return int32(len(t.ext) - 1)
}

// freeExt gives f's side-table entry back; its value's storage is left to
// the collector (readers may still hold a copy).
func (t *fieldTable) freeExt(f *field) {
	i := int32(f.val)
	t.ext[i] = extValue{}
	t.extFree = append(t.extFree, i)
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
