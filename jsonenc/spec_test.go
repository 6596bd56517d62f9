package jsonenc

import (
	"math"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// TestSpecRules checks encoder output against the examples and rules of
// Part 6 §5.4 and Annex H as summarised in shared/UA-JSON.md (section numbers
// of that file in the comments). These expectations are written by hand from
// the spec, independently of the golden files.
func TestSpecRules(t *testing.T) {
	ns := func(e *Encoder) {}
	_ = ns
	v := func(x any) *ua.Variant { vv := ua.MustVariant(x); return &vv }
	type tc struct {
		name string
		mode Mode
		f    func(e *Encoder)
		want string
	}
	cases := []tc{
		// §2.3 Int64/UInt64 as strings
		{"Int64 1", Compact, func(e *Encoder) { e.WriteVariant(v(int64(1))) }, `{"UaType":8,"Value":"1"}`},
		{"UInt64 max", Compact, func(e *Encoder) { e.WriteUInt64(math.MaxUint64) }, `"18446744073709551615"`},
		{"Int64 min", Compact, func(e *Encoder) { e.WriteInt64(math.MinInt64) }, `"-9223372036854775808"`},
		// §2.4 special floats as strings
		{"+Inf", Compact, func(e *Encoder) { e.WriteDouble(math.Inf(1)) }, `"Infinity"`},
		{"-Inf", Compact, func(e *Encoder) { e.WriteFloat(float32(math.Inf(-1))) }, `"-Infinity"`},
		{"NaN", Verbose, func(e *Encoder) { e.WriteDouble(math.NaN()) }, `"NaN"`},
		{"25.5", Compact, func(e *Encoder) { e.WriteDouble(25.5) }, `25.5`},
		{"float shortest", Compact, func(e *Encoder) { e.WriteFloat(1.1) }, `1.1`},
		// §2.5 strings
		{"controls", Compact, func(e *Encoder) { e.WriteString("\x00\x1f\x7f\"\\\n") }, `"\u0000\u001f\u007f\"\\\n"`},
		// §2.6 DateTime
		{"DateTime", Compact, func(e *Encoder) {
			e.WriteDateTime(ua.NewDateTime(time.Date(2021, 9, 14, 7, 14, 30, 500000000, time.UTC)))
		}, `"2021-09-14T07:14:30.5Z"`},
		{"DateTime min elem", Compact, func(e *Encoder) { e.WriteDateTime(0) }, `"0001-01-01T00:00:00Z"`},
		{"DateTime max", Compact, func(e *Encoder) { e.WriteDateTime(ua.MaxDateTime) }, `"9999-12-31T23:59:59Z"`},
		{"DateTime null field C", Compact, func(e *Encoder) { e.StartObject(); e.FieldDateTime("T", 0); e.EndObject() }, `{}`},
		{"DateTime null field V", Verbose, func(e *Encoder) { e.StartObject(); e.FieldDateTime("T", 0); e.EndObject() }, `{"T":null}`},
		// §2.7 Guid lowercase; null field omitted / null
		{"Guid", Compact, func(e *Encoder) {
			g, _ := ua.ParseGuid("EBFC352A-3142-4B99-9BBE-89A517D6A77E")
			e.WriteGuid(g)
		}, `"ebfc352a-3142-4b99-9bbe-89a517d6a77e"`},
		// §2.8 ByteString null vs empty
		{"ByteString", Compact, func(e *Encoder) { e.WriteByteString([]byte{0, 1, 2}) }, `"AAEC"`},
		{"ByteString empty", Compact, func(e *Encoder) { e.WriteByteString([]byte{}) }, `""`},
		{"ByteString null field V", Verbose, func(e *Encoder) { e.StartObject(); e.FieldByteString("B", nil); e.EndObject() }, `{"B":null}`},
		// §2.10 NodeId
		{"NodeId ns0", Compact, func(e *Encoder) { e.WriteNodeID(ua.NewNumericNodeID(0, 2255)) }, `"i=2255"`},
		{"NodeId nsu", Compact, func(e *Encoder) { e.WriteNodeID(ua.NewStringNodeID(1, "Foo")) }, `"nsu=http://x.org/UA/;s=Foo"`},
		{"NodeId abnormal", Compact, func(e *Encoder) { e.WriteNodeID(ua.NewStringNodeID(5, "Foo")) }, `"ns=5;s=Foo"`},
		{"NodeId guid", Compact, func(e *Encoder) { e.WriteNodeID(ua.NewGuidNodeID(0, testGuid)) }, `"g=09087e75-8e5e-499b-954f-f2a9603db28a"`},
		{"NodeId opaque", Compact, func(e *Encoder) {
			e.WriteNodeID(ua.NewOpaqueNodeID(0, []byte{0x33, 0xf4, 0x5b, 0x28, 0x1b, 0x11, 0x56, 0x47, 0x8f, 0x09, 0xe3, 0xdc, 0xc7, 0x6e, 0x11, 0x44}))
		}, `"b=M/RbKBsRVkePCePcx24RRA=="`},
		{"NodeId ; in URI", Compact, func(e *Encoder) { e.WriteNodeID(ua.NewNumericNodeID(2, 1)) }, `"nsu=urn:semi%3Bcolon%25;i=1"`},
		{"NodeId R104 numeric", Reversible104, func(e *Encoder) { e.WriteNodeID(ua.NewNumericNodeID(0, 2255)) }, `{"Id":2255}`},
		{"NodeId R104 string", Reversible104, func(e *Encoder) { e.WriteNodeID(ua.NewStringNodeID(1, "Foo")) }, `{"IdType":1,"Id":"Foo","Namespace":1}`},
		{"NodeId NR104 string", NonReversible104, func(e *Encoder) { e.WriteNodeID(ua.NewStringNodeID(1, "Foo")) }, `{"IdType":1,"Id":"Foo","Namespace":"http://x.org/UA/"}`},
		{"NodeId null field C", Compact, func(e *Encoder) { e.StartObject(); e.FieldNodeID("N", ua.NodeID{}); e.EndObject() }, `{}`},
		// §2.11 ExpandedNodeId
		{"ENId svu", Compact, func(e *Encoder) {
			e.WriteExpandedNodeID(ua.ExpandedNodeID{NodeID: ua.NewStringNodeID(0, "t"), NamespaceURI: "urn:a", ServerIndex: 1})
		}, `"svu=urn:srv;nsu=urn:a;s=t"`},
		{"ENId svr", Compact, func(e *Encoder) {
			e.WriteExpandedNodeID(ua.ExpandedNodeID{NodeID: ua.NewStringNodeID(0, "t"), NamespaceURI: "urn:a", ServerIndex: 3})
		}, `"svr=3;nsu=urn:a;s=t"`},
		{"ENId R104", Reversible104, func(e *Encoder) {
			e.WriteExpandedNodeID(ua.NewExpandedNodeID(ua.NewNumericNodeID(1, 5)))
		}, `{"Id":5,"Namespace":1}`},
		{"ENId NR104", NonReversible104, func(e *Encoder) {
			e.WriteExpandedNodeID(ua.NewExpandedNodeID(ua.NewNumericNodeID(1, 5)))
		}, `{"Id":5,"Namespace":"http://x.org/UA/"}`},
		// §2.12 StatusCode
		{"Status C", Compact, func(e *Encoder) { e.WriteStatusCode(ua.StatusBadNotFound) }, `{"Code":2151546880}`},
		{"Status V", Verbose, func(e *Encoder) { e.WriteStatusCode(ua.StatusBadNotFound) }, `{"Code":2151546880,"Symbol":"BadNotFound"}`},
		{"Status R104", Reversible104, func(e *Encoder) { e.WriteStatusCode(ua.StatusBadNotFound) }, `2151546880`},
		{"Status NR104", NonReversible104, func(e *Encoder) { e.WriteStatusCode(ua.StatusBadNotFound) }, `{"Code":2151546880,"Symbol":"BadNotFound"}`},
		{"Status uncertain V", Verbose, func(e *Encoder) { e.WriteStatusCode(ua.StatusUncertain) }, `{"Code":1073741824,"Symbol":"Uncertain"}`},
		{"Status info bits V", Verbose, func(e *Encoder) { e.WriteStatusCode(ua.StatusBadNotFound | 0x0400) }, `{"Code":2151547904,"Symbol":"BadNotFound"}`},
		{"Status good elem", Compact, func(e *Encoder) { e.WriteStatusCode(0) }, `{}`},
		{"Status good field C", Compact, func(e *Encoder) { e.StartObject(); e.FieldStatusCode("S", 0); e.EndObject() }, `{}`},
		{"Status good field V", Verbose, func(e *Encoder) { e.StartObject(); e.FieldStatusCode("S", 0); e.EndObject() }, `{"S":{}}`},
		// §2.13 QualifiedName
		{"QN ns0", Compact, func(e *Encoder) { e.WriteQualifiedName(ua.NewQualifiedName(0, "Name")) }, `"Name"`},
		{"QN nsu", Compact, func(e *Encoder) { e.WriteQualifiedName(ua.NewQualifiedName(1, "PipeX001")) }, `"nsu=http://x.org/UA/;PipeX001"`},
		{"QN abnormal", Compact, func(e *Encoder) { e.WriteQualifiedName(ua.NewQualifiedName(5, "PipeX001")) }, `"5:PipeX001"`},
		{"QN R104", Reversible104, func(e *Encoder) { e.WriteQualifiedName(ua.NewQualifiedName(1, "PipeX001")) }, `{"Name":"PipeX001","Uri":1}`},
		{"QN NR104", NonReversible104, func(e *Encoder) { e.WriteQualifiedName(ua.NewQualifiedName(1, "PipeX001")) }, `{"Name":"PipeX001","Uri":"http://x.org/UA/"}`},
		// §2.14 LocalizedText
		{"LT", Verbose, func(e *Encoder) { e.WriteLocalizedText(ua.LocalizedText{Locale: "en", Text: "Hello"}) }, `{"Locale":"en","Text":"Hello"}`},
		{"LT no locale", Compact, func(e *Encoder) { e.WriteLocalizedText(ua.LocalizedText{Text: "Hello"}) }, `{"Text":"Hello"}`},
		{"LT NR104", NonReversible104, func(e *Encoder) { e.WriteLocalizedText(ua.LocalizedText{Locale: "en", Text: "Hello"}) }, `"Hello"`},
		// §2.15 ExtensionObject
		{"EO empty field V", Verbose, func(e *Encoder) { e.StartObject(); e.FieldExtensionObject("X", nil); e.EndObject() }, `{"X":{}}`},
		{"EO empty field C", Compact, func(e *Encoder) { e.StartObject(); e.FieldExtensionObject("X", nil); e.EndObject() }, `{}`},
		// §2.16 Variant
		{"Variant Int32", Compact, func(e *Encoder) { e.WriteVariant(v(int32(42))) }, `{"UaType":6,"Value":42}`},
		{"Variant R104", Reversible104, func(e *Encoder) { e.WriteVariant(v(int32(42))) }, `{"Type":6,"Body":42}`},
		{"Variant NR104", NonReversible104, func(e *Encoder) { e.WriteVariant(v(int32(42))) }, `42`},
		{"Variant array", Compact, func(e *Encoder) { e.WriteVariant(v([]int32{1, 2, 3})) }, `{"UaType":6,"Value":[1,2,3]}`},
		{"Variant matrix", Verbose, func(e *Encoder) {
			m := mustMatrix([]int32{1, 2, 3, 4, 5, 6}, 2, 3)
			e.WriteVariant(&m)
		}, `{"UaType":6,"Value":[1,2,3,4,5,6],"Dimensions":[2,3]}`},
		{"Variant matrix R104", Reversible104, func(e *Encoder) {
			m := mustMatrix([]int32{1, 2, 3, 4, 5, 6}, 2, 3)
			e.WriteVariant(&m)
		}, `{"Type":6,"Body":[1,2,3,4,5,6],"Dimensions":[2,3]}`},
		{"Variant matrix NR104", NonReversible104, func(e *Encoder) {
			m := mustMatrix([]int32{1, 2, 3, 4, 5, 6}, 2, 3)
			e.WriteVariant(&m)
		}, `[[1,2,3],[4,5,6]]`},
		{"Matrix field 1.05", Verbose, func(e *Encoder) {
			m := mustMatrix([]int32{1, 2, 3, 4, 5, 6}, 2, 3)
			e.WriteVariantBody(&m)
		}, `{"Array":[1,2,3,4,5,6],"Dimensions":[2,3]}`},
		{"Variant[]", Compact, func(e *Encoder) { e.WriteVariant(v([]ua.Variant{ua.NewInt32Variant(1), ua.NewInt32Variant(2)})) },
			`{"UaType":24,"Value":[{"UaType":6,"Value":1},{"UaType":6,"Value":2}]}`},
		{"Variant null field C", Compact, func(e *Encoder) { e.StartObject(); e.FieldVariant("V", &ua.Variant{}); e.EndObject() }, `{}`},
		{"Variant null field V", Verbose, func(e *Encoder) { e.StartObject(); e.FieldVariant("V", &ua.Variant{}); e.EndObject() }, `{"V":null}`},
		{"Variant null ByteString", Compact, func(e *Encoder) { e.WriteVariant(v([]byte(nil))) }, `{"UaType":15}`},
		// §2.17 DataValue
		{"DataValue spec example", Verbose, func(e *Encoder) {
			e.WriteDataValue(&ua.DataValue{Value: ua.NewDoubleVariant(25.5), Status: ua.StatusUncertainLastUsableValue,
				SourceTimestamp: testTime, SourcePicoseconds: 4200, ServerTimestamp: testTime2})
		}, `{"UaType":11,"Value":25.5,"Status":{"Code":1083179008,"Symbol":"UncertainLastUsableValue"},"SourceTimestamp":"2024-05-01T10:15:30.1234567Z","SourcePicoseconds":4200,"ServerTimestamp":"2024-05-01T10:15:30.2Z"}`},
		{"DataValue empty", Compact, func(e *Encoder) { e.WriteDataValue(&ua.DataValue{}) }, `{}`},
		{"DataValue orphan picos", Compact, func(e *Encoder) { e.WriteDataValue(&ua.DataValue{SourcePicoseconds: 5, ServerPicoseconds: 6}) }, `{}`},
		{"DataValue R104", Reversible104, func(e *Encoder) {
			e.WriteDataValue(&ua.DataValue{Value: ua.NewInt32Variant(1), Status: ua.StatusBadNotFound, ServerTimestamp: testTime2, ServerPicoseconds: 7})
		}, `{"Value":{"Type":6,"Body":1},"Status":2151546880,"ServerTimestamp":"2024-05-01T10:15:30.2Z","ServerPicoSeconds":7}`},
		// §2.18 DiagnosticInfo example
		{"DiagnosticInfo", Compact, func(e *Encoder) {
			e.WriteDiagnosticInfo(&ua.DiagnosticInfo{SymbolicID: 2, LocalizedText: 3, InnerStatusCode: 0x80000000,
				Mask: ua.DiagHasSymbolicID | ua.DiagHasLocalizedText | ua.DiagHasInnerStatusCode})
		}, `{"SymbolicId":2,"LocalizedText":3,"InnerStatusCode":{"Code":2147483648}}`},
		// §2.19 enumerations
		{"Enum C", Compact, func(e *Encoder) { e.WriteEnum(2, "Running") }, `2`},
		{"Enum V", Verbose, func(e *Encoder) { e.WriteEnum(2, "Running") }, `"Running_2"`},
		{"Enum V unknown", Verbose, func(e *Encoder) { e.WriteEnum(2, "") }, `"2"`},
		// §1.1 defaults in fields
		{"defaults C", Compact, func(e *Encoder) { e.StartObject(); e.FieldInt32("A", 0); e.FieldBoolean("B", false); e.EndObject() }, `{}`},
		{"defaults V", Verbose, func(e *Encoder) { e.StartObject(); e.FieldInt32("A", 0); e.FieldBoolean("B", false); e.EndObject() }, `{"A":0,"B":false}`},
	}
	for _, c := range cases {
		got := encodeWith(c.mode, c.f)
		if got != c.want {
			t.Errorf("%s (%s):\n got  %s\n want %s", c.name, c.mode, got, c.want)
		}
	}
}
