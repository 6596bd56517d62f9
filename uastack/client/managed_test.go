package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
)

// Fault tests of the managed session against the node-opcua peer: a cut
// socket, a server that stops answering, a session the server dropped
// (transfer), a killed and restarted server (recreate). The simulation
// server's turn is in subscription_sim_test.go (restarts, monitored items whose
// nodes are gone, a server refusing sessions, recovery escalation, the pool).

// stateLog records a managed session's state changes.
type stateLog struct {
	mu     sync.Mutex
	states []State
	errs   []error
	at     []time.Time
}

func (l *stateLog) on(_ *ManagedSession, st State, err error) {
	l.mu.Lock()
	l.states = append(l.states, st)
	l.errs = append(l.errs, err)
	l.at = append(l.at, time.Now())
	l.mu.Unlock()
}

func (l *stateLog) seen(st State) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.states {
		if s == st {
			n++
		}
	}
	return n
}

func (l *stateLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := ""
	for i, st := range l.states {
		s += fmt.Sprintf("\n  %s %v", st, l.errs[i])
	}
	return s
}

func testManagedConfig(log *stateLog) *ManagedConfig {
	return &ManagedConfig{
		Client:            Config{SecurityPolicy: "None", Logger: quietLog, RequestTimeout: 3 * time.Second},
		Backoff:           Backoff{Initial: 100 * time.Millisecond, Max: time.Second},
		ConnectTimeout:    10 * time.Second,
		KeepAliveInterval: 500 * time.Millisecond,
		KeepAliveGrace:    300 * time.Millisecond,
		OnStateChange:     log.on,
	}
}

// startManaged makes and starts a managed session with a subscription on the
// Counter (created before the session connects), and waits for its values.
func startManaged(t *testing.T, url string, cfg *ManagedConfig, clog *counterLog, more ...ItemRequest) (*ManagedSession, *Subscription) {
	t.Helper()
	m, err := NewManagedSession(url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Logf("Close: %v", err)
		}
		if m.State() != StateClosed {
			t.Errorf("state after Close: %v", m.State())
		}
	})
	ctx := ctxT(t)
	sub, err := m.CreateSubscription(ctx, clog.config())
	if err != nil {
		t.Fatal(err)
	}
	res, err := sub.CreateMonitoredItems(ctx, append([]ItemRequest{{NodeID: mustNode(nodeopcua.NodeCounter)}}, more...), nil)
	if err != nil || res.Pending != 1+len(more) {
		t.Fatalf("items before connecting: %+v %v", res, err)
	}
	clog.setHandle(res.FirstHandle) // the handler may already run
	if st := m.State(); st != StateDisconnected {
		t.Fatalf("state before Start: %v", st)
	}
	m.Start()
	if _, err := m.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "first counter values", func() bool { return clog.count() >= 5 })
	return m, sub
}

func checkNoLoss(t *testing.T, clog *counterLog, sub *Subscription) {
	t.Helper()
	if ok, at, a, b := clog.contiguous(); !ok {
		t.Errorf("counter value lost: value %d is %v after %v", at, b, a)
	}
	clog.mu.Lock()
	gaps := clog.gaps
	clog.mu.Unlock()
	if len(gaps) != 0 {
		t.Errorf("gaps reported: %v", gaps)
	}
	if st := sub.Stats(); st.Lost != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestManagedRecovery(t *testing.T) {
	peer := startSubPeer(t)

	t.Run("CutSocket", func(t *testing.T) {
		// The network breaks; the server keeps the session. Reactivation on a
		// new channel; what was sent meanwhile comes back through Republish or
		// the item queue: no counter value is lost.
		proxy := newFaultProxy(t, peer.URL)
		var slog stateLog
		var clog counterLog
		m, sub := startManaged(t, proxy.URL(), testManagedConfig(&slog), &clog)
		before := clog.last()
		cutAt := time.Now()
		proxy.Cut()
		testutil.WaitFor(t, 10*time.Second, "reactivation", func() bool { return m.Stats().Reactivations >= 1 && m.State() == StateConnected })
		recovered := time.Since(cutAt)
		testutil.WaitFor(t, 10*time.Second, "values after the cut", func() bool { return clog.last() >= before+20 })
		t.Logf("recovered in %v; %+v; %+v", recovered.Round(time.Millisecond), m.Stats(), sub.Stats())
		if slog.seen(StateReconnecting) == 0 {
			t.Errorf("no Reconnecting state: %v", &slog)
		}
		if st := m.Stats(); st.Connects != 1 || st.Recreations != 0 {
			t.Errorf("stats %+v", st)
		}
		checkNoLoss(t, &clog, sub)
	})

	t.Run("PublishStall", func(t *testing.T) {
		// The server stops answering but keeps the connection open: the
		// keep-alive watchdog notices, the session moves to a new channel, and
		// the messages the server sent into the void are republished.
		proxy := newFaultProxy(t, peer.URL)
		var slog stateLog
		var clog counterLog
		m, sub := startManaged(t, proxy.URL(), testManagedConfig(&slog), &clog)
		before := clog.last()
		stallAt := time.Now()
		proxy.Stall()
		testutil.WaitFor(t, 10*time.Second, "reactivation", func() bool { return m.Stats().Reactivations >= 1 && m.State() == StateConnected })
		detected := time.Since(stallAt)
		testutil.WaitFor(t, 10*time.Second, "values after the stall", func() bool { return clog.last() >= before+20 })
		t.Logf("recovered in %v; %+v; %+v", detected.Round(time.Millisecond), m.Stats(), sub.Stats())
		checkNoLoss(t, &clog, sub)
		if st := sub.Stats(); st.Republished == 0 {
			t.Errorf("nothing republished: %+v", st)
		}
	})

	t.Run("Transfer", func(t *testing.T) {
		// The connection is down for longer than the session timeout: the
		// server closes the session but keeps its subscriptions. The client's
		// reactivation is refused; a new session takes the subscriptions over
		// (TransferSubscriptions) and republishes what they kept.
		proxy := newFaultProxy(t, peer.URL)
		var slog stateLog
		var clog counterLog
		cfg := testManagedConfig(&slog)
		store, err := pki.Open(t.TempDir(), pki.Options{Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		// node-opcua transfers an anonymous session's subscriptions only on a
		// signed channel: use a user.
		cfg.Client.Store, cfg.Client.AutoAccept = store, true
		cfg.Client.Identity = UserName("user1", nodeopcua.Users["user1"])
		cfg.Client.SessionTimeout = 1500 * time.Millisecond
		m, sub := startManaged(t, proxy.URL(), cfg, &clog)
		oldID := sub.ID()
		before := clog.last()
		proxy.Refuse(true)
		proxy.Cut()
		testutil.WaitFor(t, 5*time.Second, "Reconnecting", func() bool { return m.State() == StateReconnecting })
		// Wait until the server has dropped the session (its timeout, checked
		// by the server once a second or so).
		checker := dialNone(t, peer.URL)
		testutil.WaitFor(t, 15*time.Second, "the server dropping the session", func() bool {
			resp, err := checker.Read(ctxT(t), &ua.ReadRequest{NodesToRead: []ua.ReadValueID{{
				NodeID: ua.NewNumericNodeID(0, ua.ID_Server_ServerDiagnostics_ServerDiagnosticsSummary_CurrentSessionCount), AttributeID: AttributeValue}}})
			if err != nil || resp.Results[0].Status.IsBad() {
				t.Fatalf("reading the session count: %v %v", err, resp)
			}
			return resp.Results[0].Value.UInt32() <= 1 // the checker's own
		})
		proxy.Refuse(false)
		testutil.WaitFor(t, 15*time.Second, "transfer", func() bool { return m.Stats().Transfers >= 1 && m.State() == StateConnected })
		testutil.WaitFor(t, 10*time.Second, "values after the transfer", func() bool { return clog.last() >= before+20 })
		t.Logf("%+v; %+v", m.Stats(), sub.Stats())
		if sub.ID() != oldID {
			t.Errorf("subscription id %d after transfer, was %d", sub.ID(), oldID)
		}
		if st := m.Stats(); st.Connects != 2 || st.Recreations != 0 {
			t.Errorf("stats %+v", st)
		}
		checkNoLoss(t, &clog, sub)
	})
}

func TestManagedKillRestart(t *testing.T) {
	peer := nodeopcua.Start(t, nodeopcua.Options{
		LargeCount: 10, CounterInterval: 50 * time.Millisecond, Env: []string{"COUNTER_EXCEPTION_BASED=1"},
	})
	var slog stateLog
	var clog counterLog
	cfg := testManagedConfig(&slog)
	var large []ItemRequest
	for i := range 10 {
		large = append(large, ItemRequest{NodeID: mustNode(nodeopcua.LargeNode(i))})
	}
	m, err := NewManagedSession(peer.URL, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	m.Start()
	ctx := ctxT(t)
	if _, err := m.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	sub, err := m.CreateSubscription(ctx, clog.config())
	if err != nil {
		t.Fatal(err)
	}
	res, err := sub.CreateMonitoredItems(ctx, append([]ItemRequest{{NodeID: mustNode(nodeopcua.NodeCounter)}}, large...), nil)
	if err != nil || res.Created != 11 {
		t.Fatalf("%+v %v", res, err)
	}
	clog.setHandle(res.FirstHandle) // the handler may already run
	testutil.WaitFor(t, 10*time.Second, "counter values", func() bool { return clog.count() >= 5 })

	// Kill, restart on the same port: a new process knows nothing of the
	// session. The subscription is recreated and the loss reported.
	oldID := sub.ID()
	peer.Kill()
	testutil.WaitFor(t, 10*time.Second, "Reconnecting", func() bool { return m.State() == StateReconnecting })
	peer.Restart()
	restarted := time.Now()
	testutil.WaitFor(t, 15*time.Second, "values from the new server", func() bool {
		return m.State() == StateConnected && sub.Stats().Recreated >= 1 && clog.count() > 0 && clog.last() < 100 && clog.last() >= 3
	})
	resumed := time.Since(restarted)
	t.Logf("data resumed %v after the restart; %+v; %+v", resumed.Round(time.Millisecond), m.Stats(), sub.Stats())
	if resumed > 5*time.Second {
		t.Errorf("data resumed only %v after the restart (backoff max 1 s)", resumed)
	}
	if sub.ID() == 0 || sub.ID() == oldID && sub.Stats().Recreated == 0 {
		t.Errorf("subscription id %d", sub.ID())
	}
	clog.mu.Lock()
	gaps := clog.gaps
	clog.mu.Unlock()
	if len(gaps) != 1 || gaps[0][1] != 0 || gaps[0][0] == 0 {
		t.Errorf("gaps %v, want one with to == 0", gaps)
	}
	if st := m.Stats(); st.Recreations != 1 || st.Reactivations != 0 || st.Transfers != 0 {
		t.Errorf("stats %+v", st)
	}

}

func TestBackoff(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 30 * time.Second, Jitter: -1}
	var got []time.Duration
	for range 7 {
		d, err := b.Next(errors.New("refused"))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("delays %v", got)
		}
	}
	b.Reset()
	if d, _ := b.Next(fmt.Errorf("x: %w", ua.StatusBadTooManySessions)); d != 4*time.Second {
		t.Errorf("busy delay %v, want 4 s", d)
	}
	if d, _ := b.Next(ua.StatusBadTcpServerTooBusy); d != 8*time.Second {
		t.Errorf("busy delay %v, want 8 s", d)
	}
	// Jitter stays within ±10%.
	j := Backoff{Initial: time.Second}
	for range 100 {
		j.Reset()
		d, _ := j.Next(nil)
		if d < 900*time.Millisecond || d > 1100*time.Millisecond {
			t.Fatalf("jittered delay %v", d)
		}
	}
	g := Backoff{Initial: time.Millisecond, MaxElapsed: 20 * time.Millisecond}
	if !testutil.Eventually(5*time.Second, func() bool { _, err := g.Next(nil); return errors.Is(err, ErrGaveUp) }) {
		t.Fatal("MaxElapsed not honoured")
	}
	if IsBusy(errors.New("connection refused")) || !IsBusy(ua.StatusBadTooManyOperations) {
		t.Error("IsBusy")
	}
}

// TestBackoffMax: the busy factor and the jitter never take a delay above
// Max.
func TestBackoffMax(t *testing.T) {
	busy := fmt.Errorf("x: %w", ua.StatusBadTooManySessions)
	b := Backoff{Initial: time.Second, Max: 10 * time.Second, Jitter: -1}
	var got []time.Duration
	for range 6 {
		d, _ := b.Next(busy)
		got = append(got, d)
	}
	// 1, 2, 4, 8, 10, 10 s, four times each, capped at 10 s.
	want := []time.Duration{4, 8, 10, 10, 10, 10}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("busy delays %v, want %v s", got, want)
		}
	}
	// With ±50 % jitter at the maximum, never above it.
	j := Backoff{Initial: 8 * time.Second, Max: 10 * time.Second, Jitter: 0.5}
	for range 200 {
		d, _ := j.Next(busy)
		if d > 10*time.Second || d < 0 {
			t.Fatalf("delay %v with Max 10 s", d)
		}
	}
	// A Max below Initial is raised to Initial, as before.
	k := Backoff{Initial: 2 * time.Second, Max: time.Second, Jitter: -1}
	if d, _ := k.Next(busy); d != 2*time.Second {
		t.Errorf("delay %v with Initial 2 s above Max 1 s", d)
	}
}

// TestIsBusy: the statuses a server sends when it is overloaded count as
// busy; BadTimeout, which the client reports when no answer came in time,
// does not (a dead network causes it as often as a busy server).
func TestIsBusy(t *testing.T) {
	for _, sc := range []ua.StatusCode{ua.StatusBadTooManySessions, ua.StatusBadTcpServerTooBusy, ua.StatusBadTooManyOperations,
		ua.StatusBadTooManyPublishRequests, ua.StatusBadResourceUnavailable, ua.StatusBadRequestTimeout} {
		if !IsBusy(fmt.Errorf("client: Read: %w", sc)) {
			t.Errorf("%v is not busy", sc)
		}
	}
	for _, err := range []error{ua.StatusBadTimeout, fmt.Errorf("uasc: %w", ua.StatusBadTimeout), ua.StatusBadUserAccessDenied, errors.New("refused"), nil} {
		if IsBusy(err) {
			t.Errorf("%v is busy", err)
		}
	}
	b := Backoff{Initial: time.Second, Jitter: -1}
	if d, _ := b.Next(ua.StatusBadTimeout); d != time.Second {
		t.Errorf("delay after BadTimeout %v, want 1 s (not ×4)", d)
	}
}

func TestRateLimiter(t *testing.T) {
	l := NewRateLimiter(20, 2) // one every 50 ms after a burst of 2
	ctx := context.Background()
	start := time.Now()
	for range 6 {
		if err := l.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 190*time.Millisecond {
		t.Errorf("6 tokens at 20/s with burst 2 took %v, want ≥ 200 ms", d)
	}
	var nilLimiter *RateLimiter
	if err := nilLimiter.Wait(ctx); err != nil {
		t.Error(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := NewRateLimiter(1, 1).Wait(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	l2 := NewRateLimiter(0.001, 1)
	_ = l2.Wait(ctx)
	tctx, tcancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer tcancel()
	if err := l2.Wait(tctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("empty bucket: %v", err)
	}
}
