package main

import (
	"context"
	goruntime "runtime"
	"runtime/debug"
	"sync"
	"time"
)

// releaseSettle is how long the group starts must have been quiet before
// the memory they used is given back: one release after a configuration's
// hundred groups subscribed, not one per group (each release is a full
// collection, which costs a mark of the whole heap).
const releaseSettle = 2 * time.Second

// memReleaser gives the memory of writer-group setup back to the operating
// system once the starts settle. Subscribing a large configuration (browse
// expansions, CreateMonitoredItems requests and responses of millions of
// items, the growth of the item tables) leaves as much garbage as the
// gateway keeps; the Go runtime would keep those pages mapped for minutes
// and, with GOGC's room for growth on top, an operator sizing for the RSS
// would reserve three times what the gateway needs. In steady state the
// pipeline does not allocate per notification, so the memory stays given
// back. This is what runtime/debug.FreeOSMemory is for; it runs after the
// initial start and after every later one (a configuration change, a
// scale-out takeover), never on the hot path.
type memReleaser struct {
	kick chan struct{}
	wg   sync.WaitGroup
	// released, when set (tests), is told after each release.
	released func(before, after goruntime.MemStats)
}

func newMemReleaser() *memReleaser { return &memReleaser{kick: make(chan struct{}, 1)} }

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
		for {
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-r.kick:
				t.Reset(releaseSettle)
			case <-t.C:
				var before, after goruntime.MemStats
				goruntime.ReadMemStats(&before)
				debug.FreeOSMemory()
				goruntime.ReadMemStats(&after)
				logf("memory of the writer groups' setup returned to the OS",
					"heapLiveMB", mb(after.HeapAlloc), "heapMappedBeforeMB", mb(before.HeapSys-before.HeapReleased),
					"heapMappedAfterMB", mb(after.HeapSys-after.HeapReleased))
				if r.released != nil {
					r.released(before, after)
				}
			}
		}
	}()
}

func (r *memReleaser) wait() { r.wg.Wait() }

func mb(n uint64) float64 { return float64(n*10/(1<<20)) / 10 }
