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
	AttributeAccessLevel uint32 = 17
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
	n := len(req.NodesToWrite)
	out := &ua.WriteResponse{Results: make([]ua.StatusCode, 0, n)}
	sub := *req
	err := c.chunked(limitWrite, n, func(lo, hi int) error {
		sub.NodesToWrite = req.NodesToWrite[lo:hi]
		var part ua.WriteResponse
		if _, err := c.Send(ctx, &sub, &part); err != nil {
			return err
		}
		if err := checkCount("Write", hi-lo, len(part.Results)); err != nil {
			return err
		}
		out.Results = append(out.Results, part.Results...)
		out.DiagnosticInfos = collectDiags(out.DiagnosticInfos, part.DiagnosticInfos, n, lo, hi)
		out.ResponseHeader = part.ResponseHeader
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
	n := len(req.MethodsToCall)
	out := &ua.CallResponse{Results: make([]ua.CallMethodResult, 0, n)}
	sub := *req
	err := c.chunked(limitCall, n, func(lo, hi int) error {
		sub.MethodsToCall = req.MethodsToCall[lo:hi]
		var part ua.CallResponse
		if _, err := c.Send(ctx, &sub, &part); err != nil {
			return err
		}
		if err := checkCount("Call", hi-lo, len(part.Results)); err != nil {
			return err
		}
		out.Results = append(out.Results, part.Results...)
		out.DiagnosticInfos = collectDiags(out.DiagnosticInfos, part.DiagnosticInfos, n, lo, hi)
		out.ResponseHeader = part.ResponseHeader
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
	n := len(req.BrowsePaths)
	out := &ua.TranslateBrowsePathsToNodeIDsResponse{Results: make([]ua.BrowsePathResult, 0, n)}
	sub := *req
	err := c.chunked(limitTranslate, n, func(lo, hi int) error {
		sub.BrowsePaths = req.BrowsePaths[lo:hi]
		var part ua.TranslateBrowsePathsToNodeIDsResponse
		if _, err := c.Send(ctx, &sub, &part); err != nil {
			return err
		}
		if err := checkCount("TranslateBrowsePathsToNodeIds", hi-lo, len(part.Results)); err != nil {
			return err
		}
		out.Results = append(out.Results, part.Results...)
		out.DiagnosticInfos = collectDiags(out.DiagnosticInfos, part.DiagnosticInfos, n, lo, hi)
		out.ResponseHeader = part.ResponseHeader
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RegisterNodes registers nodes for repeated access. resp.RegisteredNodeIDs[i]
// is the alias of req.NodesToRegister[i].
func (c *Client) RegisterNodes(ctx context.Context, req *ua.RegisterNodesRequest) (*ua.RegisterNodesResponse, error) {
	n := len(req.NodesToRegister)
	out := &ua.RegisterNodesResponse{RegisteredNodeIDs: make([]ua.NodeID, 0, n)}
	sub := *req
	err := c.chunked(limitRegister, n, func(lo, hi int) error {
		sub.NodesToRegister = req.NodesToRegister[lo:hi]
		var part ua.RegisterNodesResponse
		if _, err := c.Send(ctx, &sub, &part); err != nil {
			return err
		}
		if err := checkCount("RegisterNodes", hi-lo, len(part.RegisteredNodeIDs)); err != nil {
			return err
		}
		out.RegisteredNodeIDs = append(out.RegisteredNodeIDs, part.RegisteredNodeIDs...)
		out.ResponseHeader = part.ResponseHeader
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
