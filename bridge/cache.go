package bridge

import (
	"strings"

	"github.com/uagate/gateway/uastack/ua"
)

// The last-value cache: one ua.DataValue per field, owned by the writer
// group. Notifications are borrowed from the client's pools, so a value is
// copied in: a numeric scalar (and Boolean, DateTime, StatusCode, null) is a
// plain copy of the 72-byte DataValue; a String or XmlElement is cloned
// (unless it is the same text as the cached one); anything else (arrays,
// ByteStrings, NodeIds, LocalizedTexts, ExtensionObjects …) is deep-copied by
// a round trip through the binary codec, which allocates fresh storage for
// every part. A cached value is never modified in place: it is replaced, so
// readers that copied the DataValue out under the group's value lock keep a
// consistent, immutable value.

// inlineType reports whether a scalar of type t lives entirely inside the
// Variant (no string or pointer), so that copying the Variant copies it.
func inlineType(t ua.TypeID) bool {
	switch t {
	case ua.TypeNull, ua.TypeBoolean, ua.TypeSByte, ua.TypeByte, ua.TypeInt16, ua.TypeUInt16,
		ua.TypeInt32, ua.TypeUInt32, ua.TypeInt64, ua.TypeUInt64, ua.TypeFloat, ua.TypeDouble,
		ua.TypeDateTime, ua.TypeStatusCode:
		return true
	}
	return false
}

// cloner deep-copies values that are not inline; it is owned by the group's
// dispatch path (not safe for concurrent use).
type cloner struct {
	enc *ua.Encoder
	dec *ua.Decoder
	buf []byte
}

// store copies src into the cache slot dst.
func (c *cloner) store(dst, src *ua.DataValue) {
	v := &src.Value
	if !v.IsArray() && inlineType(v.Type()) {
		*dst = *src
		return
	}
	if !v.IsArray() && (v.Type() == ua.TypeString || v.Type() == ua.TypeXmlElement) {
		s := v.Str()
		old := &dst.Value
		// The same text as before (a status or timestamp change) keeps the
		// cached copy instead of cloning it again.
		if old.IsArray() || old.Type() != v.Type() || old.Str() != s {
			s = strings.Clone(s)
		} else {
			s = old.Str()
		}
		val := ua.Variant{}
		if v.Type() == ua.TypeString {
			val.SetString(s)
		} else {
			val.SetXmlElement(ua.XmlElement(s))
		}
		*dst = *src
		dst.Value = val
		return
	}
	c.deepCopy(dst, src)
}

// deepCopy copies src through the binary codec: the decoder allocates new
// storage for every string, slice and structure.
func (c *cloner) deepCopy(dst, src *ua.DataValue) {
	if c.enc == nil {
		c.enc = ua.NewEncoder(nil)
		c.dec = ua.NewDecoder(nil, nil)
	}
	c.enc.Reset(c.buf)
	c.enc.WriteVariant(&src.Value)
	b := c.enc.Bytes()
	c.buf = b[:0]
	var val ua.Variant
	if c.enc.Err() == nil {
		c.dec.Reset(b, nil)
		c.dec.ReadVariant(&val)
	}
	*dst = *src
	dst.Value = val
	if c.enc.Err() != nil || c.dec.Err() != nil {
		// Cannot happen for a value that was just decoded from the wire;
		// keep the status honest rather than a half copy.
		dst.Value = ua.Variant{}
		dst.Status = ua.StatusBadEncodingError
	}
	// Do not keep a large value's bytes around.
	if cap(c.buf) > 64<<10 {
		c.buf = nil
	}
}
