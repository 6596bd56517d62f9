package ua

import (
	"fmt"
	"math"
	"time"
	"unsafe"
)

// TypeID is the id of a built-in type (Part 6 Table 1), as used in Variant encoding
// masks and in JSON's UaType.
type TypeID uint8

// Built-in type ids.
const (
	TypeNull            TypeID = 0
	TypeBoolean         TypeID = 1
	TypeSByte           TypeID = 2
	TypeByte            TypeID = 3
	TypeInt16           TypeID = 4
	TypeUInt16          TypeID = 5
	TypeInt32           TypeID = 6
	TypeUInt32          TypeID = 7
	TypeInt64           TypeID = 8
	TypeUInt64          TypeID = 9
	TypeFloat           TypeID = 10
	TypeDouble          TypeID = 11
	TypeString          TypeID = 12
	TypeDateTime        TypeID = 13
	TypeGuid            TypeID = 14
	TypeByteString      TypeID = 15
	TypeXmlElement      TypeID = 16
	TypeNodeID          TypeID = 17
	TypeExpandedNodeID  TypeID = 18
	TypeStatusCode      TypeID = 19
	TypeQualifiedName   TypeID = 20
	TypeLocalizedText   TypeID = 21
	TypeExtensionObject TypeID = 22
	TypeDataValue       TypeID = 23
	TypeVariant         TypeID = 24
	TypeDiagnosticInfo  TypeID = 25
)

var typeNames = [...]string{"Null", "Boolean", "SByte", "Byte", "Int16", "UInt16", "Int32", "UInt32",
	"Int64", "UInt64", "Float", "Double", "String", "DateTime", "Guid", "ByteString", "XmlElement",
	"NodeId", "ExpandedNodeId", "StatusCode", "QualifiedName", "LocalizedText", "ExtensionObject",
	"DataValue", "Variant", "DiagnosticInfo"}

// String returns the built-in type's name.
func (t TypeID) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("TypeID(%d)", t)
}

// Variant holds a value of any built-in type, a one-dimensional array or a matrix.
//
// It is a tagged union: Boolean, the integer and floating point types, DateTime and
// StatusCode scalars are stored inline (no interface boxing, no allocation); String
// and XmlElement scalars in a string field; other scalars and all arrays in an
// interface field holding the Go type listed at Value. The zero Variant is null.
type Variant struct {
	typ   TypeID
	array bool
	n     uint64 // inline scalar payload
	s     string // String and XmlElement scalars
	x     any    // other scalars, 1-D arrays, or a *matrix
}

// matrix holds a multi-dimensional array: the elements in row-major order and the
// dimensions. Keeping it behind a pointer keeps Variant at 48 bytes, which matters
// when a million of them sit in notification slices.
type matrix struct {
	flat any
	dims []int32
}

// str returns the String/XmlElement payload.
func (v *Variant) str() string { return v.s }

// setStr stores s without copying or allocating.
func (v *Variant) setStr(t TypeID, s string) {
	v.typ, v.array, v.n, v.s, v.x = t, false, 0, s, nil
}

// arrayValue returns the flat array of an array Variant.
func (v *Variant) arrayValue() any {
	if m, ok := v.x.(*matrix); ok {
		return m.flat
	}
	return v.x
}

// Type returns the built-in type of the value (TypeNull for an empty Variant).
func (v *Variant) Type() TypeID { return v.typ }

// IsNull reports whether v holds nothing.
func (v *Variant) IsNull() bool { return v.typ == TypeNull }

// IsArray reports whether v holds an array (or matrix).
func (v *Variant) IsArray() bool { return v.array }

// ArrayDimensions returns the matrix dimensions, or nil for a scalar or 1-D array.
func (v *Variant) ArrayDimensions() []int32 {
	if m, ok := v.x.(*matrix); ok {
		return m.dims
	}
	return nil
}

// Reset makes v null, keeping nothing.
func (v *Variant) Reset() { *v = Variant{} }

func (v *Variant) setInline(t TypeID, n uint64) {
	v.typ, v.array, v.n, v.s, v.x = t, false, n, "", nil
}

// Setters for inline scalars; they never allocate.
func (v *Variant) SetBoolean(b bool) {
	var n uint64
	if b {
		n = 1
	}
	v.setInline(TypeBoolean, n)
}
func (v *Variant) SetSByte(x int8)            { v.setInline(TypeSByte, uint64(x)) }
func (v *Variant) SetByte(x byte)             { v.setInline(TypeByte, uint64(x)) }
func (v *Variant) SetInt16(x int16)           { v.setInline(TypeInt16, uint64(x)) }
func (v *Variant) SetUInt16(x uint16)         { v.setInline(TypeUInt16, uint64(x)) }
func (v *Variant) SetInt32(x int32)           { v.setInline(TypeInt32, uint64(x)) }
func (v *Variant) SetUInt32(x uint32)         { v.setInline(TypeUInt32, uint64(x)) }
func (v *Variant) SetInt64(x int64)           { v.setInline(TypeInt64, uint64(x)) }
func (v *Variant) SetUInt64(x uint64)         { v.setInline(TypeUInt64, x) }
func (v *Variant) SetFloat(x float32)         { v.setInline(TypeFloat, uint64(math.Float32bits(x))) }
func (v *Variant) SetDouble(x float64)        { v.setInline(TypeDouble, math.Float64bits(x)) }
func (v *Variant) SetDateTime(x DateTime)     { v.setInline(TypeDateTime, uint64(x)) }
func (v *Variant) SetStatusCode(x StatusCode) { v.setInline(TypeStatusCode, uint64(x)) }

// SetString stores a String scalar without allocating.
func (v *Variant) SetString(s string) { v.setStr(TypeString, s) }

// SetXmlElement stores an XmlElement scalar.
func (v *Variant) SetXmlElement(s XmlElement) { v.setStr(TypeXmlElement, string(s)) }

// Inline scalar constructors.
func NewBooleanVariant(b bool) Variant      { var v Variant; v.SetBoolean(b); return v }
func NewInt32Variant(x int32) Variant       { var v Variant; v.SetInt32(x); return v }
func NewUInt32Variant(x uint32) Variant     { var v Variant; v.SetUInt32(x); return v }
func NewInt64Variant(x int64) Variant       { var v Variant; v.SetInt64(x); return v }
func NewDoubleVariant(x float64) Variant    { var v Variant; v.SetDouble(x); return v }
func NewFloatVariant(x float32) Variant     { var v Variant; v.SetFloat(x); return v }
func NewStringVariant(s string) Variant     { var v Variant; v.SetString(s); return v }
func NewDateTimeVariant(x DateTime) Variant { var v Variant; v.SetDateTime(x); return v }

// Inline scalar getters. They return the zero value when v holds another type.
func (v *Variant) Boolean() bool          { return v.typ == TypeBoolean && !v.array && v.n != 0 }
func (v *Variant) SByte() int8            { return int8(v.inline(TypeSByte)) }
func (v *Variant) Byte() byte             { return byte(v.inline(TypeByte)) }
func (v *Variant) Int16() int16           { return int16(v.inline(TypeInt16)) }
func (v *Variant) UInt16() uint16         { return uint16(v.inline(TypeUInt16)) }
func (v *Variant) Int32() int32           { return int32(v.inline(TypeInt32)) }
func (v *Variant) UInt32() uint32         { return uint32(v.inline(TypeUInt32)) }
func (v *Variant) Int64() int64           { return int64(v.inline(TypeInt64)) }
func (v *Variant) UInt64() uint64         { return v.inline(TypeUInt64) }
func (v *Variant) Float() float32         { return math.Float32frombits(uint32(v.inline(TypeFloat))) }
func (v *Variant) Double() float64        { return math.Float64frombits(v.inline(TypeDouble)) }
func (v *Variant) DateTime() DateTime     { return DateTime(v.inline(TypeDateTime)) }
func (v *Variant) StatusCode() StatusCode { return StatusCode(v.inline(TypeStatusCode)) }

// Str returns a String or XmlElement scalar.
func (v *Variant) Str() string {
	if (v.typ == TypeString || v.typ == TypeXmlElement) && !v.array {
		return v.str()
	}
	return ""
}

func (v *Variant) inline(t TypeID) uint64 {
	if v.typ == t && !v.array {
		return v.n
	}
	return 0
}

// RawBits returns the inline payload of a numeric scalar (sign-extended for signed
// types, IEEE bits for Float/Double) for encoders that switch on Type.
func (v *Variant) RawBits() uint64 { return v.n }

// SetRawBits sets v to the scalar of built-in type t whose inline payload
// RawBits returned as bits, for the inline types (Boolean, the integers,
// Float, Double, DateTime, StatusCode), and reports whether t is one; for
// any other type v is reset to null. Caches that keep a value as its type
// and 8 bytes rebuild it with this.
func (v *Variant) SetRawBits(t TypeID, bits uint64) bool {
	switch t {
	case TypeBoolean, TypeSByte, TypeByte, TypeInt16, TypeUInt16, TypeInt32, TypeUInt32,
		TypeInt64, TypeUInt64, TypeFloat, TypeDouble, TypeDateTime, TypeStatusCode:
		v.setInline(t, bits)
		return true
	}
	v.Reset()
	return false
}

// AsFloat64 converts a numeric scalar (integers, Float, Double, Boolean) to float64.
func (v *Variant) AsFloat64() (float64, bool) {
	if v.array {
		return 0, false
	}
	switch v.typ {
	case TypeBoolean, TypeByte, TypeUInt16, TypeUInt32, TypeUInt64:
		return float64(v.n), true
	case TypeSByte, TypeInt16, TypeInt32, TypeInt64:
		return float64(int64(v.n)), true
	case TypeFloat:
		return float64(math.Float32frombits(uint32(v.n))), true
	case TypeDouble:
		return math.Float64frombits(v.n), true
	}
	return 0, false
}

// Value returns the value as a Go value: bool, int8, byte, int16, uint16, int32,
// uint32, int64, uint64, float32, float64, string, DateTime, Guid, []byte,
// XmlElement, NodeID, ExpandedNodeID, StatusCode, QualifiedName, LocalizedText,
// *ExtensionObject, *DataValue, *DiagnosticInfo; arrays as []T of those (Variant
// arrays as []Variant); nil for null. It boxes, so it is not for the hot path.
func (v *Variant) Value() any {
	if v.array {
		return v.arrayValue()
	}
	if v.x != nil {
		return v.x
	}
	switch v.typ {
	case TypeNull:
		return nil
	case TypeBoolean:
		return v.n != 0
	case TypeSByte:
		return int8(v.n)
	case TypeByte:
		return byte(v.n)
	case TypeInt16:
		return int16(v.n)
	case TypeUInt16:
		return uint16(v.n)
	case TypeInt32:
		return int32(v.n)
	case TypeUInt32:
		return uint32(v.n)
	case TypeInt64:
		return int64(v.n)
	case TypeUInt64:
		return v.n
	case TypeFloat:
		return math.Float32frombits(uint32(v.n))
	case TypeDouble:
		return math.Float64frombits(v.n)
	case TypeString:
		return v.str()
	case TypeXmlElement:
		return XmlElement(v.str())
	case TypeDateTime:
		return DateTime(v.n)
	case TypeStatusCode:
		return StatusCode(v.n)
	}
	return nil
}

// NewVariant builds a Variant from a Go value of the types listed at Value (plus
// int, uint, time.Time and []int/[]time.Time for convenience). Matrices are built
// with NewMatrixVariant.
func NewVariant(val any) (Variant, error) {
	var v Variant
	switch x := val.(type) {
	case nil:
	case Variant:
		if x.typ == TypeNull {
			return v, nil
		}
		return v, fmt.Errorf("ua: a Variant cannot hold a scalar Variant")
	case bool:
		v.SetBoolean(x)
	case int8:
		v.SetSByte(x)
	case byte:
		v.SetByte(x)
	case int16:
		v.SetInt16(x)
	case uint16:
		v.SetUInt16(x)
	case int32:
		v.SetInt32(x)
	case uint32:
		v.SetUInt32(x)
	case int64:
		v.SetInt64(x)
	case int:
		v.SetInt64(int64(x))
	case uint64:
		v.SetUInt64(x)
	case uint:
		v.SetUInt64(uint64(x))
	case float32:
		v.SetFloat(x)
	case float64:
		v.SetDouble(x)
	case string:
		v.SetString(x)
	case XmlElement:
		v.SetXmlElement(x)
	case DateTime:
		v.SetDateTime(x)
	case time.Time:
		v.SetDateTime(NewDateTime(x))
	case StatusCode:
		v.SetStatusCode(x)
	case Guid:
		v.typ, v.x = TypeGuid, x
	case []byte:
		v.typ, v.x = TypeByteString, x
	case NodeID:
		v.typ, v.x = TypeNodeID, x
	case ExpandedNodeID:
		v.typ, v.x = TypeExpandedNodeID, x
	case QualifiedName:
		v.typ, v.x = TypeQualifiedName, x
	case LocalizedText:
		v.typ, v.x = TypeLocalizedText, x
	case *ExtensionObject:
		v.typ, v.x = TypeExtensionObject, x
	case ExtensionObject:
		v.typ, v.x = TypeExtensionObject, &x
	case *DataValue:
		v.typ, v.x = TypeDataValue, x
	case DataValue:
		v.typ, v.x = TypeDataValue, &x
	case *DiagnosticInfo:
		v.typ, v.x = TypeDiagnosticInfo, x
	case Encodable:
		eo := NewExtensionObject(x)
		v.typ, v.x = TypeExtensionObject, &eo
	case []int:
		a := make([]int64, len(x))
		for i, e := range x {
			a[i] = int64(e)
		}
		v.typ, v.array, v.x = TypeInt64, true, a
	case []time.Time:
		a := make([]DateTime, len(x))
		for i, e := range x {
			a[i] = NewDateTime(e)
		}
		v.typ, v.array, v.x = TypeDateTime, true, a
	default:
		t, ok := arrayType(val)
		if !ok {
			return v, fmt.Errorf("ua: %T cannot be stored in a Variant", val)
		}
		v.typ, v.array, v.x = t, true, val
	}
	return v, nil
}

// NewArrayVariant builds a 1-D array Variant of built-in type t from a slice of
// the matching Go type (as listed at Value). It is needed where NewVariant would
// guess another type: []byte is a ByteString scalar for NewVariant but a Byte[]
// here.
func NewArrayVariant(t TypeID, slice any) (Variant, error) {
	at, ok := arrayType(slice)
	if !ok || at != t {
		return Variant{}, fmt.Errorf("ua: %T is not an array of %v", slice, t)
	}
	return Variant{typ: t, array: true, x: slice}, nil
}

// MustVariant is NewVariant that panics; for literals in code and tests.
func MustVariant(val any) Variant {
	v, err := NewVariant(val)
	if err != nil {
		panic(err)
	}
	return v
}

// NewMatrixVariant builds a matrix from a flat array (as accepted by NewVariant) in
// row-major order and its dimensions; the product of dims must equal the length.
func NewMatrixVariant(flat any, dims []int32) (Variant, error) {
	t, ok := arrayType(flat)
	if !ok {
		return Variant{}, fmt.Errorf("ua: %T is not an array type for a matrix", flat)
	}
	n := 1
	for _, d := range dims {
		if d < 0 {
			return Variant{}, fmt.Errorf("ua: negative matrix dimension %d", d)
		}
		n *= int(d)
	}
	if n != arrayLen(flat) || len(dims) < 2 {
		return Variant{}, fmt.Errorf("ua: matrix dimensions %v do not match %d elements", dims, arrayLen(flat))
	}
	return Variant{typ: t, array: true, x: &matrix{flat: flat, dims: append([]int32(nil), dims...)}}, nil
}

func arrayType(val any) (TypeID, bool) {
	switch val.(type) {
	case []bool:
		return TypeBoolean, true
	case []int8:
		return TypeSByte, true
	case []byte:
		return TypeByte, true
	case []int16:
		return TypeInt16, true
	case []uint16:
		return TypeUInt16, true
	case []int32:
		return TypeInt32, true
	case []uint32:
		return TypeUInt32, true
	case []int64:
		return TypeInt64, true
	case []uint64:
		return TypeUInt64, true
	case []float32:
		return TypeFloat, true
	case []float64:
		return TypeDouble, true
	case []string:
		return TypeString, true
	case []DateTime:
		return TypeDateTime, true
	case []Guid:
		return TypeGuid, true
	case [][]byte:
		return TypeByteString, true
	case []XmlElement:
		return TypeXmlElement, true
	case []NodeID:
		return TypeNodeID, true
	case []ExpandedNodeID:
		return TypeExpandedNodeID, true
	case []StatusCode:
		return TypeStatusCode, true
	case []QualifiedName:
		return TypeQualifiedName, true
	case []LocalizedText:
		return TypeLocalizedText, true
	case []ExtensionObject:
		return TypeExtensionObject, true
	case []DataValue:
		return TypeDataValue, true
	case []Variant:
		return TypeVariant, true
	case []DiagnosticInfo:
		return TypeDiagnosticInfo, true
	}
	return 0, false
}

// ArrayLen returns the number of elements of an array Variant (0 for scalars).
func (v *Variant) ArrayLen() int {
	if !v.array {
		return 0
	}
	return arrayLen(v.arrayValue())
}

func arrayLen(val any) int {
	switch a := val.(type) {
	case []bool:
		return len(a)
	case []int8:
		return len(a)
	case []byte:
		return len(a)
	case []int16:
		return len(a)
	case []uint16:
		return len(a)
	case []int32:
		return len(a)
	case []uint32:
		return len(a)
	case []int64:
		return len(a)
	case []uint64:
		return len(a)
	case []float32:
		return len(a)
	case []float64:
		return len(a)
	case []string:
		return len(a)
	case []DateTime:
		return len(a)
	case []Guid:
		return len(a)
	case [][]byte:
		return len(a)
	case []XmlElement:
		return len(a)
	case []NodeID:
		return len(a)
	case []ExpandedNodeID:
		return len(a)
	case []StatusCode:
		return len(a)
	case []QualifiedName:
		return len(a)
	case []LocalizedText:
		return len(a)
	case []ExtensionObject:
		return len(a)
	case []DataValue:
		return len(a)
	case []Variant:
		return len(a)
	case []DiagnosticInfo:
		return len(a)
	}
	return 0
}

const (
	variantArrayDims = 0x40
	variantArray     = 0x80
)

// ReadVariant reads a Variant into v (v is overwritten).
func (d *Decoder) ReadVariant(v *Variant) {
	mask := d.ReadUInt8()
	if d.err != nil {
		v.Reset()
		return
	}
	t := TypeID(mask & 0x3f)
	if t > TypeDiagnosticInfo {
		d.Fail("Variant", fmt.Errorf("%w: type id %d", ErrInvalidEncoding, t))
		v.Reset()
		return
	}
	if mask&variantArray == 0 {
		if mask&variantArrayDims != 0 {
			d.Fail("Variant", fmt.Errorf("%w: dimensions without array", ErrInvalidEncoding))
			v.Reset()
			return
		}
		d.readVariantScalar(v, t)
		return
	}
	if !d.Enter("Variant") {
		v.Reset()
		return
	}
	defer d.Leave()
	v.typ, v.array, v.n, v.s = t, true, 0, ""
	// Storing the slice in v.x boxes its header.
	if !d.charge(sliceHeaderSize, "Variant") {
		v.Reset()
		return
	}
	v.x = d.readArray(t)
	if mask&variantArrayDims != 0 {
		dims := d.ReadInt32Array(nil)
		n := 1
		for i, dim := range dims {
			if dim < 0 || (dim > 0 && n > d.limits.MaxArrayLength/int(dim)) {
				// The dimensions are not printed: there may be a million.
				d.Fail("Variant", fmt.Errorf("%w: matrix dimension %d of %d is %d", ErrInvalidEncoding, i, len(dims), dim))
				break
			}
			n *= int(dim)
		}
		if d.err == nil && n != arrayLen(v.x) {
			d.Fail("Variant", fmt.Errorf("%w: %d matrix dimensions give %d elements, the array has %d", ErrInvalidEncoding, len(dims), n, arrayLen(v.x)))
		}
		// A null dimensions array leaves a plain 1-D array.
		if dims != nil && d.charge(int(unsafe.Sizeof(matrix{})), "Variant") {
			v.x = &matrix{flat: v.x, dims: dims}
		}
	}
	if d.err != nil {
		v.Reset()
	}
}

func (d *Decoder) readVariantScalar(v *Variant, t TypeID) {
	switch t {
	case TypeNull:
		v.Reset()
	case TypeBoolean:
		v.SetBoolean(d.ReadBoolean())
	case TypeSByte:
		v.SetSByte(d.ReadSByte())
	case TypeByte:
		v.SetByte(d.ReadUInt8())
	case TypeInt16:
		v.SetInt16(d.ReadInt16())
	case TypeUInt16:
		v.SetUInt16(d.ReadUInt16())
	case TypeInt32:
		v.SetInt32(d.ReadInt32())
	case TypeUInt32:
		v.SetUInt32(d.ReadUInt32())
	case TypeInt64:
		v.SetInt64(d.ReadInt64())
	case TypeUInt64:
		v.SetUInt64(d.ReadUInt64())
	case TypeFloat:
		v.SetFloat(d.ReadFloat())
	case TypeDouble:
		v.SetDouble(d.ReadDouble())
	case TypeString:
		v.SetString(d.ReadString())
	case TypeDateTime:
		v.SetDateTime(d.ReadDateTime())
	case TypeStatusCode:
		v.SetStatusCode(d.ReadStatusCode())
	case TypeXmlElement:
		v.SetXmlElement(d.ReadXmlElement())
	case TypeVariant:
		d.Fail("Variant", fmt.Errorf("%w: a Variant cannot hold a scalar Variant", ErrInvalidEncoding))
		v.Reset()
		return
	default:
		if !d.Enter("Variant") {
			v.Reset()
			return
		}
		x := d.readOtherScalar(t)
		d.Leave()
		v.typ, v.array, v.n, v.s, v.x = t, false, 0, "", x
	}
	if d.err != nil {
		v.Reset()
	}
}

// sliceHeaderSize is what boxing a slice in an interface allocates.
const sliceHeaderSize = int(unsafe.Sizeof([]byte(nil)))

// boxSize is what readOtherScalar allocates for the value of each type, beyond
// what reading it allocates (strings, byte strings): the interface box, or the
// pointed-to struct.
var boxSize = [...]int{
	TypeGuid:            int(unsafe.Sizeof(Guid{})),
	TypeByteString:      sliceHeaderSize,
	TypeNodeID:          int(unsafe.Sizeof(NodeID{})),
	TypeExpandedNodeID:  int(unsafe.Sizeof(ExpandedNodeID{})),
	TypeQualifiedName:   int(unsafe.Sizeof(QualifiedName{})),
	TypeLocalizedText:   int(unsafe.Sizeof(LocalizedText{})),
	TypeExtensionObject: int(unsafe.Sizeof(ExtensionObject{})),
	TypeDataValue:       int(unsafe.Sizeof(DataValue{})),
	TypeDiagnosticInfo:  int(unsafe.Sizeof(DiagnosticInfo{})),
}

func (d *Decoder) readOtherScalar(t TypeID) any {
	if int(t) >= len(boxSize) || !d.charge(boxSize[t], "Variant") {
		return nil
	}
	switch t {
	case TypeGuid:
		return d.ReadGuid()
	case TypeByteString:
		return d.ReadByteString()
	case TypeNodeID:
		return d.ReadNodeID()
	case TypeExpandedNodeID:
		return d.ReadExpandedNodeID()
	case TypeQualifiedName:
		return d.ReadQualifiedName()
	case TypeLocalizedText:
		return d.ReadLocalizedText()
	case TypeExtensionObject:
		eo := &ExtensionObject{}
		d.ReadExtensionObject(eo)
		return eo
	case TypeDataValue:
		dv := &DataValue{}
		d.ReadDataValue(dv)
		return dv
	case TypeDiagnosticInfo:
		di := &DiagnosticInfo{}
		d.ReadDiagnosticInfo(di)
		return di
	}
	return nil
}

// readArray reads a 1-D array of built-in type t (the Variant array payload).
func (d *Decoder) readArray(t TypeID) any {
	switch t {
	case TypeBoolean:
		return d.ReadBooleanArray(nil)
	case TypeSByte:
		return d.ReadSByteArray(nil)
	case TypeByte:
		return d.ReadByteArray(nil)
	case TypeInt16:
		return d.ReadInt16Array(nil)
	case TypeUInt16:
		return d.ReadUInt16Array(nil)
	case TypeInt32:
		return d.ReadInt32Array(nil)
	case TypeUInt32:
		return d.ReadUInt32Array(nil)
	case TypeInt64:
		return d.ReadInt64Array(nil)
	case TypeUInt64:
		return d.ReadUInt64Array(nil)
	case TypeFloat:
		return d.ReadFloatArray(nil)
	case TypeDouble:
		return d.ReadDoubleArray(nil)
	case TypeString:
		return d.ReadStringArray(nil)
	case TypeDateTime:
		return d.ReadDateTimeArray(nil)
	case TypeStatusCode:
		return d.ReadStatusCodeArray(nil)
	case TypeGuid:
		return readArrayOf(d, "Guid[]", 16, (*Decoder).ReadGuid)
	case TypeByteString:
		return readArrayOf(d, "ByteString[]", 4, (*Decoder).ReadByteString)
	case TypeXmlElement:
		return readArrayOf(d, "XmlElement[]", 4, (*Decoder).ReadXmlElement)
	case TypeNodeID:
		return readArrayOf(d, "NodeId[]", 2, (*Decoder).ReadNodeID)
	case TypeExpandedNodeID:
		return readArrayOf(d, "ExpandedNodeId[]", 2, (*Decoder).ReadExpandedNodeID)
	case TypeQualifiedName:
		return readArrayOf(d, "QualifiedName[]", 6, (*Decoder).ReadQualifiedName)
	case TypeLocalizedText:
		return readArrayOf(d, "LocalizedText[]", 1, (*Decoder).ReadLocalizedText)
	case TypeExtensionObject:
		return readArrayInto(d, "ExtensionObject[]", 3, (*Decoder).ReadExtensionObject)
	case TypeDataValue:
		return readArrayInto(d, "DataValue[]", 1, (*Decoder).ReadDataValue)
	case TypeVariant:
		return readArrayInto(d, "Variant[]", 1, (*Decoder).ReadVariant)
	case TypeDiagnosticInfo:
		return readArrayInto(d, "DiagnosticInfo[]", 1, (*Decoder).ReadDiagnosticInfo)
	case TypeNull:
		d.Fail("Variant", fmt.Errorf("%w: array of Null", ErrInvalidEncoding))
	}
	return nil
}

func readArrayOf[T any](d *Decoder, what string, minSize int, read func(*Decoder) T) []T {
	n := d.ReadArrayLength(what, minSize)
	if n < 0 {
		return nil
	}
	s := grow[T](d, nil, n)
	for i := range s {
		s[i] = read(d)
		if d.err != nil {
			return nil
		}
	}
	return s
}

func readArrayInto[T any](d *Decoder, what string, minSize int, read func(*Decoder, *T)) []T {
	n := d.ReadArrayLength(what, minSize)
	if n < 0 {
		return nil
	}
	s := grow[T](d, nil, n)
	for i := range s {
		read(d, &s[i])
		if d.err != nil {
			return nil
		}
	}
	return s
}

// WriteVariant writes v.
func (e *Encoder) WriteVariant(v *Variant) {
	mask := byte(v.typ)
	if v.array {
		mask |= variantArray
		if v.ArrayDimensions() != nil {
			mask |= variantArrayDims
		}
	}
	e.b = append(e.b, mask)
	if !v.array {
		e.writeVariantScalar(v)
		return
	}
	if !e.enter("Variant") {
		return
	}
	defer e.leave()
	e.writeArray(v.typ, v.arrayValue())
	if dims := v.ArrayDimensions(); dims != nil {
		e.WriteInt32Array(dims)
	}
}

func (e *Encoder) writeVariantScalar(v *Variant) {
	switch v.typ {
	case TypeNull:
	case TypeBoolean, TypeSByte, TypeByte:
		e.b = append(e.b, byte(v.n))
	case TypeInt16, TypeUInt16:
		e.WriteUInt16(uint16(v.n))
	case TypeInt32, TypeUInt32, TypeFloat, TypeStatusCode:
		e.WriteUInt32(uint32(v.n))
	case TypeInt64, TypeUInt64, TypeDouble, TypeDateTime:
		e.WriteUInt64(v.n)
	case TypeString, TypeXmlElement:
		e.WriteStringNull(v.str(), false)
	default:
		if !e.enter("Variant") {
			return
		}
		switch x := v.x.(type) {
		case Guid:
			e.WriteGuid(x)
		case []byte:
			e.WriteByteString(x)
		case NodeID:
			e.WriteNodeID(x)
		case ExpandedNodeID:
			e.WriteExpandedNodeID(x)
		case QualifiedName:
			e.WriteQualifiedName(x)
		case LocalizedText:
			e.WriteLocalizedText(x)
		case *ExtensionObject:
			e.WriteExtensionObject(x)
		case *DataValue:
			e.WriteDataValue(x)
		case *DiagnosticInfo:
			e.WriteDiagnosticInfo(x)
		default:
			e.Fail("Variant", fmt.Errorf("%T as %v: %w", v.x, v.typ, errUnknownType))
		}
		e.leave()
	}
}

func (e *Encoder) writeArray(t TypeID, val any) {
	switch a := val.(type) {
	case []bool:
		e.WriteBooleanArray(a)
	case []int8:
		e.WriteSByteArray(a)
	case []byte:
		e.WriteByteArray(a)
	case []int16:
		e.WriteInt16Array(a)
	case []uint16:
		e.WriteUInt16Array(a)
	case []int32:
		e.WriteInt32Array(a)
	case []uint32:
		e.WriteUInt32Array(a)
	case []int64:
		e.WriteInt64Array(a)
	case []uint64:
		e.WriteUInt64Array(a)
	case []float32:
		e.WriteFloatArray(a)
	case []float64:
		e.WriteDoubleArray(a)
	case []string:
		e.WriteStringArray(a)
	case []DateTime:
		e.WriteDateTimeArray(a)
	case []StatusCode:
		e.WriteStatusCodeArray(a)
	case []Guid:
		writeArrayOf(e, a, (*Encoder).WriteGuid)
	case [][]byte:
		writeArrayOf(e, a, (*Encoder).WriteByteString)
	case []XmlElement:
		writeArrayOf(e, a, (*Encoder).WriteXmlElement)
	case []NodeID:
		writeArrayOf(e, a, (*Encoder).WriteNodeID)
	case []ExpandedNodeID:
		writeArrayOf(e, a, (*Encoder).WriteExpandedNodeID)
	case []QualifiedName:
		writeArrayOf(e, a, (*Encoder).WriteQualifiedName)
	case []LocalizedText:
		writeArrayOf(e, a, (*Encoder).WriteLocalizedText)
	case []ExtensionObject:
		writeArrayPtr(e, a, (*Encoder).WriteExtensionObject)
	case []DataValue:
		writeArrayPtr(e, a, (*Encoder).WriteDataValue)
	case []Variant:
		writeArrayPtr(e, a, (*Encoder).WriteVariant)
	case []DiagnosticInfo:
		writeArrayPtr(e, a, (*Encoder).WriteDiagnosticInfo)
	default:
		e.Fail("Variant", fmt.Errorf("array %T as %v: %w", val, t, errUnknownType))
	}
}

func writeArrayOf[T any](e *Encoder, s []T, write func(*Encoder, T)) {
	if s == nil {
		e.WriteInt32(-1)
		return
	}
	e.WriteInt32(int32(len(s)))
	for _, v := range s {
		write(e, v)
	}
}

func writeArrayPtr[T any](e *Encoder, s []T, write func(*Encoder, *T)) {
	if s == nil {
		e.WriteInt32(-1)
		return
	}
	e.WriteInt32(int32(len(s)))
	for i := range s {
		write(e, &s[i])
	}
}

// String formats the value for logs and the CLI.
func (v Variant) String() string {
	if v.typ == TypeNull {
		return "null"
	}
	if dims := v.ArrayDimensions(); dims != nil {
		return fmt.Sprintf("%v%v", v.Value(), dims)
	}
	return fmt.Sprint(v.Value())
}
