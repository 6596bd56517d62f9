// Package fence is the deadline after which a writer group must not publish:
// under scale-out, the end of the time its lease is known to be this
// replica's. The lease code (bridge/lease) extends it with every renewal
// and closes it when the holding ends; the writer group checks it once per
// publish cycle before it hands messages to the sinks, and the sinks' queues
// (bridge/sink.Output) check it again before a message goes on the wire, so
// that a replica paused or cut off past its deadline publishes nothing once
// another may have taken the group over.
//
// Time is measured on the monotonic clock (time.Time's monotonic reading,
// relative to the process's start), so a wall-clock step cannot reopen a
// fence. A check is one atomic load and a comparison; nothing locks.
//
// A nil *Fence is always open (no scale-out).
package fence

import (
	"math"
	"sync/atomic"
	"time"
)

// base is the origin of the monotonic readings the fences store.
var base = time.Now()

// closed is the deadline of a closed fence: before any time.
const closed = math.MinInt64

// Fence is one holding's publishing deadline. Its methods are safe for
// concurrent use.
type Fence struct {
	epoch uint64
	until atomic.Int64 // nanoseconds after base; closed: never again
}

// New returns a fence of a holding identified by epoch (the lease's
// revision when it was acquired: it grows with every new holding, whoever
// the holder), open until until.
func New(epoch uint64, until time.Time) *Fence {
	f := &Fence{epoch: epoch}
	f.until.Store(int64(until.Sub(base)))
	return f
}

// Epoch identifies the holding (0 for a nil fence).
func (f *Fence) Epoch() uint64 {
	if f == nil {
		return 0
	}
	return f.epoch
}

// Extend moves the deadline to until when that is later; a closed fence
// stays closed.
func (f *Fence) Extend(until time.Time) {
	d := int64(until.Sub(base))
	for {
		cur := f.until.Load()
		if cur == closed || cur >= d {
			return
		}
		if f.until.CompareAndSwap(cur, d) {
			return
		}
	}
}

// Close ends the holding: the fence never opens again.
func (f *Fence) Close() {
	if f != nil {
		f.until.Store(closed)
	}
}

// Open reports whether a message may be published at now (a nil fence: always).
func (f *Fence) Open(now time.Time) bool {
	return f == nil || int64(now.Sub(base)) < f.until.Load()
}

// Deadline is the time the fence closes (the zero time once closed; a nil
// fence: the zero time too).
func (f *Fence) Deadline() time.Time {
	if f == nil {
		return time.Time{}
	}
	d := f.until.Load()
	if d == closed {
		return time.Time{}
	}
	return base.Add(time.Duration(d))
}
