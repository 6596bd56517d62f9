package server

import (
	"math"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/ua"
)

func TestReadServerObjectAndTypes(t *testing.T) {
	s := startServer(t, func(c *Config) { c.MaxNodesPerRead = 100 })
	ctx := testContext(t, time.Minute)
	ts := mustSession(t, ctx, s, dialOpts{})

	res, err := ts.read(ctx, "i=2256", "i=2255", "i=2258", "i=11705", "i=2254")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != ua.StatusGood {
			t.Fatalf("result %d: %v", i, r.Status)
		}
	}
	eo, ok := res[0].Value.Value().(*ua.ExtensionObject)
	st, ok2 := eo.Value.(*ua.ServerStatusDataType)
	if !ok || !ok2 || st.State != ua.ServerStateRunning || st.CurrentTime == 0 || st.BuildInfo.ProductURI != DefaultProductURI {
		t.Fatalf("ServerStatus = %#v", res[0].Value.Value())
	}
	if ns, _ := res[1].Value.Value().([]string); len(ns) != 2 || ns[1] != DefaultNamespaceURI {
		t.Fatalf("NamespaceArray = %v", ns)
	}
	if res[2].Value.DateTime() == 0 {
		t.Fatal("CurrentTime is null")
	}
	if res[3].Value.UInt32() != 100 {
		t.Fatalf("MaxNodesPerRead = %v", res[3].Value)
	}

	// Every scalar type reads back with its type, in Static, Dynamic and Arrays.
	var ids []string
	for _, typ := range ScalarTypes {
		ids = append(ids, StaticNode(typ, false), StaticNode(typ, true), DynamicNode(typ), ArrayNode(typ))
	}
	ids = append(ids, NodeDoubleMatrix, NodeInt32Matrix, NodeBad, NodeUncertain, NodeSine)
	res, err = ts.read(ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	for i, typ := range ScalarTypes {
		for j, array := range []bool{false, true, false, true} {
			r := res[4*i+j]
			if r.Status != ua.StatusGood || r.Value.Type() != typ || r.Value.IsArray() != array {
				t.Errorf("%s: %v %s array=%v", ids[4*i+j], r.Status, r.Value.Type(), r.Value.IsArray())
			}
		}
	}
	n := 4 * len(ScalarTypes)
	if d := res[n].Value.ArrayDimensions(); len(d) != 2 || d[0] != 3 || res[n].Value.Type() != ua.TypeDouble {
		t.Errorf("DoubleMatrix: %v", res[n].Value)
	}
	if d := res[n+1].Value.ArrayDimensions(); len(d) != 2 || d[1] != 4 {
		t.Errorf("Int32Matrix: %v", res[n+1].Value)
	}
	if res[n+2].Status != ua.StatusBadSensorFailure || res[n+3].Status != ua.StatusUncertainLastUsableValue {
		t.Errorf("qualities: %v %v", res[n+2].Status, res[n+3].Status)
	}
	if v := res[n+4].Value.Double(); v < -100 || v > 100 {
		t.Errorf("Sine = %v", v)
	}

	// Attributes and errors.
	var rr ua.ReadResponse
	_, err = ts.send(ctx, &ua.ReadRequest{NodesToRead: []ua.ReadValueID{
		{NodeID: ua.MustParseNodeID(NodeCounter), AttributeID: attrDataType},
		{NodeID: ua.MustParseNodeID(NodeCounter), AttributeID: attrBrowseName},
		{NodeID: ua.MustParseNodeID("i=85"), AttributeID: attrNodeClass},
		{NodeID: ua.MustParseNodeID("i=85"), AttributeID: attrValue},
		{NodeID: ua.MustParseNodeID("ns=1;s=nope"), AttributeID: attrValue},
		{NodeID: ua.MustParseNodeID(StaticNode(ua.TypeInt32, true)), AttributeID: attrValue, IndexRange: "1:2"},
		{NodeID: ua.MustParseNodeID("i=2253"), AttributeID: attrEventNotifier},
	}}, &rr)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := rr.Results[0].Value.Value().(ua.NodeID); id != ua.NewNumericNodeID(0, uint32(ua.TypeDouble)) {
		t.Errorf("DataType = %v", rr.Results[0].Value)
	}
	if q, _ := rr.Results[1].Value.Value().(ua.QualifiedName); q.Name != "Counter" || q.NamespaceIndex != 1 {
		t.Errorf("BrowseName = %v", rr.Results[1].Value)
	}
	if rr.Results[2].Value.Int32() != int32(ua.NodeClassObject) {
		t.Errorf("NodeClass = %v", rr.Results[2].Value)
	}
	if rr.Results[3].Status != ua.StatusBadAttributeIdInvalid || rr.Results[4].Status != ua.StatusBadNodeIdUnknown {
		t.Errorf("errors: %v %v", rr.Results[3].Status, rr.Results[4].Status)
	}
	if a, _ := rr.Results[5].Value.Value().([]int32); len(a) != 2 {
		t.Errorf("index range: %v %v", rr.Results[5].Status, rr.Results[5].Value)
	}
	if rr.Results[6].Value.Byte() != 1 {
		t.Errorf("EventNotifier = %v", rr.Results[6].Value)
	}

	// Operation limits are enforced.
	many := make([]string, 101)
	for i := range many {
		many[i] = NodeCounter
	}
	if _, err := ts.read(ctx, many...); !isStatus(err, ua.StatusBadTooManyOperations) {
		t.Fatalf("101 reads with MaxNodesPerRead 100: %v", err)
	}
}

func TestBrowseAndTranslate(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Sim.Variables = 25 })
	ctx := testContext(t, time.Minute)
	ts := mustSession(t, ctx, s, dialOpts{})

	browse := func(id string, max uint32) *ua.BrowseResult {
		t.Helper()
		var resp ua.BrowseResponse
		_, err := ts.send(ctx, &ua.BrowseRequest{RequestedMaxReferencesPerNode: max, NodesToBrowse: []ua.BrowseDescription{{
			NodeID: ua.MustParseNodeID(id), BrowseDirection: ua.BrowseDirectionForward,
			ReferenceTypeID: ua.NewNumericNodeID(0, ua.ID_HierarchicalReferences), IncludeSubtypes: true,
			ResultMask: uint32(ua.BrowseResultMaskAll),
		}}}, &resp)
		if err != nil {
			t.Fatal(err)
		}
		return &resp.Results[0]
	}
	names := func(refs []ua.ReferenceDescription) map[string]bool {
		m := map[string]bool{}
		for _, r := range refs {
			m[r.BrowseName.Name] = true
		}
		return m
	}
	objs := names(browse("i=85", 0).References)
	for _, want := range []string{"Server", "Demo", "Alarms", "Load"} {
		if !objs[want] {
			t.Errorf("Objects lacks %s: %v", want, objs)
		}
	}
	srv := names(browse("i=2253", 0).References)
	for _, want := range []string{"ServerStatus", "NamespaceArray", "ServerCapabilities", "GetMonitoredItems"} {
		if !srv[want] {
			t.Errorf("Server lacks %s: %v", want, srv)
		}
	}

	// 25 variables in pages of 10 through BrowseNext.
	r := browse("ns=1;s=Load.F000", 10)
	got := len(r.References)
	cp := r.ContinuationPoint
	for cp != nil {
		var resp ua.BrowseNextResponse
		if _, err := ts.send(ctx, &ua.BrowseNextRequest{ContinuationPoints: [][]byte{cp}}, &resp); err != nil {
			t.Fatal(err)
		}
		got += len(resp.Results[0].References)
		cp = resp.Results[0].ContinuationPoint
	}
	if got != 25 {
		t.Fatalf("browsed %d variables in pages, want 25", got)
	}
	var bn ua.BrowseNextResponse
	if _, err := ts.send(ctx, &ua.BrowseNextRequest{ContinuationPoints: [][]byte{{1, 2, 3}}}, &bn); err != nil || bn.Results[0].StatusCode != ua.StatusBadContinuationPointInvalid {
		t.Fatalf("unknown continuation point: %v %+v", err, bn.Results)
	}

	// TranslateBrowsePaths: Objects/Server/ServerStatus/CurrentTime, Objects/Demo/Counter.
	path := func(names ...ua.QualifiedName) ua.BrowsePath {
		bp := ua.BrowsePath{StartingNode: ua.NewNumericNodeID(0, ua.ID_ObjectsFolder)}
		for _, n := range names {
			bp.RelativePath.Elements = append(bp.RelativePath.Elements, ua.RelativePathElement{
				ReferenceTypeID: ua.NewNumericNodeID(0, ua.ID_HierarchicalReferences), IncludeSubtypes: true, TargetName: n})
		}
		return bp
	}
	q0 := func(n string) ua.QualifiedName { return ua.NewQualifiedName(0, n) }
	q1 := func(n string) ua.QualifiedName { return ua.NewQualifiedName(1, n) }
	var tr ua.TranslateBrowsePathsToNodeIDsResponse
	_, err := ts.send(ctx, &ua.TranslateBrowsePathsToNodeIDsRequest{BrowsePaths: []ua.BrowsePath{
		path(q0("Server"), q0("ServerStatus"), q0("CurrentTime")),
		path(q1("Demo"), q1("Counter")),
		path(q1("Demo"), q1("Nothing")),
	}}, &tr)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Results[0].StatusCode != ua.StatusGood || tr.Results[0].Targets[0].TargetID.NodeID != ua.NewNumericNodeID(0, ua.ID_Server_ServerStatus_CurrentTime) {
		t.Errorf("CurrentTime: %+v", tr.Results[0])
	}
	if tr.Results[1].StatusCode != ua.StatusGood || tr.Results[1].Targets[0].TargetID.NodeID != ua.MustParseNodeID(NodeCounter) ||
		tr.Results[1].Targets[0].RemainingPathIndex != math.MaxUint32 {
		t.Errorf("Counter: %+v", tr.Results[1])
	}
	if tr.Results[2].StatusCode != ua.StatusBadNoMatch {
		t.Errorf("Nothing: %+v", tr.Results[2])
	}
}

func TestWriteAndCall(t *testing.T) {
	s := startServer(t, nil)
	ctx := testContext(t, time.Minute)
	ts := mustSession(t, ctx, s, dialOpts{})

	for _, typ := range ScalarTypes {
		v := zeroValue(typ, false)
		if typ.String() != "Boolean" && inlineType(typ) {
			var g generator
			g.kind, g.typ = GeneratorCounter, typ
			g.scalar(7, &v)
		}
		st, err := ts.writeValue(ctx, StaticNode(typ, false), v)
		if err != nil || st != ua.StatusGood {
			t.Fatalf("write %s: %v %v", typ, st, err)
		}
		res, _ := ts.read(ctx, StaticNode(typ, false))
		if !res[0].Value.Equal(&v) {
			t.Errorf("%s read back %v, wrote %v", typ, res[0].Value, v)
		}
	}
	for _, c := range []struct {
		id   string
		v    ua.Variant
		want ua.StatusCode
	}{
		{NodeSetpoint, ua.NewInt32Variant(1), ua.StatusBadTypeMismatch},
		{NodeSetpoint, ua.MustVariant([]float64{1}), ua.StatusBadTypeMismatch},
		{NodeCounter, ua.NewDoubleVariant(1), ua.StatusBadNotWritable},
		{StaticNode(ua.TypeDouble, true), ua.MustVariant([]float64{1, 2, 3}), ua.StatusGood},
		{"ns=1;s=none", ua.NewDoubleVariant(1), ua.StatusBadNodeIdUnknown},
	} {
		if st, err := ts.writeValue(ctx, c.id, c.v); err != nil || st != c.want {
			t.Errorf("write %s %v: %v %v, want %v", c.id, c.v, st, err, c.want)
		}
	}

	call := func(method string, in ...ua.Variant) ua.CallMethodResult {
		t.Helper()
		var resp ua.CallResponse
		if _, err := ts.send(ctx, &ua.CallRequest{MethodsToCall: []ua.CallMethodRequest{{
			ObjectID: ua.MustParseNodeID(NodeMethods), MethodID: ua.MustParseNodeID(method), InputArguments: in,
		}}}, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Results[0]
	}
	if r := call(NodeAdd, ua.NewDoubleVariant(2.5), ua.NewDoubleVariant(4)); r.StatusCode != ua.StatusGood || r.OutputArguments[0].Double() != 6.5 {
		t.Errorf("Add: %+v", r)
	}
	if r := call(NodeMultiply, ua.NewInt32Variant(6), ua.NewInt32Variant(7)); r.OutputArguments[0].Int32() != 42 {
		t.Errorf("Multiply: %+v", r)
	}
	if r := call(NodeEcho, ua.NewStringVariant("hi")); r.OutputArguments[0].Str() != "hi" {
		t.Errorf("Echo: %+v", r)
	}
	if r := call(NodeFail, ua.MustVariant(ua.StatusBadUserAccessDenied)); r.StatusCode != ua.StatusBadUserAccessDenied {
		t.Errorf("Fail: %+v", r)
	}
	if r := call(NodeAdd, ua.NewDoubleVariant(1)); r.StatusCode != ua.StatusBadArgumentsMissing {
		t.Errorf("Add(1): %+v", r)
	}
	if r := call(NodeAdd, ua.NewDoubleVariant(1), ua.NewStringVariant("x")); r.StatusCode != ua.StatusBadInvalidArgument || r.InputArgumentResults[1] != ua.StatusBadTypeMismatch {
		t.Errorf("Add(1, x): %+v", r)
	}
	if r := call(NodeCounter); r.StatusCode != ua.StatusBadMethodInvalid {
		t.Errorf("call a variable: %+v", r)
	}
}

func TestSessionLimitsAndTimeout(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.MaxSessionCount = 2
		c.MaxSubscriptionsPerSession = 1
		c.MinSessionTimeout = 300 * time.Millisecond
	})
	ctx := testContext(t, time.Minute)
	a := mustSession(t, ctx, s, dialOpts{})
	b, err := dialSession(ctx, s.URL(), dialOpts{timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.ch.Close()
	if _, err := dialSession(ctx, s.URL(), dialOpts{}); !isStatus(err, ua.StatusBadTooManySessions) {
		t.Fatalf("third session: %v", err)
	}
	if _, err := a.createSubscription(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := a.createSubscription(ctx, time.Second); !isStatus(err, ua.StatusBadTooManySubscriptions) {
		t.Fatalf("second subscription: %v", err)
	}
	// b says nothing: it times out, and a third session fits again.
	if !testutil.Eventually(10*time.Second, func() bool { return s.Stats().Sessions == 1 }) {
		t.Fatalf("session did not time out: %+v", s.Stats())
	}
	if _, err := b.read(ctx, NodeCounter); !isStatus(err, ua.StatusBadSessionIdInvalid) {
		t.Fatalf("read on a timed out session: %v", err)
	}
	mustSession(t, ctx, s, dialOpts{})
	if got := s.Stats().SessionsTimedOut; got != 1 {
		t.Errorf("SessionsTimedOut = %d", got)
	}
}

func TestFindServers(t *testing.T) {
	s := startServer(t, nil)
	ctx := testContext(t, time.Minute)
	ts := mustSession(t, ctx, s, dialOpts{})
	var resp ua.FindServersResponse
	if _, err := ts.ch.SendRequest(ctx, &ua.FindServersRequest{EndpointURL: s.URL()}, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Servers) != 1 || resp.Servers[0].ApplicationURI != DefaultApplicationURI || resp.Servers[0].DiscoveryURLs[0] != s.URL() {
		t.Fatalf("servers %+v", resp.Servers)
	}
	if _, err := ts.ch.SendRequest(ctx, &ua.FindServersRequest{ServerURIs: []string{"urn:other"}}, &resp); err != nil || len(resp.Servers) != 0 {
		t.Fatalf("other server: %v %+v", err, resp.Servers)
	}
}

// TestHideOperationLimits: with HideOperationLimits the server publishes no
// OperationLimits (neither the object nor its properties), and still refuses a
// request above a limit with Bad_TooManyOperations.
func TestHideOperationLimits(t *testing.T) {
	limitIDs := []string{"i=11705", "i=11707", "i=11710", "i=11714"} // MaxNodesPerRead, …Write, …Browse, MaxMonitoredItemsPerCall
	for _, hide := range []bool{false, true} {
		s := startServer(t, func(c *Config) {
			c.MaxNodesPerRead, c.MaxNodesPerWrite, c.MaxNodesPerBrowse, c.MaxMonitoredItemsPerCall = 5, 5, 5, 5
			c.HideOperationLimits = hide
		})
		ctx := testContext(t, time.Minute)
		ts := mustSession(t, ctx, s, dialOpts{})

		res, err := ts.read(ctx, append(limitIDs, "i=11704")...) // and OperationLimits itself
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			switch {
			case hide && r.Status != ua.StatusBadNodeIdUnknown:
				t.Errorf("hidden: %s reads %v %v, want BadNodeIdUnknown", append(limitIDs, "i=11704")[i], r.Status, r.Value)
			case !hide && i < len(limitIDs) && (r.Status != ua.StatusGood || r.Value.UInt32() != 5):
				t.Errorf("published: %s reads %v %v, want 5", limitIDs[i], r.Status, r.Value)
			}
		}
		var br ua.BrowseResponse
		if _, err := ts.send(ctx, &ua.BrowseRequest{NodesToBrowse: []ua.BrowseDescription{{
			NodeID: ua.NewNumericNodeID(0, ua.ID_Server_ServerCapabilities), BrowseDirection: ua.BrowseDirectionForward,
			ReferenceTypeID: ua.NewNumericNodeID(0, ua.ID_HierarchicalReferences), IncludeSubtypes: true, ResultMask: 63,
		}}}, &br); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, ref := range br.Results[0].References {
			found = found || ref.BrowseName.Name == "OperationLimits"
		}
		if found == hide || len(br.Results[0].References) == 0 {
			t.Errorf("hide=%v: ServerCapabilities has OperationLimits: %v (%d references)", hide, found, len(br.Results[0].References))
		}

		// Enforced either way: Read, Browse, CreateMonitoredItems.
		six := []string{NodeCounter, NodeCounter, NodeCounter, NodeCounter, NodeCounter, NodeCounter}
		if _, err := ts.read(ctx, six...); !isStatus(err, ua.StatusBadTooManyOperations) {
			t.Errorf("hide=%v: 6 reads with MaxNodesPerRead 5: %v", hide, err)
		}
		if _, err := ts.read(ctx, six[:5]...); err != nil {
			t.Errorf("hide=%v: 5 reads: %v", hide, err)
		}
		bds := make([]ua.BrowseDescription, 6)
		for i := range bds {
			bds[i] = ua.BrowseDescription{NodeID: ua.NewNumericNodeID(0, ua.ID_ObjectsFolder), ResultMask: 63}
		}
		if _, err := ts.send(ctx, &ua.BrowseRequest{NodesToBrowse: bds}, &br); !isStatus(err, ua.StatusBadTooManyOperations) {
			t.Errorf("hide=%v: 6 browses with MaxNodesPerBrowse 5: %v", hide, err)
		}
		sub, err := ts.createSubscription(ctx, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ts.monitor(ctx, sub.SubscriptionID, 100, 1, nil, six...); !isStatus(err, ua.StatusBadTooManyOperations) {
			t.Errorf("hide=%v: 6 items with MaxMonitoredItemsPerCall 5: %v", hide, err)
		}
	}
}
