package client

import (
	"context"
	"fmt"

	"github.com/uagate/gateway/uastack/ua"
)

// maxEmptyBrowseRounds bounds the BrowseNext rounds in a row that bring no
// reference at all, so a server that hands out continuation points forever
// cannot keep Browse busy.
const maxEmptyBrowseRounds = 16

// Browse browses nodes and follows continuation points to the end:
// resp.Results[i] holds every reference of req.NodesToBrowse[i] and no
// continuation point. The request is split to fit MaxNodesPerBrowse and
// MaxBrowseContinuationPoints; a node the server had no continuation point for
// (BadNoContinuationPoints) is browsed again on its own. When Browse fails, the
// continuation points it still holds are released on the server.
func (c *Client) Browse(ctx context.Context, req *ua.BrowseRequest) (*ua.BrowseResponse, error) {
	n := len(req.NodesToBrowse)
	out := &ua.BrowseResponse{Results: make([]ua.BrowseResult, n)}
	sub := *req
	err := c.chunked(limitBrowse, n, func(lo, hi int) error {
		sub.NodesToBrowse = req.NodesToBrowse[lo:hi]
		var part ua.BrowseResponse
		if _, err := c.Send(ctx, &sub, &part); err != nil {
			return err
		}
		if err := checkCount("Browse", hi-lo, len(part.Results)); err != nil {
			c.releaseContinuationPoints(part.Results)
			return err
		}
		copy(out.Results[lo:hi], part.Results)
		out.DiagnosticInfos = collectDiags(out.DiagnosticInfos, part.DiagnosticInfos, n, lo, hi)
		out.ResponseHeader = part.ResponseHeader
		if err := c.followContinuationPoints(ctx, out.Results[lo:hi]); err != nil {
			return err
		}
		// Nodes the server had no continuation point left for: once more, alone,
		// now that the others' are done.
		for i := lo; i < hi; i++ {
			if out.Results[i].StatusCode.Code() != ua.StatusBadNoContinuationPoints {
				continue
			}
			one := *req
			one.NodesToBrowse = req.NodesToBrowse[i : i+1]
			var r ua.BrowseResponse
			if _, err := c.Send(ctx, &one, &r); err != nil {
				return err
			}
			if err := checkCount("Browse", 1, len(r.Results)); err != nil {
				c.releaseContinuationPoints(r.Results)
				return err
			}
			out.Results[i] = r.Results[0]
			if err := c.followContinuationPoints(ctx, out.Results[i:i+1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// followContinuationPoints calls BrowseNext for every result with a continuation
// point until none is left, appending the references to the results. On error it
// releases the continuation points still held.
func (c *Client) followContinuationPoints(ctx context.Context, results []ua.BrowseResult) (err error) {
	defer func() {
		if err != nil {
			c.releaseContinuationPoints(results)
		}
	}()
	var pending []int
	var cps [][]byte
	for empty := 0; ; {
		pending = pending[:0]
		for i := range results {
			if len(results[i].ContinuationPoint) > 0 {
				if results[i].StatusCode.IsBad() {
					results[i].ContinuationPoint = nil // nothing to follow (and nothing the server keeps)
					continue
				}
				pending = append(pending, i)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		got := 0
		err := c.chunked(limitBrowse, len(pending), func(lo, hi int) error {
			cps = cps[:0]
			for _, i := range pending[lo:hi] {
				cps = append(cps, results[i].ContinuationPoint)
			}
			var part ua.BrowseNextResponse
			if _, err := c.Send(ctx, &ua.BrowseNextRequest{ContinuationPoints: cps}, &part); err != nil {
				return err
			}
			if err := checkCount("BrowseNext", hi-lo, len(part.Results)); err != nil {
				c.releaseContinuationPoints(part.Results)
				return err
			}
			for j, i := range pending[lo:hi] {
				r := &part.Results[j]
				dst := &results[i]
				dst.References = append(dst.References, r.References...)
				dst.ContinuationPoint = r.ContinuationPoint
				if r.StatusCode.IsBad() || !dst.StatusCode.IsBad() {
					dst.StatusCode = r.StatusCode
				}
				got += len(r.References)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if got == 0 {
			if empty++; empty >= maxEmptyBrowseRounds {
				return fmt.Errorf("%w: BrowseNext returned continuation points without references %d times in a row", ErrBadResponse, empty)
			}
		} else {
			empty = 0
		}
	}
}

// releaseContinuationPoints tells the server to free the continuation points in
// results (best effort, with a deadline of its own: it runs on error paths, when
// the caller's context may be done), and clears them.
func (c *Client) releaseContinuationPoints(results []ua.BrowseResult) {
	var cps [][]byte
	for i := range results {
		if len(results[i].ContinuationPoint) > 0 {
			cps = append(cps, results[i].ContinuationPoint)
			results[i].ContinuationPoint = nil
		}
	}
	if len(cps) == 0 || c.closed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(c.cfg.RequestTimeout, releaseTimeout))
	defer cancel()
	_ = c.chunked(limitBrowse, len(cps), func(lo, hi int) error {
		_, err := c.Send(ctx, &ua.BrowseNextRequest{ReleaseContinuationPoints: true, ContinuationPoints: cps[lo:hi]}, &ua.BrowseNextResponse{})
		return err
	})
}

// BrowseNext sends BrowseNext as it is (split to fit the limits), without
// following the continuation points it returns. Browse follows them by itself;
// this is for callers that page through references on their own.
func (c *Client) BrowseNext(ctx context.Context, req *ua.BrowseNextRequest) (*ua.BrowseNextResponse, error) {
	return splitCall(c, ctx, limitBrowse, "BrowseNext", req, len(req.ContinuationPoints),
		func(sub *ua.BrowseNextRequest, lo, hi int) { sub.ContinuationPoints = req.ContinuationPoints[lo:hi] },
		func(r *ua.BrowseNextResponse) (*[]ua.BrowseResult, *[]ua.DiagnosticInfo) {
			return &r.Results, &r.DiagnosticInfos
		})
}

// BrowseChildren returns, for each node, its forward hierarchical references
// (Organizes, HasComponent, HasProperty … and their subtypes) with every field of
// the ReferenceDescription. A node that cannot be browsed has a Bad StatusCode in
// its result; only a failure of the whole call is an error.
func (c *Client) BrowseChildren(ctx context.Context, nodes ...ua.NodeID) ([]ua.BrowseResult, error) {
	req := &ua.BrowseRequest{NodesToBrowse: make([]ua.BrowseDescription, len(nodes))}
	for i, n := range nodes {
		req.NodesToBrowse[i] = ua.BrowseDescription{
			NodeID:          n,
			BrowseDirection: ua.BrowseDirectionForward,
			ReferenceTypeID: ua.NewNumericNodeID(0, ua.ID_HierarchicalReferences),
			IncludeSubtypes: true,
			ResultMask:      uint32(ua.BrowseResultMaskAll),
		}
	}
	resp, err := c.Browse(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.Results, nil
}
