package jsonenc

import (
	"fmt"
	"math"

	"github.com/uagate/gateway/uastack/ua"
)

// StructWriter is implemented by structured types that write themselves as
// OPC UA JSON: WriteJSONFields writes the structure's members (FieldName and a
// value, or the Field* helpers) into the object the caller has opened. An
// ExtensionObject whose Value implements it is written with a JSON body;
// otherwise its binary encoding is written as UaBody.
type StructWriter interface {
	WriteJSONFields(e *Encoder)
}

// errBadVariant reports a Variant payload of an unexpected Go type.
var errBadVariant = fmt.Errorf("jsonenc: variant payload does not match its type")

// variantValueIsNull reports whether a scalar Variant holds the NULL value of
// a nullable type, whose Value member is omitted (Part 6 §5.4.2.17).
func variantValueIsNull(v *ua.Variant) bool {
	if v.IsArray() {
		return false
	}
	switch v.Type() {
	case ua.TypeNull:
		return true
	case ua.TypeDateTime:
		return v.RawBits() == 0
	case ua.TypeByteString:
		p, _ := v.Value().([]byte)
		return p == nil
	case ua.TypeGuid:
		g, _ := v.Value().(ua.Guid)
		return g.IsNull()
	case ua.TypeNodeID:
		n, _ := v.Value().(ua.NodeID)
		return n.IsNull()
	case ua.TypeExpandedNodeID:
		x, _ := v.Value().(ua.ExpandedNodeID)
		return x.IsNull()
	case ua.TypeQualifiedName:
		q, _ := v.Value().(ua.QualifiedName)
		return q.IsNull()
	case ua.TypeLocalizedText:
		l, _ := v.Value().(ua.LocalizedText)
		return l.IsNull()
	case ua.TypeExtensionObject:
		eo, _ := v.Value().(*ua.ExtensionObject)
		return eo == nil || eo.IsNull()
	case ua.TypeDataValue:
		dv, _ := v.Value().(*ua.DataValue)
		return dv == nil
	case ua.TypeDiagnosticInfo:
		di, _ := v.Value().(*ua.DiagnosticInfo)
		return di == nil
	}
	return false
}

// typelessNull reports whether a scalar Variant written without its type (no
// UaType: NonReversible104, collapsed DataSet fields) is written as null or left
// out. The null DateTime is not: without a type, null or an absent Value reads as
// "no value", not as the minimum DateTime, so it is written as
// "0001-01-01T00:00:00Z" (Part 6 §5.4.2.6), as both reference stacks do.
func typelessNull(v *ua.Variant) bool {
	return variantValueIsNull(v) && v.Type() != ua.TypeDateTime
}

// WriteVariant writes a Variant as a value or array element:
//
//	Compact, Verbose:  {"UaType":6,"Value":42}, matrices with "Dimensions"
//	Reversible104:     {"Type":6,"Body":42}
//	NonReversible104:  42 (matrices as nested arrays)
//
// A null Variant is written as null. The Value member is left out for the
// NULL value of a nullable type ({"UaType":12} is a NULL String is not
// possible in Go, but {"UaType":15} is a NULL ByteString).
func (e *Encoder) WriteVariant(v *ua.Variant) {
	if v.IsNull() {
		e.WriteNull()
		return
	}
	switch e.opts.Mode {
	case NonReversible104:
		e.WriteVariantBody(v)
		return
	case Reversible104:
		e.StartObject()
		e.writeVariantMembers(v, "Type", "Body")
		e.EndObject()
		return
	}
	e.StartObject()
	e.writeVariantMembers(v, "UaType", "Value")
	e.EndObject()
}

// writeVariantMembers writes the UaType/Value/Dimensions members (or the
// legacy Type/Body/Dimensions) into an open object. A null Variant writes
// nothing.
func (e *Encoder) writeVariantMembers(v *ua.Variant, typeKey, valueKey string) {
	t := v.Type()
	if t == ua.TypeNull {
		return
	}
	e.fieldNameASCII(typeKey)
	e.WriteUint(uint64(t))
	if variantValueIsNull(v) {
		return
	}
	e.fieldNameASCII(valueKey)
	if v.IsArray() {
		e.writeVariantArrayFlat(v)
		if dims := v.ArrayDimensions(); len(dims) > 1 {
			e.fieldNameASCII("Dimensions")
			e.writeInt32Slice(dims)
		}
		return
	}
	e.writeVariantScalar(v)
}

// WriteVariantBody writes only the value of a Variant, without type: the
// NonReversible104 form and the "collapsed" form of Part 14 Verbose DataSet
// fields. Scalars as their type's JSON; arrays as JSON arrays; matrices as
// {"Array":[...],"Dimensions":[...]} in 1.05 modes (Part 6 §5.4.5) and nested
// arrays in NonReversible104. A null Variant is null.
func (e *Encoder) WriteVariantBody(v *ua.Variant) {
	if v.IsNull() {
		e.WriteNull()
		return
	}
	if !v.IsArray() {
		if typelessNull(v) {
			e.WriteNull()
			return
		}
		e.writeVariantScalar(v)
		return
	}
	dims := v.ArrayDimensions()
	if len(dims) <= 1 {
		e.writeVariantArrayFlat(v)
		return
	}
	if e.opts.Mode == NonReversible104 {
		e.writeNested(v, dims, 0, 0)
		return
	}
	e.StartObject()
	e.fieldNameASCII("Array")
	e.writeVariantArrayFlat(v)
	e.fieldNameASCII("Dimensions")
	e.writeInt32Slice(dims)
	e.EndObject()
}

// writeNested writes the elements of a matrix from flat index off as nested
// arrays, the first dimension outermost.
func (e *Encoder) writeNested(v *ua.Variant, dims []int32, level int, off int) {
	e.StartArray()
	if e.err != nil {
		return
	}
	stride := 1
	for _, d := range dims[level+1:] {
		stride *= int(d)
	}
	for i := 0; i < int(dims[level]); i++ {
		if level == len(dims)-1 {
			e.writeArrayElement(v, off+i)
		} else {
			e.writeNested(v, dims, level+1, off+i*stride)
		}
	}
	e.EndArray()
}

// writeVariantScalar writes the value of a non-array, non-null Variant.
func (e *Encoder) writeVariantScalar(v *ua.Variant) {
	n := v.RawBits()
	switch v.Type() {
	case ua.TypeBoolean:
		e.WriteBoolean(n != 0)
	case ua.TypeSByte, ua.TypeInt16, ua.TypeInt32:
		e.WriteInt(int64(n))
	case ua.TypeByte, ua.TypeUInt16, ua.TypeUInt32:
		e.WriteUint(n)
	case ua.TypeInt64:
		e.WriteInt64(int64(n))
	case ua.TypeUInt64:
		e.WriteUInt64(n)
	case ua.TypeFloat:
		e.WriteFloat(math.Float32frombits(uint32(n)))
	case ua.TypeDouble:
		e.WriteDouble(math.Float64frombits(n))
	case ua.TypeString, ua.TypeXmlElement:
		e.WriteString(v.Str())
	case ua.TypeDateTime:
		e.WriteDateTime(ua.DateTime(n))
	case ua.TypeStatusCode:
		e.WriteStatusCode(ua.StatusCode(n))
	default:
		switch x := v.Value().(type) {
		case ua.Guid:
			e.WriteGuid(x)
		case []byte:
			e.WriteByteString(x)
		case ua.NodeID:
			e.writeNodeID(&x)
		case ua.ExpandedNodeID:
			e.writeExpandedNodeID(&x)
		case ua.QualifiedName:
			e.WriteQualifiedName(x)
		case ua.LocalizedText:
			e.WriteLocalizedText(x)
		case *ua.ExtensionObject:
			e.WriteExtensionObject(x)
		case *ua.DataValue:
			e.WriteDataValue(x)
		case *ua.DiagnosticInfo:
			e.WriteDiagnosticInfo(x)
		default:
			e.WriteNull()
			e.Fail(fmt.Errorf("%w: %T as %v", errBadVariant, x, v.Type()))
		}
	}
}

// writeVariantArrayFlat writes the elements of an array Variant as one JSON
// array (matrices flattened in row-major order).
func (e *Encoder) writeVariantArrayFlat(v *ua.Variant) {
	e.StartArray()
	if e.err != nil {
		return
	}
	switch a := v.Value().(type) {
	case []bool:
		for _, x := range a {
			e.WriteBoolean(x)
		}
	case []int8:
		for _, x := range a {
			e.WriteInt(int64(x))
		}
	case []byte:
		for _, x := range a {
			e.WriteUint(uint64(x))
		}
	case []int16:
		for _, x := range a {
			e.WriteInt(int64(x))
		}
	case []uint16:
		for _, x := range a {
			e.WriteUint(uint64(x))
		}
	case []int32:
		for _, x := range a {
			e.WriteInt(int64(x))
		}
	case []uint32:
		for _, x := range a {
			e.WriteUint(uint64(x))
		}
	case []int64:
		for _, x := range a {
			e.WriteInt64(x)
		}
	case []uint64:
		for _, x := range a {
			e.WriteUInt64(x)
		}
	case []float32:
		for _, x := range a {
			e.WriteFloat(x)
		}
	case []float64:
		for _, x := range a {
			e.WriteDouble(x)
		}
	case []string:
		for _, x := range a {
			e.WriteString(x)
		}
	case []ua.DateTime:
		for _, x := range a {
			if x <= 0 {
				e.WriteNull()
			} else {
				e.WriteDateTime(x)
			}
		}
	default:
		n := v.ArrayLen()
		for i := 0; i < n; i++ {
			e.writeArrayElement(v, i)
		}
	}
	e.EndArray()
}

// writeArrayElement writes element i of an array Variant.
func (e *Encoder) writeArrayElement(v *ua.Variant, i int) {
	switch a := v.Value().(type) {
	case []bool:
		e.WriteBoolean(a[i])
	case []int8:
		e.WriteInt(int64(a[i]))
	case []byte:
		e.WriteUint(uint64(a[i]))
	case []int16:
		e.WriteInt(int64(a[i]))
	case []uint16:
		e.WriteUint(uint64(a[i]))
	case []int32:
		e.WriteInt(int64(a[i]))
	case []uint32:
		e.WriteUint(uint64(a[i]))
	case []int64:
		e.WriteInt64(a[i])
	case []uint64:
		e.WriteUInt64(a[i])
	case []float32:
		e.WriteFloat(a[i])
	case []float64:
		e.WriteDouble(a[i])
	case []string:
		e.WriteString(a[i])
	case []ua.DateTime:
		if a[i] <= 0 {
			e.WriteNull()
		} else {
			e.WriteDateTime(a[i])
		}
	case []ua.Guid:
		e.WriteGuid(a[i])
	case [][]byte:
		e.WriteByteString(a[i])
	case []ua.XmlElement:
		e.WriteString(string(a[i]))
	case []ua.NodeID:
		e.writeNodeID(&a[i])
	case []ua.ExpandedNodeID:
		e.writeExpandedNodeID(&a[i])
	case []ua.StatusCode:
		e.WriteStatusCode(a[i])
	case []ua.QualifiedName:
		e.WriteQualifiedName(a[i])
	case []ua.LocalizedText:
		e.WriteLocalizedText(a[i])
	case []ua.ExtensionObject:
		e.WriteExtensionObject(&a[i])
	case []ua.DataValue:
		e.WriteDataValue(&a[i])
	case []ua.Variant:
		e.WriteVariant(&a[i])
	case []ua.DiagnosticInfo:
		e.WriteDiagnosticInfo(&a[i])
	default:
		e.WriteNull()
		e.Fail(fmt.Errorf("%w: array %T as %v", errBadVariant, a, v.Type()))
	}
}

// WriteDataValue writes a DataValue as a value or array element:
//
//	1.05:   {"UaType":11,"Value":25.5,"Status":{..},"SourceTimestamp":..,
//	         "SourcePicoseconds":..,"ServerTimestamp":..,"ServerPicoseconds":..}
//	1.04:   {"Value":<Variant>,"Status":..,"SourceTimestamp":..,"SourcePicoSeconds":..,...}
//
// A Good status, null timestamps and zero picoseconds are left out;
// picoseconds are written only with their timestamp. nil is written as null.
func (e *Encoder) WriteDataValue(dv *ua.DataValue) {
	if dv == nil {
		e.WriteNull()
		return
	}
	e.StartObject()
	e.WriteDataValueMembers(dv, DataValueAll)
	e.EndObject()
}

// DataValueMask selects the members of a DataValue to write. It has the bit
// layout of the Part 14 DataSetFieldContentMask.
type DataValueMask uint32

const (
	DataValueStatus            DataValueMask = 0x01
	DataValueSourceTimestamp   DataValueMask = 0x02
	DataValueServerTimestamp   DataValueMask = 0x04
	DataValueSourcePicoseconds DataValueMask = 0x08
	DataValueServerPicoseconds DataValueMask = 0x10
	DataValueAll               DataValueMask = 0x1F
)

// WriteDataValueMembers writes the members of dv selected by mask into an
// open object, with the value as in WriteDataValue.
func (e *Encoder) WriteDataValueMembers(dv *ua.DataValue, mask DataValueMask) {
	switch e.opts.Mode {
	case Reversible104, NonReversible104:
		if !dv.Value.IsNull() {
			e.fieldNameASCII("Value")
			e.WriteVariant(&dv.Value)
		}
	default:
		e.writeVariantMembers(&dv.Value, "UaType", "Value")
	}
	e.writeDataValueTail(dv, mask)
}

// writeDataValueTail writes status, timestamps and picoseconds.
func (e *Encoder) writeDataValueTail(dv *ua.DataValue, mask DataValueMask) {
	if mask&DataValueStatus != 0 && dv.Status != 0 {
		e.fieldNameASCII("Status")
		e.WriteStatusCode(dv.Status)
	}
	srcPico, srvPico := "SourcePicoseconds", "ServerPicoseconds"
	if !e.opts.Mode.is105() {
		srcPico, srvPico = "SourcePicoSeconds", "ServerPicoSeconds"
	}
	if mask&DataValueSourceTimestamp != 0 && dv.SourceTimestamp > 0 {
		e.fieldNameASCII("SourceTimestamp")
		e.WriteDateTime(dv.SourceTimestamp)
		if mask&DataValueSourcePicoseconds != 0 && dv.SourcePicoseconds != 0 {
			e.fieldNameASCII(srcPico)
			e.WriteUint(uint64(dv.SourcePicoseconds))
		}
	}
	if mask&DataValueServerTimestamp != 0 && dv.ServerTimestamp > 0 {
		e.fieldNameASCII("ServerTimestamp")
		e.WriteDateTime(dv.ServerTimestamp)
		if mask&DataValueServerPicoseconds != 0 && dv.ServerPicoseconds != 0 {
			e.fieldNameASCII(srvPico)
			e.WriteUint(uint64(dv.ServerPicoseconds))
		}
	}
}

// extensionTypeIDs returns the DataType NodeId (1.05 UaTypeId) and the
// encoding NodeId (1.04 TypeId) of eo, as far as they are known.
func extensionTypeIDs(eo *ua.ExtensionObject) (dataType, encoding ua.ExpandedNodeID) {
	encoding = eo.TypeID
	dataType = eo.TypeID
	if s, ok := eo.Value.(ua.Structure); ok {
		dataType = ua.NewExpandedNodeID(ua.NewNumericNodeID(0, s.DataTypeID()))
		if encoding.IsNull() {
			encoding = ua.NewExpandedNodeID(ua.NewNumericNodeID(0, s.BinaryEncodingID()))
		}
		return
	}
	id := eo.TypeID
	if id.ServerIndex == 0 && id.NamespaceURI == "" && id.Namespace == 0 && id.Type == ua.IDNumeric {
		if info, ok := ua.TypeByEncodingID(id.Numeric); ok {
			dataType = ua.NewExpandedNodeID(ua.NewNumericNodeID(0, info.DataTypeID))
		}
	}
	return
}

// binaryBody encodes eo's Value in UA Binary into the Encoder's scratch buffer.
func (e *Encoder) binaryBody(v ua.Encodable) []byte {
	if e.bin == nil {
		e.bin = ua.NewEncoder(e.binBuf)
	} else {
		clear(e.binBuf)
		e.bin.Reset(e.binBuf)
	}
	v.Encode(e.bin)
	if err := e.bin.Err(); err != nil {
		e.Fail(fmt.Errorf("jsonenc: binary body: %w", err))
	}
	e.binBuf = e.bin.Bytes()
	return e.binBuf
}

// WriteExtensionObject writes an ExtensionObject (Part 6 §5.4.2.16):
//
//	1.05:   {"UaTypeId":"<DataType NodeId>", <fields>} for a StructWriter Value,
//	        {"UaTypeId":..,"UaEncoding":1|2,"UaBody":"<base64>"} otherwise
//	R104:   {"TypeId":<NodeId object>,"Body":{<fields>}} or with "Encoding":1|2
//	NR104:  {<fields>} or the base64 body
//
// nil and an empty ExtensionObject are written as null.
func (e *Encoder) WriteExtensionObject(eo *ua.ExtensionObject) {
	if eo == nil || eo.IsNull() {
		e.WriteNull()
		return
	}
	dataType, encID := extensionTypeIDs(eo)
	var writeFields func(e *Encoder)
	if sw, ok := eo.Value.(StructWriter); ok {
		writeFields = sw.WriteJSONFields
	} else if c, _, ok := jsonCodecFor(eo.Value); ok {
		v := eo.Value
		writeFields = func(e *Encoder) { c.write(e, v) }
	}
	isJSON := writeFields != nil
	var body []byte
	enc := eo.Encoding
	if !isJSON {
		if eo.Value != nil {
			body = e.binaryBody(eo.Value)
			enc = ua.ExtensionObjectBinary
		} else {
			body = eo.Body
			if enc == ua.ExtensionObjectEmpty {
				enc = ua.ExtensionObjectBinary
			}
		}
	}
	switch e.opts.Mode {
	case NonReversible104:
		if isJSON {
			e.StartObject()
			writeFields(e)
			e.EndObject()
		} else {
			e.WriteByteString(body)
		}
		return
	case Reversible104:
		e.StartObject()
		e.fieldNameASCII("TypeId")
		if isJSON {
			// A JSON body has no binary encoding id; H.7 allows the DataType id.
			encID = dataType
		}
		e.writeExpandedNodeID(&encID)
		if !isJSON {
			e.fieldNameASCII("Encoding")
			e.WriteUint(uint64(enc))
		}
		e.fieldNameASCII("Body")
		if isJSON {
			e.StartObject()
			writeFields(e)
			e.EndObject()
		} else {
			e.WriteByteString(body)
		}
		e.EndObject()
		return
	}
	e.StartObject()
	if !dataType.IsNull() {
		e.fieldNameASCII("UaTypeId")
		e.writeExpandedNodeID(&dataType)
	}
	if isJSON {
		writeFields(e)
	} else {
		e.fieldNameASCII("UaEncoding")
		e.WriteUint(uint64(enc))
		e.fieldNameASCII("UaBody")
		e.WriteByteString(body)
	}
	e.EndObject()
}
