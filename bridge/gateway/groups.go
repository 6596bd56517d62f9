package gateway

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/storelog"
	"github.com/uagate/gateway/uastack/client"
)

// The writer groups' lifecycle: made on one of their endpoint's sessions,
// started in the background, stopped or detached (keeping the subscription
// for a restart or another replica).

// queues returns writer group name's queues of ua-data/metadata messages
// and of per-field messages, with the options per-field publishing takes:
// the sinks' Outputs and the group's own (own: groupsink.go). With the log
// they are the group's stream (the readers feed the sinks from it) and the
// WebSocket hub; the log is not run with sinks of the group's own (not
// under scale-out).
func (gw *Gateway) queues(name string, own []*runOutput) (data, fields []sink.Queue, pf *config.PerField, err error) {
	if gw.store != nil {
		s, err := gw.stream(name)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("store-and-forward log: %w", err)
		}
		data = []sink.Queue{s}
		for _, o := range gw.outputs {
			if o.perField != nil {
				if pf == nil {
					pf = o.perField
					fields = []sink.Queue{s}
				}
			}
		}
		if gw.hub != nil {
			data = append(data, gw.hub)
		}
		return data, fields, pf, nil
	}
	for _, o := range append(slices.Clip(gw.outputs), own...) {
		if o.node != nil {
			continue // fed by the groups' ValueSinks (valueSinks)
		}
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
	return data, fields, pf, nil
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
		g, err := gw.newGroup(rg, wg, m, url)
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
				g, err = gw.newGroup(rg, expanded, m, url)
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
				if p := rg.outs.Swap(nil); p != nil {
					gw.closeUnused(*p)
				}
				return
			}
			rg.g.Store(g)
			gw.mu.Unlock()
		}
		if err := g.Start(gctx); err != nil && gctx.Err() == nil {
			gw.log.Error("writer group did not start", "group", wcfg.Name, "err", err)
		}
		gw.refreshSparkplug()
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

// newGroup makes the bridge's writer group of wg on session m, and its own
// Outputs (rg.outs).
func (gw *Gateway) newGroup(rg *runGroup, wg *config.WriterGroup, m *client.ManagedSession, url string) (*bridge.WriterGroup, error) {
	own, err := gw.groupOutputs(wg.Name)
	if err != nil {
		return nil, fmt.Errorf("writer group %s: %w", wg.Name, err)
	}
	g, err := gw.buildGroup(wg, m, url, own)
	if err != nil {
		gw.closeUnused(own)
		return nil, err
	}
	if len(own) > 0 {
		rg.outs.Store(&own)
	}
	return g, nil
}

// closeUnused closes a writer group's own Outputs that never got a
// message (the group was not built, or removed before it started).
func (gw *Gateway) closeUnused(outs []*runOutput) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	closeOutputs(ctx, gw, outs)
}

// buildGroup makes the bridge's writer group of wg on session m, with its
// own Outputs own.
func (gw *Gateway) buildGroup(wg *config.WriterGroup, m *client.ManagedSession, url string, own []*runOutput) (*bridge.WriterGroup, error) {
	data, fields, pf, err := gw.queues(wg.Name, own)
	if err != nil {
		return nil, fmt.Errorf("writer group %s: %w", wg.Name, err)
	}
	if gw.store != nil {
		// The group's own bounds in the log (a reload that changes them
		// makes the group anew).
		gs := wg.StoreAndForward
		if _, err := gw.store.OpenStream(wg.Name, storelog.StreamOptions{MaxBytes: gs.MaxBytes, MaxAge: gs.MaxAge.D()}); err != nil {
			return nil, fmt.Errorf("writer group %s: store-and-forward log: %w", wg.Name, err)
		}
	}
	opts := bridge.Options{
		Session:     m,
		Queues:      data,
		FieldQueues: fields,
		ValueSinks:  gw.valueSinks(),
		PublisherID: gw.view.Load().cfg.Gateway.PublisherID, // a gateway setting: the same in every configuration applied
		EndpointURL: url,
		Logger:      gw.log,
		Resume:      gw.resume,
	}
	if gw.resume != nil {
		opts.MarksDir = gw.resume.Dir
	}
	if gw.scale != nil {
		// The holding's resume record (shared, for a takeover) and its
		// publishing deadline.
		opts.Resume, opts.ResumeShared = gw.scale, true
		opts.ResumeHorizon = gw.view.Load().cfg.ScaleOut.LeaseTTL.D()
		opts.Fence = gw.scale.Fence(wg.Name)
	}
	if pf != nil {
		opts.FieldPayload = pf.Payload
		opts.FieldNoRetain = pf.Retain != nil && !*pf.Retain
	}
	if limit := gw.brokerMaxPayload(); limit > 0 && wg.MaxMessageSize > limit {
		gw.log.Info("writer group's messages split at the NATS server's max_payload", "group", wg.Name, "maxMessageSize", wg.MaxMessageSize, "maxPayload", limit)
		c := *wg
		c.MaxMessageSize = limit
		wg = &c
	}
	g, err := bridge.NewWriterGroup(*wg, opts)
	if err != nil {
		return nil, fmt.Errorf("writer group %s: %w", wg.Name, err)
	}
	return g, nil
}

// payloadLimiter is a sink that knows the largest payload its broker takes
// (natssink: the server's max_payload), 0 while it does not.
type payloadLimiter interface{ MaxPayload() int64 }

// brokerMaxPayload is the smallest max_payload of the brokers that say
// theirs (0: none does), the bound of the writer groups' maxMessageSize. The
// first call waits a moment (at most brokerWait) for those sinks to
// connect: the groups are built at start, as the sinks connect.
func (gw *Gateway) brokerMaxPayload() int {
	var limiters []payloadLimiter
	for _, o := range gw.outputs {
		if l, ok := o.Output.Sink().(payloadLimiter); ok {
			limiters = append(limiters, l)
		}
	}
	if len(limiters) == 0 {
		return 0
	}
	gw.brokerOnce.Do(func() {
		deadline := time.Now().Add(brokerWait)
		for _, l := range limiters {
			for l.MaxPayload() == 0 && time.Now().Before(deadline) && gw.ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
	limit := int64(0)
	for _, l := range limiters {
		if n := l.MaxPayload(); n > 0 && (limit == 0 || n < limit) {
			limit = n
		}
	}
	if limit == 0 {
		return 0
	}
	// Room for the headers a message may carry (Nats-Msg-Id).
	return int(max(limit-headerRoom, config.MinGroupMessageSize))
}

// headerRoom is what a message's NATS headers may take of max_payload.
const headerRoom = 256

// brokerWait bounds the wait for the brokers' payload limits at start.
const brokerWait = 2 * time.Second

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
	gw.refreshSparkplug()
	rg.cancel()
	if g := rg.g.Load(); g != nil {
		if err := g.Stop(ctx); err != nil {
			gw.log.Warn("writer group stop", "group", name, "err", err)
		}
	}
	gw.closeGroupOutputs(ctx, rg)
	gw.drainStream(ctx, name)
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
// rg is no longer in gw.groups. With suspend the session stays at the
// server too (client.ManagedSession.Suspend): the next run of this process,
// or under scale-out the next holder that got its state with the lease
// (shareSession), activates it again and the subscription goes on;
// otherwise the session is closed keeping the subscription (Detach), which
// the next holder transfers.
func (gw *Gateway) detachGroup(ctx context.Context, name string, rg *runGroup, suspend bool) *client.ResumeState {
	rg.cancel() // a Start still waiting for the session ends
	if g := rg.g.Load(); g != nil {
		// What the group reads from the server's history needs the session.
		g.FinishBackfill(ctx)
	}
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
	// What the group handed its own Outputs is delivered before the next
	// holder's connection takes the session over.
	gw.closeGroupOutputs(ctx, rg)
	gw.drainStream(ctx, name)
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

// valueSinks are the Sparkplug nodes' feeds for a new writer group: one
// each, since a feed keeps what it learnt of one group's writers.
func (gw *Gateway) valueSinks() []bridge.ValueSink {
	var out []bridge.ValueSink
	for _, o := range gw.outputs {
		if o.node != nil {
			out = append(out, o.node.Feed(o))
		}
	}
	return out
}

// refreshSparkplug tells the Sparkplug nodes that the writer groups
// changed.
func (gw *Gateway) refreshSparkplug() {
	for _, o := range gw.outputs {
		if o.node != nil {
			o.node.Refresh()
		}
	}
}

// runningGroups are the writer groups that run here, in configuration
// order (the Sparkplug nodes' source).
func (gw *Gateway) runningGroups() []*bridge.WriterGroup {
	v := gw.view.Load()
	out := make([]*bridge.WriterGroup, 0, len(v.groups))
	for _, wg := range v.cfg.WriterGroups {
		if rg := v.groups[wg.Name]; rg != nil {
			if g := rg.g.Load(); g != nil {
				out = append(out, g)
			}
		}
	}
	return out
}
