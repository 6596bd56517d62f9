package api

import (
	"fmt"
	"net/http"
	"time"
)

// Require says how many of a kind of part must be up for readiness.
type Require string

const (
	RequireAll  Require = "all"  // every one (the default)
	RequireAny  Require = "any"  // at least one (or none configured)
	RequireNone Require = "none" // not counted
)

// ReadyPolicy says what /readyz waits for.
type ReadyPolicy struct {
	// Endpoints: sessions established (default RequireAll).
	Endpoints Require
	// Sinks: sinks connected (default RequireAll).
	Sinks Require
}

func (p *ReadyPolicy) validate() error {
	for _, r := range []*Require{&p.Endpoints, &p.Sinks} {
		switch *r {
		case "":
			*r = RequireAll
		case RequireAll, RequireAny, RequireNone:
		default:
			return fmt.Errorf("api: ReadyPolicy %q: want all, any or none", *r)
		}
	}
	return nil
}

// Readiness is the answer of /readyz.
type Readiness struct {
	Ready bool `json:"ready"`
	// ShuttingDown is set once Shutdown was called.
	ShuttingDown bool `json:"shuttingDown,omitempty"`
	// EndpointsConnected of EndpointsTotal have a session; SinksConnected
	// of SinksTotal are connected.
	EndpointsConnected int `json:"endpointsConnected"`
	EndpointsTotal     int `json:"endpointsTotal"`
	SinksConnected     int `json:"sinksConnected"`
	SinksTotal         int `json:"sinksTotal"`
	// Waiting names what is not up yet.
	Waiting []string `json:"waiting,omitempty"`
	// APIKeys says why the keys file cannot be used (readiness fails
	// until it can; the keys read before stay in use).
	APIKeys string `json:"apiKeys,omitempty"`
}

// Health is the answer of /healthz.
type Health struct {
	Status string   `json:"status" doc:"ok"`
	Uptime Duration `json:"uptime"`
}

func enough(r Require, up, total int) bool {
	switch r {
	case RequireNone:
		return true
	case RequireAny:
		return total == 0 || up > 0
	}
	return up == total
}

// Readiness computes what /readyz answers.
func (s *Server) Readiness() Readiness {
	var rd Readiness
	for _, e := range s.b.Endpoints() {
		rd.EndpointsTotal++
		if e.Connected {
			rd.EndpointsConnected++
		} else if s.opts.Ready.Endpoints != RequireNone {
			rd.Waiting = append(rd.Waiting, "endpoint "+e.Name+" ("+e.State+")")
		}
	}
	st := s.b.Stats()
	for _, k := range st.sinks() {
		rd.SinksTotal++
		if k.Connected {
			rd.SinksConnected++
		} else if s.opts.Ready.Sinks != RequireNone {
			rd.Waiting = append(rd.Waiting, "sink "+k.Name)
		}
	}
	rd.ShuttingDown = s.shuttingDown.Load()
	if ks := s.auth.state(); ks.Stale != "" {
		rd.APIKeys = fmt.Sprintf("%s (since %s; the %d keys read at %s stay in use)", ks.Stale,
			ks.Since.UTC().Format(time.RFC3339), ks.Keys, ks.Loaded.UTC().Format(time.RFC3339))
	}
	rd.Ready = !rd.ShuttingDown && rd.APIKeys == "" &&
		enough(s.opts.Ready.Endpoints, rd.EndpointsConnected, rd.EndpointsTotal) &&
		enough(s.opts.Ready.Sinks, rd.SinksConnected, rd.SinksTotal)
	if rd.Ready {
		rd.Waiting = nil
	}
	return rd
}

func (s *Server) getHealthz(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, Health{Status: "ok", Uptime: Duration(time.Since(s.started).Round(time.Second))})
}

func (s *Server) getReadyz(w http.ResponseWriter, r *http.Request) error {
	rd := s.Readiness()
	status := http.StatusOK
	if !rd.Ready {
		status = http.StatusServiceUnavailable
	}
	return writeJSON(w, status, rd)
}
