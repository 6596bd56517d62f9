package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uagate/gateway/api"
	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/command"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/embedded"
	"github.com/uagate/gateway/bridge/lease"
	"github.com/uagate/gateway/bridge/resume"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/filesink"
	"github.com/uagate/gateway/bridge/sink/mqtt5sink"
	"github.com/uagate/gateway/bridge/sink/mqttsink"
	"github.com/uagate/gateway/bridge/sink/natssink"
	"github.com/uagate/gateway/bridge/sink/sparkplug"
	"github.com/uagate/gateway/bridge/sink/wssink"
	"github.com/uagate/gateway/bridge/storelog"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// Gateway is one configuration brought to life. It owns, in the order
// they start (and stop in reverse): the embedded parts (simulation server,
// MQTT broker, NATS server) the configuration asks for, one Output per sink
// and the WebSocket hub, the HTTP listener, the client pool with the managed
// sessions the writer groups share (sessions.go), and the writer groups.
//
// Concurrency: gw.mu guards the running state (configuration, groups,
// sessions) and is held only for memory operations, never across an OPC UA
// round trip, a sink's queue or a file. Readers (the API, metrics, the
// lease handler) load gw.view, a copy published after every change, and
// take no lock that a reload or the data plane can hold. Applies (API,
// watcher, retry) run one at a time through gw.applySem, a queue readers
// never wait in.
//
// Lock order: gw.applySem, then gw.mu, then whatever the bridge and client
// take.
type Gateway struct {
	log  *slog.Logger
	opts Options

	// urls maps the configuration's placeholders (config.EmbeddedSimURL …)
	// to the embedded parts' real addresses; written by Start only.
	urls map[string]string

	sim  *server.Server
	mqtt *embedded.MQTT
	nats *embedded.NATS

	outputs []*runOutput // made by Start, never changed after
	// groupSinks are the sinks with an Output per writer group (a
	// persistent MQTT session under scale-out: groupsink.go); made by
	// Start, never changed after.
	groupSinks []groupSink
	hub        *wssink.Hub
	httpLn     net.Listener

	pool *client.Pool
	api  *api.Server

	// cmd runs commands (commands.go): made by Start, its rules follow the
	// running configuration (publishLocked); cmdTransports carry them.
	cmd           *command.Engine
	spCommands    sparkplugCommander // the Sparkplug nodes' DCMD writes through cmd
	cmdTransports []cmdTransport
	hist          *api.Histograms // latency histograms the sinks and sessions feed

	storeMu sync.Mutex            // guards stores
	stores  map[string]*pki.Store // certificate stores by directory, for the API

	// resume keeps each writer group's resume state in the state directory
	// (restart without loss); nil without a usable state directory.
	resume *resume.FileStore
	// store is the store-and-forward log (store.go); nil when it is off.
	// streams are its streams with their readers, by writer group.
	store    *storelog.Log
	streamMu sync.Mutex
	streams  map[string]*runStream
	// deadLetters keeps what brokers refuse for good (<stateDir>/deadletters.jsonl);
	// nil without a usable state directory.
	deadLetters *storelog.DeadLetterFile
	// scale, with scaleOut enabled, decides which writer groups run here
	// (scaleout.go); it is their resume.Store.
	scale     *lease.KV
	scaleConn *nats.Conn
	// fatal receives the error that ends serving (a duplicate replica id);
	// room for one.
	fatal chan error

	// brokerOnce: the wait for the brokers' payload limit (groups.go).
	brokerOnce sync.Once

	// applySem serialises Apply, ApplyConfig and Retry.
	applySem chan struct{}

	mu          sync.Mutex
	cfg         *config.Config // the running configuration (placeholders kept)
	desired     *config.Config // the configuration last asked for (Retry applies it)
	report      Report         // of the last apply
	groups      map[string]*runGroup
	apiSessions map[string]*client.ManagedSession // sessions of endpoints without writer groups
	// sessions are the pool's sessions the writer groups run on, with how
	// many use each (sessions.go); clients the client configuration each
	// endpoint's sessions share.
	sessions map[client.PoolKey]*sharedSession
	clients  map[string]endpointClient
	// cmdSessions are the endpoints' command sessions (commands.go).
	cmdSessions map[string]cmdSession
	started     bool
	stopped     bool

	view   atomic.Pointer[view] // what readers see (publishLocked)
	starts sync.WaitGroup       // group starts in flight
	mem    *memReleaser         // gives setup memory back after the starts (memory.go)
	ctx    context.Context
	cancel context.CancelFunc
}

// view is the state readers copy: replaced as a whole, never changed.
type view struct {
	cfg    *config.Config
	groups map[string]*runGroup
}

// runGroup is a running writer group and its session.
type runGroup struct {
	g      atomic.Pointer[bridge.WriterGroup] // nil until built (browse selections wait for the server)
	ss     *sharedSession                     // its session (ss.m) and the other groups on it
	cancel context.CancelFunc                 // ends a Start still waiting for the session
	// outs are the group's own Outputs (groupSinks), set once it is built.
	outs atomic.Pointer[[]*runOutput]
}

// runOutput is a sink's Output and what the writer groups need to know of it.
type runOutput struct {
	*sink.Output
	kind     string           // mqtt, nats, file, sparkplug (metrics)
	perField *config.PerField // MQTT per-field layout: receives KindField messages only
	node     *sparkplug.Node  // Sparkplug B mode: fed by the groups' ValueSinks, no Part 14
}

// Options are what a caller adds to a configuration.
type Options struct {
	// Logger receives the gateway's logs (default: slog.Default()).
	Logger *slog.Logger
	// Version is reported by the API (default "dev").
	Version string
	// ExtraSinks are sinks made by the caller (the run command's -out),
	// started and closed with the configured ones, at most once.
	ExtraSinks []sink.Sink
	// WrapSink, when set, wraps every sink before its Output is made.
	WrapSink func(sink.Sink) sink.Sink
	// SavePath is where configuration changes made through the REST API
	// are saved ("": not saved).
	SavePath string
	// OnState is told of every session state change besides the log; it
	// runs on the session's worker and must not block.
	OnState func(m *client.ManagedSession, st client.State, err error)
	// OnMemReleased, when set, is told after the setup memory was given
	// back (memory.go).
	OnMemReleased func(before, after goruntime.MemStats)
	// SparkplugCommands authorises and carries out the writes of the
	// Sparkplug nodes' DCMDs; nil: the command engine, with the rules of
	// the configuration's commands section (none: every write refused).
	SparkplugCommands sparkplug.Commander
}

// Addrs are the addresses the gateway's parts listen on ("" for a part that
// does not run).
type Addrs struct {
	HTTP string // host:port of the REST API, metrics, dashboard and WebSocket stream
	Sim  string // opc.tcp:// URL of the embedded simulation server
	MQTT string // tcp:// URL of the embedded MQTT broker
	NATS string // nats:// URL of the embedded NATS server
}

// New makes a gateway for cfg, whose defaults must be applied and which must
// validate (config.Load and config.Parse do both). Nothing starts before
// Start.
func New(cfg *config.Config, opts Options) (*Gateway, error) {
	if cfg == nil {
		return nil, errors.New("gateway: no configuration")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	gw := &Gateway{
		log:      opts.Logger,
		opts:     opts,
		urls:     map[string]string{},
		cfg:      cfg,
		desired:  cfg,
		groups:   map[string]*runGroup{},
		applySem: make(chan struct{}, 1),
		hist:     api.NewHistograms(),
		fatal:    make(chan error, 1),
	}
	gw.ctx, gw.cancel = context.WithCancel(context.Background())
	gw.mem = newMemReleaser(os.Getenv)
	gw.mem.released = opts.OnMemReleased
	gw.mu.Lock()
	gw.publishLocked()
	gw.mu.Unlock()
	return gw, nil
}

// Start starts everything the configuration asks for. The writer groups
// start in the background (an endpoint that is down does not hold the others
// up). On error what was started is stopped again; a Gateway starts once.
func (gw *Gateway) Start(ctx context.Context) (err error) {
	gw.mu.Lock()
	if gw.started {
		gw.mu.Unlock()
		return errors.New("gateway: started already")
	}
	gw.started = true
	cfg := gw.cfg
	gw.mu.Unlock()
	gw.mem.run(gw.ctx, gw.log.Info)
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = gw.Stop(sctx)
		}
	}()
	// Without a usable state directory (a read-only container) the gateway
	// runs without what it keeps there: resume records and the log.
	stateOK := true
	if err := os.MkdirAll(cfg.Gateway.StateDir, 0o700); err != nil {
		stateOK = false
		gw.log.Warn("no usable state directory: restarts resume nothing and the store-and-forward log is off", "stateDir", cfg.Gateway.StateDir, "err", err)
	} else if gw.resume, err = resume.NewFileStore(filepath.Join(cfg.Gateway.StateDir, "resume")); err != nil {
		stateOK = false
		gw.log.Warn("no usable state directory: restarts resume nothing and the store-and-forward log is off", "stateDir", cfg.Gateway.StateDir, "err", err)
	}
	if err := gw.seedPKI(cfg); err != nil {
		return err
	}
	if err := gw.startEmbedded(ctx, cfg); err != nil {
		return err
	}
	gw.openStore(cfg, stateOK)
	if stateOK {
		path := filepath.Join(cfg.Gateway.StateDir, "deadletters.jsonl")
		if gw.deadLetters, err = storelog.OpenDeadLetters(path, 0, gw.log); err != nil {
			gw.log.Warn("no dead-letter file: a message a broker refuses for good is logged and, at least once, not acknowledged", "err", err)
		}
	}
	if err := gw.startSinks(cfg, gw.opts.ExtraSinks); err != nil {
		return err
	}
	if err := gw.startStreams(cfg); err != nil {
		return err
	}
	if err := gw.startCommands(cfg); err != nil {
		return err
	}
	gw.spCommands.e.Store(gw.cmd)
	if err := gw.startHTTP(cfg); err != nil {
		return err
	}
	pool, err := client.NewPool(&client.PoolConfig{Grouping: client.PerEndpointAndGroup})
	if err != nil {
		return err
	}
	gw.pool = pool
	if cfg.ScaleOut.Enabled {
		return gw.startScaleOut(cfg)
	}
	var errs []error
	for i := range cfg.WriterGroups {
		wg := &cfg.WriterGroups[i]
		ccfg, err := gw.clientConfig(cfg, wg.Endpoint)
		if err == nil {
			err = gw.addGroup(cfg, wg, ccfg)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// seedPKI imports gateway.pkiSeed into every endpoint's certificate store,
// before any session opens one.
func (gw *Gateway) seedPKI(cfg *config.Config) error {
	seed := cfg.Gateway.PKISeed
	if seed == "" {
		return nil
	}
	done := map[string]bool{}
	for _, e := range cfg.Endpoints {
		if done[e.PKI] {
			continue
		}
		done[e.PKI] = true
		st, err := pki.Open(e.PKI, pki.Options{Logger: gw.log})
		if err != nil {
			return fmt.Errorf("endpoints %s: %w", e.Name, err)
		}
		res, err := st.Import(seed)
		if err != nil {
			return fmt.Errorf("gateway.pkiSeed: %w", err)
		}
		gw.log.Info("pki: seeded", "store", e.PKI, "seed", seed, "own", res.Own, "trusted", res.Trusted, "issuers", res.Issuers, "crls", res.CRLs)
	}
	return nil
}

// publishLocked publishes the running state to the readers (gw.mu held).
func (gw *Gateway) publishLocked() {
	gw.view.Store(&view{cfg: gw.cfg, groups: maps.Clone(gw.groups)})
	if gw.cmd != nil {
		gw.cmd.SetConfig(gw.cfg)
	}
}

// Addrs returns the addresses the gateway listens on (after Start).
func (gw *Gateway) Addrs() Addrs {
	var a Addrs
	if gw.httpLn != nil {
		a.HTTP = gw.httpLn.Addr().String()
	}
	if gw.sim != nil {
		a.Sim = gw.sim.URL()
	}
	if gw.mqtt != nil {
		a.MQTT = gw.mqtt.URL()
	}
	if gw.nats != nil {
		a.NATS = gw.nats.URL()
	}
	return a
}

// Sim returns the embedded simulation server (nil unless it runs): a
// program embedding the gateway may drive its values.
func (gw *Gateway) Sim() *server.Server { return gw.sim }

func (gw *Gateway) url(u string) string {
	if r, ok := gw.urls[u]; ok {
		return r
	}
	return u
}

// startEmbedded starts the simulation server, MQTT broker and NATS server
// the configuration turned on.
func (gw *Gateway) startEmbedded(ctx context.Context, cfg *config.Config) error {
	if cfg.Embedded.Sim.On() {
		srv, err := server.New(&server.Config{
			Address:  cfg.Embedded.Sim.Listen,
			Policies: []uasc.EndpointSecurity{{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}},
			Logger:   gw.log.With("part", "sim"),
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
		gw.sim = srv
		gw.urls[config.EmbeddedSimURL] = srv.URL()
		gw.log.Info("embedded simulation server", "url", srv.URL())
	}
	if cfg.Embedded.MQTT.On() {
		m, err := embedded.StartMQTT(ctx, cfg.Embedded.MQTT.Listen, gw.log.With("part", "mqtt-broker"))
		if err != nil {
			return err
		}
		gw.mqtt = m
		gw.urls[config.EmbeddedMQTTURL] = m.URL()
		gw.log.Info("embedded MQTT broker", "url", m.URL())
	}
	if cfg.Embedded.NATS.On() {
		n, err := embedded.StartNATS(ctx, cfg.Embedded.NATS.Listen, filepath.Join(cfg.Gateway.StateDir, "nats"), gw.log.With("part", "nats-server"))
		if err != nil {
			return err
		}
		gw.nats = n
		gw.urls[config.EmbeddedNATSURL] = n.URL()
		gw.log.Info("embedded NATS server", "url", n.URL())
	}
	return nil
}

// listenError names the setting that moves a listener whose port is taken.
// replicaName is a broker client id or connection name of this replica:
// name, with the replica id appended under scale-out.
func replicaName(name, sep, replica string) string {
	if replica == "" {
		return name
	}
	return name + sep + replica
}

func listenError(what, addr, setting string, err error) error {
	return fmt.Errorf("%s: listen %s: %w (set %s)", what, addr, err, setting)
}

// newOutput makes and starts the Output of sink s; latency names its
// latency histogram.
func (gw *Gateway) newOutput(kind string, s sink.Sink, latency string, d config.Delivery, pf *config.PerField) (*runOutput, error) {
	node, _ := s.(*sparkplug.Node)
	opts, err := sink.OutputOptionsFromConfig(d)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", s.Name(), err)
	}
	if gw.opts.WrapSink != nil {
		s = gw.opts.WrapSink(s)
	}
	opts.Logger = gw.log
	opts.Latency = gw.hist.SourceToSink(latency)
	if gw.deadLetters != nil {
		opts.DeadLetters = gw.deadLetters
	}
	o, err := sink.NewOutput(s, opts)
	if err != nil {
		return nil, err
	}
	o.Start()
	return &runOutput{Output: o, kind: kind, perField: pf, node: node}, nil
}

// newMQTTSink makes the MQTT sink of mc's protocol version.
func newMQTTSink(mc mqttsink.Config) (sink.Sink, error) {
	if mc.ProtocolVersion == config.MQTTv5 {
		return mqtt5sink.New(mc)
	}
	return mqttsink.New(mc)
}

// startSinks makes and starts one Output per configured sink and the
// WebSocket hub.
func (gw *Gateway) startSinks(cfg *config.Config, extra []sink.Sink) error {
	pub := cfg.Gateway.PublisherID
	add := func(kind string, s sink.Sink, d config.Delivery, pf *config.PerField) error {
		o, err := gw.newOutput(kind, s, s.Name(), d, pf)
		if err != nil {
			return err
		}
		gw.outputs = append(gw.outputs, o)
		return nil
	}
	// Under scale-out the replicas run the same sinks: each connects as
	// itself, or a broker would take one replica's connection for another's
	// (MQTT closes the older of two with one client id).
	replica := ""
	if so := cfg.ScaleOut; so.Enabled {
		replica = so.ReplicaID
	}
	for _, m := range cfg.Sinks.MQTT {
		if m.Sparkplug != nil {
			sc := sparkplug.FromConfig(m, m.Password.Reveal())
			sc.URL = gw.url(sc.URL)
			sc.Logger = gw.log
			sc.Source = gw.runningGroups
			sc.Commands = gw.opts.SparkplugCommands
			if sc.Commands == nil {
				sc.Commands = &gw.spCommands
			}
			if gw.store != nil {
				// Held data goes to the log: it survives a restart.
				ls, err := sparkplug.NewLogStore(gw.store, m.Name)
				if err != nil {
					return fmt.Errorf("sinks.mqtt %s: %w", m.Name, err)
				}
				sc.Store = ls
			}
			n, err := sparkplug.New(sc)
			if err != nil {
				return fmt.Errorf("sinks.mqtt %s: %w", m.Name, err)
			}
			if err := add("sparkplug", n, m.Delivery, nil); err != nil {
				return err
			}
			continue
		}
		mc := mqttsink.FromConfig(m, pub, m.Password.Reveal())
		mc.URL = gw.url(mc.URL)
		mc.Logger = gw.log
		if replica != "" && !mc.CleanSession {
			// Its persistent session moves with each writer group.
			gs := mqttGroupSink(mc, m)
			if err := gs.check(); err != nil {
				return fmt.Errorf("sinks.mqtt %s: %w", m.Name, err)
			}
			gw.groupSinks = append(gw.groupSinks, gs)
			continue
		}
		mc.ClientID = replicaName(mc.ClientID, "-", replica)
		s, err := newMQTTSink(mc)
		if err != nil {
			return fmt.Errorf("sinks.mqtt %s: %w", m.Name, err)
		}
		if err := add("mqtt", s, m.Delivery, m.PerField); err != nil {
			return err
		}
	}
	for _, n := range cfg.Sinks.NATS {
		nc := natssink.FromConfig(n, n.Password.Reveal(), n.Token.Reveal())
		nc.ClientName = replicaName("uagate "+n.Name, " ", replica)
		nc.URL = gw.url(nc.URL)
		nc.Logger = gw.log
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
		o := wssink.Options{
			AllowedOrigins: ws.AllowedOrigins,
			Token:          ws.Token.Reveal(),
			ClientQueue:    ws.ClientQueue,
			Logger:         gw.log.With("sink", "websocket"),
		}
		if cfg.Commands.WebSocketOn() {
			gw.wsCommands(&o, cfg)
		}
		gw.hub = wssink.New(o)
	}
	return nil
}

// startHTTP opens the one HTTP listener: REST API, metrics, health, the
// dashboard and the WebSocket stream.
func (gw *Gateway) startHTTP(cfg *config.Config) error {
	if cfg.HTTP.Disabled {
		return nil
	}
	h := cfg.HTTP
	opts := api.Options{
		Backend:              gw,
		Version:              gw.opts.Version,
		Listen:               h.Listen,
		KeysFile:             h.KeysFile,
		AllowUnauthenticated: h.AllowUnauthenticated,
		PublicMetrics:        h.PublicMetrics,
		AllowedHosts:         h.AllowedHosts,
		CORSOrigins:          h.CORSOrigins,
		Ready:                api.ReadyPolicy{Endpoints: api.Require(h.Ready.Endpoints), Sinks: api.Require(h.Ready.Sinks)},
		ShutdownDelay:        h.ShutdownDelay.D(),
		Histograms:           gw.hist,
		Logger:               gw.log,
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
	if gw.hub != nil {
		ws := cfg.Sinks.WebSocket
		opts.WebSocketOrigins = ws.AllowedOrigins
		opts.Mounts = append(opts.Mounts, api.Mount{Pattern: ws.Path, Handler: gw.hub, Role: api.RoleRead, WebSocket: true})
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
	gw.api = srv
	gw.httpLn = ln
	return nil
}

// Fatal delivers the error, if one comes, after which this gateway serves
// nothing: another running replica has its scaleOut.replicaId. The caller
// should Stop and report it.
func (gw *Gateway) Fatal() <-chan error { return gw.fatal }

// HTTPAddr is the address the HTTP listener got ("" without one).
func (gw *Gateway) HTTPAddr() string {
	if gw.httpLn == nil {
		return ""
	}
	return gw.httpLn.Addr().String()
}
