package gateway

import (
	"slices"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/wssink"
	"github.com/uagate/gateway/uastack/client"
)

// The read model for a program embedding the gateway; the REST API reads
// the same state through api.Backend (backend.go). None of it waits for a
// reload, an OPC UA round trip or a sink's queue.

// GroupStats returns the counters of the running writer group name (false:
// it does not run here, or is still being built).
func (gw *Gateway) GroupStats(name string) (bridge.GroupStats, bool) {
	if g := gw.group(name); g != nil {
		return g.Stats(), true
	}
	return bridge.GroupStats{}, false
}

// SinkStats returns the counters of the sink name's Output (false: no such
// sink; the WebSocket stream's are HubStats). A writer group's own Output
// is named <sink>/<group> (groupsink.go).
func (gw *Gateway) SinkStats(name string) (sink.OutputStats, bool) {
	for _, o := range gw.allOutputs() {
		if o.Name() == name {
			return o.Stats(), true
		}
	}
	return sink.OutputStats{}, false
}

// HubStats returns the WebSocket stream's counters (zero without one).
func (gw *Gateway) HubStats() wssink.Stats {
	if gw.hub == nil {
		return wssink.Stats{}
	}
	return gw.hub.Stats()
}

// SessionInfo is one of the sessions the writer groups run on.
type SessionInfo struct {
	Key     client.PoolKey
	Groups  int // writer groups on it
	Session *client.ManagedSession
}

// Sessions returns the sessions the writer groups run on, in key order.
func (gw *Gateway) Sessions() []SessionInfo {
	gw.mu.Lock()
	out := make([]SessionInfo, 0, len(gw.sessions))
	for k, ss := range gw.sessions {
		out = append(out, SessionInfo{Key: k, Groups: ss.refs, Session: ss.m})
	}
	gw.mu.Unlock()
	slices.SortFunc(out, func(a, b SessionInfo) int {
		switch {
		case a.Key.String() < b.Key.String():
			return -1
		case a.Key.String() > b.Key.String():
			return 1
		}
		return 0
	})
	return out
}
