package main

import (
	"context"
	"fmt"
	"reflect"
	"strconv"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/uastack/client"
)

// Sessions of the writer groups.
//
// A writer group is one subscription. The groups of an endpoint share its
// sessions (config Endpoint.Sessions, default 1), as OPC Publisher shares one
// per endpoint: a PLC allows few sessions, and each costs the gateway a
// channel with its buffers and goroutines (~300 KB at 1,000,000 items in 100
// groups: 30 MB when every group had its own). A new group goes to the
// endpoint's session with the fewest groups; a group keeps its session until
// it is removed, and the last group to leave a session closes it. Under
// scale-out every group has a session of its own, since a replica hands a
// group over by detaching its session (client.ManagedSession.Detach).
//
// All of it is under rt.mu.

// setupSlotsPerSession bounds the groups of one session that browse, read
// data types and create their monitored items at once: with 100 groups of
// 10,000 items on one session, all at once held 840 MB of transient memory
// (the responses, the expanded configurations, the item tables being
// filled); the server answers one session's requests in turn anyway.
const setupSlotsPerSession = 4

// maxPublishRequests bounds the Publish requests a session keeps at the
// server (client.ManagedConfig.MaxPublishRequests; the client's default is
// 10). The client keeps one per subscription plus what one round trip
// needs, so one group's session keeps 2–3 whatever the bound; a session
// with 100 groups publishing every 20 ms needs about one per group: with
// 10, the server had a response ready for more subscriptions than it had
// requests, and at the setup's load some went unserved past their
// keep-alive window, which the client takes for a lost subscription. A
// server that allows fewer says BadTooManyPublishRequests and the client
// keeps to its number (then more sessions serve many groups better).
const maxPublishRequests = 64

// sharedSession is a session of the pool and the writer groups on it.
type sharedSession struct {
	key   client.PoolKey
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

// clientConfigLocked returns the endpoint's client configuration, made once
// per version of the endpoint's settings.
func (rt *runtime) clientConfigLocked(ep *config.Endpoint) (*client.Config, error) {
	if c, ok := rt.clients[ep.Name]; ok && reflect.DeepEqual(c.ep, *ep) {
		return c.cfg, nil
	}
	ccfg, err := config.ClientConfig(ep, rt.cfg.Gateway.StateDir, rt.log.With("upstream", ep.Name))
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: %w", ep.Name, err)
	}
	if rt.clients == nil {
		rt.clients = map[string]endpointClient{}
	}
	rt.clients[ep.Name] = endpointClient{ep: *ep, cfg: ccfg}
	return ccfg, nil
}

// sessionForLocked picks the session of ep the writer group named group
// runs on, makes it on first use and counts the group in.
func (rt *runtime) sessionForLocked(ep *config.Endpoint, group string, onState func(*client.ManagedSession, client.State, error)) (*sharedSession, error) {
	ccfg, err := rt.clientConfigLocked(ep)
	if err != nil {
		return nil, err
	}
	url := rt.url(ep.URL)
	mc := &client.ManagedConfig{
		Client: *ccfg,
		// The client logs every state change itself.
		OnStateChange:      onState,
		PublishLatency:     rt.hist.PublishRoundTrip(ep.Name),
		MaxPublishRequests: maxPublishRequests,
	}
	// The pool's group names the session (and goes into its SessionName):
	// the endpoint's name for its only session, <name>#<k> for one of
	// several, the group's name under scale-out. Names have no # or /, so
	// these never meet each other or the API's <name>/api.
	var labels []string
	switch {
	case rt.cfg.ScaleOut.Enabled:
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
		k, err := rt.pool.Key(url, l, mc)
		if err != nil {
			return nil, err
		}
		n := 0
		if ss := rt.sessions[k]; ss != nil {
			n = ss.refs
		}
		if fewest < 0 || n < fewest {
			key, label, fewest = k, l, n
		}
	}
	m, err := rt.pool.SessionWith(url, label, mc)
	if err != nil {
		return nil, err
	}
	ss := rt.sessions[key]
	if ss == nil {
		ss = &sharedSession{key: key, m: m, slots: make(chan struct{}, setupSlotsPerSession)}
		if rt.sessions == nil {
			rt.sessions = map[client.PoolKey]*sharedSession{}
		}
		rt.sessions[key] = ss
	}
	ss.refs++
	return ss, nil
}

// releaseSessionLocked counts the writer group named group out of ss and
// closes the session when no group is left on it.
func (rt *runtime) releaseSessionLocked(ctx context.Context, group string, ss *sharedSession) {
	ss.refs--
	if ss.refs > 0 {
		return
	}
	if rt.sessions[ss.key] == ss {
		delete(rt.sessions, ss.key)
	}
	if err := rt.pool.Remove(ctx, ss.key); err != nil {
		rt.log.Debug("session close", "group", group, "err", err)
	}
}
