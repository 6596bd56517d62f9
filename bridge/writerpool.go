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
// MaxMessageSize): one writer per group would be idle almost all the time,
// its buffer with it, for every group of a large configuration. Borrowed
// for a cycle (beginCycle … endCycle) and Reset for the group's options
// (unless it is the one that group used last, as it mostly is), the
// gateway keeps about as many as were ever writing at once: a handler
// blocked on a full Block queue holds its writer, so at a burst every group
// may hold one; those are kept idle afterwards (up to one per live group)
// rather than released and made again at the next burst, which would be
// garbage at every burst.

// minIdleWriters is how many idle writers are kept even with fewer groups.
const minIdleWriters = 8

var (
	idleWriters struct {
		mu sync.Mutex
		ws []idleWriter
	}
	// liveGroups counts the groups made and not stopped: the idle writers
	// kept are at most max(minIdleWriters, liveGroups).
	liveGroups atomic.Int64
)

func maxIdleWriters() int { return max(minIdleWriters, int(liveGroups.Load())) }

// writerOwner is a group's claim on the writers it used last: one is made
// per configuration of its writers (configureWriter), and the writers' Sink
// goes through it, so that an idle writer keeps only this, not the group
// (Stop clears g).
type writerOwner struct {
	g *WriterGroup // nil once the group stopped or reconfigured its writers
}

func (o *writerOwner) sink(msg []byte) error {
	if g := o.g; g != nil {
		return g.sinkData(msg)
	}
	return nil
}

// idleWriter is a writer in the pool and the owner whose options it has.
type idleWriter struct {
	w     *jsonenc.NetworkMessageWriter
	owner *writerOwner
}

// takeWriter returns a writer for o's options opts: the idle one used last,
// Reset for opts unless o used it last (then it has them already), or a new
// one.
func takeWriter(o *writerOwner, opts *jsonenc.WriterOptions) *jsonenc.NetworkMessageWriter {
	idleWriters.mu.Lock()
	if n := len(idleWriters.ws); n > 0 {
		e := idleWriters.ws[n-1]
		idleWriters.ws[n-1] = idleWriter{}
		idleWriters.ws = idleWriters.ws[:n-1]
		idleWriters.mu.Unlock()
		if e.owner != o {
			e.w.Reset(*opts)
		}
		return e.w
	}
	idleWriters.mu.Unlock()
	return jsonenc.NewNetworkMessageWriter(*opts)
}

// putWriter gives back a writer that o took, outside a cycle.
func putWriter(w *jsonenc.NetworkMessageWriter, o *writerOwner) {
	if w.Err() != nil {
		w.Release()
		return
	}
	idleWriters.mu.Lock()
	if len(idleWriters.ws) < maxIdleWriters() {
		idleWriters.ws = append(idleWriters.ws, idleWriter{w, o})
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
	var extra []idleWriter
	if n, keep := len(idleWriters.ws), maxIdleWriters(); n > keep {
		extra = slices.Clone(idleWriters.ws[keep:])
		clear(idleWriters.ws[keep:])
		idleWriters.ws = idleWriters.ws[:keep]
	}
	idleWriters.mu.Unlock()
	for _, e := range extra {
		e.w.Release()
	}
}
