package bridge

import (
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// TestResumeLoopRests: at rest (no value changes, only keep-alives) the
// resume loop sleeps without a timer; a change wakes it, and the record it
// then saves holds the new acknowledgement, after which it rests again.
func TestResumeLoopRests(t *testing.T) {
	srv := startSim(t, time.Hour, 0)
	m := startSession(t, srv.URL())
	q := newTestQueue(t, "q")
	q.guarantee = config.AtLeastOnce
	st := &flakyStore{}
	cfg := config.WriterGroup{
		Name: "rest", PublishingInterval: config.Duration(50 * time.Millisecond),
		Nodes:   config.NodeDefaults{SamplingInterval: dur(0)},
		Writers: []config.DataSetWriter{{Name: "w", Fields: []config.Field{{Name: "Setpoint", Node: server.NodeSetpoint}}}},
	}
	// A record whose only change is LastAcked is saved at most every
	// ackedEvery (10 s): shortened here.
	g := startGroupWith(t, m, cfg, Options{Queues: []sink.Queue{q}, Resume: st, ResumeInterval: 50 * time.Millisecond},
		func(g *WriterGroup) { g.ackedEvery = 200 * time.Millisecond })
	lastAcked := func() uint32 {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.rec.State.LastAcked
	}
	testutil.WaitFor(t, 20*time.Second, "the first value acknowledged and saved", func() bool { return lastAcked() >= 1 })
	testutil.WaitFor(t, 20*time.Second, "the resume loop at rest", g.resumeRest.Load)
	before := lastAcked()

	for i, v := range []float64{17, 18, 19} {
		if err := m.Client().WriteValue(ctxT(t), ua.MustParseNodeID(server.NodeSetpoint), ua.NewDoubleVariant(v)); err != nil {
			t.Fatal(err)
		}
		want := before + uint32(i) + 1
		testutil.WaitFor(t, 20*time.Second, "the change's acknowledgement saved", func() bool { return lastAcked() >= want })
		testutil.WaitFor(t, 20*time.Second, "the resume loop at rest again", g.resumeRest.Load)
	}
}
