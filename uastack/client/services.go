package client

import (
	"context"
	"fmt"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// Attribute ids (Part 6 §A.1) used most.
const (
	AttributeNodeID      uint32 = 1
	AttributeNodeClass   uint32 = 2
	AttributeBrowseName  uint32 = 3
	AttributeDisplayName uint32 = 4
	AttributeDescription uint32 = 5
	AttributeValue       uint32 = 13
	AttributeDataType    uint32 = 14
	AttributeValueRank   uint32 = 15
	AttributeHistorizing uint32 = 20
	AttributeAccessLevel uint32 = 17
	// AttributeUserAccessLevel is AccessLevel for the session's user.
	AttributeUserAccessLevel uint32 = 18
)

// Every bulk service below splits its request to fit the server's
// OperationLimits, sends the parts one after the other and reassembles the
// results in request order, so a caller never sees BadTooManyOperations. The
// request header is filled in by the client. A Bad ServiceResult of any part is
// the error of the whole call; per-operation status codes are in the results.

// Read reads attributes. See ReadInto.
func (c *Client) Read(ctx context.Context, req *ua.ReadRequest) (*ua.ReadResponse, error) {
	resp := new(ua.ReadResponse)
	if err := c.ReadInto(ctx, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// ReadInto reads attributes into resp, reusing the capacity of its Results: a
// caller that reads the same nodes again and again with one response allocates
// little. resp.Results[i] is the value of req.NodesToRead[i].
func (c *Client) ReadInto(ctx context.Context, req *ua.ReadRequest, resp *ua.ReadResponse) error {
	n := len(req.NodesToRead)
	if l := c.chunkSize(limitRead); l == 0 || n <= l {
		_, err := c.Send(ctx, req, resp)
		if err == nil {
			return checkCount("Read", n, len(resp.Results))
		}
		if !isTooMany(err, n) {
			return err
		}
		c.lowerLimit(limitRead, n/2)
	}
	// Decode every part straight into its place in resp.Results.
	resp.Results = ua.Grow(resp.Results, n)
	var diags []ua.DiagnosticInfo
	sub := *req
	part := new(ua.ReadResponse)
	err := c.chunked(limitRead, n, func(lo, hi int) error {
		sub.NodesToRead = req.NodesToRead[lo:hi]
		part.Results = resp.Results[lo:hi:hi]
		if _, err := c.Send(ctx, &sub, part); err != nil {
			return err
		}
		if err := checkCount("Read", hi-lo, len(part.Results)); err != nil {
			return err
		}
		if &part.Results[0] != &resp.Results[lo] { // cannot happen with a matching count
			copy(resp.Results[lo:hi], part.Results)
		}
		diags = collectDiags(diags, part.DiagnosticInfos, n, lo, hi)
		return nil
	})
	if err != nil {
		return err
	}
	resp.ResponseHeader = part.ResponseHeader
	resp.DiagnosticInfos = diags
	return nil
}

// ReadValues reads the Value attribute of nodes, with source and server
// timestamps.
func (c *Client) ReadValues(ctx context.Context, nodes ...ua.NodeID) ([]ua.DataValue, error) {
	req := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnBoth, NodesToRead: make([]ua.ReadValueID, len(nodes))}
	for i, n := range nodes {
		req.NodesToRead[i] = ua.ReadValueID{NodeID: n, AttributeID: AttributeValue}
	}
	resp, err := c.Read(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.Results, nil
}

// Write writes attributes. resp.Results[i] is the status of req.NodesToWrite[i].
func (c *Client) Write(ctx context.Context, req *ua.WriteRequest) (*ua.WriteResponse, error) {
	return splitCall(c, ctx, limitWrite, "Write", req, len(req.NodesToWrite),
		func(sub *ua.WriteRequest, lo, hi int) { sub.NodesToWrite = req.NodesToWrite[lo:hi] },
		func(r *ua.WriteResponse) (*[]ua.StatusCode, *[]ua.DiagnosticInfo) {
			return &r.Results, &r.DiagnosticInfos
		})
}

// WriteValue writes the Value attribute of one node; a Bad result is the error.
func (c *Client) WriteValue(ctx context.Context, node ua.NodeID, value ua.Variant) error {
	resp, err := c.Write(ctx, &ua.WriteRequest{NodesToWrite: []ua.WriteValue{{
		NodeID: node, AttributeID: AttributeValue, Value: ua.DataValue{Value: value},
	}}})
	if err != nil {
		return err
	}
	if sc := resp.Results[0]; sc.IsBad() {
		return fmt.Errorf("client: writing %s: %w", node, sc)
	}
	return nil
}

// Call calls methods. resp.Results[i] is the result of req.MethodsToCall[i].
func (c *Client) Call(ctx context.Context, req *ua.CallRequest) (*ua.CallResponse, error) {
	return splitCall(c, ctx, limitCall, "Call", req, len(req.MethodsToCall),
		func(sub *ua.CallRequest, lo, hi int) { sub.MethodsToCall = req.MethodsToCall[lo:hi] },
		func(r *ua.CallResponse) (*[]ua.CallMethodResult, *[]ua.DiagnosticInfo) {
			return &r.Results, &r.DiagnosticInfos
		})
}

// CallMethod calls one method of an object and returns its output arguments; a
// Bad result (or a Bad input argument result) is the error.
func (c *Client) CallMethod(ctx context.Context, object, method ua.NodeID, args ...ua.Variant) ([]ua.Variant, error) {
	resp, err := c.Call(ctx, &ua.CallRequest{MethodsToCall: []ua.CallMethodRequest{{
		ObjectID: object, MethodID: method, InputArguments: args,
	}}})
	if err != nil {
		return nil, err
	}
	r := &resp.Results[0]
	if r.StatusCode.IsBad() {
		for i, sc := range r.InputArgumentResults {
			if sc.IsBad() {
				return nil, fmt.Errorf("client: calling %s: input argument %d: %w", method, i, sc)
			}
		}
		return nil, fmt.Errorf("client: calling %s: %w", method, r.StatusCode)
	}
	return r.OutputArguments, nil
}

// TranslateBrowsePathsToNodeIDs resolves browse paths. resp.Results[i] belongs
// to req.BrowsePaths[i].
func (c *Client) TranslateBrowsePathsToNodeIDs(ctx context.Context, req *ua.TranslateBrowsePathsToNodeIDsRequest) (*ua.TranslateBrowsePathsToNodeIDsResponse, error) {
	return splitCall(c, ctx, limitTranslate, "TranslateBrowsePathsToNodeIds", req, len(req.BrowsePaths),
		func(sub *ua.TranslateBrowsePathsToNodeIDsRequest, lo, hi int) {
			sub.BrowsePaths = req.BrowsePaths[lo:hi]
		},
		func(r *ua.TranslateBrowsePathsToNodeIDsResponse) (*[]ua.BrowsePathResult, *[]ua.DiagnosticInfo) {
			return &r.Results, &r.DiagnosticInfos
		})
}

// RegisterNodes registers nodes for repeated access. resp.RegisteredNodeIDs[i]
// is the alias of req.NodesToRegister[i].
func (c *Client) RegisterNodes(ctx context.Context, req *ua.RegisterNodesRequest) (*ua.RegisterNodesResponse, error) {
	return splitCall(c, ctx, limitRegister, "RegisterNodes", req, len(req.NodesToRegister),
		func(sub *ua.RegisterNodesRequest, lo, hi int) { sub.NodesToRegister = req.NodesToRegister[lo:hi] },
		func(r *ua.RegisterNodesResponse) (*[]ua.NodeID, *[]ua.DiagnosticInfo) {
			return &r.RegisteredNodeIDs, nil
		})
}

// UnregisterNodes releases nodes registered with RegisterNodes.
func (c *Client) UnregisterNodes(ctx context.Context, req *ua.UnregisterNodesRequest) (*ua.UnregisterNodesResponse, error) {
	out := new(ua.UnregisterNodesResponse)
	sub := *req
	err := c.chunked(limitRegister, len(req.NodesToUnregister), func(lo, hi int) error {
		sub.NodesToUnregister = req.NodesToUnregister[lo:hi]
		_, err := c.Send(ctx, &sub, out)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// splitCall sends req in parts that fit the server's limit for kind and
// reassembles the parts' results in request order. part sets, in a copy of req,
// the operations [lo, hi); fields gives a response's results and diagnostics
// (nil for a service without them). The parts' diagnostics are collected only
// when every part returned them; the header is the last part's.
func splitCall[Req, Resp, R any, PReq interface {
	*Req
	ua.Structure
}, PResp interface {
	*Resp
	ua.Response
}](c *Client, ctx context.Context, kind limitKind, service string, req PReq, n int,
	part func(sub PReq, lo, hi int), fields func(PResp) (*[]R, *[]ua.DiagnosticInfo)) (PResp, error) {
	out := PResp(new(Resp))
	results, diags := fields(out)
	*results = make([]R, 0, n)
	sub := PReq(new(Req))
	*sub = *req
	err := c.chunked(kind, n, func(lo, hi int) error {
		part(sub, lo, hi)
		p := PResp(new(Resp))
		if _, err := c.Send(ctx, sub, p); err != nil {
			return err
		}
		pr, pd := fields(p)
		if err := checkCount(service, hi-lo, len(*pr)); err != nil {
			return err
		}
		*results = append(*results, *pr...)
		if diags != nil {
			*diags = collectDiags(*diags, *pd, n, lo, hi)
		}
		*out.GetResponseHeader() = *p.GetResponseHeader()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// isTooMany reports whether err is the server refusing n > 1 operations at once.
func isTooMany(err error, n int) bool {
	return n > 1 && errorsIsAny(err, ua.StatusBadTooManyOperations)
}

func checkCount(service string, want, got int) error {
	if want != got {
		return fmt.Errorf("%w: %s of %d operations returned %d results", ErrBadResponse, service, want, got)
	}
	return nil
}

// collectDiags places the diagnostics of part [lo, hi) into all (n long), which
// exists only once some part returned diagnostics.
func collectDiags(all, part []ua.DiagnosticInfo, n, lo, hi int) []ua.DiagnosticInfo {
	if len(part) != hi-lo {
		return all // none asked for, or a server that sends them partially
	}
	if all == nil {
		all = make([]ua.DiagnosticInfo, n)
	}
	copy(all[lo:hi], part)
	return all
}

// releaseTimeout bounds the clean-up requests sent after an error.
const releaseTimeout = 5 * time.Second
