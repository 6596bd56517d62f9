package server

import (
	"github.com/uagate/gateway/uastack/ua"
)

// Queues. A data item queues DataValues; a generated one only the tick and
// the sampling time, 24 bytes instead of a hundred, its value being a function
// of the tick: the sweep writes little, and the value is made when sent.
type (
	dvEntry   struct{ dv ua.DataValue }
	tickEntry struct {
		tick int64
		srv  ua.DateTime
		ovf  bool
	}
)

func (e *dvEntry) overflow()   { e.dv.Status |= overflowBits }
func (e *tickEntry) overflow() { e.ovf = true }

// ring is a bounded FIFO of queue entries.
type ring[T any] struct {
	buf     []T
	head, n int32
}

func (r *ring[T]) front() *T     { return &r.buf[r.head] }
func (r *ring[T]) at(i int32) *T { return &r.buf[(r.head+i)%int32(len(r.buf))] }

func (r *ring[T]) pop() {
	var zero T
	r.buf[r.head] = zero
	r.head = (r.head + 1) % int32(len(r.buf))
	r.n--
}

func (r *ring[T]) reset() {
	clear(r.buf)
	r.head, r.n = 0, 0
}

// pushRing queues v in a queue of size entries, discarding per the policy
// when it is full; inline is the storage of a queue of one.
func pushRing[T any, P interface {
	*T
	overflow()
}](r *ring[T], v T, size uint32, discardOldest bool, inline *[1]T) {
	if r.buf == nil {
		if size == 1 {
			r.buf = inline[:]
		} else {
			r.buf = make([]T, min(size, 4))
		}
	}
	if r.n == int32(size) {
		switch {
		case size == 1:
			r.buf[r.head] = v
		case discardOldest:
			// The new entry takes the oldest's slot; the next oldest carries
			// the overflow bit.
			r.buf[r.head] = v
			r.head = (r.head + 1) % int32(len(r.buf))
			P(r.front()).overflow()
		default:
			last := r.at(r.n - 1)
			*last = v
			P(last).overflow()
		}
		return
	}
	if int(r.n) == len(r.buf) {
		grown := make([]T, min(2*len(r.buf), int(size)))
		for i := int32(0); i < r.n; i++ {
			grown[i] = *r.at(i)
		}
		r.buf, r.head = grown, 0
	}
	*r.at(r.n) = v
	r.n++
}

// resizeRing changes the size of a queue, keeping its newest entries.
func resizeRing[T any](r *ring[T], size uint32, inline *[1]T) {
	for r.n > int32(size) {
		r.pop()
	}
	buf := make([]T, max(min(int(size), 4), int(r.n)))
	for i := int32(0); i < r.n; i++ {
		buf[i] = *r.at(i)
	}
	if size == 1 {
		inline[0] = buf[0]
		buf = inline[:]
	}
	r.buf, r.head = buf, 0
}

// queued reports how many values the item has queued.
func (it *monitoredItem) queuedValues() int32 { return it.tq.n + it.dq.n }

// push queues a value (sub.mu held).
func (it *monitoredItem) push(dv *ua.DataValue) {
	pushRing(&it.dq, dvEntry{*dv}, it.queueSize, it.discardOldest, &it.dq1)
	it.markPending()
}

// pushTick queues a generated value by its tick (sub.mu held).
func (it *monitoredItem) pushTick(tick int64, srv ua.DateTime) {
	pushRing(&it.tq, tickEntry{tick: tick, srv: srv}, it.queueSize, it.discardOldest, &it.tq1)
	it.markPending()
}

// pushEvent queues an event's fields (sub.mu held).
func (it *monitoredItem) pushEvent(fields []ua.Variant) {
	if it.evq == nil {
		it.evq = make([]ua.EventFieldList, min(int(it.queueSize), 16))
	}
	if it.evLn == int(it.queueSize) {
		if !it.discardOldest {
			return
		}
		it.evq[it.evHead] = ua.EventFieldList{}
		it.evHead = (it.evHead + 1) % len(it.evq)
		it.evLn--
	}
	if it.evLn == len(it.evq) {
		grown := make([]ua.EventFieldList, min(2*len(it.evq), int(it.queueSize)))
		for i := 0; i < it.evLn; i++ {
			grown[i] = it.evq[(it.evHead+i)%len(it.evq)]
		}
		it.evq, it.evHead = grown, 0
	}
	it.evq[(it.evHead+it.evLn)%len(it.evq)] = ua.EventFieldList{ClientHandle: it.clientHandle, EventFields: fields}
	it.evLn++
	it.markPending()
}

func (it *monitoredItem) markPending() {
	if it.mode == ua.MonitoringModeReporting && !it.queued {
		it.queued = true
		it.sub.pending = append(it.sub.pending, it)
	}
}

// clearQueue drops what the item has queued (sub.mu held).
func (it *monitoredItem) clearQueue() {
	it.dq.reset()
	it.tq.reset()
	clear(it.evq)
	it.evHead, it.evLn = 0, 0
}

// resendLast queues the last value again (TransferSubscriptions with
// SendInitialValues).
func (it *monitoredItem) resendLast() {
	if it.mode != ua.MonitoringModeDisabled && it.hasLast && it.isGen {
		it.pushTick(it.lastQTick, it.lastSrv)
		return
	}
	if it.mode != ua.MonitoringModeDisabled && it.hasLast && !it.event {
		dv := it.lastValue()
		it.stripTimestamps(&dv)
		it.push(&dv)
	}
}
