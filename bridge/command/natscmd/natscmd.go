package natscmd

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uagate/gateway/bridge/command"
	"github.com/uagate/gateway/bridge/sink/natssink"
)

// Config of a transport.
type Config struct {
	// Sink is the NATS sink's configuration: its name names the callers'
	// sink, its URL, credentials and TLS make the connection.
	Sink natssink.Config
	// Subject is the request subject without the caller token
	// (placeholders filled in).
	Subject string
	// Queue is the queue group; default "uagate-commands".
	Queue string
	// Name is the connection's name at the server (nats.Name); default
	// "uagate commands <sink>". Under scale-out the replica id ends it.
	Name   string
	Logger *slog.Logger
}

// Transport is one NATS connection carrying commands.
type Transport struct {
	cfg  Config
	e    *command.Engine
	nc   *nats.Conn
	sub  *nats.Subscription
	log  *slog.Logger
	pref string // Subject + "."
}

// Start connects (retrying in the background while the server is away)
// and subscribes.
func Start(e *command.Engine, cfg Config) (*Transport, error) {
	if cfg.Queue == "" {
		cfg.Queue = "uagate-commands"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Name == "" {
		cfg.Name = "uagate commands " + cfg.Sink.Name
	}
	t := &Transport{cfg: cfg, e: e, log: cfg.Logger.With("commands", "nats", "sink", cfg.Sink.Name), pref: cfg.Subject + "."}
	auth, err := natssink.AuthOptions(&cfg.Sink)
	if err != nil {
		return nil, err
	}
	opts := append([]nats.Option{
		nats.Name(cfg.Name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				t.log.Warn("command connection lost", "err", err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { t.log.Info("command connection back") }),
	}, auth...)
	nc, err := nats.Connect(cfg.Sink.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("natscmd %s: connect %s: %w", cfg.Sink.Name, cfg.Sink.URL, err)
	}
	t.nc = nc
	sub, err := nc.QueueSubscribe(t.pref+"*", cfg.Queue, t.handle)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("natscmd %s: subscribe %s.*: %w", cfg.Sink.Name, cfg.Subject, err)
	}
	// A request the engine refuses costs little; what the client buffers
	// is bounded by the payload limit the engine enforces, not by count.
	_ = sub.SetPendingLimits(4096, 64<<20)
	t.sub = sub
	return t, nil
}

// Ready reports whether the connection is up and the subscription known to
// the server (after Flush).
func (t *Transport) Ready() bool { return t.nc.IsConnected() && t.nc.Flush() == nil }

func (t *Transport) handle(m *nats.Msg) {
	id := strings.TrimPrefix(m.Subject, t.pref)
	caller := command.Caller{Transport: command.TransportNATS, Sink: t.cfg.Sink.Name, ID: id}
	reply := m.Reply
	t.e.SubmitPayload(caller, m.Data, func(r *command.Response) {
		to := reply
		if to == "" {
			to = m.Subject + ".reply"
			if rt := replyTo(m.Data); rt != "" {
				if err := command.CheckReplyTo(rt, '.', t.cfg.Subject); err != nil {
					t.log.Warn("command replyTo refused; answering on the default subject", "replyTo", rt, "err", err)
				} else {
					to = rt
				}
			}
		}
		if err := t.nc.Publish(to, r.Marshal()); err != nil {
			t.log.Warn("command response not sent", "subject", to, "requestId", r.RequestID, "err", err)
		}
	})
}

// replyTo peeks at the replyTo member of a request (the engine decodes the
// rest).
func replyTo(payload []byte) string { return command.PeekReplyTo(payload) }

// Close ends the subscription and the connection.
func (t *Transport) Close() {
	if t.sub != nil {
		_ = t.sub.Unsubscribe()
	}
	t.nc.Close()
}
