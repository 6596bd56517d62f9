package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/uagate/gateway/api"
	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
)

// The runtime as the REST API sees it (api.Backend). Changes through the API
// run on a copy of the configuration, are validated like a file, applied by
// difference, saved (to the -config file when it is YAML, else to
// <stateDir>/gateway.yaml, which a later start without -config loads) and
// only then become the running configuration.

var _ api.Backend = (*runtime)(nil)

// persisted is where the runtime saves changes made through the API.
type persisted struct {
	mu   sync.Mutex // serialises ApplyConfig (and with it Save)
	path string     // "" : not saved
}

// Config returns the running configuration; it is replaced, never changed,
// so the caller may read it as long as it likes.
func (rt *runtime) Config() *config.Config {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.cfg
}

// ApplyConfig implements api.Backend.
func (rt *runtime) ApplyConfig(ctx context.Context, change func(*config.Config) error) error {
	rt.persist.mu.Lock()
	defer rt.persist.mu.Unlock()
	next := rt.Config().Clone()
	if err := change(next); err != nil {
		return err
	}
	next.ApplyDefaults()
	if err := next.Validate(); err != nil {
		return fmt.Errorf("%w: %s", api.ErrInvalid, issuesText(err))
	}
	// What the running gateway cannot apply is refused before anything is
	// saved: a refused change must not come back at the next start.
	if ch := config.Diff(rt.Config(), next); ch.Settings || !ch.Sinks.Empty() {
		return fmt.Errorf("%w: %v: the change touches gateway, embedded, http or sink settings:\n%s", api.ErrConflict, errNeedsRestart, ch.String())
	}
	if rt.persist.path != "" {
		saved, err := config.Save(next, rt.persist.path, filepath.Join(next.Gateway.StateDir, "secrets"))
		if err != nil {
			return fmt.Errorf("saving the configuration: %w", err)
		}
		next = saved
	}
	if _, err := rt.apply(ctx, next); err != nil {
		if errors.Is(err, errNeedsRestart) {
			return fmt.Errorf("%w: %v", api.ErrConflict, err)
		}
		// Partly applied (a group that could not be made): the running
		// configuration is the new one, and the error says what failed.
		return fmt.Errorf("%w: %v", api.ErrConflict, err)
	}
	return nil
}

// issuesText is a configuration error as one line per issue, without file
// positions (the change came through the API, not from a file).
func issuesText(err error) string {
	issues := config.Issues(err)
	if issues == nil {
		return err.Error()
	}
	parts := make([]string, len(issues))
	for i, is := range issues {
		if is.Path != "" {
			parts[i] = is.Path + ": " + is.Message
		} else {
			parts[i] = is.Message
		}
	}
	return strings.Join(parts, "; ")
}

// sessionOf returns a session of an endpoint: that of its first writer group,
// else one of its own for on-demand calls (made on first use).
func (rt *runtime) sessionOf(name string) (*client.ManagedSession, *config.Endpoint, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	ep := endpointOf(rt.cfg, name)
	if ep == nil {
		return nil, nil, fmt.Errorf("endpoint %q: %w", name, api.ErrNotFound)
	}
	for _, wg := range rt.cfg.WriterGroups {
		if wg.Endpoint == name {
			if rg := rt.groups[wg.Name]; rg != nil {
				return rg.ss.m, ep, nil
			}
		}
	}
	if m := rt.apiSessions[name]; m != nil {
		return m, ep, nil
	}
	ccfg, err := rt.clientConfigLocked(ep)
	if err != nil {
		return nil, ep, err
	}
	m, err := rt.pool.SessionWith(rt.url(ep.URL), ep.Name+"/api", &client.ManagedConfig{Client: *ccfg})
	if err != nil {
		return nil, ep, fmt.Errorf("endpoint %s: %w", name, err)
	}
	if rt.apiSessions == nil {
		rt.apiSessions = map[string]*client.ManagedSession{}
	}
	rt.apiSessions[name] = m
	return m, ep, nil
}

// Endpoints implements api.Backend.
func (rt *runtime) Endpoints() []api.EndpointStatus {
	cfg := rt.Config()
	out := make([]api.EndpointStatus, 0, len(cfg.Endpoints))
	for _, ep := range cfg.Endpoints {
		var m *client.ManagedSession
		rt.mu.Lock()
		for _, wg := range cfg.WriterGroups {
			if rg := rt.groups[wg.Name]; wg.Endpoint == ep.Name && rg != nil {
				m = rg.ss.m
				break
			}
		}
		if m == nil {
			m = rt.apiSessions[ep.Name]
		}
		rt.mu.Unlock()
		out = append(out, api.NewEndpointStatus(ep.Name, rt.url(ep.URL), m))
	}
	return out
}

// LastValues implements api.Backend: a page of the group's own cache.
func (rt *runtime) LastValues(group string, f bridge.ValueFilter, from, limit int) ([]bridge.FieldValue, int, error) {
	rt.mu.Lock()
	rg := rt.groups[group]
	rt.mu.Unlock()
	if rg == nil || rg.g == nil {
		return nil, -1, fmt.Errorf("writer group %q does not run here: %w", group, api.ErrUnavailable)
	}
	vals, next := rg.g.LastValues(f, from, limit)
	return vals, next, nil
}

// Metadata implements api.Backend.
func (rt *runtime) Metadata(group, writer string) (*ua.DataSetMetaDataType, error) {
	rt.mu.Lock()
	rg := rt.groups[group]
	rt.mu.Unlock()
	if rg == nil {
		return nil, fmt.Errorf("writer group %q: %w", group, api.ErrNotFound)
	}
	if rg.g == nil {
		return nil, fmt.Errorf("writer group %q is still starting: %w", group, api.ErrUnavailable)
	}
	md, ok := rg.g.MetaData(writer)
	if !ok {
		return nil, fmt.Errorf("writer %q of group %q: %w", writer, group, api.ErrNotFound)
	}
	return md, nil
}

// Session implements api.Backend.
func (rt *runtime) Session(ctx context.Context, endpoint string) (*client.Client, error) {
	m, _, err := rt.sessionOf(endpoint)
	if err != nil {
		return nil, err
	}
	c, err := m.WaitConnected(ctx)
	if err != nil {
		return nil, fmt.Errorf("endpoint %s is not connected: %v: %w", endpoint, err, api.ErrUnavailable)
	}
	return c, nil
}

// Store implements api.Backend: the certificate store of an endpoint, or
// with "" the gateway's default one (<stateDir>/pki).
func (rt *runtime) Store(endpoint string) (*pki.Store, error) {
	cfg := rt.Config()
	dir := filepath.Join(cfg.Gateway.StateDir, "pki")
	if endpoint != "" {
		ep := endpointOf(cfg, endpoint)
		if ep == nil {
			return nil, fmt.Errorf("endpoint %q: %w", endpoint, api.ErrNotFound)
		}
		dir = ep.PKI
	}
	rt.storeMu.Lock()
	defer rt.storeMu.Unlock()
	if s := rt.stores[dir]; s != nil {
		return s, nil
	}
	s, err := pki.Open(dir, pki.Options{Logger: rt.log})
	if err != nil {
		return nil, err
	}
	if rt.stores == nil {
		rt.stores = map[string]*pki.Store{}
	}
	rt.stores[dir] = s
	return s, nil
}

// Stats implements api.Backend: the parts' own counters.
func (rt *runtime) Stats() api.Stats {
	cfg := rt.Config()
	var st api.Stats
	rt.mu.Lock()
	for _, wg := range cfg.WriterGroups {
		if rg := rt.groups[wg.Name]; rg != nil && rg.g != nil {
			st.Groups = append(st.Groups, rg.g.Stats())
		}
	}
	rt.mu.Unlock()
	for _, o := range rt.outputs {
		st.Sinks = append(st.Sinks, api.SinkStats{OutputStats: o.Stats(), Kind: o.kind})
	}
	if rt.hub != nil {
		hs := rt.hub.Stats()
		st.WebSocket = &hs
	}
	st.Pools, st.BufferPools = pooling.Registered(), pooling.RegisteredBuffers()
	if rt.scale != nil {
		so := &api.ScaleOutStatus{ReplicaID: rt.scale.ReplicaID(), Groups: []api.LeaseHolder{}}
		for _, h := range rt.scale.Holders() {
			so.Groups = append(so.Groups, api.LeaseHolder{Group: h.Unit, Holder: h.Holder, Local: h.Local})
		}
		st.ScaleOut = so
	}
	return st
}

// RetryNow implements api.Retrier: every session waiting between connection
// attempts tries again at once.
func (rt *runtime) RetryNow() {
	if rt.pool == nil {
		return
	}
	for _, e := range rt.pool.Sessions() {
		e.Session.RetryNow()
	}
}
