package client

import (
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// historyCheck reads the raw history of nodes (counters that count their
// ticks) over the last span of time and checks every range came back
// whole, oldest first, without a value missing or repeated.
//
// endIn allows a value at the end bound itself: node-opcua returns it (its
// bounds compared inclusive, in milliseconds), where Part 11 leaves it out.
func historyCheck(t *testing.T, c *Client, nodes []string, span time.Duration, perRequest uint32, endIn bool) []HistoryResult {
	t.Helper()
	// Whole milliseconds: node-opcua keeps a range's ends as JavaScript
	// Dates (milliseconds), and a start cut down to its millisecond would
	// return a value from before the start asked for.
	const ms = ua.DateTime(time.Millisecond / 100)
	end := ua.Now() / ms * ms
	start := end - ua.DateTime(span/100)
	ranges := make([]HistoryRange, len(nodes))
	for i, n := range nodes {
		ranges[i] = HistoryRange{NodeID: mustNode(n), Start: start, End: end}
	}
	got := make([][]float64, len(nodes))
	res, err := c.HistoryReadRaw(ctxT(t), ranges, ua.TimestampsToReturnSource, perRequest, func(i int, vals []ua.DataValue) error {
		for k := range vals {
			dv := &vals[k]
			if dv.SourceTimestamp < start || dv.SourceTimestamp > end || dv.SourceTimestamp == end && !endIn {
				t.Errorf("node %d: value at %v outside [%v, %v)", i, dv.SourceTimestamp.Time(), start.Time(), end.Time())
			}
			got[i] = append(got[i], dv.Value.Double()+float64(dv.Value.Int32()))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("HistoryReadRaw: %v", err)
	}
	for i, vals := range got {
		if res[i].Status.IsBad() || len(vals) < 2 || res[i].Values != len(vals) {
			t.Fatalf("node %s: %+v, %d values", nodes[i], res[i], len(vals))
		}
		for k := 1; k < len(vals); k++ {
			if vals[k] != vals[k-1]+1 {
				t.Fatalf("node %s: value %v after %v (at %d of %d)", nodes[i], vals[k], vals[k-1], k, len(vals))
			}
		}
	}
	return res
}

// historyReady checks that counter is historizing and plain is not, and
// waits until the counter has some history.
func historyReady(t *testing.T, c *Client, counter, plain string) {
	t.Helper()
	hist, err := c.Historizing(ctxT(t), []ua.NodeID{mustNode(counter), mustNode(plain)})
	if err != nil || !hist[0] || hist[1] {
		t.Fatalf("Historizing: %v %v, want [true false]", hist, err)
	}
	testutil.WaitFor(t, 10*time.Second, "some history", func() bool {
		dvs, err := c.ReadValues(ctxT(t), mustNode(counter))
		return err == nil && dvs[0].Value.Int32() >= 60
	})
}

// TestHistoryReadRaw: against the simulation server with history for its
// generators, within MaxNodesPerHistoryReadData (the nodes split over
// requests) and following continuation points (perRequest values at a
// time); a range bounded by Max stops there and releases its continuation
// point (the session's few points would run out otherwise); a node without
// history says so.
func TestHistoryReadRaw(t *testing.T) {
	srv := startSim(t, simOptions{Folders: 1, Variables: 5, Rate: 10 * time.Millisecond, Types: []ua.TypeID{ua.TypeInt32},
		Configure: func(c *server.Config) {
			c.Sim.History = time.Minute
			c.Sim.Generators = []server.Generator{server.GeneratorCounter}
			c.MaxNodesPerHistoryReadData = 2
			c.MaxHistoryContinuationPoints = 3
		}})
	c := dialNone(t, srv.URL())
	if l := c.OperationLimits(); l.MaxNodesPerHistoryReadData != 2 || l.MaxHistoryContinuationPoints != 3 {
		t.Fatalf("limits %+v", l)
	}
	var nodes []string
	for i := range 5 {
		nodes = append(nodes, server.LoadNode(0, i))
	}
	historyReady(t, c, nodes[0], server.NodeSetpoint)
	res := historyCheck(t, c, nodes, 500*time.Millisecond, 7, false)
	if res[0].Values < 20 {
		t.Errorf("%d values in half a second of a 10 ms counter", res[0].Values)
	}
	// Max: stops, releases; the session's three points are free again.
	for range 3 {
		ranges := []HistoryRange{{NodeID: mustNode(nodes[0]), Start: ua.Now() - ua.DateTime(time.Second/100), End: ua.Now(), Max: 10}}
		n := 0
		r, err := c.HistoryReadRaw(ctxT(t), ranges, ua.TimestampsToReturnSource, 4, func(_ int, v []ua.DataValue) error { n += len(v); return nil })
		if err != nil || n != 10 || !r[0].Truncated {
			t.Fatalf("bounded read: %d values, %+v, %v", n, r, err)
		}
	}
	historyCheck(t, c, nodes[:3], 300*time.Millisecond, 5, false)
	// No history.
	r, err := c.HistoryReadRaw(ctxT(t), []HistoryRange{{NodeID: mustNode(server.NodeSetpoint), Start: ua.Now() - 1000, End: ua.Now()}},
		ua.TimestampsToReturnSource, 0, func(int, []ua.DataValue) error { return nil })
	if err != nil || r[0].Status != ua.StatusBadHistoryOperationUnsupported {
		t.Errorf("a node without history: %+v %v", r, err)
	}
}

// TestHistoryReadRawNodeOPCUA: the same against node-opcua's historizing
// counters.
func TestHistoryReadRawNodeOPCUA(t *testing.T) {
	peer := nodeopcua.Start(t, nodeopcua.Options{LargeCount: -1, CounterInterval: 10 * time.Millisecond,
		Env: []string{"COUNTERS=5", "HISTORY_VALUES=2000", "MAX_NODES_PER_HISTORY_READ_DATA=2"}})
	c := dialNone(t, peer.URL)
	var nodes []string
	for i := range 5 {
		nodes = append(nodes, nodeopcua.CounterNode(i))
	}
	historyReady(t, c, nodes[0], nodeopcua.NodeSetpoint)
	res := historyCheck(t, c, nodes, 500*time.Millisecond, 7, true)
	t.Logf("%d values per counter, limits %+v", res[0].Values, c.OperationLimits())
}
