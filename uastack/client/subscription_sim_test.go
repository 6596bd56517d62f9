package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// Tests against the simulation server (uastack/server). It runs in process
// where only behaviour counts, and as a child process (this test binary again,
// see TestSimServerProcess) where the client's own CPU time, allocations or
// memory are measured.

// simOptions configure a simulation server; they travel to a child process as
// JSON.
type simOptions struct {
	Address         string        // default 127.0.0.1:0
	Folders         int           // Load folders (default none)
	Variables       int           // Load variables per folder
	Rate            time.Duration // period of the Load generators (default 1 h: initial values only)
	DemoRate        time.Duration // period of Demo.Counter (default 20 ms)
	MaxSessions     int
	MaxItemsPerCall uint32
	Types           []ua.TypeID // of the Load variables (default: the server's, every scalar type)
	AllPolicies     bool        // offer every non-deprecated policy, not only None
	NamespaceURI    string      // of namespace 1 (default the server's)
	ExtraNamespaces []string    // namespaces 2, 3 …
	// Configure changes the configuration further (in process only).
	Configure func(*server.Config) `json:"-"`
}

func (o simOptions) config() *server.Config {
	cfg := &server.Config{
		Address:                  o.Address,
		Policies:                 []uasc.EndpointSecurity{{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}},
		MaxSessionCount:          o.MaxSessions,
		MaxMonitoredItemsPerCall: o.MaxItemsPerCall,
		NamespaceURI:             o.NamespaceURI,
		ExtraNamespaces:          o.ExtraNamespaces,
		Sim: server.SimConfig{
			DemoRate:      o.DemoRate,
			Folders:       o.Folders,
			Variables:     o.Variables,
			Rates:         []time.Duration{o.Rate},
			Types:         o.Types,
			AlarmInterval: 200 * time.Millisecond,
		},
	}
	if cfg.Address == "" {
		cfg.Address = "127.0.0.1:0"
	}
	if o.AllPolicies {
		cfg.Policies = server.DefaultPolicies()
	}
	if o.Folders == 0 {
		cfg.Sim.Folders, cfg.Sim.Variables = -1, -1
	}
	if o.Rate == 0 {
		cfg.Sim.Rates = []time.Duration{time.Hour}
	}
	if o.DemoRate == 0 {
		cfg.Sim.DemoRate = 20 * time.Millisecond
	}
	if o.Configure != nil {
		o.Configure(cfg)
	}
	return cfg
}

// startSim starts a simulation server in this process; it is closed when the
// test ends.
func startSim(tb testing.TB, o simOptions) *server.Server {
	tb.Helper()
	var srv *server.Server
	var err error
	start := func() bool {
		srv, err = server.New(o.config())
		if err == nil {
			err = srv.Start()
		}
		// A restart on the port just released may race with the kernel.
		return err == nil || o.Address == ""
	}
	if !testutil.Eventually(time.Second, start) || err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	return srv
}

const simChildEnv = "UAGATE_SIM_CHILD"

// startSimProcess starts a simulation server in a child process (this test
// binary, running TestSimServerProcess) and returns its endpoint URL. The child
// ends when the test does, or when this process dies (its stdin closes).
func startSimProcess(tb testing.TB, o simOptions) string {
	tb.Helper()
	js, err := json.Marshal(o)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSimServerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), simChildEnv+"="+string(js), "GOGC=100")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	tb.Cleanup(func() {
		stdin.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				urlc <- u
				break
			}
		}
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		close(done)
	}()
	select {
	case u := <-urlc:
		return u
	case <-done:
		tb.Fatalf("simulation server process ended: %s", stderr.String())
	case <-time.After(60 * time.Second):
		tb.Fatalf("simulation server process not ready: %s", stderr.String())
	}
	return ""
}

// TestSimServerProcess is the child process of startSimProcess when
// UAGATE_SIM_CHILD is set; otherwise it checks that such a child serves.
func TestSimServerProcess(t *testing.T) {
	if js := os.Getenv(simChildEnv); js != "" {
		var o simOptions
		if err := json.Unmarshal([]byte(js), &o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		srv, err := server.New(o.config())
		if err == nil {
			err = srv.Start()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("READY %s\n", srv.URL())
		io.Copy(io.Discard, os.Stdin)
		srv.Close()
		os.Exit(0)
	}
	url := startSimProcess(t, simOptions{Folders: 1, Variables: 10})
	c := dialNone(t, url)
	vals, err := c.ReadValues(ctxT(t), mustNode(server.LoadNode(0, 3)))
	if err != nil || vals[0].Status.IsBad() {
		t.Fatalf("%v %v", vals, err)
	}
}

func TestSubscriptionLargeSet(t *testing.T) {
	// 100,000 items on one server whose MaxMonitoredItemsPerCall is 5000, one
	// in 10,000 of them for a node that does not exist. (30,000 under the race
	// detector, which slows the server as much as the client.)
	const vars = 1000
	folders := 100
	if raceEnabled {
		folders = 30
	}
	srv := startSim(t, simOptions{Folders: folders, Variables: vars, MaxItemsPerCall: 5000})
	c := dialNone(t, srv.URL())
	var got atomic.Int64
	var mu sync.Mutex
	failed := map[uint32]ua.StatusCode{}
	sub, err := c.CreateSubscription(ctxT(t), &SubscriptionConfig{
		PublishingInterval: 100 * time.Millisecond,
		OnDataChange: func(_ *Subscription, _ uint32, items []ua.MonitoredItemNotification) {
			got.Add(int64(len(items)))
		},
		OnItemStatus: func(_ *Subscription, h uint32, st ua.StatusCode) {
			mu.Lock()
			failed[h] = st
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]ItemRequest, 0, folders*vars)
	for f := range folders {
		for v := range vars {
			id := server.LoadNode(f, v)
			if (f*vars+v)%10000 == 5000 {
				id = fmt.Sprintf("ns=1;s=Gone.%d", f)
			}
			items = append(items, ItemRequest{NodeID: mustNode(id)})
		}
	}
	var calls []int
	start := time.Now()
	res, err := sub.CreateMonitoredItems(ctxT(t), items, &CreateItemsOptions{Progress: func(done, total int) { calls = append(calls, done) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d items in %v: %+v", len(items), time.Since(start).Round(time.Millisecond), res)
	bad := len(items) / 10000
	if res.Created != len(items)-bad || res.Failed != bad {
		t.Fatalf("result %+v", res)
	}
	if len(calls) != len(items)/1000 || calls[len(calls)-1] != len(items) {
		t.Errorf("progress: %d calls, last %v", len(calls), calls[len(calls)-1:])
	}
	mu.Lock()
	nf := len(failed)
	st := failed[res.FirstHandle+5000]
	mu.Unlock()
	if nf != bad || st != ua.StatusBadNodeIdUnknown {
		t.Errorf("%d items reported, item 5000: %v", nf, st)
	}
	testutil.WaitFor(t, 30*time.Second, "an initial value of every item", func() bool { return got.Load() >= int64(len(items)-bad) })

	// Batches follow the server's limit when it is below ours.
	sub2, err := c.CreateSubscription(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if _, err := sub2.CreateMonitoredItems(ctxT(t), items[:12000], &CreateItemsOptions{BatchSize: 100000, Progress: func(int, int) { n++ }}); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("%d requests for 12000 items with the server's limit of 5000", n)
	}
}

// TestManagedSimRestart: the simulation server is stopped and started again
// on the same port, once with fewer variables (items whose nodes are gone
// fail, are reported and retried while their siblings deliver) and once with
// all of them again (the failed items come back).
func TestManagedSimRestart(t *testing.T) {
	srv := startSim(t, simOptions{Folders: 1, Variables: 20, Rate: 50 * time.Millisecond})
	addr := srv.Addr().String()
	var slog stateLog
	var clog counterLog
	cfg := testManagedConfig(&slog)
	var itemMu sync.Mutex
	itemStatus := map[uint32]ua.StatusCode{}
	m, err := NewManagedSession(srv.URL(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	m.Start()
	ctx := ctxT(t)
	scfg := clog.config()
	scfg.ItemRetryInterval = 200 * time.Millisecond
	scfg.OnItemStatus = func(_ *Subscription, h uint32, st ua.StatusCode) {
		itemMu.Lock()
		itemStatus[h] = st
		itemMu.Unlock()
	}
	sub, err := m.CreateSubscription(ctx, scfg)
	if err != nil {
		t.Fatal(err)
	}
	items := []ItemRequest{{NodeID: mustNode(server.NodeCounter)}}
	for v := range 20 {
		items = append(items, ItemRequest{NodeID: mustNode(server.LoadNode(0, v))})
	}
	res, err := sub.CreateMonitoredItems(ctx, items, nil)
	if err != nil {
		t.Fatal(err)
	}
	clog.setHandle(res.FirstHandle) // the handler may already run
	if _, err := m.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "counter values", func() bool { return clog.count() >= 10 })
	if ok, at, a, b := clog.contiguous(); !ok {
		t.Errorf("counter not contiguous at %d: %v, %v", at, a, b)
	}

	// Restart with 10 of the 20 variables.
	srv.Close()
	testutil.WaitFor(t, 10*time.Second, "Reconnecting", func() bool { return m.State() == StateReconnecting })
	srv1 := startSim(t, simOptions{Address: addr, Folders: 1, Variables: 10, Rate: 50 * time.Millisecond})
	restarted := time.Now()
	testutil.WaitFor(t, 10*time.Second, "recreation", func() bool {
		st := sub.Stats()
		return m.State() == StateConnected && st.Recreated == 1 && st.FailedItems == 10
	})
	n := clog.count()
	testutil.WaitFor(t, 10*time.Second, "values after the restart", func() bool { return clog.count() > n+5 })
	t.Logf("data resumed %v after the restart", time.Since(restarted).Round(time.Millisecond))
	clog.mu.Lock()
	gaps := clog.gaps
	clog.mu.Unlock()
	if len(gaps) != 1 || gaps[0][1] != 0 {
		t.Errorf("gaps %v, want one with to == 0 (subscription lost)", gaps)
	}
	itemMu.Lock()
	for v := 10; v < 20; v++ {
		if st := itemStatus[res.FirstHandle+1+uint32(v)]; st != ua.StatusBadNodeIdUnknown {
			t.Errorf("item of variable %d: %v", v, st)
		}
	}
	itemMu.Unlock()
	// The siblings deliver.
	d := sub.Stats().DataChanges
	testutil.WaitFor(t, 10*time.Second, "values of the 10 remaining variables", func() bool { return sub.Stats().DataChanges > d+30 })

	// All 20 again: the failed items are created with the rest on the
	// recreated subscription and report Good.
	srv1.Close()
	testutil.WaitFor(t, 10*time.Second, "Reconnecting", func() bool { return m.State() == StateReconnecting })
	startSim(t, simOptions{Address: addr, Folders: 1, Variables: 20, Rate: 50 * time.Millisecond})
	testutil.WaitFor(t, 10*time.Second, "all items back", func() bool {
		st := sub.Stats()
		return m.State() == StateConnected && st.Recreated == 2 && st.FailedItems == 0
	})
	itemMu.Lock()
	for v := 10; v < 20; v++ {
		if st := itemStatus[res.FirstHandle+1+uint32(v)]; st != ua.StatusGood {
			t.Errorf("item of variable %d after the nodes came back: %v", v, st)
		}
	}
	itemMu.Unlock()
	if st := m.Stats(); st.Recreations != 2 || st.Connects != 3 {
		t.Errorf("stats %+v", st)
	}
}

func TestManagedSimCutSocket(t *testing.T) {
	// The simulation server keeps the session over a cut connection; its
	// retransmission queue gives back what was sent into the cut.
	srv := startSim(t, simOptions{})
	proxy := newFaultProxy(t, srv.URL())
	var slog stateLog
	var clog counterLog
	m, sub := startManaged(t, proxy.URL(), testManagedConfig(&slog), &clog)
	for range 3 {
		before := clog.last()
		r := m.Stats().Reactivations
		proxy.Cut()
		testutil.WaitFor(t, 10*time.Second, "reactivation", func() bool { return m.Stats().Reactivations > r && m.State() == StateConnected })
		testutil.WaitFor(t, 10*time.Second, "values after the cut", func() bool { return clog.last() >= before+20 })
	}
	proxy.Stall()
	r := m.Stats().Reactivations
	testutil.WaitFor(t, 10*time.Second, "reactivation after a stall", func() bool { return m.Stats().Reactivations > r && m.State() == StateConnected })
	before := clog.last()
	testutil.WaitFor(t, 10*time.Second, "values after the stall", func() bool { return clog.last() >= before+20 })
	t.Logf("%+v; %+v", m.Stats(), sub.Stats())
	checkNoLoss(t, &clog, sub)

	// A subscription deleted while the connection is down is deleted at the
	// server once the session is back.
	sub2, err := m.CreateSubscription(ctxT(t), nil)
	if err != nil || sub2.ID() == 0 {
		t.Fatalf("%v %v", sub2, err)
	}
	testutil.WaitFor(t, 5*time.Second, "two subscriptions at the server", func() bool { return srv.Stats().Subscriptions == 2 })
	r = m.Stats().Reactivations
	proxy.Refuse(true)
	proxy.Cut()
	testutil.WaitFor(t, 5*time.Second, "Reconnecting", func() bool { return m.State() == StateReconnecting })
	if err := sub2.Delete(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	proxy.Refuse(false)
	testutil.WaitFor(t, 10*time.Second, "reactivation", func() bool { return m.Stats().Reactivations > r && m.State() == StateConnected })
	testutil.WaitFor(t, 5*time.Second, "the deleted subscription gone at the server", func() bool { return srv.Stats().Subscriptions == 1 })
	if n := len(m.Subscriptions()); n != 1 {
		t.Errorf("%d subscriptions", n)
	}
}

// TestManagedEscalation: a server whose Publish responses stop while every
// other service answers. Reactivating the session does not bring the
// subscription back, so the next recovery takes a new session (and transfers
// the subscription), the one after recreates it. Once Publish works again the
// data flows and the recovery steps start from the beginning again.
func TestManagedEscalation(t *testing.T) {
	srv := startSim(t, simOptions{Configure: func(c *server.Config) { c.Users = map[string]string{"user1": "password1"} }})
	proxy := newFaultProxy(t, srv.URL())
	var slog stateLog
	var clog counterLog
	cfg := testManagedConfig(&slog)
	// A user: an anonymous user's subscriptions are not transferred between
	// sessions on unsecured channels (Part 4 §5.13.7), and the proxy cannot
	// drop Publish responses of a signed channel.
	store, err := pki.Open(t.TempDir(), pki.Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Client.Identity, cfg.Client.Store, cfg.Client.AutoAccept = UserName("user1", "password1"), store, true
	cfg.Backoff = Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond}
	m, sub := startManaged(t, proxy.URL(), cfg, &clog)
	proxy.DropPublish(true)
	if !testutil.Eventually(20*time.Second, func() bool {
		st := m.Stats()
		return st.Reactivations >= 1 && st.Connects >= 3 && st.Recreations >= 1
	}) {
		slog.mu.Lock()
		errs := fmt.Sprint(slog.errs)
		slog.mu.Unlock()
		t.Fatalf("no reactivation, then a new session, then recreation: %+v; %+v; %s", m.Stats(), sub.Stats(), errs)
	}
	st := m.Stats()
	t.Logf("%+v; %+v", st, sub.Stats())
	if st.Transfers == 0 {
		t.Errorf("no transfer step: %+v", st)
	}
	proxy.DropPublish(false)
	before := clog.count()
	testutil.WaitFor(t, 10*time.Second, "data again", func() bool { return clog.count() > before+10 && m.State() == StateConnected })
	if got := srv.Stats(); got.Sessions > 2 {
		t.Errorf("%d sessions at the server: the abandoned ones were not closed", got.Sessions)
	}
	// Verified: the next fault starts with reactivation again.
	r := m.Stats().Reactivations
	time.Sleep(cfg.KeepAliveGrace) // a few supervision ticks
	proxy.Cut()
	testutil.WaitFor(t, 10*time.Second, "reactivation after a cut", func() bool { return m.Stats().Reactivations > r && m.State() == StateConnected })
}

// TestManagedTooManySessions: a server at its session limit refuses with
// BadTooManySessions; the session waits four times longer between attempts
// and connects once a session is free.
func TestManagedTooManySessions(t *testing.T) {
	srv := startSim(t, simOptions{MaxSessions: 1})
	blocker := dialNone(t, srv.URL())
	var slog stateLog
	cfg := testManagedConfig(&slog)
	cfg.Backoff = Backoff{Initial: 50 * time.Millisecond, Max: 10 * time.Second, Jitter: -1}
	m, err := NewManagedSession(srv.URL(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	m.Start()
	busy := func() (at []time.Time) {
		slog.mu.Lock()
		defer slog.mu.Unlock()
		for i, e := range slog.errs {
			if errors.Is(e, ua.StatusBadTooManySessions) {
				at = append(at, slog.at[i])
			}
		}
		return at
	}
	testutil.WaitFor(t, 15*time.Second, "three refused attempts", func() bool { return len(busy()) >= 3 })
	if st := m.State(); st != StateConnecting || !errors.Is(m.Err(), ua.StatusBadTooManySessions) {
		t.Fatalf("state %v, err %v", st, m.Err())
	}
	at := busy()
	// Busy: 4 × 50 ms, then 4 × 100 ms (plus the attempt itself).
	if d := at[1].Sub(at[0]); d < 200*time.Millisecond {
		t.Errorf("second attempt %v after the first, want ≥ 200 ms (×4 for a busy server)", d)
	}
	if d := at[2].Sub(at[1]); d < 400*time.Millisecond {
		t.Errorf("third attempt %v after the second, want ≥ 400 ms", d)
	}
	blocker.Close()
	if _, err := m.WaitConnected(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func TestPool(t *testing.T) {
	var urls []string
	for range 3 {
		urls = append(urls, startSim(t, simOptions{}).URL())
	}
	var mu sync.Mutex
	var connects []time.Time
	pool, err := NewPool(&PoolConfig{
		Session: ManagedConfig{
			Client:  Config{SecurityPolicy: "None", Logger: quietLog},
			Backoff: Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
			OnStateChange: func(_ *ManagedSession, st State, _ error) {
				if st == StateConnected {
					mu.Lock()
					connects = append(connects, time.Now())
					mu.Unlock()
				}
			},
		},
		ConnectRate:  20, // one every 50 ms after a burst of 2
		ConnectBurst: 2,
		Grouping:     PerEndpointAndGroup,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close(context.Background())
	var got [6]atomic.Int64
	start := time.Now()
	for i := range 6 {
		m, err := pool.Session(urls[i%3], fmt.Sprint("g", i/3))
		if err != nil {
			t.Fatal(err)
		}
		sub, err := m.CreateSubscription(ctxT(t), &SubscriptionConfig{
			PublishingInterval: 50 * time.Millisecond,
			OnDataChange: func(_ *Subscription, _ uint32, items []ua.MonitoredItemNotification) {
				got[i].Add(int64(len(items)))
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sub.CreateMonitoredItems(ctxT(t), []ItemRequest{{NodeID: mustNode(server.NodeCounter)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	again, _ := pool.Session(urls[0], "g0")
	for _, e := range pool.Sessions() {
		if e.Key == (PoolKey{URL: urls[0], Group: "g0"}) && e.Session != again {
			t.Error("Session made a second session for the same key")
		}
	}
	if n := len(pool.Sessions()); n != 6 {
		t.Fatalf("%d sessions", n)
	}
	testutil.WaitFor(t, 10*time.Second, "every session delivering", func() bool {
		for i := range got {
			if got[i].Load() < 5 {
				return false
			}
		}
		return true
	})
	if st := pool.States(); st[StateConnected] != 6 {
		t.Errorf("states %v", st)
	}
	mu.Lock()
	last := connects[len(connects)-1]
	mu.Unlock()
	// Six connects at 20/s with a burst of 2 take at least 4 × 50 ms.
	if d := last.Sub(start); d < 190*time.Millisecond {
		t.Errorf("6 connects took %v: not rate limited", d)
	}
	if err := pool.Close(context.Background()); err != nil {
		t.Error(err)
	}
	if _, err := pool.Session(urls[0], "x"); err == nil {
		t.Error("closed pool made a session")
	}
}

// TestSubscriptionFiltersSim: deadbands (absolute and percent of the EURange)
// and an event filter with select and where clauses, against the simulation
// server.
func TestSubscriptionFiltersSim(t *testing.T) {
	srv := startSim(t, simOptions{})
	c := dialNone(t, srv.URL())
	ctx := ctxT(t)
	type change struct {
		h uint32
		v float64
	}
	changes := make(chan change, 100)
	events := make(chan []string, 100)
	sub, err := c.CreateSubscription(ctx, &SubscriptionConfig{
		PublishingInterval: 20 * time.Millisecond,
		OnDataChange: func(_ *Subscription, _ uint32, items []ua.MonitoredItemNotification) {
			for i := range items {
				changes <- change{items[i].ClientHandle, items[i].Value.Value.Double()}
			}
		},
		OnEvent: func(_ *Subscription, _ uint32, evs []ua.EventFieldList) {
			for i := range evs {
				var f []string
				for _, v := range evs[i].EventFields {
					f = append(f, fmt.Sprint(v.Value()))
				}
				events <- f
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	setpoint := mustNode(server.NodeSetpoint)
	res, err := sub.CreateMonitoredItems(ctx, []ItemRequest{
		{NodeID: setpoint, Options: &ItemOptions{SamplingInterval: 10 * time.Millisecond, QueueSize: 10, DataChange: AbsoluteDeadband(5)}},
		{NodeID: setpoint, Options: &ItemOptions{SamplingInterval: 10 * time.Millisecond, QueueSize: 10, DataChange: PercentDeadband(10)}}, // 10% of 0..1000
		{NodeID: mustNode(server.NodeAlarms), Options: &ItemOptions{QueueSize: 100, Event: &ua.EventFilter{
			SelectClauses: SelectEventFields("SourceName", "Message", "Severity"),
			WhereClause:   OfType(ua.NewNumericNodeID(0, ua.ID_BaseEventType)),
		}}},
	}, nil)
	if err != nil || res.Created != 3 {
		t.Fatalf("%+v %v", res, err)
	}
	abs, pct := res.FirstHandle, res.FirstHandle+1
	next := func(want uint32) float64 {
		for {
			select {
			case ch := <-changes:
				if ch.h == want {
					return ch.v
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no change on item %d", want)
			}
		}
	}
	next(abs) // initial values
	next(pct)
	// The server samples the variable: a written value is seen once a
	// sampling interval has passed.
	info, _ := sub.Item(abs)
	pause := 3 * max(info.SamplingInterval, 10*time.Millisecond)
	for _, v := range []float64{3, 4.9, 7, 60, 110, 140} {
		if err := c.WriteValue(ctx, setpoint, ua.NewDoubleVariant(v)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(pause)
	}
	var gotAbs, gotPct []float64
	deadline := time.After(2 * time.Second)
collect:
	for {
		select {
		case ch := <-changes:
			if ch.h == abs {
				gotAbs = append(gotAbs, ch.v)
			} else if ch.h == pct {
				gotPct = append(gotPct, ch.v)
			}
		case <-deadline:
			break collect
		}
		if len(gotAbs) == 4 && len(gotPct) == 1 {
			break
		}
	}
	// Absolute 5 from 0: 7 (not 3 or 4.9), 60, 110, 140. Percent: 10% of the
	// EURange 0..1000 is 100: 110 only (140 is 30 from it).
	if fmt.Sprint(gotAbs) != "[7 60 110 140]" {
		t.Errorf("absolute deadband 5 passed %v", gotAbs)
	}
	if fmt.Sprint(gotPct) != "[110]" {
		t.Errorf("percent deadband 10%% passed %v", gotPct)
	}
	select {
	case ev := <-events:
		if len(ev) != 3 || ev[0] == "" || ev[1] == "" {
			t.Errorf("event fields %q", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
}
