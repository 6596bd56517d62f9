package jsonenc

import (
	"math"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// Shared fixtures: a namespace table and values of every built-in type with
// their edge cases.

var testNamespaces = []string{UANamespace, "http://x.org/UA/", "urn:semi;colon%"}
var testServers = []string{"urn:this", "urn:srv"}

var (
	testTime  = ua.NewDateTime(time.Date(2024, 5, 1, 10, 15, 30, 123456700, time.UTC))
	testTime2 = ua.NewDateTime(time.Date(2024, 5, 1, 10, 15, 30, 200000000, time.UTC))
	testGuid  = ua.Guid{Data1: 0x09087e75, Data2: 0x8e5e, Data3: 0x499b, Data4: [8]byte{0x95, 0x4f, 0xf2, 0xa9, 0x60, 0x3d, 0xb2, 0x8a}}
)

type valueCase struct {
	name string
	v    ua.Variant
}

func mustMatrix(flat any, dims ...int32) ua.Variant {
	v, err := ua.NewMatrixVariant(flat, dims)
	if err != nil {
		panic(err)
	}
	return v
}

func dvVariant(dv ua.DataValue) ua.Variant { return ua.MustVariant(&dv) }

// variantCases covers every built-in type as a Variant, with edge cases.
func variantCases() []valueCase {
	v := func(x any) ua.Variant { return ua.MustVariant(x) }
	var sb, b, i16, u16, i32, u32, f, sc ua.Variant
	sb.SetSByte(-5)
	b.SetByte(255)
	i16.SetInt16(-32768)
	u16.SetUInt16(65535)
	i32.SetInt32(-2147483648)
	u32.SetUInt32(4294967295)
	f.SetFloat(1.1)
	sc.SetStatusCode(ua.StatusBadNodeIdUnknown)
	var good, uncertain ua.Variant
	good.SetStatusCode(ua.StatusGood)
	uncertain.SetStatusCode(ua.StatusUncertain)
	var xml ua.Variant
	xml.SetXmlElement("<A>Hot</A>")
	return []valueCase{
		{"Boolean.true", ua.NewBooleanVariant(true)},
		{"Boolean.false", ua.NewBooleanVariant(false)},
		{"SByte", sb},
		{"Byte", b},
		{"Int16.min", i16},
		{"UInt16.max", u16},
		{"Int32.min", i32},
		{"Int32.zero", ua.NewInt32Variant(0)},
		{"UInt32.max", u32},
		{"Int64.one", ua.NewInt64Variant(1)},
		{"Int64.min", ua.NewInt64Variant(math.MinInt64)},
		{"Int64.max", ua.NewInt64Variant(math.MaxInt64)},
		{"UInt64.max", v(uint64(math.MaxUint64))},
		{"Float", f},
		{"Double", ua.NewDoubleVariant(25.5)},
		{"Double.small", ua.NewDoubleVariant(1e-7)},
		{"Double.large", ua.NewDoubleVariant(1e21)},
		{"Double.negzero", ua.NewDoubleVariant(math.Copysign(0, -1))},
		{"Double.NaN", ua.NewDoubleVariant(math.NaN())},
		{"Double.Inf", ua.NewDoubleVariant(math.Inf(1))},
		{"Double.-Inf", ua.NewDoubleVariant(math.Inf(-1))},
		{"Float.NaN", ua.NewFloatVariant(float32(math.NaN()))},
		{"String", ua.NewStringVariant("abc")},
		{"String.empty", ua.NewStringVariant("")},
		{"String.escapes", ua.NewStringVariant("q\"b\\s/\b\f\n\r\t\x01\x1f\x7f")},
		{"String.unicode", ua.NewStringVariant("ÄÖÜ € 😀 \u2028\u2029")},
		{"String.invalidUTF8", ua.NewStringVariant("a\xffb\xc0")},
		{"DateTime", ua.NewDateTimeVariant(testTime)},
		{"DateTime.whole", ua.NewDateTimeVariant(ua.NewDateTime(time.Date(2021, 9, 14, 7, 14, 30, 0, time.UTC)))},
		{"DateTime.null", ua.NewDateTimeVariant(0)},
		{"DateTime.max", ua.NewDateTimeVariant(ua.MaxDateTime)},
		{"Guid", v(testGuid)},
		{"Guid.null", v(ua.Guid{})},
		{"ByteString", v([]byte{0, 1, 2})},
		{"ByteString.empty", v([]byte{})},
		{"ByteString.null", v([]byte(nil))},
		{"XmlElement", xml},
		{"NodeId.ns0", v(ua.NewNumericNodeID(0, 2255))},
		{"NodeId.string", v(ua.NewStringNodeID(1, "Foo;bar=1"))},
		{"NodeId.uriEscape", v(ua.NewNumericNodeID(2, 5))},
		{"NodeId.unknownNs", v(ua.NewStringNodeID(7, "Foo"))},
		{"NodeId.guid", v(ua.NewGuidNodeID(1, testGuid))},
		{"NodeId.opaque", v(ua.NewOpaqueNodeID(1, []byte{0x33, 0xf4, 0x5b, 0x28, 0x1b}))},
		{"NodeId.null", v(ua.NodeID{})},
		{"ExpandedNodeId.local", v(ua.NewExpandedNodeID(ua.NewNumericNodeID(1, 5)))},
		{"ExpandedNodeId.uri", v(ua.ExpandedNodeID{NodeID: ua.NewStringNodeID(0, "t"), NamespaceURI: "urn:a"})},
		{"ExpandedNodeId.server", v(ua.ExpandedNodeID{NodeID: ua.NewStringNodeID(0, "t"), NamespaceURI: "urn:a", ServerIndex: 1})},
		{"ExpandedNodeId.serverUnknown", v(ua.ExpandedNodeID{NodeID: ua.NewStringNodeID(0, "t"), NamespaceURI: "urn:a", ServerIndex: 3})},
		{"StatusCode.bad", sc},
		{"StatusCode.good", good},
		{"StatusCode.uncertain", uncertain},
		{"QualifiedName.ns0", v(ua.NewQualifiedName(0, "Name"))},
		{"QualifiedName.ns1", v(ua.NewQualifiedName(1, "PipeX001"))},
		{"QualifiedName.unknownNs", v(ua.NewQualifiedName(9, "PipeX001"))},
		{"LocalizedText", v(ua.LocalizedText{Locale: "en", Text: "Hello"})},
		{"LocalizedText.noLocale", v(ua.LocalizedText{Text: "Hello"})},
		{"ExtensionObject.binary", v(ua.ExtensionObject{TypeID: ua.NewExpandedNodeID(ua.NewNumericNodeID(1, 5001)), Encoding: ua.ExtensionObjectBinary, Body: []byte{1, 2, 3}})},
		{"ExtensionObject.json", v(&ua.Range{Low: -1.5, High: 100})},
		{"DataValue", dvVariant(ua.DataValue{Value: ua.NewDoubleVariant(25.5), Status: ua.StatusUncertainLastUsableValue,
			SourceTimestamp: testTime, SourcePicoseconds: 4200, ServerTimestamp: testTime2})},
		{"DataValue.empty", dvVariant(ua.DataValue{})},
		{"DiagnosticInfo", v(&ua.DiagnosticInfo{SymbolicID: 2, LocalizedText: 3, InnerStatusCode: 0x80000000, AdditionalInfo: "more",
			Mask:                ua.DiagHasSymbolicID | ua.DiagHasLocalizedText | ua.DiagHasInnerStatusCode | ua.DiagHasAdditionalInfo,
			InnerDiagnosticInfo: &ua.DiagnosticInfo{NamespaceURI: 1, Mask: ua.DiagHasNamespaceURI}})},
		{"Int32[]", v([]int32{1, 2, 3})},
		{"Int32[].empty", v([]int32{})},
		{"Int64[]", v([]int64{-1, 9007199254740993})},
		{"Double[]", v([]float64{1.5, math.NaN(), math.Inf(-1)})},
		{"String[]", v([]string{"a", "", "c"})},
		{"DateTime[]", v([]ua.DateTime{testTime, 0})},
		{"Guid[]", v([]ua.Guid{testGuid, {}})},
		{"ByteString[]", v([][]byte{{1}, nil, {}})},
		{"NodeId[]", v([]ua.NodeID{ua.NewNumericNodeID(0, 85), {}})},
		{"StatusCode[]", v([]ua.StatusCode{0, ua.StatusBadNodeIdUnknown})},
		{"LocalizedText[]", v([]ua.LocalizedText{{Text: "a"}, {}})},
		{"Variant[]", v([]ua.Variant{ua.NewInt32Variant(1), ua.NewStringVariant("x"), {}})},
		{"DataValue[]", v([]ua.DataValue{{Value: ua.NewInt32Variant(1)}, {Status: ua.StatusBadNoData}})},
		{"Matrix.Int32", mustMatrix([]int32{1, 2, 3, 4, 5, 6}, 2, 3)},
		{"Matrix.String", mustMatrix([]string{"a", "b", "c", "d", "e", "f", "g", "h"}, 2, 2, 2)},
	}
}
