package bridge

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/uastack/ua"
)

// discardQueue is a consumer that takes every message and settles it at
// once: the cost of the pipeline without a broker.
type discardQueue struct {
	messages, bytes int
}

func (q *discardQueue) Name() string                { return "discard" }
func (q *discardQueue) Guarantee() config.Guarantee { return config.AtMostOnce }
func (q *discardQueue) Enqueue(m *sink.Message) {
	q.messages++
	q.bytes += m.Len()
	m.Done(true)
}

// hotPathGroup builds a group of one writer with n numeric fields whose
// client handles are 1 … n, without a session: notifications are fed to its
// handler directly. It returns the group and one notification message's
// items (every field changed).
func hotPathGroup(tb testing.TB, n int, q sink.Queue) (*WriterGroup, []ua.MonitoredItemNotification) {
	tb.Helper()
	fields := make([]config.Field, n)
	for i := range fields {
		fields[i] = config.Field{Name: fmt.Sprintf("Field%05d", i), Node: fmt.Sprintf("ns=1;s=Load.F000.V%05d", i)}
	}
	g, err := NewWriterGroup(config.WriterGroup{
		Name:               "bench",
		PublishingInterval: config.Duration(time.Second),
		KeyFrameCount:      10,
		Writers:            []config.DataSetWriter{{Name: "w", Fields: fields}},
	}, Options{Queues: []sink.Queue{q}, PublisherID: "bench", Logger: quietLog})
	if err != nil {
		tb.Fatal(err)
	}
	g.base = 1
	now := ua.Now()
	items := make([]ua.MonitoredItemNotification, n)
	for i := range items {
		items[i].ClientHandle = uint32(i + 1)
		items[i].Value = ua.DataValue{Value: ua.NewDoubleVariant(float64(i)), SourceTimestamp: now, ServerTimestamp: now}
	}
	return g, items
}

// step changes every value and delivers the message as the client does.
func step(g *WriterGroup, items []ua.MonitoredItemNotification, seq uint32) {
	for i := range items {
		items[i].Value.Value.SetDouble(float64(seq) + float64(i)*0.5)
	}
	g.onDataChange(nil, seq, items)
}

// BenchmarkWriterGroupHotPath measures notification → cache → Part 14 JSON
// → sink.Message for one notification message of n numeric fields (one
// DataSetMessage, a key frame every 10th), against a naive bridge that
// builds a map per message and encodes it with encoding/json.
func BenchmarkWriterGroupHotPath(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("bridge/fields=%d", n), func(b *testing.B) {
			q := &discardQueue{}
			g, items := hotPathGroup(b, n, q)
			for s := uint32(1); s <= 20; s++ { // warm up: metadata, pools, scratch
				step(g, items, s)
			}
			q.messages, q.bytes = 0, 0
			b.ReportAllocs()
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			b.ResetTimer()
			for i := range b.N {
				step(g, items, uint32(i+21))
			}
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			notes := float64(b.N) * float64(n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/notes, "ns/notification")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/notes, "allocs/notification")
			b.ReportMetric(float64(q.bytes)/float64(q.messages), "B/msg")
		})
		b.Run(fmt.Sprintf("encoding-json-map/fields=%d", n), func(b *testing.B) {
			_, items := hotPathGroup(b, n, &discardQueue{})
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("Field%05d", i)
			}
			bytes := 0
			b.ReportAllocs()
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			b.ResetTimer()
			for i := range b.N {
				for k := range items {
					items[k].Value.Value.SetDouble(float64(i) + float64(k)*0.5)
				}
				payload := make(map[string]any, n)
				for k := range items {
					dv := &items[k].Value
					payload[names[k]] = map[string]any{"UaType": 11, "Value": dv.Value.Double()}
				}
				msg := map[string]any{
					"MessageId":   fmt.Sprintf("bench-%d", i),
					"MessageType": "ua-data",
					"PublisherId": "bench",
					"Messages": []any{map[string]any{
						"DataSetWriterId": 1,
						"SequenceNumber":  i,
						"MetaDataVersion": map[string]any{"MajorVersion": 1, "MinorVersion": 1},
						"Timestamp":       time.Now().UTC().Format(time.RFC3339Nano),
						"MessageType":     "ua-deltaframe",
						"Payload":         payload,
					}},
				}
				out, err := json.Marshal(msg)
				if err != nil {
					b.Fatal(err)
				}
				bytes += len(out)
			}
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			notes := float64(b.N) * float64(n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/notes, "ns/notification")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/notes, "allocs/notification")
			b.ReportMetric(float64(bytes)/float64(b.N), "B/msg")
		})
	}
}

// TestFieldSize keeps the per-item memory of the pipeline small: a field
// (value cache and name included: the compact cache of cache.go, the name an
// offset into its writer's names) and its share of the scratch stay within
// 40 bytes, so that with the client's item table a million items need less
// than 200 bytes each. Values that do not fit a field (strings, arrays,
// timestamps far apart …) cost a side-table entry besides, only for the
// fields that have them.
func TestFieldSize(t *testing.T) {
	if sz := unsafe.Sizeof(field{}) + unsafe.Sizeof(entry{}); sz > 40 {
		t.Fatalf("field + entry = %d bytes, want ≤ 40", sz)
	}
}
