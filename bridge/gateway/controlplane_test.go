package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/uagate/gateway/api"
	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/gateway"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/server"
)

// The control plane never waits on the data plane: API reads answer while a
// sink's queue is full and an apply waits for a slow server; an apply is
// all-or-nothing per writer group and says what failed; Stop is bounded.

// marshalConfig is c as the YAML of a configuration file.
func marshalConfig(t *testing.T, c *config.Config) string {
	t.Helper()
	b, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func dur(d time.Duration) config.Duration { return config.Duration(d) }

// counterWriter is a writer of the simulation server's Demo counter.
func counterWriter(name string, fields ...string) config.DataSetWriter {
	w := config.DataSetWriter{Name: name, Fields: []config.Field{{Name: "Counter", Node: server.NodeCounter}}}
	for _, f := range fields {
		w.Fields = append(w.Fields, config.Field{Name: f, Node: server.NodeSine})
	}
	return w
}

// blackhole is a loopback listener that accepts connections and never
// answers: an upstream server that hangs.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				break
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// stuckConfig is a gateway whose only sink is a dead broker with a block
// queue of 4 messages, and a group slowg on the endpoint slow (its URL
// given) that publishes a static node (the server's NamespaceArray) without
// keep-alives: once subscribed it sends nothing more, so its handler never
// waits for the queue and what an apply does to it waits on the server
// only. withFast adds the group that fills the queue.
func stuckConfig(slowURL string, dead string) *config.Config {
	return &config.Config{
		Gateway: config.Gateway{ShutdownTimeout: dur(3 * time.Second)},
		Endpoints: []config.Endpoint{
			{Name: "plc", URL: config.EmbeddedSimURL},
			{Name: "slow", URL: slowURL, SecurityPolicy: "None", SecurityMode: "None", RequestTimeout: dur(20 * time.Second)},
		},
		WriterGroups: []config.WriterGroup{
			{Name: "slowg", Endpoint: "slow", PublishingInterval: dur(50 * time.Millisecond), KeepAlive: dur(-time.Millisecond),
				Writers: []config.DataSetWriter{{Name: "w", Fields: []config.Field{{Name: "Namespaces", Node: "i=2255"}}}}},
		},
		Sinks: config.Sinks{MQTT: []config.MQTTSink{{Name: "dead", URL: "tcp://" + dead,
			Delivery: config.Delivery{Policy: "block", QueueSize: 4}}}},
	}
}

// withFast returns c with a group fast publishing the embedded simulation
// server's counter every 20 ms: it fills the dead broker's queue, and its
// handler then waits for it.
func withFast(c *config.Config) *config.Config {
	c = c.Clone()
	c.WriterGroups = append(c.WriterGroups, config.WriterGroup{Name: "fast", Endpoint: "plc",
		PublishingInterval: dur(20 * time.Millisecond), Writers: []config.DataSetWriter{counterWriter("w")}})
	return c
}

// stuck brings gw to the state of stuckConfig: slowg subscribed, then fast
// added and the dead broker's queue full.
func stuck(t *testing.T, gw *gateway.Gateway) {
	t.Helper()
	waitUntil(t, nil, e2eWait, "slowg subscribed", func() bool {
		st, ok := gw.GroupStats("slowg")
		return ok && st.Notifications > 0
	})
	if _, err := gw.Apply(context.Background(), withFast(gw.Config())); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, nil, e2eWait, "the dead broker's queue full", func() bool {
		st, _ := gw.SinkStats("dead")
		return st.Queued >= 4
	})
}

// answerBound is how soon a read answers: 100 ms, five times that under
// the race detector, which slows the handlers (a read that waits on the
// data plane takes the slow server's slowDelay, or never answers).
var answerBound = map[bool]time.Duration{false: 100 * time.Millisecond, true: 500 * time.Millisecond}[raceEnabled]

// slowDelay is how long the slow server takes to answer each request while
// the reads are timed: long enough that the apply is still in flight when
// the reads and the second apply are done, whatever the machine's load.
// slowestBound is the slowest of a route's five reads allowed: a tenth of
// slowDelay, so a read that waited on the apply fails it, while a read a
// busy machine delayed (two CPU-bound loops beside the race-enabled suite
// put single reads past a second) passes.
const (
	slowDelay    = 30 * time.Second
	slowestBound = slowDelay / 10
)

// TestReadsDoNotWaitOnDataPlane: with the only sink on a dead broker and its
// block queue full (the writer groups' handlers wait for it), and an apply
// in flight against a server that delays every response by slowDelay, every read
// route of the API answers at once.
func TestReadsDoNotWaitOnDataPlane(t *testing.T) {
	slow := startSim(t, 20*time.Millisecond)
	proxy := brokertest.StartProxy(t, slow.addr)
	c := stuckConfig("opc.tcp://"+proxy.Addr(), testutil.FreeAddr(t))
	// The apply's requests wait for the slow server's answers, not for a
	// request timeout, through every round of reads (some 20 s on a busy
	// machine: with stuckConfig's 20 s it ended in the middle).
	c.Endpoints[1].RequestTimeout = dur(2 * slowDelay)
	// Nor does the session give up on slowg's subscription, silent behind
	// the delay: its keep-alive window (publishing interval × keep-alive
	// count, here KeepAlive / interval) outlasts the delay. With the
	// server's default count the window was ~0.5 s, the session faulted
	// and recovered, the apply's requests failed at once and it ended
	// before a busy machine's reads did.
	c.WriterGroups[0].KeepAlive = dur(2 * slowDelay)
	g := startGateway(t, "gateway.yaml", marshalConfig(t, c))
	stuck(t, g.gw)
	proxy.SetDelay(slowDelay)
	next := g.gw.Config().Clone()
	next.WriterGroups[0].Writers = append(next.WriterGroups[0].Writers, counterWriter("w2", "Sine"))
	applied := make(chan error, 1)
	actx, acancel := context.WithCancel(context.Background())
	defer acancel()
	go func() {
		_, err := g.gw.Apply(actx, next)
		applied <- err
	}()
	base := "http://" + g.gw.Addrs().HTTP
	routes := []string{"/healthz", "/readyz", "/metrics", "/api/v1/status", "/api/v1/values?limit=10",
		"/api/v1/endpoints", "/api/v1/writer-groups", "/api/v1/config", "/api/v1/writer-groups/fast/writers/w/values"}
	hc := &http.Client{Timeout: 10 * time.Second}
	for round := 0; round < 3; round++ {
		for _, route := range routes {
			var took []time.Duration
			for range 5 {
				start := time.Now()
				resp, err := hc.Get(base + route)
				if err != nil {
					t.Fatalf("GET %s: %v", route, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			// The median is the answer's time; the slowest of five is what a
			// busy machine adds, and a read that waited on the data plane
			// would take the slow server's slowDelay or never answer.
			if took[2] > answerBound || took[4] > slowestBound {
				t.Errorf("GET %s: median %v, slowest %v; want median within %v, slowest within %v", route, took[2], took[4], answerBound, slowestBound)
			}
		}
	}
	select {
	case err := <-applied:
		t.Fatalf("the apply was not in flight during the reads: it ended (%v)", err)
	default:
	}
	// A second apply waits in the queue behind the first, within its own
	// context, and holds up no reader.
	qctx, qcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer qcancel()
	if _, err := g.gw.Apply(qctx, next); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second apply while the first is in flight: %v, want it to wait and end with its context", err)
	}
}

// TestStopBoundedWhatever: a gateway stops within its shutdownTimeout plus
// a second with a dead broker behind a full block queue, a server that never
// answers, and an apply in flight against a server that delays every
// response; and its writer groups' resume records are in the state
// directory.
func TestStopBoundedWhatever(t *testing.T) {
	isolate(t)
	slow := startSim(t, 20*time.Millisecond)
	proxy := brokertest.StartProxy(t, slow.addr)
	c := stuckConfig("opc.tcp://"+proxy.Addr(), testutil.FreeAddr(t))
	c.Gateway.StateDir = stateDir(t)
	c.Endpoints = append(c.Endpoints, config.Endpoint{Name: "hang", URL: "opc.tcp://" + blackhole(t), SecurityPolicy: "None", SecurityMode: "None"})
	c.WriterGroups = append(c.WriterGroups, config.WriterGroup{Name: "hung", Endpoint: "hang", Writers: []config.DataSetWriter{counterWriter("w")}})
	text := marshalConfig(t, c)
	cfg, _, err := config.Parse([]byte(text), "test")
	if err != nil {
		t.Fatal(err)
	}
	log := &lockedBuffer{}
	gw, err := gateway.New(cfg, gateway.Options{Logger: newTestLogger(log)})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = gw.Stop(context.Background())
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", log.String())
		}
	})
	stuck(t, gw)
	for _, name := range []string{"fast", "slowg"} {
		waitUntil(t, nil, e2eWait, "the resume record of "+name, func() bool {
			_, err := os.Stat(filepath.Join(cfg.Gateway.StateDir, "resume", name+".json"))
			return err == nil
		})
	}
	proxy.SetDelay(5 * time.Second)
	next := gw.Config().Clone()
	next.WriterGroups[0].Writers = append(next.WriterGroups[0].Writers, counterWriter("w2", "Sine"))
	go func() { _, _ = gw.Apply(context.Background(), next) }()
	waitUntil(t, nil, e2eWait, "the apply in flight", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, err := gw.Retry(ctx) // waits behind the apply in flight
		return errors.Is(err, context.DeadlineExceeded)
	})
	bound := cfg.Gateway.ShutdownTimeout.D()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	start := time.Now()
	err = gw.Stop(ctx)
	took := time.Since(start)
	stopped = true
	if took > bound+time.Second {
		t.Errorf("Stop took %v, want at most %v (shutdownTimeout) + 1 s", took, bound)
	}
	if err == nil {
		t.Errorf("Stop: nil error, want one that says the timeout cut the drain")
	}
	t.Logf("Stop took %v: %v", took, err)
	for _, name := range []string{"fast", "slowg"} {
		if _, err := os.Stat(filepath.Join(cfg.Gateway.StateDir, "resume", name+".json")); err != nil {
			t.Errorf("resume record of %s: %v", name, err)
		}
	}
	if _, err := gw.Apply(context.Background(), next); !errors.Is(err, gateway.ErrStopped) {
		t.Errorf("Apply after Stop: %v, want ErrStopped", err)
	}
}

// TestApplyPerGroup: a change that adds a field to one writer group and an
// endpoint with an unusable certificate store (a file where the directory
// should be) with a group of its own applies the field and refuses the
// group; the report, the running configuration, GET /api/v1/config and the
// log say so; the change is retried when the file is saved again and by POST
// /api/v1/config/retry, and applies once the store is usable.
func TestApplyPerGroup(t *testing.T) {
	c := &config.Config{
		Endpoints:    []config.Endpoint{{Name: "plc", URL: config.EmbeddedSimURL}},
		WriterGroups: []config.WriterGroup{{Name: "a", Endpoint: "plc", PublishingInterval: dur(50 * time.Millisecond), Writers: []config.DataSetWriter{counterWriter("w")}}},
		Sinks:        config.Sinks{MQTT: []config.MQTTSink{{Name: "mqtt", URL: config.EmbeddedMQTTURL}}},
	}
	g := startGateway(t, "gateway.yaml", marshalConfig(t, c))
	waitUntil(t, g, e2eWait, "group a running", func() bool { st, ok := g.gw.GroupStats("a"); return ok && st.Notifications > 0 })

	badPKI := filepath.Join(t.TempDir(), "pki")
	if err := os.WriteFile(badPKI, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	next := g.gw.Config().Clone()
	next.WriterGroups[0].Writers[0] = counterWriter("w", "Sine")
	next.Endpoints = append(next.Endpoints, config.Endpoint{Name: "plc2", URL: config.EmbeddedSimURL, PKI: badPKI})
	next.WriterGroups = append(next.WriterGroups, config.WriterGroup{Name: "b", Endpoint: "plc2", Writers: []config.DataSetWriter{counterWriter("w")}})
	// Through the file, as an operator edits it.
	g.rewrite(marshalConfig(t, next))
	line := g.waitLog("configuration change applied in part")
	if !strings.Contains(line, "applied=a") || !strings.Contains(line, "writer group b not changed") {
		t.Errorf("log line %q: want group a applied and b named as failed", line)
	}
	run := g.gw.Config()
	if len(run.WriterGroups) != 1 || len(run.WriterGroups[0].Writers[0].Fields) != 2 {
		t.Errorf("running configuration: %d groups, fields %v; want group a with its new field only", len(run.WriterGroups), run.WriterGroups[0].Writers[0].Fields)
	}
	for _, ep := range run.Endpoints {
		if ep.Name == "plc2" {
			t.Errorf("the running configuration has endpoint plc2, whose only group failed")
		}
	}
	if !g.gw.Pending() {
		t.Error("Pending: false, want true while group b does not run")
	}
	rep := g.gw.LastReport()
	if len(rep.Failed) != 1 || rep.Failed[0].Group != "b" || !slices.Contains(rep.Applied, "a") {
		t.Errorf("report: applied %v, failed %v; want a applied, b failed", rep.Applied, rep.Failed)
	}
	body := apiGet(t, g, "/api/v1/config")
	var view struct {
		Config struct {
			Endpoints    []struct{ Name string }
			WriterGroups []struct{ Name string } `json:"writerGroups"`
		}
		LastApply api.ApplyState
	}
	if err := json.Unmarshal([]byte(body), &view); err != nil {
		t.Fatal(err)
	}
	if !view.LastApply.Pending || len(view.LastApply.Failed) != 1 || view.LastApply.Failed[0].Group != "b" ||
		len(view.Config.Endpoints) != 1 || len(view.Config.WriterGroups) != 1 {
		t.Errorf("GET /api/v1/config: %s; want pending, b failed, and only plc with group a in what runs", body)
	}
	waitUntil(t, g, e2eWait, "group a's new field published", func() bool {
		vs, _, err := g.gw.LastValues("a", bridge.ValueFilter{Writer: "w"}, 0, 100)
		return err == nil && len(vs) == 2
	})

	// Saving the same file again retries; the store is still unusable.
	before := strings.Count(g.log.String(), "writer group b not changed")
	g.rewrite(marshalConfig(t, next))
	waitUntil(t, g, e2eWait, "the re-save retried", func() bool {
		return strings.Count(g.log.String(), "writer group b not changed") > before
	})

	// The store fixed, POST /api/v1/config/retry applies the rest.
	if err := os.Remove(badPKI); err != nil {
		t.Fatal(err)
	}
	status, body := apiPost(t, g, "/api/v1/config/retry")
	if status != http.StatusOK || !strings.Contains(body, `"pending":false`) {
		t.Fatalf("POST /api/v1/config/retry: %d %s", status, body)
	}
	waitUntil(t, g, e2eWait, "group b running", func() bool { st, ok := g.gw.GroupStats("b"); return ok && st.Notifications > 0 })
	if n := len(g.gw.Config().WriterGroups); n != 2 {
		t.Errorf("%d writer groups run after the retry, want 2", n)
	}
}

func apiGet(t *testing.T, g *e2eGateway, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + g.gw.Addrs().HTTP + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", path, resp.Status, b)
	}
	return string(b)
}

func apiPost(t *testing.T, g *e2eGateway, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+g.gw.Addrs().HTTP+path, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func newTestLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

var listeningRE = regexp.MustCompile(`msg="api: listening" addr=(\S+)`)

// TestSIGTERMBounded: a gateway process whose sink is a dead broker behind a
// full block queue, with a configuration change through the API in flight
// against a server that delays every response by 5 s, ends within its
// shutdownTimeout plus a second of SIGTERM.
func TestSIGTERMBounded(t *testing.T) {
	isolate(t)
	slow := startSim(t, 20*time.Millisecond)
	proxy := brokertest.StartProxy(t, slow.addr)
	c := stuckConfig("opc.tcp://"+proxy.Addr(), testutil.FreeAddr(t))
	c.Gateway.StateDir = stateDir(t)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(marshalConfig(t, c)), 0o600); err != nil {
		t.Fatal(err)
	}
	// The race detector's runtime sleeps a second at exit by default.
	child := startGatewayChild(t, path, "GORACE=atexit_sleep_ms=0")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the gateway's log:\n%s", child.stderr.String())
		}
	})
	var base string
	waitUntil(t, nil, e2eWait, "the child's API listening", func() bool {
		if m := listeningRE.FindStringSubmatch(child.stderr.String()); m != nil {
			base = "http://" + m[1]
		}
		return base != ""
	})
	status := func() (queued int, slowg uint64) {
		resp, err := http.Get(base + "/api/v1/status")
		if err != nil {
			return 0, 0
		}
		defer resp.Body.Close()
		var st struct {
			Sinks []struct {
				Name   string
				Queued int
			}
			Groups []struct {
				Name     string
				Counters struct{ Notifications uint64 } `json:"counters"`
			}
		}
		if json.NewDecoder(resp.Body).Decode(&st) != nil {
			return 0, 0
		}
		for _, s := range st.Sinks {
			if s.Name == "dead" {
				queued = s.Queued
			}
		}
		for _, g := range st.Groups {
			if g.Name == "slowg" {
				slowg = g.Counters.Notifications
			}
		}
		return queued, slowg
	}
	waitUntil(t, nil, e2eWait, "slowg subscribed", func() bool { _, n := status(); return n > 0 })
	if err := os.WriteFile(path+".tmp", []byte(marshalConfig(t, withFast(c))), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, nil, e2eWait, "the dead broker's queue full", func() bool { q, _ := status(); return q >= 4 })
	proxy.SetDelay(5 * time.Second)
	go func() {
		req, _ := http.NewRequest(http.MethodDelete, base+"/api/v1/writer-groups/slowg", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitUntil(t, nil, e2eWait, "the change in flight", func() bool {
		return strings.Contains(child.stderr.String(), "writer group slowg") || apiBusy(base)
	})
	start := time.Now()
	child.stop(t)
	took := time.Since(start)
	if bound := c.Gateway.ShutdownTimeout.D() + time.Second; took > bound {
		t.Errorf("the process ended %v after SIGTERM, want within %v", took, bound)
	}
	t.Logf("ended %v after SIGTERM", took)
}

// apiBusy reports whether a configuration change is in flight: a retry
// waits behind it (and is cut by the request's timeout).
func apiBusy(base string) bool {
	hc := &http.Client{Timeout: 200 * time.Millisecond}
	resp, err := hc.Post(base+"/api/v1/config/retry", "application/json", strings.NewReader("{}"))
	if err != nil {
		return true
	}
	resp.Body.Close()
	return false
}
