package gateway_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/server"
)

// TestScaleOutAnonymousHandover: under scale-out, a writer group on an
// anonymous session over None moves between replicas without losing a
// value — on a graceful handover and after a kill -9 of its holder. The
// servers refuse to transfer an anonymous user's subscription over an
// unsecured channel (node-opcua and our simulation server, Part 4
// §5.13.7); the session's state goes with the group's lease, and the next
// holder activates the same session on its own channel, its subscription
// still there with what the server queued meanwhile. Before, every
// handover created the subscription anew and lost what changed meanwhile.
func TestScaleOutAnonymousHandover(t *testing.T) {
	sizes := restartSizesFor()
	t.Run("node-opcua", func(t *testing.T) {
		peer := nodeopcua.Start(t, nodeopcua.Options{LargeCount: -1, CounterInterval: sizes.period,
			Env: []string{"COUNTERS=" + strconv.Itoa(sizes.counters)}})
		up := restartUpstream{url: peer.URL}
		for i := range sizes.counters {
			up.nodes = append(up.nodes, nodeopcua.CounterNode(i))
		}
		anonymousHandover(t, up, sizes)
	})
	t.Run("sim", func(t *testing.T) {
		srv := startCounterServer(t, &server.Config{}, sizes.counters, sizes.period)
		up := restartUpstream{url: srv.URL()}
		for i := range sizes.counters {
			up.nodes = append(up.nodes, server.LoadNode(0, i))
		}
		anonymousHandover(t, up, sizes)
	})
}

// anonymousHandover runs TestScaleOutAnonymousHandover against up.
func anonymousHandover(t *testing.T, up restartUpstream, sizes restartSizes) {
	nodes := startNATSCluster(t, 1)
	url := nodes[0].URL()
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	dir := t.TempDir()
	// The server's queues hold what changes while nobody serves the group:
	// a takeover after a kill takes 1.2 lease TTLs and a reconnect.
	ep := config.Endpoint{SecurityPolicy: "None", SecurityMode: "None"}
	cfg := restartConfig(up, ep, sizes.queue(2*scaleLeaseTTL), mosq.URL(), url, filepath.Join(dir, "unused"))
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(marshalConfig(t, cfg)), 0o600); err != nil {
		t.Fatal(err)
	}
	onMQTT := subscribeMQTT(t, mosq.URL(), "handover-sub", "", "", "opcua/json/data/#")
	onNATS := subscribeNATS(t, url, "opcua.json.data.>")
	gws, logs := startReplicas(t, cfgPath, url, dir, []string{"gw0", "gw1"})
	holder := func() string { return holdersOf(t, url, "g")["g"].Replica }
	perRun := int(sizes.run / (50 * time.Millisecond))
	// moved waits until other holds the group and the at-least-once sink
	// got perRun more messages.
	moved := func(what, other string) {
		t.Helper()
		before := onMQTT.count("g", "counters")
		if !testutil.Eventually(60*time.Second, func() bool {
			return holder() == other && onMQTT.count("g", "counters") >= before+perRun
		}) {
			t.Fatalf("%s: the group did not go on at %s (holder %q, %d → %d messages)\n%s", what, other, holder(), before, onMQTT.count("g", "counters"), logs())
		}
	}
	other := map[string]string{"gw0": "gw1", "gw1": "gw0"}
	if !testutil.Eventually(60*time.Second, func() bool { return holder() != "" && onMQTT.count("g", "counters") >= perRun }) {
		t.Fatalf("the group is not served\n%s", logs())
	}
	first := holder()
	// A graceful handover: the holder stops, the other takes the group.
	gws[first].stop(t)
	moved("graceful handover", other[first])
	fields := len(cfg.WriterGroups[0].Writers[0].Fields)
	// A graceful handover hands the exact position over: nothing twice,
	// not even marked.
	if r := checkValues(t, onNATS.all(t), "g", "counters", fields); r.lost > 0 || r.dups > 0 {
		t.Errorf("after the graceful handover, at-most-once sink: %v", r)
	}
	// The first comes back; the second is killed and the first takes the
	// group over once the lease expired.
	back, backLogs := startReplicas(t, cfgPath, url, dir, []string{first})
	gws[first] = back[first]
	second := other[first]
	gws[second].kill()
	moved("takeover after kill -9", first)
	gws[first].stop(t)

	for _, c := range []*collector{onMQTT, onNATS} {
		n := -1
		testutil.WaitFor(t, 30*time.Second, "the subscriber to settle", func() bool {
			return testutil.Consistently(500*time.Millisecond, func() bool {
				m := c.count("g", "counters")
				same := m == n
				n = m
				return same
			})
		})
	}
	alo := checkValues(t, onMQTT.all(t), "g", "counters", fields)
	amo := checkValues(t, onNATS.all(t), "g", "counters", fields)
	t.Logf("at-least-once (MQTT): %v", alo)
	t.Logf("at-most-once (NATS): %v", amo)
	all := logs() + backLogs()
	if alo.lost > 0 {
		t.Errorf("at-least-once sink: %d values lost %v", alo.lost, alo.lostSample)
	}
	if alo.dupUnmarked > 0 {
		t.Errorf("at-least-once sink: %d duplicates in messages not marked redelivered", alo.dupUnmarked)
	}
	// After a kill -9 the next holder knows what was handed over as of the
	// last record (saved every second): what came after it is sent again,
	// marked, to every sink — at most about a second's values.
	if amo.dupUnmarked > 0 || amo.dups > sizes.counters*int(time.Second/sizes.period) {
		t.Errorf("at-most-once sink: %d duplicates (%d unmarked), want at most a second's values, marked", amo.dups, amo.dupUnmarked)
	}
	for _, r := range []valueReport{alo, amo} {
		if r.seqReused > 0 || r.seqBackwards > 0 {
			t.Errorf("SequenceNumbers did not go on across the handovers: %d reused, %d backwards", r.seqReused, r.seqBackwards)
		}
	}
	if n := strings.Count(all, "session of an earlier process reactivated"); n < 2 {
		t.Errorf("the session was activated again %d times, want one per handover:\n%s", n, all)
	}
	if strings.Contains(all, "subscription to resume is gone") {
		t.Errorf("a holder created the subscription anew:\n%s", all)
	}
	if t.Failed() {
		t.Log(all)
	}
}
