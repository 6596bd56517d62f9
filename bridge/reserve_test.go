package bridge

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/resume"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/client"
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

// TestSharedTakeoverReplay: a holder that takes a writer group over (a
// shared record, no marks of the last holder) sends what the server
// republishes up to the last holder's Handed mark to the at-least-once
// queues only, marked redelivered: the at-most-once queues had it. The
// at-least-once queue of the first holder confirms nothing, so everything
// it got is republished; together the holders' at-least-once queues have
// every counter value, and the at-most-once ones get again only what the
// first holder handed over after its last save. Against our simulator
// (a user over None) and node-opcua (a user over Basic256Sha256
// SignAndEncrypt: it transfers an identified user's subscriptions only).
func TestSharedTakeoverReplay(t *testing.T) {
	t.Run("sim", func(t *testing.T) {
		srv := startSimWith(t, 20*time.Millisecond, 0, func(c *server.Config) { c.Users = map[string]string{"op": "secret"} })
		sharedTakeover(t, server.NodeCounter, func() *client.ManagedSession {
			return startSessionAs(t, srv.URL(), client.UserName("op", "secret"), "None")
		})
	})
	t.Run("node-opcua", func(t *testing.T) {
		// Every change reported (exception-based), as the simulator does.
		peer := nodeopcua.Start(t, nodeopcua.Options{LargeCount: -1, CounterInterval: 20 * time.Millisecond,
			Env: []string{"COUNTER_EXCEPTION_BASED=1"}})
		sharedTakeover(t, nodeopcua.NodeCounter, func() *client.ManagedSession {
			return startSessionAs(t, peer.URL, client.UserName("user1", nodeopcua.Users["user1"]), "Basic256Sha256")
		})
	})
}

// sharedTakeover is TestSharedTakeoverReplay on the server session
// connects to, whose counter is node.
func sharedTakeover(t *testing.T, node string, session func() *client.ManagedSession) {
	st := &flakyStore{}
	cfg := config.WriterGroup{
		Name: "g", PublishingInterval: config.Duration(50 * time.Millisecond), MaxUnacked: 1000,
		Nodes:   config.NodeDefaults{SamplingInterval: dur(0), QueueSize: 100},
		Writers: []config.DataSetWriter{{Name: "w", Fields: []config.Field{{Name: "Counter", Node: node}}}},
	}
	holder := func(alo, amo *testQueue) (*WriterGroup, *client.ManagedSession) {
		m := session()
		alo.guarantee = config.AtLeastOnce
		g := startGroup(t, m, cfg, Options{Queues: []sink.Queue{alo, amo}, Resume: st, ResumeShared: true,
			MarksDir: t.TempDir(), ResumeInterval: 200 * time.Millisecond, ResumeHorizon: time.Second})
		return g, m
	}
	aloA, amoA := newTestQueue(t, "aloA"), newTestQueue(t, "amoA")
	aloA.hold = true // confirms nothing: the server keeps every message
	gA, mA := holder(aloA, amoA)
	testutil.WaitFor(t, 20*time.Second, "the first holder's data and a record with its Handed mark", func() bool {
		st.mu.Lock()
		h := st.rec.Handed
		st.mu.Unlock()
		return len(dataSetMessages(amoA.all(), "w")) >= 20 && h >= 10
	})
	// The first holder dies: its session let go, the subscription kept at
	// the server, nothing saved since its last record.
	st.set(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mA.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	if err := gA.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	st.set(false)
	st.mu.Lock()
	handed := st.rec.Handed
	st.mu.Unlock()

	// What the first holder's at-most-once queue had, by counter value,
	// and which notification message carried it.
	counters := func(q *testQueue) map[int64]dsm {
		out := map[int64]dsm{}
		for _, d := range dataSetMessages(q.all(), "w") {
			if dv, ok := fieldValue(&d.DataSetMessage, "Counter"); ok {
				if f, ok := dv.Value.AsFloat64(); ok {
					out[int64(f)] = d
				}
			}
		}
		return out
	}
	hadA := counters(amoA)
	lastA := int64(0)
	for v := range hadA {
		lastA = max(lastA, v)
	}

	aloB, amoB := newTestQueue(t, "aloB"), newTestQueue(t, "amoB")
	gB, _ := holder(aloB, amoB)
	defer func() {
		if t.Failed() {
			t.Logf("lastA %d handed %d; B: %+v; aloB %d, amoB %d values", lastA, handed, gB.Stats(), len(counters(aloB)), len(counters(amoB)))
		}
	}()
	testutil.WaitFor(t, 20*time.Second, "the second holder beyond the first's values", func() bool {
		for v := range counters(amoB) {
			if v > lastA+20 {
				return true
			}
		}
		return false
	})
	// The at-most-once queue gets again only what came after the Handed
	// mark of the record the takeover read.
	again, replayed := 0, 0
	for v := range counters(amoB) {
		if d, ok := hadA[v]; ok {
			again++
			if uint32(d.token) <= handed {
				t.Errorf("counter %d (notification message %d, at or before the handed mark %d) sent again to the at-most-once queue", v, d.token, handed)
			}
		}
	}
	// The at-least-once queues have every value from the first on, the
	// replay marked.
	hadALO := counters(aloA)
	for v, d := range counters(aloB) {
		hadALO[v] = d
		if _, ok := hadA[v]; ok && uint32(hadA[v].token) <= handed {
			replayed++
			if !strings.HasPrefix(d.nm.MessageID, RedeliveredPrefix) {
				t.Errorf("counter %d replayed to the at-least-once queue in a message not marked redelivered: %q", v, d.nm.MessageID)
			}
		}
	}
	first := lastA
	for v := range hadALO {
		first = min(first, v)
	}
	for v := first; v <= lastA+20; v++ {
		if _, ok := hadALO[v]; !ok {
			t.Errorf("counter %d missing from the at-least-once queues", v)
		}
	}
	if replayed == 0 {
		t.Error("nothing replayed to the at-least-once queue")
	}
	t.Logf("handed mark %d; at-least-once replay %d values; at-most-once again %d values (after the mark)", handed, replayed, again)
}
