package gateway_test

import (
	"context"
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

// TestBackfillBrokerOutage: the at-least-once MQTT sink's broker dies for a
// few seconds; the writer group holds its acknowledgements, stops asking
// the server for more, and the server's small queues overflow: values lost
// upstream, on both sinks (the at-most-once NATS sink waits with the
// group). With backfill: history they come back from the server's history,
// marked, in order: neither subscriber misses a value, the at-most-once one
// gets none twice.
func TestBackfillBrokerOutage(t *testing.T) {
	const counters = 10
	period := 20 * time.Millisecond
	onHistorizingCounters(t, counters, period, testBackfillBrokerOutage)
}

// onHistorizingCounters runs test against our simulator and against
// node-opcua, each with counters historizing counters changing every period.
func onHistorizingCounters(t *testing.T, counters int, period time.Duration, test func(*testing.T, restartUpstream)) {
	t.Run("sim", func(t *testing.T) {
		srv := startCounterServer(t, &server.Config{}, counters, period)
		up := restartUpstream{url: srv.URL()}
		for i := range counters {
			up.nodes = append(up.nodes, server.LoadNode(0, i))
		}
		test(t, up)
	})
	t.Run("node-opcua", func(t *testing.T) {
		peer := nodeopcua.Start(t, nodeopcua.Options{LargeCount: -1, CounterInterval: period,
			Env: []string{"COUNTERS=" + strconv.Itoa(counters), "HISTORY_VALUES=3000"}})
		up := restartUpstream{url: peer.URL}
		for i := range counters {
			up.nodes = append(up.nodes, nodeopcua.CounterNode(i))
		}
		test(t, up)
	})
}

func testBackfillBrokerOutage(t *testing.T, up restartUpstream) {
	counters := len(up.nodes)
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{Persistence: true})
	ns := brokertest.StartNATS(t, brokertest.NATSOptions{})
	onMQTT := subscribeMQTT(t, mosq.URL(), "backfill-sub", "", "", "opcua/json/data/#")
	onNATS := subscribeNATS(t, ns.URL(), "opcua.json.data.>")

	w := writer("counters")
	for i, n := range up.nodes {
		w.Fields = append(w.Fields, field(counterField(i), n))
	}
	c := standalone(up.url)
	c.Gateway.PublisherID = "bf"
	// Without the store-and-forward log, which would hold the outage's
	// values itself: the server's small queues are the only buffer, as
	// when values are lost upstream anyway (the case backfill is for).
	c.StoreAndForward.Enabled = ptr(false)
	c.WriterGroups = []config.WriterGroup{{
		Name: "g", Endpoint: "sim", PublishingInterval: dur(50 * time.Millisecond), MaxUnacked: 8,
		Backfill: config.BackfillHistory,
		// A queue of a few publishing intervals: it overflows while the
		// group waits for the broker.
		Nodes:   config.NodeDefaults{SamplingInterval: ptr(dur(0)), QueueSize: 10},
		Writers: []config.DataSetWriter{w},
	}}
	c.Sinks = config.Sinks{
		MQTT: []config.MQTTSink{{Name: "mqtt", URL: mosq.URL(), QoS: ptr(1), Delivery: config.Delivery{Guarantee: config.AtLeastOnce}}},
		NATS: []config.NATSSink{{Name: "nats", URL: ns.URL()}},
	}
	g := startGateway(t, "gateway.yaml", marshalConfig(t, c))
	onMQTT.waitCount(t, g, "g", "counters", 40)
	saved := strings.Count(mosq.Log(), "Saving in-memory database")
	waitUntil(t, g, e2eWait, "mosquitto to save its sessions", func() bool {
		return strings.Count(mosq.Log(), "Saving in-memory database") > saved
	})
	mosq.Kill()
	// Down for two reconnects (1 s, 2 s): the group is held at MaxUnacked
	// long before, and its queues of 10 samples (200 ms) overflow.
	waitUntil(t, g, e2eWait, "two failed reconnects", func() bool { return g.outputStats("mqtt").ConnectFailures >= 2 })
	mosq.Start()
	// The values after the overflow carry the bit when the group asks again.
	waitUntil(t, g, e2eWait, "the overflow and the backfill", func() bool {
		gs := g.groupStats("g")
		return gs.Overflows > 0 && gs.Backfilled > 0
	})
	before := onMQTT.count("g", "counters")
	onMQTT.waitCount(t, g, "g", "counters", before+40)
	onNATS.waitCount(t, g, "g", "counters", onNATS.count("g", "counters")+40)
	// The backfill comes in a burst, ahead of what the subscribers have
	// taken (mosquitto hands QoS 1 messages on 20 in flight at a time):
	// wait until the gaps are filled, then check.
	var alo, amo valueReport
	testutil.Eventually(e2eWait, func() bool {
		alo = checkValues(t, onMQTT.all(t), "g", "counters", counters)
		amo = checkValues(t, onNATS.all(t), "g", "counters", counters)
		return alo.lost == 0 && amo.lost == 0
	})
	gs := g.groupStats("g")
	t.Logf("group: %d overflows, %d values backfilled in %d ranges, %d missed", gs.Overflows, gs.Backfilled, gs.BackfillRanges, gs.BackfillMissed)
	t.Logf("at-least-once (MQTT): %v", alo)
	t.Logf("at-most-once (NATS): %v", amo)
	if alo.lost > 0 || amo.lost > 0 {
		t.Logf("outputs: mqtt %+v; nats %+v", g.outputStats("mqtt"), g.outputStats("nats"))
		t.Errorf("values lost: %d at the at-least-once sink %v, %d at the at-most-once sink %v", alo.lost, alo.lostSample, amo.lost, amo.lostSample)
	}
	if amo.dups > 0 {
		t.Errorf("at-most-once sink: %d duplicates", amo.dups)
	}
	if alo.backfillDSMs == 0 || amo.backfillDSMs == 0 || gs.BackfillMissed > 0 {
		t.Errorf("backfill: %d and %d DataSetMessages, %d ranges missed", alo.backfillDSMs, amo.backfillDSMs, gs.BackfillMissed)
	}
}

// TestBackfillFinishedBeforeStop: a graceful stop while a backfill reads
// the server's history lets it finish before the session is let go (every
// response of the server is slowed by a proxy, so that the stop comes
// while the reads are under way). Cut short, the values would be lost for
// good: a restart that takes the subscription back does not see the gap
// again.
func TestBackfillFinishedBeforeStop(t *testing.T) {
	const counters = 10
	period := 100 * time.Millisecond
	onHistorizingCounters(t, counters, period, testBackfillFinishedBeforeStop)
}

func testBackfillFinishedBeforeStop(t *testing.T, up restartUpstream) {
	// The server behind a proxy (which keeps the endpoint URL's path).
	hostPort, path, _ := strings.Cut(strings.TrimPrefix(up.url, "opc.tcp://"), "/")
	proxy := brokertest.StartProxy(t, hostPort)
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	w := writer("counters")
	for i, n := range up.nodes {
		w.Fields = append(w.Fields, field(counterField(i), n))
	}
	url := "opc.tcp://" + proxy.Addr()
	if path != "" {
		url += "/" + path
	}
	c := standalone(url)
	c.Gateway = config.Gateway{PublisherID: "bf", ShutdownTimeout: dur(30 * time.Second)}
	c.StoreAndForward.Enabled = ptr(false) // the server's queues overflow while the broker is away
	c.WriterGroups = []config.WriterGroup{{
		Name: "g", Endpoint: "sim", PublishingInterval: dur(50 * time.Millisecond), MaxUnacked: 8,
		Backfill: config.BackfillHistory,
		Nodes:    config.NodeDefaults{SamplingInterval: ptr(dur(0)), QueueSize: 10}, // a second
		Writers:  []config.DataSetWriter{w},
	}}
	c.Sinks = config.Sinks{MQTT: []config.MQTTSink{{Name: "mqtt", URL: mosq.URL(), QoS: ptr(1), Delivery: config.Delivery{Guarantee: config.AtLeastOnce}}}}
	g := startGateway(t, "gateway.yaml", marshalConfig(t, c))
	waitUntil(t, g, e2eWait, "acknowledgements", func() bool { return g.groupStats("g").Acked > 10 })
	mosq.Kill()
	waitUntil(t, g, e2eWait, "two failed reconnects", func() bool { return g.outputStats("mqtt").ConnectFailures >= 2 })
	// Slow enough that the reads are under way when the stop comes, not so
	// slow that the queues (a second of values) overflow again.
	proxy.SetDelay(300 * time.Millisecond)
	mosq.Start()
	waitUntil(t, g, 2*e2eWait, "the overflow", func() bool { return g.groupStats("g").Overflows > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.gw.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	log := g.log.String()
	filled := logLine(log, "values lost upstream filled from the server's history")
	if strings.Contains(log, "backfill: HistoryRead failed") || strings.Contains(log, "reading Historizing failed") ||
		filled == "" || strings.Contains(filled, "values=0") {
		t.Errorf("the stop cut the backfill short; gateway log:\n%s", g.logTail())
	}
}

// startCounterServer starts our simulation server on cfg (its address,
// logger and Sim set here) with one Load folder of counters Int32 counters
// ticking every period, each historizing its last minute, and closes it
// with the test.
func startCounterServer(t *testing.T, cfg *server.Config, counters int, period time.Duration) *server.Server {
	t.Helper()
	cfg.Address, cfg.Logger = "127.0.0.1:0", quietLogger()
	cfg.Sim = server.HistorizingCounters(counters, period)
	srv, err := server.New(cfg)
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}
