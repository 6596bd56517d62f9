package ua

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	gua "github.com/gopcua/opcua/ua"
)

// codecCase is one built-in value with its exact encoding. enc writes the value,
// dec reads it back; gopcua, when set, is the same value in the independent
// implementation, whose encoding must match ours byte for byte.
type codecCase struct {
	name   string
	value  any
	hex    string // spaces and comments stripped by unhexBytes
	gopcua any
}

// unhexBytes decodes "01 02 # comment" style hex (comments run to end of line).
func unhexBytes(t testing.TB, s string) []byte {
	t.Helper()
	var clean strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		clean.WriteString(strings.ReplaceAll(strings.ReplaceAll(line, " ", ""), "\t", ""))
	}
	b, err := hex.DecodeString(clean.String())
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func encodeValue(e *Encoder, v any) {
	switch x := v.(type) {
	case bool:
		e.WriteBoolean(x)
	case int8:
		e.WriteSByte(x)
	case byte:
		e.WriteUInt8(x)
	case int16:
		e.WriteInt16(x)
	case uint16:
		e.WriteUInt16(x)
	case int32:
		e.WriteInt32(x)
	case uint32:
		e.WriteUInt32(x)
	case int64:
		e.WriteInt64(x)
	case uint64:
		e.WriteUInt64(x)
	case float32:
		e.WriteFloat(x)
	case float64:
		e.WriteDouble(x)
	case string:
		e.WriteString(x)
	case DateTime:
		e.WriteDateTime(x)
	case Guid:
		e.WriteGuid(x)
	case []byte:
		e.WriteByteString(x)
	case XmlElement:
		e.WriteXmlElement(x)
	case NodeID:
		e.WriteNodeID(x)
	case ExpandedNodeID:
		e.WriteExpandedNodeID(x)
	case StatusCode:
		e.WriteStatusCode(x)
	case QualifiedName:
		e.WriteQualifiedName(x)
	case LocalizedText:
		e.WriteLocalizedText(x)
	case ExtensionObject:
		e.WriteExtensionObject(&x)
	case DataValue:
		e.WriteDataValue(&x)
	case Variant:
		e.WriteVariant(&x)
	case DiagnosticInfo:
		e.WriteDiagnosticInfo(&x)
	case []float64:
		e.WriteDoubleArray(x)
	case []string:
		e.WriteStringArray(x)
	default:
		panic("unhandled test type")
	}
}

func decodeValue(d *Decoder, like any) any {
	switch like.(type) {
	case bool:
		return d.ReadBoolean()
	case int8:
		return d.ReadSByte()
	case byte:
		return d.ReadUInt8()
	case int16:
		return d.ReadInt16()
	case uint16:
		return d.ReadUInt16()
	case int32:
		return d.ReadInt32()
	case uint32:
		return d.ReadUInt32()
	case int64:
		return d.ReadInt64()
	case uint64:
		return d.ReadUInt64()
	case float32:
		return d.ReadFloat()
	case float64:
		return d.ReadDouble()
	case string:
		return d.ReadString()
	case DateTime:
		return d.ReadDateTime()
	case Guid:
		return d.ReadGuid()
	case []byte:
		return d.ReadByteString()
	case XmlElement:
		return d.ReadXmlElement()
	case NodeID:
		return d.ReadNodeID()
	case ExpandedNodeID:
		return d.ReadExpandedNodeID()
	case StatusCode:
		return d.ReadStatusCode()
	case QualifiedName:
		return d.ReadQualifiedName()
	case LocalizedText:
		return d.ReadLocalizedText()
	case ExtensionObject:
		var x ExtensionObject
		d.ReadExtensionObject(&x)
		return x
	case DataValue:
		var x DataValue
		d.ReadDataValue(&x)
		return x
	case Variant:
		var x Variant
		d.ReadVariant(&x)
		return x
	case DiagnosticInfo:
		var x DiagnosticInfo
		d.ReadDiagnosticInfo(&x)
		return x
	case []float64:
		return d.ReadDoubleArray(nil)
	case []string:
		return d.ReadStringArray(nil)
	}
	panic("unhandled test type")
}

var testGuid = MustGuid("72962b91-fa75-4ae6-8d28-b404dc7daf63")

func MustGuid(s string) Guid {
	g, err := ParseGuid(s)
	if err != nil {
		panic(err)
	}
	return g
}

func gopcuaVariant(v any) *gua.Variant { return gua.MustVariant(v) }

var builtinCases = []codecCase{
	{"Boolean true", true, "01", true},
	{"Boolean false", false, "00", false},
	{"SByte -5", int8(-5), "fb", int8(-5)},
	{"Byte 200", byte(200), "c8", byte(200)},
	{"Int16 -2", int16(-2), "feff", int16(-2)},
	{"UInt16 0x1234", uint16(0x1234), "3412", uint16(0x1234)},
	{"Int32 -1", int32(-1), "ffffffff", int32(-1)},
	{"UInt32 1000000", uint32(1000000), "40420f00", uint32(1000000)},
	{"Int64 min", int64(math.MinInt64), "0000000000000080", int64(math.MinInt64)},
	{"UInt64 max", uint64(math.MaxUint64), "ffffffffffffffff", uint64(math.MaxUint64)},
	{"Float 1.5", float32(1.5), "0000c03f", float32(1.5)},
	{"Double -0.25", -0.25, "000000000000d0bf", -0.25},
	{"String", "Hügel", `06000000 # length
		48 c3bc 67 65 6c # UTF-8`, "Hügel"},
	{"String empty is null", "", "ffffffff", ""},
	{"DateTime 2024-01-02T03:04:05.1234567Z", NewDateTime(time.Date(2024, 1, 2, 3, 4, 5, 123456700, time.UTC)),
		"", nil},
	{"Guid", testGuid, `91 2b 96 72 # Data1 little-endian
		75 fa  e6 4a # Data2, Data3
		8d 28 b4 04 dc 7d af 63 # Data4`, gua.NewGUID("72962B91-FA75-4AE6-8D28-B404DC7DAF63")},
	{"ByteString", []byte{1, 2, 3}, "03000000 010203", []byte{1, 2, 3}},
	{"ByteString null", []byte(nil), "ffffffff", []byte(nil)},
	{"ByteString empty", []byte{}, "00000000", nil},
	{"XmlElement", XmlElement("<A>Hot</A>"), "0a000000 3c413e486f743c2f413e", gua.XMLElement("<A>Hot</A>")},
	{"NodeId two-byte", NewNumericNodeID(0, 72), "00 48", gua.NewTwoByteNodeID(72)},
	{"NodeId four-byte", NewNumericNodeID(5, 1025), "01 05 0104", gua.NewFourByteNodeID(5, 1025)},
	{"NodeId numeric", NewNumericNodeID(300, 70000), "02 2c01 70110100", gua.NewNumericNodeID(300, 70000)},
	{"NodeId string", NewStringNodeID(1, "Hot水"), "03 0100 06000000 486f74e6b0b4", gua.NewStringNodeID(1, "Hot水")},
	{"NodeId guid", NewGuidNodeID(0, testGuid), "04 0000 912b9672 75fa e64a 8d28b404dc7daf63", gua.NewGUIDNodeID(0, "72962B91-FA75-4AE6-8D28-B404DC7DAF63")},
	{"NodeId opaque", NewOpaqueNodeID(2, []byte{0xde, 0xad}), "05 0200 02000000 dead", gua.NewByteStringNodeID(2, []byte{0xde, 0xad})},
	{"ExpandedNodeId uri+server", ExpandedNodeID{NodeID: NewNumericNodeID(0, 5), NamespaceURI: "urn:a", ServerIndex: 3},
		"c0 05 # two-byte with both flags\n 05000000 75726e3a61 # urn:a\n 03000000 # server index",
		gua.NewExpandedNodeID(gua.NewTwoByteNodeID(5), "urn:a", 3)},
	{"StatusCode BadNodeIdUnknown", StatusBadNodeIdUnknown, "00003480", gua.StatusBadNodeIDUnknown},
	{"QualifiedName", NewQualifiedName(2, "Temp"), "0200 04000000 54656d70", &gua.QualifiedName{NamespaceIndex: 2, Name: "Temp"}},
	{"LocalizedText text only", NewLocalizedText("Hi"), "02 02000000 4869", gua.NewLocalizedText("Hi")},
	{"LocalizedText both", LocalizedText{Locale: "en", Text: "Hi"}, "03 02000000 656e 02000000 4869", gua.NewLocalizedTextWithLocale("Hi", "en")},
	{"LocalizedText empty", LocalizedText{}, "00", &gua.LocalizedText{}},
	{"Variant null", Variant{}, "00", gopcuaVariant(nil)},
	{"Variant Double", NewDoubleVariant(2.5), "0b 0000000000000440", gopcuaVariant(2.5)},
	{"Variant Int32", NewInt32Variant(-7), "06 f9ffffff", gopcuaVariant(int32(-7))},
	{"Variant String", NewStringVariant("ab"), "0c 02000000 6162", gopcuaVariant("ab")},
	{"Variant Double[2]", MustVariant([]float64{1, 2}), "8b 02000000 000000000000f03f 0000000000000040", gopcuaVariant([]float64{1, 2})},
	{"Variant Int32 matrix 2x2", mustMatrix([]int32{1, 2, 3, 4}, []int32{2, 2}),
		"c6 04000000 01000000 02000000 03000000 04000000 # values\n 02000000 02000000 02000000 # dims", nil},
	{"Variant NodeId", MustVariant(NewNumericNodeID(0, 85)), "11 00 55", gopcuaVariant(gua.NewTwoByteNodeID(85))},
	{"Variant LocalizedText", MustVariant(NewLocalizedText("x")), "15 02 01000000 78", gopcuaVariant(gua.NewLocalizedText("x"))},
	{"Variant Variant[]", MustVariant([]Variant{NewInt32Variant(1), NewStringVariant("a")}), "98 02000000 06 01000000 0c 01000000 61", nil},
	{"DataValue full", DataValue{Value: NewDoubleVariant(1), Status: StatusUncertain, SourceTimestamp: 1, ServerTimestamp: 2, SourcePicoseconds: 3, ServerPicoseconds: 4},
		"3f # mask: value, status, src ts, srv ts, src ps, srv ps\n 0b 000000000000f03f\n 00000040\n 0100000000000000 0300\n 0200000000000000 0400", nil},
	{"DataValue status only", DataValue{Status: StatusBadNodeIdUnknown}, "02 00003480", &gua.DataValue{EncodingMask: 0x02, Status: gua.StatusBadNodeIDUnknown}},
	{"DiagnosticInfo nested", DiagnosticInfo{Mask: DiagHasSymbolicID | DiagHasAdditionalInfo | DiagHasInnerDiagnosticInfo, SymbolicID: 7, AdditionalInfo: "x", InnerDiagnosticInfo: &DiagnosticInfo{Mask: DiagHasInnerStatusCode, InnerStatusCode: StatusBadTimeout}},
		"51 07000000 01000000 78 20 00000a80", nil},
	{"ExtensionObject unknown body kept", ExtensionObject{TypeID: NewExpandedNodeID(NewNumericNodeID(2, 5001)), Encoding: ExtensionObjectBinary, Body: []byte{9, 8}},
		"01 02 8913 01 02000000 0908", nil},
	{"ExtensionObject empty", ExtensionObject{}, "00 00 00", nil},
	{"Double[] bulk", []float64{0.5, -1}, "02000000 000000000000e03f 000000000000f0bf", nil},
	{"String[] with null", []string{"a", ""}, "02000000 01000000 61 ffffffff", nil},
}

func mustMatrix(flat any, dims []int32) Variant {
	v, err := NewMatrixVariant(flat, dims)
	if err != nil {
		panic(err)
	}
	return v
}

func TestBuiltinCodec(t *testing.T) {
	for _, c := range builtinCases {
		t.Run(c.name, func(t *testing.T) {
			e := NewEncoder(nil)
			encodeValue(e, c.value)
			if err := e.Err(); err != nil {
				t.Fatalf("encode: %v", err)
			}
			got := e.Bytes()
			if c.hex != "" {
				want := unhexBytes(t, c.hex)
				if !bytes.Equal(got, want) {
					t.Fatalf("encoding\n got %x\nwant %x", got, want)
				}
			}
			if c.gopcua != nil {
				theirs, err := gua.Encode(c.gopcua)
				if err != nil {
					t.Fatalf("gopcua encode: %v", err)
				}
				if !bytes.Equal(got, theirs) {
					t.Fatalf("differs from gopcua\n ours   %x\n gopcua %x", got, theirs)
				}
			}
			d := NewDecoder(got, nil)
			back := decodeValue(d, c.value)
			if err := d.Err(); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if d.Remaining() != 0 {
				t.Fatalf("%d bytes left after decode", d.Remaining())
			}
			if !reflect.DeepEqual(normalize(back), normalize(c.value)) {
				t.Fatalf("round trip\n got %#v\nwant %#v", back, c.value)
			}
			// Every truncation must fail cleanly.
			for n := 0; n < len(got); n++ {
				d := NewDecoder(got[:n], nil)
				decodeValue(d, c.value)
				if d.Err() == nil {
					t.Fatalf("truncated to %d bytes: no error", n)
				}
				if !errors.Is(d.Err(), StatusBadDecodingError) {
					t.Fatalf("truncated to %d bytes: error %v does not wrap BadDecodingError", n, d.Err())
				}
			}
		})
	}
}

// normalize maps values whose wire form cannot tell them apart (empty vs null
// ByteString for "" strings) so DeepEqual compares meaning.
func normalize(v any) any {
	if b, ok := v.([]byte); ok && b != nil && len(b) == 0 {
		return "empty"
	}
	return v
}

func TestDateTimeConversions(t *testing.T) {
	tm := time.Date(2024, 1, 2, 3, 4, 5, 123456700, time.UTC)
	dt := NewDateTime(tm)
	if !dt.Time().Equal(tm) {
		t.Fatalf("round trip %v != %v", dt.Time(), tm)
	}
	if got := dt.String(); got != "2024-01-02T03:04:05.1234567Z" {
		t.Fatalf("String = %q", got)
	}
	// 1601-01-01 is tick 0; 1970-01-01 is ticksTo1970.
	if NewDateTime(time.Unix(0, 0)) != ticksTo1970 {
		t.Fatal("epoch offset wrong")
	}
	if NewDateTime(time.Time{}) != 0 || !DateTime(0).Time().IsZero() {
		t.Fatal("zero time must map to null DateTime and back")
	}
	if NewDateTime(time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)) != 0 {
		t.Fatal("before 1601 must clamp to 0")
	}
	if NewDateTime(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)) != MaxDateTime {
		t.Fatal("after 9999 must clamp to MaxDateTime")
	}
	// The clamp starts at 9999-12-31T23:59:59Z, as in the JSON encoding.
	for _, ns := range []int{0, 500_000_000, 999_999_999} {
		if got := NewDateTime(time.Date(9999, 12, 31, 23, 59, 59, ns, time.UTC)); got != MaxDateTime {
			t.Errorf("9999-12-31T23:59:59 + %d ns gives %d, want MaxDateTime", ns, got)
		}
	}
	if NewDateTime(time.Date(9999, 12, 31, 23, 59, 58, 999_999_900, time.UTC)) == MaxDateTime {
		t.Error("9999-12-31T23:59:58.9999999 must not clamp")
	}
	// Time never passes year 9999.
	for _, d := range []DateTime{maxTimeTicks, maxTimeTicks + 1, maxTimeTicks + 10_000_000*86400*365*5000, MaxDateTime - 1, MaxDateTime} {
		if got := d.Time(); got.Year() != 9999 || !got.Equal(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)) {
			t.Errorf("DateTime(%d).Time() = %v, want 9999-12-31T23:59:59Z", d, got)
		}
	}
	// Cross-check the tick count against gopcua's encoding of the same time.
	theirs, _ := gua.Encode(tm)
	e := NewEncoder(nil)
	e.WriteDateTime(dt)
	if !bytes.Equal(e.Bytes(), theirs) {
		t.Fatalf("DateTime ours %x gopcua %x", e.Bytes(), theirs)
	}
}

func TestNodeIDText(t *testing.T) {
	cases := []struct {
		in, out string
		want    ExpandedNodeID
	}{
		{"i=85", "i=85", NewExpandedNodeID(NewNumericNodeID(0, 85))},
		{"85", "i=85", NewExpandedNodeID(NewNumericNodeID(0, 85))},
		{"ns=2;s=Foo;Bar", "ns=2;s=Foo;Bar", NewExpandedNodeID(NewStringNodeID(2, "Foo;Bar"))},
		{"ns=1;g=72962B91-FA75-4AE6-8D28-B404DC7DAF63", "ns=1;g=72962b91-fa75-4ae6-8d28-b404dc7daf63", NewExpandedNodeID(NewGuidNodeID(1, testGuid))},
		{"ns=3;b=3q0=", "ns=3;b=3q0=", NewExpandedNodeID(NewOpaqueNodeID(3, []byte{0xde, 0xad}))},
		{"nsu=http://x.org/UA/;i=5", "nsu=http://x.org/UA/;i=5", ExpandedNodeID{NodeID: NewNumericNodeID(0, 5), NamespaceURI: "http://x.org/UA/"}},
		{"nsu=urn:a%3Bb;s=t", "nsu=urn:a%3Bb;s=t", ExpandedNodeID{NodeID: NewStringNodeID(0, "t"), NamespaceURI: "urn:a;b"}},
		{"svr=3;nsu=urn:a;s=t", "svr=3;nsu=urn:a;s=t", ExpandedNodeID{NodeID: NewStringNodeID(0, "t"), NamespaceURI: "urn:a", ServerIndex: 3}},
	}
	for _, c := range cases {
		got, err := ParseExpandedNodeID(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if got != c.want {
			t.Fatalf("%q: got %#v want %#v", c.in, got, c.want)
		}
		if s := got.String(); s != c.out {
			t.Fatalf("%q formats as %q, want %q", c.in, s, c.out)
		}
	}
	for _, bad := range []string{"", "x=1", "i=abc", "ns=99999;i=1", "ns=1", "g=zz", "b=!!", "nsu=;i=1", "svr=x;i=1"} {
		if _, err := ParseExpandedNodeID(bad); !errors.Is(err, ErrInvalidNodeID) {
			t.Fatalf("%q: want ErrInvalidNodeID, got %v", bad, err)
		}
	}
	if _, err := ParseNodeID("nsu=urn:a;i=1"); err == nil {
		t.Fatal("ParseNodeID must refuse nsu= without a namespace table")
	}
	n, err := ExpandedNodeID{NodeID: NewNumericNodeID(0, 5), NamespaceURI: "urn:b"}.Resolve([]string{"http://opcfoundation.org/UA/", "urn:a", "urn:b"})
	if err != nil || n != NewNumericNodeID(2, 5) {
		t.Fatalf("Resolve = %v, %v", n, err)
	}
}

func TestStatusCodeNames(t *testing.T) {
	if StatusBadNodeIdUnknown.Name() != "BadNodeIdUnknown" {
		t.Fatal(StatusBadNodeIdUnknown.Name())
	}
	if !StatusBadNodeIdUnknown.IsBad() || StatusGood.IsBad() || !StatusUncertain.IsUncertain() || !StatusGoodClamped.IsGood() {
		t.Fatal("severity bits")
	}
	withFlags := StatusBadNodeIdUnknown | 0x0400 // info bits
	if !errors.Is(withFlags, StatusBadNodeIdUnknown) {
		t.Fatal("errors.Is must ignore flag bits")
	}
	if !strings.Contains(StatusBadTimeout.Error(), "BadTimeout (0x800a0000)") {
		t.Fatal(StatusBadTimeout.Error())
	}
	if c, ok := StatusCodeByName("BadTooManySessions"); !ok || c != StatusBadTooManySessions {
		t.Fatal("StatusCodeByName")
	}
	if StatusCode(0x12345678).Name() != "" {
		t.Fatal("unknown code must have no name")
	}
}

func TestDecoderLimits(t *testing.T) {
	lim := DefaultLimits
	lim.MaxStringLength = 4
	lim.MaxArrayLength = 3
	lim.MaxNestingDepth = 3

	d := NewDecoder(unhexBytes(t, "05000000 6162636465"), &lim)
	d.ReadString()
	if !errors.Is(d.Err(), StatusBadEncodingLimitsExceeded) {
		t.Fatalf("string over limit: %v", d.Err())
	}
	d = NewDecoder(unhexBytes(t, "04000000 01000000 02000000 03000000 04000000"), &lim)
	d.ReadInt32Array(nil)
	if !errors.Is(d.Err(), StatusBadEncodingLimitsExceeded) {
		t.Fatalf("array over limit: %v", d.Err())
	}
	// A declared length larger than the remaining bytes fails before allocating.
	huge := unhexBytes(t, "ffffff0f 00000000")
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	d = NewDecoder(huge, &DefaultLimits)
	d.ReadDoubleArray(nil)
	runtime.ReadMemStats(&ms1)
	// The array would take 2 GiB; the bound leaves room for the error's text
	// and whatever the runtime (and the race detector, which can take more
	// than 4 KiB) allocate meanwhile.
	if !errors.Is(d.Err(), StatusBadEncodingLimitsExceeded) || ms1.TotalAlloc-ms0.TotalAlloc > 64<<10 {
		t.Fatalf("huge array: err %v, allocated %d bytes", d.Err(), ms1.TotalAlloc-ms0.TotalAlloc)
	}
	lim2 := DefaultLimits
	lim2.MaxArrayLength = math.MaxInt32
	d = NewDecoder(huge, &lim2)
	d.ReadDoubleArray(nil)
	if !errors.Is(d.Err(), ErrTruncated) {
		t.Fatalf("array longer than the input: %v", d.Err())
	}
	// Nesting: Variant[] of Variant[] of Variant[] ...
	var nested []byte
	for i := 0; i < 10; i++ {
		nested = append(nested, 0x98, 1, 0, 0, 0)
	}
	nested = append(nested, 0)
	var v Variant
	d = NewDecoder(nested, &lim)
	d.ReadVariant(&v)
	if !errors.Is(d.Err(), ErrNestingTooDeep) {
		t.Fatalf("nesting: %v", d.Err())
	}
	// DiagnosticInfo recursion.
	deep := bytes.Repeat([]byte{0x40}, 1000)
	var di DiagnosticInfo
	d = NewDecoder(deep, nil)
	d.ReadDiagnosticInfo(&di)
	if !errors.Is(d.Err(), ErrNestingTooDeep) {
		t.Fatalf("diagnostic nesting: %v", d.Err())
	}
	// Message size.
	lim.MaxMessageSize = 8
	d = NewDecoder(make([]byte, 9), &lim)
	if !errors.Is(d.Err(), StatusBadEncodingLimitsExceeded) {
		t.Fatalf("message size: %v", d.Err())
	}
	// Matrix dimensions that do not match the element count.
	d = NewDecoder(unhexBytes(t, "c6 02000000 01000000 02000000 02000000 02000000 02000000"), nil)
	d.ReadVariant(&v)
	if d.Err() == nil {
		t.Fatal("bad matrix dimensions accepted")
	}
}

func TestVariantAccessors(t *testing.T) {
	v := NewDoubleVariant(3.5)
	if v.Double() != 3.5 || v.Int32() != 0 || v.Type() != TypeDouble || v.IsArray() {
		t.Fatal("double accessors")
	}
	f, ok := v.AsFloat64()
	if !ok || f != 3.5 {
		t.Fatal("AsFloat64")
	}
	v.SetInt16(-3)
	if v.Int16() != -3 || v.Value() != int16(-3) {
		t.Fatal("int16")
	}
	ba, err := NewArrayVariant(TypeByte, []byte{1, 2})
	if err != nil || ba.Type() != TypeByte || !ba.IsArray() || ba.ArrayLen() != 2 {
		t.Fatalf("Byte[]: %v %v", ba, err)
	}
	if _, err := NewArrayVariant(TypeInt32, []byte{1}); err == nil {
		t.Fatal("mismatched array type accepted")
	}
	if _, err := NewVariant(struct{}{}); err == nil {
		t.Fatal("unsupported type accepted")
	}
	allocs := testing.AllocsPerRun(100, func() {
		v.SetDouble(1)
		v.SetString("constant")
		v.SetUInt64(5)
	})
	if allocs != 0 {
		t.Fatalf("inline setters allocate: %v", allocs)
	}
}

// TestDataValueFastPath checks the inline fast path against the field-by-field
// decoder for every fixed-size scalar type and every mask combination.
func TestDataValueFastPath(t *testing.T) {
	values := []Variant{{}, NewBooleanVariant(true), MustVariant(int8(-3)), MustVariant(byte(250)),
		MustVariant(int16(-300)), MustVariant(uint16(65000)), NewInt32Variant(-70000), NewUInt32Variant(4000000000),
		NewInt64Variant(-1 << 40), MustVariant(uint64(1 << 63)), NewFloatVariant(-1.5), NewDoubleVariant(math.Pi),
		NewDateTimeVariant(12345), MustVariant(StatusBadTimeout), NewStringVariant("not fixed")}
	pad := make([]byte, maxFixedDataValue) // so the fast path is eligible
	for _, v := range values {
		for mask := 0; mask < 64; mask++ {
			dv := DataValue{Value: v}
			if mask&dvStatus != 0 {
				dv.Status = StatusUncertainInitialValue
			}
			if mask&dvSourceTimestamp != 0 {
				dv.SourceTimestamp = 1 << 50
			}
			if mask&dvServerTimestamp != 0 {
				dv.ServerTimestamp = 1<<50 + 1
			}
			if mask&dvSourcePicoseconds != 0 {
				dv.SourcePicoseconds = 9
			}
			if mask&dvServerPicoseconds != 0 {
				dv.ServerPicoseconds = 10
			}
			e := NewEncoder(nil)
			e.WriteDataValue(&dv)
			buf := append(e.Bytes(), pad...)
			var fast, slow DataValue
			fast.Value.SetString("stale")
			df, ds := NewDecoder(buf, nil), NewDecoder(buf, nil)
			df.ReadDataValue(&fast)
			ds.readDataValueSlow(&slow)
			if df.Err() != nil || ds.Err() != nil || df.Offset() != ds.Offset() || df.Offset() != e.Len() {
				t.Fatalf("%v mask %x: errors %v/%v offsets %d/%d/%d", v, mask, df.Err(), ds.Err(), df.Offset(), ds.Offset(), e.Len())
			}
			if !reflect.DeepEqual(fast, slow) || !reflect.DeepEqual(fast, dv) {
				t.Fatalf("%v mask %x:\nfast %+v\nslow %+v\nwant %+v", v, mask, fast, slow, dv)
			}
		}
	}
}
