package client

import (
	"context"
	"github.com/uagate/gateway/internal/testutil"
	"testing"
	"time"
)

// TestDetachKeepsSubscription: Detach ends a session the way a replica that
// hands its work over does: after it no handler runs, the subscription stays
// at the server, and its ResumeState (taken after Detach, so with the last
// acknowledgements) lets a new session resume it without losing a value.
// Close, by contrast, deletes it: the same resume then finds nothing.
func TestDetachKeepsSubscription(t *testing.T) {
	srv := startSim(t, simOptions{DemoRate: 20 * time.Millisecond, AllPolicies: true})
	signed := signedAnonymous(t)
	var a resumeLog
	ma, subA := resumeSession(t, srv.URL(), &a, nil, signed)
	testutil.WaitFor(t, 10*time.Second, "counter values", func() bool { return a.count() >= 20 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ma.Detach(ctx); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	n := a.count()
	st, ok := subA.ResumeState()
	if !ok || st.SubscriptionID != subA.ID() || len(st.Items) != 1 {
		t.Fatalf("ResumeState after Detach %+v %v", st, ok)
	}
	a.mu.Lock()
	lastVal, lastSeq := a.vals[len(a.vals)-1], a.vseq[len(a.vseq)-1]
	a.mu.Unlock()
	// Everything delivered was acknowledged before the session closed.
	if st.LastAcked != lastSeq {
		t.Errorf("LastAcked %d after Detach, the last delivered message was %d", st.LastAcked, lastSeq)
	}
	if err := ma.Close(ctx); err != nil {
		t.Errorf("Close after Detach: %v", err)
	}

	var b resumeLog
	mb, subB := resumeSession(t, srv.URL(), &b, &st, signed)
	testutil.WaitFor(t, 10*time.Second, "values after the resume", func() bool { return b.count() >= 20 })
	if a.count() != n {
		t.Errorf("the detached session delivered %d more values", a.count()-n)
	}
	if sst := subB.Stats(); sst.Transferred != 1 || sst.Recreated != 0 || sst.Lost != 0 {
		t.Errorf("resume after Detach: stats %+v", sst)
	}
	if ok, at, p, nx := b.contiguous(); !ok {
		t.Errorf("value lost after the resume: %v then %v (at %d)", p, nx, at)
	}
	b.mu.Lock()
	first := b.vals[0]
	b.mu.Unlock()
	if first > lastVal+1 {
		t.Errorf("first value after the resume %v, the last before Detach %v: lost in between", first, lastVal)
	}

	// Close deletes the subscription: resuming it finds nothing.
	st2, ok := subB.ResumeState()
	if !ok {
		t.Fatal("no ResumeState")
	}
	if err := mb.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var c resumeLog
	_, subC := resumeSession(t, srv.URL(), &c, &st2, signed)
	testutil.WaitFor(t, 10*time.Second, "values after the recreation", func() bool { return c.count() >= 5 })
	if sst := subC.Stats(); sst.Transferred != 0 || sst.Recreated != 1 {
		t.Errorf("resume after Close: stats %+v, want a recreation", sst)
	}
}

// TestSuspendKeepsSession: Suspend ends a session's use the way a process
// that stops for a restart does: the acknowledgements sent, the channel cut
// without CloseSession. The next process activates the same session again
// from its SessionState and its subscription goes on without a transfer,
// anonymous over None too, without a value lost.
func TestSuspendKeepsSession(t *testing.T) {
	srv := startSim(t, simOptions{DemoRate: 20 * time.Millisecond})
	var saved sessionSaver
	var a resumeLog
	ma, subA := resumeSession(t, srv.URL(), &a, nil, func(c *ManagedConfig) { c.OnSession = saved.on })
	testutil.WaitFor(t, 10*time.Second, "counter values", func() bool { return a.count() >= 20 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ma.Suspend(ctx); err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	st, ok := subA.ResumeState()
	if !ok {
		t.Fatal("no ResumeState after Suspend")
	}
	a.mu.Lock()
	lastVal, lastSeq := a.vals[len(a.vals)-1], a.vseq[len(a.vseq)-1]
	a.mu.Unlock()
	if st.LastAcked != lastSeq {
		t.Errorf("LastAcked %d after Suspend, the last delivered message was %d", st.LastAcked, lastSeq)
	}
	ss := saved.last()
	var b resumeLog
	mb, subB := resumeSession(t, srv.URL(), &b, &st, func(c *ManagedConfig) {
		c.SavedSession = func() *SessionState { return ss }
	})
	testutil.WaitFor(t, 10*time.Second, "values after the restart", func() bool { return b.count() >= 20 })
	if ms := mb.Stats(); ms.Connects != 0 || ms.Reactivations != 1 {
		t.Errorf("managed stats %+v: want the suspended session activated again", ms)
	}
	if sst := subB.Stats(); sst.Adopted != 1 || sst.Transferred != 0 || sst.Recreated != 0 || sst.Lost != 0 {
		t.Errorf("stats %+v", sst)
	}
	if ok, at, p, nx := b.contiguous(); !ok {
		t.Errorf("value lost after the restart: %v then %v (at %d)", p, nx, at)
	}
	b.mu.Lock()
	first := b.vals[0]
	b.mu.Unlock()
	if first > lastVal+1 {
		t.Errorf("first value after the restart %v, the last before Suspend %v: lost in between", first, lastVal)
	}
}
