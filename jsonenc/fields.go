package jsonenc

import (
	"github.com/uagate/gateway/uastack/ua"
)

// The Field* methods write one "name":value member of a structure and apply
// the mode's NULL/default rules (Part 6 §5.4.6, Table 45):
//
//	                     Compact, Reversible104   Verbose   NonReversible104
//	default (0, false)   omitted                  written   written
//	NULL                 omitted                  null      omitted
//
// Go strings cannot be NULL: an empty string counts as NULL for omission in
// Compact and Reversible104 and is written as "" otherwise.

// nullField handles a NULL value: null in Verbose, nothing otherwise.
func (e *Encoder) nullField(name string) {
	if e.opts.Mode.writeNulls() {
		e.FieldName(name)
		e.WriteNull()
	}
}

// FieldNull writes "name":null in Verbose and nothing in the other modes.
func (e *Encoder) FieldNull(name string) { e.nullField(name) }

// FieldBoolean writes a Boolean member.
func (e *Encoder) FieldBoolean(name string, v bool) {
	if !v && e.opts.Mode.omitDefaults() {
		return
	}
	e.FieldName(name)
	e.WriteBoolean(v)
}

// FieldInt writes an SByte, Int16 or Int32 member.
func (e *Encoder) FieldInt(name string, v int64) {
	if v == 0 && e.opts.Mode.omitDefaults() {
		return
	}
	e.FieldName(name)
	e.WriteInt(v)
}

// FieldUint writes a Byte, UInt16 or UInt32 member.
func (e *Encoder) FieldUint(name string, v uint64) {
	if v == 0 && e.opts.Mode.omitDefaults() {
		return
	}
	e.FieldName(name)
	e.WriteUint(v)
}

// FieldInt32 writes an Int32 member.
func (e *Encoder) FieldInt32(name string, v int32) { e.FieldInt(name, int64(v)) }

// FieldUInt32 writes a UInt32 member.
func (e *Encoder) FieldUInt32(name string, v uint32) { e.FieldUint(name, uint64(v)) }

// FieldInt64 writes an Int64 member (as a string).
func (e *Encoder) FieldInt64(name string, v int64) {
	if v == 0 && e.opts.Mode.omitDefaults() {
		return
	}
	e.FieldName(name)
	e.WriteInt64(v)
}

// FieldUInt64 writes a UInt64 member (as a string).
func (e *Encoder) FieldUInt64(name string, v uint64) {
	if v == 0 && e.opts.Mode.omitDefaults() {
		return
	}
	e.FieldName(name)
	e.WriteUInt64(v)
}

// FieldFloat writes a Float member.
func (e *Encoder) FieldFloat(name string, v float32) {
	if v == 0 && !signbit32(v) && e.opts.Mode.omitDefaults() {
		return
	}
	e.FieldName(name)
	e.WriteFloat(v)
}

// FieldDouble writes a Double member.
func (e *Encoder) FieldDouble(name string, v float64) {
	if v == 0 && !signbit64(v) && e.opts.Mode.omitDefaults() {
		return
	}
	e.FieldName(name)
	e.WriteDouble(v)
}

func signbit32(v float32) bool { return v < 0 || (v == 0 && 1/v < 0) }
func signbit64(v float64) bool { return v < 0 || (v == 0 && 1/v < 0) }

// FieldString writes a String member ("" counts as NULL in Compact).
func (e *Encoder) FieldString(name, v string) {
	if v == "" && e.opts.Mode.omitDefaults() {
		return
	}
	e.FieldName(name)
	e.WriteString(v)
}

// FieldDateTime writes a DateTime member; the null DateTime is NULL.
func (e *Encoder) FieldDateTime(name string, v ua.DateTime) {
	if v <= 0 {
		e.nullField(name)
		return
	}
	e.FieldName(name)
	e.WriteDateTime(v)
}

// FieldGuid writes a Guid member; the all-zero Guid is NULL.
func (e *Encoder) FieldGuid(name string, v ua.Guid) {
	if v.IsNull() {
		e.nullField(name)
		return
	}
	e.FieldName(name)
	e.WriteGuid(v)
}

// FieldByteString writes a ByteString member; nil is NULL, empty is "".
func (e *Encoder) FieldByteString(name string, v []byte) {
	if v == nil {
		e.nullField(name)
		return
	}
	e.FieldName(name)
	e.WriteByteString(v)
}

// FieldXmlElement writes an XmlElement member; "" is NULL.
func (e *Encoder) FieldXmlElement(name string, v ua.XmlElement) {
	if v == "" {
		e.nullField(name)
		return
	}
	e.FieldName(name)
	e.WriteString(string(v))
}

// FieldNodeID writes a NodeId member; the null NodeId is NULL.
func (e *Encoder) FieldNodeID(name string, v ua.NodeID) {
	if v.IsNull() {
		e.nullField(name)
		return
	}
	e.FieldName(name)
	e.writeNodeID(&v)
}

// FieldExpandedNodeID writes an ExpandedNodeId member.
func (e *Encoder) FieldExpandedNodeID(name string, v ua.ExpandedNodeID) {
	if v.IsNull() {
		e.nullField(name)
		return
	}
	e.FieldName(name)
	e.writeExpandedNodeID(&v)
}

// FieldStatusCode writes a StatusCode member. Good is omitted in Compact and
// the 1.04 modes and written as {} in Verbose (Part 6 §5.4.2.12, H.4).
func (e *Encoder) FieldStatusCode(name string, v ua.StatusCode) {
	if v == 0 && e.opts.Mode != Verbose {
		return
	}
	e.FieldName(name)
	e.WriteStatusCode(v)
}

// FieldQualifiedName writes a QualifiedName member.
func (e *Encoder) FieldQualifiedName(name string, v ua.QualifiedName) {
	if v.IsNull() {
		e.nullField(name)
		return
	}
	e.FieldName(name)
	e.WriteQualifiedName(v)
}

// FieldLocalizedText writes a LocalizedText member.
func (e *Encoder) FieldLocalizedText(name string, v ua.LocalizedText) {
	if v.IsNull() {
		e.nullField(name)
		return
	}
	e.FieldName(name)
	e.WriteLocalizedText(v)
}

// FieldVariant writes a Variant member; a null Variant is NULL.
func (e *Encoder) FieldVariant(name string, v *ua.Variant) {
	if v == nil || v.IsNull() {
		e.nullField(name)
		return
	}
	e.FieldName(name)
	e.WriteVariant(v)
}

// FieldDataValue writes a DataValue member; nil is NULL.
func (e *Encoder) FieldDataValue(name string, v *ua.DataValue) {
	if v == nil {
		e.nullField(name)
		return
	}
	e.FieldName(name)
	e.WriteDataValue(v)
}

// FieldExtensionObject writes an ExtensionObject member. An empty one is
// omitted in Compact and the 1.04 modes and written as {} in Verbose (Part 6
// §5.4.2.16).
func (e *Encoder) FieldExtensionObject(name string, v *ua.ExtensionObject) {
	if v == nil || v.IsNull() {
		if e.opts.Mode == Verbose {
			e.FieldName(name)
			e.StartObject()
			e.EndObject()
		}
		return
	}
	e.FieldName(name)
	e.WriteExtensionObject(v)
}

// FieldDiagnosticInfo writes a DiagnosticInfo member; nil is NULL.
func (e *Encoder) FieldDiagnosticInfo(name string, v *ua.DiagnosticInfo) {
	if v == nil {
		e.nullField(name)
		return
	}
	e.FieldName(name)
	e.WriteDiagnosticInfo(v)
}

// FieldEnum writes an enumeration member: a number in Compact and
// Reversible104 (0 omitted), "<Name>_<Value>" otherwise.
func (e *Encoder) FieldEnum(name string, v int32, symbol string) {
	if v == 0 && e.opts.Mode.omitDefaults() {
		return
	}
	e.FieldName(name)
	e.WriteEnum(v, symbol)
}

// FieldArray starts an array member and reports whether the caller should
// write its n elements and call EndArray. A nil array (isNil) is NULL: omitted,
// or null in Verbose; FieldArray then returns false.
func (e *Encoder) FieldArray(name string, isNil bool) bool {
	if isNil {
		e.nullField(name)
		return false
	}
	e.FieldName(name)
	e.StartArray()
	return true
}

// FieldStringArray writes a String[] member.
func (e *Encoder) FieldStringArray(name string, v []string) {
	if e.FieldArray(name, v == nil) {
		for _, s := range v {
			e.WriteString(s)
		}
		e.EndArray()
	}
}

// FieldUInt32Array writes a UInt32[] member.
func (e *Encoder) FieldUInt32Array(name string, v []uint32) {
	if e.FieldArray(name, v == nil) {
		for _, x := range v {
			e.WriteUint(uint64(x))
		}
		e.EndArray()
	}
}

// FieldInt32Array writes an Int32[] member.
func (e *Encoder) FieldInt32Array(name string, v []int32) {
	if e.FieldArray(name, v == nil) {
		for _, x := range v {
			e.WriteInt(int64(x))
		}
		e.EndArray()
	}
}

// FieldObject starts an object member; close it with EndObject.
func (e *Encoder) FieldObject(name string) {
	e.FieldName(name)
	e.StartObject()
}
