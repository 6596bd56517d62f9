package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/gateway"
	"github.com/uagate/gateway/bridge/storelog"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/server"
)

// TestE2EBrokerOutageHoldsOnlyItself: with the store-and-forward log, an
// MQTT broker that is down holds its own sink only. Two upstreams (node-
// opcua's counter changing every 10 ms, our simulation server's every 50
// ms), each with a server queue of 10 changes (a small server limit) and
// maxUnacked 8 (without the log, at-least-once stops the subscription
// after 8 unconfirmed publishes: 0.4 s); an at-least-once QoS 1 MQTT sink
// on mosquitto, killed for a few seconds, and an at-most-once core NATS
// sink. While mosquitto is down the NATS subscriber goes on receiving;
// afterwards both have every counter value, the NATS one each once.
func TestE2EBrokerOutageHoldsOnlyItself(t *testing.T) {
	sim := startSim(t, 50*time.Millisecond)
	peer := nodeopcua.Start(t, nodeopcua.Options{LargeCount: -1, CounterInterval: 10 * time.Millisecond,
		Env: []string{"COUNTER_EXCEPTION_BASED=1"}})
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{Persistence: true})
	ns := brokertest.StartNATS(t, brokertest.NATSOptions{})
	onMQTT := subscribeMQTT(t, mosq.URL(), "e2e-outage", "", "", "opcua/json/#")
	onNATS := subscribeNATS(t, ns.URL(), "opcua.json.>")

	// Every change reaches the gateway: node-opcua's counter reports each
	// change (exception-based); the simulation server's changes every 50 ms
	// and is sampled every 5 ms.
	group := func(name, endpoint, node string, sampling time.Duration) config.WriterGroup {
		f := field("Counter", node)
		f.SamplingInterval, f.QueueSize = ptr(dur(sampling)), 10
		return config.WriterGroup{
			Name: name, Endpoint: endpoint, PublishingInterval: dur(50 * time.Millisecond), MaxUnacked: 8,
			Writers: []config.DataSetWriter{writer("counter", f)},
		}
	}
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		Gateway:      config.Gateway{PublisherID: "e2e"},
		Endpoints:    []config.Endpoint{simEndpoint("sim", sim.url()), simEndpoint("peer", peer.URL)},
		WriterGroups: []config.WriterGroup{group("sim", "sim", server.NodeCounter, 5*time.Millisecond), group("peer", "peer", nodeopcua.NodeCounter, 0)},
		Sinks: config.Sinks{
			MQTT: []config.MQTTSink{{Name: "mosquitto", URL: mosq.URL(), QoS: ptr(1), Delivery: config.Delivery{Guarantee: config.AtLeastOnce}}},
			NATS: []config.NATSSink{{Name: "nats", URL: ns.URL()}},
		},
	}))
	for _, c := range []*collector{onMQTT, onNATS} {
		c.waitCount(t, g, "sim", "counter", 20)
		c.waitCount(t, g, "peer", "counter", 20)
	}
	saved := strings.Count(mosq.Log(), "Saving in-memory database")
	waitUntil(t, g, e2eWait, "mosquitto to save its sessions", func() bool {
		return strings.Count(mosq.Log(), "Saving in-memory database") > saved
	})

	mosq.Kill()
	down := time.Now()
	atKill := map[string]int{"sim": onNATS.count("sim", "counter"), "peer": onNATS.count("peer", "counter")}
	waitUntil(t, g, e2eWait, "two failed reconnects of the MQTT sink", func() bool {
		return g.outputStats("mosquitto").ConnectFailures >= 2 && time.Since(down) > 2*time.Second
	})
	// Down for over 2 s: at one message per 50 ms each group published 40
	// or more to NATS meanwhile; half is the bound on a loaded machine.
	for _, name := range []string{"sim", "peer"} {
		if got := onNATS.count(name, "counter") - atKill[name]; got < 20 {
			t.Errorf("NATS got %d DataSetMessages of %s/counter in the %v MQTT was down: held by the dead broker", got, name, time.Since(down).Round(time.Millisecond))
		}
	}
	mosq.Start()
	// Both catch up: MQTT gets what the log kept for it.
	for _, name := range []string{"sim", "peer"} {
		n := onNATS.count(name, "counter")
		onMQTT.waitCount(t, g, name, "counter", n+10)
		onNATS.waitCount(t, g, name, "counter", n+10)
	}
	for _, sub := range []struct {
		name string
		c    *collector
		dups bool
	}{{"mosquitto (at-least-once)", onMQTT, true}, {"nats-server (at-most-once)", onNATS, false}} {
		msgs := sub.c.all(t)
		for _, name := range []string{"sim", "peer"} {
			r := checkStream(t, msgs, streamCheck{publisher: "e2e", group: name, writer: "counter", field: "Counter", dups: sub.dups})
			t.Logf("%s: %s/counter: %d DataSetMessages (SequenceNumber %d..%d), %d duplicates", sub.name, name, r.dsms, r.first, r.last, r.dups)
			if r.first != 1 {
				t.Errorf("%s: %s/counter starts at SequenceNumber %d, want 1", sub.name, name, r.first)
			}
		}
	}
	for _, name := range []string{"sim", "peer"} {
		gs := g.groupStats(name)
		if gs.Overflows != 0 || gs.Undelivered != 0 {
			t.Errorf("writer group %s: %d values overflowed at the server, %d notification messages undelivered", name, gs.Overflows, gs.Undelivered)
		}
	}
}

// TestE2EDeadLetters: a message a broker refuses for good goes to the
// dead-letter file and is acknowledged; it never holds the subscription.
// nats-server with a max_payload of 8 KiB under an at-least-once JetStream
// sink; a writer of 150 fields, whose ua-metadata (some 20 KB) cannot be
// split: it is refused, kept with the reason, and the data (split at the
// server's max_payload, which the writer group's maxMessageSize follows)
// streams on.
func TestE2EDeadLetters(t *testing.T) {
	ns := brokertest.StartNATS(t, brokertest.NATSOptions{JetStream: true, MaxPayload: 8 << 10})
	w := writer("wide")
	for i := range 150 {
		w.Fields = append(w.Fields, field(fmt.Sprintf("Counter_%03d", i), server.NodeCounter))
	}
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		WriterGroups: []config.WriterGroup{{
			Name: "g", PublishingInterval: dur(100 * time.Millisecond), MaxUnacked: 4,
			Nodes: config.NodeDefaults{SamplingInterval: ptr(dur(20 * time.Millisecond))}, Writers: []config.DataSetWriter{w},
		}},
		Sinks: jetStreamSink(ns.URL(), true),
	}))
	// More messages than maxUnacked: nothing holds the acknowledgements.
	waitStream(t, ns.URL(), 30, e2eWait, g.logTail)
	if st := g.outputStats("js"); st.DeadLettered == 0 || st.Undelivered != 0 {
		t.Errorf("sink stats %+v: want the metadata dead-lettered and nothing undelivered", st)
	}
	if gs := g.groupStats("g"); gs.Undelivered != 0 || gs.Acked < 10 {
		t.Errorf("writer group: %d acknowledged, %d undelivered: the refusal held the subscription", gs.Acked, gs.Undelivered)
	}
	g.waitLog("writer group's messages split at the NATS server's max_payload", "group=g")
	g.waitLog("a broker refused a message for good", "sink=js")
	b, err := os.ReadFile(filepath.Join(g.gw.Config().Gateway.StateDir, "deadletters.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var dl struct {
		Sink, Kind, Group, Writer, Reason, Payload string
		Bytes                                      int
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if err := json.Unmarshal([]byte(line), &dl); err != nil {
		t.Fatalf("dead letter %q: %v", line, err)
	}
	if dl.Sink != "js" || dl.Kind != "metadata" || dl.Group != "g" || dl.Writer != "wide" || dl.Bytes <= 8<<10 ||
		!strings.Contains(dl.Reason, "maximum payload") || !strings.Contains(dl.Payload, `"MessageType":"ua-metadata"`) {
		t.Errorf("dead letter: %+v", dl)
	}
}

// The stream of a writer group no longer configured is dropped at the next
// start once its sinks had everything.
func TestStoreDropsRemovedGroupsStream(t *testing.T) {
	sim := startSim(t, 100*time.Millisecond)
	state := t.TempDir()
	cfg := func(groups ...string) *config.Config {
		c := standalone(sim.url())
		c.Gateway = config.Gateway{StateDir: state, ShutdownTimeout: dur(5 * time.Second)}
		c.Sinks = config.Sinks{File: []config.FileSink{{Path: os.DevNull}}}
		for _, g := range groups {
			wg := counterGroup(g)
			wg.Endpoint = "sim"
			c.WriterGroups = append(c.WriterGroups, wg)
		}
		parsed, _, err := config.Parse([]byte(marshalConfig(t, c)), "test")
		if err != nil {
			t.Fatal(err)
		}
		return parsed
	}
	streams := func(gw *gateway.Gateway) []string {
		var names []string
		for _, s := range gw.StoreStats().Streams {
			names = append(names, s.Name)
		}
		return names
	}
	first, err := gateway.New(cfg("a", "b"), gateway.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, nil, e2eWait, "both groups logged", func() bool {
		st := first.StoreStats()
		return st != nil && len(st.Streams) == 2 && st.Streams[0].Appended > 0 && st.Streams[1].Appended > 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// What b appended last before the stop is delivered by the next run,
	// and the run after it finds b's stream empty and drops it.
	for run := 2; ; run++ {
		gw, err := gateway.New(cfg("a"), gateway.Options{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := gw.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprint(streams(gw))
		waitUntil(t, nil, e2eWait, "b drained", func() bool {
			for _, s := range gw.StoreStats().Streams {
				if s.Name == "b" && s.Records > 0 {
					return false
				}
			}
			return true
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = gw.Stop(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if got == "[a]" {
			break
		}
		if got != "[a b]" || run > 3 {
			t.Fatalf("run %d without b: streams %s", run, got)
		}
	}
}

// TestE2EGroupStoreBound: a writer group's own maxBytes in the log, with
// the drop-oldest policy. While the MQTT broker is down, the "small"
// group's stream stays within its 64 KiB (its oldest records dropped,
// counted), and the "big" group, with only the log's bound, keeps all of
// its own: once the broker is back, the subscriber gets every one of big's
// DataSetMessages and small's newest.
func TestE2EGroupStoreBound(t *testing.T) {
	sim := startSim(t, 20*time.Millisecond)
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	onMQTT := subscribeMQTT(t, mosq.URL(), "e2e-bound", "", "", "opcua/json/#")
	group := func(name string, bound int64) config.WriterGroup {
		f := field("Counter", server.NodeCounter)
		f.SamplingInterval = ptr(dur(10 * time.Millisecond))
		// 5 s of samples at the server: the default (two publishing
		// intervals, 40 ms) overflows when a busy machine stalls the
		// gateway for longer, and values lost upstream are not what this
		// test is about.
		f.QueueSize = 500
		return config.WriterGroup{
			Name: name, Endpoint: "sim", PublishingInterval: dur(20 * time.Millisecond),
			StoreAndForward: config.GroupStore{MaxBytes: bound},
			Writers:         []config.DataSetWriter{writer("counter", f)},
		}
	}
	const bound = 64 << 10
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		Gateway:         config.Gateway{PublisherID: "e2e"},
		Endpoints:       []config.Endpoint{simEndpoint("sim", sim.url())},
		WriterGroups:    []config.WriterGroup{group("small", bound), group("big", 0)},
		StoreAndForward: config.StoreAndForward{Policy: config.DropOldest},
		Sinks: config.Sinks{
			MQTT: []config.MQTTSink{{Name: "mosquitto", URL: mosq.URL(), QoS: ptr(1), Delivery: config.Delivery{Guarantee: config.AtLeastOnce}}},
		},
	}))
	onMQTT.waitCount(t, g, "small", "counter", 10)
	onMQTT.waitCount(t, g, "big", "counter", 10)
	stream := func(name string) storelog.StreamStats { return g.storeStream(name) }
	if s := stream("small"); s.MaxBytes != bound {
		t.Fatalf("small's stream %+v: want its maxBytes %d", s, bound)
	}
	mosq.Kill()
	// Both groups append what MQTT cannot take; small's oldest records go
	// at 64 KiB, while big holds more than that.
	waitUntil(t, g, e2eWait, "small's stream to drop at its bound while big holds more", func() bool {
		return stream("small").Dropped >= 20 && stream("big").Bytes > 2*bound
	})
	if s := stream("small"); s.Bytes > bound {
		t.Errorf("small's stream holds %d bytes, its bound %d", s.Bytes, bound)
	}
	if s := stream("big"); s.Dropped != 0 {
		t.Errorf("big's stream dropped %d records: only small's bound was reached", s.Dropped)
	}
	mosq.Start()
	bs := g.groupStats("big")
	onMQTT.waitCount(t, g, "big", "counter", int(bs.DataSetMessages-bs.KeepAlives))
	msgs := onMQTT.all(t)
	r := checkStream(t, msgs, streamCheck{publisher: "e2e", group: "big", writer: "counter", field: "Counter", dups: true})
	t.Logf("big: %d DataSetMessages (SequenceNumber %d..%d); small: dropped %d", r.dsms, r.first, r.last, stream("small").Dropped)
	if r.first != 1 {
		t.Errorf("big starts at SequenceNumber %d, want 1", r.first)
	}
	// small's newest reaches the subscriber.
	ss := g.groupStats("small")
	sn := ss.DataSetMessages - ss.KeepAlives
	waitUntil(t, g, e2eWait, "small's newest", func() bool {
		hi := uint32(0)
		for _, m := range onMQTT.all(t) {
			for _, d := range m.dsms {
				if m.WriterGroupName == "small" {
					hi = max(hi, d.SequenceNumber)
				}
			}
		}
		return uint64(hi) >= sn
	})
}

// TestE2EKeepAlivesPassTheLog: with the store-and-forward log on, a writer
// whose value does not change sends ua-keepalive DataSetMessages that reach
// a NATS subscriber (nats-server) without being logged: the stream's
// appended records stop growing once the first value is in, while the
// keep-alives go on arriving and the sink's reader counts them handed.
func TestE2EKeepAlivesPassTheLog(t *testing.T) {
	sim := startSim(t, time.Hour) // the counter keeps its first value
	ns := brokertest.StartNATS(t, brokertest.NATSOptions{})
	onNATS := subscribeNATS(t, ns.URL(), "opcua.json.>")
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		Gateway:   config.Gateway{PublisherID: "e2e"},
		Endpoints: []config.Endpoint{simEndpoint("sim", sim.url())},
		WriterGroups: []config.WriterGroup{{
			Name: "quiet", Endpoint: "sim", PublishingInterval: dur(100 * time.Millisecond), KeepAlive: dur(300 * time.Millisecond),
			Writers: []config.DataSetWriter{writer("counter", field("Counter", server.NodeCounter))},
		}},
		Sinks: config.Sinks{NATS: []config.NATSSink{{Name: "nats", URL: ns.URL()}}},
	}))
	keepAlives := func() int {
		n := 0
		for _, m := range onNATS.all(t) {
			for _, d := range m.dsms {
				if m.WriterGroupName == "quiet" && d.MessageType == "ua-keepalive" {
					n++
				}
			}
		}
		return n
	}
	onNATS.waitCount(t, g, "quiet", "counter", 1)
	waitUntil(t, g, e2eWait, "a first keep-alive", func() bool { return keepAlives() >= 1 })
	stream := func() storelog.StreamStats { return g.storeStream("quiet") }
	appended, seen := stream().Appended, keepAlives()
	waitUntil(t, g, e2eWait, "three more keep-alives", func() bool { return keepAlives() >= seen+3 })
	if got := onNATS.count("quiet", "counter"); got != 1 {
		t.Fatalf("%d data DataSetMessages of an unchanging counter, want its first value only", got)
	}
	s := stream()
	if s.Appended != appended {
		t.Fatalf("the stream appended %d records while keep-alives went on (%d before): keep-alives were logged", s.Appended, appended)
	}
	var handed uint64
	for _, r := range s.Readers {
		if r.Consumer == "nats" {
			handed = r.KeepAlives
		}
	}
	if handed < uint64(seen+3) {
		t.Fatalf("the NATS sink's reader handed %d keep-alives, the subscriber got %d", handed, keepAlives())
	}
}

// storeStream returns the counters of the log's stream of a writer group;
// the test fails if there is none.
func (g *e2eGateway) storeStream(name string) storelog.StreamStats {
	g.t.Helper()
	st := g.gw.StoreStats()
	for _, s := range st.Streams {
		if s.Name == name {
			return s
		}
	}
	g.t.Fatalf("no stream %s in %+v", name, st)
	return storelog.StreamStats{}
}
