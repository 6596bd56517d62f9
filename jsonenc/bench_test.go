package jsonenc

import (
	"encoding/json"
	"io"
	"strconv"
	"testing"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/uagate/gateway/uastack/ua"
)

// benchFields builds the benchmark payload: n DataValues with a Double, a
// status (every 10th Uncertain, every 50th Bad) and both timestamps.
func benchFields(n int) ([]string, []ua.DataValue) {
	names := make([]string, n)
	dvs := make([]ua.DataValue, n)
	t0 := ua.NewDateTime(time.Date(2024, 5, 1, 10, 15, 30, 123456700, time.UTC))
	for i := range dvs {
		names[i] = "Field" + strconv.Itoa(i)
		dvs[i].Value.SetDouble(float64(i)*1.25 + 0.1)
		switch {
		case i%50 == 0:
			dvs[i].Status = ua.StatusBadSensorFailure
		case i%10 == 0:
			dvs[i].Status = ua.StatusUncertainLastUsableValue
		}
		dvs[i].SourceTimestamp = t0 + ua.DateTime(i)*10_000
		dvs[i].ServerTimestamp = t0 + ua.DateTime(i)*10_000 + 1234
	}
	return names, dvs
}

var benchHeader = NetworkMessageHeader{
	MessageID:       "32235546-05d9-4fd7-97df-ea3ff3408574",
	PublisherID:     "Plant1-Line4",
	WriterGroupName: "WG1",
	ContentMask:     NMNetworkMessageHeader | NMDataSetMessageHeader | NMPublisherID | NMWriterGroupName,
}

func benchDSM(mode Mode) DataSetMessageHeader {
	return DataSetMessageHeader{
		DataSetWriterID:  101,
		SequenceNumber:   4711,
		MetaDataVersion:  ConfigurationVersion{672341762, 672341799},
		Timestamp:        ua.NewDateTime(time.Date(2024, 5, 1, 10, 15, 30, 123000000, time.UTC)),
		Type:             KeyFrame,
		ContentMask:      DSMDataSetWriterID | DSMSequenceNumber | DSMMetaDataVersion | DSMTimestamp | DSMMessageType | FieldEncodingBits(mode),
		FieldContentMask: FieldMaskStatusCode | FieldMaskSourceTimestamp | FieldMaskServerTimestamp,
	}
}

func encodeBenchMessage(w *NetworkMessageWriter, mode Mode, names []string, dvs []ua.DataValue) error {
	hdr := benchHeader
	dsm := benchDSM(mode)
	if err := w.Begin(&hdr); err != nil {
		return err
	}
	if err := w.BeginDataSetMessage(&dsm); err != nil {
		return err
	}
	for i := range dvs {
		if err := w.AddField(names[i], &dvs[i]); err != nil {
			return err
		}
	}
	if err := w.EndDataSetMessage(); err != nil {
		return err
	}
	return w.End()
}

func BenchmarkEncodeNetworkMessage1000(b *testing.B) {
	names, dvs := benchFields(1000)
	for _, mode := range []Mode{Compact, Verbose} {
		for _, out := range []string{"memory", "writer"} {
			b.Run(mode.String()+"/"+out, func(b *testing.B) {
				var size int
				opts := WriterOptions{}
				if out == "memory" {
					opts.Sink = func(msg []byte) error { size = len(msg); return nil }
				} else {
					cw := &countWriter{}
					opts.Writer = cw
					defer func() { size = int(cw.n) / max(1, b.N) }()
				}
				w := NewNetworkMessageWriter(opts)
				defer w.Release()
				if err := encodeBenchMessage(w, mode, names, dvs); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := encodeBenchMessage(w, mode, names, dvs); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if out == "memory" {
					b.SetBytes(int64(size))
				}
				b.ReportMetric(float64(w.PeakBuffered()), "peak-B")
			})
		}
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)

// Baselines: the same logical JSON from Go structs with reflection-based
// marshallers. Payload is a map (Go structs cannot have 1000 dynamic member
// names), so member order differs; the content is the same.

type statusJSON struct {
	Code   uint32 `json:"Code"`
	Symbol string `json:"Symbol,omitempty"`
}

type fieldCompactJSON struct {
	UaType          int         `json:"UaType"`
	Value           float64     `json:"Value"`
	Status          *statusJSON `json:"Status,omitempty"`
	SourceTimestamp time.Time   `json:"SourceTimestamp"`
	ServerTimestamp time.Time   `json:"ServerTimestamp"`
}

type fieldVerboseJSON struct {
	Value           float64     `json:"Value"`
	Status          *statusJSON `json:"Status,omitempty"`
	SourceTimestamp time.Time   `json:"SourceTimestamp"`
	ServerTimestamp time.Time   `json:"ServerTimestamp"`
}

type versionJSON struct {
	MajorVersion uint32 `json:"MajorVersion"`
	MinorVersion uint32 `json:"MinorVersion"`
}

type dsmJSON[F any] struct {
	DataSetWriterID uint16       `json:"DataSetWriterId"`
	SequenceNumber  uint32       `json:"SequenceNumber"`
	MetaDataVersion versionJSON  `json:"MetaDataVersion"`
	Timestamp       time.Time    `json:"Timestamp"`
	MessageType     string       `json:"MessageType"`
	Payload         map[string]F `json:"Payload"`
}

type nmJSON[F any] struct {
	MessageID       string       `json:"MessageId"`
	MessageType     string       `json:"MessageType"`
	PublisherID     string       `json:"PublisherId"`
	WriterGroupName string       `json:"WriterGroupName"`
	Messages        []dsmJSON[F] `json:"Messages"`
}

func baselineMessage(mode Mode, names []string, dvs []ua.DataValue) any {
	dsm := benchDSM(mode)
	status := func(s ua.StatusCode) *statusJSON {
		if s == 0 {
			return nil
		}
		st := &statusJSON{Code: uint32(s)}
		if mode == Verbose {
			st.Symbol = s.Name()
		}
		return st
	}
	if mode == Compact {
		m := nmJSON[fieldCompactJSON]{MessageID: benchHeader.MessageID, MessageType: "ua-data", PublisherID: benchHeader.PublisherID, WriterGroupName: benchHeader.WriterGroupName}
		p := make(map[string]fieldCompactJSON, len(dvs))
		for i := range dvs {
			p[names[i]] = fieldCompactJSON{UaType: 11, Value: dvs[i].Value.Double(), Status: status(dvs[i].Status),
				SourceTimestamp: dvs[i].SourceTimestamp.Time(), ServerTimestamp: dvs[i].ServerTimestamp.Time()}
		}
		m.Messages = []dsmJSON[fieldCompactJSON]{{DataSetWriterID: dsm.DataSetWriterID, SequenceNumber: dsm.SequenceNumber,
			MetaDataVersion: versionJSON(dsm.MetaDataVersion), Timestamp: dsm.Timestamp.Time(), MessageType: "ua-keyframe", Payload: p}}
		return &m
	}
	m := nmJSON[fieldVerboseJSON]{MessageID: benchHeader.MessageID, MessageType: "ua-data", PublisherID: benchHeader.PublisherID, WriterGroupName: benchHeader.WriterGroupName}
	p := make(map[string]fieldVerboseJSON, len(dvs))
	for i := range dvs {
		p[names[i]] = fieldVerboseJSON{Value: dvs[i].Value.Double(), Status: status(dvs[i].Status),
			SourceTimestamp: dvs[i].SourceTimestamp.Time(), ServerTimestamp: dvs[i].ServerTimestamp.Time()}
	}
	m.Messages = []dsmJSON[fieldVerboseJSON]{{DataSetWriterID: dsm.DataSetWriterID, SequenceNumber: dsm.SequenceNumber,
		MetaDataVersion: versionJSON(dsm.MetaDataVersion), Timestamp: dsm.Timestamp.Time(), MessageType: "ua-keyframe", Payload: p}}
	return &m
}

func benchBaseline(b *testing.B, marshal func(any) ([]byte, error), encode func(io.Writer, any) error) {
	names, dvs := benchFields(1000)
	for _, mode := range []Mode{Compact, Verbose} {
		msg := baselineMessage(mode, names, dvs)
		b.Run(mode.String()+"/memory", func(b *testing.B) {
			out, err := marshal(msg)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := marshal(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(mode.String()+"/writer", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := encode(io.Discard, msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncodingJSON1000(b *testing.B) {
	benchBaseline(b, json.Marshal, func(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) })
}

func BenchmarkGoccyJSON1000(b *testing.B) {
	benchBaseline(b, gojson.Marshal, func(w io.Writer, v any) error { return gojson.NewEncoder(w).Encode(v) })
}

// BenchmarkEncoderPayload is the payload of the .NET stack's JSON encoder
// benchmark (Opc.Ua.Core.Encoders.Tests EncoderBenchmarks): a Boolean, the
// integer types, a Float, a Double, a DateTime, a 44-character String, two
// NodeIds, an Int32[10] and 10 DataValues, written PayLoadSize times (64 and
// 1024) into one document, in memory and to an io.Writer.
func BenchmarkEncoderPayload(b *testing.B) {
	const text = "The quick brown fox jumps over the lazy dog." // 44 characters
	now := ua.NewDateTime(time.Date(2024, 5, 1, 10, 15, 30, 123456700, time.UTC))
	ints := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	var dvs [10]ua.DataValue
	for i := range dvs {
		dvs[i] = ua.DataValue{Value: ua.NewDoubleVariant(float64(i) * 1.5), SourceTimestamp: now, ServerTimestamp: now}
	}
	n1, n2 := ua.NewNumericNodeID(0, 2255), ua.NewStringNodeID(1, "Demo.Static.Scalar.Double")
	write := func(e *Encoder, size int) {
		e.StartObject()
		e.FieldName("Payload")
		e.StartArray()
		for i := 0; i < size; i++ {
			e.StartObject()
			e.FieldBoolean("Boolean", true)
			e.FieldInt("SByte", -7)
			e.FieldUint("Byte", 200)
			e.FieldInt("Int16", -32000)
			e.FieldUint("UInt16", 65000)
			e.FieldInt32("Int32", -2000000000)
			e.FieldUInt32("UInt32", 4000000000)
			e.FieldInt64("Int64", -9000000000000000000)
			e.FieldUInt64("UInt64", 18000000000000000000)
			e.FieldFloat("Float", 3.14159)
			e.FieldDouble("Double", 2.718281828459045)
			e.FieldDateTime("DateTime", now)
			e.FieldString("String", text)
			e.FieldNodeID("NodeId1", n1)
			e.FieldNodeID("NodeId2", n2)
			e.FieldInt32Array("Int32Array", ints)
			e.FieldName("DataValues")
			e.StartArray()
			for j := range dvs {
				e.WriteDataValue(&dvs[j])
			}
			e.EndArray()
			e.EndObject()
		}
		e.EndArray()
		e.EndObject()
	}
	for _, size := range []int{64, 1024} {
		for _, mode := range []Mode{Compact, Verbose} {
			for _, out := range []string{"memory", "writer"} {
				b.Run("PayLoadSize="+strconv.Itoa(size)+"/"+mode.String()+"/"+out, func(b *testing.B) {
					opts := Options{Mode: mode, NamespaceURIs: []string{UANamespace, "http://opcfoundation.org/Quickstarts/ReferenceServer"}}
					var w io.Writer
					if out == "writer" {
						w = io.Discard
					}
					e := NewEncoder(w, opts)
					write(e, size)
					e.Flush()
					b.SetBytes(int64(len(e.Bytes())) + e.Written())
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						e.Reset(w, opts)
						write(e, size)
						if err := e.Flush(); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					b.ReportMetric(float64(e.PeakBuffered()), "peak-B")
					e.Release()
				})
			}
		}
	}
}

// BenchmarkInterleaved1000 runs jsonenc, encoding/json and goccy/go-json on
// the same 1000-field message in alternation, one after the other in every
// iteration, so that load from other processes hits all three alike. It
// reports the time per message of each and the speed-up of jsonenc.
func BenchmarkInterleaved1000(b *testing.B) {
	names, dvs := benchFields(1000)
	for _, mode := range []Mode{Compact, Verbose} {
		b.Run(mode.String(), func(b *testing.B) {
			msg := baselineMessage(mode, names, dvs)
			w := NewNetworkMessageWriter(WriterOptions{Sink: func([]byte) error { return nil }})
			defer w.Release()
			var tOurs, tStd, tGoccy time.Duration
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if err := encodeBenchMessage(w, mode, names, dvs); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := json.Marshal(msg); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if _, err := gojson.Marshal(msg); err != nil {
					b.Fatal(err)
				}
				t3 := time.Now()
				tOurs += t1.Sub(t0)
				tStd += t2.Sub(t1)
				tGoccy += t3.Sub(t2)
			}
			n := float64(b.N)
			b.ReportMetric(float64(tOurs.Nanoseconds())/n, "jsonenc-ns/msg")
			b.ReportMetric(float64(tStd.Nanoseconds())/n, "encjson-ns/msg")
			b.ReportMetric(float64(tGoccy.Nanoseconds())/n, "goccy-ns/msg")
			b.ReportMetric(float64(tStd)/float64(tOurs), "x-vs-encjson")
			b.ReportMetric(float64(tGoccy)/float64(tOurs), "x-vs-goccy")
		})
	}
}
