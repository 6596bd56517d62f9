package sparkplug

import (
	"strconv"

	"github.com/uagate/gateway/uastack/ua"
)

// DataType is a Sparkplug B datatype (sparkplug_b.proto's DataType enum).
type DataType uint32

// The Sparkplug B datatypes the gateway publishes (Sparkplug 3.0 §6.4.16).
const (
	Unknown       DataType = 0
	Int8          DataType = 1
	Int16         DataType = 2
	Int32         DataType = 3
	Int64         DataType = 4
	UInt8         DataType = 5
	UInt16        DataType = 6
	UInt32        DataType = 7
	UInt64        DataType = 8
	Float         DataType = 9
	Double        DataType = 10
	Boolean       DataType = 11
	String        DataType = 12
	DateTime      DataType = 13
	Text          DataType = 14
	UUID          DataType = 15
	Bytes         DataType = 17
	Int8Array     DataType = 22
	Int16Array    DataType = 23
	Int32Array    DataType = 24
	Int64Array    DataType = 25
	UInt8Array    DataType = 26
	UInt16Array   DataType = 27
	UInt32Array   DataType = 28
	UInt64Array   DataType = 29
	FloatArray    DataType = 30
	DoubleArray   DataType = 31
	BooleanArray  DataType = 32
	StringArray   DataType = 33
	DateTimeArray DataType = 34
)

// scalarTypes maps an OPC UA built-in type to the Sparkplug datatype of its
// scalars, arrayTypes to that of its arrays. Types Sparkplug has no place
// for are published as their text: node ids, qualified names and localized
// texts in their OPC UA text form, structures (ExtensionObject, DataValue,
// Variant, DiagnosticInfo) as their OPC UA JSON (Part 6, compact). A
// ByteString is Bytes, and in an array its base64 text.
var scalarTypes = [ua.TypeDiagnosticInfo + 1]DataType{
	ua.TypeNull:            String,
	ua.TypeBoolean:         Boolean,
	ua.TypeSByte:           Int8,
	ua.TypeByte:            UInt8,
	ua.TypeInt16:           Int16,
	ua.TypeUInt16:          UInt16,
	ua.TypeInt32:           Int32,
	ua.TypeUInt32:          UInt32,
	ua.TypeInt64:           Int64,
	ua.TypeUInt64:          UInt64,
	ua.TypeFloat:           Float,
	ua.TypeDouble:          Double,
	ua.TypeString:          String,
	ua.TypeDateTime:        DateTime,
	ua.TypeGuid:            UUID,
	ua.TypeByteString:      Bytes,
	ua.TypeXmlElement:      String,
	ua.TypeNodeID:          String,
	ua.TypeExpandedNodeID:  String,
	ua.TypeStatusCode:      UInt32,
	ua.TypeQualifiedName:   String,
	ua.TypeLocalizedText:   String,
	ua.TypeExtensionObject: String,
	ua.TypeDataValue:       String,
	ua.TypeVariant:         String,
	ua.TypeDiagnosticInfo:  String,
}

var arrayTypes = [ua.TypeDiagnosticInfo + 1]DataType{
	ua.TypeNull:            StringArray,
	ua.TypeBoolean:         BooleanArray,
	ua.TypeSByte:           Int8Array,
	ua.TypeByte:            UInt8Array,
	ua.TypeInt16:           Int16Array,
	ua.TypeUInt16:          UInt16Array,
	ua.TypeInt32:           Int32Array,
	ua.TypeUInt32:          UInt32Array,
	ua.TypeInt64:           Int64Array,
	ua.TypeUInt64:          UInt64Array,
	ua.TypeFloat:           FloatArray,
	ua.TypeDouble:          DoubleArray,
	ua.TypeString:          StringArray,
	ua.TypeDateTime:        DateTimeArray,
	ua.TypeGuid:            StringArray,
	ua.TypeByteString:      StringArray,
	ua.TypeXmlElement:      StringArray,
	ua.TypeNodeID:          StringArray,
	ua.TypeExpandedNodeID:  StringArray,
	ua.TypeStatusCode:      UInt32Array,
	ua.TypeQualifiedName:   StringArray,
	ua.TypeLocalizedText:   StringArray,
	ua.TypeExtensionObject: StringArray,
	ua.TypeDataValue:       StringArray,
	ua.TypeVariant:         StringArray,
	ua.TypeDiagnosticInfo:  StringArray,
}

// DataTypeOf returns the Sparkplug datatype values of OPC UA built-in type t
// are published as (arrays and matrices, flattened, when array). The null
// type, a field whose type is not known yet, is String.
func DataTypeOf(t ua.TypeID, array bool) DataType {
	if int(t) >= len(scalarTypes) {
		return String
	}
	if array {
		return arrayTypes[t]
	}
	return scalarTypes[t]
}

// String returns the datatype's name in sparkplug_b.proto.
func (t DataType) String() string {
	if int(t) < len(dataTypeNames) && dataTypeNames[t] != "" {
		return dataTypeNames[t]
	}
	return "DataType(" + strconv.FormatUint(uint64(t), 10) + ")"
}

var dataTypeNames = [...]string{
	Unknown: "Unknown", Int8: "Int8", Int16: "Int16", Int32: "Int32", Int64: "Int64",
	UInt8: "UInt8", UInt16: "UInt16", UInt32: "UInt32", UInt64: "UInt64", Float: "Float",
	Double: "Double", Boolean: "Boolean", String: "String", DateTime: "DateTime", Text: "Text",
	UUID: "UUID", 16: "DataSet", Bytes: "Bytes", 18: "File", 19: "Template", 20: "PropertySet",
	21: "PropertySetList", Int8Array: "Int8Array", Int16Array: "Int16Array", Int32Array: "Int32Array",
	Int64Array: "Int64Array", UInt8Array: "UInt8Array", UInt16Array: "UInt16Array",
	UInt32Array: "UInt32Array", UInt64Array: "UInt64Array", FloatArray: "FloatArray",
	DoubleArray: "DoubleArray", BooleanArray: "BooleanArray", StringArray: "StringArray",
	DateTimeArray: "DateTimeArray",
}
