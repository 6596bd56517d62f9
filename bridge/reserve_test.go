package bridge

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/resume"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/server"
)

// flakyStore is a resume.Store in memory whose saves fail while fail is set.
type flakyStore struct {
	mu       sync.Mutex
	fail     bool
	rec      resume.Record
	ok       bool
	failures int
}

func (s *flakyStore) LoadResume(string) (resume.Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec, s.ok, nil
}

func (s *flakyStore) SaveResume(_ string, r resume.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		s.failures++
		return errors.New("the store is down")
	}
	s.rec, s.ok = r, true
	return nil
}

func (s *flakyStore) set(fail bool) {
	s.mu.Lock()
	s.fail = fail
	s.mu.Unlock()
}

// reserved is the first SequenceNumber the last saved record leaves to a
// successor.
func (s *flakyStore) reserved(t *testing.T) uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ok || len(s.rec.Writers) != 1 {
		t.Fatalf("saved record: %+v", s.rec)
	}
	return s.rec.Writers[0].Seq
}

// TestSharedRecordReservation: with a shared resume record (scale-out), a
// writer never uses a SequenceNumber its last saved record did not reserve
// (a successor goes on from that reservation): while the record cannot be
// saved, the group holds its messages at the reservation, goes on once a
// save succeeds, and a Stop while it holds returns.
func TestSharedRecordReservation(t *testing.T) {
	srv := startSim(t, 10*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	q := newTestQueue(t, "q")
	st := &flakyStore{}
	cfg := config.WriterGroup{
		Name: "shared", PublishingInterval: config.Duration(50 * time.Millisecond),
		Nodes:   config.NodeDefaults{SamplingInterval: dur(0), QueueSize: 10},
		Writers: []config.DataSetWriter{{Name: "w", Fields: []config.Field{{Name: "Counter", Node: server.NodeCounter}}}},
	}
	// Saved every 100 ms with no horizon: the reservations are small (a few
	// dozen numbers), so the writer reaches them.
	g := startGroup(t, m, cfg, Options{Queues: []sink.Queue{q}, Resume: st, ResumeShared: true,
		MarksDir: t.TempDir(), ResumeInterval: 100 * time.Millisecond})
	maxSeq := func() (uint32, int) {
		ds := dataSetMessages(q.all(), "w")
		hi := uint32(0)
		for _, d := range ds {
			hi = max(hi, d.SequenceNumber)
		}
		return hi, len(ds)
	}
	testutil.WaitFor(t, 20*time.Second, "data", func() bool { _, n := maxSeq(); return n >= 20 })

	st.set(true)
	r := st.reserved(t)
	testutil.WaitFor(t, 20*time.Second, "the writer held at its reservation, or beyond it", func() bool {
		hi, _ := maxSeq()
		return g.reserveHeld.Load() >= 3 || hi >= r
	})
	if hi, n := maxSeq(); hi >= r {
		t.Fatalf("SequenceNumber %d written beyond the saved reservation %d (%d DataSetMessages)", hi, r, n)
	} else {
		t.Logf("held at %d of the reservation %d after %d DataSetMessages", hi, r, n)
	}

	st.set(false)
	testutil.WaitFor(t, 20*time.Second, "data beyond the old reservation once saved", func() bool { hi, _ := maxSeq(); return hi >= r })
	r2 := st.reserved(t)
	if hi, _ := maxSeq(); hi >= r2 {
		t.Errorf("SequenceNumber %d beyond the reservation %d", hi, r2)
	}

	// Held again, then stopped: the handler gives up, Stop returns.
	st.set(true)
	held := g.reserveHeld.Load()
	testutil.WaitFor(t, 20*time.Second, "held again", func() bool { return g.reserveHeld.Load() >= held+2 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Stop(ctx); err != nil {
		t.Errorf("Stop while held: %v", err)
	}
	if hi, _ := maxSeq(); hi >= st.reserved(t) {
		t.Errorf("SequenceNumber %d beyond the reservation %d", hi, st.reserved(t))
	}
}
