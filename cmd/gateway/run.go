package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uagate/gateway/api"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/embedded"
	"github.com/uagate/gateway/bridge/gateway"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/filesink"
	"github.com/uagate/gateway/uastack/client"
)

// debugPprofEnv opts into the Go profiler of `gateway run` (api.ServeDebug,
// off by default): a loopback address (127.0.0.1:6060, [::1]:0) where
// /debug/pprof/ and /debug/pools are served, to measure the gateway's memory
// on a deployment-sized configuration.
const debugPprofEnv = "UAGATE_DEBUG_PPROF"

// cmdRunGateway runs the gateway: a configuration file (-config), or one
// built from the flags (-upstream, -nodes, -interval, -out), or, with neither,
// the embedded defaults (simulation server → embedded MQTT broker, NATS server
// and the WebSocket stream).
func cmdRunGateway(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "configuration `file` (YAML, or OPC Publisher's publishednodes.json); watched: changes apply while running")
	upstream := fs.String("upstream", "", "endpoint `URL` of one OPC UA server (opc.tcp://…) instead of a configuration file; default: the embedded simulation server")
	nodes := fs.String("nodes", "", "node ids to publish, comma-separated (e.g. ns=1;s=Demo.Counter);\ndefault: the Demo variables Counter, Sine, Random and Step of the simulation server")
	interval := fs.Duration("interval", time.Second, "publishing `interval` (without -config)")
	out := fs.String("out", "", "also write every message as a JSON line to `file` (appended; - for stdout)")
	duration := fs.Duration("duration", 0, "stop after this long (0: run until interrupted)")
	count := fs.Int("count", 0, "with -out: stop after this many ua-data messages were written (0: no limit)")
	publisher := fs.String("publisher", "", "PublisherId of the messages (default uagate; overrides the configuration)")
	logFormat := fs.String("log", "text", "log `format`: text or json")
	var conn connFlags
	conn.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: gateway run [flags]      (gateway with no arguments: gateway run)

Runs the gateway. With -config it runs that configuration and watches the file
(a valid change is applied while running: writer groups, writers and nodes
added, removed or changed; an invalid one is refused and logged). Without it,
the flags make one: -upstream (default: an embedded simulation server) with
-nodes published every -interval. With no sink configured, the messages go to
an embedded MQTT broker (127.0.0.1:1883), an embedded NATS server
(127.0.0.1:4222) and the WebSocket stream (ws://127.0.0.1:8080/ws); -out
writes them as JSON lines too. The connection flags (-policy … -auto-accept)
apply to -upstream. Logs go to stderr. Ctrl-C stops it, draining the sinks.

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
	if *count > 0 && *out == "" {
		return fmt.Errorf("%w: -count needs -out", errUsage)
	}
	if *logFormat != "text" && *logFormat != "json" {
		return fmt.Errorf("%w: -log must be text or json, got %q", errUsage, *logFormat)
	}
	if *cfgPath != "" && (*upstream != "" || *nodes != "") {
		return fmt.Errorf("%w: -config excludes -upstream and -nodes (put them in the file)", errUsage)
	}
	level := slog.LevelInfo
	if conn.verbose {
		level = slog.LevelDebug
	}
	var handler slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})
	if *logFormat == "json" {
		handler = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})
	}
	logger := slog.New(handler)
	if limit, err := gateway.ApplyMemoryLimit(os.Getenv); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	} else if limit > 0 {
		logger.Info("memory limit for the Go runtime", "limitMB", limit>>20, "env", gateway.MemoryLimitEnv)
	}
	if !testing.Testing() {
		// The process's scheduler: not a test binary's, whose other tests
		// share it.
		gateway.GovernProcs(ctx, os.Getenv, logger.Debug)
	}
	if addr := os.Getenv(debugPprofEnv); addr != "" {
		pctx, cancel := context.WithCancel(ctx)
		_, wait, err := api.ServeDebug(pctx, addr, logger)
		if err != nil {
			cancel()
			return fmt.Errorf("%w: %s=%q: %v", errUsage, debugPprofEnv, addr, err)
		}
		defer wait()
		defer cancel()
	}

	var (
		cfg   *config.Config
		warns []config.Warning
		err   error
	)
	flagsMake := *upstream != "" || *nodes != "" // a configuration of the flags
	fs.Visit(func(f *flag.Flag) { flagsMake = flagsMake || f.Name == "interval" })
	if *cfgPath == "" && !flagsMake {
		if p := config.SavedFile(); p != "" { // REST API changes of an earlier run
			*cfgPath = p
			logger.Info("configuration saved by an earlier run", "file", p)
		}
	}
	if *cfgPath != "" {
		cfg, warns, err = config.Load(*cfgPath)
	} else {
		var text []byte // no flags: the embedded defaults (config.Default)
		if flagsMake {
			if text, err = flagsConfig(&conn, *upstream, *nodes, *interval); err != nil {
				return err
			}
		}
		cfg, warns, err = config.Parse(text, "(command line)")
	}
	for _, w := range warns {
		logger.Warn("configuration: " + w.String())
	}
	if err != nil {
		return configError(err, "invalid configuration", stderr)
	}
	if *publisher != "" {
		cfg.Gateway.PublisherID = *publisher
	}
	if !cfg.Embedded.NATS.On() && !testing.Testing() {
		// No NATS server runs in this process (embedded parts start with
		// it, never on a reload): nats-server's CPU sampler reads /proc
		// each second for nobody.
		if embedded.StopNATSSampler() {
			logger.Debug("nats-server's CPU sampler stopped: no embedded NATS server")
		}
	}

	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	counted := make(chan struct{})
	opts := gateway.Options{Logger: logger, Version: version}
	var failed chan error
	if *upstream != "" {
		// One endpoint from the command line: a permanent failure before it
		// ever connected (the password, the server's certificate, no such
		// security policy, a host that does not exist) is the command's
		// error; retrying slowly, as a configured gateway does for each of
		// its endpoints, would only hide it.
		failed = make(chan error, 1)
		opts.OnState = exitOnPermanentFailure(*upstream, failed)
	}
	switch *out {
	case "":
	case "-":
		opts.ExtraSinks = append(opts.ExtraSinks, filesink.NewWriter("out", stdout))
	default:
		f, err := filesink.New(filesink.Config{Name: "out", Path: *out})
		if err != nil {
			return fmt.Errorf("-out: %w", err)
		}
		opts.ExtraSinks = append(opts.ExtraSinks, f)
	}
	if *count > 0 {
		opts.WrapSink = func(s sink.Sink) sink.Sink {
			if s.Name() != "out" {
				return s
			}
			return sink.CountData(s, int64(*count), counted)
		}
	}
	opts.SavePath = config.SavePath(*cfgPath, cfg)
	gw, err := gateway.New(cfg, opts)
	if err != nil {
		return err
	}
	if err := gw.Start(ctx); err != nil {
		return err
	}
	if *out != "-" {
		gw.Hints(stderr)
	}
	if *cfgPath != "" {
		if err := gw.Watch(ctx, *cfgPath); err != nil {
			logger.Warn("configuration file not watched", "file", *cfgPath, "err", err)
		}
	}

	select {
	case <-ctx.Done():
	case <-counted:
	case err = <-failed:
	case err = <-gw.Fatal():
	}
	logger.Info("stopping", "timeout", cfg.Gateway.ShutdownTimeout.D())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Gateway.ShutdownTimeout.D())
	defer cancel()
	if serr := gw.Stop(sctx); serr != nil {
		logger.Warn("stopped at the shutdown timeout", "err", serr)
	}
	return err
}

// exitOnPermanentFailure returns the state callback of a one-endpoint run: the
// first StateFailed before the session was ever connected goes to failed
// (which has room for it; the callback runs on the session's worker and must
// not block).
func exitOnPermanentFailure(url string, failed chan<- error) func(*client.ManagedSession, client.State, error) {
	var connected atomic.Bool
	return func(_ *client.ManagedSession, st client.State, err error) {
		switch {
		case st == client.StateConnected:
			connected.Store(true)
		case st == client.StateFailed && !connected.Load():
			select {
			case failed <- fmt.Errorf("upstream %s: %s, not retrying: %w", url, client.ClassifyFailure(err), err):
			default:
			}
		}
	}
}

// configError prints a configuration's issues and makes them a usage error
// (exit code 2) that says what: "invalid configuration: 3 errors".
func configError(err error, what string, stderr io.Writer) error {
	issues := config.Issues(err)
	if issues == nil {
		return err
	}
	for _, is := range issues {
		fmt.Fprintln(stderr, is)
	}
	return fmt.Errorf("%w: %s: %d error%s", errUsage, what, len(issues), plural(len(issues)))
}

// flagsConfig is the configuration the run flags describe, as YAML: it takes
// the path of a file through config.Parse (environment overrides, defaults,
// validation). The endpoint is -upstream with the connection flags, else the
// embedded simulation server; writer group "run", writer "gateway", publishes
// -nodes every -interval.
func flagsConfig(conn *connFlags, upstream, nodes string, interval time.Duration) ([]byte, error) {
	fields, err := config.NodeFields(nodes)
	if err != nil {
		return nil, fmt.Errorf("%w: -nodes: %v", errUsage, err)
	}
	ep := config.Endpoint{Name: "sim", URL: config.EmbeddedSimURL}
	if upstream != "" {
		if ep, err = conn.endpoint(); err != nil {
			return nil, err
		}
		ep.Name, ep.URL = "upstream", upstream
		if ep.Identity.Type == config.IdentityUsername && conn.password == "" {
			ep.Identity.Password = config.Secret{Env: passwordEnv} // resolved by config.Parse
		}
	}
	return config.OneGroupText(ep, fields, interval)
}
