package sinktest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
)

// Timeout bounds every wait of the suite: long enough for a loaded 2-core CI
// machine, reached only when something is wrong.
const Timeout = 30 * time.Second

// Tracker records how each token was settled; it implements sink.Tracker.
type Tracker struct {
	mu        sync.Mutex
	delivered map[uint64]int
	failed    map[uint64]int
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{delivered: map[uint64]int{}, failed: map[uint64]int{}}
}

// Settled implements sink.Tracker.
func (tr *Tracker) Settled(token uint64, delivered bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if delivered {
		tr.delivered[token]++
	} else {
		tr.failed[token]++
	}
}

// Count returns how many tokens were settled (each counted once, however
// often it was settled).
func (tr *Tracker) Count() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := len(tr.delivered)
	for tok := range tr.failed {
		if tr.delivered[tok] == 0 {
			n++
		}
	}
	return n
}

// Outcome returns how often token was settled delivered and undelivered.
func (tr *Tracker) Outcome(token uint64) (delivered, undelivered int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.delivered[token], tr.failed[token]
}

// Wait waits until n tokens were settled, then fails the test unless
// exactly n were, each exactly once, all with the outcome delivered.
func (tr *Tracker) Wait(t testing.TB, n int, delivered bool) {
	t.Helper()
	testutil.WaitFor(t, Timeout, fmt.Sprintf("%d messages settled", n), func() bool { return tr.Count() >= n })
	tr.mu.Lock()
	defer tr.mu.Unlock()
	check := func(m map[uint64]int, outcome bool) {
		for tok, k := range m {
			if outcome != delivered {
				t.Errorf("message %d settled delivered=%v, want %v", tok, outcome, delivered)
			}
			if k != 1 {
				t.Errorf("message %d settled %d times (delivered=%v)", tok, k, outcome)
			}
		}
	}
	check(tr.delivered, true)
	check(tr.failed, false)
	if got := len(tr.delivered) + len(tr.failed); got != n {
		t.Errorf("%d messages settled, want %d", got, n)
	}
}

// Addr is where the suite's messages go.
var Addr = sink.Addr{Publisher: "pub", Group: "line1", Writer: "temps"}

// Message returns a message of kind k for a with the payload
// {"counter":i} and the token i, tracked by tr when tr is not nil; the
// caller holds its one reference.
func Message(tr sink.Tracker, i int, k sink.Kind, a sink.Addr) *sink.Message {
	return PaddedMessage(tr, i, k, a, 0)
}

// PaddedMessage is Message with a payload of at least size bytes:
// {"counter":i,"pad":"xx…"}.
func PaddedMessage(tr sink.Tracker, i int, k sink.Kind, a sink.Addr, size int) *sink.Message {
	p := fmt.Appendf(nil, `{"counter":%d}`, i)
	if pad := size - len(p) - len(`,"pad":""`); pad > 0 {
		p = append(append(append(p[:len(p)-1], `,"pad":"`...), bytes.Repeat([]byte{'x'}, pad)...), `"}`...)
	}
	m := sink.NewMessage(len(p))
	m.SetPayload(p)
	m.Kind, m.Addr = k, a
	if tr != nil {
		m.Tracker, m.Token = tr, uint64(i)
	}
	return m
}

// Counter returns the counter of a payload of Message; ok is false when p
// is not one.
func Counter(p []byte) (counter int, ok bool) {
	var body struct{ Counter *int }
	if json.Unmarshal(p, &body) != nil || body.Counter == nil {
		return 0, false
	}
	return *body.Counter, true
}

// Backoff is the Output's reconnection backoff in the tests, 20 ms to
// 200 ms: a broker that comes back is found at once.
var Backoff = func() (b sink.OutputOptions) {
	b.Backoff.Initial, b.Backoff.Max = 20*time.Millisecond, 200*time.Millisecond
	return b
}().Backoff

// StartOutput returns a started Output in front of s, with the Backoff
// above (unless opts sets one) and the test's logger (unless opts sets
// one); it is closed when the test ends (CloseQueue).
func StartOutput(t testing.TB, s sink.Sink, opts sink.OutputOptions) *sink.Output {
	t.Helper()
	if opts.Backoff == (sink.OutputOptions{}).Backoff {
		opts.Backoff = Backoff
	}
	if opts.Logger == nil {
		opts.Logger = testutil.Logger(t)
	}
	o, err := sink.NewOutput(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	o.Start()
	t.Cleanup(func() { CloseQueue(t, o) })
	return o
}

// Queue is what the suite drives: an Output, or a queue of its own kind
// (the WebSocket hub) that can be closed.
type Queue interface {
	sink.Queue
	Close(ctx context.Context) error
}

// CloseQueue closes q within 10 s and fails the test (Errorf) on an error.
func CloseQueue(t testing.TB, q Queue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.Close(ctx); err != nil {
		t.Errorf("close %s: %v", q.Name(), err)
	}
}

// chanTracker hands every outcome to a channel.
type chanTracker chan bool

func (c chanTracker) Settled(_ uint64, delivered bool) { c <- delivered }

// BenchOutput streams b.N messages of some 200 bytes through an Output of
// guarantee g into s, keeping up to 1024 unsettled, and reports messages
// per second; s is closed at the end.
func BenchOutput(b *testing.B, s sink.Sink, g config.Guarantee) {
	o, err := sink.NewOutput(s, sink.OutputOptions{Guarantee: g, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	o.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := o.Close(ctx); err != nil {
			b.Error(err)
		}
	}()
	payload := fmt.Appendf(nil, `{"MessageId":"1","MessageType":"ua-data","Messages":[{"counter":%0150d}]}`, 1)
	tr := make(chanTracker, 2048)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	out, failed := 0, 0
	start := time.Now()
	for b.Loop() {
		m := sink.NewMessage(len(payload))
		m.SetPayload(payload)
		m.Kind, m.Addr, m.Tracker = sink.KindData, Addr, tr
		o.Enqueue(m)
		for out++; out > 1024; out-- {
			if !<-tr {
				failed++
			}
		}
	}
	for ; out > 0; out-- {
		if !<-tr {
			failed++
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	if failed > 0 {
		b.Fatalf("%d undelivered", failed)
	}
}

// Payloads collects received payloads for a Receiver, safe for concurrent
// use: a harness's consumer callback calls Add.
type Payloads struct {
	mu sync.Mutex
	ps [][]byte
}

// Add records a copy of p.
func (r *Payloads) Add(p []byte) {
	c := append([]byte(nil), p...)
	r.mu.Lock()
	r.ps = append(r.ps, c)
	r.mu.Unlock()
}

// Received implements Receiver.
func (r *Payloads) Received() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.ps...)
}

// counts returns the counters of ps in order of first arrival and how
// often each arrived; a payload that is not a counter fails the test.
func counts(t testing.TB, ps [][]byte) (order []int, seen map[int]int) {
	t.Helper()
	seen = map[int]int{}
	for _, p := range ps {
		c, ok := Counter(p)
		if !ok {
			t.Fatalf("received %.80q: not a message of the suite", p)
		}
		if seen[c] == 0 {
			order = append(order, c)
		}
		seen[c]++
	}
	return order, seen
}

// waitReceived waits until r received every counter in want and returns
// the counters in order of first arrival and how often each arrived.
func waitReceived(t testing.TB, r Receiver, want []int) (order []int, seen map[int]int) {
	t.Helper()
	testutil.WaitFor(t, Timeout, fmt.Sprintf("%d messages received", len(want)), func() bool {
		_, seen = counts(t, r.Received())
		for _, c := range want {
			if seen[c] == 0 {
				return false
			}
		}
		return true
	})
	return counts(t, r.Received())
}

// span returns the counters from..to-1.
func span(from, to int) []int {
	out := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
