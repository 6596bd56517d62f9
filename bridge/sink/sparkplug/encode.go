package sparkplug

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/ua"
)

// The payload encoder: Sparkplug B protobuf written with protowire straight
// into a byte slice the caller reuses, without message structs. Nothing here
// allocates for the scalars of the numeric types, Boolean, String, DateTime,
// StatusCode and Guid, nor for their arrays; text forms of the other types
// (node ids, structures as JSON) may.
//
// A payload begins with headerRoom bytes left free for its seq field, which
// the node writes when it publishes the message (withSeq): seq counts the
// messages of the node's MQTT session in publish order, which the encoder,
// running on a writer group's dispatch goroutine, cannot know.

// Field numbers of sparkplug_b.proto.
const (
	fPayloadTimestamp protowire.Number = 1
	fPayloadMetrics   protowire.Number = 2
	fPayloadSeq       protowire.Number = 3

	fMetricName       protowire.Number = 1
	fMetricAlias      protowire.Number = 2
	fMetricTimestamp  protowire.Number = 3
	fMetricDatatype   protowire.Number = 4
	fMetricHistorical protowire.Number = 5
	fMetricIsNull     protowire.Number = 7
	fMetricProperties protowire.Number = 9
	fMetricInt        protowire.Number = 10
	fMetricLong       protowire.Number = 11
	fMetricFloat      protowire.Number = 12
	fMetricDouble     protowire.Number = 13
	fMetricBoolean    protowire.Number = 14
	fMetricString     protowire.Number = 15
	fMetricBytes      protowire.Number = 16

	fSetKeys   protowire.Number = 1
	fSetValues protowire.Number = 2

	fPropType   protowire.Number = 1
	fPropInt    protowire.Number = 3
	fPropString protowire.Number = 8
)

// headerRoom is the room a payload keeps in front for its seq field: the
// tag and a varint of at most two bytes (seq is 0 to 255).
const headerRoom = 3

// Metric property names.
const (
	// PropQuality is Sparkplug's quality property (§6.4.8.1): 0 BAD, 192
	// GOOD, 500 STALE; written when the OPC UA status is not Good.
	PropQuality = "Quality"
	// PropStatusCode is the value's OPC UA StatusCode (UInt32), written when
	// it is not Good.
	PropStatusCode = "StatusCode"
	// PropNodeID is the OPC UA node id a metric comes from, in births.
	PropNodeID = "NodeId"
)

// Quality codes of the Quality property.
const (
	QualityBad   = 0
	QualityGood  = 192
	QualityStale = 500
)

// errType: a value whose type is not the metric's declared datatype.
var errType = errors.New("sparkplug: value type differs from the metric's datatype")

// beginPayload starts a payload in b (truncated): the room for seq and the
// payload's timestamp (ms since the epoch).
func beginPayload(b []byte, ts uint64) []byte {
	b = append(b[:0], 0, 0, 0)
	b = protowire.AppendTag(b, fPayloadTimestamp, protowire.VarintType)
	return protowire.AppendVarint(b, ts)
}

// withSeq writes seq into the room in front of payload p and returns the
// payload from its first byte. p's room may be written again (a resend).
func withSeq(p []byte, seq uint8) []byte {
	if seq < 0x80 {
		p[1], p[2] = byte(fPayloadSeq<<3), seq
		return p[1:]
	}
	p[0], p[1], p[2] = byte(fPayloadSeq<<3), seq|0x80, 1
	return p
}

// body returns a payload without its room (for the store and decoding).
func body(p []byte) []byte { return p[headerRoom:] }

// beginLen starts a length-delimited field num (a message or bytes): it
// writes the tag and one byte of length, and returns where the content
// starts; endLen fills the length in.
func beginLen(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = append(b, 0)
	return b, len(b)
}

var zeros [8]byte

// endLen writes the length of the field begun at start, moving the content
// when the length takes more than the byte beginLen left for it.
func endLen(b []byte, start int) []byte {
	n := len(b) - start
	if n < 0x80 {
		b[start-1] = byte(n)
		return b
	}
	k := protowire.SizeVarint(uint64(n)) - 1
	b = append(b, zeros[:k]...)
	copy(b[start+k:], b[start:start+n])
	protowire.AppendVarint(b[:start-1], uint64(n))
	return b
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendStringField(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// unixMillis converts an OPC UA DateTime to ms since the epoch (0 for times
// before it, which Sparkplug's unsigned timestamps cannot hold).
func unixMillis(d ua.DateTime) uint64 {
	const ticksTo1970 = 116444736000000000
	if d <= ticksTo1970 {
		return 0
	}
	return uint64(d-ticksTo1970) / 10_000
}

// valueTime is the timestamp of a value: its source timestamp, else its
// server timestamp, else now (ms).
func valueTime(dv *ua.DataValue, now uint64) uint64 {
	switch {
	case dv.SourceTimestamp > 0:
		return unixMillis(dv.SourceTimestamp)
	case dv.ServerTimestamp > 0:
		return unixMillis(dv.ServerTimestamp)
	}
	return now
}

// encoder writes metrics; it keeps scratch space for the values written as
// text, and is used by one goroutine at a time.
type encoder struct {
	text []byte
}

// metric is what a metric carries besides its value.
type metric struct {
	name     string // births only
	alias    uint64
	hasAlias bool
	dtype    DataType // births only; 0 omits it
	ts       uint64
	hist     bool
	nodeID   string // births only; "" omits the NodeId property
}

// appendMetric writes one metric of a payload with the value dv (nil: no
// value yet, is_null) published as m.dtype, or, when m.dtype is 0 (data
// messages), as want. A Bad status makes the metric is_null with the
// Quality and StatusCode properties; an Uncertain one keeps the value and
// adds them. errType when the value's type is not the datatype: b is then
// returned as it came.
func (e *encoder) appendMetric(b []byte, m *metric, dv *ua.DataValue, want DataType) ([]byte, error) {
	dt := m.dtype
	if dt == 0 {
		dt = want
	}
	null := dv == nil || dv.Status.IsBad() || dv.Value.IsNull()
	if !null && DataTypeOf(dv.Value.Type(), dv.Value.IsArray()) != dt {
		return b, errType
	}
	b, start := beginLen(b, fPayloadMetrics)
	if m.name != "" {
		b = appendStringField(b, fMetricName, m.name)
	}
	if m.hasAlias {
		b = appendVarintField(b, fMetricAlias, m.alias)
	}
	b = appendVarintField(b, fMetricTimestamp, m.ts)
	if m.dtype != 0 {
		b = appendVarintField(b, fMetricDatatype, uint64(m.dtype))
	}
	if m.hist {
		b = appendVarintField(b, fMetricHistorical, 1)
	}
	if null {
		b = appendVarintField(b, fMetricIsNull, 1)
	}
	var st ua.StatusCode
	if dv != nil {
		st = dv.Status
	}
	if !st.IsGood() || m.nodeID != "" {
		b = appendProperties(b, st, m.nodeID)
	}
	if !null {
		b = e.appendValue(b, dt, &dv.Value)
	}
	return endLen(b, start), nil
}

// appendProperties writes a metric's PropertySet: Quality and StatusCode
// when st is not Good, NodeId when nodeID is set.
func appendProperties(b []byte, st ua.StatusCode, nodeID string) []byte {
	b, start := beginLen(b, fMetricProperties)
	if !st.IsGood() {
		b = appendStringField(b, fSetKeys, PropQuality)
		b = appendStringField(b, fSetKeys, PropStatusCode)
	}
	if nodeID != "" {
		b = appendStringField(b, fSetKeys, PropNodeID)
	}
	if !st.IsGood() {
		q := uint64(QualityGood)
		if st.IsBad() {
			q = QualityBad
		}
		b = appendPropertyInt(b, Int32, q)
		b = appendPropertyInt(b, UInt32, uint64(st))
	}
	if nodeID != "" {
		var p int
		b, p = beginLen(b, fSetValues)
		b = appendVarintField(b, fPropType, uint64(String))
		b = appendStringField(b, fPropString, nodeID)
		b = endLen(b, p)
	}
	return endLen(b, start)
}

func appendPropertyInt(b []byte, t DataType, v uint64) []byte {
	b, p := beginLen(b, fSetValues)
	b = appendVarintField(b, fPropType, uint64(t))
	b = appendVarintField(b, fPropInt, v)
	return endLen(b, p)
}

// appendValue writes v, whose type maps to dt, as the metric's value field.
func (e *encoder) appendValue(b []byte, dt DataType, v *ua.Variant) []byte {
	if v.IsArray() {
		b, start := beginLen(b, fMetricBytes)
		b = e.appendArray(b, v)
		return endLen(b, start)
	}
	switch v.Type() {
	case ua.TypeBoolean:
		return appendVarintField(b, fMetricBoolean, v.RawBits()&1)
	case ua.TypeSByte, ua.TypeInt16, ua.TypeInt32:
		// Signed types travel in the uint32 as their two's complement.
		return appendVarintField(b, fMetricInt, uint64(uint32(int32(int64(v.RawBits())))))
	case ua.TypeByte, ua.TypeUInt16, ua.TypeUInt32, ua.TypeStatusCode:
		return appendVarintField(b, fMetricInt, uint64(uint32(v.RawBits())))
	case ua.TypeInt64, ua.TypeUInt64:
		return appendVarintField(b, fMetricLong, v.RawBits())
	case ua.TypeFloat:
		b = protowire.AppendTag(b, fMetricFloat, protowire.Fixed32Type)
		return protowire.AppendFixed32(b, uint32(v.RawBits()))
	case ua.TypeDouble:
		b = protowire.AppendTag(b, fMetricDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, v.RawBits())
	case ua.TypeDateTime:
		return appendVarintField(b, fMetricLong, unixMillis(v.DateTime()))
	case ua.TypeString, ua.TypeXmlElement:
		return appendStringField(b, fMetricString, v.Str())
	case ua.TypeByteString:
		bs, _ := v.Value().([]byte)
		b = protowire.AppendTag(b, fMetricBytes, protowire.BytesType)
		return protowire.AppendBytes(b, bs)
	}
	e.text = e.appendText(e.text[:0], v)
	b = protowire.AppendTag(b, fMetricString, protowire.BytesType)
	return protowire.AppendBytes(b, e.text)
}

// appendText appends the text form of a scalar Sparkplug has no type for.
func (e *encoder) appendText(b []byte, v *ua.Variant) []byte {
	switch x := v.Value().(type) {
	case ua.Guid:
		return x.AppendText(b)
	case ua.NodeID:
		return x.AppendText(b)
	case ua.ExpandedNodeID:
		return x.AppendText(b)
	case ua.QualifiedName:
		return append(b, x.String()...)
	case ua.LocalizedText:
		return append(b, x.Text...)
	}
	return e.appendJSON(b, v)
}

// appendJSON appends the OPC UA JSON of v (compact, without the type).
func (e *encoder) appendJSON(b []byte, v *ua.Variant) []byte {
	j := jsonenc.NewEncoder(nil, jsonenc.Options{})
	defer j.Release()
	j.WriteVariantBody(v)
	if j.Err() != nil {
		return b
	}
	return append(b, j.Bytes()...)
}

// appendArray appends the bytes of an array value (Sparkplug 3.0 §6.4.17:
// little-endian packed elements; Boolean bit-packed after a 4-byte count;
// strings each ended by a NUL; DateTime as 8-byte ms). Matrices are
// flattened in row-major order.
func (e *encoder) appendArray(b []byte, v *ua.Variant) []byte {
	switch a := v.Value().(type) {
	case []bool:
		b = binary.LittleEndian.AppendUint32(b, uint32(len(a)))
		var cur byte
		for i, x := range a {
			if x {
				cur |= 0x80 >> (i & 7)
			}
			if i&7 == 7 {
				b, cur = append(b, cur), 0
			}
		}
		if len(a)&7 != 0 {
			b = append(b, cur)
		}
		return b
	case []int8:
		for _, x := range a {
			b = append(b, byte(x))
		}
		return b
	case []byte:
		return append(b, a...)
	case []int16:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint16(b, uint16(x))
		}
		return b
	case []uint16:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint16(b, x)
		}
		return b
	case []int32:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		}
		return b
	case []uint32:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint32(b, x)
		}
		return b
	case []ua.StatusCode:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		}
		return b
	case []int64:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
		return b
	case []uint64:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint64(b, x)
		}
		return b
	case []float32:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		return b
	case []float64:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
		return b
	case []ua.DateTime:
		for _, x := range a {
			b = binary.LittleEndian.AppendUint64(b, unixMillis(x))
		}
		return b
	case []string:
		for _, x := range a {
			b = append(append(b, x...), 0)
		}
		return b
	case []ua.XmlElement:
		for _, x := range a {
			b = append(append(b, x...), 0)
		}
		return b
	case [][]byte:
		for _, x := range a {
			b = append(base64.StdEncoding.AppendEncode(b, x), 0)
		}
		return b
	case []ua.Guid:
		for _, x := range a {
			b = append(x.AppendText(b), 0)
		}
		return b
	case []ua.NodeID:
		for _, x := range a {
			b = append(x.AppendText(b), 0)
		}
		return b
	case []ua.ExpandedNodeID:
		for _, x := range a {
			b = append(x.AppendText(b), 0)
		}
		return b
	case []ua.QualifiedName:
		for _, x := range a {
			b = append(append(b, x.String()...), 0)
		}
		return b
	case []ua.LocalizedText:
		for _, x := range a {
			b = append(append(b, x.Text...), 0)
		}
		return b
	case []ua.ExtensionObject:
		for i := range a {
			ev, _ := ua.NewVariant(&a[i])
			b = append(e.appendJSON(b, &ev), 0)
		}
		return b
	case []ua.DataValue:
		for i := range a {
			ev, _ := ua.NewVariant(&a[i])
			b = append(e.appendJSON(b, &ev), 0)
		}
		return b
	case []ua.Variant:
		for i := range a {
			b = append(e.appendJSON(b, &a[i]), 0)
		}
		return b
	case []ua.DiagnosticInfo:
		for i := range a {
			ev, _ := ua.NewVariant(&a[i])
			b = append(e.appendJSON(b, &ev), 0)
		}
		return b
	}
	return b
}

// metricHead is what rewriteMetrics reads of an encoded metric.
type metricHead struct {
	name     []byte
	alias    uint64
	hasAlias bool
	ts       uint64
	dtype    DataType
}

// metricEdit is how rewriteMetrics writes a metric: left out (drop), or
// with the name, alias (hasAlias) and datatype given here instead of those
// it had, and marked historical.
type metricEdit struct {
	drop     bool
	name     string
	alias    uint64
	hasAlias bool
	dtype    DataType
	hist     bool
}

// rewriteMetrics appends the fields of payload body (without its room) to
// dst, each metric as edit says of it: its timestamp, is_null, properties
// and value as they were, then the edit's name, alias, datatype and
// historical flag instead of the metric's own (a protobuf message's fields
// may come in any order: one pass writes the metric). The payload's seq is
// left out: a message's seq is the one it is sent with. It returns how
// many metrics it wrote. edit must not keep the head's name.
func rewriteMetrics(dst, body []byte, edit func(metricHead) metricEdit) ([]byte, int, error) {
	written := 0
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			return dst, written, protowire.ParseError(n)
		}
		if !num.IsValid() {
			return dst, written, fmt.Errorf("sparkplug: field number %d out of range", num)
		}
		m := protowire.ConsumeFieldValue(num, typ, body[n:])
		if m < 0 {
			return dst, written, protowire.ParseError(m)
		}
		switch {
		case num == fPayloadMetrics && typ == protowire.BytesType:
			v, _ := protowire.ConsumeBytes(body[n:])
			mark := len(dst)
			var start int
			var h metricHead
			var err error
			dst, start = beginLen(dst, fPayloadMetrics)
			if dst, h, err = appendMetricRest(dst, v); err != nil {
				return dst[:mark], written, err
			}
			e := edit(h)
			if e.drop {
				dst = dst[:mark]
				break
			}
			if e.name != "" {
				dst = appendStringField(dst, fMetricName, e.name)
			}
			if e.hasAlias {
				dst = appendVarintField(dst, fMetricAlias, e.alias)
			}
			if e.dtype != 0 {
				dst = appendVarintField(dst, fMetricDatatype, uint64(e.dtype))
			}
			if e.hist {
				dst = appendVarintField(dst, fMetricHistorical, 1)
			}
			dst = endLen(dst, start)
			written++
		case num == fPayloadSeq:
		default:
			dst = append(dst, body[:n+m]...)
		}
		body = body[n+m:]
	}
	return dst, written, nil
}

// appendMetricRest appends the fields of encoded metric b but its name,
// alias, datatype and historical flag, and returns what it read of them
// (and of its timestamp).
func appendMetricRest(dst, b []byte) ([]byte, metricHead, error) {
	var h metricHead
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return dst, h, protowire.ParseError(n)
		}
		k := protowire.ConsumeFieldValue(num, typ, b[n:])
		if k < 0 {
			return dst, h, protowire.ParseError(k)
		}
		switch {
		case num == fMetricName && typ == protowire.BytesType:
			h.name, _ = protowire.ConsumeBytes(b[n:])
		case num == fMetricAlias && typ == protowire.VarintType:
			h.alias, _ = protowire.ConsumeVarint(b[n:])
			h.hasAlias = true
		case num == fMetricDatatype && typ == protowire.VarintType:
			v, _ := protowire.ConsumeVarint(b[n:])
			h.dtype = DataType(v)
		case num == fMetricName, num == fMetricAlias, num == fMetricDatatype, num == fMetricHistorical:
			// Of another wire type: left out as the well-typed ones are.
		default:
			if num == fMetricTimestamp && typ == protowire.VarintType {
				h.ts, _ = protowire.ConsumeVarint(b[n:])
			}
			dst = append(dst, b[:n+k]...)
		}
		b = b[n+k:]
	}
	return dst, h, nil
}

// appendRebirthed appends payload body (without its room) to dst, its
// metrics for which hist(alias, timestamp) says so marked is_historical,
// and returns it with the room in front, and whether any metric was
// marked. Data that was not sent before a later birth goes out after it:
// what is older than the values the birth carried is history, so that it
// does not overwrite them at the host.
func appendRebirthed(dst, body []byte, hist func(alias, ts uint64) bool) ([]byte, bool, error) {
	marked := false
	dst, _, err := rewriteMetrics(append(dst[:0], 0, 0, 0), body, func(h metricHead) metricEdit {
		e := metricEdit{alias: h.alias, hasAlias: h.hasAlias, hist: hist(h.alias, h.ts)}
		marked = marked || e.hist
		return e
	})
	return dst, marked, err
}

// appendNamed appends payload body (without its room) to dst, each metric
// with the name and datatype of its alias in dm instead of the alias: a
// record that means the same to a later process, whose aliases and metric
// versions may differ. Metrics whose alias dm does not have are left out;
// it returns how many it wrote.
func appendNamed(dst, body []byte, dm *devMetrics) ([]byte, int, error) {
	next := 0 // a writer's metrics come in the order of its fields
	return rewriteMetrics(dst, body, func(h metricHead) metricEdit {
		i := dm.aliasIndex(h.alias, next)
		if i < 0 || !h.hasAlias {
			return metricEdit{drop: true}
		}
		next = i + 1
		return metricEdit{name: dm.defs[i].name, dtype: dm.defs[i].dtype}
	})
}

// aliased is what appendAliased did: the metrics it kept and left out,
// those of them whose metric in dm has no type yet (its first value not
// come: unknown), and whether any kept one was marked historical.
type aliased struct {
	kept, left, unknown int
	hist                bool
}

// appendAliased appends named record body (appendNamed's) to dst with the
// room in front, each metric with its alias in dm, found by name, instead
// of its name and datatype, marked historical when it is not newer than
// birthTS says of the alias (the values of the device's last DBIRTH).
// Metrics dm has no metric of that name and datatype for are left out:
// their values would not mean what they meant.
func appendAliased(dst, body []byte, dm *devMetrics, birthTS map[uint64]uint64) ([]byte, aliased, error) {
	var a aliased
	next := 0
	out, kept, err := rewriteMetrics(append(dst[:0], 0, 0, 0), body, func(h metricHead) metricEdit {
		i := dm.nameIndex(h.name, next)
		if i >= 0 && dm.defs[i].uaType == ua.TypeNull {
			a.unknown++
		}
		if i < 0 || dm.defs[i].dtype != h.dtype {
			a.left++
			return metricEdit{drop: true}
		}
		next = i + 1
		md := &dm.defs[i]
		bt, ok := birthTS[md.alias]
		e := metricEdit{alias: md.alias, hasAlias: true, hist: !ok || h.ts <= bt}
		a.hist = a.hist || e.hist
		return e
	})
	a.kept = kept
	return out, a, err
}
