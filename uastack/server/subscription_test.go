package server

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// collect publishes until want notifications arrived for handle (0: any), or
// the deadline passes; it acknowledges as it goes.
func collectValues(t *testing.T, ctx context.Context, ts *testSession, handle uint32, want int) []ua.DataValue {
	t.Helper()
	var got []ua.DataValue
	var acks []ua.SubscriptionAcknowledgement
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < want {
		if time.Now().After(deadline) {
			t.Fatalf("got %d notifications, want %d: %v", len(got), want, got)
		}
		r, err := ts.publishOnce(ctx, acks...)
		if err != nil {
			t.Fatal(err)
		}
		acks = acks[:0]
		if len(r.NotificationMessage.NotificationData) > 0 {
			acks = append(acks, ua.SubscriptionAcknowledgement{SubscriptionID: r.SubscriptionID, SequenceNumber: r.NotificationMessage.SequenceNumber})
		}
		for _, n := range dataChanges(r) {
			if handle == 0 || n.ClientHandle == handle {
				got = append(got, n.Value)
			}
		}
	}
	return got
}

func TestDataChangeSubscription(t *testing.T) {
	s := startServer(t, nil)
	ctx := testContext(t, time.Minute)
	ts := mustSession(t, ctx, s, dialOpts{})
	sub, err := ts.createSubscription(ctx, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if sub.RevisedPublishingInterval != 20 || sub.RevisedMaxKeepAliveCount != 20 || sub.RevisedLifetimeCount != 600 {
		t.Fatalf("revised %+v", sub)
	}
	res, err := ts.monitor(ctx, sub.SubscriptionID, 10, 1, nil, NodeCounter, NodeSetpoint, "ns=1;s=nothing")
	if err != nil {
		t.Fatal(err)
	}
	if res[0].StatusCode != ua.StatusGood || res[0].RevisedSamplingInterval != 10 || res[0].RevisedQueueSize != 1 || res[2].StatusCode != ua.StatusBadNodeIdUnknown {
		t.Fatalf("create results %+v", res)
	}
	// The Counter moves every 100 ms: a few notifications in increasing order.
	vals := collectValues(t, ctx, ts, 1, 3)
	for i := 1; i < len(vals); i++ {
		if vals[i].Value.Double() <= vals[i-1].Value.Double() || vals[i].SourceTimestamp == 0 || vals[i].ServerTimestamp == 0 {
			t.Fatalf("counter values %v", vals)
		}
	}
	if st, err := ts.writeValue(ctx, NodeSetpoint, ua.NewDoubleVariant(42)); err != nil || st != ua.StatusGood {
		t.Fatal(st, err)
	}
	for {
		v := collectValues(t, ctx, ts, 2, 1)
		if v[len(v)-1].Value.Double() == 42 {
			break
		}
	}
	// GetMonitoredItems.
	var cr ua.CallResponse
	if _, err := ts.send(ctx, &ua.CallRequest{MethodsToCall: []ua.CallMethodRequest{{
		ObjectID: ua.NewNumericNodeID(0, ua.ID_Server), MethodID: ua.NewNumericNodeID(0, ua.ID_Server_GetMonitoredItems),
		InputArguments: []ua.Variant{ua.NewUInt32Variant(sub.SubscriptionID)},
	}}}, &cr); err != nil {
		t.Fatal(err)
	}
	if h, _ := cr.Results[0].OutputArguments[1].Value().([]uint32); len(h) != 2 {
		t.Fatalf("GetMonitoredItems: %+v", cr.Results[0])
	}
	if st := s.Stats(); st.Subscriptions != 1 || st.MonitoredItems != 2 || st.Notifications < 4 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDataChangeFilters(t *testing.T) {
	s := startServer(t, nil)
	ctx := testContext(t, time.Minute)
	ts := mustSession(t, ctx, s, dialOpts{})
	sub, err := ts.createSubscription(ctx, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	id := sub.SubscriptionID
	abs := &ua.DataChangeFilter{Trigger: ua.DataChangeTriggerStatusValue, DeadbandType: uint32(ua.DeadbandTypeAbsolute), DeadbandValue: 10}
	pct := &ua.DataChangeFilter{Trigger: ua.DataChangeTriggerStatusValue, DeadbandType: uint32(ua.DeadbandTypePercent), DeadbandValue: 5}
	status := &ua.DataChangeFilter{Trigger: ua.DataChangeTriggerStatus}
	stamp := &ua.DataChangeFilter{Trigger: ua.DataChangeTriggerStatusValueTimestamp}

	// Refused filters.
	if r, _ := ts.monitor(ctx, id, 10, 1, pct, NodeCounter); r[0].StatusCode != ua.StatusBadMonitoredItemFilterUnsupported {
		t.Errorf("percent deadband on a variable without EURange: %v", r[0].StatusCode)
	}
	if r, _ := ts.monitor(ctx, id, 10, 1, abs, StaticNode(ua.TypeString, false)); r[0].StatusCode != ua.StatusBadFilterNotAllowed {
		t.Errorf("absolute deadband on a String: %v", r[0].StatusCode)
	}
	if r, _ := ts.monitor(ctx, id, 10, 1, &ua.DataChangeFilter{DeadbandType: uint32(ua.DeadbandTypeAbsolute), DeadbandValue: -1}, NodeSetpoint); r[0].StatusCode != ua.StatusBadDeadbandFilterInvalid {
		t.Errorf("negative deadband: %v", r[0].StatusCode)
	}

	// Four items on the Setpoint (EURange 0..1000): handles 1..4 by filter.
	handles := map[uint32]string{}
	for i, f := range []ua.Encodable{abs, pct, status, stamp} {
		r, err := ts.monitor(ctx, id, 5, 10, f, NodeSetpoint)
		if err != nil || r[0].StatusCode != ua.StatusGood {
			t.Fatal(err, r)
		}
		var mr ua.ModifyMonitoredItemsResponse
		// Give each item its own client handle.
		if _, err := ts.send(ctx, &ua.ModifyMonitoredItemsRequest{SubscriptionID: id, TimestampsToReturn: ua.TimestampsToReturnBoth,
			ItemsToModify: []ua.MonitoredItemModifyRequest{{MonitoredItemID: r[0].MonitoredItemID, RequestedParameters: ua.MonitoringParameters{
				ClientHandle: uint32(10 + i), SamplingInterval: 5, QueueSize: 10, DiscardOldest: true, Filter: ua.NewExtensionObject(f)}}}}, &mr); err != nil || mr.Results[0].StatusCode != ua.StatusGood {
			t.Fatal(err, mr.Results)
		}
		handles[uint32(10+i)] = []string{"abs", "pct", "status", "stamp"}[i]
	}
	write := func(v float64) {
		t.Helper()
		if st, err := ts.writeValue(ctx, NodeSetpoint, ua.NewDoubleVariant(v)); err != nil || st != ua.StatusGood {
			t.Fatal(st, err)
		}
		waitSampled(t, s, id, NodeSetpoint)
	}
	for _, v := range []float64{0, 5, 15, 15, 30, 70} {
		write(v)
	}
	// Drain everything queued.
	got := map[string][]float64{}
	for {
		r, err := ts.publishOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.NotificationMessage.NotificationData) == 0 {
			break
		}
		for _, n := range dataChanges(r) {
			got[handles[n.ClientHandle]] = append(got[handles[n.ClientHandle]], n.Value.Value.Double())
		}
		if !r.MoreNotifications {
			break
		}
	}
	// Each item starts from the value at its (modified) creation: 0 for all.
	want := map[string][]float64{
		"abs":    {0, 15, 30, 70}, // moves of more than 10
		"pct":    {0, 70},         // more than 5 % of 1000
		"status": {0},             // the status never changes
		"stamp":  {0, 5, 15, 15, 30, 70},
	}
	for k, w := range want {
		g := got[k]
		// The first write of 0 may or may not show as a change of source
		// timestamp for "stamp" depending on timing; compare the tails.
		if k == "stamp" && len(g) == len(w)+1 {
			g = g[1:]
		}
		if len(g) != len(w) {
			t.Errorf("%s: got %v, want %v", k, got[k], w)
			continue
		}
		for i := range w {
			if g[i] != w[i] {
				t.Errorf("%s: got %v, want %v", k, got[k], w)
				break
			}
		}
	}
}

// waitSampled waits until every item of subscription subID on node id has
// sampled the node's current value.
func waitSampled(t *testing.T, s *Server, subID uint32, id string) {
	t.Helper()
	n := s.as.get(ua.MustParseNodeID(id))
	testutil.WaitFor(t, 10*time.Second, "the value to be sampled", func() bool {
		s.subsMu.Lock()
		sub := s.subs[subID]
		s.subsMu.Unlock()
		done := true
		cur := n.static.load()
		sub.mu.Lock()
		for _, it := range sub.items {
			if it.node == n && it.lastPtr != cur {
				done = false
			}
		}
		sub.mu.Unlock()
		return done
	})
}

func TestQueueOverflow(t *testing.T) {
	s := startServer(t, nil)
	ctx := testContext(t, time.Minute)
	ts := mustSession(t, ctx, s, dialOpts{})
	for _, discardOldest := range []bool{true, false} {
		sub, err := ts.createSubscription(ctx, 20*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		id := sub.SubscriptionID
		var pm ua.SetPublishingModeResponse
		if _, err := ts.send(ctx, &ua.SetPublishingModeRequest{PublishingEnabled: false, SubscriptionIDs: []uint32{id}}, &pm); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.writeValue(ctx, NodeSetpoint, ua.NewDoubleVariant(0)); err != nil {
			t.Fatal(err)
		}
		var cr ua.CreateMonitoredItemsResponse
		if _, err := ts.send(ctx, &ua.CreateMonitoredItemsRequest{SubscriptionID: id, TimestampsToReturn: ua.TimestampsToReturnNeither,
			ItemsToCreate: []ua.MonitoredItemCreateRequest{{
				ItemToMonitor:       ua.ReadValueID{NodeID: ua.MustParseNodeID(NodeSetpoint), AttributeID: attrValue},
				MonitoringMode:      ua.MonitoringModeReporting,
				RequestedParameters: ua.MonitoringParameters{ClientHandle: 7, SamplingInterval: 1, QueueSize: 3, DiscardOldest: discardOldest},
			}}}, &cr); err != nil || cr.Results[0].StatusCode != ua.StatusGood {
			t.Fatal(err, cr.Results)
		}
		for v := 1; v <= 5; v++ {
			if _, err := ts.writeValue(ctx, NodeSetpoint, ua.NewDoubleVariant(float64(v))); err != nil {
				t.Fatal(err)
			}
			waitSampled(t, s, id, NodeSetpoint)
		}
		if _, err := ts.send(ctx, &ua.SetPublishingModeRequest{PublishingEnabled: true, SubscriptionIDs: []uint32{id}}, &pm); err != nil {
			t.Fatal(err)
		}
		vals := collectValues(t, ctx, ts, 7, 3)
		want, over := []float64{3, 4, 5}, 0 // the oldest kept carries the overflow bit
		if !discardOldest {
			want, over = []float64{0, 1, 5}, 2 // the newest replaced the last
		}
		for i, v := range vals {
			if v.Value.Double() != want[i] || (v.Status&overflowBits == overflowBits) != (i == over) || v.SourceTimestamp != 0 || v.ServerTimestamp != 0 {
				t.Errorf("discardOldest=%v: values %+v, want %v with overflow at %d", discardOldest, vals, want, over)
				break
			}
		}
		var dr ua.DeleteSubscriptionsResponse
		if _, err := ts.send(ctx, &ua.DeleteSubscriptionsRequest{SubscriptionIDs: []uint32{id}}, &dr); err != nil || dr.Results[0] != ua.StatusGood {
			t.Fatal(err, dr.Results)
		}
	}
}

func TestMonitoringModeAndKeepAlive(t *testing.T) {
	s := startServer(t, nil)
	ctx := testContext(t, time.Minute)
	ts := mustSession(t, ctx, s, dialOpts{})
	var cs ua.CreateSubscriptionResponse
	if _, err := ts.send(ctx, &ua.CreateSubscriptionRequest{RequestedPublishingInterval: 20, RequestedLifetimeCount: 1000,
		RequestedMaxKeepAliveCount: 3, PublishingEnabled: true}, &cs); err != nil {
		t.Fatal(err)
	}
	// Nothing monitored: a keep-alive carrying the next sequence number, 1.
	start := time.Now()
	r, err := ts.publishOnce(ctx)
	if err != nil || len(r.NotificationMessage.NotificationData) != 0 || r.NotificationMessage.SequenceNumber != 1 || r.SubscriptionID != cs.SubscriptionID {
		t.Fatalf("keep-alive: %v %+v", err, r)
	}
	r, err = ts.publishOnce(ctx)
	if el := time.Since(start); err != nil || len(r.NotificationMessage.NotificationData) != 0 || el < 50*time.Millisecond {
		t.Fatalf("second keep-alive after %v: %v %+v", el, err, r)
	}
	// An item in Sampling mode queues without reporting; Reporting delivers.
	var cr ua.CreateMonitoredItemsResponse
	if _, err := ts.send(ctx, &ua.CreateMonitoredItemsRequest{SubscriptionID: cs.SubscriptionID, TimestampsToReturn: ua.TimestampsToReturnBoth,
		ItemsToCreate: []ua.MonitoredItemCreateRequest{{
			ItemToMonitor:       ua.ReadValueID{NodeID: ua.MustParseNodeID(NodeSetpoint), AttributeID: attrValue},
			MonitoringMode:      ua.MonitoringModeSampling,
			RequestedParameters: ua.MonitoringParameters{ClientHandle: 1, SamplingInterval: 1, QueueSize: 1},
		}}}, &cr); err != nil || cr.Results[0].StatusCode != ua.StatusGood {
		t.Fatal(err, cr.Results)
	}
	if r, err := ts.publishOnce(ctx); err != nil || len(dataChanges(r)) != 0 {
		t.Fatalf("sampling item reported: %v %+v", err, r)
	}
	var sm ua.SetMonitoringModeResponse
	if _, err := ts.send(ctx, &ua.SetMonitoringModeRequest{SubscriptionID: cs.SubscriptionID, MonitoringMode: ua.MonitoringModeReporting,
		MonitoredItemIDs: []uint32{cr.Results[0].MonitoredItemID, 999999}}, &sm); err != nil || sm.Results[0] != ua.StatusGood || sm.Results[1] != ua.StatusBadMonitoredItemIdInvalid {
		t.Fatal(err, sm.Results)
	}
	collectValues(t, ctx, ts, 1, 1)
	var dm ua.DeleteMonitoredItemsResponse
	if _, err := ts.send(ctx, &ua.DeleteMonitoredItemsRequest{SubscriptionID: cs.SubscriptionID, MonitoredItemIDs: []uint32{cr.Results[0].MonitoredItemID}}, &dm); err != nil || dm.Results[0] != ua.StatusGood {
		t.Fatal(err, dm.Results)
	}
	if st := s.Stats(); st.MonitoredItems != 0 {
		t.Fatalf("items after delete: %d", st.MonitoredItems)
	}
}

func TestRepublishAndTransfer(t *testing.T) {
	s := startServer(t, nil)
	ctx := testContext(t, time.Minute)
	a := mustSession(t, ctx, s, dialOpts{id: identity{user: "user1", password: "password1"}})
	sub, err := a.createSubscription(ctx, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	id := sub.SubscriptionID
	if _, err := a.monitor(ctx, id, 10, 1, nil, NodeCounter); err != nil {
		t.Fatal(err)
	}
	var first *ua.PublishResponse
	for first == nil || len(dataChanges(first)) == 0 {
		if first, err = a.publishOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	seq := first.NotificationMessage.SequenceNumber
	want := dataChanges(first)[0].Value.Value.Double()
	var rp ua.RepublishResponse
	if _, err := a.send(ctx, &ua.RepublishRequest{SubscriptionID: id, RetransmitSequenceNumber: seq}, &rp); err != nil {
		t.Fatal(err)
	}
	if rp.NotificationMessage.SequenceNumber != seq || len(rp.NotificationMessage.NotificationData) != 1 ||
		rp.NotificationMessage.NotificationData[0].Value.(*ua.DataChangeNotification).MonitoredItems[0].Value.Value.Double() != want {
		t.Fatalf("republish: %+v", rp.NotificationMessage)
	}
	if _, err := a.send(ctx, &ua.RepublishRequest{SubscriptionID: id, RetransmitSequenceNumber: seq + 1000}, nil); !isStatus(err, ua.StatusBadMessageNotAvailable) {
		t.Fatalf("republish of an unknown message: %v", err)
	}

	// Another user (anonymous) may not take it; nor may the same anonymous user on an
	// unsecured channel (Part 4 §5.13.7: an anonymous user's subscriptions
	// move only between sessions of one client application on secured
	// channels); the same anonymous application on a signed channel may.
	u := mustSession(t, ctx, s, dialOpts{})
	var tr ua.TransferSubscriptionsResponse
	if _, err := u.send(ctx, &ua.TransferSubscriptionsRequest{SubscriptionIDs: []uint32{id}}, &tr); err != nil || tr.Results[0].StatusCode != ua.StatusBadUserAccessDenied {
		t.Fatalf("transfer to another user: %v %+v", err, tr.Results)
	}
	anonA := mustSession(t, ctx, s, dialOpts{})
	sub1, err := anonA.createSubscription(ctx, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	anonB := mustSession(t, ctx, s, dialOpts{})
	if _, err := anonB.send(ctx, &ua.TransferSubscriptionsRequest{SubscriptionIDs: []uint32{sub1.SubscriptionID}}, &tr); err != nil || tr.Results[0].StatusCode != ua.StatusBadUserAccessDenied {
		t.Fatalf("transfer of an anonymous user's subscription on unsecured channels: %v %+v", err, tr.Results)
	}
	secure := dialOpts{policy: uasc.SecurityPolicyBasic256Sha256, mode: ua.MessageSecurityModeSign}
	a2 := mustSession(t, ctx, s, secure)
	sub2, err := a2.createSubscription(ctx, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	b2 := mustSession(t, ctx, s, secure)
	if _, err := b2.send(ctx, &ua.TransferSubscriptionsRequest{SubscriptionIDs: []uint32{sub2.SubscriptionID}}, &tr); err != nil || tr.Results[0].StatusCode != ua.StatusGood {
		t.Fatalf("transfer between anonymous sessions of one application on signed channels: %v %+v", err, tr.Results)
	}
	b := mustSession(t, ctx, s, dialOpts{id: identity{user: "user1", password: "password1"}})
	if _, err := b.send(ctx, &ua.TransferSubscriptionsRequest{SubscriptionIDs: []uint32{id}, SendInitialValues: true}, &tr); err != nil || tr.Results[0].StatusCode != ua.StatusGood {
		t.Fatalf("transfer: %v %+v", err, tr.Results)
	}
	found := false
	for _, n := range tr.Results[0].AvailableSequenceNumbers {
		found = found || n == seq
	}
	if !found {
		t.Fatalf("transferred without the unacknowledged message %d: %v", seq, tr.Results[0].AvailableSequenceNumbers)
	}
	// The old session hears that the subscription left.
	r, err := a.publishOnce(ctx)
	if st, ok := statusChange(r); err != nil || !ok || st != ua.StatusGoodSubscriptionTransferred {
		t.Fatalf("old session: %v %+v", err, r)
	}
	if vals := collectValues(t, ctx, b, 1, 1); len(vals) == 0 {
		t.Fatal("nothing on the new session")
	}
	// The old session has no subscription left.
	if _, err := a.publishOnce(ctx); !isStatus(err, ua.StatusBadNoSubscription) {
		t.Fatalf("publish without subscriptions: %v", err)
	}

	// A session closed without deleting its subscriptions leaves them to be
	// transferred.
	b.ch.Close()
	c := mustSession(t, ctx, s, dialOpts{id: identity{user: "user1", password: "password1"}})
	_, err = c.send(ctx, &ua.TransferSubscriptionsRequest{SubscriptionIDs: []uint32{id}}, &tr)
	if err != nil || tr.Results[0].StatusCode != ua.StatusGood {
		t.Fatalf("transfer from a lost channel: %v %+v", err, tr.Results)
	}
}

func TestSubscriptionLifetime(t *testing.T) {
	s := startServer(t, nil)
	ctx := testContext(t, time.Minute)
	ts := mustSession(t, ctx, s, dialOpts{})
	var cs ua.CreateSubscriptionResponse
	if _, err := ts.send(ctx, &ua.CreateSubscriptionRequest{RequestedPublishingInterval: 20, RequestedLifetimeCount: 3,
		RequestedMaxKeepAliveCount: 1, PublishingEnabled: true}, &cs); err != nil {
		t.Fatal(err)
	}
	if cs.RevisedLifetimeCount != 3 || cs.RevisedMaxKeepAliveCount != 1 {
		t.Fatalf("revised %+v", cs)
	}
	testutil.WaitFor(t, 10*time.Second, "the subscription to expire", func() bool { return s.Stats().SubsExpired > 0 })
	r, err := ts.publishOnce(ctx)
	if st, ok := statusChange(r); err != nil || !ok || st != ua.StatusBadTimeout || r.SubscriptionID != cs.SubscriptionID {
		t.Fatalf("expiry: %v %+v", err, r)
	}
}

func TestPublishParksWithoutWorker(t *testing.T) {
	s := startServer(t, func(c *Config) { c.MinWorkers, c.MaxWorkers = 1, 1 })
	ctx := testContext(t, time.Minute)
	ts := mustSession(t, ctx, s, dialOpts{})
	var cs ua.CreateSubscriptionResponse
	if _, err := ts.send(ctx, &ua.CreateSubscriptionRequest{RequestedPublishingInterval: 1000, RequestedLifetimeCount: 3000,
		RequestedMaxKeepAliveCount: 1000, PublishingEnabled: true}, &cs); err != nil {
		t.Fatal(err)
	}
	// The first keep-alive goes at once (first cycle); then nothing for 1000 s.
	if _, err := ts.publishOnce(ctx); err != nil {
		t.Fatal(err)
	}
	p := ts.startPublishing(10, func(*ua.PublishResponse) {})
	defer p.halt()
	if !testutil.Eventually(10*time.Second, func() bool { return s.Stats().ParkedPublishRequests >= 10 }) {
		t.Fatalf("parked: %+v", s.Stats())
	}
	// With one worker and ten parked Publish requests, a Read still runs.
	if _, err := ts.read(ctx, NodeCounter); err != nil {
		t.Fatal(err)
	}
}

func TestModifySubscriptionAndRetransmissionQueue(t *testing.T) {
	s := startServer(t, func(c *Config) { c.MaxRetransmissionQueue = 2 })
	ctx := testContext(t, time.Minute)
	ts := mustSession(t, ctx, s, dialOpts{})
	sub, err := ts.createSubscription(ctx, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	id := sub.SubscriptionID
	var ms ua.ModifySubscriptionResponse
	if _, err := ts.send(ctx, &ua.ModifySubscriptionRequest{SubscriptionID: id, RequestedPublishingInterval: 1,
		RequestedLifetimeCount: 2, RequestedMaxKeepAliveCount: 5}, &ms); err != nil {
		t.Fatal(err)
	}
	// Revised: the minimum interval, and a lifetime of at least three keep-alives.
	if ms.RevisedPublishingInterval != 10 || ms.RevisedMaxKeepAliveCount != 5 || ms.RevisedLifetimeCount != 15 {
		t.Fatalf("revised %+v", ms)
	}
	// A lifetime of 150 ms ends the subscription when a busy machine
	// leaves that long between two of the requests below (the test then
	// waited for its Publish until the context ended): 30 s for the rest.
	if _, err := ts.send(ctx, &ua.ModifySubscriptionRequest{SubscriptionID: id, RequestedPublishingInterval: 10,
		RequestedLifetimeCount: 3000, RequestedMaxKeepAliveCount: 5}, &ms); err != nil {
		t.Fatal(err)
	}
	if ms.RevisedLifetimeCount != 3000 {
		t.Fatalf("revised %+v", ms)
	}
	if _, err := ts.monitor(ctx, id, 10, 1, nil, NodeCounter); err != nil {
		t.Fatal(err)
	}
	// Three unacknowledged messages: only the last two can be republished.
	var seqs []uint32
	for len(seqs) < 3 {
		r, err := ts.publishOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.NotificationMessage.NotificationData) > 0 {
			seqs = append(seqs, r.NotificationMessage.SequenceNumber)
			if len(r.AvailableSequenceNumbers) > 2 {
				t.Fatalf("available %v with a queue of 2", r.AvailableSequenceNumbers)
			}
		}
	}
	if _, err := ts.send(ctx, &ua.RepublishRequest{SubscriptionID: id, RetransmitSequenceNumber: seqs[0]}, nil); !isStatus(err, ua.StatusBadMessageNotAvailable) {
		t.Fatalf("republish of an evicted message: %v", err)
	}
	var rp ua.RepublishResponse
	if _, err := ts.send(ctx, &ua.RepublishRequest{SubscriptionID: id, RetransmitSequenceNumber: seqs[2]}, &rp); err != nil {
		t.Fatalf("republish of a kept message: %v", err)
	}
	// Acknowledging removes; an unknown ack is reported.
	r, err := ts.publishOnce(ctx, ua.SubscriptionAcknowledgement{SubscriptionID: id, SequenceNumber: seqs[2]},
		ua.SubscriptionAcknowledgement{SubscriptionID: id, SequenceNumber: seqs[0]},
		ua.SubscriptionAcknowledgement{SubscriptionID: id + 100, SequenceNumber: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Results) != 3 || r.Results[0] != ua.StatusGood || r.Results[1] != ua.StatusBadSequenceNumberUnknown || r.Results[2] != ua.StatusBadSubscriptionIdInvalid {
		t.Fatalf("ack results %v", r.Results)
	}
}

// TestGeneratedQueue checks the tick queue of generated values: overflow
// marks and the values made when sent.
func TestGeneratedQueue(t *testing.T) {
	for _, discardOldest := range []bool{true, false} {
		sub := &subscription{maxNotif: 100, items: map[uint32]*monitoredItem{}}
		g := newGenerator(GeneratorCounter, ua.TypeInt32, 10*time.Millisecond, 0, 1, 0, nil)
		it := &monitoredItem{sub: sub, isGen: true, gen: *g, mode: ua.MonitoringModeReporting, queueSize: 3,
			discardOldest: discardOldest, ts: ua.TimestampsToReturnBoth, clientHandle: 9, trigger: ua.DataChangeTriggerStatusValue}
		for tick := int64(1); tick <= 5; tick++ {
			c := sampleClock{ns: tick * int64(10*time.Millisecond)}
			c.dt = unixToDateTime(c.ns)
			it.sample(&c)
		}
		r, n, more := sub.collect(ua.Now(), 1<<16)
		if n != 3 || more {
			t.Fatalf("collected %d (more %v)", n, more)
		}
		dcn := r.msg.NotificationData[0].Value.(*ua.DataChangeNotification)
		want, over := []int32{3, 4, 5}, 0
		if !discardOldest {
			want, over = []int32{1, 2, 5}, 2
		}
		for i, m := range dcn.MonitoredItems {
			if m.ClientHandle != 9 || m.Value.Value.Int32() != want[i] || (m.Value.Status&overflowBits == overflowBits) != (i == over) ||
				m.Value.SourceTimestamp == 0 || m.Value.ServerTimestamp == 0 {
				t.Fatalf("discardOldest=%v: %d: %+v", discardOldest, i, m.Value)
			}
		}
		r.refs.Store(1)
		r.unref()
	}
}

// TestLateSweepKeepsEveryTick: a sweep that comes late (a loaded machine)
// queues the ticks it passed over for an item sampled at least as fast as its
// generator changes, so a counter never skips a value; an item sampled
// slower sees only the current one, and a queue of one only the newest.
func TestLateSweepKeepsEveryTick(t *testing.T) {
	const period = 20 * time.Millisecond
	values := func(interval time.Duration, queue uint32, ticks ...int64) []int32 {
		sub := &subscription{maxNotif: 100, items: map[uint32]*monitoredItem{}}
		g := newGenerator(GeneratorCounter, ua.TypeInt32, period, 0, 1, 0, nil)
		it := &monitoredItem{sub: sub, isGen: true, gen: *g, mode: ua.MonitoringModeReporting, queueSize: queue, interval: interval,
			discardOldest: true, ts: ua.TimestampsToReturnBoth, clientHandle: 1, trigger: ua.DataChangeTriggerStatusValue}
		for _, tick := range ticks {
			c := sampleClock{ns: tick*int64(period) + int64(time.Millisecond)}
			c.dt = unixToDateTime(c.ns)
			it.sample(&c)
		}
		r, n, _ := sub.collect(ua.Now(), 1<<16)
		if n == 0 {
			return nil
		}
		var out []int32
		for _, m := range r.msg.NotificationData[0].Value.(*ua.DataChangeNotification).MonitoredItems {
			out = append(out, m.Value.Value.Int32())
		}
		r.refs.Store(1)
		r.unref()
		return out
	}
	// Sweeps at ticks 1, 2, then late at 6 (3, 4, 5 passed over), then 7.
	if got := fmt.Sprint(values(time.Millisecond, 100, 1, 2, 6, 7)); got != "[1 2 3 4 5 6 7]" {
		t.Errorf("sampled at 1 ms: %s, want every tick", got)
	}
	if got := fmt.Sprint(values(period, 100, 1, 2, 6, 7)); got != "[1 2 3 4 5 6 7]" {
		t.Errorf("sampled at the generator's period: %s, want every tick", got)
	}
	// Sampled every 50 ms, slower than the counter: what the sweeps saw.
	if got := fmt.Sprint(values(50*time.Millisecond, 100, 1, 2, 6, 7)); got != "[1 2 6 7]" {
		t.Errorf("sampled at 50 ms: %s", got)
	}
	// A queue of 3 keeps the last two passed over and the current value.
	if got := fmt.Sprint(values(time.Millisecond, 3, 1, 10)); got != "[8 9 10]" {
		t.Errorf("queue of 3: %s", got)
	}
	// A queue of one: the newest only, no overflow from values passed over.
	if got := fmt.Sprint(values(time.Millisecond, 1, 1, 10)); got != "[10]" {
		t.Errorf("queue of 1: %s", got)
	}
}

// TestFilterSemantics: the DataChangeFilter compares as ua.Variant.Equal and
// ua.ExceedsDeadband define it: NaN staying NaN and 0 becoming -0 are no
// change, a deadband applies to each element of an array.
func TestFilterSemantics(t *testing.T) {
	changed := func(db float64, last, cur ua.Variant) bool {
		it := &monitoredItem{trigger: ua.DataChangeTriggerStatusValue}
		if db > 0 {
			it.deadband, it.absDB = ua.DeadbandTypeAbsolute, db
		}
		it.setLast(&ua.DataValue{Value: last})
		return it.changed(&ua.DataValue{Value: cur})
	}
	d := ua.NewDoubleVariant
	arr := func(v ...float64) ua.Variant { return ua.MustVariant(v) }
	for _, tc := range []struct {
		name      string
		db        float64
		last, cur ua.Variant
		want      bool
	}{
		{"same", 0, d(1), d(1), false},
		{"other", 0, d(1), d(2), true},
		{"NaN stays NaN", 0, d(math.NaN()), d(math.NaN()), false},
		{"becomes NaN", 0, d(1), d(math.NaN()), true},
		{"zero to minus zero", 0, d(0), d(math.Copysign(0, -1)), false},
		{"other type", 0, d(1), ua.MustVariant(int32(1)), true},
		{"int change", 0, ua.MustVariant(int32(1)), ua.MustVariant(int32(2)), true},
		{"within deadband", 1, d(1), d(1.5), false},
		{"beyond deadband", 1, d(1), d(2.5), true},
		{"NaN under a deadband", 1, d(1), d(math.NaN()), true},
		{"array same", 0, arr(1, 2), arr(1, 2), false},
		{"array other", 0, arr(1, 2), arr(1, 3), true},
		{"array within deadband", 1, arr(1, 2), arr(1.5, 2.5), false},
		{"array beyond deadband", 1, arr(1, 2), arr(1, 3.5), true},
		{"array length", 1, arr(1, 2), arr(1, 2, 3), true},
	} {
		if got := changed(tc.db, tc.last, tc.cur); got != tc.want {
			t.Errorf("%s: changed %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPublishOnTime: the publishing sweep runs when a subscription falls
// due, not only every PublishResolution: with a resolution of a second, a
// 30 ms subscription of a value changing every 10 ms still sends about 33
// messages a second (a fixed tick would send one).
func TestPublishOnTime(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.PublishResolution = time.Second
		c.Sim = SimConfig{Folders: 1, Variables: 1, Rates: []time.Duration{10 * time.Millisecond},
			Types: []ua.TypeID{ua.TypeInt32}, Generators: []Generator{GeneratorCounter}, AlarmInterval: -1}
	})
	ctx := testContext(t, time.Minute)
	ts := mustSession(t, ctx, s, dialOpts{})
	sub, err := ts.createSubscription(ctx, 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.monitor(ctx, sub.SubscriptionID, 10, 10, nil, LoadNode(0, 0)); err != nil {
		t.Fatal(err)
	}
	var data atomic.Int32
	p := ts.startPublishing(3, func(r *ua.PublishResponse) {
		if len(r.NotificationMessage.NotificationData) > 0 {
			data.Add(1)
		}
	})
	defer p.halt()
	start := time.Now()
	testutil.WaitFor(t, 10*time.Second, "10 data messages", func() bool { return data.Load() >= 10 })
	// 10 messages take 300 ms on time; a loaded machine gets a margin, a
	// once-a-second sweep would take 10 s.
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("10 data messages of a 30 ms subscription took %v", el)
	}
}

func TestPublishWait(t *testing.T) {
	const res = 10 * time.Millisecond
	for _, c := range []struct{ d, want time.Duration }{
		{-time.Millisecond, minPublishWait}, {0, minPublishWait}, {100 * time.Microsecond, minPublishWait},
		{3 * time.Millisecond, 3 * time.Millisecond}, {res, res}, {time.Hour, res},
	} {
		if got := publishWait(c.d, res); got != c.want {
			t.Errorf("publishWait(%v): %v, want %v", c.d, got, c.want)
		}
	}
}
