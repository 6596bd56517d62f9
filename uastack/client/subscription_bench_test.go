package client

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopcua/opcua"
	gua "github.com/gopcua/opcua/ua"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// Subscription benchmarks against the simulation server in a child process, so
// that the CPU time (cpu-ns/op) and the allocations (allocs/op) are the
// client's alone. b.N counts notifications delivered to the handler: ns/op,
// cpu-ns/op and allocs/op are per notification. Results:
// the root BENCHMARKS.md.
//
//	go test -run '^$' -bench 'SubscriptionThroughput' -benchtime 2000000x ./uastack/client/

const (
	benchFolders   = 10
	benchVariables = 1000 // 10,000 items
	benchRate      = 50 * time.Millisecond
)

var (
	benchSimMu   sync.Mutex
	benchSimURLs = map[string]string{}
)

// benchSim starts one simulation server process per kind of variables for all
// benchmark rounds: 10,000 variables changing every 50 ms (200,000
// notifications per second on offer), Double ("double") or every scalar type
// in turn ("mixed": strings, byte strings, GUIDs … too). It lives until the
// test binary ends.
func benchSim(b *testing.B, kind string) string {
	benchSimMu.Lock()
	defer benchSimMu.Unlock()
	if u, ok := benchSimURLs[kind]; ok {
		return u
	}
	o := simOptions{Folders: benchFolders, Variables: benchVariables, Rate: benchRate}
	if kind == "double" {
		o.Types = []ua.TypeID{ua.TypeDouble}
	}
	// Not b: its cleanup would end the server after the first round.
	u := startSimProcess(noCleanupTB{b}, o)
	benchSimURLs[kind] = u
	return u
}

// noCleanupTB drops cleanups: the child process it starts ends with this one.
type noCleanupTB struct{ testing.TB }

func (noCleanupTB) Cleanup(func()) {}

// notificationCounter ends a benchmark round once b.N notifications arrived.
type notificationCounter struct {
	n      atomic.Int64
	target atomic.Int64
	done   chan struct{}
	once   sync.Once
	close  func()
}

func newNotificationCounter() *notificationCounter {
	c := &notificationCounter{done: make(chan struct{})}
	c.close = func() { close(c.done) }
	return c
}

func (c *notificationCounter) add(k int) {
	if n := c.n.Add(int64(k)); n >= c.target.Load() && c.target.Load() > 0 {
		c.once.Do(c.close)
	}
}

// measure warms up, then times the delivery of b.N notifications.
func (c *notificationCounter) measure(b *testing.B) {
	testutil.WaitFor(b, 30*time.Second, "warm-up", func() bool { return c.n.Load() >= 3*benchFolders*benchVariables })
	runtime.GC()
	c.n.Store(0)
	b.ReportAllocs()
	cpu := startCPU()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ResetTimer()
	c.target.Store(int64(b.N))
	select {
	case <-c.done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d notifications", c.n.Load(), b.N)
	}
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	cpu.report(b)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "notifications/s")
	// allocs/op is rounded down to an integer; this is the exact figure.
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "mallocs/notification")
}

func benchItems() []ItemRequest {
	items := make([]ItemRequest, 0, benchFolders*benchVariables)
	for f := range benchFolders {
		for v := range benchVariables {
			items = append(items, ItemRequest{NodeID: mustNode(server.LoadNode(f, v))})
		}
	}
	return items
}

// BenchmarkSubscriptionThroughput: the simulation server → our client's
// handler, one subscription of 10,000 items at 50 ms, security None; Double
// values, and a mix of every scalar type (strings and byte strings are copied
// out of the receive buffer, so those allocate).
func BenchmarkSubscriptionThroughput(b *testing.B) {
	b.Run("double", func(b *testing.B) { benchThroughput(b, "double") })
	b.Run("mixed", func(b *testing.B) { benchThroughput(b, "mixed") })
}

func benchThroughput(b *testing.B, kind string) {
	url := benchSim(b, kind)
	c := dialNone(b, url)
	ctx := context.Background()
	cnt := newNotificationCounter()
	var sum float64
	sub, err := c.CreateSubscription(ctx, &SubscriptionConfig{
		PublishingInterval: benchRate,
		OnDataChange: func(_ *Subscription, _ uint32, items []ua.MonitoredItemNotification) {
			for i := range items { // touch every value, as a consumer would
				if v := &items[i].Value.Value; v.Type() == ua.TypeDouble {
					sum += v.Double()
				}
			}
			cnt.add(len(items))
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sub.CreateMonitoredItems(ctx, benchItems(), nil); err != nil {
		b.Fatal(err)
	}
	cnt.measure(b)
	if st := sub.Stats(); st.Lost != 0 {
		b.Errorf("lost %d messages", st.Lost)
	}
	sub.Delete(ctx)
}

// BenchmarkGopcuaSubscriptionThroughput: the same with the gopcua v0.8.0
// client (its notification channel drained by one goroutine).
func BenchmarkGopcuaSubscriptionThroughput(b *testing.B) {
	b.Run("double", func(b *testing.B) { benchGopcua(b, "double") })
	b.Run("mixed", func(b *testing.B) { benchGopcua(b, "mixed") })
}

func benchGopcua(b *testing.B, kind string) {
	url := benchSim(b, kind)
	ctx := context.Background()
	c, err := opcua.NewClient(url, opcua.SecurityMode(gua.MessageSecurityModeNone), opcua.AutoReconnect(false))
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	ch := make(chan *opcua.PublishNotificationData, 256)
	sub, err := c.Subscribe(ctx, &opcua.SubscriptionParameters{Interval: benchRate}, ch)
	if err != nil {
		b.Fatal(err)
	}
	cnt := newNotificationCounter()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var sum float64
		for {
			select {
			case d := <-ch:
				if v, ok := d.Value.(*gua.DataChangeNotification); ok {
					for _, it := range v.MonitoredItems {
						if f, ok := it.Value.Value.Value().(float64); ok {
							sum += f
						}
					}
					cnt.add(len(v.MonitoredItems))
				}
			case <-stop:
				return
			}
		}
	}()
	reqs := make([]*gua.MonitoredItemCreateRequest, 0, 1000)
	h := uint32(0)
	for f := range benchFolders {
		for v := range benchVariables {
			h++
			reqs = append(reqs, opcua.NewMonitoredItemCreateRequestWithDefaults(gua.MustParseNodeID(server.LoadNode(f, v)), gua.AttributeIDValue, h))
			if len(reqs) == cap(reqs) {
				if _, err := sub.Monitor(ctx, gua.TimestampsToReturnBoth, reqs...); err != nil {
					b.Fatal(err)
				}
				reqs = reqs[:0]
			}
		}
	}
	cnt.measure(b)
	close(stop)
	wg.Wait()
	sub.Cancel(ctx)
}

// BenchmarkMonitoredItemMemory creates 1,000,000 monitored items in 4
// sessions of one subscription each against a simulation server process and
// reports the client's heap per item (node id strings included).
//
//	go test -run '^$' -bench MonitoredItemMemory -benchtime 1x ./uastack/client/
func BenchmarkMonitoredItemMemory(b *testing.B) {
	for range b.N {
		const sessions, perSession = 4, 250_000
		url := startSimProcess(b, simOptions{Folders: 1000, Variables: 1000})
		per := itemMemory(b, url, sessions, perSession)
		b.ReportMetric(per, "B/item")
	}
}

// TestMonitoredItemMemory is the small version: 100,000 items in 2 sessions
// (20,000 under the race detector): the item entry and its last value (48,
// TestItemSize) and the node id's text in the table's arena (16 for
// "Load.F000.V00000"), at most 68 bytes each, plus 1 MiB that does not grow
// with the items (the sessions' buffers and pooled notifications).
func TestMonitoredItemMemory(t *testing.T) {
	per := 50_000
	if raceEnabled {
		per = 10_000
	}
	url := startSimProcess(t, simOptions{Folders: 2 * per / 1000, Variables: 1000})
	got := itemMemory(t, url, 2, per)
	if bound := 68 + float64(1<<20)/float64(2*per); got > bound {
		t.Errorf("%.0f bytes per monitored item, want ≤ %.0f", got, bound)
	}
}

// itemMemory measures the live heap the client needs for its monitored items:
// the heap once the items exist and delivered their initial values, the
// caller's requests dropped, minus the heap before the requests were made. It
// includes the node id strings, which the items keep.
func itemMemory(tb testing.TB, url string, sessions, perSession int) float64 {
	tb.Helper()
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	clients := make([]*Client, sessions)
	for s := range sessions {
		clients[s] = dialNone(tb, url)
	}
	before := heap()
	reqs := make([][]ItemRequest, sessions)
	for s := range sessions {
		reqs[s] = make([]ItemRequest, perSession)
		for i := range perSession {
			k := s*perSession + i
			reqs[s][i] = ItemRequest{NodeID: mustNode(server.LoadNode(k/1000, k%1000))}
		}
	}
	var got atomic.Int64
	subs := make([]*Subscription, sessions)
	start := time.Now()
	for s := range sessions {
		sub, err := clients[s].CreateSubscription(ctx, &SubscriptionConfig{
			PublishingInterval: time.Second,
			OnDataChange: func(_ *Subscription, _ uint32, items []ua.MonitoredItemNotification) {
				got.Add(int64(len(items)))
			},
		})
		if err != nil {
			tb.Fatal(err)
		}
		res, err := sub.CreateMonitoredItems(ctx, reqs[s], nil)
		if err != nil || res.Created != perSession {
			tb.Fatalf("%+v %v", res, err)
		}
		subs[s] = sub
	}
	created := time.Since(start)
	total := sessions * perSession
	testutil.WaitFor(tb, 5*time.Minute, "initial values", func() bool { return got.Load() >= int64(total) })
	reqs = nil
	after := heap()
	per := float64(int64(after)-int64(before)) / float64(total)
	tb.Logf("%d items in %d sessions created in %v; client heap %.1f MB → %.1f MB: %.0f B/item",
		total, sessions, created.Round(time.Millisecond), float64(before)/1e6, float64(after)/1e6, per)
	runtime.KeepAlive(subs)
	runtime.KeepAlive(clients)
	return per
}
