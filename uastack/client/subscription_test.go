package client

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/ua"
)

// Subscription tests against the node-opcua peer. The peer's Counter is
// exception-based here (COUNTER_EXCEPTION_BASED=1): an item that asks for
// sampling interval 0 gets every value, so a test can tell a lost notification
// from one the server never sampled.

const subLarge = 300 // variables in Demo/Large for these tests

func startSubPeer(t *testing.T, env ...string) *nodeopcua.Server {
	t.Helper()
	return nodeopcua.Start(t, nodeopcua.Options{
		LargeCount:      subLarge,
		CounterInterval: 50 * time.Millisecond,
		Env:             append([]string{"COUNTER_EXCEPTION_BASED=1"}, env...),
		Limits:          nodeopcua.OperationLimits{MaxMonitoredItemsPerCall: 50},
	})
}

func dialNone(t testing.TB, url string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, url, &Config{SecurityPolicy: "None", Logger: quietLog, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// counterLog records the Counter values a handler sees and checks they follow
// each other.
type counterLog struct {
	mu     sync.Mutex
	handle uint32
	vals   []float64
	vseq   []uint32 // sequence number of each value
	seqs   []uint32
	gaps   [][2]uint32
	status []ua.StatusCode
}

func (l *counterLog) onData(_ *Subscription, seq uint32, items []ua.MonitoredItemNotification) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seqs = append(l.seqs, seq)
	for i := range items {
		if items[i].ClientHandle == l.handle && items[i].Value.Status.IsGood() {
			l.vals = append(l.vals, items[i].Value.Value.Double())
			l.vseq = append(l.vseq, seq)
		}
	}
}

// setHandle names the Counter's item; the handler reads it under l.mu.
func (l *counterLog) setHandle(h uint32) {
	l.mu.Lock()
	l.handle = h
	l.mu.Unlock()
}

func (l *counterLog) onGap(_ *Subscription, from, to uint32) {
	l.mu.Lock()
	l.gaps = append(l.gaps, [2]uint32{from, to})
	l.mu.Unlock()
}

func (l *counterLog) onStatus(_ *Subscription, st ua.StatusCode) {
	l.mu.Lock()
	l.status = append(l.status, st)
	l.mu.Unlock()
}

func (l *counterLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.vals)
}

func (l *counterLog) last() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.vals) == 0 {
		return -1
	}
	return l.vals[len(l.vals)-1]
}

// contiguous reports the first place where the values do not go up by one.
// A value repeated in a later message is the server's doing (node-opcua
// reports the value it read at creation and then the change that produced it)
// and is no loss; the same value twice in one message number would be ours.
func (l *counterLog) contiguous() (ok bool, at int, prev, next float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 1; i < len(l.vals); i++ {
		if l.vals[i] == l.vals[i-1] && l.vseq[i] != l.vseq[i-1] {
			continue
		}
		if l.vals[i] != l.vals[i-1]+1 {
			lo, hi := max(0, i-5), min(len(l.vals), i+5)
			fmt.Printf("counterLog: values %v\n            seqs   %v\n", l.vals[lo:hi], l.vseq[lo:hi])
			return false, i, l.vals[i-1], l.vals[i]
		}
	}
	return true, 0, 0, 0
}

func (l *counterLog) config() *SubscriptionConfig {
	return &SubscriptionConfig{
		PublishingInterval: 100 * time.Millisecond,
		KeepAliveCount:     3,
		Items:              ItemOptions{SamplingInterval: SamplingFastest, QueueSize: 1000},
		OnDataChange:       l.onData,
		OnGap:              l.onGap,
		OnStatusChange:     l.onStatus,
	}
}

func mustNode(s string) ua.NodeID { return ua.MustParseNodeID(s) }

func TestSubscriptionNodeOPCUA(t *testing.T) {
	peer := startSubPeer(t)
	c := dialNone(t, peer.URL)
	ctx := ctxT(t)

	t.Run("DataAndItems", func(t *testing.T) {
		var log counterLog
		var itemMu sync.Mutex
		itemStatus := map[uint32]ua.StatusCode{}
		cfg := log.config()
		cfg.OnItemStatus = func(_ *Subscription, h uint32, st ua.StatusCode) {
			itemMu.Lock()
			itemStatus[h] = st
			itemMu.Unlock()
		}
		sub, err := c.CreateSubscription(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if sub.ID() == 0 || sub.PublishingInterval() != 100*time.Millisecond || sub.KeepAliveCount() != 3 {
			t.Fatalf("revised: id %d interval %v keep-alive %d", sub.ID(), sub.PublishingInterval(), sub.KeepAliveCount())
		}
		items := []ItemRequest{
			{NodeID: mustNode(nodeopcua.NodeCounter)},
			{NodeID: mustNode("ns=1;s=Demo.DoesNotExist")},
			{NodeID: mustNode(nodeopcua.NodeInt32), Options: &ItemOptions{DataChange: AbsoluteDeadband(0.5)}},
		}
		for i := range 120 { // more than MaxMonitoredItemsPerCall: three batches
			items = append(items, ItemRequest{NodeID: mustNode(nodeopcua.LargeNode(i))})
		}
		var batches []int
		res, err := sub.CreateMonitoredItems(ctx, items, &CreateItemsOptions{Progress: func(done, total int) {
			batches = append(batches, done)
			if total != len(items) {
				t.Errorf("progress total %d, want %d", total, len(items))
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		log.setHandle(res.FirstHandle) // the handler may already run
		if res.Created != len(items)-1 || res.Failed != 1 || res.Pending != 0 {
			t.Fatalf("result %+v", res)
		}
		if len(batches) != 3 || batches[2] != len(items) {
			t.Errorf("progress %v, want three batches up to %d", batches, len(items))
		}
		bad := res.FirstHandle + 1
		itemMu.Lock()
		st := itemStatus[bad]
		itemMu.Unlock()
		if st != ua.StatusBadNodeIdUnknown {
			t.Errorf("item status of the missing node: %v", st)
		}
		if info, ok := sub.Item(bad); !ok || info.Status != ua.StatusBadNodeIdUnknown || info.ID != 0 {
			t.Errorf("Item(%d) = %+v, %v", bad, info, ok)
		}
		if f := sub.FailedItems(); len(f) != 1 || f[0] != bad {
			t.Errorf("FailedItems %v", f)
		}
		if info, _ := sub.Item(res.FirstHandle); info.ID == 0 || info.QueueSize != 1000 {
			t.Errorf("counter item %+v", info)
		}
		testutil.WaitFor(t, 10*time.Second, "20 counter values", func() bool { return log.count() >= 20 })
		if ok, at, a, b := log.contiguous(); !ok {
			t.Errorf("counter values not contiguous at %d: %v then %v", at, a, b)
		}
		// The Large values arrive once each (initial values).
		testutil.WaitFor(t, 5*time.Second, "initial values", func() bool { return sub.Stats().DataChanges >= 120 })

		// Disabling the counter stops its values; enabling restarts them.
		sts, err := sub.SetMonitoringMode(ctx, Disabled, []uint32{res.FirstHandle, bad})
		if err != nil || len(sts) != 2 || sts[0].IsBad() {
			t.Fatalf("SetMonitoringMode: %v %v", sts, err)
		}
		if info, _ := sub.Item(res.FirstHandle); info.Mode != Disabled {
			t.Errorf("mode %v", info.Mode)
		}
		// Let the values sampled before arrive: wait for three quiet publishing
		// intervals, then none for four more.
		var n int
		testutil.WaitFor(t, 5*time.Second, "the values in flight", func() bool {
			n = log.count()
			return testutil.Consistently(300*time.Millisecond, func() bool { return log.count() == n })
		})
		if !testutil.Consistently(400*time.Millisecond, func() bool { return log.count() == n }) {
			t.Errorf("disabled item delivered %d values", log.count()-n)
		}
		if _, err := sub.SetMonitoringMode(ctx, Reporting, []uint32{res.FirstHandle}); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 5*time.Second, "values after re-enabling", func() bool { return log.count() > n+3 })

		// Modify the items and the subscription.
		sts, err = sub.ModifyMonitoredItems(ctx, []uint32{res.FirstHandle + 3, res.FirstHandle + 4}, &ItemOptions{SamplingInterval: 500 * time.Millisecond, QueueSize: 5})
		if err != nil || sts[0].IsBad() || sts[1].IsBad() {
			t.Fatalf("ModifyMonitoredItems: %v %v", sts, err)
		}
		if info, _ := sub.Item(res.FirstHandle + 3); info.SamplingInterval != 500*time.Millisecond || info.QueueSize != 5 {
			t.Errorf("modified item %+v", info)
		}
		if err := sub.Modify(ctx, SubscriptionConfig{PublishingInterval: 200 * time.Millisecond, KeepAliveCount: 4}); err != nil {
			t.Fatal(err)
		}
		if sub.PublishingInterval() != 200*time.Millisecond || sub.KeepAliveCount() != 4 {
			t.Errorf("after Modify: %v %d", sub.PublishingInterval(), sub.KeepAliveCount())
		}
		if err := sub.DeleteMonitoredItems(ctx, []uint32{res.FirstHandle + 5}); err != nil {
			t.Fatal(err)
		}
		if _, ok := sub.Item(res.FirstHandle + 5); ok {
			t.Error("deleted item still there")
		}
		if st := sub.Stats(); st.Items != len(items)-1 || st.FailedItems != 1 || st.Lost != 0 || st.Duplicates != 0 || st.KeepAlives == 0 && st.Messages == 0 {
			t.Errorf("stats %+v", st)
		}
		if err := sub.Delete(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Events", func(t *testing.T) {
		var got atomic.Int32
		sub, err := c.CreateSubscription(ctx, &SubscriptionConfig{
			PublishingInterval: 100 * time.Millisecond,
			OnEvent: func(_ *Subscription, _ uint32, events []ua.EventFieldList) {
				got.Add(int32(len(events)))
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Delete(ctx)
		filter := &ua.EventFilter{
			SelectClauses: SelectEventFields("EventId", "EventType", "SourceName", "Time", "Message", "Severity"),
			WhereClause:   OfType(ua.NewNumericNodeID(0, ua.ID_BaseEventType)),
		}
		res, err := sub.CreateMonitoredItems(ctx, []ItemRequest{{
			NodeID: ua.NewNumericNodeID(0, ua.ID_Server), Options: &ItemOptions{Event: filter, QueueSize: 100},
		}}, nil)
		if err != nil || res.Created != 1 {
			t.Fatalf("event item: %+v %v", res, err)
		}
		if info, _ := sub.Item(res.FirstHandle); info.AttributeID != AttributeEventNotifier {
			t.Errorf("event item attribute %d", info.AttributeID)
		}
	})

	t.Run("SeveralSubscriptions", func(t *testing.T) {
		// Five subscriptions share the session's Publish requests; every one
		// gets its data.
		var subs []*Subscription
		var counts [5]atomic.Int32
		for i := range 5 {
			sub, err := c.CreateSubscription(ctx, &SubscriptionConfig{
				PublishingInterval: 50 * time.Millisecond, KeepAliveCount: 2,
				Items: ItemOptions{SamplingInterval: SamplingFastest},
				OnDataChange: func(_ *Subscription, _ uint32, items []ua.MonitoredItemNotification) {
					counts[i].Add(int32(len(items)))
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			subs = append(subs, sub)
			if _, err := sub.CreateMonitoredItems(ctx, []ItemRequest{{NodeID: mustNode(nodeopcua.NodeCounter)}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		testutil.WaitFor(t, 10*time.Second, "data on every subscription", func() bool {
			for i := range counts {
				if counts[i].Load() < 10 {
					return false
				}
			}
			return true
		})
		p := c.subscriptions()
		if got := p.target(); got < 5 {
			t.Errorf("publish target %d with 5 subscriptions", got)
		}
		for _, s := range subs {
			if st := s.Stats(); st.Lost != 0 || st.Duplicates != 0 {
				t.Errorf("stats %+v", st)
			}
			if err := s.Delete(ctx); err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("SteadyStateAllocs", func(t *testing.T) {
		// Socket to handler: 200 items on the Counter give 200 notifications
		// every 50 ms. Count the process's allocations per notification once
		// the pools are warm.
		var n atomic.Int64
		sub, err := c.CreateSubscription(ctx, &SubscriptionConfig{
			PublishingInterval: 50 * time.Millisecond, KeepAliveCount: 4,
			Items: ItemOptions{SamplingInterval: SamplingFastest},
			OnDataChange: func(_ *Subscription, _ uint32, items []ua.MonitoredItemNotification) {
				n.Add(int64(len(items)))
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Delete(ctx)
		items := make([]ItemRequest, 200)
		for i := range items {
			items[i] = ItemRequest{NodeID: mustNode(nodeopcua.NodeCounter)}
		}
		if _, err := sub.CreateMonitoredItems(ctx, items, nil); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 10*time.Second, "warm-up", func() bool { return n.Load() >= 4000 })
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		n0 := n.Load()
		<-time.After(1500 * time.Millisecond) // the measurement
		runtime.ReadMemStats(&m1)
		got := n.Load() - n0
		per := float64(m1.Mallocs-m0.Mallocs) / float64(got)
		t.Logf("%d notifications, %d allocations: %.4f per notification", got, m1.Mallocs-m0.Mallocs, per)
		if got < 1000 {
			t.Fatalf("only %d notifications", got)
		}
		// Whatever else the test process does (the peer's output reader, timers)
		// is counted too: allow one allocation per 100 notifications.
		if !raceEnabled && per > 0.01 {
			t.Errorf("%.4f allocations per notification, want 0 in steady state", per)
		}
	})
}
