package bench

import (
	"fmt"
	"strings"
	"time"
)

// result is the measurement of one bridge at one offered rate.
type result struct {
	bridge   string
	upstream string // "sim" or "nodeopcua"
	items    int
	offered  float64
	window   time.Duration // the subscriber's clock
	wall     time.Duration // the bench's clock, over which CPU is divided
	a, b     subStats
	// The processes' use of the window: the bridge, the subscriber, the
	// upstream server, NATS (when the bench started it).
	bridgeP, subP, upP, natsP procSample
	natsMeasured              bool
	machine                   machineSample // busy CPU time of the machine in the window
	load1                     float64       // load average before the window
	natsSlow                  int           // slow-consumer reports of nats-server in the window
	// The gateway's own counters over the window (nil for the baseline) and
	// the allocations of one /metrics scrape, taken apart.
	gm          metrics
	scrapeAlloc float64
	rssBytes    int64
	rssPeak     int64 // the highest RSS sampled in the window
	setup       time.Duration
	profile     string // where the bridge's CPU profile was written
}

func (r *result) notifications() int64 { return r.b.New - r.a.New }
func (r *result) lost() int64          { return r.b.Lost - r.a.Lost }
func (r *result) dup() int64           { return r.b.Dup - r.a.Dup }

// rate is the notifications per second the subscriber received.
func (r *result) rate() float64 { return float64(r.notifications()) / r.window.Seconds() }

// cores is d in cores of the window.
func (r *result) cores(d time.Duration) float64 { return d.Seconds() / r.wall.Seconds() }

// cpuPerNotification is the bridge's CPU time per notification, µs.
func (r *result) cpuPerNotification() float64 {
	n := r.notifications()
	if n <= 0 {
		return 0
	}
	return float64(r.bridgeP.cpu.Microseconds()) / float64(n)
}

// othersBusy is the share of the machine other processes must have used
// for a step lost to a busy machine to be measured again.
const othersBusy = 0.25

// othersCores is what processes other than the bench's used, in cores.
func (r *result) othersCores() float64 {
	return max(r.cores(r.machine.busy)-r.benchCores(), 0)
}

// benchCores is what the bench's processes used, in cores.
func (r *result) benchCores() float64 {
	return r.cores(r.bridgeP.cpu + r.subP.cpu + r.upP.cpu + r.natsP.cpu)
}

func (r *result) line() string {
	n := r.notifications()
	var b strings.Builder
	fmt.Fprintf(&b, "bridge=%s notifications_per_s=%.0f gateway_cpu_us_per_notification=%.3f p50_ms=%.2f p99_ms=%.2f lost=%d rss_mb=%.1f bytes_per_item=%.0f",
		r.bridge, r.rate(), r.cpuPerNotification(), r.b.P50ms, r.b.P99ms,
		r.lost(), float64(r.rssBytes)/(1<<20), float64(r.rssBytes)/float64(r.items))
	fmt.Fprintf(&b, " rss_peak_mb=%.1f", float64(max(r.rssPeak, r.rssBytes))/(1<<20))
	fmt.Fprintf(&b, " items=%d offered_per_s=%.0f window_s=%.1f notifications=%d dup=%d repeat=%d unknown=%d bad=%d max_ms=%.1f",
		r.items, r.offered, r.window.Seconds(), n, r.dup(), r.b.Repeat-r.a.Repeat, r.b.Unknown-r.a.Unknown, r.b.Bad-r.a.Bad, r.b.MaxMs)
	fmt.Fprintf(&b, " bridge_cores=%.4f bridge_wakeups_per_s=%.0f", r.cores(r.bridgeP.cpu), float64(r.bridgeP.switches)/r.wall.Seconds())
	if r.gm != nil {
		fmt.Fprintf(&b, " bridge_allocs_per_s=%.1f bridge_publish_responses_per_s=%.1f",
			r.allocsPerSecond(), r.gm["uagate_subscription_messages_total"]/r.wall.Seconds())
		if c := r.gm["uagate_store_commits_total"]; c > 0 {
			fmt.Fprintf(&b, " log_commits_per_s=%.1f log_syncs_per_s=%.1f log_written_kb_per_s=%.1f", c/r.wall.Seconds(), r.gm["uagate_store_syncs_total"]/r.wall.Seconds(),
				r.gm["uagate_store_written_bytes_total"]/1024/r.wall.Seconds())
		}
	}
	fmt.Fprintf(&b, " sub_cores=%.2f sub_cpu_us_per_notification=%.3f %s_cores=%.2f",
		r.cores(r.subP.cpu), float64(r.subP.cpu.Microseconds())/max(float64(n), 1), r.upstream, r.cores(r.upP.cpu))
	if r.natsMeasured {
		fmt.Fprintf(&b, " nats_cores=%.2f", r.cores(r.natsP.cpu))
	}
	fmt.Fprintf(&b, " machine_cpus=%d machine_busy_cores=%.2f others_cores=%.2f load1=%.1f",
		r.machine.cpus, r.cores(r.machine.busy), r.othersCores(), r.load1)
	st := r.b.Stages
	if st.SampleP99 != 0 || st.UpP99 != 0 || st.DownP99 != 0 {
		// Only messages with every timestamp (the gateway's) have stages.
		fmt.Fprintf(&b, " sample_p50_ms=%.1f sample_p99_ms=%.1f up_p50_ms=%.1f up_p99_ms=%.1f down_p50_ms=%.1f down_p99_ms=%.1f",
			st.SampleP50, st.SampleP99, st.UpP50, st.UpP99, st.DownP50, st.DownP99)
	}
	fmt.Fprintf(&b, " sub_queue_p50_ms=%.1f sub_queue_p99_ms=%.1f sub_backlog_peak=%d sub_cut=%d nats_slow_consumers=%d",
		st.QueueP50, st.QueueP99, r.b.BacklogPeak, b2i(r.b.Cut != ""), r.natsSlow)
	fmt.Fprintf(&b, " msgs=%d bytes_per_msg=%.0f setup_s=%.1f", r.b.Msgs-r.a.Msgs,
		float64(r.b.Bytes-r.a.Bytes)/max(float64(r.b.Msgs-r.a.Msgs), 1), r.setup.Seconds())
	return b.String()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// allocsMetric counts the gateway's heap allocations exactly when a scrape
// begins (api's newMetricsHandler): go_memstats_mallocs_total, which the
// runtime counts by the span, was off by a thousand allocations or more
// either way, at rest all of the window's.
const allocsMetric = "uagate_process_allocs_at_scrape_total"

// allocsPerSecond is the gateway's allocations per second of the window
// without one /metrics scrape's.
func (r *result) allocsPerSecond() float64 {
	return max(r.gm[allocsMetric]-r.scrapeAlloc, 0) / r.wall.Seconds()
}

// Limits a verdict names.
const (
	limitNone    = ""
	limitBridge  = "bridge"  // the bridge under test
	limitHarness = "harness" // the subscriber, NATS or the upstream server
	limitMachine = "machine" // every core busy: no process can be blamed
)

// verdict says whether the bridge sustained the offered rate and, when it
// did not, what the evidence names as the limit.
type verdict struct {
	sustained bool
	limit     string
	problems  []string // what was not sustained
	evidence  []string // what the processes and the machine show
}

// Thresholds of the verdict.
const (
	// busyCores: a process this busy is at the end of what one goroutine
	// (the subscriber's parser) or a small process can do on a 2-core box.
	busyCores = 0.9
	// saturated: the machine's share of busy CPU time above which every
	// process waits for a core.
	saturated = 0.95
	// shortfall: the share of the offered rate that may be missing at the
	// window's edges (a staggered generator's ticks) before it counts.
	shortfall = 0.97
)

// judge returns the verdict of r against a p99 bound.
func (r *result) judge(maxP99 time.Duration) verdict {
	var v verdict
	problem := func(f string, a ...any) { v.problems = append(v.problems, fmt.Sprintf(f, a...)) }
	evidence := func(f string, a ...any) { v.evidence = append(v.evidence, fmt.Sprintf(f, a...)) }
	if n := r.lost(); n > 0 {
		problem("%d values lost", n)
	}
	if n := r.dup(); n > 0 {
		problem("%d values went back (duplicates)", n)
	}
	if r.b.LatN > 0 && r.b.P99ms > float64(maxP99)/1e6 {
		problem("p99 %.1f ms > %v", r.b.P99ms, maxP99)
	}
	if want := r.offered * r.window.Seconds(); want >= 100 && float64(r.notifications()) < shortfall*want {
		problem("%.0f of %.0f offered notifications/s received", r.rate(), r.offered)
	}
	v.sustained = len(v.problems) == 0

	// The bridge's own account (the gateway's counters).
	bridgeLost := false
	if r.gm != nil {
		for _, c := range []struct{ name, what string }{
			{"uagate_sink_dropped_messages_total", "its sink queue dropped %.0f messages"},
			{"uagate_sink_undelivered_messages_total", "its sink settled %.0f messages undelivered"},
			{"uagate_group_errors_total", "%.0f notifications failed to encode"},
		} {
			if x := r.gm[c.name]; x > 0 {
				evidence("gateway: "+c.what, x)
				bridgeLost = true
			}
		}
		if x := r.gm["uagate_group_overflows_total"]; x > 0 {
			evidence("the server's item queues overflowed %.0f times (the gateway fetched too slowly or the server was starved)", x)
		}
	}
	// The harness.
	harness := false
	sub, up, nats := r.cores(r.subP.cpu), r.cores(r.upP.cpu), r.cores(r.natsP.cpu)
	if r.b.Cut != "" {
		evidence("subscriber: cut off (%s)", r.b.Cut)
		harness = true
	}
	if r.natsSlow > 0 {
		evidence("nats-server: %d slow-consumer reports", r.natsSlow)
		harness = true
	}
	if sub >= busyCores {
		evidence("subscriber: %.2f cores (its parser is one goroutine)", sub)
		harness = true
	}
	if q := r.b.Stages.QueueP99; q > float64(maxP99)/1e6 || r.b.BacklogPeak > rxQueue/2 {
		evidence("subscriber: messages waited for its parser (queue p99 %.1f ms, up to %d at once)", q, r.b.BacklogPeak)
		harness = true
	}
	if up >= busyCores {
		evidence("%s: %.2f cores", r.upstream, up)
		harness = true
	}
	if nats >= busyCores {
		evidence("nats-server: %.2f cores", nats)
		harness = true
	}
	busy := r.cores(r.machine.busy)
	full := busy >= saturated*float64(r.machine.cpus)
	if full {
		evidence("machine: %.2f of %d cores busy (the bench's processes %.2f: bridge %.2f, subscriber %.2f, %s %.2f, nats %.2f; others %.2f)",
			busy, r.machine.cpus, r.benchCores(), r.cores(r.bridgeP.cpu), sub, r.upstream, up, nats, max(busy-r.benchCores(), 0))
	}
	switch {
	case v.sustained:
		v.limit = limitNone
	case bridgeLost:
		v.limit = limitBridge
	case harness:
		v.limit = limitHarness
	case full:
		v.limit = limitMachine
	default:
		v.limit = limitBridge
	}
	return v
}

// verdictLine is the verdict as the bench prints it after r's line.
func (r *result) verdictLine(v verdict) string {
	var b strings.Builder
	switch {
	case v.sustained:
		fmt.Fprintf(&b, "verdict bridge=%s sustained %.0f/s", r.bridge, r.offered)
	case v.limit == limitBridge:
		fmt.Fprintf(&b, "verdict bridge=%s NOT sustained %.0f/s, limit: the %s: %s", r.bridge, r.offered, r.bridge, strings.Join(v.problems, "; "))
	case v.limit == limitHarness:
		fmt.Fprintf(&b, "verdict bridge=%s not measured at %.0f/s, limit: the harness, not the %s: %s", r.bridge, r.offered, r.bridge, strings.Join(v.problems, "; "))
	default:
		fmt.Fprintf(&b, "verdict bridge=%s not measured at %.0f/s, limit: this machine (every core busy), not the %s alone: %s", r.bridge, r.offered, r.bridge, strings.Join(v.problems, "; "))
	}
	if len(v.evidence) > 0 {
		fmt.Fprintf(&b, " [%s]", strings.Join(v.evidence, "; "))
	}
	return b.String()
}
