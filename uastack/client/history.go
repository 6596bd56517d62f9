package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/uagate/gateway/uastack/ua"
)

// Reading history (OPC UA Part 11 §6.4.3, ReadRawModifiedDetails; Part 4
// §5.10.3 HistoryRead).

// AccessLevelHistoryRead is the bit of a Variable's AccessLevel and
// UserAccessLevel that allows reading its history (Part 3 §8.57); its
// Historizing attribute says the server keeps it.
const AccessLevelHistoryRead byte = 0x04

// DefaultHistoryValuesPerRequest is the NumValuesPerNode HistoryReadRaw
// asks for when HistoryRange.PerRequest is 0: the server returns a
// continuation point for the rest.
const DefaultHistoryValuesPerRequest = 1000

// HistoryRange is a node's raw history to read: the values whose source
// timestamps are in [Start, End) (Part 11: StartTime inclusive, EndTime
// exclusive), oldest first, at most Max of them (0: no bound).
type HistoryRange struct {
	NodeID     ua.NodeID
	Start, End ua.DateTime
	Max        int
}

// HistoryResult is what HistoryReadRaw found for a range: its status (Good,
// GoodNoData, or the server's refusal: BadHistoryOperationUnsupported,
// BadNodeIdUnknown …), how many values it handed to the callback, and
// whether it stopped at Max with more left.
type HistoryResult struct {
	Status    ua.StatusCode
	Values    int
	Truncated bool
}

// HistoryReadRaw reads the raw history of each range (ReadRawModifiedDetails
// with IsReadModified and ReturnBounds false) and hands the values to fn,
// range by range, oldest first, in chunks (fn's slice is valid during the
// call only; an error from fn stops the read). Ranges with the same Start
// and End go in one request, as many as MaxNodesPerHistoryReadData and
// MaxHistoryContinuationPoints allow; NumValuesPerNode is perRequest (0:
// DefaultHistoryValuesPerRequest), and the continuation points the server
// returns are followed to the end, or released when a range reached its
// Max or the read ends early. ts says which timestamps to return.
func (c *Client) HistoryReadRaw(ctx context.Context, ranges []HistoryRange, ts ua.TimestampsToReturn, perRequest uint32,
	fn func(i int, values []ua.DataValue) error) ([]HistoryResult, error) {
	if perRequest == 0 {
		perRequest = DefaultHistoryValuesPerRequest
	}
	results := make([]HistoryResult, len(ranges))
	// Ranges in groups of the same time span, in order of first appearance.
	type span struct{ start, end ua.DateTime }
	var order []span
	groups := map[span][]int{}
	for i := range ranges {
		k := span{ranges[i].Start, ranges[i].End}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	for _, k := range order {
		idx := groups[k]
		details := ua.NewExtensionObject(&ua.ReadRawModifiedDetails{StartTime: k.start, EndTime: k.end, NumValuesPerNode: perRequest})
		err := c.chunked(limitHistoryData, len(idx), func(lo, hi int) error {
			return c.historyChunk(ctx, ranges, results, idx[lo:hi], details, ts, fn)
		})
		if err != nil {
			return results, err
		}
	}
	return results, nil
}

// historyChunk reads the ranges idx in one request and follows their
// continuation points.
func (c *Client) historyChunk(ctx context.Context, ranges []HistoryRange, results []HistoryResult, idx []int,
	details ua.ExtensionObject, ts ua.TimestampsToReturn, fn func(int, []ua.DataValue) error) error {
	req := &ua.HistoryReadRequest{HistoryReadDetails: details, TimestampsToReturn: ts, NodesToRead: make([]ua.HistoryReadValueID, len(idx))}
	for k, i := range idx {
		req.NodesToRead[k].NodeID = ranges[i].NodeID
	}
	live := idx                         // the ranges the request reads
	var pending []ua.HistoryReadValueID // continuation points not followed yet, to release on an error
	defer func() {
		if len(pending) > 0 {
			c.releaseHistory(req.HistoryReadDetails, ts, pending)
		}
	}()
	for len(live) > 0 {
		var resp ua.HistoryReadResponse
		if _, err := c.Send(ctx, req, &resp); err != nil {
			return err
		}
		if err := checkCount("HistoryRead", len(live), len(resp.Results)); err != nil {
			return err
		}
		next := live[:0:0]
		nodes := req.NodesToRead[:0:0]
		var release []ua.HistoryReadValueID
		var ferr error
		for k, i := range live {
			r := &resp.Results[k]
			res := &results[i]
			if res.Status == 0 || r.StatusCode.IsBad() {
				res.Status = r.StatusCode
			}
			if r.StatusCode.IsBad() {
				continue
			}
			var vals []ua.DataValue
			if hd, ok := r.HistoryData.Value.(*ua.HistoryData); ok {
				vals = hd.DataValues
			} else if !r.HistoryData.IsNull() {
				res.Status = ua.StatusBadDataEncodingUnsupported
				if len(r.ContinuationPoint) > 0 {
					release = append(release, ua.HistoryReadValueID{NodeID: ranges[i].NodeID, ContinuationPoint: r.ContinuationPoint})
				}
				continue
			}
			if m := ranges[i].Max; m > 0 && res.Values+len(vals) > m {
				vals = vals[:m-res.Values]
				res.Truncated = true
			}
			if len(vals) > 0 && ferr == nil {
				ferr = fn(i, vals)
			}
			res.Values += len(vals)
			if len(r.ContinuationPoint) == 0 {
				continue
			}
			cp := ua.HistoryReadValueID{NodeID: ranges[i].NodeID, ContinuationPoint: r.ContinuationPoint}
			if res.Truncated || ferr != nil {
				release = append(release, cp)
				res.Truncated = true
				continue
			}
			next = append(next, i)
			nodes = append(nodes, cp)
		}
		if len(release) > 0 {
			c.releaseHistory(req.HistoryReadDetails, ts, release)
		}
		if ferr != nil {
			pending = nodes
			return ferr
		}
		live = next
		req.NodesToRead = nodes
		pending = nodes
	}
	pending = nil
	return nil
}

// releaseHistory tells the server it may free continuation points
// (ReleaseContinuationPoints), with a deadline of its own; the answer does
// not matter.
func (c *Client) releaseHistory(details ua.ExtensionObject, ts ua.TimestampsToReturn, cps []ua.HistoryReadValueID) {
	ctx, cancel := context.WithTimeout(context.Background(), min(c.cfg.RequestTimeout, releaseTimeout))
	defer cancel()
	req := &ua.HistoryReadRequest{HistoryReadDetails: details, TimestampsToReturn: ts, ReleaseContinuationPoints: true, NodesToRead: cps}
	if _, err := c.Send(ctx, req, &ua.HistoryReadResponse{}); err != nil && !errors.Is(err, ErrClosed) {
		c.log.Debug("client: releasing history continuation points", "n", len(cps), "err", err)
	}
}

// Historizing reads whether the server keeps the history of each node and
// lets this session read it: the Historizing attribute true and the
// HistoryRead bit in UserAccessLevel. A node whose attributes cannot be
// read is not historizing.
func (c *Client) Historizing(ctx context.Context, nodes []ua.NodeID) ([]bool, error) {
	req := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnNeither, NodesToRead: make([]ua.ReadValueID, 0, 2*len(nodes))}
	for _, n := range nodes {
		req.NodesToRead = append(req.NodesToRead,
			ua.ReadValueID{NodeID: n, AttributeID: AttributeHistorizing},
			ua.ReadValueID{NodeID: n, AttributeID: AttributeUserAccessLevel})
	}
	resp, err := c.Read(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("client: reading Historizing: %w", err)
	}
	out := make([]bool, len(nodes))
	for i := range nodes {
		h, al := &resp.Results[2*i], &resp.Results[2*i+1]
		out[i] = h.Status.IsGood() && h.Value.Type() == ua.TypeBoolean && h.Value.Boolean() &&
			al.Status.IsGood() && al.Value.Type() == ua.TypeByte && al.Value.Byte()&AccessLevelHistoryRead != 0
	}
	return out, nil
}
