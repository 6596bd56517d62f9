package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/uastack/client"
)

// The writer groups' lifecycle: made on one of their endpoint's sessions,
// started in the background, stopped or detached (keeping the subscription
// for a restart or another replica).

// queues returns the queues of ua-data/metadata messages and those of
// per-field messages, with the options per-field publishing takes.
func (gw *Gateway) queues() (data, fields []sink.Queue, pf *config.PerField) {
	for _, o := range gw.outputs {
		if o.perField != nil {
			fields = append(fields, o)
			if pf == nil {
				pf = o.perField
			}
			continue
		}
		data = append(data, o)
	}
	if gw.hub != nil {
		data = append(data, gw.hub)
	}
	return data, fields, pf
}

// addGroup makes writer group wg of cfg a subscription on one of its
// endpoint's sessions (sessions.go), with the endpoint's client configuration
// ccfg (clientConfig), and starts it in the background: Start waits for the
// session, and an endpoint that is down must not hold the others up. A group
// of that name running already is left alone.
func (gw *Gateway) addGroup(cfg *config.Config, wg *config.WriterGroup, ccfg *client.Config) error {
	ep := endpointOf(cfg, wg.Endpoint)
	if ep == nil {
		return fmt.Errorf("writer group %s: endpoint %q is not configured", wg.Name, wg.Endpoint)
	}
	gw.mu.Lock()
	if gw.stopped {
		gw.mu.Unlock()
		return fmt.Errorf("writer group %s: %w", wg.Name, ErrStopped)
	}
	if gw.groups[wg.Name] != nil {
		gw.mu.Unlock()
		return nil
	}
	ss, err := gw.sessionForLocked(ep, wg.Name, ccfg)
	if err != nil {
		gw.mu.Unlock()
		return fmt.Errorf("writer group %s: %w", wg.Name, err)
	}
	gctx, cancel := context.WithCancel(gw.ctx)
	rg := &runGroup{ss: ss, cancel: cancel}
	gw.groups[wg.Name] = rg
	gw.publishLocked()
	gw.mu.Unlock()
	m, url := ss.m, gw.url(ep.URL)
	if !hasBrowse(wg) {
		// Built outside gw.mu: a group of a million fields takes a while.
		g, err := gw.newGroup(wg, m, url)
		if err != nil {
			cancel()
			gw.mu.Lock()
			if gw.groups[wg.Name] == rg {
				delete(gw.groups, wg.Name)
				gw.publishLocked()
			}
			sm := gw.releaseSessionLocked(ss)
			gw.mu.Unlock()
			gw.closeSession(context.Background(), wg.Name, sm)
			return err
		}
		rg.g.Store(g)
	}
	wcfg := *wg
	gw.starts.Add(1)
	go func() {
		defer gw.starts.Done()
		// A few groups of a session set up at once: browsing, reading
		// data types and creating items of every group together would
		// hold all their transient memory at the same time.
		select {
		case ss.slots <- struct{}{}:
			defer func() { <-ss.slots }()
		case <-gctx.Done():
			return
		}
		g := rg.g.Load()
		if g == nil {
			// Browse selections need the server: expand them into fields
			// once connected, then build the group.
			c, err := m.WaitConnected(gctx)
			var expanded *config.WriterGroup
			if err == nil {
				expanded, err = config.ExpandWriterGroup(gctx, c, &wcfg, gw.log)
			}
			if err == nil {
				g, err = gw.newGroup(expanded, m, url)
			}
			if err != nil {
				if gctx.Err() == nil {
					gw.log.Error("writer group not started", "group", wcfg.Name, "err", err)
				}
				return
			}
			gw.mu.Lock()
			if gctx.Err() != nil { // removed meanwhile
				gw.mu.Unlock()
				_ = g.Stop(context.Background())
				return
			}
			rg.g.Store(g)
			gw.mu.Unlock()
		}
		if err := g.Start(gctx); err != nil && gctx.Err() == nil {
			gw.log.Error("writer group did not start", "group", wcfg.Name, "err", err)
		}
		gw.mem.started()
	}()
	return nil
}

func hasBrowse(wg *config.WriterGroup) bool {
	for _, w := range wg.Writers {
		if len(w.Browse) > 0 {
			return true
		}
	}
	return false
}

// newGroup makes the bridge's writer group of wg on session m.
func (gw *Gateway) newGroup(wg *config.WriterGroup, m *client.ManagedSession, url string) (*bridge.WriterGroup, error) {
	data, fields, pf := gw.queues()
	opts := bridge.Options{
		Session:     m,
		Queues:      data,
		FieldQueues: fields,
		PublisherID: gw.view.Load().cfg.Gateway.PublisherID, // a gateway setting: the same in every configuration applied
		EndpointURL: url,
		Logger:      gw.log,
		Resume:      gw.resume,
	}
	if gw.resume != nil {
		opts.MarksDir = gw.resume.Dir
	}
	if gw.scale != nil {
		opts.Resume, opts.ResumeShared = gw.scale, true
		opts.ResumeHorizon = gw.view.Load().cfg.ScaleOut.LeaseTTL.D()
	}
	if pf != nil {
		opts.FieldPayload = pf.Payload
		opts.FieldNoRetain = pf.Retain != nil && !*pf.Retain
	}
	g, err := bridge.NewWriterGroup(*wg, opts)
	if err != nil {
		return nil, fmt.Errorf("writer group %s: %w", wg.Name, err)
	}
	return g, nil
}

// takeGroup takes the writer group name out of the running state (nil: it
// does not run here); the caller stops or detaches it.
func (gw *Gateway) takeGroup(name string) *runGroup {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	rg := gw.groups[name]
	if rg != nil {
		delete(gw.groups, name)
		gw.publishLocked()
	}
	return rg
}

// removeGroup stops a writer group (its subscription deleted at the server)
// and closes its session when no other group uses it.
func (gw *Gateway) removeGroup(ctx context.Context, name string) {
	rg := gw.takeGroup(name)
	if rg == nil {
		return
	}
	rg.cancel()
	if g := rg.g.Load(); g != nil {
		if err := g.Stop(ctx); err != nil {
			gw.log.Warn("writer group stop", "group", name, "err", err)
		}
	}
	gw.mu.Lock()
	m := gw.releaseSessionLocked(rg.ss)
	gw.mu.Unlock()
	gw.closeSession(ctx, name, m)
	if m != nil {
		gw.forgetSession(rg.ss.label)
	}
}

// detachGroup stops a writer group keeping its subscription at the server
// and returns the subscription's final resume state (nil when it has none).
// rg is no longer in gw.groups. For this process's restart (suspend) the
// session stays at the server too (client.ManagedSession.Suspend): the next
// run activates it again and the subscription goes on; for another replica
// to take the group over, the session is closed keeping the subscription
// (Detach), which the other transfers.
func (gw *Gateway) detachGroup(ctx context.Context, name string, rg *runGroup, suspend bool) *client.ResumeState {
	rg.cancel() // a Start still waiting for the session ends
	// Detach first: Stop alone would delete the subscription at the server.
	// A session shared with other groups is detached for all of them: this
	// runs for every group at shutdown (scale-out, which hands single
	// groups over, gives each group a session of its own).
	detach := rg.ss.m.Detach
	if suspend {
		detach = rg.ss.m.Suspend
	}
	if err := detach(ctx); err != nil {
		gw.log.Debug("session detach", "group", name, "err", err)
	}
	var final *client.ResumeState
	if g := rg.g.Load(); g != nil { // a group still being built stops itself (its context is done)
		if sub := g.Subscription(); sub != nil {
			if st, ok := sub.ResumeState(); ok {
				final = &st
			}
		}
		if err := g.Stop(ctx); err != nil {
			gw.log.Warn("writer group stop", "group", name, "err", err)
		}
	}
	gw.mu.Lock()
	m := gw.releaseSessionLocked(rg.ss)
	gw.mu.Unlock()
	gw.closeSession(ctx, name, m)
	return final
}

// keepResumeState writes a detached group's final state (its last
// acknowledgements included) into its resume record in the state directory.
func (gw *Gateway) keepResumeState(name string, final *client.ResumeState) {
	if final == nil || gw.resume == nil {
		return
	}
	rec, ok, err := gw.resume.LoadResume(name)
	if err != nil || !ok || rec.State.SubscriptionID != final.SubscriptionID {
		// No record of this subscription (it never got its items): a
		// restart subscribes anew, the server drops the kept one at the
		// end of its lifetime.
		gw.log.Info("writer group stopped; its subscription has no resume record", "group", name, "subscription", final.SubscriptionID)
		return
	}
	rec.State = *final
	rec.Saved = time.Now()
	if err := gw.resume.SaveResume(name, rec); err != nil {
		gw.log.Warn("writer group stopped; saving its resume state failed", "group", name, "err", err)
		return
	}
	gw.log.Info("writer group stopped; subscription kept at the server for a restart", "group", name,
		"subscription", final.SubscriptionID, "lastAcked", final.LastAcked)
}
