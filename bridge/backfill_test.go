package bridge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// TestFinishBackfillEndsWaits: a stop that comes after a gap, before a
// field's first value after it, still fills the field's lost range (up to
// the gap) from the server's history: FinishBackfill ends the waits as
// their time-out would. Publishing every 10 s, the counter changing every
// 50 ms: the stop comes long before the field's next value. Against our
// simulator and node-opcua's historizing counter.
func TestFinishBackfillEndsWaits(t *testing.T) {
	t.Run("sim", func(t *testing.T) {
		srv := startSimWith(t, time.Hour, 0, func(c *server.Config) { c.Sim = server.HistorizingCounters(1, 50*time.Millisecond) })
		finishBackfillEndsWaits(t, srv.URL(), server.LoadNode(0, 0))
	})
	t.Run("node-opcua", func(t *testing.T) {
		peer := nodeopcua.Start(t, nodeopcua.Options{LargeCount: -1, CounterInterval: 50 * time.Millisecond,
			Env: []string{"COUNTERS=1", "HISTORY_VALUES=3000"}})
		finishBackfillEndsWaits(t, peer.URL, nodeopcua.CounterNode(0))
	})
}

// finishBackfillEndsWaits is TestFinishBackfillEndsWaits on the server at
// url, whose historizing counter is node.
func finishBackfillEndsWaits(t *testing.T, url, node string) {
	m := startSession(t, url)
	q := newTestQueue(t, "q")
	cfg := config.WriterGroup{
		Name: "g", PublishingInterval: config.Duration(10 * time.Second), Backfill: config.BackfillHistory,
		Writers: []config.DataSetWriter{{Name: "w", Fields: []config.Field{{Name: "Counter", Node: node}}}},
	}
	g := startGroup(t, m, cfg, Options{Queues: []sink.Queue{q}})
	// The last value delivered, from the group's cache (the Variant field
	// encoding carries no timestamps).
	var last ua.DateTime
	testutil.WaitFor(t, 30*time.Second, "a first value", func() bool {
		vs := allValues(g, "w")
		if len(vs) != 1 || !vs[0].HasValue || len(dataSetMessages(q.all(), "w")) == 0 {
			return false
		}
		last = vs[0].Value.SourceTimestamp
		return last != 0
	})
	// The server's counter moves on (its history has values the group did
	// not deliver), then messages are lost: the field waits for its next
	// value (10 s away). A server that published late (a busy machine) may
	// deliver another value soon after the first: then wait again from it.
	for attempt := 1; ; attempt++ {
		testutil.WaitFor(t, 20*time.Second, "the counter moving on", func() bool {
			dvs, err := m.Client().ReadValues(ctxT(t), ua.MustParseNodeID(node))
			return err == nil && len(dvs) == 1 && dvs[0].SourceTimestamp > last+ua.DateTime(500*time.Millisecond/100)
		})
		now := allValues(g, "w")[0].Value.SourceTimestamp
		if now == last {
			break
		}
		if attempt == 3 {
			t.Fatalf("values delivered meanwhile again and again (publishing every 10 s): %v after %v", now, last)
		}
		t.Logf("a value delivered meanwhile (%v after %v): waiting again", now, last)
		last = now
	}
	g.onGap(g.Subscription(), 1000, 1001)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g.FinishBackfill(ctx)
	st := g.Stats()
	backfill := 0
	for _, d := range dataSetMessages(q.all(), "w") {
		if strings.HasPrefix(d.nm.MessageID, BackfillPrefix) {
			backfill++
		}
	}
	if st.BackfillRanges == 0 || st.Backfilled == 0 || backfill == 0 {
		t.Errorf("after FinishBackfill: %d ranges, %d values backfilled, %d backfill DataSetMessages: the waiting field's range was not filled", st.BackfillRanges, st.Backfilled, backfill)
	}
}
