package api

import (
	"net/http"
	"slices"
	"time"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/command"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sparkplug"
	"github.com/uagate/gateway/bridge/sink/wssink"
	"github.com/uagate/gateway/bridge/storelog"
	"github.com/uagate/gateway/pooling"
)

// Status is the overview of /api/v1/status (what `gateway status` prints).
// Its groups, sinks, webSocket and pools are the runtime's own counters
// (Stats), every one of them.
type Status struct {
	Version      string            `json:"version"`
	PublisherID  string            `json:"publisherId,omitempty"`
	Uptime       Duration          `json:"uptime"`
	Ready        bool              `json:"ready"`
	Endpoints    []EndpointSummary `json:"endpoints"`
	WriterGroups int               `json:"writerGroups"`
	Writers      int               `json:"writers"`
	Fields       int               `json:"fields"`
	// Groups are the writer groups that run here.
	Groups []GroupStatus `json:"groups"`
	// Sinks are the sink outputs and the WebSocket stream.
	Sinks       []SinkStats                    `json:"sinks"`
	WebSocket   *wssink.Stats                  `json:"webSocket,omitempty"`
	Pools       []pooling.NamedPoolStats       `json:"pools"`
	BufferPools []pooling.NamedBufferPoolStats `json:"bufferPools"`
	// ScaleOut, with scale-out enabled: who holds which writer group.
	ScaleOut *ScaleOutStatus `json:"scaleOut,omitempty"`
	// Sparkplug are the Sparkplug B nodes: state, bdSeq, seq, the primary
	// host's state and their counters.
	Sparkplug []sparkplug.Stats `json:"sparkplug,omitempty"`
	// Commands are the command counters, per transport.
	Commands []command.Stats `json:"commands"`
	// Store is the store-and-forward log: its size and bound, and per writer
	// group its stream with every sink's backlog; absent when it is off.
	Store *storelog.Stats `json:"store,omitempty"`
}

// EndpointSummary is an endpoint in the overview.
type EndpointSummary struct {
	Name             string `json:"name"`
	URL              string `json:"url"`
	State            string `json:"state"`
	Reconnects       uint64 `json:"reconnects"`
	Subscriptions    int    `json:"subscriptions"`
	LastError        string `json:"lastError,omitempty"`
	PermanentFailure string `json:"permanentFailure,omitempty"`
}

// GroupStatus is a writer group's runtime state: the sums the API has
// always reported (the dashboard reads them), and Counters, the group's
// own counters.
type GroupStatus struct {
	Name     string `json:"name"`
	Endpoint string `json:"endpoint"`
	// NotificationsIn counts data changes and events received from the
	// subscription; NotificationsOut those written into NetworkMessages.
	NotificationsIn  uint64 `json:"notificationsIn"`
	NotificationsOut uint64 `json:"notificationsOut"`
	// Messages and Bytes count the NetworkMessages the group produced,
	// per-field messages included.
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	// Errors counts notifications that could not be encoded.
	Errors uint64 `json:"errors"`
	// Unacked is the number of notification messages not yet acknowledged
	// to the server because at-least-once sinks have not confirmed them.
	Unacked int `json:"unacked"`
	// Writers and Fields are the group's dataset writers and fields.
	Writers  int               `json:"writers"`
	Fields   int               `json:"fields"`
	Counters bridge.GroupStats `json:"counters"`
}

// groupStatus sums g's counters.
func groupStatus(g *bridge.GroupStats) GroupStatus {
	st := GroupStatus{Name: g.Name, Endpoint: g.Endpoint,
		NotificationsIn:  g.Notifications + g.Events,
		NotificationsOut: g.Notifications + g.Events - g.UnknownHandles,
		Messages:         g.Messages + g.FieldMessages,
		Bytes:            g.Bytes, Errors: g.EncodeErrors, Unacked: g.Unacked,
		Writers: len(g.Writers), Counters: *g}
	for _, w := range g.Writers {
		st.Fields += w.Fields
	}
	return st
}

// sinks are the sink outputs and the WebSocket stream as one more sink (at
// most once, always up), as the status, the readiness and the uagate_sink_
// series count them.
func (st *Stats) sinks() []SinkStats {
	out := st.Sinks
	if ws := st.WebSocket; ws != nil {
		out = append(slices.Clip(out), SinkStats{Kind: "websocket", OutputStats: sink.OutputStats{
			Name: "websocket", Guarantee: config.AtMostOnce, Connected: true, Sent: ws.Sent, SentBytes: ws.Bytes}})
	}
	return out
}

func (s *Server) getStatus(w http.ResponseWriter, r *http.Request) error {
	c := s.b.Config()
	out := Status{Version: s.opts.Version, PublisherID: c.Gateway.PublisherID,
		Uptime: Duration(time.Since(s.started).Round(time.Second)), Ready: s.Readiness().Ready,
		Endpoints: []EndpointSummary{}, Groups: []GroupStatus{}}
	for _, e := range s.endpointList(r) {
		out.Endpoints = append(out.Endpoints, EndpointSummary{Name: e.Name, URL: e.URL, State: e.State,
			Reconnects: e.Reconnects, Subscriptions: len(e.Subscriptions), LastError: e.LastError, PermanentFailure: e.PermanentFailure})
	}
	out.WriterGroups = len(c.WriterGroups)
	for _, g := range c.WriterGroups {
		out.Writers += len(g.Writers)
		for _, w := range g.Writers {
			out.Fields += len(w.Fields)
		}
	}
	st := s.b.Stats()
	for i := range st.Groups {
		out.Groups = append(out.Groups, groupStatus(&st.Groups[i]))
	}
	out.Sinks = append([]SinkStats{}, st.sinks()...)
	out.WebSocket, out.ScaleOut, out.Store, out.Sparkplug = st.WebSocket, st.ScaleOut, st.Store, st.Sparkplug
	out.Pools = append([]pooling.NamedPoolStats{}, st.Pools...)
	out.BufferPools = append([]pooling.NamedBufferPoolStats{}, st.BufferPools...)
	out.Commands = append([]command.Stats{}, st.Commands...)
	return writeJSON(w, http.StatusOK, out)
}
