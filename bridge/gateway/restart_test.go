package gateway_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// Restarts against any server: a gateway child process publishing many
// fast counters of an upstream (node-opcua, or our simulation server) to an
// at-least-once MQTT sink (mosquitto, QoS 1) and an at-most-once NATS core
// sink is killed with SIGKILL and started again after a while. Every
// counter value must reach the at-least-once sink (duplicates only within
// the unconfirmed window, each in a message marked redelivered), none may
// reach the at-most-once sink twice, and the SequenceNumbers of every
// writer go on from where the killed process stopped.
//
// CI sizes: 20 counters every 20 ms (1,000 values/s). UAGATE_TEST_RESTART_LARGE=1
// runs the sizes: 100 counters every 10 ms (10,000 values/s).

// restartSizes are the counters, their period and how long each run
// publishes.
type restartSizes struct {
	counters int
	period   time.Duration
	run      time.Duration
}

// queue is a monitored-item queue that holds what changes while the
// gateway is down for down, and then some.
func (s restartSizes) queue(down time.Duration) uint32 {
	return uint32(2 * (down + 2*time.Second) / s.period)
}

func restartSizesFor() restartSizes {
	if os.Getenv("UAGATE_TEST_RESTART_LARGE") != "" {
		return restartSizes{counters: 100, period: 10 * time.Millisecond, run: 10 * time.Second}
	}
	return restartSizes{counters: 20, period: 20 * time.Millisecond, run: 3 * time.Second}
}

// restartUpstream is the upstream of a restart test: its URL and the node
// ids of its counters.
type restartUpstream struct {
	url    string
	nodes  []string
	static string // a variable that does not change: sent once, never again
}

func counterField(i int) string { return "C" + strconv.Itoa(i) }

// staticField is the field of restartUpstream.static.
const staticField = "S"

// restartConfig is the gateway configuration of a restart test.
func restartConfig(up restartUpstream, ep config.Endpoint, queue uint32, mqttURL, natsURL, stateDir string) *config.Config {
	w := writer("counters")
	for i, n := range up.nodes {
		w.Fields = append(w.Fields, field(counterField(i), n))
	}
	if up.static != "" {
		w.Fields = append(w.Fields, field(staticField, up.static))
	}
	ep.Name, ep.URL = "up", up.url
	ep.AutoAccept = true
	secrets := "" // secret files are read from the secret directories only
	if f := ep.Identity.Password.File; f != "" {
		secrets = filepath.Dir(f)
	}
	return &config.Config{
		Gateway:   config.Gateway{PublisherID: "rs", StateDir: stateDir, ShutdownTimeout: dur(5 * time.Second), SecretsDir: secrets},
		Embedded:  config.Embedded{Sim: config.EmbeddedPart{Enabled: ptr(false)}, MQTT: config.EmbeddedPart{Enabled: ptr(false)}, NATS: config.EmbeddedPart{Enabled: ptr(false)}},
		HTTP:      config.HTTP{Disabled: true},
		Endpoints: []config.Endpoint{ep},
		WriterGroups: []config.WriterGroup{{
			Name: "g", Endpoint: "up", PublishingInterval: dur(50 * time.Millisecond),
			// The server queues what changes while the gateway is away.
			Nodes:   config.NodeDefaults{SamplingInterval: ptr(dur(0)), QueueSize: queue},
			Writers: []config.DataSetWriter{w},
		}},
		Sinks: config.Sinks{
			MQTT: []config.MQTTSink{{Name: "mqtt", URL: mqttURL, QoS: ptr(1), Delivery: config.Delivery{Guarantee: config.AtLeastOnce}}},
			NATS: []config.NATSSink{{Name: "nats", URL: natsURL}},
		},
	}
}

// valueReport is what checkValues found in one sink's messages.
type valueReport struct {
	dsms, values      int
	lost, dups        int
	restated          int // key frame values restating their field's last value
	backfillDSMs      int // DataSetMessages of backfill (values read from the server's history)
	staticAgain       int // delta frames carrying the static field after its first value
	dupUnmarked       int // duplicates in messages not marked redelivered
	lostSample        []string
	seqRepeats        int // DataSetMessages whose SequenceNumber came before with the same content
	seqReused         int // … with other content
	seqBackwards      int // SequenceNumbers lower than one seen before, in arrival order (not repeats)
	firstSeq, lastSeq uint32
}

func (r valueReport) String() string {
	return fmt.Sprintf("%d DataSetMessages (%d backfill; SequenceNumber %d..%d), %d values (%d key frame restatements), %d lost %v, %d duplicates (%d unmarked), SequenceNumbers: %d repeated, %d reused, %d backwards; the static field again %d",
		r.dsms, r.backfillDSMs, r.firstSeq, r.lastSeq, r.values, r.restated, r.lost, r.lostSample, r.dups, r.dupUnmarked, r.seqRepeats, r.seqReused, r.seqBackwards, r.staticAgain)
}

// checkValues counts, over the DataSetMessages of group/writer, every
// counter field's values: those missing between its lowest and highest, and
// those seen more than once; and the SequenceNumbers seen again. A key
// frame carries every field, those that did not change from the cache: a
// value restating the last one its field had on the stream is not a
// duplicate (it is counted apart).
func checkValues(t *testing.T, msgs []*e2eMsg, group, writer string, fields int) valueReport {
	t.Helper()
	var r valueReport
	seen := make([]map[int64]int, fields)
	for i := range seen {
		seen[i] = map[int64]int{}
	}
	bySeq := map[uint32]string{}
	last := make([]int64, fields)
	staticSeen := false
	var maxSeq uint32
	for _, m := range msgs {
		if m.MessageType != "ua-data" || m.WriterGroupName != group {
			continue
		}
		redelivered := strings.HasPrefix(m.MessageId, bridge.RedeliveredPrefix)
		backfill := strings.HasPrefix(m.MessageId, bridge.BackfillPrefix)
		for _, d := range m.dsms {
			if d.DataSetWriterName != writer || d.MessageType == "ua-keepalive" {
				continue
			}
			r.dsms++
			if backfill {
				r.backfillDSMs++
			}
			if _, ok := d.Payload[staticField]; ok {
				if staticSeen && d.MessageType != "ua-keyframe" {
					r.staticAgain++
				}
				staticSeen = true
			}
			content := fmt.Sprint(d.Payload)
			if old, ok := bySeq[d.SequenceNumber]; ok {
				// A replay (marked redelivered) repeats the first time's
				// SequenceNumbers; a key frame then carries only the
				// message's values.
				if old == content || redelivered {
					r.seqRepeats++
				} else {
					r.seqReused++
				}
			} else if d.SequenceNumber < maxSeq {
				r.seqBackwards++
			}
			bySeq[d.SequenceNumber] = content
			if r.firstSeq == 0 {
				r.firstSeq = d.SequenceNumber
			}
			maxSeq = max(maxSeq, d.SequenceNumber)
			r.lastSeq = d.SequenceNumber
			for i := range fields {
				raw, ok := d.Payload[counterField(i)]
				if !ok {
					continue
				}
				v, err := counterValue(raw)
				if err != nil {
					continue // a Bad status: no value yet
				}
				r.values++
				if d.MessageType == "ua-keyframe" && seen[i][int64(v)] > 0 && last[i] == int64(v) {
					r.restated++
					continue
				}
				last[i] = int64(v)
				seen[i][int64(v)]++
				if seen[i][int64(v)] > 1 {
					r.dups++
					if !redelivered {
						r.dupUnmarked++
					}
				}
			}
		}
	}
	for i, s := range seen {
		if len(s) == 0 {
			t.Fatalf("%s/%s: no values of %s", group, writer, counterField(i))
		}
		lo, hi := int64(1<<62), int64(-1<<62)
		for v := range s {
			lo, hi = min(lo, v), max(hi, v)
		}
		var missing []int64
		for v := lo; v <= hi; v++ {
			if s[v] == 0 {
				missing = append(missing, v)
			}
		}
		r.lost += len(missing)
		if len(missing) > 0 && len(r.lostSample) < 8 {
			sort.Slice(missing, func(a, b int) bool { return missing[a] < missing[b] })
			r.lostSample = append(r.lostSample, fmt.Sprintf("%s:%d..%d(%d)", counterField(i), missing[0], missing[len(missing)-1], len(missing)))
		}
	}
	return r
}

// restartScenario runs the gateway on cfg, kills it after sizes.run, starts
// it again after down, lets it run for sizes.run, stops it gracefully and
// returns both sinks' reports.
func restartScenario(t *testing.T, cfg *config.Config, sizes restartSizes, down time.Duration, mqttURL, natsURL string) (alo, amo valueReport, log1, log2 string) {
	t.Helper()
	onMQTT := subscribeMQTT(t, mqttURL, "restart-sub", "", "", "opcua/json/data/#")
	onNATS := subscribeNATS(t, natsURL, "opcua.json.data.>")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(marshalConfig(t, cfg)), 0o600); err != nil {
		t.Fatal(err)
	}
	perRun := int(sizes.run / (50 * time.Millisecond)) // DataSetMessages: one per publish at least
	first := startGatewayChild(t, cfgPath)
	waitChild(t, first, "the first run's messages", func() bool {
		return onMQTT.count("g", "counters") >= perRun && onNATS.count("g", "counters") >= perRun
	})
	first.kill()
	log1 = first.stderr.String()
	// Down on purpose for a while (not waiting for a condition): the
	// server keeps the session and the subscription, and queues.
	<-time.After(down)
	before := onMQTT.count("g", "counters")
	second := startGatewayChild(t, cfgPath)
	waitChild(t, second, "the second run's messages", func() bool {
		return onMQTT.count("g", "counters") >= before+perRun
	})
	fields := 0
	for _, f := range cfg.WriterGroups[0].Writers[0].Fields {
		if f.Name != staticField {
			fields++
		}
	}
	// A backfill comes as a burst that counts toward those messages, and
	// may come in parts: a stop would cut it short. Wait (a while) until
	// the at-least-once subscriber has every value; the checks below say
	// what is missing if it never does.
	seen := -1
	testutil.Eventually(30*time.Second, func() bool {
		n := onMQTT.count("g", "counters")
		if n == seen {
			return false
		}
		seen = n
		return checkValues(t, onMQTT.all(t), "g", "counters", fields).lost == 0
	})
	second.stop(t)
	log2 = second.stderr.String()
	// What the brokers still hold for the subscribers arrives.
	settled := func(c *collector) func() bool {
		n := -1
		return func() bool {
			m := c.count("g", "counters")
			same := m == n
			n = m
			return same
		}
	}
	for _, c := range []*collector{onMQTT, onNATS} {
		s := settled(c)
		testutil.WaitFor(t, 30*time.Second, "the subscriber to settle", func() bool {
			return testutil.Consistently(500*time.Millisecond, s)
		})
	}
	alo = checkValues(t, onMQTT.all(t), "g", "counters", fields)
	amo = checkValues(t, onNATS.all(t), "g", "counters", fields)
	return alo, amo, log1, log2
}

// waitChild waits for cond, failing with the child's log.
func waitChild(t *testing.T, g *gatewayChild, what string, cond func() bool) {
	t.Helper()
	if !testutil.Eventually(60*time.Second, cond) {
		t.Fatalf("timed out waiting for %s; gateway log:\n%s", what, tail(g.stderr.String(), 24<<10))
	}
}

// restartIdentities are the two ways in: anonymous over None (node-opcua
// and our server refuse to transfer its subscriptions: the session must be
// activated again), and a user over Basic256Sha256 SignAndEncrypt.
func restartIdentities(t *testing.T, user, password string) []struct {
	name string
	ep   config.Endpoint
} {
	return []struct {
		name string
		ep   config.Endpoint
	}{
		{"anonymous", config.Endpoint{SecurityPolicy: "None", SecurityMode: "None"}},
		{"user", config.Endpoint{SecurityPolicy: "Basic256Sha256", SecurityMode: "SignAndEncrypt",
			Identity: config.Identity{Username: user, Password: config.Secret{File: secretFile(t, password)}}}},
	}
}

// restartDowns are how long the gateway stays down: 3 s, and 30 s for
// the anonymous case (the others behind UAGATE_TEST_RESTART_LARGE).
func restartDowns(name string) []time.Duration {
	if name == "anonymous" || os.Getenv("UAGATE_TEST_RESTART_LARGE") != "" {
		return []time.Duration{3 * time.Second, 30 * time.Second}
	}
	return []time.Duration{3 * time.Second}
}

// runRestarts runs the restart scenario for every identity and down time,
// and once past the session's timeout: anonymous over None, the session
// gone and the subscription not transferable, so it is created anew; what
// changed meanwhile comes from the server's history (backfill: history).
func runRestarts(t *testing.T, up restartUpstream, sizes restartSizes, user, password string) {
	run := func(name string, ep config.Endpoint, down time.Duration, backfill bool) {
		t.Run(name, func(t *testing.T) {
			mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
			ns := brokertest.StartNATS(t, brokertest.NATSOptions{})
			cfg := restartConfig(up, ep, sizes.queue(down), mosq.URL(), ns.URL(), filepath.Join(t.TempDir(), "state"))
			if backfill {
				cfg.WriterGroups[0].Backfill = config.BackfillHistory
			}
			alo, amo, log1, log2 := restartScenario(t, cfg, sizes, down, mosq.URL(), ns.URL())
			t.Logf("at-least-once (MQTT): %v", alo)
			t.Logf("at-most-once (NATS): %v", amo)
			checkRestart(t, alo, amo, cfg, log1, log2)
			switch {
			case backfill:
				if !strings.Contains(log2, "filled from the server's history") || alo.backfillDSMs == 0 || amo.backfillDSMs == 0 {
					t.Errorf("nothing filled from the server's history:\n%s", tail(log2, 16<<10))
				}
			case !strings.Contains(log2, "session of an earlier process reactivated"):
				t.Errorf("the second run did not activate the first run's session again:\n%s", tail(log2, 16<<10))
			}
		})
	}
	for _, c := range restartIdentities(t, user, password) {
		for _, down := range restartDowns(c.name) {
			run(fmt.Sprintf("%s/down=%v", c.name, down), c.ep, down, false)
		}
	}
	ep := config.Endpoint{SecurityPolicy: "None", SecurityMode: "None", SessionTimeout: dur(2 * time.Second)}
	run("anonymous/past-session-timeout", ep, 8*time.Second, true)
}

// TestRestartNodeOPCUA: kill -9 of the gateway against node-opcua.
func TestRestartNodeOPCUA(t *testing.T) {
	sizes := restartSizesFor()
	peer := nodeopcua.Start(t, nodeopcua.Options{LargeCount: -1, CounterInterval: sizes.period,
		Env: []string{"COUNTERS=" + strconv.Itoa(sizes.counters), "HISTORY_VALUES=" + strconv.Itoa(int(time.Minute/sizes.period))}})
	up := restartUpstream{url: peer.URL, static: nodeopcua.NodeInt32}
	for i := range sizes.counters {
		up.nodes = append(up.nodes, nodeopcua.CounterNode(i))
	}
	runRestarts(t, up, sizes, "user1", nodeopcua.Users["user1"])
}

// TestRestartSim: kill -9 of the gateway against our simulation server.
func TestRestartSim(t *testing.T) {
	sizes := restartSizesFor()
	srv := startCounterServer(t, &server.Config{
		MinSessionTimeout: time.Second, // the case past the session's timeout
		Users:             map[string]string{"user1": "password1"},
	}, sizes.counters, sizes.period)
	up := restartUpstream{url: srv.URL(), static: server.StaticNode(ua.TypeInt32, false)}
	for i := range sizes.counters {
		up.nodes = append(up.nodes, server.LoadNode(0, i))
	}
	runRestarts(t, up, sizes, "user1", "password1")
}

// checkRestart judges a restart scenario's reports.
func checkRestart(t *testing.T, alo, amo valueReport, cfg *config.Config, log1, log2 string) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
	}
	if alo.lost > 0 {
		fail("at-least-once sink: %d values lost %v", alo.lost, alo.lostSample)
	}
	// The unconfirmed window: MaxUnacked notification messages of at most
	// the values of two publishing intervals per counter.
	fields := len(cfg.WriterGroups[0].Writers[0].Fields)
	window := 64 * fields * 4
	if alo.dups > window {
		fail("at-least-once sink: %d duplicates, more than the unconfirmed window (%d)", alo.dups, window)
	}
	if alo.dupUnmarked > 0 {
		fail("at-least-once sink: %d duplicates in messages not marked redelivered", alo.dupUnmarked)
	}
	if amo.dups > 0 {
		fail("at-most-once sink: %d duplicates", amo.dups)
	}
	if amo.staticAgain > 0 || alo.staticAgain > 0 {
		fail("the static field's value sent again after its first: %d times at the at-most-once sink, %d at the at-least-once sink", amo.staticAgain, alo.staticAgain)
	}
	for _, r := range []valueReport{alo, amo} {
		if r.seqReused > 0 || r.seqBackwards > 0 {
			fail("SequenceNumbers did not go on across the restart: %d reused, %d backwards", r.seqReused, r.seqBackwards)
		}
	}
	if t.Failed() {
		t.Logf("first run:\n%s", tail(log1, 16<<10))
		t.Logf("second run:\n%s", tail(log2, 16<<10))
	}
}

// secretFile writes v to a file of a directory of the test's own and
// returns its path (marshalled configurations never carry a secret's
// value): the same path for the same test and value, so that a
// configuration written again (a reload) names the same secrets directory.
func secretFile(t *testing.T, v string) string {
	t.Helper()
	key := secretKey{t, v}
	secretFilesMu.Lock()
	defer secretFilesMu.Unlock()
	if p, ok := secretFiles[key]; ok {
		return p
	}
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
		t.Fatal(err)
	}
	secretFiles[key] = p
	t.Cleanup(func() {
		secretFilesMu.Lock()
		delete(secretFiles, key)
		secretFilesMu.Unlock()
	})
	return p
}

type secretKey struct {
	t *testing.T
	v string
}

var (
	secretFilesMu sync.Mutex
	secretFiles   = map[secretKey]string{}
)

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
