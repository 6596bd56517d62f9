package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uagate/gateway/api"
	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/embedded"
	"github.com/uagate/gateway/bridge/lease"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/filesink"
	"github.com/uagate/gateway/bridge/sink/mqttsink"
	"github.com/uagate/gateway/bridge/sink/natssink"
	"github.com/uagate/gateway/bridge/sink/wssink"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
)

// The gateway's runtime: one configuration brought to life. It owns, in the
// order they start (and stop in reverse): the embedded parts (simulation
// server, MQTT broker, NATS server) the configuration asks for, one Output per
// sink and the WebSocket hub, the HTTP listener, the client pool with the
// managed sessions the writer groups share (sessions.go), and the writer
// groups. A reload applies
// the difference between two configurations: writer groups and writers are
// added, removed or replaced while the others go on; what cannot be changed
// in place (gateway settings, embedded parts, sinks) is refused with a
// message that says a restart applies it.
//
// Lock order: rt.mu, then whatever the bridge and client take.

// runtime is a running configuration.
type runtime struct {
	log    *slog.Logger
	stderr io.Writer

	// urls maps the configuration's placeholders (config.EmbeddedSimURL …)
	// to the embedded parts' real addresses.
	urls map[string]string

	sim  *server.Server
	mqtt *embedded.MQTT
	nats *embedded.NATS

	wrap    func(sink.Sink) sink.Sink
	outputs []*runOutput
	hub     *wssink.Hub
	httpLn  net.Listener

	pool *client.Pool
	api  *api.Server
	hist *api.Histograms // latency histograms the sinks and sessions feed

	persist     persisted                         // where API changes are saved
	storeMu     sync.Mutex                        // guards stores
	stores      map[string]*pki.Store             // certificate stores by directory, for the API
	apiSessions map[string]*client.ManagedSession // sessions of endpoints without writer groups (rt.mu)

	// resume keeps each writer group's resume state in the state directory
	// (restart without loss, bridge/resume.go).
	resume *lease.FileStore
	// scale, with scaleOut enabled, decides which writer groups run here
	// (scaleout.go); it is their ResumeStore.
	scale     *lease.KV
	scaleConn *nats.Conn
	onState   func(m *client.ManagedSession, st client.State, err error)

	mu     sync.Mutex
	cfg    *config.Config // the running configuration (placeholders kept)
	groups map[string]*runGroup
	// sessions are the pool's sessions the writer groups run on, with how
	// many use each (sessions.go); clients the client configuration each
	// endpoint's sessions share.
	sessions map[client.PoolKey]*sharedSession
	clients  map[string]endpointClient
	starts   sync.WaitGroup // group starts in flight
	mem      *memReleaser   // gives setup memory back after the starts (memory.go)
	ctx      context.Context
	cancel   context.CancelFunc
}

// runGroup is a running writer group and its session.
type runGroup struct {
	g      *bridge.WriterGroup
	ss     *sharedSession     // its session (ss.m) and the other groups on it
	cancel context.CancelFunc // ends a Start still waiting for the session
}

// runOutput is a sink's Output and what the writer groups need to know of it.
type runOutput struct {
	*sink.Output
	kind     string           // mqtt, nats, file (metrics)
	perField *config.PerField // MQTT per-field layout: receives KindField messages only
}

// runtimeOptions are what the command line adds to a configuration.
type runtimeOptions struct {
	logger *slog.Logger
	stderr io.Writer
	// extraSinks are Outputs made by the command line (-out), started and
	// closed with the others.
	extraSinks []sink.Sink
	// wrapSink, when set, wraps every sink before its Output is made (the
	// run command counts what -out wrote).
	wrapSink func(sink.Sink) sink.Sink
	// savePath is where configuration changes made through the REST API are
	// saved ("" : not saved).
	savePath string
	// onState is told of every session state change besides the log.
	onState func(m *client.ManagedSession, st client.State, err error)
	// onMemReleased, when set (tests), is told after the setup memory was
	// given back (memory.go).
	onMemReleased func(before, after goruntime.MemStats)
}

// startRuntime starts everything cfg (defaults applied, validated) asks for.
// On error what was started is stopped again.
func startRuntime(ctx context.Context, cfg *config.Config, opts runtimeOptions) (rt *runtime, err error) {
	rt = &runtime{
		log:    opts.logger,
		stderr: opts.stderr,
		urls:   map[string]string{},
		cfg:    cfg,
		groups: map[string]*runGroup{},
	}
	rt.persist.path = opts.savePath
	rt.hist = api.NewHistograms()
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	rt.mem = newMemReleaser(os.Getenv)
	rt.mem.released = opts.onMemReleased
	rt.mem.run(rt.ctx, rt.log.Info)
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			rt.stop(sctx)
			rt = nil
		}
	}()
	if err := os.MkdirAll(cfg.Gateway.StateDir, 0o700); err != nil {
		return rt, fmt.Errorf("gateway.stateDir: %w", err)
	}
	if rt.resume, err = lease.NewFileStore(filepath.Join(cfg.Gateway.StateDir, "resume")); err != nil {
		return rt, fmt.Errorf("gateway.stateDir: %w", err)
	}
	if err := rt.startEmbedded(ctx, cfg); err != nil {
		return rt, err
	}
	rt.wrap = opts.wrapSink
	if err := rt.startSinks(cfg, opts.extraSinks); err != nil {
		return rt, err
	}
	if err := rt.startHTTP(cfg); err != nil {
		return rt, err
	}
	pool, err := client.NewPool(&client.PoolConfig{Grouping: client.PerEndpointAndGroup})
	if err != nil {
		return rt, err
	}
	rt.pool = pool
	onState := opts.onState
	rt.onState = onState
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if cfg.ScaleOut.Enabled {
		return rt, rt.startScaleOutLocked(cfg.ScaleOut)
	}
	for i := range cfg.WriterGroups {
		if err := rt.addGroupLocked(&cfg.WriterGroups[i], onState); err != nil {
			return rt, err
		}
	}
	return rt, nil
}

func (rt *runtime) url(u string) string {
	if r, ok := rt.urls[u]; ok {
		return r
	}
	return u
}

// startEmbedded starts the simulation server, MQTT broker and NATS server
// the configuration turned on.
func (rt *runtime) startEmbedded(ctx context.Context, cfg *config.Config) error {
	if cfg.Embedded.Sim.On() {
		policies, _ := parsePolicies("None")
		srv, err := server.New(&server.Config{
			Address:  cfg.Embedded.Sim.Listen,
			Policies: policies,
			Logger:   rt.log.With("part", "sim"),
			Sim: server.SimConfig{
				DemoRate: 100 * time.Millisecond,
				Folders:  2, Variables: 10, AlarmSources: -1,
			},
		})
		if err != nil {
			return fmt.Errorf("embedded simulation server: %w", err)
		}
		if err := srv.Start(); err != nil {
			return listenError("embedded sim", cfg.Embedded.Sim.Listen, "embedded.sim.listen (UAGATE_SIM_LISTEN)", err)
		}
		rt.sim = srv
		rt.urls[config.EmbeddedSimURL] = srv.URL()
		rt.log.Info("embedded simulation server", "url", srv.URL())
	}
	if cfg.Embedded.MQTT.On() {
		m, err := embedded.StartMQTT(ctx, cfg.Embedded.MQTT.Listen, rt.log.With("part", "mqtt-broker"))
		if err != nil {
			return err
		}
		rt.mqtt = m
		rt.urls[config.EmbeddedMQTTURL] = m.URL()
		rt.log.Info("embedded MQTT broker", "url", m.URL())
	}
	if cfg.Embedded.NATS.On() {
		n, err := embedded.StartNATS(ctx, cfg.Embedded.NATS.Listen, filepath.Join(cfg.Gateway.StateDir, "nats"), rt.log.With("part", "nats-server"))
		if err != nil {
			return err
		}
		rt.nats = n
		rt.urls[config.EmbeddedNATSURL] = n.URL()
		rt.log.Info("embedded NATS server", "url", n.URL())
	}
	return nil
}

// listenError names the setting that moves a listener whose port is taken.
func listenError(what, addr, setting string, err error) error {
	return fmt.Errorf("%s: listen %s: %w (set %s)", what, addr, err, setting)
}

// startSinks makes and starts one Output per configured sink and the
// WebSocket hub.
func (rt *runtime) startSinks(cfg *config.Config, extra []sink.Sink) error {
	pub := cfg.Gateway.PublisherID
	add := func(kind string, s sink.Sink, d config.Delivery, pf *config.PerField) error {
		opts, err := sink.OutputOptionsFromConfig(d)
		if err != nil {
			return fmt.Errorf("sink %s: %w", s.Name(), err)
		}
		if rt.wrap != nil {
			s = rt.wrap(s)
		}
		opts.Logger = rt.log
		opts.Latency = rt.hist.SourceToSink(s.Name())
		o, err := sink.NewOutput(s, opts)
		if err != nil {
			return err
		}
		o.Start()
		rt.outputs = append(rt.outputs, &runOutput{Output: o, kind: kind, perField: pf})
		return nil
	}
	for _, m := range cfg.Sinks.MQTT {
		mc := mqttsink.FromConfig(m, pub, m.Password.Reveal())
		mc.URL = rt.url(mc.URL)
		mc.Logger = rt.log
		s, err := mqttsink.New(mc)
		if err != nil {
			return fmt.Errorf("sinks.mqtt %s: %w", m.Name, err)
		}
		if err := add("mqtt", s, m.Delivery, m.PerField); err != nil {
			return err
		}
	}
	for _, n := range cfg.Sinks.NATS {
		nc := natssink.FromConfig(n, n.Password.Reveal(), n.Token.Reveal())
		nc.URL = rt.url(nc.URL)
		nc.Logger = rt.log
		s, err := natssink.New(nc)
		if err != nil {
			return fmt.Errorf("sinks.nats %s: %w", n.Name, err)
		}
		if err := add("nats", s, n.Delivery, nil); err != nil {
			return err
		}
	}
	for _, f := range cfg.Sinks.File {
		s, err := filesink.New(filesink.FromConfig(f))
		if err != nil {
			return fmt.Errorf("sinks.file %s: %w", f.Name, err)
		}
		if err := add("file", s, f.Delivery, nil); err != nil {
			return err
		}
	}
	for _, s := range extra {
		if err := add("file", s, config.Delivery{}, nil); err != nil {
			return err
		}
	}
	if ws := cfg.Sinks.WebSocket; ws != nil && !cfg.HTTP.Disabled {
		rt.hub = wssink.New(wssink.Options{
			AllowedOrigins: ws.AllowedOrigins,
			Token:          ws.Token.Reveal(),
			ClientQueue:    ws.ClientQueue,
			Logger:         rt.log.With("sink", "websocket"),
		})
	}
	return nil
}

// startHTTP opens the one HTTP listener: REST API, metrics, health, the
// dashboard and the WebSocket stream.
func (rt *runtime) startHTTP(cfg *config.Config) error {
	if cfg.HTTP.Disabled {
		return nil
	}
	h := cfg.HTTP
	opts := api.Options{
		Backend:              rt,
		Version:              version,
		Listen:               h.Listen,
		KeysFile:             h.KeysFile,
		AllowUnauthenticated: h.AllowUnauthenticated,
		PublicMetrics:        h.PublicMetrics,
		CORSOrigins:          h.CORSOrigins,
		Ready:                api.ReadyPolicy{Endpoints: api.Require(h.Ready.Endpoints), Sinks: api.Require(h.Ready.Sinks)},
		ShutdownDelay:        h.ShutdownDelay.D(),
		Histograms:           rt.hist,
		Logger:               rt.log,
	}
	for _, k := range h.APIKeys {
		role := api.RoleRead
		if k.Role == "admin" {
			role = api.RoleAdmin
		}
		opts.Keys = append(opts.Keys, api.Key{Name: k.Name, Token: k.Token.Reveal(), Role: role})
	}
	if t := h.TLS; t != nil {
		opts.TLSCertFile, opts.TLSKeyFile = t.CertFile, t.KeyFile
	}
	if rt.hub != nil {
		ws := cfg.Sinks.WebSocket
		opts.WebSocketOrigins = ws.AllowedOrigins
		opts.Mounts = append(opts.Mounts, api.Mount{Pattern: ws.Path, Handler: rt.hub, Role: api.RoleRead, WebSocket: true})
	}
	srv, err := api.New(opts)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	ln, err := net.Listen("tcp", h.Listen)
	if err != nil {
		return listenError("http", h.Listen, "http.listen (UAGATE_HTTP_LISTEN)", err)
	}
	if err := srv.Serve(ln); err != nil {
		return fmt.Errorf("http: %w", err)
	}
	rt.api = srv
	rt.httpLn = ln
	return nil
}

// HTTPAddr is the address the HTTP listener got ("" without one).
func (rt *runtime) HTTPAddr() string {
	if rt.httpLn == nil {
		return ""
	}
	return rt.httpLn.Addr().String()
}

// queues returns the queues of ua-data/metadata messages and those of
// per-field messages, with the options per-field publishing takes.
func (rt *runtime) queues() (data, fields []sink.Queue, pf *config.PerField) {
	for _, o := range rt.outputs {
		if o.perField != nil {
			fields = append(fields, o)
			if pf == nil {
				pf = o.perField
			}
			continue
		}
		data = append(data, o)
	}
	if rt.hub != nil {
		data = append(data, rt.hub)
	}
	return data, fields, pf
}

// endpoint returns the configured endpoint of a writer group.
func endpointOf(cfg *config.Config, name string) *config.Endpoint {
	for i := range cfg.Endpoints {
		if cfg.Endpoints[i].Name == name {
			return &cfg.Endpoints[i]
		}
	}
	return nil
}

// addGroupLocked makes a writer group as a subscription on one of its
// endpoint's sessions (sessions.go) and starts it in the background (Start
// waits for the session: an endpoint that is down must not hold the others
// up).
func (rt *runtime) addGroupLocked(wg *config.WriterGroup, onState func(*client.ManagedSession, client.State, error)) error {
	ep := endpointOf(rt.cfg, wg.Endpoint)
	if ep == nil {
		return fmt.Errorf("writer group %s: endpoint %q is not configured", wg.Name, wg.Endpoint)
	}
	ss, err := rt.sessionForLocked(ep, wg.Name, onState)
	if err != nil {
		return fmt.Errorf("writer group %s: %w", wg.Name, err)
	}
	m, url := ss.m, rt.url(ep.URL)
	gctx, cancel := context.WithCancel(rt.ctx)
	rg := &runGroup{ss: ss, cancel: cancel}
	rt.groups[wg.Name] = rg
	if !hasBrowse(wg) {
		g, err := rt.newGroup(wg, m, url)
		if err != nil {
			delete(rt.groups, wg.Name)
			cancel()
			rt.releaseSessionLocked(context.Background(), wg.Name, ss)
			return err
		}
		rg.g = g
	}
	cfg := *wg
	rt.starts.Add(1)
	go func() {
		defer rt.starts.Done()
		// A few groups of a session set up at once: browsing, reading
		// data types and creating items of every group together would
		// hold all their transient memory at the same time.
		select {
		case ss.slots <- struct{}{}:
			defer func() { <-ss.slots }()
		case <-gctx.Done():
			return
		}
		g := rg.g
		if g == nil {
			// Browse selections need the server: expand them into fields
			// once connected, then build the group.
			expanded, err := rt.expandBrowse(gctx, &cfg, m)
			if err == nil {
				g, err = rt.newGroup(expanded, m, url)
			}
			if err != nil {
				if gctx.Err() == nil {
					rt.log.Error("writer group not started", "group", cfg.Name, "err", err)
				}
				return
			}
			rt.mu.Lock()
			if gctx.Err() != nil { // removed meanwhile
				rt.mu.Unlock()
				_ = g.Stop(context.Background())
				return
			}
			rg.g = g
			rt.mu.Unlock()
		}
		if err := g.Start(gctx); err != nil && gctx.Err() == nil {
			rt.log.Error("writer group did not start", "group", cfg.Name, "err", err)
		}
		rt.mem.started()
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
func (rt *runtime) newGroup(wg *config.WriterGroup, m *client.ManagedSession, url string) (*bridge.WriterGroup, error) {
	data, fields, pf := rt.queues()
	opts := bridge.Options{
		Session:     m,
		Queues:      data,
		FieldQueues: fields,
		PublisherID: rt.cfg.Gateway.PublisherID,
		EndpointURL: url,
		Logger:      rt.log,
		Resume:      rt.resume,
	}
	if rt.scale != nil {
		opts.Resume = rt.scale
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

// expandBrowse returns wg with the browse selections of its writers replaced
// by the fields they select (after the listed ones), logging progress.
func (rt *runtime) expandBrowse(ctx context.Context, wg *config.WriterGroup, m *client.ManagedSession) (*config.WriterGroup, error) {
	c, err := m.WaitConnected(ctx)
	if err != nil {
		return nil, err
	}
	out := *wg
	out.Writers = make([]config.DataSetWriter, len(wg.Writers))
	for i, w := range wg.Writers {
		w.Fields = append([]config.Field(nil), w.Fields...)
		names := map[string]bool{}
		for _, f := range w.Fields {
			names[f.Name] = true
		}
		for _, sel := range w.Browse {
			start := time.Now()
			last := start
			found, err := config.ExpandBrowse(ctx, c, sel, func(found, visited int) {
				if now := time.Now(); now.Sub(last) >= 2*time.Second {
					last = now
					rt.log.Info("browsing", "group", wg.Name, "writer", w.Name, "root", sel.Root, "found", found, "visited", visited)
				}
			})
			if err != nil && len(found) == 0 {
				return nil, fmt.Errorf("writer %s/%s: browse %s: %w", wg.Name, w.Name, sel.Root, err)
			}
			if err != nil {
				rt.log.Warn("browse stopped early", "group", wg.Name, "writer", w.Name, "root", sel.Root, "fields", len(found), "err", err)
			}
			added := 0
			for _, f := range found {
				if names[f.Name] {
					continue // a listed field of that name wins
				}
				names[f.Name] = true
				w.Fields = append(w.Fields, f)
				added++
			}
			rt.log.Info("browse selected fields", "group", wg.Name, "writer", w.Name, "root", sel.Root, "fields", added, "took", time.Since(start).Round(time.Millisecond))
		}
		w.Browse = nil
		out.Writers[i] = w
	}
	return &out, nil
}

// removeGroupLocked stops a writer group and closes its session.
func (rt *runtime) removeGroupLocked(ctx context.Context, name string) {
	rg := rt.groups[name]
	if rg == nil {
		return
	}
	delete(rt.groups, name)
	rg.cancel()
	if rg.g != nil {
		if err := rg.g.Stop(ctx); err != nil {
			rt.log.Warn("writer group stop", "group", name, "err", err)
		}
	}
	rt.releaseSessionLocked(ctx, name, rg.ss)
}

// errNeedsRestart marks a reload that changes what the runtime cannot change
// in place.
var errNeedsRestart = errors.New("needs a restart")

// apply makes next (defaults applied, validated) the running configuration:
// writer groups added, removed, or recreated when their own settings or
// endpoint changed; writers added, removed or replaced in place. Changes to
// gateway settings, embedded parts or sinks are refused (the running
// configuration stays) since they cannot be applied without a restart.
func (rt *runtime) apply(ctx context.Context, next *config.Config) (config.Changes, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	ch := config.Diff(rt.cfg, next)
	if ch.Empty() {
		return ch, nil
	}
	if ch.Settings || !ch.Sinks.Empty() {
		return ch, fmt.Errorf("%w: the change touches gateway, embedded, http or sink settings:\n%s", errNeedsRestart, ch.String())
	}
	old := rt.cfg
	rt.cfg = next
	// Writer groups to recreate: changed ones, and those of changed endpoints.
	recreate := map[string]bool{}
	for _, n := range ch.WriterGroups.Changed {
		recreate[n] = true
	}
	for _, e := range ch.Endpoints.Changed {
		for _, wg := range next.WriterGroups {
			if wg.Endpoint == e {
				recreate[wg.Name] = true
			}
		}
	}
	for _, n := range ch.WriterGroups.Removed {
		rt.removeGroupLocked(ctx, n)
	}
	for n := range recreate {
		rt.removeGroupLocked(ctx, n)
	}
	var errs []error
	for i := range next.WriterGroups {
		wg := &next.WriterGroups[i]
		if _, running := rt.groups[wg.Name]; running {
			continue
		}
		if rt.scale != nil && !rt.scale.Holds(wg.Name) {
			continue // its holder (another replica, or this one once it takes the lease) starts it
		}
		if err := rt.addGroupLocked(wg, rt.onState); err != nil {
			errs = append(errs, err)
		}
	}
	if rt.scale != nil {
		rt.scale.SetUnits(groupNames(next))
	}
	// Writers of groups that go on: in place.
	touched := map[string]bool{}
	for _, list := range [][]string{ch.Writers.Added, ch.Writers.Removed, ch.Writers.Changed, ch.Fields.Added, ch.Fields.Removed, ch.Fields.Changed} {
		for _, n := range list {
			gw := strings.SplitN(n, "/", 3)
			if len(gw) >= 2 && !recreate[gw[0]] {
				touched[gw[0]+"/"+gw[1]] = true
			}
		}
	}
	// Removals first, then replacements, then additions: a writer added may
	// take the DataSetWriterId (by default its position) of one removed.
	for pass := 0; pass < 3; pass++ {
		for _, gwName := range slices.Sorted(maps.Keys(touched)) {
			gname, wname, _ := strings.Cut(gwName, "/")
			rg := rt.groups[gname]
			if rg == nil || rg.g == nil {
				continue // a group added or recreated above has its writers already
			}
			g := rg.g
			nw := findWriter(next, gname, wname)
			ow := findWriter(old, gname, wname)
			var err error
			switch {
			case nw == nil && pass == 0:
				err = g.RemoveWriter(ctx, wname)
			case nw != nil && ow != nil && pass == 1:
				err = g.ReplaceWriter(ctx, *nw)
			case ow == nil && pass == 2:
				err = g.AddWriter(ctx, *nw)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("writer %s: %w", gwName, err))
			}
		}
	}
	return ch, errors.Join(errs...)
}

func findWriter(c *config.Config, group, writer string) *config.DataSetWriter {
	for i := range c.WriterGroups {
		if c.WriterGroups[i].Name != group {
			continue
		}
		for j := range c.WriterGroups[i].Writers {
			if c.WriterGroups[i].Writers[j].Name == writer {
				return &c.WriterGroups[i].Writers[j]
			}
		}
	}
	return nil
}

// stop stops everything in reverse order within ctx: the writer groups (no
// new messages), the sinks drain (what they deliver is acknowledged
// upstream), then the sessions close, the HTTP listener and the embedded
// parts.
func (rt *runtime) stop(ctx context.Context) {
	// Readiness fails at once; the listener goes on for http.shutdownDelay
	// while the rest drains.
	apiDone := make(chan struct{})
	go func() {
		defer close(apiDone)
		if rt.api != nil {
			_ = rt.api.Shutdown(ctx)
		}
	}()
	if rt.cancel != nil {
		rt.cancel()
	}
	if rt.scale != nil {
		// The groups this replica holds stop keeping their subscriptions,
		// and their leases are released: the others take them over at
		// once. The sinks still run, so what they deliver is acknowledged.
		_ = rt.scale.Close(ctx)
	}
	rt.mu.Lock()
	groups := rt.groups
	rt.groups = map[string]*runGroup{}
	rt.mu.Unlock()
	rt.starts.Wait()
	if rt.mem != nil {
		rt.mem.wait() // rt.ctx is cancelled
	}
	rt.mu.Lock()
	keep := !rt.cfg.Gateway.DeleteSubscriptionsOnStop
	rt.mu.Unlock()
	var wg sync.WaitGroup
	for name, rg := range groups {
		if rg.g == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if keep {
				// A restart within the subscription's lifetime takes it back
				// with what the server queued meanwhile (a rolling upgrade
				// loses nothing, as a kill -9 does not).
				rt.keepResumeState(name, rt.detachGroup(ctx, name, rg))
				return
			}
			if err := rg.g.Stop(ctx); err != nil {
				rt.log.Warn("writer group stop", "group", name, "err", err)
			}
		}()
	}
	wg.Wait()
	if rt.hub != nil {
		_ = rt.hub.Close(ctx)
	}
	for _, o := range rt.outputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := o.Close(ctx); err != nil {
				rt.log.Warn("sink close", "sink", o.Name(), "err", err)
			}
		}()
	}
	wg.Wait()
	if rt.pool != nil {
		if err := rt.pool.Close(ctx); err != nil {
			rt.log.Debug("sessions close", "err", err)
		}
	}
	<-apiDone
	if rt.scaleConn != nil {
		rt.scaleConn.Close()
	}
	if rt.nats != nil {
		rt.nats.Close()
	}
	if rt.mqtt != nil {
		rt.mqtt.Close()
	}
	if rt.sim != nil {
		rt.sim.Close()
	}
}

// detachGroup stops a writer group keeping its subscription at the server
// (client.ManagedSession.Detach) and returns the subscription's final resume
// state (nil when it has none). rg is no longer in rt.groups.
func (rt *runtime) detachGroup(ctx context.Context, name string, rg *runGroup) *client.ResumeState {
	rg.cancel() // a Start still waiting for the session ends
	// Detach first: Stop alone would delete the subscription at the server.
	// A session shared with other groups is detached for all of them: this
	// runs for every group at shutdown (scale-out, which hands single
	// groups over, gives each group a session of its own).
	if err := rg.ss.m.Detach(ctx); err != nil {
		rt.log.Debug("session detach", "group", name, "err", err)
	}
	rt.mu.Lock()
	g := rg.g // a group still being built stops itself (its context is done)
	rt.mu.Unlock()
	var final *client.ResumeState
	if g != nil {
		if sub := g.Subscription(); sub != nil {
			if st, ok := sub.ResumeState(); ok {
				final = &st
			}
		}
		if err := g.Stop(ctx); err != nil {
			rt.log.Warn("writer group stop", "group", name, "err", err)
		}
	}
	rt.mu.Lock()
	rt.releaseSessionLocked(ctx, name, rg.ss)
	rt.mu.Unlock()
	return final
}

// keepResumeState writes a detached group's final state (its last
// acknowledgements included) into its resume record in the state directory.
func (rt *runtime) keepResumeState(name string, final *client.ResumeState) {
	if final == nil || rt.resume == nil {
		return
	}
	rec, ok, err := rt.resume.LoadResume(name)
	if err != nil || !ok || rec.State.SubscriptionID != final.SubscriptionID {
		// No record of this subscription (it never got its items): a
		// restart subscribes anew, the server drops the kept one at the
		// end of its lifetime.
		rt.log.Info("writer group stopped; its subscription has no resume record", "group", name, "subscription", final.SubscriptionID)
		return
	}
	rec.State = *final
	rec.Saved = time.Now()
	if err := rt.resume.SaveResume(name, rec); err != nil {
		rt.log.Warn("writer group stopped; saving its resume state failed", "group", name, "err", err)
		return
	}
	rt.log.Info("writer group stopped; subscription kept at the server for a restart", "group", name,
		"subscription", final.SubscriptionID, "lastAcked", final.LastAcked)
}

// hints prints where to look at the data of a default run.
func (rt *runtime) hints(w io.Writer) {
	var lines []string
	if rt.mqtt != nil {
		host, port, _ := net.SplitHostPort(rt.mqtt.Addr())
		lines = append(lines, fmt.Sprintf("  MQTT:      mosquitto_sub -h %s -p %s -t 'opcua/json/#' -v", host, port))
	}
	if rt.nats != nil {
		lines = append(lines, fmt.Sprintf("  NATS:      nats sub -s %s 'opcua.json.>'", rt.nats.URL()))
	}
	if rt.hub != nil && rt.httpLn != nil {
		// The API may be applying a change already (rt.apply replaces rt.cfg).
		rt.mu.Lock()
		cfg := rt.cfg
		rt.mu.Unlock()
		var groups []string
		for _, g := range cfg.WriterGroups {
			groups = append(groups, g.Name)
		}
		lines = append(lines, fmt.Sprintf("  WebSocket: ws://%s%s?group=%s", rt.httpLn.Addr(), cfg.Sinks.WebSocket.Path, strings.Join(groups, ",")))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "gateway: streaming; look at the data with")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
