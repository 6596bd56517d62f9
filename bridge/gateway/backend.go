package gateway

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/uagate/gateway/api"
	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
)

// The gateway as the REST API sees it (api.Backend). Reads take the
// published view (gw.view) and no lock a reload or the data plane holds.
// Changes through the API run on a copy of the configuration, are validated
// like a file, applied by difference (Apply), and what then runs is saved
// (to the -config file when it is YAML, else to <stateDir>/gateway.yaml,
// which a later start without -config loads).

var _ api.Backend = (*Gateway)(nil)

// Config returns the running configuration; it is replaced, never changed,
// so the caller may read it as long as it likes.
func (gw *Gateway) Config() *config.Config {
	return gw.view.Load().cfg
}

// ApplyConfig implements api.Backend: change runs on a copy of the running
// configuration; the result is validated and applied by difference, writer
// group by writer group (Apply). What then runs is saved and becomes the
// running configuration: a writer group whose change failed keeps running
// as it was, the error (ErrConflict) names it, and Retry tries it again.
// Nothing is saved or changed when change, validation, or a change that
// needs a restart is refused.
func (gw *Gateway) ApplyConfig(ctx context.Context, change func(*config.Config) error) error {
	if err := gw.acquireApply(ctx); err != nil {
		return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	defer gw.releaseApply()
	cur := gw.Config()
	next := cur.Clone()
	if err := change(next); err != nil {
		return err
	}
	next.ApplyDefaults()
	if err := next.Validate(); err != nil {
		return fmt.Errorf("%w: %s", api.ErrInvalid, issuesText(err))
	}
	// What the running gateway cannot apply is refused before anything is
	// saved: a refused change must not come back at the next start.
	if ch := config.Diff(cur, next); ch.Settings || !ch.Sinks.Empty() {
		return fmt.Errorf("%w: %v: the change touches gateway, embedded, http or sink settings:\n%s", api.ErrConflict, ErrNeedsRestart, ch.String())
	}
	path := gw.opts.SavePath
	if path != "" {
		// Secrets go to files of their own before the apply, so that what
		// runs is what the file says (the watcher then finds no change).
		stored, err := config.StoreSecrets(next, next.Gateway.SecretsDir)
		if err != nil {
			return fmt.Errorf("saving the configuration: %w", err)
		}
		next = stored
	}
	_, applyErr := gw.applyHeld(ctx, next)
	if errors.Is(applyErr, ErrStopped) {
		return fmt.Errorf("%w: %v", api.ErrUnavailable, applyErr)
	}
	if err := gw.saveIfChanged(cur); err != nil {
		return err
	}
	if applyErr != nil {
		return fmt.Errorf("%w: %v (the other changes were applied; POST /api/v1/config/retry tries again)", api.ErrConflict, applyErr)
	}
	return nil
}

// RetryConfig implements api.ConfigRetrier: the writer groups whose change
// failed are tried again; what then runs is saved.
func (gw *Gateway) RetryConfig(ctx context.Context) error {
	cur := gw.Config()
	_, err := gw.Retry(ctx)
	if err := gw.saveIfChanged(cur); err != nil {
		return err
	}
	if err != nil {
		if errors.Is(err, ErrStopped) {
			return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
		}
		return fmt.Errorf("%w: %v", api.ErrConflict, err)
	}
	return nil
}

// saveIfChanged saves what runs to Options.SavePath when it is no longer
// cur (the configuration before an apply).
func (gw *Gateway) saveIfChanged(cur *config.Config) error {
	if p := gw.opts.SavePath; p != "" && gw.Config() != cur {
		if err := config.Write(gw.Config(), p); err != nil {
			return fmt.Errorf("the change runs but was not saved: %w", err)
		}
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
func (gw *Gateway) sessionOf(name string) (*client.ManagedSession, *config.Endpoint, error) {
	v := gw.view.Load()
	ep := endpointOf(v.cfg, name)
	if ep == nil {
		return nil, nil, fmt.Errorf("endpoint %q: %w", name, api.ErrNotFound)
	}
	if m := gw.endpointSession(v, name); m != nil {
		return m, ep, nil
	}
	ccfg, err := gw.clientConfig(v.cfg, name)
	if err != nil {
		return nil, ep, err
	}
	gw.mu.Lock()
	defer gw.mu.Unlock()
	if m := gw.apiSessions[name]; m != nil {
		return m, ep, nil
	}
	m, err := gw.pool.SessionWith(gw.url(ep.URL), ep.Name+"/api", &client.ManagedConfig{Client: *ccfg})
	if err != nil {
		return nil, ep, fmt.Errorf("endpoint %s: %w", name, err)
	}
	if gw.apiSessions == nil {
		gw.apiSessions = map[string]*client.ManagedSession{}
	}
	gw.apiSessions[name] = m
	return m, ep, nil
}

// endpointSession returns the session of the first running writer group of
// the endpoint, else the API's own (nil: none).
func (gw *Gateway) endpointSession(v *view, endpoint string) *client.ManagedSession {
	for _, wg := range v.cfg.WriterGroups {
		if rg := v.groups[wg.Name]; wg.Endpoint == endpoint && rg != nil {
			return rg.ss.m
		}
	}
	gw.mu.Lock()
	defer gw.mu.Unlock()
	return gw.apiSessions[endpoint]
}

// Endpoints implements api.Backend.
func (gw *Gateway) Endpoints() []api.EndpointStatus {
	v := gw.view.Load()
	out := make([]api.EndpointStatus, 0, len(v.cfg.Endpoints))
	for _, ep := range v.cfg.Endpoints {
		out = append(out, api.NewEndpointStatus(ep.Name, gw.url(ep.URL), gw.endpointSession(v, ep.Name)))
	}
	return out
}

// group returns the running writer group name (nil: none, or still being
// built).
func (gw *Gateway) group(name string) *bridge.WriterGroup {
	if rg := gw.view.Load().groups[name]; rg != nil {
		return rg.g.Load()
	}
	return nil
}

// LastValues implements api.Backend: a page of the group's own cache.
func (gw *Gateway) LastValues(group string, f bridge.ValueFilter, from, limit int) ([]bridge.FieldValue, int, error) {
	g := gw.group(group)
	if g == nil {
		return nil, -1, fmt.Errorf("writer group %q does not run here: %w", group, api.ErrUnavailable)
	}
	vals, next := g.LastValues(f, from, limit)
	return vals, next, nil
}

// Metadata implements api.Backend.
func (gw *Gateway) Metadata(group, writer string) (*ua.DataSetMetaDataType, error) {
	rg := gw.view.Load().groups[group]
	if rg == nil {
		return nil, fmt.Errorf("writer group %q: %w", group, api.ErrNotFound)
	}
	g := rg.g.Load()
	if g == nil {
		return nil, fmt.Errorf("writer group %q is still starting: %w", group, api.ErrUnavailable)
	}
	md, ok := g.MetaData(writer)
	if !ok {
		return nil, fmt.Errorf("writer %q of group %q: %w", writer, group, api.ErrNotFound)
	}
	return md, nil
}

// Session implements api.Backend.
func (gw *Gateway) Session(ctx context.Context, endpoint string) (*client.Client, error) {
	m, _, err := gw.sessionOf(endpoint)
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
func (gw *Gateway) Store(endpoint string) (*pki.Store, error) {
	cfg := gw.Config()
	dir := filepath.Join(cfg.Gateway.StateDir, "pki")
	if endpoint != "" {
		ep := endpointOf(cfg, endpoint)
		if ep == nil {
			return nil, fmt.Errorf("endpoint %q: %w", endpoint, api.ErrNotFound)
		}
		dir = ep.PKI
	}
	gw.storeMu.Lock()
	defer gw.storeMu.Unlock()
	if s := gw.stores[dir]; s != nil {
		return s, nil
	}
	s, err := pki.Open(dir, pki.Options{Logger: gw.log})
	if err != nil {
		return nil, err
	}
	if gw.stores == nil {
		gw.stores = map[string]*pki.Store{}
	}
	gw.stores[dir] = s
	return s, nil
}

// Stats implements api.Backend: the parts' own counters.
func (gw *Gateway) Stats() api.Stats {
	cfg := gw.Config()
	var st api.Stats
	for _, wg := range cfg.WriterGroups {
		if g := gw.group(wg.Name); g != nil {
			st.Groups = append(st.Groups, g.Stats())
		}
	}
	for _, o := range gw.allOutputs() {
		st.Sinks = append(st.Sinks, api.SinkStats{OutputStats: o.Stats(), Kind: o.kind})
		if o.node != nil {
			st.Sparkplug = append(st.Sparkplug, o.node.Stats())
		}
	}
	if gw.hub != nil {
		hs := gw.hub.Stats()
		st.WebSocket = &hs
	}
	st.Pools, st.BufferPools = pooling.Registered(), pooling.RegisteredBuffers()
	if gw.cmd != nil {
		st.Commands = gw.cmd.Stats()
	}
	if gw.scale != nil {
		so := &api.ScaleOutStatus{ReplicaID: gw.scale.ReplicaID(), Groups: []api.LeaseHolder{}}
		for _, h := range gw.scale.Holders() {
			so.Groups = append(so.Groups, api.LeaseHolder{Group: h.Unit, Holder: h.Holder, Local: h.Local})
		}
		st.ScaleOut = so
	}
	st.Store = gw.StoreStats()
	return st
}

// RetryNow implements api.Retrier: every session waiting between connection
// attempts tries again at once.
func (gw *Gateway) RetryNow() {
	if gw.pool == nil {
		return
	}
	for _, e := range gw.pool.Sessions() {
		e.Session.RetryNow()
	}
}

var _ api.ConfigReporter = (*Gateway)(nil)

// ApplyState implements api.ConfigReporter.
func (gw *Gateway) ApplyState() api.ApplyState {
	rep := gw.LastReport()
	st := api.ApplyState{Pending: gw.Pending(), At: rep.At, Applied: append([]string{}, rep.Applied...), Failed: []api.ApplyFailure{}}
	for _, f := range rep.Failed {
		st.Failed = append(st.Failed, api.ApplyFailure{Group: f.Group, Error: f.Err.Error()})
	}
	return st
}
