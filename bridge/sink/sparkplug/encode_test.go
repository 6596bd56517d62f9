package sparkplug

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/uagate/gateway/bridge/sink/sparkplug/sparkplugpb"
	"github.com/uagate/gateway/uastack/ua"
)

// decodeMetricPayload decodes a payload encoded with room (as the encoder
// leaves it) after writing seq into it, as the node does when it publishes.
func decodeMetricPayload(t *testing.T, p []byte, seq uint8) *pb.Payload {
	t.Helper()
	var out pb.Payload
	if err := proto.Unmarshal(withSeq(p, seq), &out); err != nil {
		t.Fatalf("decoding our payload: %v (% x)", err, p)
	}
	return &out
}

// oneMetric encodes dv as a birth metric (name, alias, datatype) and as a
// data metric (alias only) and returns both decoded.
func oneMetric(t *testing.T, dv *ua.DataValue, dt DataType) (birth, data *pb.Payload_Metric) {
	t.Helper()
	var e encoder
	ts := uint64(1714558530123)
	p := beginPayload(nil, ts)
	p, err := e.appendMetric(p, &metric{name: "Folder/Metric", alias: 7, hasAlias: true, dtype: dt, ts: ts, nodeID: "ns=2;s=M"}, dv, 0)
	if err != nil {
		t.Fatalf("birth metric: %v", err)
	}
	bp := decodeMetricPayload(t, p, 0)
	p = beginPayload(p, ts)
	p, err = e.appendMetric(p, &metric{alias: 7, hasAlias: true, ts: ts}, dv, dt)
	if err != nil {
		t.Fatalf("data metric: %v", err)
	}
	dp := decodeMetricPayload(t, p, 200)
	if len(bp.Metrics) != 1 || len(dp.Metrics) != 1 {
		t.Fatalf("metrics: birth %d, data %d", len(bp.Metrics), len(dp.Metrics))
	}
	if bp.GetSeq() != 0 || dp.GetSeq() != 200 || bp.GetTimestamp() != ts {
		t.Errorf("payload seq %d/%d timestamp %d", bp.GetSeq(), dp.GetSeq(), bp.GetTimestamp())
	}
	birth, data = bp.Metrics[0], dp.Metrics[0]
	// Sparkplug 3.0 §6.4.3: births carry name and alias, data only the alias;
	// a datatype in births, none in data; a timestamp in both.
	if birth.GetName() != "Folder/Metric" || birth.GetAlias() != 7 || birth.Datatype == nil || birth.Timestamp == nil {
		t.Errorf("birth metric header: %v", birth)
	}
	if data.Name != nil || data.GetAlias() != 7 || data.Datatype != nil || data.Timestamp == nil {
		t.Errorf("data metric header: %v", data)
	}
	return birth, data
}

// metricValue returns a decoded metric's value as the Go value the tests
// compare with: the proto field's own type.
func metricValue(m *pb.Payload_Metric) any {
	switch v := m.Value.(type) {
	case *pb.Payload_Metric_IntValue:
		return v.IntValue
	case *pb.Payload_Metric_LongValue:
		return v.LongValue
	case *pb.Payload_Metric_FloatValue:
		return v.FloatValue
	case *pb.Payload_Metric_DoubleValue:
		return v.DoubleValue
	case *pb.Payload_Metric_BooleanValue:
		return v.BooleanValue
	case *pb.Payload_Metric_StringValue:
		return v.StringValue
	case *pb.Payload_Metric_BytesValue:
		return v.BytesValue
	case nil:
		return nil
	}
	return m.Value
}

// le packs little-endian values, as Sparkplug's array types are.
func le(vals ...any) []byte {
	var b bytes.Buffer
	for _, v := range vals {
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	return b.Bytes()
}

func mustArray(t ua.TypeID, slice any) ua.Variant {
	v, err := ua.NewArrayVariant(t, slice)
	if err != nil {
		panic(err)
	}
	return v
}

// TestTypeTable: every OPC UA built-in type, scalar and array, is published
// with the Sparkplug datatype of the table in datatype.go and the value
// where sparkplug_b.proto and Sparkplug 3.0 §6.4.16–17 put it, as a host
// decoding with the generated code reads it.
func TestTypeTable(t *testing.T) {
	when := time.Date(2024, 5, 1, 10, 15, 30, 123_000_000, time.UTC)
	whenMS := uint64(when.UnixMilli())
	guid, _ := ua.ParseGuid("72962B91-FA75-4AE6-8D28-B404DC7DAF63")
	node := ua.NewStringNodeID(2, "Line1.Speed")
	xnode := ua.ExpandedNodeID{NodeID: ua.NewNumericNodeID(3, 42), NamespaceURI: "urn:plc"}
	rng := ua.NewExtensionObject(&ua.Range{Low: 1, High: 2})
	inner := ua.DataValue{Value: ua.NewDoubleVariant(1.5)}
	diag := ua.DiagnosticInfo{AdditionalInfo: "why", Mask: ua.DiagHasAdditionalInfo}

	cases := []struct {
		name string
		v    ua.Variant
		dt   DataType
		want any
	}{
		{"Boolean", ua.NewBooleanVariant(true), Boolean, true},
		{"SByte", ua.MustVariant(int8(-5)), Int8, uint32(0xFFFFFFFB)},
		{"Byte", ua.MustVariant(byte(200)), UInt8, uint32(200)},
		{"Int16", ua.MustVariant(int16(-30000)), Int16, uint32(0xFFFF8AD0)},
		{"UInt16", ua.MustVariant(uint16(60000)), UInt16, uint32(60000)},
		{"Int32", ua.NewInt32Variant(-123456), Int32, uint32(0xFFFE1DC0)},
		{"UInt32", ua.NewUInt32Variant(4_000_000_000), UInt32, uint32(4_000_000_000)},
		{"Int64", ua.NewInt64Variant(-1), Int64, uint64(math.MaxUint64)},
		{"UInt64", ua.MustVariant(uint64(math.MaxUint64 - 1)), UInt64, uint64(math.MaxUint64 - 1)},
		{"Float", ua.NewFloatVariant(1.5), Float, float32(1.5)},
		{"Double", ua.NewDoubleVariant(-2.25), Double, -2.25},
		{"String", ua.NewStringVariant("héllo"), String, "héllo"},
		{"DateTime", ua.NewDateTimeVariant(ua.NewDateTime(when)), DateTime, whenMS},
		{"Guid", ua.MustVariant(guid), UUID, "72962b91-fa75-4ae6-8d28-b404dc7daf63"},
		{"ByteString", ua.MustVariant([]byte{1, 2, 3}), Bytes, []byte{1, 2, 3}},
		{"XmlElement", ua.MustVariant(ua.XmlElement("<a/>")), String, "<a/>"},
		{"NodeId", ua.MustVariant(node), String, "ns=2;s=Line1.Speed"},
		{"ExpandedNodeId", ua.MustVariant(xnode), String, xnode.String()},
		{"StatusCode", ua.MustVariant(ua.StatusBadTimeout), UInt32, uint32(ua.StatusBadTimeout)},
		{"QualifiedName", ua.MustVariant(ua.NewQualifiedName(2, "Name")), String, "2:Name"},
		{"LocalizedText", ua.MustVariant(ua.LocalizedText{Locale: "en", Text: "Hello"}), String, "Hello"},
		{"ExtensionObject", ua.MustVariant(&rng), String, `{"UaTypeId":"i=884","Low":1,"High":2}`},
		{"DataValue", ua.MustVariant(&inner), String, `{"UaType":11,"Value":1.5}`},
		// A scalar Variant cannot hold a Variant (Part 6 §5.1.2): arrays only.
		{"DiagnosticInfo", ua.MustVariant(&diag), String, `{"AdditionalInfo":"why"}`},

		// Arrays: the 3.0 array types (§6.4.17), bytes_value packed
		// little-endian; Boolean bit-packed after a count; strings NUL-ended.
		{"Boolean[]", mustArray(ua.TypeBoolean, []bool{false, false, true, true, false, true, false, false, true, true, false, true}),
			BooleanArray, []byte{0x0C, 0, 0, 0, 0x34, 0xD0}},
		{"SByte[]", mustArray(ua.TypeSByte, []int8{-23, 123}), Int8Array, []byte{0xE9, 0x7B}},
		{"Byte[]", mustArray(ua.TypeByte, []byte{23, 250}), UInt8Array, []byte{0x17, 0xFA}},
		{"Int16[]", mustArray(ua.TypeInt16, []int16{-30000, 30000}), Int16Array, []byte{0xD0, 0x8A, 0x30, 0x75}},
		{"UInt16[]", mustArray(ua.TypeUInt16, []uint16{30, 52360}), UInt16Array, []byte{0x1E, 0x00, 0x88, 0xCC}},
		{"Int32[]", mustArray(ua.TypeInt32, []int32{-1, 315338746}), Int32Array, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFA, 0xAF, 0xCB, 0x12}},
		{"UInt32[]", mustArray(ua.TypeUInt32, []uint32{52, 3293969225}), UInt32Array, []byte{0x34, 0, 0, 0, 0x49, 0xFB, 0x55, 0xC4}},
		{"Int64[]", mustArray(ua.TypeInt64, []int64{-4270929666821191986, -3601064768563266876}), Int64Array,
			[]byte{0xCE, 0x06, 0x72, 0xAC, 0x18, 0x9C, 0xBA, 0xC4, 0xC4, 0xBA, 0x9C, 0x18, 0xAC, 0x72, 0x06, 0xCE}},
		{"UInt64[]", mustArray(ua.TypeUInt64, []uint64{52, 16444743074749521625}), UInt64Array,
			[]byte{0x34, 0, 0, 0, 0, 0, 0, 0, 0xD9, 0x9E, 0x02, 0xD1, 0xB2, 0x76, 0x37, 0xE4}},
		// The specification's examples of the float arrays are written big-endian;
		// its text (and these) say little-endian.
		{"Float[]", mustArray(ua.TypeFloat, []float32{1.23, 89.341}), FloatArray, le(float32(1.23), float32(89.341))},
		{"Double[]", mustArray(ua.TypeDouble, []float64{12.354213, 1022.9123213}), DoubleArray, le(12.354213, 1022.9123213)},
		{"String[]", mustArray(ua.TypeString, []string{"ABC", "hello"}), StringArray, []byte("ABC\x00hello\x00")},
		// The example of DateTimeArray shows 6 bytes per value; the text says
		// 8-byte values.
		{"DateTime[]", mustArray(ua.TypeDateTime, []ua.DateTime{
			ua.NewDateTime(time.UnixMilli(1256102875335)), ua.NewDateTime(time.UnixMilli(1656107875000))}),
			DateTimeArray, le(uint64(1256102875335), uint64(1656107875000))},
		{"Guid[]", mustArray(ua.TypeGuid, []ua.Guid{guid}), StringArray, []byte("72962b91-fa75-4ae6-8d28-b404dc7daf63\x00")},
		{"ByteString[]", mustArray(ua.TypeByteString, [][]byte{{1, 2, 3}, {}}), StringArray, []byte("AQID\x00\x00")},
		{"XmlElement[]", mustArray(ua.TypeXmlElement, []ua.XmlElement{"<a/>"}), StringArray, []byte("<a/>\x00")},
		{"NodeId[]", mustArray(ua.TypeNodeID, []ua.NodeID{node, ua.NewNumericNodeID(0, 2258)}), StringArray, []byte("ns=2;s=Line1.Speed\x00i=2258\x00")},
		{"ExpandedNodeId[]", mustArray(ua.TypeExpandedNodeID, []ua.ExpandedNodeID{xnode}), StringArray, []byte(xnode.String() + "\x00")},
		{"StatusCode[]", mustArray(ua.TypeStatusCode, []ua.StatusCode{ua.StatusGood, ua.StatusBadTimeout}), UInt32Array, le(uint32(0), uint32(ua.StatusBadTimeout))},
		{"QualifiedName[]", mustArray(ua.TypeQualifiedName, []ua.QualifiedName{ua.NewQualifiedName(0, "A"), ua.NewQualifiedName(3, "B")}), StringArray, []byte("A\x003:B\x00")},
		{"LocalizedText[]", mustArray(ua.TypeLocalizedText, []ua.LocalizedText{{Text: "x"}, {Locale: "de", Text: "y"}}), StringArray, []byte("x\x00y\x00")},
		{"ExtensionObject[]", mustArray(ua.TypeExtensionObject, []ua.ExtensionObject{rng}), StringArray, []byte(`{"UaTypeId":"i=884","Low":1,"High":2}` + "\x00")},
		{"DataValue[]", mustArray(ua.TypeDataValue, []ua.DataValue{inner}), StringArray, []byte(`{"UaType":11,"Value":1.5}` + "\x00")},
		{"Variant[]", mustArray(ua.TypeVariant, []ua.Variant{ua.NewInt32Variant(5), ua.NewStringVariant("s")}), StringArray, []byte("5\x00\"s\"\x00")},
		{"DiagnosticInfo[]", mustArray(ua.TypeDiagnosticInfo, []ua.DiagnosticInfo{diag}), StringArray, []byte(`{"AdditionalInfo":"why"}` + "\x00")},
	}
	seen := map[ua.TypeID][2]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := DataTypeOf(c.v.Type(), c.v.IsArray()); got != c.dt {
				t.Fatalf("DataTypeOf(%v, array %v) = %v, want %v", c.v.Type(), c.v.IsArray(), got, c.dt)
			}
			dv := &ua.DataValue{Value: c.v, SourceTimestamp: ua.NewDateTime(when)}
			birth, data := oneMetric(t, dv, c.dt)
			if DataType(birth.GetDatatype()) != c.dt {
				t.Errorf("birth datatype %v, want %v", DataType(birth.GetDatatype()), c.dt)
			}
			for _, m := range []*pb.Payload_Metric{birth, data} {
				if m.GetIsNull() || m.GetTimestamp() != whenMS {
					t.Errorf("is_null %v, timestamp %d (want %d)", m.GetIsNull(), m.GetTimestamp(), whenMS)
				}
				got := metricValue(m)
				if gb, ok := got.([]byte); ok {
					if !bytes.Equal(gb, c.want.([]byte)) {
						t.Errorf("bytes_value\n got % x\nwant % x", gb, c.want)
					}
				} else if got != c.want {
					t.Errorf("value %#v (%T), want %#v (%T)", got, got, c.want, c.want)
				}
			}
			if s, ok := c.want.(string); ok && strings.HasPrefix(s, "{") && !json.Valid([]byte(s)) {
				t.Errorf("%s is not JSON", s)
			}
		})
		k := seen[c.v.Type()]
		k[btoi(c.v.IsArray())] = true
		seen[c.v.Type()] = k
	}
	for typ := ua.TypeBoolean; typ <= ua.TypeDiagnosticInfo; typ++ {
		if k := seen[typ]; !k[1] || (!k[0] && typ != ua.TypeVariant) {
			t.Errorf("%v: scalar tested %v, array tested %v", typ, k[0], k[1])
		}
	}

	t.Run("matrix", func(t *testing.T) {
		v, err := ua.NewMatrixVariant([]int32{1, 2, 3, 4, 5, 6}, []int32{2, 3})
		if err != nil {
			t.Fatal(err)
		}
		_, data := oneMetric(t, &ua.DataValue{Value: v}, Int32Array)
		if got := metricValue(data).([]byte); !bytes.Equal(got, le(int32(1), int32(2), int32(3), int32(4), int32(5), int32(6))) {
			t.Errorf("matrix flattened row-major: % x", got)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// properties returns a metric's properties by key.
func properties(m *pb.Payload_Metric) map[string]*pb.Payload_PropertyValue {
	out := map[string]*pb.Payload_PropertyValue{}
	ps := m.GetProperties()
	for i, k := range ps.GetKeys() {
		if i < len(ps.GetValues()) {
			out[k] = ps.GetValues()[i]
		}
	}
	return out
}

// TestStatusAndNull: a Bad status makes the metric is_null without a value,
// with Quality 0 (an Int32 property, §6.4.8.1) and the StatusCode; an
// Uncertain one keeps the value and says so; Good adds nothing; a field
// without a value is is_null.
func TestStatusAndNull(t *testing.T) {
	for _, c := range []struct {
		name    string
		dv      *ua.DataValue
		null    bool
		quality int64 // -1: no Quality property
	}{
		{"good", &ua.DataValue{Value: ua.NewDoubleVariant(1)}, false, -1},
		{"bad", &ua.DataValue{Value: ua.NewDoubleVariant(1), Status: ua.StatusBadSensorFailure}, true, QualityBad},
		{"bad without value", &ua.DataValue{Status: ua.StatusBadWaitingForInitialData}, true, QualityBad},
		{"uncertain", &ua.DataValue{Value: ua.NewDoubleVariant(1), Status: ua.StatusUncertainLastUsableValue}, false, QualityGood},
		{"no value yet", nil, true, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			birth, data := oneMetric(t, c.dv, Double)
			for _, m := range []*pb.Payload_Metric{birth, data} {
				if m.GetIsNull() != c.null || (m.Value != nil) == c.null {
					t.Errorf("is_null %v with value %v, want is_null %v", m.GetIsNull(), m.Value, c.null)
				}
				p := properties(m)
				q, ok := p[PropQuality]
				switch {
				case c.quality < 0 && ok:
					t.Errorf("Quality %v on a Good value", q)
				case c.quality >= 0 && (!ok || q.GetType() != uint32(Int32) || int64(q.GetIntValue()) != c.quality):
					t.Errorf("Quality %v, want Int32 %d", q, c.quality)
				case c.quality >= 0:
					if sc := p[PropStatusCode]; sc.GetType() != uint32(UInt32) || ua.StatusCode(sc.GetIntValue()) != c.dv.Status {
						t.Errorf("StatusCode %v, want %v", sc, c.dv.Status)
					}
				}
				if len(m.GetProperties().GetKeys()) != len(m.GetProperties().GetValues()) {
					t.Errorf("properties: %d keys, %d values", len(m.GetProperties().GetKeys()), len(m.GetProperties().GetValues()))
				}
			}
			if id := properties(birth)[PropNodeID]; id.GetStringValue() != "ns=2;s=M" || id.GetType() != uint32(String) {
				t.Errorf("birth NodeId property %v", id)
			}
		})
	}
}

// TestTypeMismatch: a value whose type is not the metric's declared datatype
// is not written (errType), and leaves the payload as it was.
func TestTypeMismatch(t *testing.T) {
	var e encoder
	p := beginPayload(nil, 1)
	n := len(p)
	p, err := e.appendMetric(p, &metric{alias: 1, hasAlias: true, ts: 1}, &ua.DataValue{Value: ua.NewInt32Variant(1)}, Double)
	if err != errType || len(p) != n {
		t.Fatalf("err %v, payload grew %d bytes", err, len(p)-n)
	}
}

// TestLongMetric: a metric longer than 127 bytes gets a longer length
// prefix, and what follows it stays intact.
func TestLongMetric(t *testing.T) {
	var e encoder
	long := strings.Repeat("x", 70000)
	p := beginPayload(nil, 5)
	p, _ = e.appendMetric(p, &metric{name: long, alias: 1, hasAlias: true, dtype: String, ts: 5}, &ua.DataValue{Value: ua.NewStringVariant(long)}, 0)
	p, _ = e.appendMetric(p, &metric{alias: 2, hasAlias: true, ts: 6}, &ua.DataValue{Value: ua.NewDoubleVariant(3)}, Double)
	got := decodeMetricPayload(t, p, 128)
	if len(got.Metrics) != 2 || got.Metrics[0].GetStringValue() != long || got.Metrics[0].GetName() != long ||
		got.Metrics[1].GetDoubleValue() != 3 || got.GetSeq() != 128 {
		t.Fatalf("decoded %d metrics, seq %d", len(got.Metrics), got.GetSeq())
	}
}

// TestRebirthed: appendRebirthed marks the metrics its predicate picks
// is_historical and keeps everything else of the payload.
func TestRebirthed(t *testing.T) {
	var e encoder
	p := beginPayload(nil, 99)
	for i := range 3 {
		p, _ = e.appendMetric(p, &metric{alias: uint64(i + 1), hasAlias: true, ts: uint64(90 + i)}, &ua.DataValue{Value: ua.NewDoubleVariant(float64(i))}, Double)
	}
	h, any, err := appendRebirthed(nil, body(p), func(alias, ts uint64) bool { return alias != 2 && ts >= 90 })
	if err != nil || !any {
		t.Fatal(err, any)
	}
	got := decodeMetricPayload(t, h, 17)
	if got.GetTimestamp() != 99 || got.GetSeq() != 17 || len(got.Metrics) != 3 {
		t.Fatalf("rebirthed payload %v", got)
	}
	for i, m := range got.Metrics {
		if m.GetIsHistorical() != (i != 1) || m.GetAlias() != uint64(i+1) || m.GetTimestamp() != uint64(90+i) || m.GetDoubleValue() != float64(i) {
			t.Errorf("metric %d: %v", i, m)
		}
	}
	if _, _, err := appendRebirthed(nil, []byte{0x12, 0x05, 0x01}, func(uint64, uint64) bool { return true }); err == nil {
		t.Error("a truncated payload was taken")
	}
}

// TestSeqRoom: every seq from 0 to 255 fits the room and decodes.
func TestSeqRoom(t *testing.T) {
	p := beginPayload(nil, 1)
	for s := range 256 {
		var got pb.Payload
		if err := proto.Unmarshal(withSeq(p, uint8(s)), &got); err != nil || got.Seq == nil || got.GetSeq() != uint64(s) || got.GetTimestamp() != 1 {
			t.Fatalf("seq %d: %v %v", s, err, &got)
		}
	}
}
