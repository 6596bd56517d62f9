package gateway

import (
	"context"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/pooling"
)

// TestMemoryLimit: $UAGATE_MEMORY_LIMIT (the container's limit, from the
// Helm chart) becomes the runtime's soft limit at 90%; an explicit
// GOMEMLIMIT wins; a value that is not a byte count is refused.
func TestMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tc := range []struct {
		value string
		want  int64
	}{
		{"536870912", 483183820},
		{"512Mi", 483183820},
		{"2Gi", 1932735283},
		{"1G", 900000000},
		{"64k", 57600},
	} {
		got, err := ApplyMemoryLimit(env(MemoryLimitEnv, tc.value))
		if err != nil || got != tc.want {
			t.Errorf("%s=%s: limit %d, %v; want %d", MemoryLimitEnv, tc.value, got, err, tc.want)
		}
		if cur := debug.SetMemoryLimit(-1); cur != tc.want {
			t.Errorf("%s=%s: the runtime's limit is %d, want %d", MemoryLimitEnv, tc.value, cur, tc.want)
		}
	}
	debug.SetMemoryLimit(old)
	if got, err := ApplyMemoryLimit(env(MemoryLimitEnv, "512Mi", "GOMEMLIMIT", "100MiB")); got != 0 || err != nil || debug.SetMemoryLimit(-1) != old {
		t.Errorf("with GOMEMLIMIT set: limit %d, %v; the runtime's must stay as GOMEMLIMIT made it", got, err)
	}
	if got, err := ApplyMemoryLimit(env()); got != 0 || err != nil {
		t.Errorf("unset: %d, %v", got, err)
	}
	for _, bad := range []string{"lots", "512MiB", "-1", "0", "1.5Gi", "99999999999Ti"} {
		if _, err := ApplyMemoryLimit(env(MemoryLimitEnv, bad)); err == nil || !strings.Contains(err.Error(), MemoryLimitEnv) {
			t.Errorf("%s=%q: error %v, want one that names the variable", MemoryLimitEnv, bad, err)
		}
	}
	if cur := debug.SetMemoryLimit(-1); cur != old {
		t.Errorf("a refused value changed the runtime's limit to %d", cur)
	}
}

// TestMemReleaserTrimsIdleBuffers: message buffers a burst left idle, which
// no message needed for a whole trim period, are let go by the releaser's
// periodic trim (the setup's drain only catches what was idle at that
// moment).
func TestMemReleaserTrimsIdleBuffers(t *testing.T) {
	const size = 200 << 10 // a class few other tests use
	classOf := func() pooling.BufferStats {
		for _, c := range sink.MessageBufferStats().Classes {
			if c.Size == pooling.ClassSize(size) {
				return c
			}
		}
		t.Fatalf("no class for %d bytes", size)
		return pooling.BufferStats{}
	}
	burst := make([]*sink.Message, 24)
	for i := range burst {
		burst[i] = sink.NewMessage(size)
	}
	for _, m := range burst {
		m.Done(true)
	}
	before := classOf().Trimmed
	r := newMemReleaser(os.Getenv)
	r.trimEvery = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	r.run(ctx, func(string, ...any) {})
	defer func() { cancel(); r.wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for classOf().Trimmed-before < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s of 20 ms trims, %d of the burst's 24 idle buffers were let go, want ≥ 20 (class: %+v)", classOf().Trimmed-before, classOf())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// garbageSink holds the test's allocations until it lets them all go.
var garbageSink [][]byte

// TestMemReleaserReleasesFreePages: the periodic trim gives the heap's
// free pages back when they add up to a share of the heap in use (the
// runtime's scavenger would keep them mapped), and not for a few pages.
func TestMemReleaserReleasesFreePages(t *testing.T) {
	for _, c := range []struct {
		free, inUse uint64
		want        bool
	}{
		{0, 140 << 20, false},
		{3 << 20, 10 << 20, false},        // below idleReleaseBytes
		{4 << 20, 200 << 20, false},       // below 1/32 of the heap
		{5 << 20, 140 << 20, true},        // a million items' steady state
		{64 << 20, 1 << 30, true},         //
		{idleReleaseBytes, 1 << 20, true}, //
		{idleReleaseBytes - 1, 1 << 20, false},
	} {
		if got := releaseIdle(c.free, c.inUse); got != c.want {
			t.Errorf("releaseIdle(%d, %d) = %v, want %v", c.free, c.inUse, got, c.want)
		}
	}
	if free, inUse := heapPages(); inUse == 0 {
		t.Fatalf("heapPages: free %d, in use %d", free, inUse)
	}
	// Garbage of 64 MB, collected: its pages are free and still mapped
	// until a release.
	for range 64 {
		garbageSink = append(garbageSink, make([]byte, 1<<20))
	}
	garbageSink = nil
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	goruntime.GC()
	r := newMemReleaser(func(string) string { return "" })
	r.trimEvery = 20 * time.Millisecond
	got := make(chan uint64, 16)
	r.idleReleased = func(free uint64) {
		select {
		case got <- free:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.run(ctx, func(string, ...any) {})
	defer func() { cancel(); r.wait() }()
	select {
	case free := <-got:
		if free < idleReleaseBytes {
			t.Errorf("released %d free bytes, want ≥ %d", free, idleReleaseBytes)
		}
	case <-time.After(10 * time.Second):
		f, u := heapPages()
		t.Fatalf("no release of the free pages in 10 s of 20 ms trims (free %d, in use %d)", f, u)
	}
	if f, u := heapPages(); releaseIdle(f, u) && f > 32<<20 {
		t.Errorf("after the release %d bytes are free and mapped still (in use %d)", f, u)
	}
}

// TestMemReleaserGCPercent: after a setup's release the collector runs at
// steadyGCPercent, unless $GOGC was given.
func TestMemReleaserGCPercent(t *testing.T) {
	if r := newMemReleaser(func(k string) string { return map[string]string{"GOGC": "200"}[k] }); r.gcPercent != 0 {
		t.Errorf("GOGC=200 given: gcPercent %d, want 0 (left alone)", r.gcPercent)
	}
	r := newMemReleaser(func(string) string { return "" })
	if r.gcPercent != steadyGCPercent {
		t.Fatalf("no GOGC: gcPercent %d, want %d", r.gcPercent, steadyGCPercent)
	}
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	released := make(chan uint64, 1)
	r.released = func(before, after goruntime.MemStats) { released <- after.HeapAlloc }
	ctx, cancel := context.WithCancel(context.Background())
	r.run(ctx, func(string, ...any) {})
	defer func() { cancel(); r.wait() }()
	r.started()
	var live uint64
	select {
	case live = <-released:
	case <-time.After(30 * time.Second):
		t.Fatal("no release 30 s after a start")
	}
	if got, want := debug.SetGCPercent(100), steadyPercent(live); got != want {
		t.Errorf("GOGC after the release (live heap %d B): %d, want %d", live, got, want)
	}
}

// TestSteadyPercent: a heap of 80 MB live or more runs at steadyGCPercent;
// a smaller one gets steadyHeadroom of room, up to GOGC=100.
func TestSteadyPercent(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{{0, 100}, {1 << 20, 100}, {8 << 20, 100}, {16 << 20, 50}, {40 << 20, 20}, {80 << 20, steadyGCPercent}, {1 << 30, steadyGCPercent}} {
		if got := steadyPercent(tc.live); got != tc.want {
			t.Errorf("live %d MiB: GOGC %d, want %d", tc.live>>20, got, tc.want)
		}
	}
}
