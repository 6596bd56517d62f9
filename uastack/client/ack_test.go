package client

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/ua"
)

// Unit tests of the delivery contract against fakePubServer: manual
// acknowledgement and MaxUnacked, gap fills off the dispatch loop, the drain
// of a closing session, resent values after a recovery.

// doneLog records OnMessageDone calls.
type doneLog struct {
	mu   sync.Mutex
	seqs []uint32
}

func (d *doneLog) on(_ *Subscription, seq uint32) {
	d.mu.Lock()
	d.seqs = append(d.seqs, seq)
	d.mu.Unlock()
}

func (d *doneLog) list() []uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.seqs)
}

// manualSub makes an AckManual subscription on c with one item (handle 1).
func manualSub(t *testing.T, c *Client, maxUnacked int) (*Subscription, *recorder, *doneLog) {
	t.Helper()
	rec := newRecorder()
	var done doneLog
	cfg := rec.config()
	cfg.AckMode, cfg.MaxUnacked, cfg.OnMessageDone = AckManual, maxUnacked, done.on
	sub, err := c.CreateSubscription(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.CreateMonitoredItems(context.Background(), []ItemRequest{{NodeID: mustNode("ns=1;s=A")}}, nil); err != nil {
		t.Fatal(err)
	}
	return sub, rec, &done
}

// outstanding returns the Publish requests waiting at the fake.
func (f *fakePubServer) outstanding() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue)
}

func TestAckManual(t *testing.T) {
	f := newFakePubServer(t)
	c := f.client()
	t.Cleanup(func() { c.closed.Store(true); f.Close() })
	sub, rec, done := manualSub(t, c, 3)
	p := c.subscriptions()
	id := sub.ID()

	for seq := uint32(1); seq <= 3; seq++ {
		f.answer(id, seq, []uint32{seq}, []float64{float64(seq)}, nil)
		rec.wait(t, seq)
	}
	syncLoop(t, p)
	if got := done.list(); !slices.Equal(got, []uint32{1, 2, 3}) {
		t.Fatalf("OnMessageDone %v", got)
	}
	if n := sub.Unacked(); n != 3 {
		t.Fatalf("Unacked %d, want 3", n)
	}
	// Held: no acknowledgement was sent, no Publish request is outstanding.
	if got := f.ackedSeqs(id); len(got) != 0 {
		t.Fatalf("acknowledged %v before Ack", got)
	}
	if n := f.outstanding(); n != 0 {
		t.Fatalf("%d Publish requests outstanding for a held subscription", n)
	}
	// Held is not silent, however long it lasts.
	if s := p.silent(time.Now().Add(time.Hour)); len(s) != 0 {
		t.Fatalf("held subscription reported silent")
	}
	// Ack frees room: a Publish request goes out at once, carrying it.
	if err := sub.Ack(2); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "a Publish request after Ack", func() bool { return f.outstanding() > 0 })
	if got := f.ackedSeqs(id); !slices.Equal(got, []uint32{2}) {
		t.Fatalf("acknowledged %v, want [2]", got)
	}
	if err := sub.Ack(2); !errors.Is(err, ErrUnknownSequence) {
		t.Fatalf("second Ack(2): %v", err)
	}
	if err := sub.Ack(99); !errors.Is(err, ErrUnknownSequence) {
		t.Fatalf("Ack(99): %v", err)
	}
	// A duplicate of a message still waiting for Ack is not acknowledged
	// (the server must keep it); one of an acknowledged message is.
	f.answer(id, 3, nil, []float64{3}, nil)
	syncLoop(t, p)
	f.answer(id, 2, nil, []float64{2}, nil)
	syncLoop(t, p)
	testutil.WaitFor(t, 5*time.Second, "a request with the duplicate's acknowledgement", func() bool { return len(f.ackedSeqs(id)) == 2 })
	if got := f.ackedSeqs(id); !slices.Equal(got, []uint32{2, 2}) {
		t.Fatalf("acknowledged %v, want [2 2]", got)
	}
	st := sub.Stats()
	if st.Unacked != 2 || st.BadAcks != 2 || st.Messages != 3 || st.Duplicates != 2 {
		t.Fatalf("stats %+v", st)
	}
	// The next message; then everything acknowledged, in any order.
	f.answer(id, 4, nil, []float64{4}, nil)
	rec.wait(t, 4)
	for _, seq := range []uint32{4, 1, 3} {
		if err := sub.Ack(seq); err != nil {
			t.Fatalf("Ack(%d): %v", seq, err)
		}
	}
	// Acknowledgements ride on Publish requests: with every request at the
	// server, the last ones go out once a response (here a keep-alive) comes.
	testutil.WaitFor(t, 5*time.Second, "room again", func() bool { return sub.Unacked() == 0 })
	syncLoop(t, p)
	f.answer(id, 5, nil, nil, nil)
	testutil.WaitFor(t, 5*time.Second, "all acknowledgements sent", func() bool {
		got := f.ackedSeqs(id)
		slices.Sort(got)
		return slices.Equal(got, []uint32{1, 2, 2, 3, 4})
	})
	if n := sub.Unacked(); n != 0 {
		t.Errorf("Unacked %d", n)
	}

	// AckOnReturn subscriptions refuse Ack.
	auto, err := c.CreateSubscription(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := auto.Ack(1); !errors.Is(err, ErrNotManualAck) {
		t.Errorf("Ack on AckOnReturn: %v", err)
	}
}

// TestAckManualDeferred: a held subscription's message that arrives anyway
// (on a request meant for another subscription of the session) is neither
// delivered nor acknowledged; once Ack makes room it is republished and
// delivered, in order.
func TestAckManualDeferred(t *testing.T) {
	f := newFakePubServer(t)
	c := f.client()
	t.Cleanup(func() { c.closed.Store(true); f.Close() })
	sub, rec, done := manualSub(t, c, 1)
	other, err := c.CreateSubscription(context.Background(), nil) // keeps requests going
	if err != nil {
		t.Fatal(err)
	}
	p := c.subscriptions()
	id := sub.ID()
	f.answer(id, 1, nil, []float64{1}, nil)
	rec.wait(t, 1)
	f.answer(id, 2, []uint32{1, 2}, []float64{2}, nil) // held: left at the server
	f.answer(id, 3, []uint32{1, 2, 3}, []float64{3}, nil)
	f.answer(other.ID(), 1, nil, nil, nil)
	syncLoop(t, p)
	if got := rec.delivered(); !slices.Equal(got, []uint32{1}) {
		t.Fatalf("delivered %v while held", got)
	}
	if got := f.ackedSeqs(id); len(got) != 0 {
		t.Fatalf("acknowledged %v", got)
	}
	if err := sub.Ack(1); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, 2)
	if got := rec.delivered(); !slices.Equal(got, []uint32{1, 2}) {
		t.Fatalf("delivered %v", got)
	}
	if err := sub.Ack(2); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, 3)
	syncLoop(t, p) // OnMessageDone follows the handler on the dispatch goroutine
	if got := done.list(); !slices.Equal(got, []uint32{1, 2, 3}) {
		t.Fatalf("OnMessageDone %v", got)
	}
	f.mu.Lock()
	rep := slices.Clone(f.republish)
	f.mu.Unlock()
	if !slices.Equal(rep, []uint32{2, 3}) {
		t.Fatalf("republished %v", rep)
	}
	if st := sub.Stats(); st.Lost != 0 || st.Republished != 2 || st.Unacked != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestAckAllocs: under AckManual, a message goes from the channel to the
// handler and its Ack into the next request without allocating, and Ack itself
// allocates nothing.
func TestAckAllocs(t *testing.T) {
	if raceEnabled {
		t.Log("race detector on: allocation count not checked")
	}
	f := newFakePubServer(t)
	f.noRetain = true
	c := f.client()
	t.Cleanup(func() { c.closed.Store(true); f.Close() })
	got := make(chan uint32, 1)
	var sub *Subscription
	sub, err := c.CreateSubscription(context.Background(), &SubscriptionConfig{
		AckMode: AckManual, MaxUnacked: 4,
		OnDataChange:  func(*Subscription, uint32, []ua.MonitoredItemNotification) {},
		OnMessageDone: func(_ *Subscription, seq uint32) { got <- seq },
	})
	if err != nil {
		t.Fatal(err)
	}
	values := make([]float64, 100)
	seq := uint32(0)
	step := func() {
		seq++
		f.answer(sub.ID(), seq, nil, values, nil)
		if err := sub.Ack(<-got); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 {
		step()
	}
	allocs := testing.AllocsPerRun(200, step)
	t.Logf("%.3f allocations per message and Ack", allocs)
	if !raceEnabled && allocs != 0 {
		t.Errorf("%.2f allocations per message and Ack, want 0", allocs)
	}
	ackAllocs := testing.AllocsPerRun(100, func() { _ = sub.Ack(12345) })
	if !raceEnabled && ackAllocs != 0 {
		t.Errorf("Ack allocates %.2f", ackAllocs)
	}
}

// TestGapFillOffLoop: while one subscription's gap is being filled (its
// Republish hangs at the server), the others are served; the subscription's
// own later messages wait behind the gap and come in order; at most two gap
// fills talk to the server at once; close ends a hanging one.
func TestGapFillOffLoop(t *testing.T) {
	f := newFakePubServer(t)
	gate := make(chan struct{})
	f.repGate = gate
	c := f.client()
	t.Cleanup(func() { c.closed.Store(true); f.Close() })
	subs := make([]*Subscription, 4)
	recs := make([]*recorder, 4)
	for i := range subs {
		recs[i] = newRecorder()
		s, err := c.CreateSubscription(context.Background(), recs[i].config())
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = s
	}
	p := c.subscriptions()
	// Subscriptions 0, 1, 2 get a gap (2 missing, 3 arrives).
	for i := range 3 {
		f.answer(subs[i].ID(), 1, nil, []float64{1}, nil)
		recs[i].wait(t, 1)
		f.mu.Lock()
		f.retained[2] = []float64{2}
		f.keepAcked = true
		f.mu.Unlock()
		f.answer(subs[i].ID(), 3, []uint32{2, 3}, []float64{3}, nil)
	}
	testutil.WaitFor(t, 5*time.Second, "two Republish calls at the server", func() bool { return f.repNow.Load() == 2 })
	// Subscription 3 is served meanwhile, and nobody counts as busy.
	for seq := uint32(1); seq <= 3; seq++ {
		f.answer(subs[3].ID(), seq, nil, []float64{float64(seq)}, nil)
		recs[3].wait(t, seq)
	}
	// Subscription 0's next message waits behind its gap.
	f.answer(subs[0].ID(), 4, []uint32{2, 3, 4}, []float64{4}, nil)
	syncLoop(t, p)
	if got := recs[0].delivered(); !slices.Equal(got, []uint32{1}) {
		t.Fatalf("subscription 0 delivered %v during its gap fill", got)
	}
	if m := f.repMax.Load(); m != 2 {
		t.Fatalf("%d Republish calls at once, want 2", m)
	}
	close(gate) // the server answers again
	for i := range 3 {
		recs[i].wait(t, 3)
	}
	recs[0].wait(t, 4)
	if got := recs[0].delivered(); !slices.Equal(got, []uint32{1, 2, 3, 4}) {
		t.Fatalf("subscription 0 delivered %v", got)
	}
	if m := f.repMax.Load(); m > 2 {
		t.Fatalf("%d Republish calls at once, want ≤ 2", m)
	}

	// A gap fill that hangs ends with the publisher.
	f.mu.Lock()
	f.repGate = make(chan struct{})
	f.mu.Unlock()
	f.answer(subs[1].ID(), 6, []uint32{5, 6}, []float64{6}, nil)
	testutil.WaitFor(t, 5*time.Second, "a hanging Republish", func() bool { return f.repNow.Load() == 1 })
	closed := make(chan struct{})
	go func() { p.close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("close did not end the gap fill")
	}
	if n := f.repNow.Load(); n != 0 {
		t.Errorf("%d Republish calls still running after close", n)
	}
}

// TestQuiesce: a closing session sends no new Publish requests, waits for the
// manual acknowledgements until its context ends, and sends them in a last
// request.
func TestQuiesce(t *testing.T) {
	f := newFakePubServer(t)
	c := f.client()
	t.Cleanup(func() { c.closed.Store(true); f.Close() })
	sub, rec, _ := manualSub(t, c, 8)
	p := c.subscriptions()
	id := sub.ID()
	f.answer(id, 1, nil, []float64{1}, nil)
	f.answer(id, 2, nil, []float64{2}, nil)
	rec.wait(t, 2)
	syncLoop(t, p)
	before := f.outstanding()
	quiesced := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.quiesce(ctx)
		close(quiesced)
	}()
	testutil.WaitFor(t, 5*time.Second, "draining", func() bool {
		var d bool
		p.post(func() { d = p.draining })
		return d
	})
	// A response still comes and is delivered; no request replaces it.
	f.answer(id, 3, nil, []float64{3}, nil)
	rec.wait(t, 3)
	syncLoop(t, p)
	if n := f.outstanding(); n != before-1 {
		t.Fatalf("%d requests outstanding, had %d before one was answered: a new one went out", n, before)
	}
	select {
	case <-quiesced:
		t.Fatal("quiesce returned with messages not acknowledged")
	default:
	}
	for seq := uint32(1); seq <= 3; seq++ {
		if err := sub.Ack(seq); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-quiesced:
	case <-time.After(5 * time.Second):
		t.Fatal("quiesce did not return once everything was acknowledged")
	}
	if got := f.ackedSeqs(id); !slices.Equal(got, []uint32{1, 2, 3}) {
		t.Fatalf("acknowledged %v in the last request, want [1 2 3]", got)
	}

	// Nobody acknowledges: quiesce gives up at the deadline.
	f2 := newFakePubServer(t)
	c2 := f2.client()
	t.Cleanup(func() { c2.closed.Store(true); f2.Close() })
	sub2, rec2, _ := manualSub(t, c2, 8)
	f2.answer(sub2.ID(), 1, nil, []float64{1}, nil)
	rec2.wait(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	c2.subscriptions().quiesce(ctx)
	if d := time.Since(start); d < 150*time.Millisecond || d > 3*time.Second {
		t.Errorf("quiesce with nothing acknowledged took %v, want the 200 ms deadline", d)
	}
}

// TestDropResent: after a recovery, a value that repeats the last one
// delivered for its item (value, status, source timestamp) is dropped once,
// within the item's window; a republished message does not end the window, a
// fresh one does.
func TestDropResent(t *testing.T) {
	f := newFakePubServer(t)
	f.ts = ua.DateTime(133_000_000_000_000_000)
	c := f.client()
	t.Cleanup(func() { c.closed.Store(true); f.Close() })
	rec := newRecorder()
	var done doneLog
	cfg := rec.config()
	cfg.OnMessageDone = done.on
	sub, err := c.CreateSubscription(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.CreateMonitoredItems(context.Background(), []ItemRequest{{NodeID: mustNode("ns=1;s=A")}, {NodeID: mustNode("ns=1;s=B")}}, nil); err != nil {
		t.Fatal(err)
	}
	p := c.subscriptions()
	id := sub.ID()
	vals := func() []float64 {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return slices.Clone(rec.vals)
	}
	f.answer(id, 1, nil, []float64{10, 20}, nil)
	rec.wait(t, 1)
	// No recovery: the same values again are delivered.
	f.answer(id, 2, nil, []float64{10, 20}, nil)
	rec.wait(t, 2)
	p.post(sub.armResend)
	// Message 4 arrives with 3 missing; 3 is republished (item 1 changed to
	// 11) and 4 resends both last values: both dropped.
	f.mu.Lock()
	f.retained[3] = []float64{11}
	f.mu.Unlock()
	f.answer(id, 4, []uint32{3, 4}, []float64{11, 20}, nil)
	rec.wait(t, 3)
	testutil.WaitFor(t, 5*time.Second, "message 4 done", func() bool { return slices.Contains(done.list(), 4) })
	if got := vals(); !slices.Equal(got, []float64{10, 20, 10, 20, 11}) {
		t.Fatalf("values %v", got)
	}
	if got := rec.delivered(); !slices.Equal(got, []uint32{1, 2, 3}) {
		t.Fatalf("handler saw %v; message 4 held only resent values", got)
	}
	if st := sub.Stats(); st.Suppressed != 2 {
		t.Fatalf("stats %+v", st)
	}
	// 3 and 4 were republished (4 waited at the server behind the gap), so
	// the windows are open still: a fresh message resending them is dropped
	// too, and closes them.
	waitGapIdle(t, p, sub)
	f.answer(id, 5, nil, []float64{11, 20}, nil)
	testutil.WaitFor(t, 5*time.Second, "message 5 done", func() bool { return slices.Contains(done.list(), 5) })
	if st := sub.Stats(); st.Suppressed != 4 {
		t.Fatalf("stats %+v", st)
	}
	f.answer(id, 6, nil, []float64{11, 20}, nil)
	rec.wait(t, 6)
	// A new source timestamp is a new sample.
	p.post(sub.armResend)
	f.mu.Lock()
	f.ts++
	f.mu.Unlock()
	f.answer(id, 7, nil, []float64{11, 20}, nil)
	rec.wait(t, 7)
	// Without source timestamps nothing is dropped.
	f.mu.Lock()
	f.ts = 0
	f.mu.Unlock()
	f.answer(id, 8, nil, []float64{1, 2}, nil)
	rec.wait(t, 8)
	p.post(sub.armResend)
	f.answer(id, 9, nil, []float64{1, 2}, nil)
	rec.wait(t, 9)
	// OnMessageDone follows the handler's return: wait for it, not for the
	// handler.
	testutil.WaitFor(t, 5*time.Second, "message 9 done", func() bool { return slices.Contains(done.list(), 9) })
	if st := sub.Stats(); st.Suppressed != 4 {
		t.Fatalf("stats %+v", st)
	}
	if got := done.list(); !slices.Equal(got, []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("OnMessageDone %v", got)
	}
}

func TestFingerprint(t *testing.T) {
	fp := newFingerprinter()
	vs := []ua.Variant{
		ua.MustVariant(1.5), ua.MustVariant(int32(3)), ua.MustVariant(uint32(3)), ua.MustVariant("a"), ua.MustVariant("b"),
		ua.MustVariant([]float64{1, 2}), ua.MustVariant([]float64{1, 3}), ua.MustVariant([]byte{1}), ua.MustVariant(ua.NewStringNodeID(1, "x")),
	}
	seen := map[[2]uint64]int{}
	for i := range vs {
		k := [2]uint64{fp.of(&vs[i]), uint64(vs[i].Type())}
		if j, ok := seen[k]; ok {
			t.Errorf("values %d and %d have one fingerprint", j, i)
		}
		seen[k] = i
		again := vs[i]
		if fp.of(&again) != k[0] {
			t.Errorf("value %d: fingerprint not stable", i)
		}
	}
}
