package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/uagate/gateway/uastack/ua"
)

// OperationLimits are the server's limits on the operations in one request
// (Server.ServerCapabilities.OperationLimits), read once after connecting; 0 means
// no limit. The client splits every bulk request to fit them, and when a server
// enforces a limit it did not publish (BadTooManyOperations), it halves the
// request, retries and remembers the smaller size.
type OperationLimits struct {
	MaxNodesPerRead                          uint32
	MaxNodesPerWrite                         uint32
	MaxNodesPerBrowse                        uint32
	MaxNodesPerMethodCall                    uint32
	MaxNodesPerRegisterNodes                 uint32
	MaxNodesPerTranslateBrowsePathsToNodeIds uint32
	MaxMonitoredItemsPerCall                 uint32
	// MaxBrowseContinuationPoints (ServerCapabilities) bounds the nodes browsed
	// at once too, so that every node of a request can get a continuation point.
	MaxBrowseContinuationPoints uint32
	// MaxNodesPerHistoryReadData, and MaxHistoryContinuationPoints
	// (ServerCapabilities) as for browsing, bound the nodes of a HistoryRead.
	MaxNodesPerHistoryReadData   uint32
	MaxHistoryContinuationPoints uint32
}

// limitKind indexes Client.limits.
type limitKind int

const (
	limitRead limitKind = iota
	limitWrite
	limitBrowse
	limitCall
	limitRegister
	limitTranslate
	limitMonitoredItems
	limitBrowseCP
	limitHistoryData
	limitHistoryCP
	numLimits
)

// limitNodes are the variables read after connecting, in the order of limitKind,
// then the namespace array.
var limitNodes = [...]uint32{
	limitRead:           ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerRead,
	limitWrite:          ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerWrite,
	limitBrowse:         ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerBrowse,
	limitCall:           ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerMethodCall,
	limitRegister:       ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerRegisterNodes,
	limitTranslate:      ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerTranslateBrowsePathsToNodeIds,
	limitMonitoredItems: ua.ID_Server_ServerCapabilities_OperationLimits_MaxMonitoredItemsPerCall,
	limitBrowseCP:       ua.ID_Server_ServerCapabilities_MaxBrowseContinuationPoints,
	limitHistoryData:    ua.ID_Server_ServerCapabilities_OperationLimits_MaxNodesPerHistoryReadData,
	limitHistoryCP:      ua.ID_Server_ServerCapabilities_MaxHistoryContinuationPoints,
}

// OperationLimits returns the limits the client works with: the server's, lowered
// where the server refused requests that met them.
func (c *Client) OperationLimits() OperationLimits {
	return OperationLimits{
		MaxNodesPerRead:                          c.limits[limitRead].Load(),
		MaxNodesPerWrite:                         c.limits[limitWrite].Load(),
		MaxNodesPerBrowse:                        c.limits[limitBrowse].Load(),
		MaxNodesPerMethodCall:                    c.limits[limitCall].Load(),
		MaxNodesPerRegisterNodes:                 c.limits[limitRegister].Load(),
		MaxNodesPerTranslateBrowsePathsToNodeIds: c.limits[limitTranslate].Load(),
		MaxMonitoredItemsPerCall:                 c.limits[limitMonitoredItems].Load(),
		MaxBrowseContinuationPoints:              c.limits[limitBrowseCP].Load(),
		MaxNodesPerHistoryReadData:               c.limits[limitHistoryData].Load(),
		MaxHistoryContinuationPoints:             c.limits[limitHistoryCP].Load(),
	}
}

// readServerInfo reads the OperationLimits and the namespace array in one Read.
// Values a server does not have (Bad status, wrong type) count as "no limit".
func (c *Client) readServerInfo(ctx context.Context) error {
	req := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnNeither}
	req.NodesToRead = make([]ua.ReadValueID, 0, len(limitNodes)+1)
	for _, id := range limitNodes {
		req.NodesToRead = append(req.NodesToRead, ua.ReadValueID{NodeID: ua.NewNumericNodeID(0, id), AttributeID: AttributeValue})
	}
	req.NodesToRead = append(req.NodesToRead, ua.ReadValueID{NodeID: ua.NewNumericNodeID(0, ua.ID_Server_NamespaceArray), AttributeID: AttributeValue})
	var resp ua.ReadResponse
	_, err := c.Send(ctx, req, &resp)
	if errors.Is(err, ua.StatusBadTooManyOperations) {
		// A server whose limit is below eleven: read one by one.
		resp.Results = resp.Results[:0]
		for i := range req.NodesToRead {
			one := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnNeither, NodesToRead: req.NodesToRead[i : i+1]}
			var r ua.ReadResponse
			if _, err = c.Send(ctx, one, &r); err != nil {
				break
			}
			if len(r.Results) != 1 {
				err = fmt.Errorf("%w: Read of 1 node returned %d results", ErrBadResponse, len(r.Results))
				break
			}
			resp.Results = append(resp.Results, r.Results[0])
		}
	}
	if err != nil {
		return fmt.Errorf("client: reading the server's OperationLimits: %w", err)
	}
	if len(resp.Results) != len(req.NodesToRead) {
		return fmt.Errorf("%w: Read of %d nodes returned %d results", ErrBadResponse, len(req.NodesToRead), len(resp.Results))
	}
	for k := range limitNodes {
		dv := &resp.Results[k]
		var v uint32
		if dv.Status.IsGood() {
			switch dv.Value.Type() {
			case ua.TypeUInt32:
				v = dv.Value.UInt32()
			case ua.TypeUInt16:
				v = uint32(dv.Value.UInt16())
			}
		}
		c.limits[k].Store(v)
	}
	if dv := &resp.Results[len(limitNodes)]; dv.Status.IsGood() {
		if ns, ok := dv.Value.Value().([]string); ok {
			c.infoMu.Lock()
			c.namespaces = ns
			c.infoMu.Unlock()
		}
	}
	return nil
}

// chunkSize returns the largest number of operations of a kind one request may
// carry, or 0 for no limit.
func (c *Client) chunkSize(kind limitKind) int {
	l := int(c.limits[kind].Load())
	cpKind := limitKind(-1)
	switch kind {
	case limitBrowse:
		cpKind = limitBrowseCP
	case limitHistoryData:
		cpKind = limitHistoryCP
	}
	if cpKind >= 0 {
		if cp := int(c.limits[cpKind].Load()); cp > 0 && (l == 0 || cp < l) {
			l = cp
		}
	}
	return l
}

// lowerLimit lowers a limit to n unless it is lower already.
func (c *Client) lowerLimit(kind limitKind, n int) {
	for {
		old := c.limits[kind].Load()
		if old != 0 && int(old) <= n {
			return
		}
		if c.limits[kind].CompareAndSwap(old, uint32(n)) {
			return
		}
	}
}

// chunked calls op for consecutive ranges [lo, hi) of n operations, each within
// the limit of kind, in order. When the server refuses a range with
// BadTooManyOperations, the range is halved and retried and the limit lowered for
// later requests; op must not have kept anything of a refused range. With n == 0
// op is called once with the empty range, so the server gives its answer.
func (c *Client) chunked(kind limitKind, n int, op func(lo, hi int) error) error {
	if n == 0 {
		return op(0, 0)
	}
	for lo := 0; lo < n; {
		size := n - lo
		if l := c.chunkSize(kind); l > 0 && size > l {
			size = l
		}
		err := op(lo, lo+size)
		if err != nil && size > 1 && errors.Is(err, ua.StatusBadTooManyOperations) {
			c.lowerLimit(kind, size/2)
			c.log.Debug("client: server refused the number of operations; splitting further", "kind", int(kind), "refused", size, "next", size/2)
			continue
		}
		if err != nil {
			return err
		}
		lo += size
	}
	return nil
}
