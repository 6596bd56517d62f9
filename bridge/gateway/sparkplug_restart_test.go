package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/api"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/gateway"
	"github.com/uagate/gateway/bridge/sink/sparkplug"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/uastack/server"
)

// childStatus reads /api/v1/status of a gateway child process (its API on
// a loopback port without keys), once it logged where it listens.
func childStatus(t *testing.T, child *gatewayChild) func() (api.Status, bool) {
	t.Helper()
	var base string
	waitUntil(t, nil, e2eWait, "the child's API listening", func() bool {
		if m := listeningRE.FindStringSubmatch(child.stderr.String()); m != nil {
			base = "http://" + m[1]
		}
		return base != ""
	})
	return func() (api.Status, bool) {
		var st api.Status
		resp, err := http.Get(base + "/api/v1/status")
		if err != nil {
			return st, false
		}
		defer resp.Body.Close()
		return st, resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&st) == nil && len(st.Sparkplug) == 1 && st.Store != nil
	}
}

// TestSparkplugHeldKill9: what a Sparkplug node holds survives a kill -9
// of the gateway, whether it held it for its primary host (offline) or
// because its broker was down. A gateway process holds the Counter's
// values in the store-and-forward log; the upstream stops (nothing more to
// hold), and once what it held is in the log the process is killed with
// SIGKILL. Started again with the writer's fields in another order (other
// aliases: held data is named in the log) and the upstream back, it sends
// after its births — once the host is online, or the broker back — every
// value the killed process held, as historical metrics with the new
// aliases, in order, none twice, none left out; then live data.
//
// host-offline: the host comes online once the new process waits for it;
// host-back: it is online before the new process starts, which is born at
// once, before its writer group has values (the held data waits for its
// device's DBIRTH with the metrics' types); broker-down: no primary host,
// the broker stopped before the kill and started again.
func TestSparkplugHeldKill9(t *testing.T) {
	t.Run("host-offline", func(t *testing.T) { testSparkplugHeldKill9(t, true, false) })
	t.Run("host-back", func(t *testing.T) { testSparkplugHeldKill9(t, true, true) })
	t.Run("broker-down", func(t *testing.T) { testSparkplugHeldKill9(t, false, false) })
}

func testSparkplugHeldKill9(t *testing.T, hostOffline, hostBackFirst bool) {
	sim := startSim(t, 20*time.Millisecond)
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	host := startSpHost(t, mosq.URL(), "plant")
	isolate(t) // the children's state directory and API port
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	sp := config.Sparkplug{}
	if hostOffline {
		sp.PrimaryHostID = "scada"
	}
	write := func(fields ...config.Field) {
		c := &config.Config{
			Gateway:   config.Gateway{PublisherID: "e2e"},
			Endpoints: []config.Endpoint{simEndpoint("sim", sim.url())},
			WriterGroups: []config.WriterGroup{{
				Name: "line", Endpoint: "sim", PublishingInterval: dur(20 * time.Millisecond),
				Writers: []config.DataSetWriter{writer("demo", fields...)},
			}},
			Sinks: sparkplugSink(mosq.URL(), sp),
		}
		if err := os.WriteFile(path, []byte(marshalConfig(t, c)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(field("Counter", server.NodeCounter))
	first := startGatewayChild(t, path, "GORACE=atexit_sleep_ms=0")
	var second *gatewayChild
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the killed gateway:\n%s", first.stderr.String())
			if second != nil {
				t.Logf("the gateway started again:\n%s", second.stderr.String())
			}
		}
	})
	status := childStatus(t, first)
	if !hostOffline {
		host.waitFor(nil, "DDATA of the first process", 0, 3, kind("DDATA", "line.demo"))
		mosq.Stop()
	}
	waitUntil(t, nil, e2eWait, "the node holding data", func() bool {
		st, ok := status()
		want := sparkplug.StateWaiting
		if !hostOffline {
			want = sparkplug.StateOffline
		}
		return ok && st.Sparkplug[0].State == want && st.Sparkplug[0].Store.Messages >= 30
	})
	// The upstream stops; once its session is down and everything the
	// node was given is in the log, the process is killed.
	sim.stop()
	var held int
	waitUntil(t, nil, e2eWait, "what the node held committed to the log", func() bool {
		st, ok := status()
		if !ok || len(st.Endpoints) != 1 || st.Endpoints[0].State == "Connected" {
			return false
		}
		sp := st.Sparkplug[0]
		for _, s := range st.Sinks {
			if s.Name == "scada" && s.Enqueued != s.Confirmed {
				return false
			}
		}
		for _, s := range st.Store.Streams {
			if s.Name == sparkplug.StreamName("scada") {
				held = sp.Store.Messages
				return s.Pending == 0 && int(s.Records) == held && sp.Store.Stream == s.Name && s.GiveWay
			}
		}
		return false
	})
	first.kill()
	if n := len(host.find(kind("NBIRTH", ""))); hostOffline && n != 0 {
		t.Fatalf("%d NBIRTHs while the host was offline", n)
	}
	if !hostOffline {
		mosq.Start()
		host.waitSubscribed()
	}

	sim.restart()
	write(field("Sine", server.NodeSine), field("Counter", server.NodeCounter))
	mark := len(host.all())
	if hostBackFirst {
		host.state("scada", true, time.Now().UnixMilli())
	}
	second = startGatewayChild(t, path, "GORACE=atexit_sleep_ms=0")
	status = childStatus(t, second)
	if hostOffline && !hostBackFirst {
		waitUntil(t, nil, e2eWait, "the node started again, waiting for the host", func() bool {
			st, ok := status()
			return ok && st.Sparkplug[0].State == sparkplug.StateWaiting && st.Sparkplug[0].Store.Messages >= held
		})
		host.state("scada", true, time.Now().UnixMilli())
	}
	host.waitFor(nil, "live DDATA after the held data", mark, 5, func(m spMsg) bool {
		return m.kind == "DDATA" && len(m.p.Metrics) > 0 && !m.p.Metrics[len(m.p.Metrics)-1].GetIsHistorical()
	})
	msgs := host.all()
	s := checkSparkplug(t, msgs, "gw1")
	alias := s.aliases["line.demo"]["Counter"]
	vals, after, afterHist := checkHeldThenLive(t, msgs[mark:], alias, held)
	st, _ := status()
	node := st.Sparkplug[0]
	if node.StaleMetrics != 0 || node.Store.Messages != 0 || node.Store.Dropped != 0 || node.Historical < uint64(held) {
		t.Errorf("node after the drain: %+v", node)
	}
	t.Logf("held before the kill: %d DDATA, Counter %v..%v (alias %d after the restart); then %d values, %d live; %d stale",
		held, vals[0], vals[len(vals)-1], alias, len(after), len(after)-countTrue(afterHist), node.Stale)
	second.stop(t)
}

// checkHeldThenLive checks the device line.demo's DDATA after the births
// of a process started again: first the held DDATA the process before it
// left, every metric historical, the Counter (alias) going up by one from
// each to the next; then the new process's own, in order to live data
// (the Counter may jump between the two: the gateway was away). It
// returns the held values and the later ones.
func checkHeldThenLive(t *testing.T, msgs []spMsg, alias uint64, held int) (vals, after []float64, afterHist []bool) {
	t.Helper()
	var data []spMsg
	for _, m := range msgs {
		if m.kind == "DDATA" && m.device == "line.demo" {
			data = append(data, m)
		}
	}
	if len(data) < held {
		t.Fatalf("%d DDATA after the births, want at least the %d held before", len(data), held)
	}
	vals, hist := counterValues(data[:held], "line.demo", alias)
	for i := range vals {
		if !hist[i] || i > 0 && vals[i] != vals[i-1]+1 {
			t.Fatalf("held before: Counter %v (historical %v) at %d of %v", vals[i], hist[i], i, vals)
		}
	}
	if len(vals) < held {
		t.Fatalf("%d Counter values in the %d held DDATA", len(vals), held)
	}
	after, afterHist = counterValues(data[held:], "line.demo", alias)
	for i := 1; i < len(after); i++ {
		if after[i] != after[i-1]+1 {
			t.Errorf("after the held data: Counter %v after %v (historical %v, %v)", after[i], after[i-1], afterHist[i-1], afterHist[i])
		}
	}
	return vals, after, afterHist
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// TestSparkplugHeldAcrossStop: a gateway stopped (gracefully) while its
// Sparkplug node holds data for the offline host keeps it in the log; the
// next start sends it after its births, in order, as history. A start
// without that Sparkplug sink drops what the log held for it (logged).
func TestSparkplugHeldAcrossStop(t *testing.T) {
	sim := startSim(t, 20*time.Millisecond)
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	host := startSpHost(t, mosq.URL(), "plant")
	state := t.TempDir()
	cfg := func(sinkName string) *config.Config {
		c := standalone(sim.url())
		c.Gateway = config.Gateway{PublisherID: "e2e", StateDir: state, ShutdownTimeout: dur(5 * time.Second)}
		c.WriterGroups = []config.WriterGroup{{
			Name: "line", Endpoint: "sim", PublishingInterval: dur(20 * time.Millisecond),
			Writers: []config.DataSetWriter{writer("demo", field("Counter", server.NodeCounter))},
		}}
		c.Sinks = config.Sinks{MQTT: []config.MQTTSink{{Name: sinkName, URL: mosq.URL(),
			Sparkplug: &config.Sparkplug{GroupID: "plant", EdgeNodeID: "gw1", PrimaryHostID: "scada"}}}}
		parsed, _, err := config.Parse([]byte(marshalConfig(t, c)), "test")
		if err != nil {
			t.Fatal(err)
		}
		return parsed
	}
	start := func(c *config.Config) (*gateway.Gateway, *lockedBuffer) {
		t.Helper()
		log := &lockedBuffer{}
		gw, err := gateway.New(c, gateway.Options{Logger: newTestLogger(log)})
		if err == nil {
			err = gw.Start(context.Background())
		}
		if err != nil {
			t.Fatal(err)
		}
		return gw, log
	}
	stop := func(gw *gateway.Gateway) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := gw.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	node := func(gw *gateway.Gateway) sparkplug.Stats { return gw.Stats().Sparkplug[0] }

	gw, log := start(cfg("scada"))
	waitUntil(t, nil, e2eWait, "the node holding data", func() bool { return node(gw).Store.Messages >= 20 })
	stop(gw)
	held := node(gw).Store.Messages
	if !strings.Contains(log.String(), "kept, for the next start's births") {
		t.Errorf("no word of the held data kept at the stop:\n%s", log.String())
	}

	gw, _ = start(cfg("scada"))
	if st := node(gw); st.Store.Messages < held || st.State == sparkplug.StateOnline {
		t.Fatalf("started again: %+v, want the %d held", st, held)
	}
	mark := len(host.all())
	host.state("scada", true, time.Now().UnixMilli())
	host.waitFor(nil, "live DDATA after the held data", mark, 5, func(m spMsg) bool {
		return m.kind == "DDATA" && len(m.p.Metrics) > 0 && !m.p.Metrics[0].GetIsHistorical()
	})
	msgs := host.all()
	s := checkSparkplug(t, msgs, "gw1")
	checkHeldThenLive(t, msgs[mark:], s.aliases["line.demo"]["Counter"], held)
	// The host goes: the node holds again, and stops with it held.
	host.state("scada", false, time.Now().UnixMilli())
	waitUntil(t, nil, e2eWait, "the node holding data again", func() bool { return node(gw).Store.Messages >= 5 })
	stop(gw)

	gw, log = start(cfg("other"))
	defer stop(gw)
	waitUntil(t, nil, e2eWait, "the stream of the Sparkplug sink no longer configured dropped", func() bool {
		for _, st := range gw.StoreStats().Streams {
			if st.Name == sparkplug.StreamName("scada") {
				return false
			}
		}
		return true
	})
	if !strings.Contains(log.String(), "no longer configured held for its host is dropped") {
		t.Errorf("no word of the dropped held data:\n%s", log.String())
	}
}
