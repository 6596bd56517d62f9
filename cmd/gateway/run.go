package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// defaultRunNodes are the Demo variables the default run subscribes to, with
// their field names.
var defaultRunNodes = []struct{ name, node string }{
	{"Counter", server.NodeCounter},
	{"Sine", server.NodeSine},
	{"Random", server.NodeRandom},
	{"Step", server.NodeStep},
}

// runNode is a node to monitor and the DataSet field it is written as.
type runNode struct {
	name string
	id   ua.ExpandedNodeID
}

// cmdRunGateway is the default run: it subscribes to nodes of an OPC UA server
// (the embedded simulation server unless -upstream is given) and writes each
// notification message as one ua-data JSON NetworkMessage line.
func cmdRunGateway(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	upstream := fs.String("upstream", "", "endpoint `URL` of the OPC UA server (opc.tcp://…); default: an embedded simulation server")
	nodes := fs.String("nodes", "", "node ids to subscribe to, comma-separated (e.g. ns=1;s=Demo.Counter);\ndefault: the Demo variables Counter, Sine, Random and Step of the simulation server")
	interval := fs.Duration("interval", time.Second, "publishing `interval` of the subscription")
	out := fs.String("out", "", "write the messages to `file` (appended) instead of stdout")
	duration := fs.Duration("duration", 0, "stop after this long (0: run until interrupted)")
	count := fs.Int("count", 0, "stop after this many messages (0: no limit)")
	publisher := fs.String("publisher", "uagate", "PublisherId of the messages")
	var conn connFlags
	conn.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: gateway run [flags]      (gateway with no arguments: gateway run)

Subscribes to nodes of an OPC UA server and writes every notification message
as one OPC UA Part 14 JSON ua-data NetworkMessage per line. Without -upstream it
starts the simulation server inside the process (security None) and subscribes
to its Demo variables. The connection flags (-policy … -auto-accept) apply to
-upstream only. Connection states go to stderr. Ctrl-C stops it.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return errFlagParse(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: run takes no arguments, got %q", errUsage, fs.Args())
	}
	if *interval <= 0 {
		return fmt.Errorf("%w: -interval must be positive, got %v", errUsage, *interval)
	}
	if *count < 0 || *duration < 0 {
		return fmt.Errorf("%w: -count and -duration must not be negative", errUsage)
	}
	list, err := parseRunNodes(*nodes)
	if err != nil {
		return err
	}

	level := slog.LevelInfo
	if conn.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	var ccfg *client.Config
	url := *upstream
	if url != "" {
		if ccfg, err = conn.config(stderr); err != nil {
			return err
		}
	} else {
		// The embedded server: quiet unless -v, no Load folders nor alarms, and
		// Demo values that change at least twice per publishing interval.
		slevel := slog.LevelWarn
		if conn.verbose {
			slevel = slog.LevelDebug
		}
		policies, _ := parsePolicies("None")
		srv, err := server.New(&server.Config{
			Address:  "127.0.0.1:0",
			Policies: policies,
			Logger:   slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slevel})),
			Sim: server.SimConfig{
				DemoRate: min(max(*interval/2, 10*time.Millisecond), 100*time.Millisecond),
				Folders:  -1, AlarmSources: -1,
			},
		})
		if err != nil {
			return err
		}
		if err := srv.Start(); err != nil {
			return err
		}
		defer srv.Close() // after the session: deferred first, runs last
		url = srv.URL()
		logger.Info("embedded simulation server", "url", url)
		none, _ := client.ParseSecurityPolicy("None")
		ccfg = &client.Config{
			SecurityPolicy: none,
			SecurityMode:   ua.MessageSecurityModeNone,
			AutoAccept:     true,
			RequestTimeout: conn.timeout,
			Logger:         slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slevel})),
		}
	}

	var dst io.Writer = stdout
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		dst = f
	}

	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}

	m, err := client.NewManagedSession(url, &client.ManagedConfig{
		Client: *ccfg,
		OnStateChange: func(m *client.ManagedSession, state client.State, err error) {
			if err != nil {
				logger.Warn("session "+state.String(), "url", m.URL(), "err", err)
			} else {
				logger.Info("session "+state.String(), "url", m.URL())
			}
		},
	})
	if err != nil {
		return err
	}
	// Deletes the subscription on the server; a fresh context, as ctx may be
	// over already (Ctrl-C, -duration).
	defer closeManaged(m)
	m.Start()
	c, err := m.WaitConnected(ctx)
	if err != nil {
		return ctxDone(ctx, err)
	}
	ids := make(map[ua.NodeID]string, len(list))
	reqs := make([]client.ItemRequest, len(list))
	for i, n := range list {
		id, err := n.id.Resolve(c.Namespaces())
		if err != nil {
			return fmt.Errorf("-nodes %s: %w", n.name, err)
		}
		ids[id] = n.name
		reqs[i] = client.ItemRequest{NodeID: id}
	}

	p := &runPublisher{
		publisher: *publisher,
		names:     ids,
		items:     len(list),
		limit:     *count,
		dst:       dst,
		done:      make(chan struct{}),
	}
	p.w = jsonenc.NewNetworkMessageWriter(jsonenc.WriterOptions{Sink: p.sink})
	defer p.release()

	sub, err := m.CreateSubscription(ctx, &client.SubscriptionConfig{
		PublishingInterval: *interval,
		OnDataChange:       p.onDataChange,
		OnItemStatus: func(_ *client.Subscription, h uint32, st ua.StatusCode) {
			logger.Warn("monitored item", "handle", h, "status", st)
		},
	})
	if err != nil {
		return ctxDone(ctx, err)
	}
	if _, err := sub.CreateMonitoredItems(ctx, reqs, nil); err != nil {
		return ctxDone(ctx, err)
	}
	logger.Info("subscribed", "items", len(reqs), "interval", sub.PublishingInterval())

	select {
	case <-ctx.Done():
		return ctxDone(ctx, nil)
	case <-p.done:
	}
	closeManaged(m) // stop delivery before the writer is released
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// closeManaged closes a managed session, draining for at most two seconds.
func closeManaged(m *client.ManagedSession) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.Close(ctx)
}

// ctxDone turns the end of ctx (Ctrl-C, -duration) into a clean exit; other
// errors are returned as they are.
func ctxDone(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// parseRunNodes parses -nodes; empty means the Demo variables of the sim.
func parseRunNodes(s string) ([]runNode, error) {
	var out []runNode
	if s == "" {
		for _, d := range defaultRunNodes {
			out = append(out, runNode{name: d.name, id: ua.ExpandedNodeID{NodeID: ua.MustParseNodeID(d.node)}})
		}
		return out, nil
	}
	seen := map[string]bool{}
	for _, x := range splitList(s) {
		id, err := ua.ParseExpandedNodeID(x)
		if err != nil {
			return nil, fmt.Errorf("%w: -nodes: %q is not a node id: %v", errUsage, x, err)
		}
		if seen[x] {
			return nil, fmt.Errorf("%w: -nodes: %q given twice", errUsage, x)
		}
		seen[x] = true
		out = append(out, runNode{name: x, id: id})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: -nodes: no node ids in %q", errUsage, s)
	}
	return out, nil
}

// runPublisher turns notification messages into ua-data NetworkMessages.
type runPublisher struct {
	publisher string
	names     map[ua.NodeID]string // field name by node
	items     int
	limit     int
	dst       io.Writer

	mu      sync.Mutex
	w       *jsonenc.NetworkMessageWriter
	handles map[uint32]string // field name by client handle (cache of names)
	seq     uint32
	sent    int
	line    []byte
	err     error
	done    chan struct{} // closed after limit messages or on an error
}

// onDataChange writes one NetworkMessage for items. It reads items during the
// call only (they are pooled and released when it returns).
func (p *runPublisher) onDataChange(sub *client.Subscription, _ uint32, items []ua.MonitoredItemNotification) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil || p.err != nil || (p.limit > 0 && p.sent >= p.limit) {
		return
	}
	p.seq++
	typ := jsonenc.DeltaFrame
	if len(items) >= p.items {
		typ = jsonenc.KeyFrame
	}
	hdr := jsonenc.NetworkMessageHeader{PublisherID: p.publisher, ContentMask: jsonenc.LayoutNetworkMessage}
	dsm := jsonenc.DataSetMessageHeader{
		DataSetWriterID: 1, DataSetWriterName: "gateway", SequenceNumber: p.seq,
		Timestamp: ua.Now(), Type: typ,
		ContentMask: jsonenc.DSMDataSetWriterID | jsonenc.DSMDataSetWriterName | jsonenc.DSMSequenceNumber |
			jsonenc.DSMTimestamp | jsonenc.DSMMessageType | jsonenc.FieldEncodingBits(jsonenc.Verbose),
		FieldContentMask: jsonenc.FieldMaskStatusCode | jsonenc.FieldMaskSourceTimestamp,
	}
	err := p.w.Begin(&hdr)
	if err == nil {
		err = p.w.BeginDataSetMessage(&dsm)
	}
	for i := range items {
		if err != nil {
			break
		}
		err = p.w.AddField(p.fieldName(sub, items[i].ClientHandle), &items[i].Value)
	}
	if err == nil {
		err = p.w.End()
	}
	if err != nil {
		p.err = fmt.Errorf("writing messages: %w", err)
		close(p.done)
		return
	}
	p.sent++
	if p.limit > 0 && p.sent == p.limit {
		close(p.done)
	}
}

// fieldName names the field of an item: the short name of a default node, else
// its node id as given in -nodes.
func (p *runPublisher) fieldName(sub *client.Subscription, h uint32) string {
	if n, ok := p.handles[h]; ok {
		return n
	}
	n := fmt.Sprintf("handle%d", h)
	if info, ok := sub.Item(h); ok {
		if x, ok := p.names[info.NodeID]; ok {
			n = x
		} else {
			n = info.NodeID.String()
		}
	}
	if p.handles == nil {
		p.handles = map[uint32]string{}
	}
	p.handles[h] = n
	return n
}

// sink writes one message as a line (the writer's slice is valid during the
// call only: it is copied into the line buffer).
func (p *runPublisher) sink(msg []byte) error {
	p.line = append(append(p.line[:0], msg...), '\n')
	_, err := p.dst.Write(p.line)
	return err
}

func (p *runPublisher) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.w.Release()
	p.w = nil
}
