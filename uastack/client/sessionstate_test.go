package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// A process dies holding a session and its subscription (unacknowledged
// messages included); the next one activates the same session on a new
// channel from the SessionState the first kept, and takes the subscription
// up without TransferSubscriptions: no value lost, no session created, for
// an anonymous user on an unsecured channel too (whose subscriptions node-opcua
// and our server refuse to transfer).

// sessionSaver keeps the last SessionState a managed session told.
type sessionSaver struct {
	mu sync.Mutex
	st *SessionState
	n  int
}

func (s *sessionSaver) on(_ *ManagedSession, st SessionState) {
	s.mu.Lock()
	s.st, s.n = &st, s.n+1
	s.mu.Unlock()
}

func (s *sessionSaver) last() *SessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// resumable is an upstream for the test: where, the counter and how to
// connect.
type resumable struct {
	url    string
	node   string
	client Config
}

// startResumable starts a managed session with cfg on up and an AckManual
// subscription on its counter (resume: the state to take up), and waits
// for it to connect.
func startResumable(t *testing.T, up resumable, cfg *ManagedConfig, l *resumeLog, resume *ResumeState) (*ManagedSession, *Subscription) {
	t.Helper()
	m, err := NewManagedSession(up.url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	m.Start()
	ctx := ctxT(t)
	if _, err := m.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	if resume != nil && len(resume.Items) == 1 {
		// A resumed subscription delivers (the republished messages first)
		// before CreateSubscription returns: its item keeps its handle.
		l.setHandle(resume.Items[0].Handle)
	}
	sub, err := m.CreateSubscription(ctx, l.config(resume))
	if err != nil {
		t.Fatal(err)
	}
	res, err := sub.CreateMonitoredItems(ctx, []ItemRequest{{NodeID: mustNode(up.node)}}, nil)
	if err != nil || res.Created != 1 {
		t.Fatalf("items: %+v %v", res, err)
	}
	l.setHandle(res.FirstHandle)
	return m, sub
}

func testResumeSession(t *testing.T, up resumable) {
	var a resumeLog
	var saved sessionSaver
	cfg := testManagedConfig(&stateLog{})
	cfg.Client = up.client
	cfg.OnSession = saved.on
	ma, subA := startResumable(t, up, cfg, &a, nil)
	testutil.WaitFor(t, 20*time.Second, "counter values", func() bool { return a.count() >= 20 })
	a.mu2.Lock()
	a.holdAcks = true // from now on the server keeps everything
	a.mu2.Unlock()
	st, ok := subA.ResumeState()
	if !ok {
		t.Fatal("no resume state")
	}
	testutil.WaitFor(t, 20*time.Second, "unacknowledged messages", func() bool { return subA.Unacked() >= 5 })
	kill(ma) // no CloseSession: the server keeps the session
	ss := saved.last()
	if ss == nil || ss.SessionID == "" || ss.AuthenticationToken == "" {
		t.Fatalf("the session's state was not told: %+v", ss)
	}
	a.mu.Lock()
	vals, seqs := append([]float64(nil), a.vals...), append([]uint32(nil), a.vseq...)
	a.mu.Unlock()
	acked := -1.0
	for i := range vals {
		if seqs[i] <= st.LastAcked {
			acked = vals[i]
		}
	}

	var b resumeLog
	var saved2 sessionSaver
	cfg2 := testManagedConfig(&stateLog{})
	cfg2.Client = up.client
	cfg2.SavedSession = func() *SessionState { return ss }
	cfg2.OnSession = saved2.on
	mb, subB := startResumable(t, up, cfg2, &b, &st)
	testutil.WaitFor(t, 20*time.Second, "values after the resume", func() bool { return b.count() >= 40 })

	if subB.ID() != st.SubscriptionID {
		t.Errorf("subscription id %d, want the resumed %d", subB.ID(), st.SubscriptionID)
	}
	if info, _ := subB.Item(b.handle); info.ID != st.Items[0].ServerID {
		t.Errorf("item id %d, want the adopted %d", info.ID, st.Items[0].ServerID)
	}
	if ms := mb.Stats(); ms.Connects != 0 || ms.Reactivations != 1 {
		t.Errorf("managed stats %+v: want the saved session reactivated, none created", ms)
	}
	if s2 := saved2.last(); s2 == nil || s2.SessionID != ss.SessionID {
		t.Errorf("the reactivated session's state %+v, want session %s", s2, ss.SessionID)
	}
	sst := subB.Stats()
	if sst.Adopted != 1 || sst.Transferred != 0 || sst.Recreated != 0 || sst.Lost != 0 {
		t.Errorf("stats %+v: want adopted with its session", sst)
	}
	if ok, at, p, n := b.contiguous(); !ok {
		t.Errorf("value lost after the resume: %v then %v (at %d)", p, n, at)
	}
	b.mu.Lock()
	first, gaps := b.vals[0], b.gaps
	b.mu.Unlock()
	if acked >= 0 && first > acked+1 {
		t.Errorf("first value after the resume %v; the last acknowledged was %v: lost in between", first, acked)
	}
	if len(gaps) != 0 {
		t.Errorf("gaps %v", gaps)
	}
	b.mu2.Lock()
	nred := 0
	for _, r := range b.redeliv {
		if r {
			nred++
		}
	}
	b.mu2.Unlock()
	if nred == 0 {
		t.Error("nothing marked redelivered: the unacknowledged messages were not republished")
	}
	t.Logf("resumed %d after LastAcked %d: first value %v (last acked %v), %d redelivered; %+v", st.SubscriptionID, st.LastAcked, first, acked, nred, sst)
}

// TestResumeSession: against our simulation server, anonymous over None.
func TestResumeSession(t *testing.T) {
	srv := startSim(t, simOptions{DemoRate: 20 * time.Millisecond})
	testResumeSession(t, resumable{url: srv.URL(), node: server.NodeCounter,
		client: Config{SecurityPolicy: "None", Logger: quietLog, RequestTimeout: 3 * time.Second}})
}

// TestResumeSessionNodeOPCUA: against node-opcua, anonymous over None and a
// user over Basic256Sha256 SignAndEncrypt.
func TestResumeSessionNodeOPCUA(t *testing.T) {
	peer := nodeopcua.Start(t, nodeopcua.Options{LargeCount: -1, CounterInterval: 20 * time.Millisecond,
		Env: []string{"COUNTER_EXCEPTION_BASED=1"}})
	store, err := pki.Open(t.TempDir(), pki.Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("anonymous", func(t *testing.T) {
		testResumeSession(t, resumable{url: peer.URL, node: nodeopcua.NodeCounter,
			client: Config{SecurityPolicy: "None", Logger: quietLog, RequestTimeout: 5 * time.Second}})
	})
	t.Run("user", func(t *testing.T) {
		testResumeSession(t, resumable{url: peer.URL, node: nodeopcua.NodeCounter,
			client: Config{SecurityPolicy: "Basic256Sha256", SecurityMode: ua.MessageSecurityModeSignAndEncrypt,
				Identity: UserName("user1", nodeopcua.Users["user1"]), Store: store, AutoAccept: true,
				Logger: quietLog, RequestTimeout: 5 * time.Second}})
	})
}

// TestResumeSessionRefused: a saved session the server no longer has, or
// one made for another user, is not used: a new session is created, and
// the subscription is transferred or created anew as without one.
func TestResumeSessionRefused(t *testing.T) {
	srv := startSim(t, simOptions{DemoRate: 20 * time.Millisecond})
	ctx := ctxT(t)
	c, err := Dial(ctx, srv.URL(), &Config{SecurityPolicy: "None", Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	st := c.SessionState()
	c.Close() // the server no longer has it
	if _, err := ResumeSession(ctx, srv.URL(), &Config{SecurityPolicy: "None", Logger: quietLog}, &st); err == nil || !isNotResumed(err) {
		t.Fatalf("a closed session: %v, want ErrSessionNotResumed", err)
	}
	c2, err := Dial(ctx, srv.URL(), &Config{SecurityPolicy: "None", Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	other := c2.SessionState()
	other.Identity = "user:someone"
	if _, err := ResumeSession(ctx, srv.URL(), &Config{SecurityPolicy: "None", Logger: quietLog}, &other); err == nil || !isNotResumed(err) {
		t.Fatalf("a session of another user: %v, want ErrSessionNotResumed", err)
	}
	// A managed session given a dead one creates its own.
	var l resumeLog
	cfg := testManagedConfig(&stateLog{})
	cfg.SavedSession = func() *SessionState { return &st }
	m, _ := startResumable(t, resumable{url: srv.URL(), node: server.NodeCounter}, cfg, &l, nil)
	testutil.WaitFor(t, 10*time.Second, "values", func() bool { return l.count() >= 5 })
	if ms := m.Stats(); ms.Connects != 1 || ms.Reactivations != 0 {
		t.Errorf("managed stats %+v: want a new session", ms)
	}
}

func isNotResumed(err error) bool { return errors.Is(err, ErrSessionNotResumed) }
