package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// Unit tests of the publish engine against fakePubServer, an in-memory channel
// that answers Publish requests when the test says so, with the sequence
// numbers, gaps and duplicates the test wants. Responses are encoded and
// decoded like real ones, so the pooled notification objects are exercised.

type fakePub struct {
	resp ua.Structure
	done func(ua.Structure, error)
}

type fakePubServer struct {
	t  testing.TB
	mu sync.Mutex

	queue     []fakePub
	acks      []ua.SubscriptionAcknowledgement
	retained  map[uint32][]float64 // seq -> values, for Republish: what was sent and not acknowledged
	keepAcked bool                 // keep acknowledged messages for Republish (numbers used twice)
	noRetain  bool                 // keep nothing for Republish (allocation tests)
	repGate   chan struct{}        // when set, a Republish waits for a receive from it (or its context)
	repNow    atomic.Int32         // Republish calls under way
	repMax    atomic.Int32         // the most at once
	ts        ua.DateTime          // source timestamp of the values built
	republish []uint32
	nextSub   uint32
	nextItem  uint32
	refuse    map[string]ua.StatusCode // node id text -> CreateMonitoredItems result
	refused   int                      // items refused so far

	msg  ua.PublishResponse // built and encoded for every response
	dcn  ua.DataChangeNotification
	enc  *ua.Encoder
	dec  ua.Decoder
	done chan struct{}
	err  error
}

func newFakePubServer(t testing.TB) *fakePubServer {
	return &fakePubServer{
		t: t, retained: map[uint32][]float64{}, nextSub: 1, nextItem: 1,
		refuse: map[string]ua.StatusCode{}, done: make(chan struct{}),
		enc: ua.NewEncoder(make([]byte, 0, 64<<10)), queue: make([]fakePub, 0, 32),
		acks: make([]ua.SubscriptionAcknowledgement, 0, 1024),
	}
}

// client returns a Client on f, as Dial would make it.
func (f *fakePubServer) client() *Client {
	cfg, err := (&Config{Logger: quietLog, RequestTimeout: 2 * time.Second}).withDefaults()
	if err != nil {
		f.t.Fatal(err)
	}
	return &Client{cfg: cfg, url: "opc.tcp://fake", log: quietLog, conn: f,
		session: &sessionState{authToken: ua.NewNumericNodeID(0, 42)}}
}

func (f *fakePubServer) SendRequest(ctx context.Context, req, resp ua.Structure) (ua.Structure, error) {
	if _, ok := req.(*ua.RepublishRequest); ok {
		n := f.repNow.Add(1)
		defer f.repNow.Add(-1)
		for m := f.repMax.Load(); n > m && !f.repMax.CompareAndSwap(m, n); m = f.repMax.Load() {
		}
		f.mu.Lock()
		gate := f.repGate
		f.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r := req.(type) {
	case *ua.CreateSubscriptionRequest:
		out := resp.(*ua.CreateSubscriptionResponse)
		*out = ua.CreateSubscriptionResponse{SubscriptionID: f.nextSub, RevisedPublishingInterval: r.RequestedPublishingInterval,
			RevisedMaxKeepAliveCount: r.RequestedMaxKeepAliveCount, RevisedLifetimeCount: r.RequestedLifetimeCount}
		f.nextSub++
		return out, nil
	case *ua.CreateMonitoredItemsRequest:
		out := resp.(*ua.CreateMonitoredItemsResponse)
		*out = ua.CreateMonitoredItemsResponse{}
		for _, it := range r.ItemsToCreate {
			if st, ok := f.refuse[it.ItemToMonitor.NodeID.String()]; ok {
				out.Results = append(out.Results, ua.MonitoredItemCreateResult{StatusCode: st})
				f.refused++
				continue
			}
			out.Results = append(out.Results, ua.MonitoredItemCreateResult{MonitoredItemID: f.nextItem,
				RevisedSamplingInterval: it.RequestedParameters.SamplingInterval, RevisedQueueSize: it.RequestedParameters.QueueSize})
			f.nextItem++
		}
		return out, nil
	case *ua.DeleteSubscriptionsRequest:
		out := resp.(*ua.DeleteSubscriptionsResponse)
		*out = ua.DeleteSubscriptionsResponse{Results: make([]ua.StatusCode, len(r.SubscriptionIDs))}
		return out, nil
	case *ua.RepublishRequest:
		f.republish = append(f.republish, r.RetransmitSequenceNumber)
		vals, ok := f.retained[r.RetransmitSequenceNumber]
		if !ok {
			return nil, &uasc.ServiceFaultError{Status: ua.StatusBadMessageNotAvailable}
		}
		f.build(r.SubscriptionID, r.RetransmitSequenceNumber, nil, vals)
		rr := resp.(*ua.RepublishResponse)
		f.enc.Reset(f.enc.Bytes())
		f.msg.NotificationMessage.Encode(f.enc)
		f.dec.Reset(f.enc.Bytes(), nil)
		rr.NotificationMessage.Decode(&f.dec)
		return rr, f.dec.Err()
	}
	return nil, fmt.Errorf("fake: %T not served", req)
}

func (f *fakePubServer) SendRequestAsync(req, resp ua.Structure, _ time.Duration, done func(ua.Structure, error)) error {
	r, ok := req.(*ua.PublishRequest)
	if !ok {
		return fmt.Errorf("fake: async %T", req)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.acks = append(f.acks, r.SubscriptionAcknowledgements...)
	if !f.keepAcked {
		for _, a := range r.SubscriptionAcknowledgements {
			delete(f.retained, a.SequenceNumber)
		}
	}
	f.queue = append(f.queue, fakePub{resp, done})
	return nil
}

func (f *fakePubServer) Close() error {
	f.fail(uasc.ErrChannelClosed)
	return nil
}

func (f *fakePubServer) fail(err error) {
	f.mu.Lock()
	if f.err != nil {
		f.mu.Unlock()
		return
	}
	f.err = err
	q := f.queue
	f.queue = nil
	f.mu.Unlock()
	for _, p := range q {
		p.done(nil, err)
	}
	close(f.done)
}

func (f *fakePubServer) Done() <-chan struct{} { return f.done }
func (f *fakePubServer) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// build fills f.msg with one message; values nil makes a keep-alive.
func (f *fakePubServer) build(sub, seq uint32, avail []uint32, values []float64) {
	f.msg.SubscriptionID = sub
	f.msg.AvailableSequenceNumbers = append(f.msg.AvailableSequenceNumbers[:0], avail...)
	f.msg.NotificationMessage.SequenceNumber = seq
	f.msg.NotificationMessage.NotificationData = f.msg.NotificationMessage.NotificationData[:0]
	if values == nil {
		return
	}
	f.dcn.MonitoredItems = f.dcn.MonitoredItems[:0]
	for i, v := range values {
		var n ua.MonitoredItemNotification
		n.ClientHandle = uint32(i + 1)
		n.Value.Value.SetDouble(v)
		n.Value.SourceTimestamp = f.ts
		f.dcn.MonitoredItems = append(f.dcn.MonitoredItems, n)
	}
	f.msg.NotificationMessage.NotificationData = append(f.msg.NotificationMessage.NotificationData,
		ua.ExtensionObject{Encoding: ua.ExtensionObjectBinary, TypeID: ua.NewExpandedNodeID(ua.NewNumericNodeID(0, ua.ID_DataChangeNotification_Encoding_DefaultBinary)), Value: &f.dcn})
}

// waitQueued waits until a Publish request is outstanding.
func (f *fakePubServer) waitQueued() {
	f.t.Helper()
	testutil.WaitFor(f.t, 5*time.Second, "fake: a Publish request outstanding", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.queue) > 0
	})
}

// answer answers the oldest outstanding Publish request with one message
// (values nil: a keep-alive), or with err.
func (f *fakePubServer) answer(sub, seq uint32, avail []uint32, values []float64, err error) {
	f.waitQueued()
	f.mu.Lock()
	p := f.queue[0]
	copy(f.queue, f.queue[1:])
	f.queue = f.queue[:len(f.queue)-1]
	if err != nil {
		f.mu.Unlock()
		p.done(nil, err)
		return
	}
	f.build(sub, seq, avail, values)
	if values != nil && !f.noRetain {
		f.retained[seq] = slices.Clone(values)
	}
	f.enc.Reset(f.enc.Bytes())
	f.msg.Encode(f.enc)
	f.dec.Reset(f.enc.Bytes(), nil)
	resp := p.resp.(*ua.PublishResponse)
	resp.Decode(&f.dec)
	if f.dec.Err() != nil {
		f.t.Errorf("fake: decode: %v", f.dec.Err())
	}
	f.mu.Unlock()
	p.done(resp, nil)
}

func (f *fakePubServer) ackedSeqs(sub uint32) []uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []uint32
	for _, a := range f.acks {
		if a.SubscriptionID == sub {
			out = append(out, a.SequenceNumber)
		}
	}
	return out
}

// recorder collects what a subscription delivers.
type recorder struct {
	mu     sync.Mutex
	seqs   []uint32
	vals   []float64
	gaps   [][2]uint32
	status []ua.StatusCode
	got    chan uint32
}

func newRecorder() *recorder { return &recorder{got: make(chan uint32, 1024)} }

func (r *recorder) config() *SubscriptionConfig {
	return &SubscriptionConfig{
		PublishingInterval: 100 * time.Millisecond, KeepAliveCount: 3,
		OnDataChange: func(_ *Subscription, seq uint32, items []ua.MonitoredItemNotification) {
			r.mu.Lock()
			r.seqs = append(r.seqs, seq)
			for i := range items {
				r.vals = append(r.vals, items[i].Value.Value.Double())
			}
			r.mu.Unlock()
			r.got <- seq
		},
		OnGap: func(_ *Subscription, from, to uint32) {
			r.mu.Lock()
			r.gaps = append(r.gaps, [2]uint32{from, to})
			r.mu.Unlock()
		},
		OnStatusChange: func(_ *Subscription, st ua.StatusCode) {
			r.mu.Lock()
			r.status = append(r.status, st)
			r.mu.Unlock()
		},
	}
}

func (r *recorder) wait(t testing.TB, seq uint32) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case s := <-r.got:
			if s == seq {
				return
			}
		case <-timeout:
			t.Fatalf("sequence number %d not delivered; got %v", seq, r.delivered())
		}
	}
}

func (r *recorder) delivered() []uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seqs)
}

func (r *recorder) gapList() [][2]uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.gaps)
}

// sync waits until the dispatch loop has handled everything before.
func syncLoop(t testing.TB, p *publisher) {
	t.Helper()
	if !p.post(func() {}) {
		t.Fatal("dispatch loop ended")
	}
}

// waitGapIdle waits until no gap fill runs for sub.
func waitGapIdle(t testing.TB, p *publisher, sub *Subscription) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, "the gap fill to end", func() bool {
		idle := false
		p.post(func() { idle = sub.syncSeq().gap == nil })
		return idle
	})
}

func newFakeSub(t *testing.T) (*fakePubServer, *Client, *Subscription, *recorder) {
	f := newFakePubServer(t)
	c := f.client()
	t.Cleanup(func() { c.closed.Store(true); f.Close() })
	rec := newRecorder()
	sub, err := c.CreateSubscription(context.Background(), rec.config())
	if err != nil {
		t.Fatal(err)
	}
	return f, c, sub, rec
}

func TestPublishSequence(t *testing.T) {
	f, c, sub, rec := newFakeSub(t)
	id := sub.ID()
	p := c.subscriptions()

	// In order; acknowledgements follow in the next requests.
	for seq := uint32(1); seq <= 3; seq++ {
		f.answer(id, seq, []uint32{seq}, []float64{float64(seq)}, nil)
	}
	rec.wait(t, 3)
	f.waitQueued()
	syncLoop(t, p)
	f.answer(id, 4, nil, nil, nil) // a keep-alive with the next number: no gap
	syncLoop(t, p)
	testutil.WaitFor(t, 5*time.Second, "acknowledgements", func() bool { return len(f.ackedSeqs(id)) >= 3 })
	if got := f.ackedSeqs(id); !slices.Equal(got[:3], []uint32{1, 2, 3}) {
		t.Fatalf("acks %v", got)
	}

	// A gap: 4 and 5 missing, 4 still available, 5 not.
	f.mu.Lock()
	f.retained[4] = []float64{4}
	f.mu.Unlock()
	f.answer(id, 6, []uint32{4, 6}, []float64{6}, nil)
	rec.wait(t, 6)
	if got := rec.delivered(); !slices.Equal(got, []uint32{1, 2, 3, 4, 6}) {
		t.Fatalf("delivered %v", got)
	}
	if g := rec.gapList(); !slices.Equal(g, [][2]uint32{{5, 5}}) {
		t.Fatalf("gaps %v", g)
	}
	f.mu.Lock()
	rep := slices.Clone(f.republish)
	f.mu.Unlock()
	// 6 itself is fetched again too: it waited at the server behind the gap.
	if !slices.Equal(rep, []uint32{4, 6}) {
		t.Fatalf("republished %v, want [4 6] (5 was not available)", rep)
	}

	// Duplicates and old messages are dropped (and acknowledged).
	f.answer(id, 6, []uint32{6}, []float64{6}, nil)
	f.answer(id, 2, nil, []float64{2}, nil)
	syncLoop(t, p)
	if st := sub.Stats(); st.Duplicates != 2 || st.Republished != 2 || st.Lost != 1 {
		t.Fatalf("stats %+v", st)
	}

	// A keep-alive announcing 9: 7 and 8 were sent and lost on the way.
	f.mu.Lock()
	f.retained[7] = []float64{7}
	f.retained[8] = []float64{8}
	f.mu.Unlock()
	f.answer(id, 9, []uint32{7, 8}, nil, nil)
	rec.wait(t, 8)
	if got := rec.delivered(); !slices.Equal(got, []uint32{1, 2, 3, 4, 6, 7, 8}) {
		t.Fatalf("delivered %v", got)
	}

	// A gap none of which is available any more is reported in one piece.
	f.answer(id, 20, []uint32{20}, []float64{20}, nil)
	rec.wait(t, 20)
	if g := rec.gapList(); !slices.Equal(g, [][2]uint32{{5, 5}, {9, 19}}) {
		t.Fatalf("gaps %v", g)
	}
}

func TestPublishWrapAround(t *testing.T) {
	f, c, sub, rec := newFakeSub(t)
	f.mu.Lock()
	f.keepAcked = true // numbers are used twice here
	f.mu.Unlock()
	id := sub.ID()
	p := c.subscriptions()
	p.post(func() { sub.syncSeq().last = 0xFFFFFFFD })
	f.answer(id, 0xFFFFFFFE, nil, []float64{1}, nil)
	f.answer(id, 0xFFFFFFFF, nil, []float64{2}, nil)
	f.answer(id, 1, nil, []float64{3}, nil) // 0 is skipped
	rec.wait(t, 1)
	f.answer(id, 0xFFFFFFFF, nil, []float64{2}, nil) // old, across the wrap
	f.mu.Lock()
	f.retained[2] = []float64{4}
	f.mu.Unlock()
	f.answer(id, 4, []uint32{2, 4}, []float64{5}, nil) // 2 republished, 3 lost
	rec.wait(t, 4)
	if got := rec.delivered(); !slices.Equal(got, []uint32{0xFFFFFFFE, 0xFFFFFFFF, 1, 2, 4}) {
		t.Fatalf("delivered %v", got)
	}
	if g := rec.gapList(); !slices.Equal(g, [][2]uint32{{3, 3}}) {
		t.Fatalf("gaps %v", g)
	}
	// A gap across the wrap (once the last gap fill has ended).
	waitGapIdle(t, p, sub)
	p.post(func() { sub.syncSeq().last = 0xFFFFFFFE })
	f.answer(id, 2, nil, []float64{6}, nil)
	rec.wait(t, 2)
	if g := rec.gapList(); !slices.Equal(g[1:], [][2]uint32{{0xFFFFFFFF, 1}}) {
		t.Fatalf("gaps %v", g)
	}
	if st := sub.Stats(); st.Duplicates != 1 || st.Lost != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSeqArithmetic(t *testing.T) {
	for _, tc := range []struct {
		a, b  uint32
		after bool
	}{
		{2, 1, true}, {1, 2, false}, {1, 0xFFFFFFFF, true}, {0xFFFFFFFF, 1, false},
		{5, 5, false}, {0x80000001, 1, false}, {0x80000000, 1, true},
	} {
		if got := seqAfter(tc.a, tc.b); got != tc.after {
			t.Errorf("seqAfter(%#x, %#x) = %v", tc.a, tc.b, got)
		}
	}
	if seqNext(0xFFFFFFFF) != 1 || seqPrev(1) != 0xFFFFFFFF || seqDist(0xFFFFFFFF, 1) != 1 || seqDist(3, 7) != 4 {
		t.Error("next/prev/dist across the wrap")
	}
}

func TestPublishHandlerPanics(t *testing.T) {
	f := newFakePubServer(t)
	c := f.client()
	t.Cleanup(func() { c.closed.Store(true); f.Close() })
	var calls atomic.Int32
	got := make(chan struct{}, 10)
	sub, err := c.CreateSubscription(context.Background(), &SubscriptionConfig{
		OnDataChange: func(_ *Subscription, seq uint32, _ []ua.MonitoredItemNotification) {
			calls.Add(1)
			got <- struct{}{}
			if seq == 1 {
				panic("handler bug")
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	before := ua.DataChangeNotificationPool.Stats()
	f.answer(sub.ID(), 1, nil, []float64{1}, nil)
	f.answer(sub.ID(), 2, nil, []float64{2}, nil)
	<-got
	<-got
	syncLoop(t, c.subscriptions())
	if st := sub.Stats(); st.HandlerPanics != 1 || st.Messages != 2 {
		t.Fatalf("stats %+v", st)
	}
	after := ua.DataChangeNotificationPool.Stats()
	if puts := after.Puts - before.Puts; puts < 2 {
		t.Errorf("notifications released %d times, want 2 (also after the panic)", puts)
	}
	if got := f.ackedSeqs(sub.ID()); len(got) == 0 {
		f.waitQueued()
	}
}

func TestPublishFaults(t *testing.T) {
	f, c, sub, _ := newFakeSub(t)
	p := c.subscriptions()
	var faults []error
	var mu sync.Mutex
	p.onFault = func(_ *Client, _ *Subscription, err error) {
		mu.Lock()
		faults = append(faults, err)
		mu.Unlock()
	}
	// The server caps the outstanding requests.
	f.waitQueued()
	syncLoop(t, p)
	f.answer(0, 0, nil, nil, &uasc.ServiceFaultError{Status: ua.StatusBadTooManyPublishRequests})
	syncLoop(t, p)
	var limit int
	p.post(func() { limit = p.limit })
	if limit < 1 || limit >= p.max {
		t.Errorf("limit after BadTooManyPublishRequests: %d", limit)
	}
	// A timeout is no fault.
	f.answer(0, 0, nil, nil, fmt.Errorf("uasc: %w", uasc.ErrTimeout))
	syncLoop(t, p)
	// The session is gone: the engine stops and says so.
	f.answer(0, 0, nil, nil, &uasc.ServiceFaultError{Status: ua.StatusBadSessionIdInvalid})
	syncLoop(t, p)
	mu.Lock()
	n := len(faults)
	mu.Unlock()
	if n != 1 || !errors.Is(faults[0], ua.StatusBadSessionIdInvalid) {
		t.Fatalf("faults %v", faults)
	}
	p.mu.Lock()
	faulted := p.faulted
	p.mu.Unlock()
	if !faulted {
		t.Error("not faulted")
	}
	_ = sub
}

// TestPublishDispatchAllocs: in steady state, a Publish response goes from the
// channel's completion to the handler, is released, acknowledged and its
// request sent again without allocating.
func TestPublishDispatchAllocs(t *testing.T) {
	if raceEnabled {
		// The race detector allocates on its own account; the non-race run
		// checks the count.
		t.Log("race detector on: allocation count not checked")
	}
	f := newFakePubServer(t)
	f.noRetain = true
	c := f.client()
	t.Cleanup(func() { c.closed.Store(true); f.Close() })
	got := make(chan int, 1)
	var sum float64
	sub, err := c.CreateSubscription(context.Background(), &SubscriptionConfig{
		OnDataChange: func(_ *Subscription, _ uint32, items []ua.MonitoredItemNotification) {
			for i := range items {
				sum += items[i].Value.Value.Double()
			}
			got <- len(items)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	values := make([]float64, 100)
	seq := uint32(0)
	step := func() {
		seq++
		f.answer(sub.ID(), seq, nil, values, nil)
		<-got
	}
	for range 50 { // warm the pools and slices
		step()
	}
	allocs := testing.AllocsPerRun(200, step)
	t.Logf("%.3f allocations per message of 100 notifications", allocs)
	if !raceEnabled && allocs != 0 {
		t.Errorf("%.2f allocations per message, want 0", allocs)
	}
}

// TestItemRetry: an item the server refuses is reported and tried again every
// ItemRetryInterval; once the server accepts it, it is created, reported Good,
// and its siblings are left alone.
func TestItemRetry(t *testing.T) {
	f := newFakePubServer(t)
	c := f.client()
	t.Cleanup(func() { c.closed.Store(true); f.Close() })
	gone := mustNode("ns=1;s=Gone")
	f.refuse[gone.String()] = ua.StatusBadNodeIdUnknown
	reports := make(chan ua.StatusCode, 10)
	sub, err := c.CreateSubscription(context.Background(), &SubscriptionConfig{
		ItemRetryInterval: 100 * time.Millisecond,
		OnItemStatus: func(_ *Subscription, h uint32, st ua.StatusCode) {
			if h == 2 {
				reports <- st
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sub.CreateMonitoredItems(context.Background(), []ItemRequest{
		{NodeID: mustNode("ns=1;s=A")}, {NodeID: gone}, {NodeID: mustNode("ns=1;s=B")},
	}, nil)
	if err != nil || res.Created != 2 || res.Failed != 1 || res.FirstHandle != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if st := <-reports; st != ua.StatusBadNodeIdUnknown {
		t.Fatalf("report %v", st)
	}
	a, _ := sub.Item(1)
	// Retries go on while the server refuses; no report repeats.
	refused := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.refused
	}
	before := refused()
	testutil.WaitFor(t, 10*time.Second, "three retries refused", func() bool { return refused() >= before+3 })
	select {
	case st := <-reports:
		t.Fatalf("repeated report %v", st)
	default:
	}
	f.mu.Lock()
	delete(f.refuse, gone.String())
	f.mu.Unlock()
	select {
	case st := <-reports:
		if st != ua.StatusGood {
			t.Fatalf("report %v", st)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the item was not retried")
	}
	if info, _ := sub.Item(2); info.ID == 0 || info.Status != ua.StatusGood {
		t.Errorf("item %+v", info)
	}
	if again, _ := sub.Item(1); again.ID != a.ID {
		t.Errorf("sibling re-created: id %d, was %d", again.ID, a.ID)
	}
	if st := sub.Stats(); st.FailedItems != 0 || st.Items != 3 {
		t.Errorf("stats %+v", st)
	}
}
