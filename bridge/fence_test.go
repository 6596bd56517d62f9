package bridge

import (
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/fence"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/server"
)

// TestWriterGroupFence: a writer group publishes while its lease's fence
// is open — its messages carry the fence, their MessageIds (the retained
// metadata's too) the holding's epoch — and nothing once the deadline has passed: its cycles
// reach no queue, and at least once their sequence numbers are held
// (never acknowledged: the server keeps them for the next holder).
func TestWriterGroupFence(t *testing.T) {
	srv := startSim(t, 50*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	q := newTestQueue(t, "alo")
	q.guarantee = config.AtLeastOnce
	f := fence.New(42, time.Now().Add(time.Hour))
	cfg := config.WriterGroup{
		Name: "fenced", PublishingInterval: config.Duration(100 * time.Millisecond), MaxUnacked: 1000,
		Writers: []config.DataSetWriter{{Name: "w", Fields: []config.Field{{Name: "Counter", Node: server.NodeCounter}}}},
	}
	var fences []*fence.Fence
	probe := &fenceProbe{testQueue: q, seen: &fences}
	g := startGroup(t, m, cfg, Options{Queues: []sink.Queue{probe}, Fence: f})
	testutil.WaitFor(t, 20*time.Second, "data while the fence is open", func() bool {
		return len(dataSetMessages(q.all(), "w")) >= 5 && g.Stats().Acked >= 3
	})
	mds, _ := metaDataOf(q.all(), "w")
	if len(mds) == 0 || !strings.HasPrefix(mds[0].MessageID, EpochPrefix+"42-") {
		t.Fatalf("metadata MessageId without the epoch: %+v", mds)
	}
	ids := map[string]bool{}
	for _, d := range dataSetMessages(q.all(), "w") {
		if id := d.nm.MessageID; !strings.HasPrefix(id, EpochPrefix+"42-") || len(id) < len(EpochPrefix+"42-")+36 {
			t.Fatalf("data MessageId %q: want the epoch and a UUID", id)
		}
		ids[d.nm.MessageID] = true
	}
	if len(ids) < 5 {
		t.Errorf("%d distinct MessageIds", len(ids))
	}
	probe.mu.Lock()
	for _, x := range fences {
		if x != f {
			t.Errorf("a message without the group's fence")
		}
	}
	probe.mu.Unlock()

	f.Close() // the deadline passed
	// Wait for a cycle that began after the close to be dropped.
	testutil.WaitFor(t, 20*time.Second, "cycles past the fence dropped", func() bool { return g.Stats().Fenced >= 5 })
	before := len(q.all())
	acked := g.Stats().Acked
	testutil.WaitFor(t, 20*time.Second, "more cycles past the fence", func() bool { return g.Stats().Fenced >= 10 })
	if n := len(q.all()); n > before {
		t.Errorf("%d messages reached the queue after the fence closed", n-before)
	}
	st := g.Stats()
	if st.Acked != acked {
		t.Errorf("%d sequence numbers acknowledged after the fence closed", st.Acked-acked)
	}
	if u := g.Subscription().Unacked(); u < 5 {
		t.Errorf("the subscription holds %d unacknowledged messages; the fenced ones must stay for the next holder", u)
	}
}

// fenceProbe is a testQueue that records the fence of every message.
type fenceProbe struct {
	*testQueue
	seen *[]*fence.Fence
}

func (p *fenceProbe) Enqueue(m *sink.Message) {
	p.mu.Lock()
	*p.seen = append(*p.seen, m.Fence)
	p.mu.Unlock()
	p.testQueue.Enqueue(m)
}
