package bridge

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/uagate/gateway/jsonenc"
)

// The groups share their JSON writers. A writer is busy only while a group
// writes one notification message (or a keep-alive, a heartbeat), and it
// keeps a buffer as large as the largest message it wrote (up to
// MaxMessageSize): one per group, idle almost all the time, that was ~18 MB
// at a million items in 100 groups. Borrowed for a cycle (beginCycle …
// endCycle) and Reset for the group's options, the gateway keeps about as
// many as were ever writing at once: a handler blocked on a full Block queue
// holds its writer, so at a burst every group may hold one; those are kept
// idle afterwards (up to one per live group) rather than released and made
// again at the next burst, which would be garbage at every burst.

// minIdleWriters is how many idle writers are kept even with fewer groups.
const minIdleWriters = 8

var (
	idleWriters struct {
		mu sync.Mutex
		ws []*jsonenc.NetworkMessageWriter
	}
	// liveGroups counts the groups made and not stopped: the idle writers
	// kept are at most max(minIdleWriters, liveGroups).
	liveGroups atomic.Int64
)

func maxIdleWriters() int { return max(minIdleWriters, int(liveGroups.Load())) }

// takeWriter returns a writer for opts, an idle one when there is one.
func takeWriter(opts *jsonenc.WriterOptions) *jsonenc.NetworkMessageWriter {
	idleWriters.mu.Lock()
	if n := len(idleWriters.ws); n > 0 {
		w := idleWriters.ws[n-1]
		idleWriters.ws[n-1] = nil
		idleWriters.ws = idleWriters.ws[:n-1]
		idleWriters.mu.Unlock()
		w.Reset(*opts)
		return w
	}
	idleWriters.mu.Unlock()
	return jsonenc.NewNetworkMessageWriter(*opts)
}

// putWriter gives back a writer taken with takeWriter, outside a cycle. It
// keeps no reference to its group (its Sink, namespaces).
func putWriter(w *jsonenc.NetworkMessageWriter) {
	if w.Err() != nil {
		w.Release()
		return
	}
	w.Reset(jsonenc.WriterOptions{})
	idleWriters.mu.Lock()
	if len(idleWriters.ws) < maxIdleWriters() {
		idleWriters.ws = append(idleWriters.ws, w)
		idleWriters.mu.Unlock()
		return
	}
	idleWriters.mu.Unlock()
	w.Release()
}

// groupStopped counts a group out and releases the idle writers beyond the
// new bound.
func groupStopped() {
	liveGroups.Add(-1)
	idleWriters.mu.Lock()
	var extra []*jsonenc.NetworkMessageWriter
	if n, keep := len(idleWriters.ws), maxIdleWriters(); n > keep {
		extra = slices.Clone(idleWriters.ws[keep:])
		clear(idleWriters.ws[keep:])
		idleWriters.ws = idleWriters.ws[:keep]
	}
	idleWriters.mu.Unlock()
	for _, w := range extra {
		w.Release()
	}
}
