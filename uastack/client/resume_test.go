package client

import (
	"github.com/uagate/gateway/internal/testutil"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// resumeLog records the Counter values of an AckManual subscription with the
// sequence number and the Redelivered flag of each, and acknowledges what
// ackBelow allows (0: everything).
type resumeLog struct {
	counterLog
	mu2       sync.Mutex
	redeliv   map[uint32]bool // seq → Redelivered
	holdAcks  bool
	unackable []uint32
}

func (l *resumeLog) onDataR(s *Subscription, seq uint32, items []ua.MonitoredItemNotification) {
	l.onData(s, seq, items)
	l.mu2.Lock()
	if l.redeliv == nil {
		l.redeliv = map[uint32]bool{}
	}
	l.redeliv[seq] = s.Redelivered()
	l.mu2.Unlock()
}

func (l *resumeLog) onDone(s *Subscription, seq uint32) {
	l.mu2.Lock()
	hold := l.holdAcks
	if hold {
		l.unackable = append(l.unackable, seq)
	}
	l.mu2.Unlock()
	if !hold {
		_ = s.Ack(seq)
	}
}

func (l *resumeLog) config(resume *ResumeState) *SubscriptionConfig {
	cfg := l.counterLog.config()
	cfg.PublishingInterval = 50 * time.Millisecond
	cfg.OnDataChange = l.onDataR
	cfg.AckMode = AckManual
	cfg.MaxUnacked = 32
	cfg.OnMessageDone = l.onDone
	cfg.Resume = resume
	return cfg
}

// kill ends a managed session the way a killed process does: its worker
// stops and its channel is cut, without CloseSession, so the server keeps
// the session and its subscriptions.
func kill(m *ManagedSession) {
	c := m.Client()
	m.cancel()
	<-m.done
	if c != nil {
		c.abandon()
	}
}

func resumeSession(t *testing.T, url string, l *resumeLog, resume *ResumeState, mods ...func(*ManagedConfig)) (*ManagedSession, *Subscription) {
	t.Helper()
	cfg := testManagedConfig(&stateLog{})
	for _, f := range mods {
		f(cfg)
	}
	return startResumable(t, resumable{url: url, node: server.NodeCounter}, cfg, l, resume)
}

// TestResumeTransfer: a session dies holding unacknowledged messages; a new
// session of the same user resumes the subscription from its ResumeState
// (without the first session's state: TransferSubscriptions): the same
// subscription and item ids, the unacknowledged messages republished and
// marked Redelivered, and no counter value lost between what the first one
// acknowledged and what the second one gets.
func TestResumeTransfer(t *testing.T) {
	srv := startSim(t, simOptions{DemoRate: 20 * time.Millisecond, AllPolicies: true})
	signed := signedAnonymous(t)
	var a resumeLog
	ma, subA := resumeSession(t, srv.URL(), &a, nil, signed)
	testutil.WaitFor(t, 10*time.Second, "counter values", func() bool { return a.count() >= 20 })
	// From now on nothing is acknowledged: the server keeps it all.
	a.mu2.Lock()
	a.holdAcks = true
	a.mu2.Unlock()
	st, ok := subA.ResumeState()
	if !ok || st.SubscriptionID != subA.ID() || len(st.Items) != 1 || st.Items[0].Handle != a.handle {
		t.Fatalf("ResumeState %+v %v", st, ok)
	}
	info, _ := subA.Item(a.handle)
	if st.Items[0].ServerID != info.ID {
		t.Fatalf("item server id %d, want %d", st.Items[0].ServerID, info.ID)
	}
	testutil.WaitFor(t, 10*time.Second, "unacknowledged messages", func() bool { return subA.Unacked() >= 5 })
	kill(ma)
	a.mu.Lock()
	vals, seqs := append([]float64(nil), a.vals...), append([]uint32(nil), a.vseq...)
	a.mu.Unlock()
	var acked float64 = -1 // the last value of an acknowledged message
	for i := range vals {
		if seqs[i] <= st.LastAcked {
			acked = vals[i]
		}
	}
	if acked < 0 {
		t.Fatalf("nothing acknowledged before the state was taken (LastAcked %d)", st.LastAcked)
	}

	var b resumeLog
	_, subB := resumeSession(t, srv.URL(), &b, &st, signed)
	testutil.WaitFor(t, 10*time.Second, "values after the resume", func() bool { return b.count() >= 40 })
	if subB.ID() != st.SubscriptionID {
		t.Errorf("subscription id %d, want the resumed %d", subB.ID(), st.SubscriptionID)
	}
	if info, _ := subB.Item(b.handle); info.ID != st.Items[0].ServerID {
		t.Errorf("item id %d, want the adopted %d", info.ID, st.Items[0].ServerID)
	}
	if ok, at, p, n := b.contiguous(); !ok {
		t.Errorf("value lost after the resume: %v then %v (at %d)", p, n, at)
	}
	b.mu.Lock()
	first, gaps := b.vals[0], b.gaps
	firstSeq := b.vseq[0]
	b.mu.Unlock()
	if first > acked+1 {
		t.Errorf("first value after the resume %v; the last acknowledged was %v: lost in between", first, acked)
	}
	if len(gaps) != 0 {
		t.Errorf("gaps %v", gaps)
	}
	b.mu2.Lock()
	red := b.redeliv[firstSeq]
	nred := 0
	for _, r := range b.redeliv {
		if r {
			nred++
		}
	}
	b.mu2.Unlock()
	if !red || nred < 5 {
		t.Errorf("first message after the resume redelivered=%v, %d marked; want the held ones marked", red, nred)
	}
	sst := subB.Stats()
	if sst.Transferred != 1 || sst.Recreated != 0 || sst.Lost != 0 || sst.Republished < 5 {
		t.Errorf("stats %+v", sst)
	}
	// The new owner's state goes on from there.
	st2, ok := subB.ResumeState()
	if !ok || st2.SubscriptionID != st.SubscriptionID || !seqAfter(st2.LastAcked, st.LastAcked) {
		t.Errorf("ResumeState after the resume %+v, before %+v", st2, st)
	}
	t.Logf("resumed %d after LastAcked %d: first value %v (last acked %v), %d redelivered; %+v", st.SubscriptionID, st.LastAcked, first, acked, nred, sst)
}

// signedAnonymous makes sessions of one client application (one
// certificate store) on Basic256Sha256 Sign channels: an anonymous user's
// subscriptions move between them with TransferSubscriptions (Part 4
// §5.13.7), not between sessions on unsecured channels.
func signedAnonymous(t *testing.T) func(*ManagedConfig) {
	store, err := pki.Open(t.TempDir(), pki.Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	return func(c *ManagedConfig) {
		c.Client.SecurityPolicy, c.Client.SecurityMode = "Basic256Sha256", ua.MessageSecurityModeSign
		c.Client.Store, c.Client.AutoAccept = store, true
	}
}

// TestResumeGone: the subscription to resume does not exist (the server
// restarted): it is created anew, OnGap reports the loss with to == 0, and
// the first values are the current ones.
func TestResumeGone(t *testing.T) {
	srv := startSim(t, simOptions{DemoRate: 20 * time.Millisecond})
	var b resumeLog
	st := ResumeState{SubscriptionID: 987654, Items: []ResumeItem{{Handle: 1, ServerID: 4242}}, LastAcked: 77}
	_, sub := resumeSession(t, srv.URL(), &b, &st)
	testutil.WaitFor(t, 10*time.Second, "values", func() bool { return b.count() >= 10 })
	if sub.ID() == 0 || sub.ID() == st.SubscriptionID {
		t.Errorf("subscription id %d", sub.ID())
	}
	if info, _ := sub.Item(b.handle); info.ID == 0 || info.ID == 4242 {
		t.Errorf("item id %d: not created anew", info.ID)
	}
	b.mu.Lock()
	gaps := b.gaps
	b.mu.Unlock()
	if len(gaps) != 1 || gaps[0] != [2]uint32{78, 0} {
		t.Errorf("gaps %v, want [[78 0]]", gaps)
	}
	if sst := sub.Stats(); sst.Recreated != 1 || sst.Transferred != 0 {
		t.Errorf("stats %+v", sst)
	}
	if ok, at, p, n := b.contiguous(); !ok {
		t.Errorf("values %v then %v at %d", p, n, at)
	}
}

// TestResumeMark: ResumeMark tells a writer group, which asks every second,
// whether the resume state changed, without copying the items' ids (a fresh
// list each second is megabytes of garbage per second at a million items; a
// cached one stays resident). The mark stays
// equal and allocates nothing while nothing changes; a deletion moves it;
// ResumeState lists the items as they are then, in a list of its own.
func TestResumeMark(t *testing.T) {
	srv := startSim(t, simOptions{DemoRate: 20 * time.Millisecond})
	var l resumeLog
	_, sub := resumeSession(t, srv.URL(), &l, nil)
	ctx := ctxT(t)
	const more = 999
	reqs := make([]ItemRequest, more)
	for i := range reqs {
		reqs[i] = ItemRequest{NodeID: mustNode(server.NodeCounter)}
	}
	res, err := sub.CreateMonitoredItems(ctx, reqs, nil)
	if err != nil || res.Created != more {
		t.Fatalf("items: %+v %v", res, err)
	}
	m1, ok := sub.ResumeMark()
	if !ok || m1.SubscriptionID == 0 {
		t.Fatalf("ResumeMark: %+v %v", m1, ok)
	}
	a, ok := sub.ResumeState()
	if !ok || len(a.Items) != more+1 || a.SubscriptionID != m1.SubscriptionID {
		t.Fatalf("ResumeState: %d items, %v; want %d", len(a.Items), ok, more+1)
	}
	if m2, _ := sub.ResumeMark(); m2 != m1 {
		t.Fatalf("the mark moved with nothing changed: %+v then %+v", m1, m2)
	}
	if n := testing.AllocsPerRun(20, func() { sub.ResumeMark() }); n != 0 {
		t.Errorf("ResumeMark: %v allocations per call, want 0", n)
	}
	gone := a.Items[len(a.Items)-1]
	if err := sub.DeleteMonitoredItems(ctx, []uint32{gone.Handle}); err != nil {
		t.Fatal(err)
	}
	m3, ok := sub.ResumeMark()
	if !ok || m3 == m1 || m3.SubscriptionID != m1.SubscriptionID {
		t.Fatalf("after a deletion the mark is %+v (before %+v)", m3, m1)
	}
	c, ok := sub.ResumeState()
	if !ok || len(c.Items) != more || &c.Items[0] == &a.Items[0] {
		t.Fatalf("after a deletion: %d items (want %d), new list %v", len(c.Items), more, ok && len(c.Items) > 0 && &c.Items[0] != &a.Items[0])
	}
	if len(a.Items) != more+1 || a.Items[len(a.Items)-1] != gone {
		t.Error("the deletion changed a list handed out before")
	}
	for _, it := range c.Items {
		if it.Handle == gone.Handle {
			t.Errorf("deleted handle %d still in the list", gone.Handle)
		}
	}
}
