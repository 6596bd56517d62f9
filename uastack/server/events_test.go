package server

import (
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

func selectClause(names ...string) ua.SimpleAttributeOperand {
	op := ua.SimpleAttributeOperand{TypeDefinitionID: ua.NewNumericNodeID(0, ua.ID_BaseEventType), AttributeID: attrValue}
	for _, n := range names {
		op.BrowsePath = append(op.BrowsePath, ua.NewQualifiedName(0, n))
	}
	return op
}

func TestEvents(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Sim.AlarmInterval = 20 * time.Millisecond })
	ctx := testContext(t, time.Minute)
	ts := mustSession(t, ctx, s, dialOpts{})
	sub, err := ts.createSubscription(ctx, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	severity := ua.NewExtensionObject(&ua.SimpleAttributeOperand{TypeDefinitionID: ua.NewNumericNodeID(0, ua.ID_BaseEventType),
		BrowsePath: []ua.QualifiedName{ua.NewQualifiedName(0, "Severity")}, AttributeID: attrValue})
	filter := &ua.EventFilter{
		SelectClauses: []ua.SimpleAttributeOperand{selectClause("EventId"), selectClause("EventType"), selectClause("SourceName"),
			selectClause("Message"), selectClause("Severity"), {TypeDefinitionID: ua.NewNumericNodeID(0, ua.ID_AlarmConditionType),
				BrowsePath: []ua.QualifiedName{ua.NewQualifiedName(0, "ActiveState"), ua.NewQualifiedName(0, "Id")}, AttributeID: attrValue}},
		// Severity >= 600 and OfType(AlarmConditionType)
		WhereClause: ua.ContentFilter{Elements: []ua.ContentFilterElement{
			{FilterOperator: ua.FilterOperatorAnd, FilterOperands: []ua.ExtensionObject{
				ua.NewExtensionObject(&ua.ElementOperand{Index: 1}), ua.NewExtensionObject(&ua.ElementOperand{Index: 2})}},
			{FilterOperator: ua.FilterOperatorGreaterThanOrEqual, FilterOperands: []ua.ExtensionObject{
				severity, ua.NewExtensionObject(&ua.LiteralOperand{Value: ua.MustVariant(uint16(600))})}},
			{FilterOperator: ua.FilterOperatorOfType, FilterOperands: []ua.ExtensionObject{
				ua.NewExtensionObject(&ua.LiteralOperand{Value: ua.MustVariant(ua.NewNumericNodeID(0, ua.ID_AlarmConditionType))})}},
		}},
	}
	create := func(node string, f *ua.EventFilter) ua.MonitoredItemCreateResult {
		var resp ua.CreateMonitoredItemsResponse
		if _, err := ts.send(ctx, &ua.CreateMonitoredItemsRequest{SubscriptionID: sub.SubscriptionID, TimestampsToReturn: ua.TimestampsToReturnBoth,
			ItemsToCreate: []ua.MonitoredItemCreateRequest{{
				ItemToMonitor:       ua.ReadValueID{NodeID: ua.MustParseNodeID(node), AttributeID: attrEventNotifier},
				MonitoringMode:      ua.MonitoringModeReporting,
				RequestedParameters: ua.MonitoringParameters{ClientHandle: 5, Filter: ua.NewExtensionObject(f), QueueSize: 100, DiscardOldest: true},
			}}}, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Results[0]
	}
	if r := create("i=2253", filter); r.StatusCode != ua.StatusGood || r.RevisedQueueSize != 100 {
		t.Fatalf("event item: %+v", r)
	}
	// A filter with an unknown operator is refused with a result per element.
	bad := &ua.EventFilter{SelectClauses: filter.SelectClauses, WhereClause: ua.ContentFilter{Elements: []ua.ContentFilterElement{
		{FilterOperator: ua.FilterOperatorRelatedTo}}}}
	r := create("i=2253", bad)
	fr, _ := r.FilterResult.Value.(*ua.EventFilterResult)
	if r.StatusCode != ua.StatusBadEventFilterInvalid || fr == nil || fr.WhereClauseResult.ElementResults[0].StatusCode != ua.StatusBadFilterOperatorUnsupported {
		t.Fatalf("bad filter: %+v %+v", r, fr)
	}
	if r := create(NodeDemo, filter); r.StatusCode != ua.StatusBadNotSupported {
		t.Fatalf("events of an object that is no notifier: %+v", r)
	}

	var cr ua.CallResponse
	call := func(sev uint16, msg string) {
		if _, err := ts.send(ctx, &ua.CallRequest{MethodsToCall: []ua.CallMethodRequest{{
			ObjectID: ua.MustParseNodeID(NodeMethods), MethodID: ua.MustParseNodeID(NodeGenerate),
			InputArguments: []ua.Variant{ua.MustVariant(sev), ua.NewStringVariant(msg)},
		}}}, &cr); err != nil || cr.Results[0].StatusCode != ua.StatusGood {
			t.Fatal(err, cr.Results)
		}
	}
	call(100, "cool")
	call(800, "hot")
	// Periodic alarms come too; every event seen must pass the filter, and the
	// generated hot one must be among them.
	seenHot := false
	deadline := time.Now().Add(10 * time.Second)
	for !seenHot {
		if time.Now().After(deadline) {
			t.Fatal("generated event not received")
		}
		r, err := ts.publishOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events(r) {
			f := ev.EventFields
			if len(f) != 6 || ev.ClientHandle != 5 {
				t.Fatalf("fields %v", f)
			}
			if f[4].UInt16() < 600 || !f[5].Boolean() {
				t.Fatalf("event past the where clause: %v", f)
			}
			if lt, _ := f[3].Value().(ua.LocalizedText); lt.Text == "hot" {
				seenHot = true
				if id, _ := f[0].Value().([]byte); len(id) != 16 || f[2].Str() != "Tank1" {
					t.Fatalf("hot event: %v", f)
				}
			}
			if lt, _ := f[3].Value().(ua.LocalizedText); lt.Text == "cool" {
				t.Fatalf("cool event passed the filter: %v", f)
			}
		}
	}
}
