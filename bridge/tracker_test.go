package bridge

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/uagate/gateway/bridge/sink"
)

// recordingAcker is the upstream side of the tracker in unit tests: it
// records what was acknowledged, in order.
type recordingAcker struct {
	mu    sync.Mutex
	acked []uint32
	fail  bool
}

func (a *recordingAcker) Ack(seq uint32) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail {
		return errors.New("ack refused")
	}
	a.acked = append(a.acked, seq)
	return nil
}

func (a *recordingAcker) got() []uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.acked)
}

// trackedMessage makes a real sink.Message carrying seq, counted by tr, with
// holders references (one per queue it would be handed to).
func trackedMessage(tr *ackTracker, seq uint32, holders int) *sink.Message {
	m := sink.NewMessage(16)
	m.SetPayload([]byte(`{"x":1}`))
	m.Token = uint64(seq)
	m.Tracker = tr
	tr.add(seq)
	m.Retain(holders - 1)
	return m
}

func TestAckTrackerOutOfOrder(t *testing.T) {
	a := &recordingAcker{}
	tr := newAckTracker(a, 2, nil)
	want := func(step string, seqs ...uint32) {
		t.Helper()
		if got := a.got(); !slices.Equal(got, seqs) {
			t.Fatalf("%s: acknowledged %v, want %v", step, got, seqs)
		}
	}

	// seq 1: three messages, the first held by two queues.
	m1a := trackedMessage(tr, 1, 2)
	m1b := trackedMessage(tr, 1, 1)
	m1c := trackedMessage(tr, 1, 1)
	// seq 2: two messages, the second held by two queues.
	m2a := trackedMessage(tr, 2, 1)
	m2b := trackedMessage(tr, 2, 2)

	m1a.Done(true) // one holder of two
	m2a.Done(true)
	want("before hand-over")
	tr.handed(1)
	want("seq 1 handed, messages pending")
	tr.handed(2)
	m2b.Done(true)
	want("seq 2: one holder left")
	m2b.Done(true)
	want("seq 2 settled before seq 1", 2)

	tr.handed(3) // a message that produced no sink message
	want("seq 3 without messages", 2, 3)

	m1a.Done(true)
	m1c.Done(true)
	want("seq 1: m1b pending", 2, 3)
	m1b.Done(true)
	want("seq 1 settled", 2, 3, 1)

	// seq 4: one holder fails: never acknowledged.
	m4 := trackedMessage(tr, 4, 2)
	m4.Done(false)
	tr.handed(4)
	m4.Done(true)
	want("seq 4 undelivered", 2, 3, 1)
	if n := tr.undelivered.Load(); n != 1 {
		t.Fatalf("undelivered = %d, want 1", n)
	}

	// seq 5: settled before the hand-over: acknowledged at the hand-over.
	m5 := trackedMessage(tr, 5, 1)
	m5.Done(true)
	want("seq 5 settled, not handed", 2, 3, 1)
	tr.handed(5)
	want("seq 5 handed", 2, 3, 1, 5)

	if n := tr.unacked(); n != 0 {
		t.Fatalf("unacked = %d, want 0", n)
	}
	if n := tr.strays.Load(); n != 0 {
		t.Fatalf("strays = %d", n)
	}
}

// TestAckTrackerMany runs more sequence numbers than the ring holds, settled
// in reverse order from another goroutine, and with a failing acker.
func TestAckTrackerMany(t *testing.T) {
	a := &recordingAcker{}
	tr := newAckTracker(a, 4, quietLog)
	const n = 200
	var msgs []*sink.Message
	for s := uint32(1); s <= n; s++ {
		for range 3 {
			msgs = append(msgs, trackedMessage(tr, s, 2))
		}
		tr.handed(s)
	}
	if u := tr.unacked(); u != n {
		t.Fatalf("unacked = %d, want %d", u, n)
	}
	var wg sync.WaitGroup
	for _, h := range []int{0, 1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := len(msgs) - 1; i >= 0; i-- {
				msgs[i].Done(!(h == 1 && i/3 == 9)) // seq 10 undelivered
			}
		}()
	}
	wg.Wait()
	got := a.got()
	if len(got) != n-1 || slices.Contains(got, 10) {
		t.Fatalf("acknowledged %d sequence numbers (10 among them: %v), want %d without 10", len(got), slices.Contains(got, 10), n-1)
	}
	slices.Sort(got)
	for i, s := range got {
		want := uint32(i + 1)
		if want >= 10 {
			want++
		}
		if s != want {
			t.Fatalf("acknowledged[%d] = %d, want %d", i, s, want)
		}
	}
	if u := tr.unacked(); u != 0 {
		t.Fatalf("unacked = %d after all settled", u)
	}

	// An acker that fails is counted, not retried.
	a.fail = true
	m := trackedMessage(tr, n+1, 1)
	tr.handed(n + 1)
	m.Done(true)
	if e := tr.ackErrors.Load(); e != 1 {
		t.Fatalf("ack errors = %d, want 1", e)
	}
}

func TestAckTrackerWrap(t *testing.T) {
	a := &recordingAcker{}
	tr := newAckTracker(a, 2, nil)
	seqs := []uint32{0xFFFFFFFE, 0xFFFFFFFF, 1, 2} // sequence numbers wrap past 0
	var ms []*sink.Message
	for _, s := range seqs {
		ms = append(ms, trackedMessage(tr, s, 1))
		tr.handed(s)
	}
	for i := len(ms) - 1; i >= 0; i-- {
		ms[i].Done(true)
	}
	if got := a.got(); !slices.Equal(got, []uint32{2, 1, 0xFFFFFFFF, 0xFFFFFFFE}) {
		t.Fatalf("acknowledged %v", got)
	}
}
