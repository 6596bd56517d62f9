package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/lease"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/uastack/client"
)

// Scale-out wiring (scaleOut.enabled): the runtime does not start its writer
// groups itself; a lease.KV takes the leases of some of them in the NATS
// bucket and calls scaleHandler to serve those (Serve: the group and its
// session are made and started as without scale-out, with the KV as their
// resume.Store) and to stop them (Halt: the session is detached, keeping the
// upstream subscription for the next holder, then the group stops). Every
// replica runs the same configuration; a reload that adds, removes or changes
// writer groups tells the KV the new list and recreates the changed groups
// this replica holds.
//
// Whose messages are these? Every replica publishes with the configured
// PublisherId (the logical publisher); every MessageId starts with the
// holding's epoch (epoch-<n>-, growing with every holding), and a new holder
// starts its writers' SequenceNumbers at 1. A group's messages are fenced
// (bridge/fence, KV.Fence): none is published past its holding's deadline.
// A second process with this replica's id that was not first makes the KV
// refuse, and Gateway.Fatal report it. The holder of each
// group is the lease's value in the bucket (nats kv get uagate-leases
// group.<name>), and each replica logs what it acquires and releases.

// scaleHandler is the runtime's lease.Handler.
type scaleHandler struct{ gw *Gateway }

// Serve starts a writer group this replica now holds, unless the holding
// ended meanwhile (ctx is done). It does no OPC UA work itself (the group
// starts in the background) and takes gw.mu only for memory operations.
func (h scaleHandler) Serve(ctx context.Context, name string) {
	gw := h.gw
	if gw.ctx.Err() != nil || ctx.Err() != nil {
		return
	}
	cfg := gw.Config()
	if findGroup(cfg, name) == nil {
		return
	}
	if err := gw.startGroup(cfg, name); err != nil {
		gw.log.Error("writer group not started", "group", name, "err", err)
	}
}

// Halt stops a writer group whose lease this replica gives up (or lost),
// keeping its subscription at the server, and returns the subscription's
// final resume state.
func (h scaleHandler) Halt(ctx context.Context, name string) *client.ResumeState {
	gw := h.gw
	rg := gw.takeGroup(name)
	if rg == nil {
		return nil
	}
	// A session whose state goes with the lease stays at the server for
	// the next holder to activate (Suspend); another is closed keeping its
	// subscription, which the next holder transfers (Detach).
	return gw.detachGroup(ctx, name, rg, gw.sharedSessionKept(name))
}

// startScaleOut connects to the lease bucket's NATS and starts the KV over
// the configured writer groups.
func (gw *Gateway) startScaleOut(cfg *config.Config) error {
	so := cfg.ScaleOut
	nc, err := scaleOutConn(so, gw.log)
	if err != nil {
		return fmt.Errorf("scaleOut.natsUrl: %w", err)
	}
	kv, err := lease.NewKV(lease.KVConfig{
		Conn: nc, Bucket: so.Bucket, Replicas: so.Replicas, TTL: so.LeaseTTL.D(), ReplicaID: so.ReplicaID,
		Logger: gw.log.With("part", "scale-out"),
		OnRefused: func(err error) {
			select {
			case gw.fatal <- err:
			default:
			}
		},
	}, scaleHandler{gw})
	if err != nil {
		nc.Close()
		return fmt.Errorf("scaleOut: %w", err)
	}
	gw.scaleConn, gw.scale = nc, kv
	kv.SetUnits(groupNames(cfg))
	kv.Start()
	gw.log.Info("scale-out: sharing the writer groups with the other replicas", "replica", so.ReplicaID, "bucket", so.Bucket,
		"leaseTTL", so.LeaseTTL.D(), "groups", len(cfg.WriterGroups))
	return nil
}

func groupNames(c *config.Config) []string {
	out := make([]string, len(c.WriterGroups))
	for i := range c.WriterGroups {
		out[i] = c.WriterGroups[i].Name
	}
	return out
}

// scaleOutConn connects to the NATS of the leases, reconnecting for ever
// (also when no server answers yet: the KV serves nothing until one does).
func scaleOutConn(so config.ScaleOut, log *slog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("uagate-leases-" + so.ReplicaID),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.Timeout(min(so.LeaseTTL.D()/3, 5*time.Second)),
		nats.PingInterval(max(so.LeaseTTL.D()/3, time.Second)),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("scale-out: NATS disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("scale-out: NATS reconnected", "server", c.ConnectedUrlRedacted()) }),
	}
	switch {
	case so.Username != "":
		opts = append(opts, nats.UserInfo(so.Username, so.Password.Reveal()))
	case so.Token.IsSet():
		opts = append(opts, nats.Token(so.Token.Reveal()))
	case so.CredsFile != "":
		opts = append(opts, nats.UserCredentials(so.CredsFile))
	case so.NKeyFile != "":
		o, err := nats.NkeyOptionFromSeed(so.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("nkeyFile: %w", err)
		}
		opts = append(opts, o)
	}
	if t := so.TLS; t != nil {
		tc, err := (&sink.TLSOptions{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, InsecureSkipVerify: t.InsecureSkipVerify}).Config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(tc))
	}
	return nats.Connect(so.NATSURL, opts...)
}
