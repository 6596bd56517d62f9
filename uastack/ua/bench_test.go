package ua

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	gua "github.com/gopcua/opcua/ua"
)

// publishResponse1000 is the decoding benchmarks' payload: one
// DataChangeNotification of 1000 MonitoredItemNotifications, each a Double with
// source and server timestamps (about 30 KB), NodeId-prefixed as on the wire.
func publishResponse1000(tb testing.TB) []byte {
	return publishResponse1000Of(tb, func(i int) Variant { return NewDoubleVariant(float64(i) * 0.25) })
}

// publishResponse1000Strings is the same with String values of 16 to 24 bytes
// ("value-000001-" and a run of x).
func publishResponse1000Strings(tb testing.TB) []byte {
	return publishResponse1000Of(tb, func(i int) Variant {
		return NewStringVariant(fmt.Sprintf("value-%06d-%s", i, strings.Repeat("x", 3+i%9)))
	})
}

func publishResponse1000Of(tb testing.TB, value func(i int) Variant) []byte {
	tb.Helper()
	t0 := NewDateTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	dcn := &DataChangeNotification{MonitoredItems: make([]MonitoredItemNotification, 1000)}
	for i := range dcn.MonitoredItems {
		dcn.MonitoredItems[i] = MonitoredItemNotification{
			ClientHandle: uint32(i + 1),
			Value: DataValue{
				Value:           value(i),
				SourceTimestamp: t0 + DateTime(i),
				ServerTimestamp: t0 + DateTime(i) + 10,
			},
		}
	}
	resp := &PublishResponse{
		ResponseHeader:           ResponseHeader{Timestamp: t0, RequestHandle: 42},
		SubscriptionID:           1,
		AvailableSequenceNumbers: []uint32{7},
		NotificationMessage: NotificationMessage{
			SequenceNumber:   7,
			PublishTime:      t0,
			NotificationData: []ExtensionObject{NewExtensionObject(dcn)},
		},
	}
	e := NewEncoder(nil)
	e.WriteStructure(resp)
	if e.Err() != nil {
		tb.Fatal(e.Err())
	}
	return e.Bytes()
}

// TestDecodePublishResponse1000 checks the benchmark payload decodes identically
// with ours and gopcua, so the two benchmarks measure the same work.
func TestDecodePublishResponse1000(t *testing.T) {
	buf := publishResponse1000(t)
	if len(buf) < 25000 || len(buf) > 35000 {
		t.Fatalf("payload is %d bytes, want about 30 KB", len(buf))
	}
	var r PublishResponse
	d := NewDecoder(buf, nil)
	if _, err := d.ReadStructure(&r); err != nil {
		t.Fatal(err)
	}
	_, v, err := gua.DecodeService(buf)
	if err != nil {
		t.Fatal(err)
	}
	theirs := v.(*gua.PublishResponse).NotificationMessage.NotificationData[0].Value.(*gua.DataChangeNotification)
	ours := r.NotificationMessage.NotificationData[0].Value.(*DataChangeNotification)
	if len(ours.MonitoredItems) != 1000 || len(theirs.MonitoredItems) != 1000 {
		t.Fatalf("items: ours %d gopcua %d", len(ours.MonitoredItems), len(theirs.MonitoredItems))
	}
	for i, m := range ours.MonitoredItems {
		g := theirs.MonitoredItems[i]
		if m.ClientHandle != g.ClientHandle || m.Value.Value.Double() != g.Value.Value.Float() ||
			!m.Value.SourceTimestamp.Time().Equal(g.Value.SourceTimestamp) ||
			!m.Value.ServerTimestamp.Time().Equal(g.Value.ServerTimestamp) {
			t.Fatalf("item %d differs: ours %+v gopcua %+v", i, m, g)
		}
	}
	r.Release()
	if !genRaceEnabled {
		allocs := testing.AllocsPerRun(50, func() {
			d.Reset(buf, nil)
			if _, err := d.ReadStructure(&r); err != nil {
				t.Fatal(err)
			}
			r.Release()
		})
		if allocs != 0 {
			t.Fatalf("steady-state decode of 1000 notifications: %v allocs, want 0", allocs)
		}
	}
}

// BenchmarkDecodePublishResponse1000 decodes the 1000-notification PublishResponse
// into a reused response whose notifications come from the pools, and releases them,
// as the subscription receive loop does.
func BenchmarkDecodePublishResponse1000(b *testing.B) {
	buf := publishResponse1000(b)
	var r PublishResponse
	d := NewDecoder(nil, nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		d.Reset(buf, nil)
		if _, err := d.ReadStructure(&r); err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/notif")
}

// BenchmarkDecodePublishResponse1000Strings is BenchmarkDecodePublishResponse1000
// with String values: numeric scalars are stored inline, but every String is
// copied out of the receive buffer into a new Go string (see Borrowed notifications
// in the package documentation), one allocation per notification.
func BenchmarkDecodePublishResponse1000Strings(b *testing.B) {
	buf := publishResponse1000Strings(b)
	var r PublishResponse
	d := NewDecoder(nil, nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	for b.Loop() {
		d.Reset(buf, nil)
		if _, err := d.ReadStructure(&r); err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
	runtime.ReadMemStats(&ms1)
	n := float64(b.N) * 1000
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/notif")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/n, "allocs/notif")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/n, "B/notif")
}

// BenchmarkGopcuaDecodePublishResponse1000Strings decodes the String payload with
// gopcua, the baseline for the figure above.
func BenchmarkGopcuaDecodePublishResponse1000Strings(b *testing.B) {
	buf := publishResponse1000Strings(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if _, _, err := gua.DecodeService(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/notif")
}

// BenchmarkGopcuaDecodePublishResponse1000 decodes the same bytes with gopcua
// v0.8.0's reflection-based ua.DecodeService.
func BenchmarkGopcuaDecodePublishResponse1000(b *testing.B) {
	buf := publishResponse1000(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if _, _, err := gua.DecodeService(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/notif")
}

// The pooled-notification benchmarks mirror the .NET stack's
// PooledNotificationBenchmarks: an inner loop of 1000 allocate/use cycles per
// operation, new versus pooled, with the pools warmed first.
const pooledIterations = 1000

var (
	sinkMIN *MonitoredItemNotification
	sinkDCN *DataChangeNotification
	sinkEFL *EventFieldList
)

func fillMIN(m *MonitoredItemNotification, i int) {
	m.ClientHandle = uint32(i)
	m.Value.Value.SetDouble(float64(i))
	m.Value.SourceTimestamp = DateTime(i)
	m.Value.ServerTimestamp = DateTime(i)
}

func BenchmarkPooledNotificationMonitoredItem(b *testing.B) {
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range pooledIterations {
				m := new(MonitoredItemNotification)
				fillMIN(m, i)
				sinkMIN = m
			}
		}
	})
	b.Run("pooled", func(b *testing.B) {
		NewMonitoredItemNotification().Release()
		b.ReportAllocs()
		for b.Loop() {
			for i := range pooledIterations {
				m := NewMonitoredItemNotification()
				fillMIN(m, i)
				sinkMIN = m
				m.Release()
			}
		}
	})
}

// DataChangeNotification with one MonitoredItemNotification, as in the .NET benchmark.
func BenchmarkPooledNotificationDataChange(b *testing.B) {
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range pooledIterations {
				n := &DataChangeNotification{MonitoredItems: make([]MonitoredItemNotification, 1)}
				fillMIN(&n.MonitoredItems[0], i)
				sinkDCN = n
			}
		}
	})
	b.Run("pooled", func(b *testing.B) {
		w := NewDataChangeNotification()
		w.MonitoredItems = append(w.MonitoredItems, MonitoredItemNotification{})
		w.Release()
		b.ReportAllocs()
		for b.Loop() {
			for i := range pooledIterations {
				n := NewDataChangeNotification()
				n.MonitoredItems = n.MonitoredItems[:1]
				if len(n.MonitoredItems) == 0 { // cold pool object: no capacity yet
					n.MonitoredItems = append(n.MonitoredItems, MonitoredItemNotification{})
				}
				fillMIN(&n.MonitoredItems[0], i)
				sinkDCN = n
				n.Release()
			}
		}
	})
}

// EventFieldList with three fields (the .NET baseline has none; real events have
// several, and a pooled list keeps their backing array).
func BenchmarkPooledNotificationEventFieldList(b *testing.B) {
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range pooledIterations {
				e := &EventFieldList{ClientHandle: uint32(i), EventFields: make([]Variant, 3)}
				e.EventFields[0].SetInt32(int32(i))
				e.EventFields[1].SetDateTime(DateTime(i))
				e.EventFields[2].SetUInt16(500)
				sinkEFL = e
			}
		}
	})
	b.Run("pooled", func(b *testing.B) {
		w := NewEventFieldList()
		w.EventFields = make([]Variant, 3)
		w.Release()
		b.ReportAllocs()
		for b.Loop() {
			for i := range pooledIterations {
				e := NewEventFieldList()
				e.ClientHandle = uint32(i)
				e.EventFields = Grow(e.EventFields, 3)
				e.EventFields[0].SetInt32(int32(i))
				e.EventFields[1].SetDateTime(DateTime(i))
				e.EventFields[2].SetUInt16(500)
				sinkEFL = e
				e.Release()
			}
		}
	})
}
