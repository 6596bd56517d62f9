package command

import (
	"time"

	"github.com/uagate/gateway/bridge/config"
)

// Idempotency and rate limits. Both are bounded tables guarded by the
// engine's mutex; neither grows with what a peer declares.

// seenEntry is a request id within the idempotency window: in flight
// (resp nil; the duplicates wait in waiters) or answered.
type seenEntry struct {
	key     string
	resp    *Response
	at      time.Time // when it was answered
	waiters []func(*Response)
}

// maxWaiters bounds the duplicates waiting for one request in flight.
const maxWaiters = 16

// seen remembers request ids, oldest first.
type seen struct {
	byKey map[string]*seenEntry
	order []*seenEntry // FIFO of entries; order[head:] are live
	head  int
}

func newSeen() *seen { return &seen{byKey: map[string]*seenEntry{}} }

// begin looks key up: an entry seen before (dup true), or a new one for a
// request that runs now; nil when the table is full of requests in flight.
// Entries answered longer than window ago are forgotten first, then the
// oldest answered ones when the table is full.
func (s *seen) begin(key string, now time.Time, window time.Duration, capacity int) (e *seenEntry, dup bool) {
	s.expire(now, window)
	if e := s.byKey[key]; e != nil {
		return e, true
	}
	if len(s.byKey) >= capacity && !s.evictOne() {
		return nil, false
	}
	e = &seenEntry{key: key}
	s.byKey[key] = e
	s.order = append(s.order, e)
	return e, false
}

func (s *seen) expire(now time.Time, window time.Duration) {
	for s.head < len(s.order) {
		e := s.order[s.head]
		if s.byKey[e.key] == e && (e.resp == nil || now.Sub(e.at) < window) {
			break
		}
		if s.byKey[e.key] == e {
			delete(s.byKey, e.key)
		}
		s.pop()
	}
}

// evictOne forgets the oldest answered entry; false when all in the table
// are in flight.
func (s *seen) evictOne() bool {
	for i := s.head; i < len(s.order); i++ {
		if e := s.order[i]; s.byKey[e.key] == e && e.resp != nil {
			delete(s.byKey, e.key)
			return true
		}
	}
	return false
}

func (s *seen) pop() {
	s.order[s.head] = nil
	s.head++
	if s.head > 1024 && s.head*2 > len(s.order) {
		s.order = append(s.order[:0], s.order[s.head:]...)
		s.head = 0
	}
}

// forget drops an entry whose request was not run (refused by the rate
// limit or a full queue), so that sending it again runs it.
func (s *seen) forget(e *seenEntry) {
	if s.byKey[e.key] == e {
		delete(s.byKey, e.key)
	}
}

// bucket is one caller's token bucket.
type bucket struct {
	tokens float64
	last   time.Time
	rate   config.CommandRate
}

// limiter holds the callers' buckets, at most capacity of them.
type limiter struct {
	buckets  map[string]*bucket
	capacity int
}

// maxCallers bounds the callers whose rate is tracked at once; a caller
// whose bucket is full again is forgotten when room is needed.
const maxCallers = 10000

func newLimiter() *limiter { return &limiter{buckets: map[string]*bucket{}, capacity: maxCallers} }

// take takes a token of caller's bucket; false when there is none (or no
// room to track another caller).
func (l *limiter) take(caller string, rate config.CommandRate, now time.Time) bool {
	b := l.buckets[caller]
	if b == nil {
		if len(l.buckets) >= l.capacity && !l.sweep(now) {
			return false
		}
		b = &bucket{tokens: float64(rate.Burst), last: now, rate: rate}
		l.buckets[caller] = b
	}
	if b.rate != rate { // the rules changed
		b.rate = rate
		b.tokens = min(b.tokens, float64(rate.Burst))
	}
	b.refill(now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func (b *bucket) refill(now time.Time) {
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = min(float64(b.rate.Burst), b.tokens+dt*b.rate.PerSecond)
	}
	b.last = now
}

// sweep forgets the callers whose bucket is full (they have been quiet);
// false when none is.
func (l *limiter) sweep(now time.Time) bool {
	freed := false
	for k, b := range l.buckets {
		if b.refill(now); b.tokens >= float64(b.rate.Burst) {
			delete(l.buckets, k)
			freed = true
		}
	}
	return freed
}
