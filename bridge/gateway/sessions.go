package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/resume"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/ua"
)

// Sessions of the writer groups.
//
// A writer group is one subscription. The groups of an endpoint share its
// sessions (config Endpoint.Sessions, default 1), as OPC Publisher shares one
// per endpoint: a PLC allows few sessions, and each costs the gateway a
// channel with its buffers and goroutines. A new group goes to the
// endpoint's session with the fewest groups; a group keeps its session until
// it is removed, and the last group to leave a session closes it. Under
// scale-out every group has a session of its own, since a replica hands a
// group over by detaching its session (client.ManagedSession.Detach).
//
// The bookkeeping is under gw.mu; closing a session is not.

// setupSlotsPerSession bounds the groups of one session that browse, read
// data types and create their monitored items at once: every group setting
// up together would hold all their transient memory (the responses, the
// expanded configurations, the item tables being filled) at the same time,
// and the server answers one session's requests in turn anyway.
const setupSlotsPerSession = 4

// MaxPublishRequests bounds the Publish requests a session keeps at the
// server (client.ManagedConfig.MaxPublishRequests; the client's default is
// 10). The client keeps one per subscription plus what one round trip
// needs, so one group's session keeps 2–3 whatever the bound; a session
// with many groups publishing fast needs about one per group: with too few,
// the server has responses ready for more subscriptions than it has
// requests, and under load some go unserved past their keep-alive window,
// which the client takes for a lost subscription. A server that allows
// fewer says BadTooManyPublishRequests and the client keeps to its number
// (then more sessions serve many groups better).
const MaxPublishRequests = 64

// sharedSession is a session of the pool and the writer groups on it.
type sharedSession struct {
	key   client.PoolKey
	label string // the pool's group: names the session and its saved state
	m     *client.ManagedSession
	refs  int           // writer groups on it
	slots chan struct{} // groups setting up on it (setupSlotsPerSession)
}

// endpointClient is the client configuration made for an endpoint: every
// session of the endpoint is made with the same one (the pool tells sessions
// apart by it, its certificate store included), until the endpoint's
// configuration changes.
type endpointClient struct {
	ep  config.Endpoint
	cfg *client.Config
}

// clientConfig returns the client configuration of the endpoint named
// name in cfg, made once per version of the endpoint's settings. Making one
// opens the endpoint's certificate store (file work): call it without gw.mu.
func (gw *Gateway) clientConfig(cfg *config.Config, name string) (*client.Config, error) {
	ep := endpointOf(cfg, name)
	if ep == nil {
		return nil, fmt.Errorf("endpoint %q is not configured", name)
	}
	gw.mu.Lock()
	c, ok := gw.clients[ep.Name]
	gw.mu.Unlock()
	if ok && reflect.DeepEqual(c.ep, *ep) {
		return c.cfg, nil
	}
	ccfg, err := config.ClientConfig(ep, cfg.Gateway.StateDir, gw.log.With("upstream", ep.Name))
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: %w", ep.Name, err)
	}
	ccfg.ApplicationURI = cfg.Gateway.ApplicationURI // "": the client's default
	gw.mu.Lock()
	defer gw.mu.Unlock()
	if c, ok := gw.clients[ep.Name]; ok && reflect.DeepEqual(c.ep, *ep) {
		return c.cfg, nil // made meanwhile: the pool tells sessions apart by it
	}
	if gw.clients == nil {
		gw.clients = map[string]endpointClient{}
	}
	gw.clients[ep.Name] = endpointClient{ep: *ep, cfg: ccfg}
	return ccfg, nil
}

// endpointOf returns the configured endpoint named name (nil: none).
func endpointOf(cfg *config.Config, name string) *config.Endpoint {
	for i := range cfg.Endpoints {
		if cfg.Endpoints[i].Name == name {
			return &cfg.Endpoints[i]
		}
	}
	return nil
}

// sessionForLocked picks the session of ep the writer group named group
// runs on, makes it on first use and counts the group in.
func (gw *Gateway) sessionForLocked(ep *config.Endpoint, group string, ccfg *client.Config) (*sharedSession, error) {
	url := gw.url(ep.URL)
	mc := &client.ManagedConfig{
		Client: *ccfg,
		// The client logs every state change itself.
		OnStateChange:      gw.opts.OnState,
		PublishLatency:     gw.hist.PublishRoundTrip(ep.Name),
		MaxPublishRequests: MaxPublishRequests,
	}
	// The pool's group names the session (and goes into its SessionName):
	// the endpoint's name for its only session, <name>#<k> for one of
	// several, the group's name under scale-out. Names have no # or /, so
	// these never meet each other or the API's <name>/api.
	var labels []string
	switch {
	case gw.cfg.ScaleOut.Enabled:
		labels = []string{group}
	case ep.Sessions <= 1:
		labels = []string{ep.Name}
	default:
		for k := 1; k <= ep.Sessions; k++ {
			labels = append(labels, ep.Name+"#"+strconv.Itoa(k))
		}
	}
	var key client.PoolKey
	label, fewest := "", -1
	for _, l := range labels {
		k, err := gw.pool.Key(url, l, mc)
		if err != nil {
			return nil, err
		}
		n := 0
		if ss := gw.sessions[k]; ss != nil {
			n = ss.refs
		}
		if fewest < 0 || n < fewest {
			key, label, fewest = k, l, n
		}
	}
	gw.keepSession(mc, label)
	m, err := gw.pool.SessionWith(url, label, mc)
	if err != nil {
		return nil, err
	}
	ss := gw.sessions[key]
	if ss == nil {
		ss = &sharedSession{key: key, label: label, m: m, slots: make(chan struct{}, setupSlotsPerSession)}
		if gw.sessions == nil {
			gw.sessions = map[client.PoolKey]*sharedSession{}
		}
		gw.sessions[key] = ss
	}
	ss.refs++
	return ss, nil
}

// sessionsDir keeps the sessions' states (resume.SaveSession), for a
// restart to activate them again rather than create new ones.
func (gw *Gateway) sessionsDir() string {
	return filepath.Join(gw.cfg.Gateway.StateDir, "sessions")
}

// keepSession makes the session labelled label save its state at every
// activation, and ask at its first connection for the one the last run
// saved: the new run activates that session again on a new channel, its
// subscriptions still there (client.ResumeSession), before it would create
// one and transfer them. The files are read and written by the session's
// worker, never under gw.mu.
func (gw *Gateway) keepSession(mc *client.ManagedConfig, label string) {
	if gw.scale != nil {
		gw.shareSession(mc, label)
		return
	}
	dir := gw.sessionsDir()
	mc.SavedSession = func() *client.SessionState {
		st, err := resume.LoadSession(dir, label)
		if err != nil {
			gw.log.Warn("the saved session cannot be read; a new one is created", "session", label, "err", err)
			return nil
		}
		return st
	}
	mc.OnSession = func(_ *client.ManagedSession, st client.SessionState) {
		if err := resume.SaveSession(dir, label, st); err != nil {
			gw.log.Warn("saving the session's state failed; a restart creates a new session", "session", label, "err", err)
		}
	}
}

// shareSession is keepSession under scale-out, where the session labelled
// label is writer group label's own: its state goes with the group's lease
// (lease.KV.SaveSession), so that whichever replica holds the group next —
// after a handover or a kill -9 — activates the same session on its own
// channel and the subscription goes on without a transfer, which servers
// refuse for an anonymous user on an unsecured channel (node-opcua, our
// simulation server: Part 4 §5.13.7). Only a session over SecurityMode None
// is shared: its authentication token travels unencrypted anyway, while a
// secured session's token stays with its replica (its next holder
// transfers the subscription, as servers allow a user's).
func (gw *Gateway) shareSession(mc *client.ManagedConfig, label string) {
	kv := gw.scale
	mc.SavedSession = func() *client.SessionState { return kv.LoadSession(label) }
	mc.OnSession = func(_ *client.ManagedSession, st client.SessionState) {
		if !sessionShared(&st) {
			return
		}
		if err := kv.SaveSession(label, st); err != nil {
			gw.log.Debug("the session's state not kept with the lease", "group", label, "err", err)
		}
	}
}

// sharedSessionKept reports whether writer group name's session state
// goes with its lease (shareSession): a handover then keeps the session at
// the server for the next holder to activate.
func (gw *Gateway) sharedSessionKept(name string) bool {
	return sessionShared(gw.scale.LoadSession(name))
}

// sessionShared reports whether st may go with a lease: a session over
// SecurityMode None, whose token is no secret.
func sessionShared(st *client.SessionState) bool {
	return st != nil && st.SecurityMode == ua.MessageSecurityModeNone
}

// forgetSession deletes the saved state of a session closed for good.
func (gw *Gateway) forgetSession(label string) {
	if err := resume.RemoveSession(gw.sessionsDir(), label); err != nil {
		gw.log.Debug("removing a session's saved state", "session", label, "err", err)
	}
}

// releaseSessionLocked counts the writer group out of ss and, when no group
// is left on it, takes the session out of the pool and returns it for the
// caller to close outside gw.mu (closeSession); nil otherwise.
func (gw *Gateway) releaseSessionLocked(ss *sharedSession) *client.ManagedSession {
	ss.refs--
	if ss.refs > 0 {
		return nil
	}
	if gw.sessions[ss.key] == ss {
		delete(gw.sessions, ss.key)
	}
	return gw.pool.Take(ss.key)
}

// closeSession closes a session releaseSessionLocked returned (nil: none).
func (gw *Gateway) closeSession(ctx context.Context, group string, m *client.ManagedSession) {
	if m == nil {
		return
	}
	if err := m.Close(ctx); err != nil {
		gw.log.Debug("session close", "group", group, "err", err)
	}
}
