package client

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// The delivery contract against real servers: manual acknowledgement as
// backpressure, the drain of Close(ctx), the pool's keys, namespace URIs
// resolved again after a restart (the simulation server), and values resent
// after a reactivation dropped (node-opcua).

// ackLog records what an AckManual subscription was given and acknowledges
// on demand.
type ackLog struct {
	counterLog
	mu   sync.Mutex
	done []uint32 // OnMessageDone order
}

func (l *ackLog) onDone(_ *Subscription, seq uint32) {
	l.mu.Lock()
	l.done = append(l.done, seq)
	l.mu.Unlock()
}

// ackAll acknowledges everything given so far.
func (l *ackLog) ackAll(t testing.TB, sub *Subscription) {
	l.mu.Lock()
	seqs := l.done
	l.done = nil
	l.mu.Unlock()
	for _, s := range seqs {
		if err := sub.Ack(s); err != nil {
			t.Errorf("Ack(%d): %v", s, err)
		}
	}
}

func (l *ackLog) config(maxUnacked int) *SubscriptionConfig {
	cfg := l.counterLog.config()
	cfg.AckMode, cfg.MaxUnacked, cfg.OnMessageDone = AckManual, maxUnacked, l.onDone
	return cfg
}

// startManualSim starts a managed session on srvURL with an AckManual
// subscription on the Counter.
func startManualSim(t *testing.T, srvURL string, l *ackLog, maxUnacked int) (*ManagedSession, *Subscription) {
	t.Helper()
	var slog stateLog
	m, err := NewManagedSession(srvURL, testManagedConfig(&slog))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	m.Start()
	ctx := ctxT(t)
	if _, err := m.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	l.handle = 1 // the first item's, set before the handler can run
	sub, err := m.CreateSubscription(ctx, l.config(maxUnacked))
	if err != nil {
		t.Fatal(err)
	}
	res, err := sub.CreateMonitoredItems(ctx, []ItemRequest{{NodeID: mustNode(server.NodeCounter)}}, nil)
	if err != nil || res.Created != 1 || res.FirstHandle != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	return m, sub
}

// TestManagedAckBackpressure: an AckManual subscription at MaxUnacked gets
// nothing more and no Publish requests, for far longer than its keep-alive
// window, without a recovery; the server keeps the data, and once
// acknowledged it all comes, nothing lost.
func TestManagedAckBackpressure(t *testing.T) {
	srv := startSim(t, simOptions{})
	var l ackLog
	m, sub := startManualSim(t, srv.URL(), &l, 4)
	testutil.WaitFor(t, 10*time.Second, "four messages", func() bool { return sub.Unacked() == 4 })
	n := l.count()
	// Held for five keep-alive windows (400 ms + 300 ms grace each).
	if !testutil.Consistently(5*700*time.Millisecond, func() bool { return sub.Unacked() == 4 }) {
		t.Fatalf("Unacked %d while held", sub.Unacked())
	}
	if got := l.count(); got != n {
		t.Fatalf("%d values delivered while held, had %d", got, n)
	}
	if st := srv.Stats(); st.ParkedPublishRequests != 0 {
		t.Errorf("%d Publish requests parked at the server for a held subscription", st.ParkedPublishRequests)
	}
	if st := m.Stats(); st.Faults != 0 || m.State() != StateConnected {
		t.Fatalf("held subscription started a recovery: %+v %v", st, m.State())
	}
	before := l.last()
	testutil.WaitFor(t, 10*time.Second, "values after acknowledging", func() bool {
		l.ackAll(t, sub)
		return l.last() >= before+50
	})
	t.Logf("%+v; %+v", m.Stats(), sub.Stats())
	// Every message came, in order (the values inside them are the
	// simulation server's sampling, which may skip one under load).
	l.counterLog.mu.Lock()
	seqs := slices.Compact(slices.Clone(l.seqs))
	l.counterLog.mu.Unlock()
	for i, s := range seqs {
		if s != uint32(i+1) {
			t.Fatalf("messages delivered %v", seqs)
		}
	}
	if st := sub.Stats(); st.Unacked > 4 || st.Lost != 0 || st.Messages != uint64(len(seqs)) {
		t.Errorf("stats %+v", st)
	}
}

// TestManagedCloseDrain: Close(ctx) waits for the acknowledgements of what
// was delivered, and gives up at the deadline when they do not come.
func TestManagedCloseDrain(t *testing.T) {
	srv := startSim(t, simOptions{})
	var l ackLog
	m, sub := startManualSim(t, srv.URL(), &l, 4)
	testutil.WaitFor(t, 10*time.Second, "messages", func() bool { return sub.Unacked() == 4 })
	closed := make(chan error, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		closed <- m.Close(ctx)
	}()
	testutil.WaitFor(t, 5*time.Second, "Closing", func() bool { return m.State() == StateClosing })
	// Close must wait for the sink.
	if !testutil.Consistently(300*time.Millisecond, func() bool { return len(closed) == 0 }) {
		t.Fatalf("Close returned (%v) with 4 messages unacknowledged", <-closed)
	}
	var err error
	testutil.WaitFor(t, 5*time.Second, "Close after the acknowledgements", func() bool {
		l.ackAll(t, sub)
		select {
		case err = <-closed:
			return true
		default:
			return false
		}
	})
	if err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("Close took %v: it waited for its deadline", d)
	}
	if m.State() != StateClosed || sub.Unacked() != 0 {
		t.Errorf("state %v, unacked %d", m.State(), sub.Unacked())
	}
	testutil.WaitFor(t, 5*time.Second, "the session gone at the server", func() bool { return srv.Stats().Sessions == 0 })

	// Nobody acknowledges: Close gives up at its deadline.
	var l2 ackLog
	m2, sub2 := startManualSim(t, srv.URL(), &l2, 2)
	testutil.WaitFor(t, 10*time.Second, "messages", func() bool { return sub2.Unacked() == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := m2.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d < 350*time.Millisecond || d > 4*time.Second {
		t.Errorf("Close with nothing acknowledged took %v, want about its 400 ms deadline", d)
	}
	if m2.State() != StateClosed {
		t.Errorf("state %v", m2.State())
	}
}

// TestPoolKeys: the pool keys sessions by URL, security, user and group;
// the same key asked for with another configuration is an error.
func TestPoolKeys(t *testing.T) {
	url := startSim(t, simOptions{}).URL()
	base := ManagedConfig{
		Client:  Config{SecurityPolicy: "None", Logger: quietLog},
		Backoff: Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
	}
	pool, err := NewPool(&PoolConfig{Session: base})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close(context.Background())
	anon, err := pool.Session(url, "")
	if err != nil {
		t.Fatal(err)
	}
	user := base
	user.Client.Identity = UserName("operator", "secret")
	m, err := pool.SessionWith(url, "", &user)
	if err != nil {
		t.Fatal(err)
	}
	if m == anon {
		t.Fatal("a user's session is the anonymous one")
	}
	again := base
	again.Client.Identity = UserName("operator", "secret")
	if m2, err := pool.SessionWith(url, "", &again); err != nil || m2 != m {
		t.Fatalf("same key and configuration: %v, same session %v", err, m2 == m)
	}
	other := base
	other.Client.Identity = UserName("operator", "another")
	if _, err := pool.SessionWith(url, "", &other); !errors.Is(err, ErrPoolConflict) {
		t.Fatalf("same user, another password: %v", err)
	}
	slow := base
	slow.Client.RequestTimeout = time.Minute
	if _, err := pool.SessionWith(url, "", &slow); !errors.Is(err, ErrPoolConflict) {
		t.Fatalf("anonymous with another RequestTimeout: %v", err)
	}
	entries := pool.Sessions()
	if len(entries) != 2 {
		t.Fatalf("%d sessions", len(entries))
	}
	none, _ := ParseSecurityPolicy("None")
	want := PoolKey{URL: url, SecurityPolicy: none, Identity: "user:operator"}
	if k, err := pool.Key(url, "", &user); err != nil || k != want {
		t.Fatalf("Key %+v %v, want %+v", k, err, want)
	}
	if err := pool.Remove(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	if m.State() != StateClosed || len(pool.Sessions()) != 1 {
		t.Errorf("after Remove: %v, %d sessions", m.State(), len(pool.Sessions()))
	}
	if _, err := anon.WaitConnected(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := pool.Close(context.Background()); err != nil {
		t.Error(err)
	}
	if anon.State() != StateClosed {
		t.Errorf("after pool Close: %v", anon.State())
	}
}

// TestManagedNamespaceReorder: a server restarted with its namespace array
// in another order. Items given by namespace URI are resolved again when
// they are created anew: the one whose namespace moved away fails, the one
// whose namespace now holds the node delivers.
func TestManagedNamespaceReorder(t *testing.T) {
	const nsA, nsB = "urn:test:a", "urn:test:b"
	srv := startSim(t, simOptions{NamespaceURI: nsA, ExtraNamespaces: []string{nsB}})
	addr := srv.Addr().String()
	var slog stateLog
	m, err := NewManagedSession(srv.URL(), testManagedConfig(&slog))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	m.Start()
	ctx := ctxT(t)
	var got [3]atomic.Int64 // by handle
	var statusMu sync.Mutex
	status := map[uint32]ua.StatusCode{}
	sub, err := m.CreateSubscription(ctx, &SubscriptionConfig{
		PublishingInterval: 50 * time.Millisecond,
		ItemRetryInterval:  200 * time.Millisecond,
		OnDataChange: func(_ *Subscription, _ uint32, items []ua.MonitoredItemNotification) {
			for i := range items {
				if h := items[i].ClientHandle; h < 3 && items[i].Value.Status.IsGood() {
					got[h].Add(1)
				}
			}
		},
		OnItemStatus: func(_ *Subscription, h uint32, st ua.StatusCode) {
			statusMu.Lock()
			status[h] = st
			statusMu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	counterIn := func(uri string) ItemRequest {
		x, err := ua.ParseExpandedNodeID("nsu=" + uri + ";s=Demo.Counter")
		if err != nil {
			t.Fatal(err)
		}
		return ItemRequest{Node: x}
	}
	res, err := sub.CreateMonitoredItems(ctx, []ItemRequest{counterIn(nsA), counterIn(nsB)}, nil)
	if err != nil || res.FirstHandle != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := m.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "values of the item in namespace A", func() bool { return got[1].Load() >= 5 })
	a, _ := sub.Item(1)
	b, _ := sub.Item(2)
	if a.ID == 0 || a.NodeID.Namespace != 1 || a.NamespaceURI != nsA || b.ID != 0 || b.Status != ua.StatusBadNodeIdUnknown {
		t.Fatalf("before the restart: %+v, %+v", a, b)
	}

	// Restart with namespace B at index 1 and A at 2.
	srv.Close()
	testutil.WaitFor(t, 10*time.Second, "Reconnecting", func() bool { return m.State() == StateReconnecting })
	startSim(t, simOptions{Address: addr, NamespaceURI: nsB, ExtraNamespaces: []string{nsA}})
	testutil.WaitFor(t, 15*time.Second, "the subscription recreated and item B created", func() bool {
		b, _ := sub.Item(2)
		return m.State() == StateConnected && sub.Stats().Recreated == 1 && b.ID != 0
	})
	nA := got[1].Load()
	nB := got[2].Load()
	testutil.WaitFor(t, 10*time.Second, "values of the item in namespace B", func() bool { return got[2].Load() >= nB+5 })
	a, _ = sub.Item(1)
	b, _ = sub.Item(2)
	if a.ID != 0 || a.Status != ua.StatusBadNodeIdUnknown {
		t.Errorf("item A after the restart: %+v (still pointing at namespace index 1?)", a)
	}
	if b.NodeID.Namespace != 1 || b.Status != ua.StatusGood {
		t.Errorf("item B after the restart: %+v", b)
	}
	if n := got[1].Load(); n != nA {
		t.Errorf("item A delivered %d values after the restart: it points at namespace B's node", n-nA)
	}
	statusMu.Lock()
	defer statusMu.Unlock()
	if status[1] != ua.StatusBadNodeIdUnknown || status[2] != ua.StatusGood {
		t.Errorf("item statuses %v", status)
	}
}

// TestManagedResendNodeOPCUA: node-opcua sends every item's last value again
// after ActivateSession. After a cut socket and a reactivation, those are
// dropped: each unchanging item was delivered once, and the counter has no
// loss.
func TestManagedResendNodeOPCUA(t *testing.T) {
	peer := startSubPeer(t)
	proxy := newFaultProxy(t, peer.URL)
	var slog stateLog
	var clog counterLog
	var static [5]atomic.Int64 // by handle: 2 String, 3 Boolean, 4 DoubleArray
	cfg := clog.config()
	cfg.OnDataChange = func(sub *Subscription, seq uint32, items []ua.MonitoredItemNotification) {
		for i := range items {
			if h := items[i].ClientHandle; h >= 2 && h <= 4 {
				static[h].Add(1)
			}
		}
		clog.onData(sub, seq, items)
	}
	m, err := NewManagedSession(proxy.URL(), testManagedConfig(&slog))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	m.Start()
	ctx := ctxT(t)
	if _, err := m.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	clog.handle = 1 // before the handler can run
	sub, err := m.CreateSubscription(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sub.CreateMonitoredItems(ctx, []ItemRequest{
		{NodeID: mustNode(nodeopcua.NodeCounter)}, {NodeID: mustNode(nodeopcua.NodeString)},
		{NodeID: mustNode(nodeopcua.NodeBoolean)}, {NodeID: mustNode(nodeopcua.NodeDoubleArray)},
	}, nil)
	if err != nil || res.Created != 4 || res.FirstHandle != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	testutil.WaitFor(t, 10*time.Second, "first values", func() bool {
		return clog.count() >= 5 && static[2].Load() == 1 && static[3].Load() == 1 && static[4].Load() == 1
	})
	for range 2 {
		before := clog.last()
		r := m.Stats().Reactivations
		proxy.Cut()
		testutil.WaitFor(t, 10*time.Second, "reactivation", func() bool { return m.Stats().Reactivations > r && m.State() == StateConnected })
		testutil.WaitFor(t, 10*time.Second, "values after the cut", func() bool { return clog.last() >= before+20 })
	}
	t.Logf("%+v; %+v", m.Stats(), sub.Stats())
	for h := 2; h <= 4; h++ {
		if n := static[h].Load(); n != 1 {
			t.Errorf("item %d delivered %d times, want once (resent values not dropped)", h, n)
		}
	}
	if st := sub.Stats(); st.Suppressed < 6 {
		t.Errorf("suppressed %d, want at least 3 per reactivation", st.Suppressed)
	}
	checkNoLoss(t, &clog, sub)
	if st := m.Stats(); st.Connects != 1 || st.Recreations != 0 {
		t.Errorf("stats %+v", st)
	}
}
