package sink

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
)

// tracker records how each token was settled.
type tracker struct {
	mu        sync.Mutex
	delivered map[uint64]int
	failed    map[uint64]int
	ch        chan uint64 // optional: every settled token
}

func newTracker() *tracker {
	return &tracker{delivered: map[uint64]int{}, failed: map[uint64]int{}}
}

func (tr *tracker) Settled(token uint64, delivered bool) {
	tr.mu.Lock()
	if delivered {
		tr.delivered[token]++
	} else {
		tr.failed[token]++
	}
	tr.mu.Unlock()
	if tr.ch != nil {
		tr.ch <- token
	}
}

func (tr *tracker) settled() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, c := range tr.delivered {
		n += c
	}
	for _, c := range tr.failed {
		n += c
	}
	return n
}

// check asserts every token in [0,n) was settled exactly once, as want says.
func (tr *tracker) check(t *testing.T, n int, want func(token uint64) bool) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for i := uint64(0); i < uint64(n); i++ {
		d, f := tr.delivered[i], tr.failed[i]
		if d+f != 1 {
			t.Errorf("token %d settled %d times (delivered %d, undelivered %d), want once", i, d+f, d, f)
			continue
		}
		if w := want(i); (d == 1) != w {
			t.Errorf("token %d delivered=%v, want %v", i, d == 1, w)
		}
	}
	if len(tr.delivered)+len(tr.failed) > n {
		t.Errorf("tokens beyond %d settled", n)
	}
}

func counterMessage(tr Tracker, i int) *Message {
	m := NewMessage(64)
	m.SetPayload(fmt.Appendf(nil, `{"counter":%d}`, i))
	m.Tracker, m.Token = tr, uint64(i)
	m.Addr = Addr{Publisher: "pub", Group: "g", Writer: "w"}
	return m
}

// scriptSink is an in-memory Sink whose connection and confirmations the
// test drives, to pin down the Output's ordering and settling rules; the
// broker sinks run the Output against real brokers (sinktest's suite).
type scriptSink struct {
	guarantee config.Guarantee

	mu           sync.Mutex
	connectFails int   // fail this many Connect calls
	notConnected int   // the next n Publish calls return ErrNotConnected
	refuse       error // Publish returns it (once) when set
	autoConfirm  bool
	connects     int
	closed       bool
	published    []int // counter of every accepted Publish, in order
	pending      []pend
	maxPending   int
}

type pend struct {
	m   *Message
	ack Acker
}

func (s *scriptSink) Name() string                { return "script" }
func (s *scriptSink) Guarantee() config.Guarantee { return s.guarantee }

func (s *scriptSink) Connect(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.connects++
	if s.connectFails > 0 {
		s.connectFails--
		return fmt.Errorf("script: connection refused: %w", ErrUnauthorized)
	}
	return nil
}

func counterOf(m *Message) int {
	p := m.Payload()
	n, _ := strconv.Atoi(string(p[len(`{"counter":`) : len(p)-1]))
	return n
}

func (s *scriptSink) Publish(m *Message, ack Acker) error {
	s.mu.Lock()
	if s.notConnected > 0 {
		s.notConnected--
		s.mu.Unlock()
		return ErrNotConnected
	}
	if err := s.refuse; err != nil {
		s.refuse = nil
		s.mu.Unlock()
		return err
	}
	s.published = append(s.published, counterOf(m))
	if s.autoConfirm {
		s.mu.Unlock()
		ack.Confirmed(m, nil)
		return nil
	}
	s.pending = append(s.pending, pend{m, ack})
	s.maxPending = max(s.maxPending, len(s.pending))
	s.mu.Unlock()
	return nil
}

// confirm settles the pending publishes: err(counter) decides the outcome.
func (s *scriptSink) confirm(err func(counter int) error) int {
	s.mu.Lock()
	p := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, x := range p {
		x.ack.Confirmed(x.m, err(counterOf(x.m)))
	}
	return len(p)
}

// confirmOnly confirms, successfully, the pending publishes whose counter
// pick accepts and keeps the others pending.
func (s *scriptSink) confirmOnly(pick func(counter int) bool) {
	s.mu.Lock()
	var now, keep []pend
	for _, x := range s.pending {
		if pick(counterOf(x.m)) {
			now = append(now, x)
		} else {
			keep = append(keep, x)
		}
	}
	s.pending = keep
	s.mu.Unlock()
	for _, x := range now {
		x.ack.Confirmed(x.m, nil)
	}
}

func (s *scriptSink) npending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

func (s *scriptSink) publishedCopy() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.published...)
}

func (s *scriptSink) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.confirm(func(int) error { return ErrNotConnected })
	return nil
}

var fastBackoff = OutputOptions{}.Backoff

func init() {
	fastBackoff.Initial, fastBackoff.Max = 5*time.Millisecond, 20*time.Millisecond
}
