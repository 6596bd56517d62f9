package gateway_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/uagate/gateway/api"
	"github.com/uagate/gateway/bridge/config"
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
	var data []spMsg
	for _, m := range msgs[mark:] {
		if m.kind == "DDATA" && m.device == "line.demo" {
			data = append(data, m)
		}
	}
	if len(data) < held {
		t.Fatalf("%d DDATA after the births, want at least the %d held before the kill", len(data), held)
	}
	// The killed process's: held DDATA, every metric historical, the
	// Counter going up by one from each to the next.
	vals, hist := counterValues(data[:held], "line.demo", alias)
	for i := range vals {
		if !hist[i] || i > 0 && vals[i] != vals[i-1]+1 {
			t.Fatalf("held before the kill: Counter %v (historical %v) at %d of %v", vals[i], hist[i], i, vals)
		}
	}
	if len(vals) < held {
		t.Fatalf("%d Counter values in the %d held DDATA", len(vals), held)
	}
	// Then the new process's own (the upstream started again, its counter
	// anew): in order, to live data.
	after, afterHist := counterValues(data[held:], "line.demo", alias)
	for i := 1; i < len(after); i++ {
		if after[i] != after[i-1]+1 {
			t.Errorf("after the held data: Counter %v after %v (historical %v, %v)", after[i], after[i-1], afterHist[i-1], afterHist[i])
		}
	}
	st, _ := status()
	node := st.Sparkplug[0]
	if node.StaleMetrics != 0 || node.Store.Messages != 0 || node.Store.Dropped != 0 || node.Historical < uint64(held) {
		t.Errorf("node after the drain: %+v", node)
	}
	t.Logf("held before the kill: %d DDATA, Counter %v..%v (alias %d after the restart); then %d values, %d live; %d stale",
		held, vals[0], vals[len(vals)-1], alias, len(after), len(after)-countTrue(afterHist), node.Stale)
	second.stop(t)
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
