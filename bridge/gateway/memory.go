package gateway

import (
	"context"
	"fmt"
	"math"
	goruntime "runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/ua"
)

// releaseSettle is how long the group starts must have been quiet before
// the memory they used is given back: one release after a configuration's
// hundred groups subscribed, not one per group (each release is a full
// collection, which costs a mark of the whole heap).
const releaseSettle = 2 * time.Second

// trimInterval is the period of the pools' trim: the idle buffers no Get
// needed for a whole period are let go (pooling.Pool.Trim, and the
// decoder's idle notification capacity, ua.TrimIdlePooled), so that a burst
// that does not recur (a setup that went on after the release, a broker
// outage's backlog, a storm of key frames) stops costing memory, while the
// buffers a recurring peak needs stay. 30 s is longer than the key-frame
// cycle of a group publishing every few seconds, whose burst recurs and
// must keep its buffers. When a trim frees trimReleaseBytes or more, the
// pages go back to the OS at once (one full collection); otherwise the next
// collection takes them.
//
// The trim also gives back the heap's free pages when they add up to
// idleReleaseBytes and idleReleaseShare of the heap in use. The runtime's
// scavenger keeps about a tenth over the collector's goal mapped, and in
// the steady state the freed pages it keeps are faulted in again one by
// one, so RSS creeps up over minutes while the heap in use stays flat. The
// release is one full collection: the heap is mostly pointer-free tables,
// so it costs a few tens of milliseconds of CPU at a million items, at most
// once per trim.
const (
	trimInterval     = 30 * time.Second
	trimReleaseBytes = 16 << 20
	idleReleaseBytes = 4 << 20
	idleReleaseShare = 32 // free pages above 1/32 of the heap in use
)

// memSamples are heapPages' and liveHeap's runtime/metrics samples, made
// once: the trim reads them every trimInterval for as long as the gateway
// runs, at rest too, where it should allocate nothing.
var memSamples = struct {
	sync.Mutex
	pages [2]metrics.Sample
	live  [1]metrics.Sample
}{
	pages: [2]metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}},
	live:  [1]metrics.Sample{{Name: "/gc/heap/live:bytes"}},
}

// heapPages reads the heap's free pages still mapped and the bytes in use
// by objects (runtime/metrics: no stop of the world).
func heapPages() (free, inUse uint64) {
	memSamples.Lock()
	defer memSamples.Unlock()
	s := memSamples.pages[:]
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0, 0
	}
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// releaseIdle reports whether the free pages the heap keeps mapped are worth
// a release (see idleReleaseBytes).
func releaseIdle(free, inUse uint64) bool {
	return free >= idleReleaseBytes && free >= inUse/idleReleaseShare
}

// steadyGCPercent is the collector's GOGC once the writer groups are set up,
// unless $GOGC is given. The gateway's heap is then mostly its long-lived
// tables (items, fields, cache) and it makes little garbage (a few hundred
// KB/s at a million items: logs, API and metrics requests, the pools'
// refills), so the default GOGC=100 lets the heap grow to twice what is live
// over minutes to hours — RSS ends up twice the need, though nothing grew. At
// 10 the heap stays within a tenth of what is live; a collection (a mark of
// the heap, ~0.1 s of CPU at a million items) comes every few minutes. The
// setup, which makes as much garbage as the gateway keeps, runs at the
// default.
const steadyGCPercent = 10

// steadyHeadroom is the least the heap may grow between two collections
// in the steady state: a tenth of a small heap is a few hundred KB, and at
// an ordinary rate the store-and-forward log's engine (bbolt) makes that
// in a second or two — a collection, with its fixed cost (the roots, the
// idle mark workers), every second for the sake of a few MB of RSS. So a
// heap of less than 80 MB live gets this much room, up to GOGC=100 (what
// Go does by default); above it, steadyGCPercent holds.
const steadyHeadroom = 8 << 20

// steadyPercent is the GOGC for a live heap of live bytes (steadyHeadroom).
func steadyPercent(live uint64) int {
	if live == 0 {
		return 100
	}
	return max(steadyGCPercent, min(100, int(100*steadyHeadroom/live)))
}

// liveHeap reads the heap marked live by the last collection (runtime/metrics:
// no stop of the world); 0 when unknown.
func liveHeap() uint64 {
	memSamples.Lock()
	defer memSamples.Unlock()
	s := memSamples.live[:]
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// memReleaser gives the memory of writer-group setup back to the operating
// system once the starts settle. Subscribing a large configuration (browse
// expansions, CreateMonitoredItems requests and responses of millions of
// items, the growth of the item tables) leaves as much garbage as the
// gateway keeps; the Go runtime would keep those pages mapped for minutes
// and, with GOGC's room for growth on top, an operator sizing for the RSS
// would reserve three times what the gateway needs. In steady state the
// pipeline does not allocate per notification, so the memory stays given
// back. The message buffers the setup's burst of first key frames left idle
// in the sink's pool are let go first (the steady state fills the pool again
// to what it has in flight). This is what runtime/debug.FreeOSMemory is for; it runs after the
// initial start and after every later one (a configuration change, a
// scale-out takeover), never on the hot path.
type memReleaser struct {
	kick chan struct{}
	wg   sync.WaitGroup
	// released, when set (tests), is told after each release.
	released func(before, after goruntime.MemStats)
	// idleReleased, when set (tests), is told the free bytes of each
	// release of the heap's free pages.
	idleReleased func(free uint64)
	// trimEvery is the pools' trim period (trimInterval; tests shorten it).
	trimEvery time.Duration
	// gcPercent is set (runtime/debug.SetGCPercent) after each setup
	// release, 0: left alone ($GOGC given): steadyGCPercent, or more for a
	// small heap (steadyPercent), applied the GOGC last set (0: none yet;
	// the releaser's goroutine).
	gcPercent int
	applied   int
}

func newMemReleaser(getenv func(string) string) *memReleaser {
	r := &memReleaser{kick: make(chan struct{}, 1), trimEvery: trimInterval}
	if getenv("GOGC") == "" {
		r.gcPercent = steadyGCPercent
	}
	return r
}

// started tells the releaser that a writer group finished its start.
func (r *memReleaser) started() {
	select {
	case r.kick <- struct{}{}:
	default: // one is pending already
	}
}

// run releases memory releaseSettle after the last started, until ctx ends;
// wait waits for it.
func (r *memReleaser) run(ctx context.Context, logf func(msg string, args ...any)) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTimer(time.Hour)
		t.Stop()
		trim := time.NewTicker(r.trimEvery)
		defer trim.Stop()
		for {
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-r.kick:
				t.Reset(releaseSettle)
			case <-trim.C:
				if r.gcPercent > 0 && r.applied != 0 {
					// The live heap moves (a reload, the log's backlog): so
					// does the room that keeps collections rare at a small
					// heap.
					if p := steadyPercent(liveHeap()); p != r.applied {
						r.applied = p
						debug.SetGCPercent(p)
					}
				}
				if n := sink.TrimMessageBuffers() + pooling.Buffers.Trim() + ua.TrimIdlePooled(); n >= trimReleaseBytes {
					debug.FreeOSMemory()
					logf("idle pooled buffers returned to the OS", "trimmedMB", mb(uint64(n)))
				} else if free, inUse := heapPages(); releaseIdle(free, inUse) {
					debug.FreeOSMemory()
					if r.idleReleased != nil {
						r.idleReleased(free)
					}
				}
			case <-t.C:
				var before, after goruntime.MemStats
				goruntime.ReadMemStats(&before)
				drained := sink.DrainMessageBuffers() + pooling.Buffers.Drain()
				// Two collections: a sync.Pool (the JSON encoders' buffers)
				// keeps what it held until the second collection after its
				// last use, and in steady state the next collection may be
				// minutes away; the setup's metadata and first key frames
				// left their buffers there.
				goruntime.GC()
				debug.FreeOSMemory()
				goruntime.ReadMemStats(&after)
				if r.gcPercent > 0 {
					r.applied = steadyPercent(after.HeapAlloc)
					debug.SetGCPercent(r.applied)
				}
				logf("memory of the writer groups' setup returned to the OS",
					"heapLiveMB", mb(after.HeapAlloc), "heapMappedBeforeMB", mb(before.HeapSys-before.HeapReleased),
					"heapMappedAfterMB", mb(after.HeapSys-after.HeapReleased),
					"idleBuffersMB", mb(uint64(drained)))
				if r.released != nil {
					r.released(before, after)
				}
			}
		}
	}()
}

func (r *memReleaser) wait() { r.wg.Wait() }

func mb(n uint64) float64 { return float64(n*10/(1<<20)) / 10 }

// MemoryLimitEnv names the environment variable with the memory the
// gateway's container may use (bytes, or a quantity such as 512Mi or 2G):
// the Helm chart sets it from the container's resources.limits.memory
// through the downward API. The gateway then gives the Go runtime a soft
// limit (runtime/debug.SetMemoryLimit, what GOMEMLIMIT sets) of
// memoryLimitShare of it: the runtime collects more often as its memory
// nears the limit and returns freed pages to the OS to stay under it,
// instead of letting the heap grow to twice what is live (GOGC=100) and an
// out-of-memory kill end the pod. What is live must fit: above the limit
// the collector runs continually (the runtime caps it at about half the
// CPU) and the container's own limit still applies. An explicit GOMEMLIMIT
// wins; the runtime has read it already.
const MemoryLimitEnv = "UAGATE_MEMORY_LIMIT"

// memoryLimitShare is the share of the container's limit given to the Go
// runtime: the rest is for what it does not count (the binary's text, thread
// stacks outside the heap, the kernel's page rounding) and for the
// collector's headway.
const memoryLimitShare = 0.9

// ApplyMemoryLimit sets the runtime's soft memory limit from
// $UAGATE_MEMORY_LIMIT unless $GOMEMLIMIT is set; it returns the limit set
// (0: none) and an error for a value it cannot read.
func ApplyMemoryLimit(getenv func(string) string) (int64, error) {
	v := getenv(MemoryLimitEnv)
	if v == "" || getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	n, err := parseQuantity(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", MemoryLimitEnv, v, err)
	}
	limit := int64(float64(n) * memoryLimitShare)
	debug.SetMemoryLimit(limit)
	return limit, nil
}

// parseQuantity reads a byte count: an integer with an optional suffix of
// Kubernetes' quantities (Ki, Mi, Gi, Ti powers of 1024; k, K, M, G, T
// powers of 1000).
func parseQuantity(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}} {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = rest, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("want a byte count such as 536870912 or 512Mi: %w", err)
	case n <= 0:
		return 0, fmt.Errorf("want a positive byte count")
	case n > math.MaxInt64/mult:
		return 0, fmt.Errorf("more than %d bytes", int64(math.MaxInt64))
	}
	return n * mult, nil
}
