package gateway

import (
	"context"
	"fmt"
	"strings"

	"github.com/uagate/gateway/api"
	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/command"
	"github.com/uagate/gateway/bridge/command/mqttcmd"
	"github.com/uagate/gateway/bridge/command/natscmd"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink/mqttsink"
	"github.com/uagate/gateway/bridge/sink/natssink"
	"github.com/uagate/gateway/bridge/sink/wssink"
	"github.com/uagate/gateway/uastack/client"
)

// Commands from the messaging side (package bridge/command). The engine is
// made at Start whatever the configuration says, so that the REST API's
// Write and Call are authorised by the same rules (none: nothing allowed);
// the transports run when commands are enabled. Each endpoint's commands
// run on a session of their own (<endpoint>/commands in the pool), so that
// a command never waits behind a sink's full queue holding the writer
// groups' session.

// cmdTransport is a running command transport.
type cmdTransport interface{ Close() }

// cmdSession is an endpoint's command session and the client configuration
// it was made with.
type cmdSession struct {
	m   *client.ManagedSession
	cfg *client.Config
}

// startCommands makes the engine and starts the transports of the MQTT and
// NATS sinks that carry commands.
func (gw *Gateway) startCommands(cfg *config.Config) error {
	e, err := command.New(cfg, command.Options{Backend: cmdBackend{gw}, Logger: gw.log.With("part", "commands")})
	if err != nil {
		return err
	}
	gw.cmd = e
	if !cfg.Commands.On() {
		return nil
	}
	pub := cfg.Gateway.PublisherID
	// Under scale-out every replica connects as itself, as its sinks do:
	// MQTT closes the older of two connections with one client id.
	replica := ""
	if so := cfg.ScaleOut; so.Enabled {
		replica = so.ReplicaID
	}
	subject := strings.ReplaceAll(cfg.Commands.Subject, "{PublisherId}", pub)
	for _, n := range cfg.Sinks.NATS {
		if !cfg.Commands.CarriedBy(n.Name) {
			continue
		}
		nc := natssink.FromConfig(n, n.Password.Reveal(), n.Token.Reveal())
		nc.URL = gw.url(nc.URL)
		t, err := natscmd.Start(e, natscmd.Config{Sink: nc, Subject: subject, Queue: pub + "-commands",
			Name: replicaName("uagate commands "+n.Name, " ", replica), Logger: gw.log})
		if err != nil {
			return fmt.Errorf("commands on sinks.nats %s: %w", n.Name, err)
		}
		gw.cmdTransports = append(gw.cmdTransports, t)
	}
	topic := strings.ReplaceAll(cfg.Commands.Topic, "{PublisherId}", pub)
	for _, m := range cfg.Sinks.MQTT {
		if !cfg.Commands.CarriedBy(m.Name) {
			continue
		}
		mc := mqttsink.FromConfig(m, pub, m.Password.Reveal())
		tc := mqttcmd.Config{SinkName: m.Name, URL: gw.url(mc.URL), ClientID: replicaName(mc.ClientID, "-", replica), Username: mc.Username,
			Password: mc.Password, TLS: mc.TLS, Topic: topic}
		if cfg.ScaleOut.Enabled {
			tc.Share = pub + "-commands" // one replica runs each request
		}
		var t cmdTransport
		var err error
		if mc.ProtocolVersion == config.MQTTv5 {
			t, err = mqttcmd.Start5(e, tc, gw.log)
		} else {
			t, err = mqttcmd.Start311(e, tc, gw.log)
		}
		if err != nil {
			return fmt.Errorf("commands on sinks.mqtt %s: %w", m.Name, err)
		}
		gw.cmdTransports = append(gw.cmdTransports, t)
	}
	gw.log.Info("commands enabled", "mqttTopic", topic+"/<caller>", "natsSubject", subject+".<caller>", "rules", len(cfg.Commands.Rules))
	return nil
}

// wsCommands lets the WebSocket stream's clients send commands on their
// connection; the caller is the API key the connection was opened with.
// Messages up to twice commands.maxPayload are read (a larger one closes
// the connection), so that one somewhat too large is answered.
func (gw *Gateway) wsCommands(o *wssink.Options, cfg *config.Config) {
	o.ReadLimit = max(wssink.DefaultReadLimit, 2*int64(cfg.Commands.MaxPayload))
	o.CallerOf = api.CallerName
	o.Commands = func(caller string, req []byte, reply func([]byte)) {
		c := command.Caller{Transport: command.TransportWebSocket, ID: caller}
		gw.cmd.SubmitPayload(c, req, func(r *command.Response) { reply(r.Marshal()) })
	}
}

// stopCommands ends the transports, then the engine (what waits is
// answered "unavailable").
func (gw *Gateway) stopCommands(ctx context.Context) {
	for _, t := range gw.cmdTransports {
		t.Close()
	}
	if gw.cmd != nil {
		if err := gw.cmd.Close(ctx); err != nil {
			gw.log.Debug("commands close", "err", err)
		}
	}
}

// Commands returns the command engine (nil before Start): the REST API
// authorises Write and Call through it, and reads its log and rules.
func (gw *Gateway) Commands() *command.Engine { return gw.cmd }

// cmdBackend is the command engine's view of the gateway.
type cmdBackend struct{ gw *Gateway }

// Session implements command.Backend: the endpoint's command session,
// made on first use and made again when the endpoint's configuration
// changed.
func (b cmdBackend) Session(ctx context.Context, endpoint string) (*client.Client, error) {
	gw := b.gw
	v := gw.view.Load()
	ep := endpointOf(v.cfg, endpoint)
	if ep == nil {
		return nil, fmt.Errorf("endpoint %q is not configured", endpoint)
	}
	ccfg, err := gw.clientConfig(v.cfg, endpoint)
	if err != nil {
		return nil, err
	}
	gw.mu.Lock()
	if gw.pool == nil || gw.stopped {
		gw.mu.Unlock()
		return nil, ErrStopped
	}
	s := gw.cmdSessions[endpoint]
	var stale *client.ManagedSession
	if s.m != nil && s.cfg != ccfg {
		stale, s = s.m, cmdSession{}
	}
	if s.m == nil {
		m, err := gw.pool.SessionWith(gw.url(ep.URL), ep.Name+"/commands", &client.ManagedConfig{Client: *ccfg})
		if err != nil {
			gw.mu.Unlock()
			return nil, fmt.Errorf("endpoint %s: %w", endpoint, err)
		}
		s = cmdSession{m: m, cfg: ccfg}
		if gw.cmdSessions == nil {
			gw.cmdSessions = map[string]cmdSession{}
		}
		gw.cmdSessions[endpoint] = s
	}
	gw.mu.Unlock()
	if stale != nil {
		go gw.closeSession(gw.ctx, endpoint+"/commands", stale)
	}
	return s.m.WaitConnected(ctx)
}

// BrowsedField implements command.Backend: a field a browse selection
// added, looked up in the running group's fields.
func (b cmdBackend) BrowsedField(group, writer, field string) (string, bool) {
	g := b.gw.group(group)
	if g == nil {
		return "", false
	}
	const page = 1000
	for from := 0; from >= 0; {
		var vals []bridge.FieldValue
		vals, from = g.LastValues(bridge.ValueFilter{Writer: writer}, from, page)
		for _, v := range vals {
			if v.Field == field {
				return v.Node, true
			}
		}
	}
	return "", false
}
