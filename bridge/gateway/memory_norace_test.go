//go:build !race

package gateway_test

import (
	"math"
	goruntime "runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/embedded"
	"github.com/uagate/gateway/bridge/gateway"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// Allocation tests: the race detector allocates on its own account, so they
// are built without it only (scripts/test.sh runs them in a step of their own).

// TestGatewaySteadyStateAllocs bounds what a running gateway allocates per
// second once its items are subscribed: 10,000 items changing every 100 ms
// (100,000 notifications/s) in one writer group with a state directory (its
// resume record checked every second). The hot path allocates nothing per
// notification, so what remains is per message and per second (Publish
// requests, timers); a copy of every item's state per second (a resume
// record whose list is built anew per call) or message buffers dropped by
// their pool show as garbage, which the heap's growth room turns into
// resident memory.
//
// With the store-and-forward log, its engine (bbolt) allocates per commit
// and per page it writes besides: that is bounded apart, per byte logged.
func TestGatewaySteadyStateAllocs(t *testing.T) {
	t.Run("without the log", func(t *testing.T) { testSteadyStateAllocs(t, false) })
	t.Run("with the log", func(t *testing.T) { testSteadyStateAllocs(t, true) })
}

func testSteadyStateAllocs(t *testing.T, log bool) {
	const folders, perFolder = 10, 1000
	items := folders * perFolder
	url := startSimChild(t, server.SimConfig{Folders: folders, Variables: perFolder, Rates: []time.Duration{100 * time.Millisecond},
		Types: []ua.TypeID{ua.TypeInt32}, Generators: []server.Generator{server.GeneratorCounter}, AlarmSources: -1})
	cfg := browseConfig(t, url, folders, perFolder, folders, config.WriterGroup{
		PublishingInterval: dur(50 * time.Millisecond), FieldEncoding: config.FieldDataValue,
		Nodes: config.NodeDefaults{SamplingInterval: ptr(dur(100 * time.Millisecond))},
	})
	cfg.StoreAndForward.Enabled = &log
	var released atomic.Bool
	rt := startLibGateway(t, cfg, gateway.Options{
		Logger:        quietLogger(),
		OnMemReleased: func(_, _ goruntime.MemStats) { released.Store(true) },
	})
	notifications := func() uint64 { return runtimeNotifications(rt) }
	waitUntil(t, nil, 2*time.Minute, "every item's initial value and the setup release", func() bool {
		return notifications() >= uint64(3*items) && released.Load()
	})
	// The message buffer pool was drained at the release and fills again to
	// what the steady state has in flight: those allocations are bounded
	// (a buffer taken back is kept) and are not counted; a buffer the pool
	// drops (it was full) is garbage and fails the test.
	pool := func() (grown, drops uint64) {
		for _, c := range sink.MessageBufferStats().Classes {
			grown += c.Misses * uint64(c.Size)
			drops += c.Drops
		}
		return grown, drops
	}
	logged := func() uint64 {
		var n uint64
		if st := rt.StoreStats(); st != nil {
			for _, s := range st.Streams {
				n += s.AppendedBytes
			}
		}
		return n
	}
	measure := func(d time.Duration) (bytesPerS, notesPerS, loggedPerS float64, drops uint64) {
		var a, z goruntime.MemStats
		goruntime.ReadMemStats(&a)
		g0, d0 := pool()
		n0, l0, t0 := notifications(), logged(), time.Now()
		<-time.After(d) // a measuring window, not a wait for a condition
		goruntime.ReadMemStats(&z)
		g1, d1 := pool()
		s := time.Since(t0).Seconds()
		return float64(z.TotalAlloc-a.TotalAlloc-(g1-g0)) / s, float64(notifications()-n0) / s, float64(logged()-l0) / s, d1 - d0
	}
	measure(time.Second)
	bps, nps, lps, drops := measure(3 * time.Second)
	t.Logf("steady state, %d items: %.0f notifications/s, %.1f KB/s allocated besides the message pool's growth (%.3f B per notification), %.1f KB/s logged, %d buffers dropped",
		items, nps, bps/1e3, bps/nps, lps/1e3, drops)
	if log && lps == 0 {
		t.Fatal("nothing logged")
	}
	if nps < float64(items) { // 10 changes per item per second offered; a loaded machine may sample fewer
		t.Fatalf("%.0f notifications/s, want at least %d: the measurement says nothing", nps, items)
	}
	if drops != 0 {
		t.Errorf("the message buffer pool dropped %d buffers in steady state (garbage at every burst)", drops)
	}
	// The bound is well above what a gateway without per-second copies
	// allocates (a few KB/s) and well below one copy of every item's state
	// per second (hundreds of KB/s here).
	// The log's engine: its pages come from its pool (records in parts
	// of 8 KiB), what remains is per commit and per node it touches, about
	// half a byte per byte logged.
	bound := float64(40<<10) + 0.75*lps
	if bps > bound {
		t.Errorf("%.1f KB/s allocated in steady state, want ≤ %.1f KB/s", bps/1e3, bound/1e3)
	}
}

// TestGatewayIdleAllocs bounds what a gateway at rest allocates: one writer
// group of four fields whose values do not change, publishing every second.
// At rest it wakes only for what is due (the session's status read every
// few seconds, the keep-alives, the pools' trim), and none of it
// allocates. nats-server's process sampler, which reads /proc/self/stat
// every second in any binary that links the server, is stopped as
// `gateway run` stops it without an embedded NATS server (8 allocations a
// second).
func TestGatewayIdleAllocs(t *testing.T) {
	if !embedded.StopNATSSampler() {
		t.Log("nats-server's sampler was stopped already")
	}
	url := startSimChild(t, server.SimConfig{Folders: 1, Variables: 4, Rates: []time.Duration{time.Hour},
		Types: []ua.TypeID{ua.TypeInt32}, Generators: []server.Generator{server.GeneratorCounter}, AlarmSources: -1})
	cfg := browseConfig(t, url, 1, 4, 1, config.WriterGroup{PublishingInterval: dur(time.Second)})
	var released atomic.Bool
	rt := startLibGateway(t, cfg, gateway.Options{
		Logger:        quietLogger(),
		OnMemReleased: func(_, _ goruntime.MemStats) { released.Store(true) },
	})
	waitUntil(t, nil, time.Minute, "every item's initial value and the setup release", func() bool {
		return runtimeNotifications(rt) >= 4 && released.Load()
	})
	// What happens once after the start (the log's first idle save, the
	// session's first status read, the resume record's save of the last
	// acknowledgement 10 s after the one before) may fall in a window; what recurs at
	// rest falls in every one: the lowest of four windows counts.
	perS := math.Inf(1)
	for range 4 {
		var a, z goruntime.MemStats
		goruntime.ReadMemStats(&a)
		t0 := time.Now()
		time.Sleep(5 * time.Second) // a measuring window, not a wait for a condition (Sleep allocates nothing)
		goruntime.ReadMemStats(&z)
		s := time.Since(t0).Seconds()
		w := float64(z.Mallocs-a.Mallocs) / s
		t.Logf("at rest: %.1f allocations/s, %.0f B/s", w, float64(z.TotalAlloc-a.TotalAlloc)/s)
		if perS = min(perS, w); perS <= 1 {
			break
		}
	}
	// Nothing recurring allocates; the bound leaves room for a one-off (a
	// keep-alive's decoder growing a slice) and none for anything a second.
	if perS > 1 {
		t.Errorf("%.1f allocations/s at rest, want ≤ 1", perS)
	}
}
