package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/uasc"
)

// simUsersEnv holds -users when the flag is not given, so that passwords need
// not show in the process list.
const simUsersEnv = "UAGATE_SIM_USERS"

// cmdSim runs the simulation OPC UA server until ctx ends (Ctrl-C).
func cmdSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", server.DefaultAddress, "TCP `address` to listen on (host:port; 0.0.0.0 for every interface)")
	port := fs.Int("port", -1, "TCP `port`, overriding the port of -addr (0: any free port)")
	url := fs.String("url", "", "endpoint `URL` to advertise (default: opc.tcp://<listen address>)")
	folders := fs.Int("folders", 10, "`number` of folders in Load (-1: none)")
	variables := fs.Int("variables", 100, "`number` of variables per Load folder")
	rates := fs.String("rates", "1s", "generator periods of the Load folders, comma-separated, assigned in turn (e.g. 1s,100ms,10ms)")
	types := fs.String("types", "all", "built-in types of the Load variables, comma-separated (e.g. Double,Int32,String), or all")
	gens := fs.String("generators", "counter,sine,random,step", "generators of the Load variables, comma-separated")
	stagger := fs.Bool("stagger", false, "spread the ticks of the Load folders evenly over their period (default: all of a rate tick at once)")
	demoRate := fs.Duration("demo-rate", 100*time.Millisecond, "generator period of the Demo variables")
	alarmSources := fs.Int("alarm-sources", 3, "`number` of simulated alarm sources (-1: none)")
	alarmInterval := fs.Duration("alarm-interval", 2*time.Second, "period of the simulated alarm events (negative: only on demand)")
	policies := fs.String("policies", "default", "security policies: default (None and the non-deprecated ones), all (deprecated too),\nor a comma-separated list of Policy or Policy:Mode (None, Basic256Sha256:SignAndEncrypt, …)")
	users := fs.String("users", "", "user:password pairs, comma-separated (default $"+simUsersEnv+"; empty: no user name token)")
	noAnonymous := fs.Bool("no-anonymous", false, "refuse anonymous sessions")
	noX509 := fs.Bool("no-x509", false, "refuse X.509 user identity tokens")
	pkiDir := fs.String("pki", "", "certificate store `dir`ectory for the server certificate and the client trust list\n(default: an in-memory certificate, every client certificate accepted)")
	autoAccept := fs.Bool("auto-accept", false, "with -pki: trust unknown client certificates (development only)")
	maxSessions := fs.Int("max-sessions", server.DefaultMaxSessionCount, "most concurrent sessions")
	maxSubs := fs.Int("max-subscriptions", server.DefaultMaxSubscriptionCount, "most subscriptions")
	verbose := fs.Bool("v", false, "log at debug level")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: gateway sim [flags]

Runs the simulation OPC UA server: Demo (named test nodes: every built-in type,
arrays, matrices, bad and uncertain values, methods), Alarms (events), Load
(folders × variables with counter, sine, random and step generators), and the
Server object. Ctrl-C stops it.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return errFlagParse(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: sim takes no arguments, got %q", errUsage, fs.Args())
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	cfg := &server.Config{
		Address:              *addr,
		EndpointURL:          *url,
		DisableAnonymous:     *noAnonymous,
		DisableX509Users:     *noX509,
		MaxSessionCount:      *maxSessions,
		MaxSubscriptionCount: *maxSubs,
		Logger:               logger,
		Sim: server.SimConfig{
			DemoRate: *demoRate, Folders: *folders, Variables: *variables,
			AlarmSources: *alarmSources, AlarmInterval: *alarmInterval, Stagger: *stagger,
		},
	}
	if *port >= 0 {
		host, _, err := net.SplitHostPort(*addr)
		if err != nil {
			return fmt.Errorf("%w: -addr: %v", errUsage, err)
		}
		cfg.Address = net.JoinHostPort(host, strconv.Itoa(*port))
	}
	var err error
	if cfg.Sim.Rates, err = server.ParseRates(*rates); err != nil {
		return fmt.Errorf("%w: -rates: %v", errUsage, err)
	}
	if cfg.Sim.Types, err = server.ParseTypes(*types); err != nil {
		return fmt.Errorf("%w: -types: %v", errUsage, err)
	}
	if cfg.Sim.Generators, err = server.ParseGenerators(*gens); err != nil {
		return fmt.Errorf("%w: -generators: %v", errUsage, err)
	}
	if cfg.Policies, err = server.ParsePolicies(*policies); err != nil {
		return fmt.Errorf("%w: -policies: %v", errUsage, err)
	}
	u := *users
	if u == "" {
		u = os.Getenv(simUsersEnv)
	}
	if cfg.Users, err = server.ParseUsers(u); err != nil {
		return fmt.Errorf("%w: -users: %v", errUsage, err)
	}
	if *pkiDir != "" {
		store, err := pki.Open(*pkiDir, pki.Options{AutoAccept: *autoAccept, ApplicationName: server.DefaultApplicationName, Logger: logger})
		if err != nil {
			return err
		}
		if err := cfg.UseStore(store); err != nil {
			return err
		}
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}

	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintf(stdout, "gateway sim: listening on %s\n", srv.URL())
	for _, ep := range srv.Endpoints() {
		p, _ := uasc.PolicyByURI(ep.SecurityPolicyURI)
		fmt.Fprintf(stdout, "  endpoint %s %s\n", p.Name, strings.TrimPrefix(ep.SecurityMode.String(), "MessageSecurityMode"))
	}
	n := max(*folders, 0) * max(*variables, 0)
	fmt.Fprintf(stdout, "  %d Load variables (%s), Demo at %s, alarms at %s\n", n, server.LoadNode(0, 0), server.NodeDemo, server.NodeAlarms)
	<-ctx.Done()
	st := srv.Stats()
	fmt.Fprintf(stdout, "gateway sim: stopping: %d sessions, %d notifications sent\n", st.Sessions, st.Notifications)
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil
	}
	return ctx.Err()
}
