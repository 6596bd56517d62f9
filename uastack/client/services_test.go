package client

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

func fakeClient(t *testing.T, setup func(f *fakeServer)) (*fakeServer, *Client) {
	t.Helper()
	f := newFakeServer(t, uasc.SecurityPolicyNone, ua.MessageSecurityModeNone)
	setup(f)
	c, err := f.connect(t, Config{SecurityPolicy: "None"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f.mu.Lock()
	f.sizes = nil
	f.mu.Unlock()
	return f, c
}

func nodes(n int) []ua.ReadValueID {
	out := make([]ua.ReadValueID, n)
	for i := range out {
		out[i] = ua.ReadValueID{NodeID: ua.NewNumericNodeID(1, uint32(i)), AttributeID: AttributeValue}
	}
	return out
}

func checkReadOrder(t *testing.T, res []ua.DataValue, n int) {
	t.Helper()
	if len(res) != n {
		t.Fatalf("%d results, want %d", len(res), n)
	}
	for i := range res {
		if got := res[i].Value.Int32(); got != int32(i) {
			t.Fatalf("result %d holds the value of node %d", i, got)
		}
	}
}

func TestReadSplitsByPublishedLimit(t *testing.T) {
	f, c := fakeClient(t, func(f *fakeServer) {
		f.published[ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerRead] = 10
		f.maxPerCall = 10
	})
	if got := c.OperationLimits().MaxNodesPerRead; got != 10 {
		t.Fatalf("MaxNodesPerRead %d, want 10", got)
	}
	resp, err := c.Read(context.Background(), &ua.ReadRequest{NodesToRead: nodes(250)})
	if err != nil {
		t.Fatal(err)
	}
	checkReadOrder(t, resp.Results, 250)
	if want := slices.Repeat([]int{10}, 25); !slices.Equal(f.sizes, want) {
		t.Fatalf("request sizes %v, want %v", f.sizes, want)
	}

	// ReadInto reuses the response: the second read must not see stale values.
	for i := range resp.Results {
		resp.Results[i].Value = ua.NewInt32Variant(-1)
	}
	if err := c.ReadInto(context.Background(), &ua.ReadRequest{NodesToRead: nodes(95)}, resp); err != nil {
		t.Fatal(err)
	}
	checkReadOrder(t, resp.Results, 95)
}

func TestReadLearnsUnpublishedLimit(t *testing.T) {
	f, c := fakeClient(t, func(f *fakeServer) { f.maxPerCall = 7 })
	resp, err := c.Read(context.Background(), &ua.ReadRequest{NodesToRead: nodes(100)})
	if err != nil {
		t.Fatal(err)
	}
	checkReadOrder(t, resp.Results, 100)
	if got := c.OperationLimits().MaxNodesPerRead; got == 0 || got > 7 {
		t.Fatalf("learned limit %d, want 1..7", got)
	}
	// The next read goes straight to the learned size.
	f.sizes = nil
	if _, err := c.Read(context.Background(), &ua.ReadRequest{NodesToRead: nodes(20)}); err != nil {
		t.Fatal(err)
	}
	for _, s := range f.sizes {
		if s > 7 {
			t.Fatalf("request of %d after learning: %v", s, f.sizes)
		}
	}
}

func TestReadEmpty(t *testing.T) {
	_, c := fakeClient(t, func(*fakeServer) {})
	_, err := c.Read(context.Background(), &ua.ReadRequest{})
	if !errors.Is(err, ua.StatusBadNothingToDo) {
		t.Fatalf("got %v, want BadNothingToDo", err)
	}
}

func TestOtherServicesSplit(t *testing.T) {
	ctx := context.Background()
	f, c := fakeClient(t, func(f *fakeServer) {
		for _, id := range []uint32{
			ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerWrite,
			ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerMethodCall,
			ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerRegisterNodes,
			ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerTranslateBrowsePathsToNodeIds,
		} {
			f.published[id] = 4
		}
		f.maxPerCall = 4
	})
	const n = 23

	wr := &ua.WriteRequest{}
	for i := range n {
		wr.NodesToWrite = append(wr.NodesToWrite, ua.WriteValue{NodeID: ua.NewNumericNodeID(1, uint32(i)), AttributeID: AttributeValue, Value: ua.DataValue{Value: ua.NewInt32Variant(int32(i))}})
	}
	w, err := c.Write(ctx, wr)
	if err != nil {
		t.Fatal(err)
	}
	for i, sc := range w.Results {
		if sc.IsBad() != (i%2 == 1) {
			t.Fatalf("write result %d: %v", i, sc)
		}
	}

	cr := &ua.CallRequest{}
	for i := range n {
		cr.MethodsToCall = append(cr.MethodsToCall, ua.CallMethodRequest{InputArguments: []ua.Variant{ua.NewDoubleVariant(float64(i)), ua.NewDoubleVariant(0.5)}})
	}
	call, err := c.Call(ctx, cr)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range call.Results {
		if got := r.OutputArguments[0].Double(); got != float64(i)+0.5 {
			t.Fatalf("call result %d: %v", i, got)
		}
	}
	out, err := c.CallMethod(ctx, ua.NodeID{}, ua.NodeID{}, ua.NewDoubleVariant(2), ua.NewDoubleVariant(3))
	if err != nil || out[0].Double() != 5 {
		t.Fatalf("CallMethod = %v, %v", out, err)
	}

	tr := &ua.TranslateBrowsePathsToNodeIDsRequest{}
	reg := &ua.RegisterNodesRequest{}
	for i := range n {
		id := ua.NewNumericNodeID(1, uint32(i))
		tr.BrowsePaths = append(tr.BrowsePaths, ua.BrowsePath{StartingNode: id})
		reg.NodesToRegister = append(reg.NodesToRegister, id)
	}
	tres, err := c.TranslateBrowsePathsToNodeIDs(ctx, tr)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range tres.Results {
		if r.Targets[0].TargetID.NodeID.Numeric != uint32(i) {
			t.Fatalf("translate result %d: %v", i, r.Targets)
		}
	}
	rres, err := c.RegisterNodes(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rres.RegisteredNodeIDs, reg.NodesToRegister) {
		t.Fatalf("registered %v", rres.RegisteredNodeIDs)
	}
	if _, err := c.UnregisterNodes(ctx, &ua.UnregisterNodesRequest{NodesToUnregister: rres.RegisteredNodeIDs}); err != nil {
		t.Fatal(err)
	}
	for _, s := range f.sizes {
		if s > 4 {
			t.Fatalf("a request of %d operations: %v", s, f.sizes)
		}
	}
}

func browseReq(counts ...int) *ua.BrowseRequest {
	req := &ua.BrowseRequest{}
	for _, n := range counts {
		req.NodesToBrowse = append(req.NodesToBrowse, ua.BrowseDescription{NodeID: ua.NewNumericNodeID(1, uint32(n))})
	}
	return req
}

func TestBrowseFollowsContinuationPoints(t *testing.T) {
	f, c := fakeClient(t, func(f *fakeServer) {
		f.published[ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerBrowse] = 3
		f.maxPerCall = 3
		f.maxRefs = 4
	})
	counts := []int{0, 1, 4, 5, 17, 2, 40, 9}
	resp, err := c.Browse(context.Background(), browseReq(counts...))
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range counts {
		r := resp.Results[i]
		if r.StatusCode.IsBad() || r.ContinuationPoint != nil || len(r.References) != n {
			t.Fatalf("node %d: status %v, cp %q, %d references, want %d", i, r.StatusCode, r.ContinuationPoint, len(r.References), n)
		}
		for k, ref := range r.References {
			if ref.NodeID.Numeric != uint32(n*1000+k) {
				t.Fatalf("node %d reference %d is %v", i, k, ref.NodeID)
			}
		}
	}
	if len(f.cps) != 0 {
		t.Fatalf("%d continuation points left on the server", len(f.cps))
	}
}

func TestBrowseReleasesContinuationPointsOnError(t *testing.T) {
	f, c := fakeClient(t, func(f *fakeServer) {
		f.maxRefs = 2
		f.failNextAt = 2
	})
	_, err := c.Browse(context.Background(), browseReq(10, 11, 12))
	if !errors.Is(err, ua.StatusBadInternalError) {
		t.Fatalf("got %v, want the BrowseNext failure", err)
	}
	if len(f.cps) != 0 {
		t.Fatalf("%d continuation points not released", len(f.cps))
	}
	if f.calls["BrowseNext"] < 3 {
		t.Fatalf("no release request: %v", f.calls)
	}
}

func TestSendAsyncAndRequestHeader(t *testing.T) {
	_, c := fakeClient(t, func(*fakeServer) {})
	h1, h2 := c.RequestHeader(time.Second), c.RequestHeader(0)
	if h1.AuthenticationToken != c.session.authToken || h1.RequestHandle == 0 || h2.RequestHandle == h1.RequestHandle || h1.TimeoutHint != 1000 || h1.Timestamp.IsNull() {
		t.Fatalf("headers %+v %+v", h1, h2)
	}
	done := make(chan error, 1)
	var got *ua.ReadResponse
	err := c.SendAsync(&ua.ReadRequest{NodesToRead: nodes(3)}, &ua.ReadResponse{}, time.Second, func(r ua.Structure, err error) {
		got, _ = r.(*ua.ReadResponse)
		done <- err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkReadOrder(t, got.Results, 3)
	// A Bad ServiceResult reaches done as an error.
	c.SendAsync(&ua.ReadRequest{}, &ua.ReadResponse{}, time.Second, func(_ ua.Structure, err error) { done <- err })
	if err := <-done; !errors.Is(err, ua.StatusBadNothingToDo) {
		t.Fatalf("got %v", err)
	}
}
