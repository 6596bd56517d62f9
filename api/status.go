package api

import (
	"net/http"
	"time"
)

// Status is the overview of /api/v1/status (what `gateway status` prints).
type Status struct {
	Version      string            `json:"version"`
	PublisherID  string            `json:"publisherId,omitempty"`
	Uptime       Duration          `json:"uptime"`
	Ready        bool              `json:"ready"`
	Endpoints    []EndpointSummary `json:"endpoints"`
	WriterGroups int               `json:"writerGroups"`
	Writers      int               `json:"writers"`
	Fields       int               `json:"fields"`
	Sinks        []SinkSummary     `json:"sinks"`
	// ScaleOut, with scale-out enabled: who holds which writer group.
	ScaleOut *ScaleOutStatus `json:"scaleOut,omitempty"`
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

// SinkSummary is a sink in the overview.
type SinkSummary struct {
	Name      string `json:"name"`
	Kind      string `json:"kind,omitempty"`
	Connected bool   `json:"connected"`
	Queued    int    `json:"queued"`
	Sent      uint64 `json:"sent"`
	Dropped   uint64 `json:"dropped"`
	Errors    uint64 `json:"errors"`
	LastError string `json:"lastError,omitempty"`
}

func (s *Server) getStatus(w http.ResponseWriter, r *http.Request) error {
	c := s.b.Config()
	out := Status{Version: s.opts.Version, PublisherID: c.Gateway.PublisherID,
		Uptime: Duration(time.Since(s.started).Round(time.Second)), Ready: s.Readiness().Ready,
		Endpoints: []EndpointSummary{}, Sinks: []SinkSummary{}}
	for _, e := range s.endpointList() {
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
	out.ScaleOut = st.ScaleOut
	for _, k := range st.Sinks {
		o := &k.Output
		out.Sinks = append(out.Sinks, SinkSummary{Name: o.Name, Kind: k.Kind, Connected: o.Connected, Queued: o.Queued,
			Sent: o.Sent, Dropped: o.Dropped, Errors: o.Errors, LastError: o.LastError})
	}
	return writeJSON(w, http.StatusOK, out)
}
