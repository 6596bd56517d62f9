package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/uagate/gateway/bridge/config"
)

// Stop stops everything in reverse order within ctx: the writer groups (no
// new messages), the sinks drain (what they deliver is acknowledged
// upstream), then the sessions close, the HTTP listener and the embedded
// parts. Every step is bounded by ctx: once it ends, what is still waiting
// (a dead broker, a full queue, a server that does not answer) is left to
// end on its own and Stop goes on, so that it returns soon after ctx
// ends. Each writer group's resume record is brought up to date as it
// detaches; one stuck past ctx keeps the record it saved last. Stop may be
// called more than once; later calls return at once.
func (gw *Gateway) Stop(ctx context.Context) error {
	gw.mu.Lock()
	if gw.stopped {
		gw.mu.Unlock()
		return nil
	}
	gw.stopped = true
	gw.mu.Unlock()
	// Readiness fails at once; the listener goes on for http.shutdownDelay
	// while the rest drains.
	apiDone := make(chan struct{})
	go func() {
		defer close(apiDone)
		if gw.api != nil {
			_ = gw.api.Shutdown(ctx)
		}
	}()
	gw.cancel() // group starts, applies waiting for their turn, the memory releaser
	// Commands end first: what waits is answered, what runs is cancelled.
	waitCtx(ctx, func() { gw.stopCommands(ctx) })
	if gw.scale != nil {
		// The groups this replica holds stop keeping their subscriptions,
		// and their leases are released: the others take them over at
		// once. The sinks still run, so what they deliver is acknowledged.
		_ = gw.scale.Close(ctx)
	}
	gw.mu.Lock()
	groups := gw.groups
	gw.groups = map[string]*runGroup{}
	gw.publishLocked()
	keep := !gw.cfg.Gateway.DeleteSubscriptionsOnStop
	gw.mu.Unlock()
	waitCtx(ctx, gw.starts.Wait)
	waitCtx(ctx, gw.mem.wait)
	// The groups stop while the sinks still take messages: what they
	// deliver meanwhile is acknowledged. A group whose handler waits for a
	// full queue of a dead broker is released when the sinks close below.
	groupsDone := make(chan struct{})
	go func() {
		defer close(groupsDone)
		var wg sync.WaitGroup
		for name, rg := range groups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if rg.g.Load() == nil {
					rg.cancel()
					gw.mu.Lock()
					m := gw.releaseSessionLocked(rg.ss)
					gw.mu.Unlock()
					gw.closeSession(ctx, name, m)
					return
				}
				if keep {
					// A restart within the subscription's lifetime takes it
					// back with what the server queued meanwhile (a rolling
					// upgrade loses nothing, as a kill -9 does not).
					gw.keepResumeState(name, gw.detachGroup(ctx, name, rg, true))
					return
				}
				if err := rg.g.Load().Stop(ctx); err != nil {
					gw.log.Warn("writer group stop", "group", name, "err", err)
				}
			}()
		}
		wg.Wait()
	}()
	waitCtx(ctx, func() { <-groupsDone })
	var wg sync.WaitGroup
	if gw.hub != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = gw.hub.Close(ctx)
		}()
	}
	// The log's readers stop handing out records while the sinks drain
	// their queues; the log closes after both, its last commit saving the
	// cursors the drain moved (a restart continues from them).
	gw.stopReaders(ctx, &wg)
	for _, rg := range groups {
		// A group's own Outputs closed as it stopped, unless ctx ended
		// first (its handler waiting for a full queue of a dead broker).
		wg.Add(1)
		go func() {
			defer wg.Done()
			gw.closeGroupOutputs(ctx, rg)
		}()
	}
	for _, o := range gw.outputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := o.Close(ctx); err != nil {
				gw.log.Warn("sink close", "sink", o.Name(), "err", err)
			}
		}()
	}
	waitCtx(ctx, wg.Wait)
	waitCtx(ctx, gw.closeStore)
	if gw.pool != nil {
		waitCtx(ctx, func() {
			if err := gw.pool.Close(ctx); err != nil {
				gw.log.Debug("sessions close", "err", err)
			}
		})
	}
	waitCtx(ctx, func() { <-apiDone })
	// The embedded parts last: what a server still does (a client to let
	// go, a store to flush) gets what is left of ctx, and a moment more
	// when ctx has ended already, not longer.
	partsCtx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		partsCtx, cancel = context.WithTimeout(context.Background(), 250*time.Millisecond)
		defer cancel()
	}
	waitCtx(partsCtx, func() {
		if gw.scaleConn != nil {
			gw.scaleConn.Close()
		}
		if gw.nats != nil {
			gw.nats.Close()
		}
		if gw.mqtt != nil {
			gw.mqtt.Close()
		}
		if gw.sim != nil {
			gw.sim.Close()
		}
	})
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("gateway: stop: %w (parts still ending were left to end)", err)
	}
	return nil
}

// waitCtx runs wait and returns when it did, or when ctx ends (wait then
// goes on in the background).
func waitCtx(ctx context.Context, wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait()
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Hints prints where to look at the data of a default run.
func (gw *Gateway) Hints(w io.Writer) {
	var lines []string
	if gw.mqtt != nil {
		host, port, _ := net.SplitHostPort(gw.mqtt.Addr())
		lines = append(lines, fmt.Sprintf("  MQTT:      mosquitto_sub -h %s -p %s -t 'opcua/json/#' -v", host, port))
	}
	if gw.nats != nil {
		lines = append(lines, fmt.Sprintf("  NATS:      nats sub -s %s 'opcua.json.>'", gw.nats.URL()))
	}
	if gw.hub != nil && gw.httpLn != nil {
		cfg := gw.view.Load().cfg
		var groups []string
		for _, g := range cfg.WriterGroups {
			groups = append(groups, g.Name)
		}
		lines = append(lines, fmt.Sprintf("  WebSocket: ws://%s%s?group=%s", gw.httpLn.Addr(), cfg.Sinks.WebSocket.Path, strings.Join(groups, ",")))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "gateway: streaming; look at the data with")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	gw.commandHints(w)
}

// commandHints prints how to send a command to the embedded broker when
// commands are on: a write of the first field a rule lets every MQTT
// caller write.
func (gw *Gateway) commandHints(w io.Writer) {
	cfg := gw.view.Load().cfg
	if gw.mqtt == nil || !cfg.Commands.On() {
		return
	}
	var target *config.CommandTarget
	for _, r := range cfg.Commands.Rules {
		if slices.Contains(r.Callers, "mqtt:*") || slices.Contains(r.Callers, "*:*") {
			for i := range r.Write {
				if t := &r.Write[i]; t.Group != "" && !strings.Contains(t.Group+t.Writer+t.Field, "*") {
					target = t
					break
				}
			}
		}
		if target != nil {
			break
		}
	}
	if target == nil {
		return
	}
	host, port, _ := net.SplitHostPort(gw.mqtt.Addr())
	topic := strings.ReplaceAll(cfg.Commands.Topic, "{PublisherId}", cfg.Gateway.PublisherID) + "/me"
	fmt.Fprintln(w, "gateway: commands are on; write a value and watch it change with")
	fmt.Fprintf(w, "  mosquitto_sub -h %s -p %s -t '%s/reply' -v &\n", host, port, topic)
	fmt.Fprintf(w, "  mosquitto_pub -h %s -p %s -t '%s' -m '{\"requestId\":\"1\",\"op\":\"write\",\"group\":\"%s\",\"writer\":\"%s\",\"field\":\"%s\",\"value\":42}'\n",
		host, port, topic, target.Group, target.Writer, target.Field)
}
