package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/uagate/gateway/bridge/config"
)

// ErrUsage marks errors in the command line (cmd/gateway exits with code 2).
// Its text is "usage", as cmd/gateway's own.
var ErrUsage = errors.New("usage")

// parseFlags parses args; -h is flag.ErrHelp, any other error a usage error
// (flag has printed the details already).
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrUsage, err)
}

// options are the flags of gateway bench.
type options struct {
	items, variables int
	typ              string
	rate             time.Duration
	sampling         time.Duration
	publishing       time.Duration
	queue            int
	perGroup         int
	fields           string // auto, list or browse
	duration, warmup time.Duration
	setupTimeout     time.Duration
	bridges          []string
	natsURL          string
	gatewayBin       string
	baselineBin      string
	workDir          string
	keep             bool
	stagger          bool
	log              string // the gateway's store-and-forward log: on, off or both
	logFsync         bool   // its storeAndForward.fsync
}

const usage = `Usage: gateway bench [flags]

The end-to-end benchmark: simulation server → bridge → NATS → counting
subscriber, each in its own process on loopback. For each bridge (-bridge) it
prints one line:

  bridge=gateway notifications_per_s=… gateway_cpu_us_per_notification=… p50_ms=…
    p99_ms=… lost=… rss_mb=… bytes_per_item=… (then details)

and with -bridge both a last line ratio_cpu=<baseline/gateway>. With -log
both the gateway runs twice, with its store-and-forward log (bridge=gateway)
and without it (bridge=gateway-nolog), and a last line gives the ratios
log_notifications_ratio, log_cpu_ratio and log_p99_ratio (with / without).

  notifications_per_s    new counter values the subscriber received per second
                         in the window (duplicates not counted)
  gateway_cpu_us_per_notification
                         CPU time (user+system) of the bridge process under test
                         (the gopcua baseline on its line) per notification
  p50_ms p99_ms          receive time − SourceTimestamp (the generator's tick),
                         so it includes the sampling delay (up to -sampling)
  sample_ up_ down_p50_ms/p99_ms
                         the latency's stages, from the timestamps in the
                         messages: tick → ServerTimestamp (sampled, sample_) →
                         DataSetMessage Timestamp (the gateway began writing,
                         up_) → received (down_); only the gateway's messages
                         carry them
  sub_queue_p50_ms sub_queue_p99_ms
                         a message's wait for the subscriber's parser after it
                         was received (not in the latency)
  lost                   counter values that never arrived (gaps), in the window
  rss_mb bytes_per_item  the bridge's RSS at the end of the window, and RSS/items:
                         the runtime's fixed memory included
  rss_peak_mb            the highest RSS sampled (every 0.5 s) in the window: the
                         heap grows between collections (GOGC), so the end of the
                         window is one point of a sawtooth
  bridge_cores sub_cores sim_cores nats_cores
                         CPU of each process in the window, in cores; the
                         subscriber must stay well below one core
  offered_per_s          items / rate: what the server generates
  setup_s                from the bridge's start until every item arrived once

The baseline is internal/bench/gopcuabridge (gopcua v0.8.0 → encoding/json →
nats.go), built with the go tool unless -baseline-bin is given.

Flags:
`

// Run is `gateway bench`: it parses args (see usage), runs the benchmark of
// each bridge and prints a line per bridge on stdout, progress on stderr.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.IntVar(&o.items, "items", 100000, "`number` of monitored items (Load variables)")
	fs.IntVar(&o.variables, "variables", 1000, "variables per Load folder (and DataSetWriter); items must be a multiple when larger")
	fs.StringVar(&o.typ, "type", "Int32", "built-in type of the counters: Int32 or Double")
	fs.DurationVar(&o.rate, "rate", 100*time.Millisecond, "generator period of the counters: items/rate notifications per second")
	fs.DurationVar(&o.sampling, "sampling", 0, "sampling interval of the monitored items (default: rate/2, at most 20ms)")
	fs.DurationVar(&o.publishing, "publishing", 10*time.Millisecond, "publishing interval of the subscriptions (it adds up to itself to the latency)")
	fs.IntVar(&o.queue, "queue", 10, "queue size of the monitored items")
	fs.BoolVar(&o.stagger, "stagger", true, "spread the counters' ticks evenly over -rate, folder by folder (gateway sim -stagger);\n-stagger=false: all change at the same instant, a burst of -items every -rate")
	fs.IntVar(&o.perGroup, "per-group", 10000, "monitored items per writer group (gateway) or subscription (baseline)")
	fs.StringVar(&o.fields, "fields", "browse", "how the gateway configuration names its fields: browse (one browse selection per writer) or list (every node:\na large configuration, slow to load, whose memory shows in rss_mb)")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "length of the measured window")
	fs.DurationVar(&o.warmup, "warmup", 5*time.Second, "time between the arrival of every item and the window")
	fs.DurationVar(&o.setupTimeout, "setup-timeout", 3*time.Minute, "bound on the start of the processes and the arrival of every item")
	bridge := fs.String("bridge", "both", "bridge under test: gateway, baseline or both")
	fs.StringVar(&o.log, "log", "on", "the gateway's store-and-forward log (storeAndForward.enabled): on, off, or both (two runs)")
	fs.BoolVar(&o.logFsync, "log-fsync", true, "the log's storeAndForward.fsync: one fdatasync per commit")
	fs.StringVar(&o.natsURL, "nats", "", "NATS server `URL` (default: start nats-server on a free loopback port)")
	fs.StringVar(&o.gatewayBin, "gateway-bin", "", "gateway binary for the sim, the bridge and the subscriber (default: this one)")
	fs.StringVar(&o.baselineBin, "baseline-bin", "", "gopcuabridge binary (default: go build it)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (configurations and logs) and print its path")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: bench takes no arguments, got %q", ErrUsage, fs.Args())
	}
	if err := o.resolve(*bridge); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "gateway-bench-")
	if err != nil {
		return err
	}
	o.workDir = dir
	if o.keep {
		fmt.Fprintln(stderr, "gateway bench: work directory", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	var procs procSet
	defer procs.stopAll()

	if o.natsURL == "" {
		_, url, err := startNATSServer(ctx, &procs, dir)
		if err != nil {
			return err
		}
		o.natsURL = url
	}
	if o.gatewayBin == "" {
		if o.gatewayBin, err = os.Executable(); err != nil {
			return err
		}
	}
	if o.baselineBin == "" && contains(o.bridges, "baseline") {
		fmt.Fprintln(stderr, "gateway bench: building the gopcua baseline")
		if o.baselineBin, err = buildBaseline(ctx, dir); err != nil {
			return err
		}
	}
	ticks := "folder by folder, spread over the period"
	if !o.stagger {
		ticks = "all at the same instant"
	}
	fmt.Fprintf(stderr, "gateway bench: %d items (%d folders × %d) changing every %v (%s): %.0f notifications/s offered; sampling %v, publishing %v; window %v after %v warm-up\n",
		o.items, o.folders(), o.perFolder(), o.rate, ticks, o.offered(), o.sampling, o.publishing, o.duration, o.warmup)

	results := map[string]result{}
	for _, b := range o.bridges {
		r, err := runBridge(ctx, &o, &procs, b, stderr)
		if err != nil {
			return fmt.Errorf("bench %s: %w", b, err)
		}
		results[b] = r
		fmt.Fprintln(stdout, r.line())
		if c := r.subCPU.Seconds() / r.wall.Seconds(); c > 0.8 {
			fmt.Fprintf(stderr, "gateway bench: warning: the subscriber used %.2f cores: it may have been the bottleneck\n", c)
		}
	}
	g, ok := results["gateway"]
	if !ok {
		g, ok = results["gateway-nolog"]
	}
	if ok {
		if b, ok := results["baseline"]; ok && g.cpuPerNotification() > 0 {
			fmt.Fprintf(stdout, "ratio_cpu=%.1f\n", b.cpuPerNotification()/g.cpuPerNotification())
		}
	}
	if on, ok := results["gateway"]; ok {
		if off, ok := results["gateway-nolog"]; ok && off.notifications() > 0 && off.cpuPerNotification() > 0 && off.b.P99ms > 0 {
			fmt.Fprintf(stdout, "log_notifications_ratio=%.2f log_cpu_ratio=%.2f log_p99_ratio=%.2f\n",
				float64(on.notifications())/on.window.Seconds()/(float64(off.notifications())/off.window.Seconds()),
				on.cpuPerNotification()/off.cpuPerNotification(), on.b.P99ms/off.b.P99ms)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (o *options) resolve(bridge string) error {
	var gateways []string
	switch o.log {
	case "on", "":
		gateways = []string{"gateway"}
	case "off":
		gateways = []string{"gateway-nolog"}
	case "both":
		gateways = []string{"gateway", "gateway-nolog"}
	default:
		return fmt.Errorf("%w: -log: %q is not on, off or both", ErrUsage, o.log)
	}
	switch bridge {
	case "both":
		o.bridges = append(gateways, "baseline")
	case "gateway":
		o.bridges = gateways
	case "baseline":
		o.bridges = []string{bridge}
	default:
		return fmt.Errorf("%w: -bridge: %q is not gateway, baseline or both", ErrUsage, bridge)
	}
	if o.items <= 0 || o.variables <= 0 {
		return fmt.Errorf("%w: -items and -variables must be positive", ErrUsage)
	}
	if o.items > 2_000_000 {
		return fmt.Errorf("%w: -items: at most 2,000,000 (the simulation server's limit)", ErrUsage)
	}
	if o.items > o.variables && o.items%o.variables != 0 {
		return fmt.Errorf("%w: -items %d is not a multiple of -variables %d", ErrUsage, o.items, o.variables)
	}
	if o.perFolder() > 99999 {
		return fmt.Errorf("%w: -variables: at most 99,999 (field names V00000…)", ErrUsage)
	}
	if o.folders() > 65535 {
		return fmt.Errorf("%w: %d folders: at most 65,535 (DataSetWriterIds), raise -variables", ErrUsage, o.folders())
	}
	if o.typ != "Int32" && o.typ != "Double" {
		return fmt.Errorf("%w: -type: %q is not Int32 or Double", ErrUsage, o.typ)
	}
	if o.rate <= 0 || o.publishing <= 0 || o.duration <= 0 || o.warmup < 0 || o.setupTimeout <= 0 || o.sampling < 0 {
		return fmt.Errorf("%w: -rate, -publishing, -duration and -setup-timeout must be positive, -warmup and -sampling not negative", ErrUsage)
	}
	if o.sampling == 0 {
		// Faster than the generator, so that no tick is skipped between two
		// samples (it would count as lost), and short, since it adds to the
		// latency.
		o.sampling = min(o.rate/2, 20*time.Millisecond)
	}
	if o.sampling >= o.rate {
		return fmt.Errorf("%w: -sampling %v must be shorter than -rate %v (a tick between two samples would be lost)", ErrUsage, o.sampling, o.rate)
	}
	if o.queue <= 0 || o.perGroup <= 0 {
		return fmt.Errorf("%w: -queue and -per-group must be positive", ErrUsage)
	}
	if o.fields != "list" && o.fields != "browse" {
		return fmt.Errorf("%w: -fields: %q is not browse or list", ErrUsage, o.fields)
	}
	return nil
}

// perFolder and folders lay the items out in the simulation server's Load
// folders: one folder per DataSetWriter.
func (o *options) perFolder() int { return min(o.items, o.variables) }
func (o *options) folders() int   { return o.items / o.perFolder() }
func (o *options) offered() float64 {
	return float64(o.items) / o.rate.Seconds()
}

// foldersPerGroup is how many Load folders (writers) one writer group or
// subscription gets.
func (o *options) foldersPerGroup() int { return max(1, o.perGroup/o.perFolder()) }

// simCommand is the simulation server's command line: counters only, no
// alarms, security None.
func simCommand(o *options) []string {
	cmd := []string{o.gatewayBin, "sim", "-addr", "127.0.0.1:0",
		"-folders", strconv.Itoa(o.folders()), "-variables", strconv.Itoa(o.perFolder()),
		"-rates", o.rate.String(), "-types", o.typ, "-generators", "counter",
		"-alarm-sources", "-1", "-policies", "None"}
	if o.stagger {
		cmd = append(cmd, "-stagger")
	}
	return cmd
}

// gatewayCommand is the command line of the gateway under test.
func gatewayCommand(o *options, config string) []string {
	return []string{o.gatewayBin, "run", "-config", config}
}

// baselineCommand is the command line of the gopcua baseline.
func baselineCommand(o *options, simURL string) []string {
	return []string{o.baselineBin, "-endpoint", simURL, "-nats", o.natsURL,
		"-items", strconv.Itoa(o.items), "-variables", strconv.Itoa(o.perFolder()),
		"-interval", o.publishing.String(), "-sampling", o.sampling.String(),
		"-queue", strconv.Itoa(o.queue), "-per-subscription", strconv.Itoa(o.foldersPerGroup() * o.perFolder())}
}

// subscriberCommand is the counting subscriber's command line.
func subscriberCommand(o *options) []string {
	return []string{o.gatewayBin, "bench-subscriber", "-nats", o.natsURL, "-subject", "opcua.json.data.>",
		"-items", strconv.Itoa(o.items), "-variables", strconv.Itoa(o.perFolder())}
}

// gatewayConfig is the configuration of the gateway under test, as YAML.
// One endpoint, the simulation server; a writer group per foldersPerGroup
// folders, a writer (DataSetWriterId f+1, name Fnnn) per folder with
// DataValue fields named Vnnnnn (found by browsing the folder, or listed);
// one NATS sink, at most once (the default); nothing embedded, no HTTP; the
// store-and-forward log as log says.
func gatewayConfig(o *options, simURL, stateDir string, log bool) []byte {
	off := false
	c := config.Config{
		StoreAndForward: config.StoreAndForward{Enabled: &log, Fsync: &o.logFsync},
		Gateway:         config.Gateway{PublisherID: "bench", StateDir: stateDir, ShutdownTimeout: config.Duration(5 * time.Second)},
		Embedded:        config.Embedded{Sim: config.EmbeddedPart{Enabled: &off}, MQTT: config.EmbeddedPart{Enabled: &off}, NATS: config.EmbeddedPart{Enabled: &off}},
		HTTP:            config.HTTP{Disabled: true},
		Endpoints: []config.Endpoint{{Name: "sim", URL: simURL,
			SecurityPolicy: "None", SecurityMode: "None", AutoAccept: true}},
		Sinks: config.Sinks{NATS: []config.NATSSink{{Name: "bench", URL: o.natsURL}}},
	}
	sampling := config.Duration(o.sampling)
	per := o.foldersPerGroup()
	for g := 0; g*per < o.folders(); g++ {
		wg := config.WriterGroup{
			Name: fmt.Sprintf("g%03d", g), Endpoint: "sim",
			PublishingInterval: config.Duration(o.publishing), FieldEncoding: config.FieldDataValue,
			Nodes: config.NodeDefaults{SamplingInterval: &sampling, QueueSize: uint32(o.queue)},
		}
		for f := g * per; f < min((g+1)*per, o.folders()); f++ {
			w := config.DataSetWriter{ID: uint16(f + 1), Name: fmt.Sprintf("F%03d", f)}
			if o.fields == "browse" {
				w.Browse = []config.BrowseSelect{{Root: fmt.Sprintf("ns=1;s=Load.F%03d", f), Depth: 1, MaxNodes: o.perFolder()}}
			} else {
				w.Fields = make([]config.Field, o.perFolder())
				for v := range w.Fields {
					w.Fields[v] = config.Field{Name: fmt.Sprintf("V%05d", v), Node: fmt.Sprintf("ns=1;s=Load.F%03d.V%05d", f, v)}
				}
			}
			wg.Writers = append(wg.Writers, w)
		}
		c.WriterGroups = append(c.WriterGroups, wg)
	}
	return []byte(fmt.Sprintf("# gateway bench: %d items in %d folders\n%s", o.items, o.folders(), c.String()))
}

// buildBaseline builds the gopcua baseline into dir with the go tool (from
// the module this binary was built from: the current directory must be in
// it).
func buildBaseline(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "gopcuabridge")
	bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(bctx, "go", "build", "-o", out, "github.com/uagate/gateway/internal/bench/gopcuabridge")
	var msg bytes.Buffer
	cmd.Stdout, cmd.Stderr = &msg, &msg
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the baseline (run from the repository, or give -baseline-bin): %w\n%s", err, msg.String())
	}
	return out, nil
}

// startNATSServer starts Debian's nats-server on a free loopback port and
// returns its URL. Its max_pending is raised from 64 MB to 512 MB: every
// counter of a rate ticks at the same instant, and the subscriber of a burst
// of a million notifications must not be cut off as a slow consumer.
func startNATSServer(ctx context.Context, procs *procSet, dir string) (*proc, string, error) {
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		// Debian puts it in /usr/sbin, which a user's PATH may lack.
		bin = "/usr/sbin/nats-server"
		if _, serr := os.Stat(bin); serr != nil {
			return nil, "", fmt.Errorf("no nats-server on PATH nor in /usr/sbin (apt-get install nats-server) and no -nats URL: %w", err)
		}
	}
	conf := filepath.Join(dir, "nats-server.conf")
	if err := os.WriteFile(conf, []byte("host: 127.0.0.1\nport: -1\nmax_pending: 536870912\n"), 0o600); err != nil {
		return nil, "", err
	}
	p, err := procs.start("nats-server", dir, []string{bin, "-c", conf}, watchStderr)
	if err != nil {
		return nil, "", err
	}
	line, err := p.waitLine(ctx, 30*time.Second, "Listening for client connections on ")
	if err != nil {
		return nil, "", err
	}
	_, addr, _ := strings.Cut(line, "Listening for client connections on ")
	return p, "nats://" + strings.TrimSpace(addr), nil
}

// result is the measurement of one bridge.
type result struct {
	bridge            string
	items             int
	offered           float64
	window            time.Duration
	a, b              subStats
	bridgeCPU, subCPU time.Duration
	simCPU, natsCPU   time.Duration
	natsMeasured      bool
	rssBytes          int64
	rssPeak           int64 // the highest RSS sampled in the window
	wall              time.Duration
	setup             time.Duration
}

func (r result) notifications() int64 { return r.b.New - r.a.New }

// cpuPerNotification is the bridge's CPU time per notification, µs.
func (r result) cpuPerNotification() float64 {
	n := r.notifications()
	if n <= 0 {
		return 0
	}
	return float64(r.bridgeCPU.Microseconds()) / float64(n)
}

func (r result) line() string {
	cores := func(d time.Duration) float64 { return d.Seconds() / r.wall.Seconds() }
	n := r.notifications()
	var b strings.Builder
	fmt.Fprintf(&b, "bridge=%s notifications_per_s=%.0f gateway_cpu_us_per_notification=%.3f p50_ms=%.2f p99_ms=%.2f lost=%d rss_mb=%.1f bytes_per_item=%.0f",
		r.bridge, float64(n)/r.window.Seconds(), r.cpuPerNotification(), r.b.P50ms, r.b.P99ms,
		r.b.Lost-r.a.Lost, float64(r.rssBytes)/(1<<20), float64(r.rssBytes)/float64(r.items))
	fmt.Fprintf(&b, " rss_peak_mb=%.1f", float64(max(r.rssPeak, r.rssBytes))/(1<<20))
	fmt.Fprintf(&b, " items=%d offered_per_s=%.0f window_s=%.1f notifications=%d dup=%d repeat=%d unknown=%d bad=%d sub_dropped=%d max_ms=%.1f bridge_cores=%.2f sub_cores=%.2f sub_cpu_us_per_notification=%.3f sim_cores=%.2f",
		r.items, r.offered, r.window.Seconds(), n, r.b.Dup-r.a.Dup, r.b.Repeat-r.a.Repeat, r.b.Unknown-r.a.Unknown, r.b.Bad-r.a.Bad,
		r.b.Dropped-r.a.Dropped, r.b.MaxMs, cores(r.bridgeCPU), cores(r.subCPU),
		float64(r.subCPU.Microseconds())/max(float64(n), 1), cores(r.simCPU))
	if r.natsMeasured {
		fmt.Fprintf(&b, " nats_cores=%.2f", cores(r.natsCPU))
	}
	st := r.b.Stages
	if st.SampleP99 != 0 || st.UpP99 != 0 || st.DownP99 != 0 {
		// Only messages with every timestamp (the gateway's) have stages.
		fmt.Fprintf(&b, " sample_p50_ms=%.1f sample_p99_ms=%.1f up_p50_ms=%.1f up_p99_ms=%.1f down_p50_ms=%.1f down_p99_ms=%.1f",
			st.SampleP50, st.SampleP99, st.UpP50, st.UpP99, st.DownP50, st.DownP99)
	}
	fmt.Fprintf(&b, " sub_queue_p50_ms=%.1f sub_queue_p99_ms=%.1f", st.QueueP50, st.QueueP99)
	fmt.Fprintf(&b, " msgs=%d bytes_per_msg=%.0f setup_s=%.1f", r.b.Msgs-r.a.Msgs,
		float64(r.b.Bytes-r.a.Bytes)/max(float64(r.b.Msgs-r.a.Msgs), 1), r.setup.Seconds())
	return b.String()
}

// runBridge measures one bridge with a simulation server and a
// subscriber of its own (a fresh server: the previous bridge's session must
// not load it), and stops them before it returns.
func runBridge(ctx context.Context, o *options, procs *procSet, bridge string, stderr io.Writer) (result, error) {
	r := result{bridge: bridge, items: o.items, offered: o.offered()}
	dir := filepath.Join(o.workDir, bridge)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return r, err
	}
	setupCtx, cancel := context.WithTimeout(ctx, o.setupTimeout)
	defer cancel()

	sim, err := procs.start("sim", dir, simCommand(o), watchStdout)
	if err != nil {
		return r, err
	}
	defer sim.stop()
	line, err := sim.waitLine(setupCtx, o.setupTimeout, "gateway sim: listening on ")
	if err != nil {
		return r, err
	}
	simURL := strings.TrimSpace(strings.TrimPrefix(line, "gateway sim: listening on "))

	sub, err := procs.start("subscriber", dir, subscriberCommand(o), watchStdout|withStdin)
	if err != nil {
		return r, err
	}
	defer sub.stop()
	if _, err := sub.waitLine(setupCtx, 30*time.Second, "READY"); err != nil {
		return r, err
	}

	var argv []string
	switch bridge {
	case "gateway", "gateway-nolog":
		cfg := filepath.Join(dir, "gateway.yaml")
		if err := os.WriteFile(cfg, gatewayConfig(o, simURL, filepath.Join(dir, "state"), bridge == "gateway"), 0o600); err != nil {
			return r, err
		}
		argv = gatewayCommand(o, cfg)
	case "baseline":
		argv = baselineCommand(o, simURL)
	}
	setupStart := time.Now()
	br, err := procs.start(bridge, dir, argv, 0)
	if err != nil {
		return r, err
	}
	defer br.stop()

	// Every item must have arrived once before the warm-up starts.
	fmt.Fprintf(stderr, "gateway bench: %s: waiting for all %d items\n", bridge, o.items)
	for {
		st, err := sub.query(setupCtx, "stats")
		if err != nil {
			return r, fmt.Errorf("waiting for every item: %w%s", err, procs.tails(br, sim, sub))
		}
		if st.Seen >= int64(o.items) {
			break
		}
		if err := br.alive(); err != nil {
			return r, fmt.Errorf("%s exited: %w%s", bridge, err, procs.tails(br))
		}
		if err := sleepCtx(setupCtx, 250*time.Millisecond); err != nil {
			return r, fmt.Errorf("%d of %d items arrived within -setup-timeout %v: %w%s", st.Seen, o.items, o.setupTimeout, err, procs.tails(br, sim, sub))
		}
	}
	r.setup = time.Since(setupStart)
	if err := sleepCtx(ctx, o.warmup); err != nil {
		return r, err
	}

	measured := []*proc{br, sub, sim}
	if n := procs.byName("nats-server"); n != nil {
		measured = append(measured, n)
		r.natsMeasured = true
	}
	cpuA, err := procCPUs(measured)
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	if r.a, err = sub.query(ctx, "window"); err != nil {
		return r, err
	}
	// The RSS is sampled through the window: the collector lets the heap
	// grow between collections, so the end is one point of a sawtooth.
	end := t0.Add(o.duration)
	for d := time.Until(end); d > 0; d = time.Until(end) {
		if err := sleepCtx(ctx, min(d, 500*time.Millisecond)); err != nil {
			return r, err
		}
		if v, err := procRSS(br.pid()); err == nil {
			r.rssPeak = max(r.rssPeak, v)
		}
	}
	if r.b, err = sub.query(ctx, "window"); err != nil {
		return r, err
	}
	cpuB, err := procCPUs(measured)
	r.wall = time.Since(t0)
	if err != nil {
		return r, err
	}
	if err := br.alive(); err != nil {
		return r, fmt.Errorf("%s exited during the window: %w%s", bridge, err, procs.tails(br))
	}
	r.window = time.Duration(r.b.TimeNs - r.a.TimeNs)
	r.bridgeCPU, r.subCPU, r.simCPU = cpuB[0]-cpuA[0], cpuB[1]-cpuA[1], cpuB[2]-cpuA[2]
	if r.natsMeasured {
		r.natsCPU = cpuB[3] - cpuA[3]
	}
	if r.rssBytes, err = procRSS(br.pid()); err != nil {
		return r, err
	}
	return r, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// procCPUs returns the CPU time (user + system, all threads) of processes.
func procCPUs(ps []*proc) ([]time.Duration, error) {
	out := make([]time.Duration, len(ps))
	for i, p := range ps {
		d, err := procCPU(p.pid())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		out[i] = d
	}
	return out, nil
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// procCPU reads utime + stime of a process from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(u+s) * clockTick, nil
}

// procRSS reads VmRSS of a process from /proc/<pid>/status, bytes.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: VmRSS %q: %w", pid, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// Child processes.

// proc flags.
const (
	watchStdout = 1 << iota // stdout lines to lines (else to the log)
	watchStderr             // stderr lines to lines (else to the log)
	withStdin               // a pipe to the child's stdin
)

// procSet are the children of one bench run; stopAll ends those still
// running, in reverse order of their start.
type procSet struct {
	mu    sync.Mutex
	procs []*proc
}

// proc is one child process. Its output goes to <dir>/<name>.log; the
// watched stream's lines also go to lines (dropped when nobody reads them
// and 256 are pending), which is closed at the end of the stream.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	stdin   io.WriteCloser
	lines   chan string
	readers sync.WaitGroup
	done    chan struct{} // closed when the process was waited for
	err     error         // the exit status, after done
	once    sync.Once
}

func (ps *procSet) start(name, dir string, argv []string, flags int) (*proc, error) {
	logf, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "$ %s\n", strings.Join(argv, " "))
	p := &proc{name: name, logPath: logf.Name(), lines: make(chan string, 256), done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	// The child dies with us even if we are killed outright.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	var watchR, watchW *os.File
	if flags&(watchStdout|watchStderr) != 0 {
		if watchR, watchW, err = os.Pipe(); err != nil {
			logf.Close()
			return nil, err
		}
		if flags&watchStdout != 0 {
			p.cmd.Stdout = watchW
		} else {
			p.cmd.Stderr = watchW
		}
	} else {
		close(p.lines)
	}
	if flags&withStdin != 0 {
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			logf.Close()
			return nil, err
		}
	}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		if watchR != nil {
			watchR.Close()
			watchW.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	if watchW != nil {
		watchW.Close() // the child holds its end
		p.readers.Add(1)
		go func() {
			defer p.readers.Done()
			defer close(p.lines)
			defer watchR.Close()
			sc := bufio.NewScanner(watchR)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				if !strings.HasPrefix(sc.Text(), "{") { // not the subscriber's answers
					fmt.Fprintln(logf, sc.Text())
				}
				select {
				case p.lines <- sc.Text():
				default:
				}
			}
		}()
	}
	go func() {
		p.err = p.cmd.Wait()
		p.readers.Wait()
		logf.Close()
		close(p.done)
	}()
	ps.mu.Lock()
	ps.procs = append(ps.procs, p)
	ps.mu.Unlock()
	return p, nil
}

func (ps *procSet) byName(name string) *proc {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

func (ps *procSet) stopAll() {
	ps.mu.Lock()
	list := append([]*proc(nil), ps.procs...)
	ps.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		list[i].stop()
	}
}

// tails returns the ends of the logs of ps, for an error message.
func (ps *procSet) tails(list ...*proc) string {
	var b strings.Builder
	for _, p := range list {
		data, _ := os.ReadFile(p.logPath)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Fprintf(&b, "\n--- %s (%s):\n%s", p.name, p.logPath, strings.Join(lines, "\n"))
	}
	return b.String()
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// alive returns an error when the process has exited.
func (p *proc) alive() error {
	select {
	case <-p.done:
		if p.err == nil {
			return errors.New("exit status 0")
		}
		return p.err
	default:
		return nil
	}
}

// waitLine waits for a line of the watched stream that contains want.
func (p *proc) waitLine(ctx context.Context, timeout time.Duration, want string) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.done
				return "", fmt.Errorf("%s ended (%v) before %q%s", p.name, p.err, want, (&procSet{}).tails(p))
			}
			if strings.Contains(l, want) {
				return l, nil
			}
		case <-t.C:
			return "", fmt.Errorf("%s: no %q within %v%s", p.name, want, timeout, (&procSet{}).tails(p))
		case <-ctx.Done():
			return "", fmt.Errorf("%s: waiting for %q: %w", p.name, want, ctx.Err())
		}
	}
}

// query sends a command to the subscriber and reads its JSON answer.
func (p *proc) query(ctx context.Context, cmd string) (subStats, error) {
	var st subStats
	if _, err := io.WriteString(p.stdin, cmd+"\n"); err != nil {
		return st, fmt.Errorf("%s: %w", p.name, err)
	}
	l, err := p.waitLine(ctx, 30*time.Second, "{")
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal([]byte(l), &st); err != nil {
		return st, fmt.Errorf("%s: %q: %w", p.name, l, err)
	}
	return st, nil
}

// stop ends the process: SIGTERM (stdin closed too), SIGKILL after 10 s.
func (p *proc) stop() {
	p.once.Do(func() {
		if p.stdin != nil {
			p.stdin.Close()
		}
		select {
		case <-p.done:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(10 * time.Second)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}
