package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	log              string        // the gateway's store-and-forward log: on, off or both
	logFsync         bool          // its storeAndForward.fsync
	logCommit        time.Duration // its storeAndForward.commitInterval (0: the default)
	upstream         string        // upstreamSim or upstreamNodeOPCUA
	testpeer         string        // node-opcua's test peer directory
	findMax          bool
	maxItems         int
	retries          int
	maxP99           time.Duration
	idle             bool
	cpuProfile       string
	traceFile        string
	shape            string // the writer groups' messageShape
	fieldContent     string // the writer groups' fieldContent, comma-separated; "": the default
	samplingZero     bool   // -sampling 0 means 0 (node-opcua: every change)
}

// Upstream servers.
const (
	upstreamSim       = "sim"       // gateway sim: Load counters
	upstreamNodeOPCUA = "nodeopcua" // node-opcua's test peer: Demo.Counters
)

const usage = `Usage: gateway bench [flags]

The end-to-end benchmark: upstream OPC UA server → bridge → NATS → counting
subscriber, each in its own process on loopback. For each bridge (-bridge) it
prints one line of figures and one verdict line:

  bridge=gateway notifications_per_s=… gateway_cpu_us_per_notification=… p50_ms=…
    p99_ms=… lost=… rss_mb=… bytes_per_item=… (then details)
  verdict bridge=gateway sustained 10000/s
    (or: NOT sustained …, limit: the gateway; or: not measured …, limit: the
    harness / this machine, with the evidence: a subscriber or NATS that fell
    behind, a busy server, every core of the machine busy)

and with -bridge both a last line ratio_cpu=<baseline/gateway>, labelled
"baseline saturated" when the baseline did not sustain the rate. With -log
both the gateway runs twice, with its store-and-forward log (bridge=gateway)
and without it (bridge=gateway-nolog), and a last line gives the ratios
log_notifications_ratio, log_cpu_ratio and log_p99_ratio (with / without).

  notifications_per_s    new counter values the subscriber received per second
                         in the window (duplicates not counted)
  gateway_cpu_us_per_notification
                         CPU time (/proc: the threads' run time) of the bridge process
                         under test (the gopcua baseline on its line) per
                         notification
  p50_ms p99_ms          receive time − SourceTimestamp (the generator's tick),
                         so it includes the sampling delay (up to -sampling)
  sample_ up_ down_p50_ms/p99_ms
                         the latency's stages, from the timestamps in the
                         messages: tick → ServerTimestamp (sampled, sample_) →
                         DataSetMessage Timestamp (the gateway began writing,
                         up_) → received (down_); only the gateway's messages
                         carry them
  sub_queue_p50_ms sub_queue_p99_ms sub_backlog_peak
                         a message's wait for the subscriber's parser after it
                         was received (not in the latency), and the most
                         messages waiting at once
  lost                   counter values that never arrived (gaps), in the window
  rss_mb bytes_per_item  the bridge's RSS at the end of the window, and RSS/items:
                         the runtime's fixed memory included
  rss_peak_mb            the highest RSS sampled (every 0.5 s) in the window
  bridge_cores bridge_wakeups_per_s bridge_allocs_per_s bridge_publish_responses_per_s
                         the bridge's CPU in cores, its threads' context
                         switches per second, and (gateway) its allocations per
                         second without one /metrics scrape's and the
                         notification messages it received per second
  sub_cores <upstream>_cores nats_cores
                         CPU of the harness's processes in the window, in cores
  machine_busy_cores others_cores load1
                         the machine's busy cores (/proc/stat) in the window,
                         what was not the bench's, and the load average before
  offered_per_s          items / rate: what the server generates
  setup_s                from the bridge's start until every item arrived once

-find-max raises the offered rate in steps (-items × 1, 2, 5, 10, …, keeping
-rate) until the gateway does not sustain it (it loses values or its p99
exceeds -max-p99) or the harness becomes the limit, and prints the highest
sustained rate with the CPU per notification there and at a tenth of it;
with -bridge both, the ratio at the highest rate both sustained.

-upstream nodeopcua uses node-opcua's test peer (testpeer/, Node.js): -items
counters stepping every -rate (default 100 counters every 10 ms, publishing
100 ms: 10,000 changes/s), reported on change (sampling 0).

-idle measures the gateway at rest: one writer group of four fields
publishing every second whose values do not change, for 60 s by default.

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
	fs.IntVar(&o.items, "items", 100000, "`number` of monitored items (Load variables; node-opcua: counters, default 100)")
	fs.IntVar(&o.variables, "variables", 1000, "variables per Load folder (and DataSetWriter); items must be a multiple when larger")
	fs.StringVar(&o.typ, "type", "Int32", "built-in type of the counters: Int32 or Double")
	fs.DurationVar(&o.rate, "rate", 100*time.Millisecond, "generator period of the counters: items/rate notifications per second (node-opcua: default 10ms)")
	fs.DurationVar(&o.sampling, "sampling", 0, "sampling interval of the monitored items (default: rate/2, at most 20ms; node-opcua: 0, every change)")
	fs.DurationVar(&o.publishing, "publishing", 10*time.Millisecond, "publishing interval of the subscriptions (it adds up to itself to the latency; node-opcua: default 100ms)")
	fs.IntVar(&o.queue, "queue", 10, "queue size of the monitored items (node-opcua: at least two publishing intervals of changes)")
	fs.BoolVar(&o.stagger, "stagger", true, "spread the counters' ticks evenly over -rate, folder by folder (gateway sim -stagger);\n-stagger=false: all change at the same instant, a burst of -items every -rate")
	fs.IntVar(&o.perGroup, "per-group", 10000, "monitored items per writer group (gateway) or subscription (baseline)")
	fs.StringVar(&o.fields, "fields", "browse", "how the gateway configuration names its fields: browse (one browse selection per writer) or list (every node:\na large configuration, slow to load, whose memory shows in rss_mb)")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "length of the measured window (-idle: default 60s)")
	fs.DurationVar(&o.warmup, "warmup", 5*time.Second, "time between the arrival of every item and the window")
	fs.DurationVar(&o.setupTimeout, "setup-timeout", 3*time.Minute, "bound on the start of the processes and the arrival of every item")
	bridge := fs.String("bridge", "both", "bridge under test: gateway, baseline or both (node-opcua, -idle: gateway)")
	fs.StringVar(&o.upstream, "upstream", upstreamSim, "upstream OPC UA server: sim (gateway sim) or nodeopcua (testpeer/, needs Node.js)")
	fs.StringVar(&o.testpeer, "testpeer", "", "node-opcua test peer `dir`ectory (default: $UAGATE_TESTPEER_DIR, or testpeer/ of the repository)")
	fs.BoolVar(&o.findMax, "find-max", false, "raise the offered rate in steps until the gateway does not sustain it (see above)")
	fs.IntVar(&o.maxItems, "max-items", 2000000, "with -find-max: the last step's items")
	fs.IntVar(&o.retries, "retries", 2, "with -find-max: how often a step is measured again when other processes kept the machine's cores busy")
	fs.DurationVar(&o.maxP99, "max-p99", 0, "the latency bound of a sustained rate (p99, source → subscriber; default: 2 × publishing + sampling, at least 100ms)")
	fs.BoolVar(&o.idle, "idle", false, "measure the gateway at rest (see above)")
	fs.StringVar(&o.shape, "shape", config.ShapeSingle, "the gateway's message shape: single (a NetworkMessage per DataSetMessage, the default) or batched")
	fs.StringVar(&o.fieldContent, "field-content", "", "the gateway's fieldContent, comma-separated (default: statusCode,sourceTimestamp,serverTimestamp; sourceTimestamp writes what the baseline writes, without the latency's sample_ stage)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the gateway's CPU profile of the window to `file` (through UAGATE_DEBUG_PPROF)")
	fs.StringVar(&o.traceFile, "trace", "", "write the gateway's execution trace of the window's first 5 s to `file` (go tool trace; through UAGATE_DEBUG_PPROF)")
	fs.StringVar(&o.log, "log", "on", "the gateway's store-and-forward log (storeAndForward.enabled): on, off, or both (two runs)")
	fs.BoolVar(&o.logFsync, "log-fsync", true, "the log's storeAndForward.fsync: one fdatasync per commit")
	fs.DurationVar(&o.logCommit, "log-commit-interval", 0, "the log's storeAndForward.commitInterval (0: the gateway's default)")
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
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.presets(set, bridge)
	if err := o.resolve(*bridge); err != nil {
		return err
	}
	if o.upstream == upstreamNodeOPCUA {
		var err error
		if o.testpeer, err = findTestpeer(o.testpeer); err != nil {
			return err
		}
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
	fmt.Fprintf(stderr, "gateway bench: %s; sampling %v, publishing %v; window %v after %v warm-up; load average %.1f\n",
		o.describe(), o.sampling, o.publishing, o.duration, o.warmup, loadAverage())
	if o.findMax {
		return findMax(ctx, &o, &procs, stdout, stderr)
	}

	results := map[string]*result{}
	for _, b := range o.bridges {
		r, err := runBridge(ctx, &o, &procs, b, stderr)
		if err != nil {
			return fmt.Errorf("bench %s: %w", b, err)
		}
		results[b] = r
		fmt.Fprintln(stdout, r.line())
		fmt.Fprintln(stdout, r.verdictLine(r.judge(o.maxP99)))
		if o.idle {
			fmt.Fprintln(stdout, r.idleLine())
		}
		if r.profile != "" {
			fmt.Fprintf(stderr, "gateway bench: the gateway's CPU profile of the window: %s (go tool pprof -top %s %s)\n", r.profile, o.gatewayBin, r.profile)
		}
	}
	g, ok := results["gateway"]
	if !ok {
		g, ok = results["gateway-nolog"]
	}
	if ok {
		if b, ok := results["baseline"]; ok {
			fmt.Fprintln(stdout, ratioLine(g, b, o.maxP99))
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

// ratioLine is the CPU ratio of the baseline to the gateway at one rate,
// labelled when a bridge did not sustain it (the baseline's CPU per
// notification is then inflated by what it failed to deliver).
func ratioLine(g, b *result, maxP99 time.Duration) string {
	if g.cpuPerNotification() <= 0 {
		return "ratio_cpu=0 (the gateway's CPU per notification was not measured)"
	}
	ratio := b.cpuPerNotification() / g.cpuPerNotification()
	gv, bv := g.judge(maxP99), b.judge(maxP99)
	switch {
	case gv.sustained && bv.sustained:
		return fmt.Sprintf("ratio_cpu=%.1f", ratio)
	case gv.sustained:
		return fmt.Sprintf("ratio_cpu=%.1f (baseline saturated: %s; not a like-for-like ratio)", ratio, strings.Join(bv.problems, "; "))
	default:
		return fmt.Sprintf("ratio_cpu=%.1f (the gateway did not sustain the rate: %s; not a like-for-like ratio)", ratio, strings.Join(gv.problems, "; "))
	}
}

// idleLine states the gateway's cost at rest.
func (r *result) idleLine() string {
	return fmt.Sprintf("idle bridge=%s cpu_percent_of_core=%.3f wakeups_per_s=%.1f allocs_per_s=%.1f (allocations in the window %.0f, of which one /metrics scrape's %.0f)",
		r.bridge, 100*r.cores(r.bridgeP.cpu), float64(r.bridgeP.switches)/r.wall.Seconds(), r.allocsPerSecond(), r.gm[allocsMetric], r.scrapeAlloc)
}

// findMax runs the steps of -find-max: o.items × 1, 2, 5, 10, … up to
// o.maxItems, each bridge at each step until it does not sustain the rate
// (the baseline stops at its first unsustained step, the gateway ends the
// search), then the gateway at a tenth of its highest sustained rate when
// that was not a step.
func findMax(ctx context.Context, o *options, procs *procSet, stdout, stderr io.Writer) error {
	type step struct{ g, b *result }
	steps := map[int]*step{}
	var best, bothBest int // items of the highest sustained steps
	var stopped *result
	var stoppedV verdict
	baseline := contains(o.bridges, "baseline")
	run := func(items int, bridge string) (*result, verdict, error) {
		so := *o
		so.items = items
		for attempt := 0; ; attempt++ {
			r, err := runBridge(ctx, &so, procs, bridge, stderr)
			if err != nil {
				return nil, verdict{}, fmt.Errorf("bench %s at %d items: %w", bridge, items, err)
			}
			v := r.judge(o.maxP99)
			fmt.Fprintln(stdout, r.line())
			fmt.Fprintln(stdout, r.verdictLine(v))
			// On a shared machine another's burst of work can take the
			// cores for a while: a step lost to it is measured again.
			if v.sustained || v.limit != limitMachine || r.othersCores() < othersBusy || attempt >= o.retries {
				return r, v, nil
			}
			fmt.Fprintf(stderr, "gateway bench: other processes used %.2f cores: measuring %d items again\n", r.othersCores(), items)
		}
	}
	for _, items := range itemSteps(o.items, o.maxItems, o.variables) {
		st := &step{}
		steps[items] = st
		r, v, err := run(items, "gateway")
		if err != nil {
			return err
		}
		st.g = r
		if !v.sustained {
			stopped, stoppedV = r, v
			break
		}
		best = items
		if baseline {
			r, v, err := run(items, "baseline")
			if err != nil {
				return err
			}
			st.b = r
			if v.sustained {
				bothBest = items
			} else {
				baseline = false
			}
		}
	}
	if best == 0 {
		fmt.Fprintf(stdout, "max_sustained_per_s=0 limit=%s (the first step was not sustained: %s)\n",
			cmp.Or(stoppedV.limit, "gateway"), strings.Join(stoppedV.problems, "; "))
		return nil
	}
	g := steps[best].g
	tenth := best / 10
	if tenth > o.variables && tenth%o.variables != 0 {
		tenth -= tenth % o.variables
	}
	var low *result
	if tenth > 0 {
		if st, ok := steps[tenth]; ok && st.g != nil {
			low = st.g
		} else {
			var err error
			if low, _, err = run(tenth, "gateway"); err != nil {
				return err
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "max_sustained_per_s=%.0f gateway_cpu_us_per_notification=%.3f p99_ms=%.2f bridge_cores=%.3f",
		g.offered, g.cpuPerNotification(), g.b.P99ms, g.cores(g.bridgeP.cpu))
	if low != nil {
		fmt.Fprintf(&b, " tenth_per_s=%.0f tenth_gateway_cpu_us_per_notification=%.3f", low.offered, low.cpuPerNotification())
	}
	switch {
	case stopped == nil:
		fmt.Fprintf(&b, " limit=none (the last step, -max-items %d, was sustained)", o.maxItems)
	case stoppedV.limit == limitBridge:
		fmt.Fprintf(&b, " limit=gateway (at %.0f/s: %s)", stopped.offered, strings.Join(stoppedV.problems, "; "))
	default:
		fmt.Fprintf(&b, " limit=%s (at %.0f/s the %s was the limit, not the gateway: it sustained at least the rate above)", stoppedV.limit, stopped.offered, stoppedV.limit)
	}
	fmt.Fprintln(stdout, b.String())
	if contains(o.bridges, "baseline") {
		if bothBest > 0 {
			st := steps[bothBest]
			fmt.Fprintf(stdout, "ratio_cpu=%.1f at_per_s=%.0f (the highest rate both bridges sustained)\n",
				st.b.cpuPerNotification()/st.g.cpuPerNotification(), st.g.offered)
		} else {
			fmt.Fprintln(stdout, "ratio_cpu=na (the baseline sustained no step)")
		}
	}
	return nil
}

// itemSteps returns from, 2×, 5×, 10×, … up to last, each a multiple of
// variables once above it.
func itemSteps(from, last, variables int) []int {
	var out []int
	for base := from; base <= last; base *= 10 {
		for _, k := range []int{1, 2, 5} {
			n := base * k
			if n > last {
				break
			}
			if n > variables && n%variables != 0 {
				continue
			}
			out = append(out, n)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// presets sets the defaults that depend on -upstream and -idle for the
// flags not given (set).
func (o *options) presets(set map[string]bool, bridge *string) {
	def := func(name string, f func()) {
		if !set[name] {
			f()
		}
	}
	if o.upstream == upstreamNodeOPCUA {
		def("items", func() { o.items = 100 })
		def("rate", func() { o.rate = 10 * time.Millisecond })
		def("publishing", func() { o.publishing = 100 * time.Millisecond })
		def("bridge", func() { *bridge = "gateway" })
	}
	if o.idle {
		def("items", func() { o.items = 4 })
		def("rate", func() { o.rate = 24 * time.Hour })
		def("publishing", func() { o.publishing = time.Second })
		def("sampling", func() { o.sampling = 100 * time.Millisecond })
		def("duration", func() { o.duration = 60 * time.Second })
		def("bridge", func() { *bridge = "gateway" })
	}
	if o.upstream == upstreamNodeOPCUA && !set["queue"] && o.rate > 0 {
		// Every change is queued: room for two publishing intervals.
		o.queue = max(o.queue, int(2*o.publishing/o.rate))
	}
	if o.upstream == upstreamNodeOPCUA && !set["sampling"] {
		o.samplingZero = true
	}
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
	switch o.upstream {
	case upstreamSim:
	case upstreamNodeOPCUA:
		if contains(o.bridges, "baseline") {
			return fmt.Errorf("%w: -upstream nodeopcua: the baseline subscribes to the simulation server's nodes only (-bridge gateway)", ErrUsage)
		}
		if o.items > 10000 {
			return fmt.Errorf("%w: -upstream nodeopcua: at most 10,000 counters", ErrUsage)
		}
		if o.rate < time.Millisecond || o.rate%time.Millisecond != 0 {
			return fmt.Errorf("%w: -upstream nodeopcua: -rate must be whole milliseconds", ErrUsage)
		}
		o.variables = max(o.items, 1)
	default:
		return fmt.Errorf("%w: -upstream: %q is not sim or nodeopcua", ErrUsage, o.upstream)
	}
	if o.idle && (o.findMax || contains(o.bridges, "baseline")) {
		return fmt.Errorf("%w: -idle measures the gateway alone, without -find-max", ErrUsage)
	}
	if o.retries < 0 {
		return fmt.Errorf("%w: -retries must not be negative", ErrUsage)
	}
	if o.findMax && o.maxItems < o.items {
		return fmt.Errorf("%w: -max-items %d is below -items %d", ErrUsage, o.maxItems, o.items)
	}
	if o.items <= 0 || o.variables <= 0 {
		return fmt.Errorf("%w: -items and -variables must be positive", ErrUsage)
	}
	if o.items > 2_000_000 || o.maxItems > 2_000_000 {
		return fmt.Errorf("%w: -items, -max-items: at most 2,000,000 (the simulation server's limit)", ErrUsage)
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
	if o.rate <= 0 || o.publishing <= 0 || o.duration <= 0 || o.warmup < 0 || o.setupTimeout <= 0 || o.sampling < 0 || o.maxP99 < 0 {
		return fmt.Errorf("%w: -rate, -publishing, -duration and -setup-timeout must be positive, -warmup, -sampling and -max-p99 not negative", ErrUsage)
	}
	if o.sampling == 0 && !o.samplingZero {
		// Faster than the generator, so that no tick is skipped between two
		// samples (it would count as lost), and short, since it adds to the
		// latency.
		o.sampling = min(o.rate/2, 20*time.Millisecond)
	}
	if o.maxP99 == 0 {
		// A value waits up to a sampling interval to be sampled and up to a
		// publishing interval to be sent: the bound leaves as much again
		// for the rest of the way.
		o.maxP99 = max(2*o.publishing+o.sampling, 100*time.Millisecond)
	}
	if o.sampling >= o.rate {
		return fmt.Errorf("%w: -sampling %v must be shorter than -rate %v (a tick between two samples would be lost)", ErrUsage, o.sampling, o.rate)
	}
	if o.queue <= 0 || o.perGroup <= 0 {
		return fmt.Errorf("%w: -queue and -per-group must be positive", ErrUsage)
	}
	if o.shape != config.ShapeSingle && o.shape != config.ShapeBatched {
		return fmt.Errorf("%w: -shape: %q is not single or batched", ErrUsage, o.shape)
	}
	for _, m := range fieldContent(o.fieldContent) {
		if !slices.Contains(config.FieldContents, m) {
			return fmt.Errorf("%w: -field-content: %q is not one of %s", ErrUsage, m, strings.Join(config.FieldContents, ", "))
		}
	}
	if o.fields != "list" && o.fields != "browse" {
		return fmt.Errorf("%w: -fields: %q is not browse or list", ErrUsage, o.fields)
	}
	return nil
}

// describe says what is offered.
func (o *options) describe() string {
	if o.upstream == upstreamNodeOPCUA {
		return fmt.Sprintf("node-opcua: %d counters changing every %v: %.0f notifications/s offered", o.items, o.rate, o.offered())
	}
	ticks := "folder by folder, spread over the period"
	if !o.stagger {
		ticks = "all at the same instant"
	}
	if o.idle {
		return fmt.Sprintf("at rest: %d items that do not change", o.items)
	}
	return fmt.Sprintf("%d items (%d folders × %d) changing every %v (%s): %.0f notifications/s offered",
		o.items, o.folders(), o.perFolder(), o.rate, ticks, o.offered())
}

// perFolder and folders lay the items out in the simulation server's Load
// folders: one folder per DataSetWriter.
func (o *options) perFolder() int { return min(o.items, o.variables) }
func (o *options) folders() int   { return o.items / o.perFolder() }
func (o *options) offered() float64 {
	if o.idle {
		return 0
	}
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
// One endpoint, the upstream server; a writer group per foldersPerGroup
// folders, a writer (DataSetWriterId f+1, name Fnnn) per folder with
// DataValue fields named Vnnnnn (found by browsing the folder, or listed);
// one NATS sink, at most once (the default); nothing embedded; the HTTP
// listener on httpAddr (loopback) for /metrics; the store-and-forward log as
// log says.
func gatewayConfig(o *options, upURL, stateDir, httpAddr string, log bool) []byte {
	off := false
	c := config.Config{
		StoreAndForward: config.StoreAndForward{Enabled: &log, Fsync: &o.logFsync, CommitInterval: config.Duration(o.logCommit)},
		Gateway:         config.Gateway{PublisherID: "bench", StateDir: stateDir, ShutdownTimeout: config.Duration(5 * time.Second)},
		Embedded:        config.Embedded{Sim: config.EmbeddedPart{Enabled: &off}, MQTT: config.EmbeddedPart{Enabled: &off}, NATS: config.EmbeddedPart{Enabled: &off}},
		HTTP:            config.HTTP{Listen: httpAddr},
		Endpoints: []config.Endpoint{{Name: "up", URL: upURL,
			SecurityPolicy: "None", SecurityMode: "None", AutoAccept: true}},
		Sinks: config.Sinks{NATS: []config.NATSSink{{Name: "bench", URL: o.natsURL}}},
	}
	if httpAddr == "" {
		c.HTTP = config.HTTP{Disabled: true}
	}
	sampling := config.Duration(o.sampling)
	folder := func(f int) string { return fmt.Sprintf("ns=1;s=Load.F%03d", f) }
	if o.upstream == upstreamNodeOPCUA {
		folder = func(int) string { return "ns=1;s=Demo.Counters" }
	}
	per := o.foldersPerGroup()
	for g := 0; g*per < o.folders(); g++ {
		wg := config.WriterGroup{
			Name: fmt.Sprintf("g%03d", g), Endpoint: "up",
			PublishingInterval: config.Duration(o.publishing), FieldEncoding: config.FieldDataValue, MessageShape: o.shape,
			FieldContent: fieldContent(o.fieldContent),
			Nodes:        config.NodeDefaults{SamplingInterval: &sampling, QueueSize: uint32(o.queue)},
		}
		for f := g * per; f < min((g+1)*per, o.folders()); f++ {
			w := config.DataSetWriter{ID: uint16(f + 1), Name: fmt.Sprintf("F%03d", f)}
			if o.fields == "browse" {
				w.Browse = []config.BrowseSelect{{Root: folder(f), Depth: 1, MaxNodes: o.perFolder()}}
			} else {
				w.Fields = make([]config.Field, o.perFolder())
				for v := range w.Fields {
					w.Fields[v] = config.Field{Name: fmt.Sprintf("V%05d", v), Node: fmt.Sprintf("%s.V%05d", folder(f), v)}
				}
			}
			wg.Writers = append(wg.Writers, w)
		}
		c.WriterGroups = append(c.WriterGroups, wg)
	}
	return []byte(fmt.Sprintf("# gateway bench: %d items in %d folders\n%s", o.items, o.folders(), c.String()))
}

// fieldContent splits -field-content.
func fieldContent(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
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
	p, err := procs.start("nats-server", dir, []string{bin, "-c", conf}, watchStderr, nil)
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
