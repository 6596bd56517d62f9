package bridge

import (
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/resume"
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
	g, err := NewWriterGroup(defaulted(config.WriterGroup{
		Name:               "bench",
		PublishingInterval: config.Duration(time.Second),
		KeyFrameCount:      10,
		Writers:            []config.DataSetWriter{{Name: "w", Fields: fields}},
	}), Options{Queues: []sink.Queue{q}, PublisherID: "bench", Logger: quietLog})
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

// roundsGroup is hotPathGroup's group of fields fields with a message of
// rounds values of each, the fields in turn, rounds times: what a server
// sends when sampling is faster than publishing and it lists each item's
// queue item by item.
func roundsGroup(tb testing.TB, fields, rounds int, q sink.Queue) (*WriterGroup, []ua.MonitoredItemNotification) {
	g, one := hotPathGroup(tb, fields, q)
	items := make([]ua.MonitoredItemNotification, 0, fields*rounds)
	for range rounds {
		items = append(items, one...)
	}
	return g, items
}

// withMarks gives g marks in a directory of the test's, with rings of ring
// entries (as at least once), and times.
func withMarks(tb testing.TB, g *WriterGroup, ring int) {
	tb.Helper()
	m, err := resume.OpenMarks(tb.TempDir(), g.name, len(g.writers), ring)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = m.Close() })
	g.marks = m
	for _, w := range g.writers {
		g.markWriter(w)
	}
	tm, err := resume.OpenTimes(tb.TempDir(), g.name, len(g.fields))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = tm.Close() })
	g.times = tm
}

// step changes every value and delivers the message as the client does.
func step(g *WriterGroup, items []ua.MonitoredItemNotification, seq uint32) {
	for i := range items {
		items[i].Value.Value.SetDouble(float64(seq) + float64(i)*0.5)
	}
	g.onDataChange(nil, seq, items)
}

// hotPathRun measures g's hot path on items (n of them) into q.
func hotPathRun(b *testing.B, g *WriterGroup, items []ua.MonitoredItemNotification, q *discardQueue, n int) {
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
}

// BenchmarkWriterGroupHotPath measures notification → cache → Part 14 JSON
// → sink.Message for one notification message of n numeric fields (one
// DataSetMessage, a key frame every 10th), against a naive bridge that
// builds a map per message and encodes it with encoding/json.
func BenchmarkWriterGroupHotPath(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, marks := range []bool{false, true} {
			name := "bridge"
			if marks {
				name = "bridge+marks" // the restart marks stored per message
			}
			b.Run(fmt.Sprintf("%s/fields=%d", name, n), func(b *testing.B) {
				q := &discardQueue{}
				g, items := hotPathGroup(b, n, q)
				if marks {
					withMarks(b, g, 72)
				}
				hotPathRun(b, g, items, q, n)
			})
		}
		b.Run(fmt.Sprintf("bridge/rounds=10x%d", n/10), func(b *testing.B) {
			q := &discardQueue{}
			g, items := roundsGroup(b, n/10, 10, q)
			for s := uint32(1); s <= 20; s++ {
				step(g, items, s)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				step(g, items, uint32(i+21))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/notification")
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

// valuesBenchGroup is a group of n fields in writers of 10,000 (the bench's
// folders), every one with a value; field 0 of each writer reads the node
// ns=1;s=Shared besides its own, so a query by that node matches one field
// per writer.
func valuesBenchGroup(b *testing.B, n int) *WriterGroup {
	b.Helper()
	const per = 10_000
	nodes := make([][]string, (n+per-1)/per)
	for w := range nodes {
		nodes[w] = make([]string, min(per, n-w*per))
		for i := range nodes[w] {
			nodes[w][i] = fmt.Sprintf("ns=1;s=Load.F%03d.V%05d", w, i)
		}
		nodes[w][0] = "ns=1;s=Shared"
	}
	return valuesGroup(b, nodes)
}

// BenchmarkLastValuesPage reads one page of 100 last values of a group of a
// million fields at its start, middle and end, by writer and by node (the
// node index built before the timer starts): a page costs its own size, not
// the group's. The baseline is how the API read a page before: every
// field's value, then the page cut out.
func BenchmarkLastValuesPage(b *testing.B) {
	const n = 1_000_000
	g := valuesBenchGroup(b, n)
	g.LastValues(ValueFilter{Node: "ns=1;s=Shared"}, 0, 0) // builds the index
	for _, c := range []struct {
		name string
		f    ValueFilter
		from int
	}{
		{"all/start", ValueFilter{}, 0},
		{"all/middle", ValueFilter{}, n / 2},
		{"all/end", ValueFilter{}, n - 100},
		{"writer/middle", ValueFilter{Writer: "w050"}, 505_000},
		{"node/start", ValueFilter{Node: "ns=1;s=Shared"}, 0},
		{"node/unique", ValueFilter{Node: "ns=1;s=Load.F099.V09999"}, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				vs, _ := g.LastValues(c.f, c.from, 100)
				if len(vs) == 0 {
					b.Fatal("no values")
				}
			}
		})
	}
	b.Run("baseline/every-field", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			vs, _ := g.LastValues(ValueFilter{}, 0, math.MaxInt)
			if len(vs[n/2:n/2+100]) != 100 {
				b.Fatal("no values")
			}
		}
	})
}

// BenchmarkLastValuesAllPages reads every page of 100 of groups of 100,000
// and 1,000,000 fields: the time per page stays the same (linear in all).
func BenchmarkLastValuesAllPages(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		g := valuesBenchGroup(b, n)
		b.Run(fmt.Sprintf("fields=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			pages := 0
			for b.Loop() {
				for from := 0; from >= 0; pages++ {
					_, from = g.LastValues(ValueFilter{}, from, 100)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pages), "ns/page")
		})
	}
}

// BenchmarkNodeIndex builds the node index of a million fields: the cost of
// the first query by node after the fields changed.
func BenchmarkNodeIndex(b *testing.B) {
	g := valuesBenchGroup(b, 1_000_000)
	b.ReportAllocs()
	for b.Loop() {
		g.vmu.Lock()
		g.invalidateNodes()
		g.vmu.Unlock()
		g.LastValues(ValueFilter{Node: "ns=1;s=Shared"}, 0, 1)
	}
}
