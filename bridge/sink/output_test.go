package sink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/fence"
	"github.com/uagate/gateway/internal/testutil"
)

func newTestOutput(t *testing.T, s Sink, opts OutputOptions) *Output {
	t.Helper()
	if opts.Backoff == (OutputOptions{}).Backoff {
		opts.Backoff = fastBackoff
	}
	if opts.Logger == nil {
		opts.Logger = testutil.Logger(t)
	}
	o, err := NewOutput(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func closeOutput(t *testing.T, o *Output, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return o.Close(ctx)
}

func TestOutputRefusesAtLeastOnceOverAtMostOnceSink(t *testing.T) {
	_, err := NewOutput(&scriptSink{guarantee: config.AtMostOnce}, OutputOptions{Guarantee: config.AtLeastOnce})
	if err == nil || !strings.Contains(err.Error(), "at-least-once") {
		t.Fatalf("NewOutput = %v, want a refusal naming at-least-once", err)
	}
	if _, err := NewOutput(&scriptSink{guarantee: config.AtLeastOnce}, OutputOptions{Guarantee: config.AtLeastOnce}); err != nil {
		t.Fatalf("at-least-once over an at-least-once sink: %v", err)
	}
	if _, err := NewOutput(&scriptSink{}, OutputOptions{QueueSize: -1}); err == nil || !strings.Contains(err.Error(), "QueueSize") {
		t.Fatalf("negative QueueSize: %v", err)
	}
}

func TestOutputOptionsFromConfig(t *testing.T) {
	o, err := OutputOptionsFromConfig(config.Delivery{Guarantee: "at-least-once", Policy: "drop-oldest", QueueSize: 10, QueueBytes: 4096})
	if err != nil || o.Guarantee != config.AtLeastOnce || o.Policy != config.DropOldest || o.QueueSize != 10 || o.QueueBytes != 4096 {
		t.Fatalf("%+v %v", o, err)
	}
	for _, d := range []config.Delivery{{Guarantee: "exactly-once"}, {Policy: "newest"}, {QueueSize: -1}, {QueueBytes: -1}} {
		if _, err := OutputOptionsFromConfig(d); err == nil {
			t.Errorf("%+v accepted", d)
		}
	}
	// The zero values are the defaults: at-most-once, block.
	out, err := NewOutput(&scriptSink{guarantee: config.AtMostOnce}, OutputOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := out.Stats(); st.Guarantee != config.AtMostOnce || st.Policy != config.Block {
		t.Errorf("zero options: %s %s", st.Guarantee, st.Policy)
	}
}

func TestOutputDeliversInOrder(t *testing.T) {
	s := &scriptSink{guarantee: config.AtLeastOnce, autoConfirm: true}
	o := newTestOutput(t, s, OutputOptions{Guarantee: config.AtLeastOnce, QueueSize: 8, MaxInFlight: 4})
	o.Start()
	tr := newTracker()
	const n = 500
	for i := range n {
		o.Enqueue(counterMessage(tr, i))
	}
	testutil.WaitFor(t, 5*time.Second, "all settled", func() bool { return tr.settled() == n })
	if err := closeOutput(t, o, time.Second); err != nil {
		t.Fatal(err)
	}
	tr.check(t, n, func(uint64) bool { return true })
	got := s.publishedCopy()
	for i, c := range got {
		if c != i {
			t.Fatalf("published[%d] = %d: out of order", i, c)
		}
	}
	st := o.Stats()
	if st.Enqueued != n || st.Sent != n || st.Confirmed != n || st.Errors != 0 || st.Queued != 0 || st.InFlight != 0 {
		t.Fatalf("stats %+v", st)
	}
	// {"counter":0} … {"counter":499}: 13 bytes each, one more from 10, one more from 100.
	if want := uint64(13*n + (n - 10) + (n - 100)); st.SentBytes != want {
		t.Fatalf("sent bytes %d, want %d", st.SentBytes, want)
	}
	if !s.closed {
		t.Fatal("sink not closed")
	}
}

func TestOutputMaxInFlight(t *testing.T) {
	s := &scriptSink{guarantee: config.AtLeastOnce}
	o := newTestOutput(t, s, OutputOptions{Guarantee: config.AtLeastOnce, QueueSize: 100, MaxInFlight: 3})
	o.Start()
	tr := newTracker()
	for i := range 10 {
		o.Enqueue(counterMessage(tr, i))
	}
	testutil.WaitFor(t, 10*time.Second, "3 in flight", func() bool { return s.npending() == 3 })
	if st := o.Stats(); st.InFlight != 3 || st.Queued != 7 {
		t.Fatalf("in flight %d queued %d, want 3 and 7", st.InFlight, st.Queued)
	}
	for tr.settled() < 10 {
		s.confirm(func(int) error { return nil })
		testutil.WaitFor(t, 10*time.Second, "next window", func() bool { return s.npending() > 0 || tr.settled() == 10 })
	}
	if s.maxPending > 3 {
		t.Fatalf("%d in flight, limit 3", s.maxPending)
	}
	if err := closeOutput(t, o, time.Second); err != nil {
		t.Fatal(err)
	}
	tr.check(t, 10, func(uint64) bool { return true })
}

// A failed confirmation at-least-once stops the stream, waits for what is
// outstanding, and resends the failed messages in their order before
// anything newer.
func TestOutputRetriesFailedInOrder(t *testing.T) {
	s := &scriptSink{guarantee: config.AtLeastOnce}
	o := newTestOutput(t, s, OutputOptions{Guarantee: config.AtLeastOnce, QueueSize: 100, MaxInFlight: 10})
	o.Start()
	tr := newTracker()
	for i := range 10 {
		o.Enqueue(counterMessage(tr, i))
	}
	testutil.WaitFor(t, 10*time.Second, "10 in flight", func() bool { return s.npending() == 10 })
	for i := 10; i < 15; i++ {
		o.Enqueue(counterMessage(tr, i))
	}
	boom := errors.New("broker said no")
	s.confirm(func(c int) error {
		if c >= 3 && c <= 6 || c == 8 {
			return boom
		}
		return nil
	})
	// The window spans 3..12 (10 slots, 7 and 9 settled): the 5 resends and
	// 3 new messages. Depending on when the worker looked, 10..12 went out
	// before the failures were known — then the resends wait until they are
	// confirmed, so that a resend never overtakes a confirmation still out —
	// or after the resends.
	if !testutil.Eventually(10*time.Second, func() bool {
		if o.Stats().Retries == 5 {
			return true
		}
		s.confirmOnly(func(c int) bool { return c >= 10 })
		return false
	}) {
		t.Fatalf("resends: %d pending, published %v, stats %+v", s.npending(), s.publishedCopy(), o.Stats())
	}
	var resent, fresh []int
	for _, c := range s.publishedCopy()[10:] {
		if c < 10 {
			resent = append(resent, c)
		} else {
			fresh = append(fresh, c)
		}
	}
	if !slices.Equal(resent, []int{3, 4, 5, 6, 8}) || !slices.IsSorted(fresh) {
		t.Fatalf("after the failures published %v: resends %v (want 3 4 5 6 8), new %v (want in order)", s.publishedCopy()[10:], resent, fresh)
	}
	testutil.WaitFor(t, 10*time.Second, "all settled", func() bool {
		s.confirm(func(int) error { return nil })
		return tr.settled() == 15
	})
	st := o.Stats()
	if st.Retries != 5 || st.Errors != 5 || st.Confirmed != 15 || !strings.Contains(st.LastError, "broker said no") {
		t.Fatalf("stats %+v", st)
	}
	if err := closeOutput(t, o, time.Second); err != nil {
		t.Fatal(err)
	}
	tr.check(t, 15, func(uint64) bool { return true })
}

// A connection lost with messages in flight: they all fail, the first
// resend finds the sink disconnected, and after the reconnect the window is
// resent from its head, in order.
func TestOutputResendAfterLostConnectionInOrder(t *testing.T) {
	s := &scriptSink{guarantee: config.AtLeastOnce}
	o := newTestOutput(t, s, OutputOptions{Guarantee: config.AtLeastOnce, MaxInFlight: 5})
	o.Start()
	tr := newTracker()
	for i := range 8 {
		o.Enqueue(counterMessage(tr, i))
	}
	testutil.WaitFor(t, 10*time.Second, "5 in flight", func() bool { return s.npending() == 5 })
	s.mu.Lock()
	s.notConnected = 1
	s.mu.Unlock()
	s.confirm(func(int) error { return ErrNotConnected })
	testutil.WaitFor(t, 10*time.Second, "resent window", func() bool { return s.npending() == 5 })
	if got := s.publishedCopy()[5:]; !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("resent %v, want 0..4 in order", got)
	}
	s.confirm(func(int) error { return nil })
	testutil.WaitFor(t, 10*time.Second, "the rest", func() bool { return s.npending() == 3 })
	s.confirm(func(int) error { return nil })
	testutil.WaitFor(t, 10*time.Second, "all settled", func() bool { return tr.settled() == 8 })
	if st := o.Stats(); st.Reconnects != 1 {
		t.Fatalf("stats %+v", st)
	}
	if err := closeOutput(t, o, time.Second); err != nil {
		t.Fatal(err)
	}
	tr.check(t, 8, func(uint64) bool { return true })
}

// At-most-once, a failed confirmation is counted and the message settled as
// delivered: nothing is resent.
func TestOutputAtMostOnceCountsErrors(t *testing.T) {
	s := &scriptSink{guarantee: config.AtLeastOnce}
	o := newTestOutput(t, s, OutputOptions{Guarantee: config.AtMostOnce})
	o.Start()
	tr := newTracker()
	for i := range 5 {
		o.Enqueue(counterMessage(tr, i))
	}
	testutil.WaitFor(t, 10*time.Second, "5 in flight", func() bool { return s.npending() == 5 })
	s.confirm(func(c int) error {
		if c%2 == 0 {
			return errors.New("lost")
		}
		return nil
	})
	testutil.WaitFor(t, 10*time.Second, "settled", func() bool { return tr.settled() == 5 })
	if st := o.Stats(); st.Errors != 3 || st.Confirmed != 2 || st.Retries != 0 {
		t.Fatalf("stats %+v", st)
	}
	if len(s.publishedCopy()) != 5 {
		t.Fatalf("published %v, want 5 without resends", s.publishedCopy())
	}
	if err := closeOutput(t, o, time.Second); err != nil {
		t.Fatal(err)
	}
	tr.check(t, 5, func(uint64) bool { return true })
}

// deadLetterList keeps what it is given (sink.DeadLetters).
type deadLetterList struct {
	mu   sync.Mutex
	kept []int
	keep bool
}

func (d *deadLetterList) DeadLetter(_ string, m *Message, err error) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.keep && errors.Is(err, ErrRefused) {
		d.kept = append(d.kept, counterOf(m))
	}
	return d.keep
}

// A confirmation that says the broker refused a message for good
// (ErrRefused) settles it as a refusal at least once: kept in the dead
// letters and delivered as far as the pipeline is concerned, or, without a
// dead-letter keeper, undelivered; never sent again. Other confirmation
// errors are resent.
func TestOutputConfirmedRefused(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("kept=%v", keep), func(t *testing.T) {
			s := &scriptSink{guarantee: config.AtLeastOnce}
			dl := &deadLetterList{keep: keep}
			o := newTestOutput(t, s, OutputOptions{Guarantee: config.AtLeastOnce, MaxInFlight: 10, DeadLetters: dl})
			o.Start()
			tr := newTracker()
			for i := range 6 {
				o.Enqueue(counterMessage(tr, i))
			}
			testutil.WaitFor(t, 10*time.Second, "6 in flight", func() bool { return s.npending() == 6 })
			s.confirm(func(c int) error {
				switch c {
				case 1, 4:
					return fmt.Errorf("%w: not authorized", ErrRefused)
				case 2:
					return errors.New("quota exceeded")
				}
				return nil
			})
			testutil.WaitFor(t, 10*time.Second, "all settled", func() bool {
				s.confirm(func(int) error { return nil })
				return tr.settled() == 6
			})
			if got := s.publishedCopy(); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 2}) {
				t.Errorf("published %v: want the refused ones once, the failed one again", got)
			}
			st := o.Stats()
			wantDL, wantUndelivered := uint64(2), uint64(0)
			if !keep {
				wantDL, wantUndelivered = 0, 2
			}
			if st.DeadLettered != wantDL || st.Undelivered != wantUndelivered || st.Retries != 1 || st.Errors != 3 {
				t.Errorf("stats %+v", st)
			}
			if keep && !slices.Equal(dl.kept, []int{1, 4}) {
				t.Errorf("dead letters %v, want [1 4]", dl.kept)
			}
			if err := closeOutput(t, o, time.Second); err != nil {
				t.Fatal(err)
			}
			tr.check(t, 6, func(tok uint64) bool { return keep || tok != 1 && tok != 4 })
		})
	}
}

// ErrNotConnected from Publish reconnects (with backoff past failed
// connects) and sends the same message again; a refused message is dropped
// as undelivered at-least-once.
func TestOutputReconnects(t *testing.T) {
	s := &scriptSink{guarantee: config.AtLeastOnce, autoConfirm: true, connectFails: 2}
	o := newTestOutput(t, s, OutputOptions{Guarantee: config.AtLeastOnce})
	o.Start()
	tr := newTracker()
	o.Enqueue(counterMessage(tr, 0))
	testutil.WaitFor(t, 10*time.Second, "first message", func() bool { return tr.settled() == 1 })
	st := o.Stats()
	if st.ConnectFailures != 2 || st.Reconnects != 0 || !st.Connected || !strings.Contains(st.LastError, "refused the credentials") {
		t.Fatalf("after 2 failed connects: %+v", st)
	}
	s.mu.Lock()
	s.notConnected, s.connectFails = 1, 1
	s.mu.Unlock()
	o.Enqueue(counterMessage(tr, 1))
	o.Enqueue(counterMessage(tr, 2))
	testutil.WaitFor(t, 10*time.Second, "after reconnect", func() bool { return tr.settled() == 3 })
	if st = o.Stats(); st.Reconnects != 1 || st.ConnectFailures != 3 {
		t.Fatalf("after a lost connection: %+v", st)
	}
	s.mu.Lock()
	s.refuse = errors.New("message too large")
	s.mu.Unlock()
	o.Enqueue(counterMessage(tr, 3))
	o.Enqueue(counterMessage(tr, 4))
	testutil.WaitFor(t, 10*time.Second, "refused", func() bool { return tr.settled() == 5 })
	if err := closeOutput(t, o, time.Second); err != nil {
		t.Fatal(err)
	}
	tr.check(t, 5, func(tok uint64) bool { return tok != 3 })
	if got := s.publishedCopy(); !slices.Equal(got, []int{0, 1, 2, 4}) {
		t.Fatalf("published %v", got)
	}
	if st = o.Stats(); st.Undelivered != 1 || st.Errors != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Block: a full queue makes Enqueue wait; Close releases it and settles the
// waiting and queued messages as undelivered at-least-once.
func TestOutputBlockPolicy(t *testing.T) {
	s := &scriptSink{guarantee: config.AtLeastOnce, connectFails: 1 << 30}
	o := newTestOutput(t, s, OutputOptions{Guarantee: config.AtLeastOnce, QueueSize: 2})
	o.Start()
	tr := newTracker()
	o.Enqueue(counterMessage(tr, 0))
	o.Enqueue(counterMessage(tr, 1))
	returned := enqueueBlocks(t, o, counterMessage(tr, 2), 3, "Enqueue on a full blocking queue returned")
	err := closeOutput(t, o, 100*time.Millisecond)
	<-returned
	if err == nil || !strings.Contains(err.Error(), "2 messages undelivered") {
		t.Fatalf("Close = %v, want 2 undelivered", err)
	}
	tr.check(t, 3, func(uint64) bool { return false })
	// After Close, Enqueue settles at once.
	o.Enqueue(counterMessage(tr, 3))
	tr.check(t, 4, func(uint64) bool { return false })
	if st := o.Stats(); st.Undelivered != 4 || st.Connected {
		t.Fatalf("stats %+v", st)
	}
}

// DropOldest never waits: it drops the oldest queued message, settled as
// delivered, and counts it.
func TestOutputDropOldest(t *testing.T) {
	s := &scriptSink{guarantee: config.AtLeastOnce, connectFails: 1 << 30}
	o := newTestOutput(t, s, OutputOptions{Guarantee: config.AtLeastOnce, Policy: config.DropOldest, QueueSize: 4})
	o.Start()
	tr := newTracker()
	for i := range 10 {
		o.Enqueue(counterMessage(tr, i))
	}
	if st := o.Stats(); st.Dropped != 6 || st.Queued != 4 {
		t.Fatalf("stats %+v", st)
	}
	tr.check(t, 6, func(uint64) bool { return true })
	err := closeOutput(t, o, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "4 messages undelivered") {
		t.Fatalf("Close = %v", err)
	}
	tr.check(t, 10, func(tok uint64) bool { return tok < 6 })
}

// Close drains: what is queued and in flight is delivered while ctx lasts.
func TestOutputCloseDrains(t *testing.T) {
	s := &scriptSink{guarantee: config.AtLeastOnce}
	o := newTestOutput(t, s, OutputOptions{Guarantee: config.AtLeastOnce, MaxInFlight: 2})
	o.Start()
	tr := newTracker()
	for i := range 6 {
		o.Enqueue(counterMessage(tr, i))
	}
	testutil.WaitFor(t, 10*time.Second, "2 in flight", func() bool { return s.npending() == 2 })
	closed := make(chan error, 1)
	go func() { closed <- closeOutput(t, o, 5*time.Second) }()
	for tr.settled() < 6 {
		testutil.WaitFor(t, 10*time.Second, "in flight", func() bool { return s.npending() > 0 })
		s.confirm(func(int) error { return nil })
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	tr.check(t, 6, func(uint64) bool { return true })
}

// At close, unconfirmed messages come back from the sink's Close with an
// error and are settled undelivered (at-least-once) exactly once.
func TestOutputCloseSettlesUnconfirmed(t *testing.T) {
	s := &scriptSink{guarantee: config.AtLeastOnce}
	o := newTestOutput(t, s, OutputOptions{Guarantee: config.AtLeastOnce, MaxInFlight: 3})
	o.Start()
	tr := newTracker()
	for i := range 5 {
		o.Enqueue(counterMessage(tr, i))
	}
	testutil.WaitFor(t, 10*time.Second, "3 in flight", func() bool { return s.npending() == 3 })
	err := closeOutput(t, o, 30*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "5 messages undelivered") {
		t.Fatalf("Close = %v", err)
	}
	tr.check(t, 5, func(uint64) bool { return false })
	if err := o.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestOutputCloseWithoutStart(t *testing.T) {
	s := &scriptSink{guarantee: config.AtMostOnce}
	o := newTestOutput(t, s, OutputOptions{})
	tr := newTracker()
	o.Enqueue(counterMessage(tr, 0))
	if err := closeOutput(t, o, time.Second); err != nil {
		t.Fatal(err)
	}
	tr.check(t, 1, func(uint64) bool { return true })
	if !s.closed || s.connects != 0 {
		t.Fatalf("closed %v connects %d", s.closed, s.connects)
	}
}

// fullBlockOutput is a started Block output whose broker refuses to connect,
// with counters 0 and 1 queued and room for half a message more (QueueBytes
// 2.5 counter messages): the next Enqueue or WaitRoom waits until the sink's
// connectFails is set to 0.
func fullBlockOutput(t *testing.T) (*scriptSink, *Output, *tracker) {
	t.Helper()
	size := MessageSize(len(`{"counter":0}`))
	s := &scriptSink{guarantee: config.AtLeastOnce, connectFails: 1 << 30, autoConfirm: true}
	o := newTestOutput(t, s, OutputOptions{Guarantee: config.AtLeastOnce, QueueSize: 100, QueueBytes: 2*size + size/2})
	o.Start()
	tr := newTracker()
	o.Enqueue(counterMessage(tr, 0))
	o.Enqueue(counterMessage(tr, 1))
	return s, o, tr
}

// QueueBytes bounds the payload bytes queued as QueueSize bounds the
// messages: a Block queue waits until the worker took enough, a DropOldest
// queue drops until the message fits, and an empty queue takes a message
// larger than the bound (it would never fit otherwise).
func TestOutputQueueBytes(t *testing.T) {
	size := MessageSize(len(`{"counter":0}`)) // counters 0–9: one buffer each
	t.Run("block", func(t *testing.T) {
		s, o, tr := fullBlockOutput(t)
		if st := o.Stats(); st.Queued != 2 || st.QueuedBytes != 2*size {
			t.Fatalf("stats %+v, want 2 queued, %d bytes", st, 2*size)
		}
		returned := enqueueBlocks(t, o, counterMessage(tr, 2), 3, "Enqueue past QueueBytes returned on a blocking queue")
		s.mu.Lock()
		s.connectFails = 0
		s.mu.Unlock()
		<-returned
		testutil.WaitFor(t, 10*time.Second, "all delivered", func() bool { return tr.settled() == 3 })
		tr.check(t, 3, func(uint64) bool { return true })
		if got := s.publishedCopy(); !slices.Equal(got, []int{0, 1, 2}) {
			t.Fatalf("published %v", got)
		}
		if st := o.Stats(); st.QueuedBytes != 0 || st.Dropped != 0 {
			t.Fatalf("stats %+v", st)
		}
		if err := closeOutput(t, o, time.Second); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("drop-oldest", func(t *testing.T) {
		s := &scriptSink{guarantee: config.AtLeastOnce, connectFails: 1 << 30}
		o := newTestOutput(t, s, OutputOptions{Guarantee: config.AtLeastOnce, Policy: config.DropOldest, QueueSize: 100, QueueBytes: 3 * size})
		o.Start()
		tr := newTracker()
		for i := range 10 {
			o.Enqueue(counterMessage(tr, i))
		}
		if st := o.Stats(); st.Dropped != 7 || st.Queued != 3 || st.QueuedBytes != 3*size {
			t.Fatalf("stats %+v, want 7 dropped, 3 queued", st)
		}
		tr.check(t, 7, func(uint64) bool { return true })
		_ = closeOutput(t, o, 50*time.Millisecond)
		tr.check(t, 10, func(tok uint64) bool { return tok < 7 })
	})
	t.Run("larger than the bound", func(t *testing.T) {
		s := &scriptSink{guarantee: config.AtLeastOnce, connectFails: 1 << 30}
		o := newTestOutput(t, s, OutputOptions{Guarantee: config.AtLeastOnce, Policy: config.DropOldest, QueueBytes: size / 2})
		o.Start()
		tr := newTracker()
		o.Enqueue(counterMessage(tr, 0))
		o.Enqueue(counterMessage(tr, 1))
		if st := o.Stats(); st.Queued != 1 || st.Dropped != 1 {
			t.Fatalf("stats %+v, want the newest queued alone", st)
		}
		_ = closeOutput(t, o, 50*time.Millisecond)
	})
	if _, err := NewOutput(&scriptSink{}, OutputOptions{QueueBytes: -1}); err == nil || !strings.Contains(err.Error(), "QueueBytes") {
		t.Errorf("QueueBytes -1: %v", err)
	}
}

// TestOutputWaitRoom: a Block queue's WaitRoom waits, before any message
// exists, until the queue has room for that many bytes, and every waiter
// gets its turn once the worker drains the queue (one pop wakes one
// waiter, who passes it on); a DropOldest queue never waits; Close
// releases the waiters.
func TestOutputWaitRoom(t *testing.T) {
	size := MessageSize(len(`{"counter":0}`))
	s, o, tr := fullBlockOutput(t)
	var returned atomic.Int32
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.WaitRoom(size)
			returned.Add(1)
		}()
	}
	if !testutil.Consistently(50*time.Millisecond, func() bool { return returned.Load() == 0 }) {
		t.Fatalf("%d WaitRoom calls returned while the queue was full", returned.Load())
	}
	s.mu.Lock()
	s.connectFails = 0
	s.mu.Unlock()
	testutil.WaitFor(t, 10*time.Second, "every waiter released", func() bool { return returned.Load() == 3 })
	wg.Wait()
	testutil.WaitFor(t, 10*time.Second, "delivered", func() bool { return tr.settled() == 2 })

	// Close releases a waiter.
	o2 := newTestOutput(t, &scriptSink{guarantee: config.AtLeastOnce, connectFails: 1 << 30}, OutputOptions{Guarantee: config.AtLeastOnce, QueueSize: 1})
	o2.Start()
	o2.Enqueue(counterMessage(tr, 2))
	done := make(chan struct{})
	go func() { o2.WaitRoom(size); close(done) }()
	_ = closeOutput(t, o2, 50*time.Millisecond)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not release WaitRoom")
	}

	// DropOldest: never waits.
	o3 := newTestOutput(t, &scriptSink{guarantee: config.AtLeastOnce, connectFails: 1 << 30}, OutputOptions{Guarantee: config.AtLeastOnce, Policy: config.DropOldest, QueueSize: 1})
	o3.Start()
	o3.Enqueue(counterMessage(tr, 3))
	o3.WaitRoom(size) // returns at once, or the test times out
	_ = closeOutput(t, o3, 50*time.Millisecond)
	if err := closeOutput(t, o, time.Second); err != nil {
		t.Fatal(err)
	}
}

// enqueueBlocks enqueues m on a goroutine, waits until the output counted it
// (the enqueued-th), and fails with msg if Enqueue returned within 50 ms; the
// channel is closed when it does return.
func enqueueBlocks(t *testing.T, o *Output, m *Message, enqueued uint64, msg string) <-chan struct{} {
	t.Helper()
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		o.Enqueue(m)
	}()
	testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("%d enqueued", enqueued), func() bool { return o.Stats().Enqueued == enqueued })
	select {
	case <-returned:
		t.Fatal(msg)
	case <-time.After(50 * time.Millisecond): // a wait for nothing to happen: the negative check
	}
	return returned
}

// TestOutputFence: what the broker did not confirm when the connection was
// lost is not resent once its writer group's holding has ended (its fence
// closed: another replica may serve the group and resend the same data
// itself) — settled undelivered, so it is not acknowledged upstream; a
// message whose fence passed while it waited in the queue is not published
// either; a message of the next holding (an open fence) is.
func TestOutputFence(t *testing.T) {
	s := &scriptSink{guarantee: config.AtLeastOnce}
	o := newTestOutput(t, s, OutputOptions{Guarantee: config.AtLeastOnce, MaxInFlight: 5})
	o.Start()
	tr := newTracker()
	holding := fence.New(1, time.Now().Add(time.Hour))
	for i := range 8 {
		m := counterMessage(tr, i)
		m.Fence = holding
		o.Enqueue(m)
	}
	testutil.WaitFor(t, 10*time.Second, "5 in flight", func() bool { return s.npending() == 5 })
	holding.Close() // the group was halted while the broker was away
	s.mu.Lock()
	s.notConnected = 1
	s.mu.Unlock()
	s.confirm(func(int) error { return ErrNotConnected })
	next := counterMessage(tr, 8)
	next.Fence = fence.New(2, time.Now().Add(time.Hour))
	o.Enqueue(next)
	testutil.WaitFor(t, 10*time.Second, "the fenced ones settled, the next published", func() bool { return tr.settled() == 8 && s.npending() == 1 })
	if got := s.publishedCopy(); !slices.Equal(got, []int{0, 1, 2, 3, 4, 8}) {
		t.Errorf("published %v, want 0..4 once, then 8 (the next holding's)", got)
	}
	s.confirm(func(int) error { return nil })
	testutil.WaitFor(t, 10*time.Second, "all settled", func() bool { return tr.settled() == 9 })
	if err := closeOutput(t, o, time.Second); err != nil {
		t.Fatal(err)
	}
	tr.check(t, 9, func(tok uint64) bool { return tok == 8 })
	if st := o.Stats(); st.Fenced != 8 || st.Undelivered != 8 {
		t.Errorf("fenced %d, undelivered %d; want 8 and 8", st.Fenced, st.Undelivered)
	}
}
