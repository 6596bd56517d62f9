package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// runBridge measures one bridge with an upstream server and a subscriber
// of its own (a fresh server: the previous bridge's session must not load
// it), and stops them before it returns.
func runBridge(ctx context.Context, o *options, procs *procSet, bridge string, stderr io.Writer) (*result, error) {
	r := &result{bridge: bridge, upstream: o.upstream, items: o.items, offered: o.offered()}
	dir := filepath.Join(o.workDir, fmt.Sprintf("%s-%d", bridge, o.items))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return r, err
	}
	setupCtx, cancel := context.WithTimeout(ctx, o.setupTimeout)
	defer cancel()

	up, upURL, err := startUpstream(setupCtx, o, procs, dir)
	if err != nil {
		return r, err
	}
	defer up.stop()

	sub, err := procs.start("subscriber", dir, subscriberCommand(o), watchStdout|withStdin, nil)
	if err != nil {
		return r, err
	}
	defer sub.stop()
	if _, err := sub.waitLine(setupCtx, 30*time.Second, "READY"); err != nil {
		return r, err
	}

	var argv, env []string
	var httpAddr, pprofAddr string
	switch bridge {
	case "gateway", "gateway-nolog":
		if httpAddr, err = freeAddr(); err != nil {
			return r, err
		}
		cfg := filepath.Join(dir, "gateway.yaml")
		if err := os.WriteFile(cfg, gatewayConfig(o, upURL, filepath.Join(dir, "state"), httpAddr, bridge == "gateway"), 0o600); err != nil {
			return r, err
		}
		argv = gatewayCommand(o, cfg)
		if o.cpuProfile != "" || o.traceFile != "" {
			if pprofAddr, err = freeAddr(); err != nil {
				return r, err
			}
			env = append(env, "UAGATE_DEBUG_PPROF="+pprofAddr)
		}
	case "baseline":
		argv = baselineCommand(o, upURL)
	}
	setupStart := time.Now()
	br, err := procs.start(bridge, dir, argv, 0, env)
	if err != nil {
		return r, err
	}
	defer br.stop()

	// Every item must have arrived once before the warm-up starts.
	fmt.Fprintf(stderr, "gateway bench: %s: %d items, %.0f/s offered: waiting for every item\n", bridge, o.items, o.offered())
	for {
		st, err := sub.query(setupCtx, "stats")
		if err != nil {
			return r, fmt.Errorf("waiting for every item: %w%s", err, procs.tails(br, up, sub))
		}
		if st.Seen >= int64(o.items) {
			break
		}
		if err := br.alive(); err != nil {
			return r, fmt.Errorf("%s exited: %w%s", bridge, err, procs.tails(br))
		}
		if err := sleepCtx(setupCtx, 250*time.Millisecond); err != nil {
			return r, fmt.Errorf("%d of %d items arrived within -setup-timeout %v: %w%s", st.Seen, o.items, o.setupTimeout, err, procs.tails(br, up, sub))
		}
	}
	r.setup = time.Since(setupStart)
	if err := sleepCtx(ctx, o.warmup); err != nil {
		return r, err
	}

	measured := []*proc{br, sub, up}
	nats := procs.byName("nats-server")
	if nats != nil {
		measured = append(measured, nats)
		r.natsMeasured = true
	}
	// The gateway's counters, scraped four times in a row: the median of
	// the allocations between two scrapes is one scrape's, which the
	// window's count includes (the counter is read as a scrape begins: the
	// window's holds the last of these scrapes). The scrapes are outside
	// the CPU window.
	var m0 metrics
	if httpAddr != "" {
		var costs []float64
		for i := range 4 {
			m, err := scrapeMetrics(ctx, httpAddr)
			if err != nil {
				return r, err
			}
			if i > 0 {
				costs = append(costs, m[allocsMetric]-m0[allocsMetric])
			}
			m0 = m
		}
		slices.Sort(costs)
		r.scrapeAlloc = costs[1]
	}
	slow0 := slowConsumers(nats)
	r.load1 = loadAverage()
	pa, err := sampleProcs(measured)
	if err != nil {
		return r, err
	}
	ma, err := sampleMachine()
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	if r.a, err = sub.query(ctx, "window"); err != nil {
		return r, err
	}
	profDone := make(chan error, 2)
	if o.cpuProfile != "" {
		r.profile = o.cpuProfile
		go func() { profDone <- fetchProfile(ctx, pprofAddr, "profile", o.duration, o.cpuProfile) }()
	} else {
		profDone <- nil
	}
	if o.traceFile != "" {
		go func() { profDone <- fetchProfile(ctx, pprofAddr, "trace", min(o.duration, 5*time.Second), o.traceFile) }()
	} else {
		profDone <- nil
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
	pb, err := sampleProcs(measured)
	mb, merr := sampleMachine()
	r.wall = time.Since(t0)
	if err != nil {
		return r, err
	}
	if merr != nil {
		return r, merr
	}
	if err := br.alive(); err != nil {
		return r, fmt.Errorf("%s exited during the window: %w%s", bridge, err, procs.tails(br))
	}
	for range 2 {
		if err := <-profDone; err != nil {
			return r, err
		}
	}
	if httpAddr != "" {
		m1, err := scrapeMetrics(ctx, httpAddr)
		if err != nil {
			return r, err
		}
		r.gm = m1.sub(m0)
	}
	r.natsSlow = slowConsumers(nats) - slow0
	r.window = time.Duration(r.b.TimeNs - r.a.TimeNs)
	d := func(i int) procSample {
		return procSample{cpu: pb[i].cpu - pa[i].cpu, switches: pb[i].switches - pa[i].switches}
	}
	r.bridgeP, r.subP, r.upP = d(0), d(1), d(2)
	if r.natsMeasured {
		r.natsP = d(3)
	}
	r.machine = machineSample{busy: mb.busy - ma.busy, cpus: mb.cpus}
	if r.rssBytes, err = procRSS(br.pid()); err != nil {
		return r, err
	}
	return r, nil
}

// startUpstream starts the upstream OPC UA server of o and returns it and
// its endpoint URL.
func startUpstream(ctx context.Context, o *options, procs *procSet, dir string) (*proc, string, error) {
	if o.upstream == upstreamNodeOPCUA {
		p, err := procs.start(o.upstream, dir, []string{"node", filepath.Join(o.testpeer, "server.mjs"), "--port", "0", "--large", "0"},
			watchStdout, []string{"COUNTERS=" + strconv.Itoa(o.items), "COUNTER_INTERVAL_MS=" + strconv.FormatInt(o.rate.Milliseconds(), 10)})
		if err != nil {
			return nil, "", err
		}
		line, err := p.waitLine(ctx, o.setupTimeout, "READY ")
		if err != nil {
			p.stop()
			return nil, "", err
		}
		_, url, _ := strings.Cut(line, "READY ")
		return p, strings.TrimSpace(url), nil
	}
	p, err := procs.start(o.upstream, dir, simCommand(o), watchStdout, nil)
	if err != nil {
		return nil, "", err
	}
	line, err := p.waitLine(ctx, o.setupTimeout, "gateway sim: listening on ")
	if err != nil {
		p.stop()
		return nil, "", err
	}
	return p, strings.TrimSpace(strings.TrimPrefix(line, "gateway sim: listening on ")), nil
}

// findTestpeer returns the directory of node-opcua's test peer: dir when
// given, else UAGATE_TESTPEER_DIR, else testpeer/ in the working directory
// or one above it up to the module's root.
func findTestpeer(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("UAGATE_TESTPEER_DIR")
	}
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "server.mjs")); err != nil {
			return "", fmt.Errorf("-testpeer %s: %w", dir, err)
		}
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		c := filepath.Join(d, "testpeer")
		if _, err := os.Stat(filepath.Join(c, "server.mjs")); err == nil {
			if _, err := os.Stat(filepath.Join(c, "node_modules", "node-opcua")); err != nil {
				return "", fmt.Errorf("%s: node-opcua is not installed (scripts/install-node-opcua.sh)", c)
			}
			if _, err := exec.LookPath("node"); err != nil {
				return "", fmt.Errorf("node (Node.js) is not on PATH: %w", err)
			}
			return c, nil
		}
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil || filepath.Dir(d) == d {
			return "", fmt.Errorf("no testpeer/server.mjs from %s up to the module's root: run from the repository or give -testpeer", wd)
		}
	}
}

// freeAddr returns a loopback address with a port the system just gave
// out.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// fetchProfile writes the CPU profile (kind "profile") or the execution
// trace (kind "trace") of d from the Go profiler at addr
// (UAGATE_DEBUG_PPROF) to path.
func fetchProfile(ctx context.Context, addr, kind string, d time.Duration, path string) error {
	secs := max(int(d.Seconds()), 1)
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", addr, kind, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", kind, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", kind, err)
	}
	return f.Close()
}

// slowConsumers counts nats-server's slow-consumer reports in its log so
// far (0 without a nats-server of the bench's).
func slowConsumers(p *proc) int {
	if p == nil {
		return 0
	}
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "Slow Consumer")
}
