package bridge

import (
	"log/slog"

	"github.com/uagate/gateway/uastack/client"
	"sync"
	"sync/atomic"
)

// acker acknowledges a notification message upstream: *client.Subscription
// in manual-ack mode. Ack may be called from any goroutine.
type acker interface {
	Ack(seq uint32) error
}

// ackTracker implements the delivery contract of ARCHITECTURE.md: it counts,
// per OPC UA sequence number, the sink messages that carry its data and are
// not settled yet. A sequence number is acknowledged upstream once
//
//   - the client said every handler call for it returned (handed: no further
//     message for it can appear), and
//   - its last message was settled, and
//   - every one of its messages was delivered (sink.Tracker's delivered).
//
// A sequence number with a message settled undelivered is never acknowledged:
// the server keeps it, and restart recovery republishes it.
//
// Entries live in a ring in arrival order, which is sequence-number order
// (the client dispatches in order), so lookups are a binary search and
// finished entries leave from the head. The ring holds at most the
// subscription's unacknowledged messages (MaxUnacked) plus those finished
// behind a slow head; it grows only past its initial size.
//
// add runs on the dispatch goroutine; handed and Settled on any goroutine.
type ackTracker struct {
	mu      sync.Mutex
	ack     acker
	ring    []ackEntry
	head, n int
	pending int // entries not finished

	acked       atomic.Uint64 // sequence numbers acknowledged upstream
	undelivered atomic.Uint64 // sequence numbers left unacknowledged: a message was not delivered
	ackErrors   atomic.Uint64 // Ack returned an error
	onAcked     func()        // after each acknowledgement upstream; nil: none
	strays      atomic.Uint64 // settlements or hand-overs of unknown sequence numbers
	log         *slog.Logger
}

type ackEntry struct {
	seq    uint32
	count  int32 // messages not settled
	handed bool  // every handler call for seq returned
	failed bool  // a message was settled undelivered
	done   bool
}

func newAckTracker(a acker, capacity int, log *slog.Logger) *ackTracker {
	if log == nil {
		log = slog.Default()
	}
	return &ackTracker{ack: a, ring: make([]ackEntry, max(capacity, 8)), log: log}
}

// setAcker sets the upstream acknowledger (the subscription, once created).
func (t *ackTracker) setAcker(a acker) {
	t.mu.Lock()
	t.ack = a
	t.mu.Unlock()
}

// setAckerOnce sets a when none is set yet (no allocation: a pointer in
// an interface).
func (t *ackTracker) setAckerOnce(a *client.Subscription) {
	t.mu.Lock()
	if t.ack == nil && a != nil {
		t.ack = a
	}
	t.mu.Unlock()
}

func (t *ackTracker) at(i int) *ackEntry { return &t.ring[(t.head+i)%len(t.ring)] }

// before reports a < b in sequence-number (serial) arithmetic.
func before(a, b uint32) bool { return int32(a-b) < 0 }

// find returns the entry of seq, nil if there is none; t.mu held.
func (t *ackTracker) find(seq uint32) *ackEntry {
	lo, hi := 0, t.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if before(t.at(m).seq, seq) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < t.n && t.at(lo).seq == seq {
		return t.at(lo)
	}
	return nil
}

// add counts one more message carrying seq. It must be called before the
// message is handed to any queue (a queue may settle it at once).
func (t *ackTracker) add(seq uint32) {
	t.mu.Lock()
	if t.n > 0 {
		if e := t.at(t.n - 1); e.seq == seq && !e.done {
			e.count++
			t.mu.Unlock()
			return
		}
	}
	if t.n == len(t.ring) {
		t.grow()
	}
	// Dispatch is in sequence-number order, so seq goes at the tail; an older
	// one (a subscription recreated with numbers starting over is the only
	// way) is put in its place to keep the ring sorted.
	i := t.n
	for i > 0 && !before(t.at(i-1).seq, seq) {
		if p := t.at(i - 1); p.seq == seq && !p.done {
			p.count++
			t.mu.Unlock()
			return
		}
		i--
	}
	for j := t.n; j > i; j-- {
		*t.at(j) = *t.at(j - 1)
	}
	*t.at(i) = ackEntry{seq: seq, count: 1}
	t.n++
	t.pending++
	t.mu.Unlock()
}

func (t *ackTracker) grow() {
	ring := make([]ackEntry, 2*len(t.ring))
	for i := 0; i < t.n; i++ {
		ring[i] = *t.at(i)
	}
	t.ring, t.head = ring, 0
}

// handed records that every handler call for seq returned (the client's
// OnMessageDone); seq is acknowledged now if it had no message or all were
// delivered already.
func (t *ackTracker) handed(seq uint32) {
	t.mu.Lock()
	e := t.find(seq)
	if e == nil || e.done {
		// No message carried seq (nothing for the sinks in it): nothing holds
		// it back.
		a := t.ack
		t.mu.Unlock()
		t.upstream(a, seq)
		return
	}
	e.handed = true
	t.settle(e)
}

// Settled implements sink.Tracker: the last holder of a message carrying
// sequence number token is done with it.
func (t *ackTracker) Settled(token uint64, delivered bool) {
	seq := uint32(token)
	t.mu.Lock()
	e := t.find(seq)
	if e == nil || e.done || e.count <= 0 {
		t.mu.Unlock()
		t.strays.Add(1)
		return
	}
	e.count--
	if !delivered {
		e.failed = true
	}
	t.settle(e)
}

// settle finishes e when nothing holds it any more and unlocks t.mu; it
// acknowledges outside the lock.
func (t *ackTracker) settle(e *ackEntry) {
	if e.count > 0 || !e.handed {
		t.mu.Unlock()
		return
	}
	e.done = true
	t.pending--
	seq, failed, a := e.seq, e.failed, t.ack
	for t.n > 0 && t.at(0).done {
		t.head = (t.head + 1) % len(t.ring)
		t.n--
	}
	t.mu.Unlock()
	if failed {
		t.undelivered.Add(1)
		return
	}
	t.upstream(a, seq)
}

func (t *ackTracker) upstream(a acker, seq uint32) {
	if a == nil {
		return
	}
	if err := a.Ack(seq); err != nil {
		if t.ackErrors.Add(1) == 1 {
			t.log.Warn("bridge: acknowledging upstream failed", "seq", seq, "err", err)
		}
		return
	}
	t.acked.Add(1)
	if t.onAcked != nil {
		t.onAcked()
	}
}

// unacked returns the sequence numbers waiting for their messages.
func (t *ackTracker) unacked() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pending
}
