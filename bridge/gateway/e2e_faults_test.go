package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nats-io/nats.go"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// counterGroup is writer group name over the embedded sim: one writer
// "counter" with the Counter (100 ms), sampled ten times as fast as it
// changes and published every 100 ms, so that each DataSetMessage carries
// one new value.
func counterGroup(name string) config.WriterGroup {
	return config.WriterGroup{
		Name: name, PublishingInterval: dur(100 * time.Millisecond), FieldEncoding: config.FieldDataValue,
		Nodes:   config.NodeDefaults{SamplingInterval: ptr(dur(10 * time.Millisecond))},
		Writers: []config.DataSetWriter{counterWriter("counter")},
	}
}

// TestE2EMQTTBrokerKilled kills mosquitto mid-stream (SIGKILL: no goodbye)
// and starts it again on its port, with two sinks on it: an at-least-once
// QoS 1 sink, whose subscriber must see every counter value (duplicates
// allowed and counted), and a drop-oldest sink with a small queue, whose
// drops are counted in its stats, logged, and are exactly what its
// subscriber misses besides what was in flight.
func TestE2EMQTTBrokerKilled(t *testing.T) {
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{Persistence: true})
	// Persistent sessions: mosquitto restores them (saved every second) and
	// queues for them while they reconnect, so a subscriber misses nothing
	// the broker accepted after its restart.
	alo := subscribeMQTT(t, mosq.URL(), "e2e-alo", "", "", "alo/#")
	drop := subscribeMQTT(t, mosq.URL(), "e2e-drop", "", "", "drop/#")
	sinkOn := func(name string, d config.Delivery) config.MQTTSink {
		return config.MQTTSink{
			Name: name, URL: mosq.URL(), QoS: ptr(1), Delivery: d,
			DataTopic:     name + "/data/{PublisherId}/{WriterGroup}/{DataSetWriter}",
			MetaDataTopic: name + "/metadata/{PublisherId}/{WriterGroup}/{DataSetWriter}",
			StatusTopic:   name + "/status/{PublisherId}",
		}
	}
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		WriterGroups: []config.WriterGroup{counterGroup("g")},
		Sinks: config.Sinks{MQTT: []config.MQTTSink{
			sinkOn("alo", config.Delivery{Guarantee: config.AtLeastOnce}),
			sinkOn("drop", config.Delivery{Policy: config.DropOldest, QueueSize: 4}),
		}},
	}))

	alo.waitCount(t, g, "g", "counter", 15)
	drop.waitCount(t, g, "g", "counter", 15)
	// The subscribers' sessions must be in the persistence file before the
	// kill: mosquitto saves every second once something changed.
	saved := strings.Count(mosq.Log(), "Saving in-memory database")
	waitUntil(t, g, e2eWait, "mosquitto to save its sessions", func() bool {
		return strings.Count(mosq.Log(), "Saving in-memory database") > saved
	})
	mosq.Kill()
	waitUntil(t, g, e2eWait, "the drop-oldest sink to drop", func() bool { return g.outputStats("drop").Dropped >= 5 })
	// Back up right after the sinks' second refused attempt: their next is
	// about 2 s away (backoff 1 s, 2 s …), while the subscribers retry every
	// 200 ms, so that they are subscribed again before the gateway resends
	// even should mosquitto not have restored their sessions.
	waitUntil(t, g, e2eWait, "two failed reconnects of each sink", func() bool {
		return g.outputStats("alo").ConnectFailures >= 2 && g.outputStats("drop").ConnectFailures >= 2
	})
	mosq.Start()
	before := alo.count("g", "counter")
	alo.waitCount(t, g, "g", "counter", before+15)
	drop.waitCount(t, g, "g", "counter", drop.count("g", "counter")+15)

	r := checkStream(t, alo.all(t), streamCheck{publisher: "uagate", group: "g", writer: "counter", field: "Counter", dups: true})
	if r.first != 1 {
		t.Errorf("at-least-once: the stream starts at SequenceNumber %d, want 1", r.first)
	}
	st := g.outputStats("alo")
	t.Logf("at-least-once: %d DataSetMessages, SequenceNumber %d..%d, %d duplicates; sink: %d reconnects, %d retries, %d connect failures",
		r.dsms, r.first, r.last, r.dups, st.Reconnects, st.Retries, st.ConnectFailures)
	if st.Reconnects < 1 || st.Undelivered != 0 {
		t.Errorf("at-least-once sink stats %+v: want a reconnect and nothing undelivered", st)
	}
	if gs := g.groupStats("g"); gs.Undelivered != 0 {
		t.Errorf("writer group: %d notification messages undelivered", gs.Undelivered)
	}

	// Drop-oldest: the counter may skip only where SequenceNumbers are
	// missing (checkStream checks value = previous + 1 + skipped).
	rd := checkStream(t, drop.all(t), streamCheck{publisher: "uagate", group: "g", writer: "counter", field: "Counter", seqGaps: true, dups: true})
	ds := g.outputStats("drop")
	t.Logf("drop-oldest: %d DataSetMessages, %d missing; sink: %d dropped, %d errors", rd.dsms, rd.missing, ds.Dropped, ds.Errors)
	if ds.Dropped == 0 || uint64(rd.missing) < ds.Dropped {
		t.Errorf("drop-oldest: the sink counted %d drops, the subscriber misses %d messages", ds.Dropped, rd.missing)
	}
	g.waitLog("sink queue full, dropped the oldest messages", "sink=drop")
}

// TestE2ENATSJetStreamRestart restarts nats-server mid-stream under an
// at-least-once JetStream sink: the stream, read from its start afterwards,
// holds every counter value.
func TestE2ENATSJetStreamRestart(t *testing.T) {
	ns := brokertest.StartNATS(t, brokertest.NATSOptions{JetStream: true})
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		WriterGroups: []config.WriterGroup{counterGroup("g")},
		Sinks: config.Sinks{NATS: []config.NATSSink{{
			Name: "js", URL: ns.URL(), JetStream: &config.JetStream{Stream: "E2E", Create: true},
			Delivery: config.Delivery{Guarantee: config.AtLeastOnce},
		}}},
	}))

	js := jetStream(t, ns.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	lastSeq := func() uint64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s, err := js.Stream(ctx, "E2E")
		if err != nil {
			return 0
		}
		info, err := s.Info(ctx)
		if err != nil {
			return 0
		}
		return info.State.LastSeq
	}
	waitUntil(t, g, e2eWait, "15 messages in the stream", func() bool { return lastSeq() >= 15 })
	ns.Restart()
	at := lastSeq()
	waitUntil(t, g, e2eWait, "15 more messages in the stream after the restart", func() bool { return lastSeq() >= at+15 })

	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	s, err := js.Stream(ctx, "E2E")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	for seq := uint64(1); seq <= lastSeq(); seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("stream message %d: %v", seq, err)
		}
		c.add(m.Subject, m.Data, false)
	}
	r := checkStream(t, c.all(t), streamCheck{publisher: "uagate", group: "g", writer: "counter", field: "Counter", dups: true})
	st := g.outputStats("js")
	t.Logf("%d DataSetMessages in the stream, SequenceNumber %d..%d, %d duplicates; sink: %d reconnects, %d retries", r.dsms, r.first, r.last, r.dups, st.Reconnects, st.Retries)
	if r.first != 1 || st.Reconnects < 1 {
		t.Errorf("stream from SequenceNumber %d, sink reconnects %d; want 1 and at least 1", r.first, st.Reconnects)
	}
}

// TestE2EUpstreamRestart restarts the OPC UA server on its port mid-stream:
// the session comes back, the subscription is created anew, the loss is
// reported (group stats, log), the first DataSetMessage after it is a key
// frame, SequenceNumbers go on without a gap or a repeat, and every value of
// the new server's counter arrives once.
func TestE2EUpstreamRestart(t *testing.T) {
	sim := startSim(t, 100*time.Millisecond)
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		Endpoints: []config.Endpoint{simEndpoint("sim", sim.url())},
		WriterGroups: []config.WriterGroup{{
			Name: "g", PublishingInterval: dur(100 * time.Millisecond), KeyFrameCount: 1000,
			Nodes:   config.NodeDefaults{SamplingInterval: ptr(dur(10 * time.Millisecond))},
			Writers: []config.DataSetWriter{counterWriter("counter")},
		}},
		Sinks: embeddedMQTT(),
	}))
	sub := subscribeMQTT(t, g.gw.Addrs().MQTT, "", "", "", "opcua/json/#")
	sub.waitCount(t, g, "g", "counter", 10)
	sim.restart()
	waitUntil(t, g, e2eWait, "the gap reported", func() bool { return g.groupStats("g").Gaps >= 1 })
	g.waitLog("notification messages lost", "group=g")
	sub.waitCount(t, g, "g", "counter", sub.count("g", "counter")+10)

	r := checkStream(t, sub.all(t), streamCheck{publisher: "uagate", group: "g", writer: "counter", field: "Counter", resets: true})
	t.Logf("%d DataSetMessages, SequenceNumber %d..%d, %d key frames, %d counter resets", r.dsms, r.first, r.last, r.keyFrames, r.resets)
	// keyFrameCount 1000: the only key frames are the first and the one
	// forced by the gap (the subscriber may have missed the first).
	if r.keyFrames < 1 || r.keyFrames > 2 || r.resets > 1 {
		t.Errorf("%d key frames and %d counter resets; want the key frame after the gap, and at most one reset, there", r.keyFrames, r.resets)
	}
}

// TestE2ESlowWebSocketClient stalls one WebSocket client (it stops reading)
// and lets another vanish (its socket closed without a close frame) while
// large messages flow: the stream to MQTT goes on without a gap, the
// vanished client is dropped, and the slow one is closed with 1008.
func TestE2ESlowWebSocketClient(t *testing.T) {
	text := field("Text", server.StaticNode(ua.TypeString, false))
	text.SamplingInterval = ptr(dur(10 * time.Millisecond))
	sinks := embeddedMQTT()
	sinks.WebSocket = &config.WebSocketSink{ClientQueue: 4}
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		WriterGroups: []config.WriterGroup{{
			Name: "g", PublishingInterval: dur(50 * time.Millisecond),
			Nodes:   config.NodeDefaults{SamplingInterval: ptr(dur(10 * time.Millisecond))},
			Writers: []config.DataSetWriter{counterWriter("counter"), writer("big", text)},
		}},
		Sinks: sinks,
	}))
	sub := subscribeMQTT(t, g.gw.Addrs().MQTT, "", "", "", "opcua/json/#")
	sub.waitCount(t, g, "g", "counter", 5)

	slow := dialWS(t, g.wsURL("group=g&kind=data"))
	gone := dialWS(t, g.wsURL("group=g&kind=data"))
	waitUntil(t, g, e2eWait, "2 WebSocket clients", func() bool { return g.gw.HubStats().Clients == 2 })
	_ = gone.UnderlyingConn().Close()
	waitUntil(t, g, e2eWait, "the vanished client dropped", func() bool { return g.gw.HubStats().Clients == 1 })

	// 32 KiB values, one every 20 ms, until the hub gives up on the client
	// that does not read (bounded: 1000 writes, 20 s).
	counted := sub.count("g", "counter")
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	node, err := ua.ParseNodeID(server.StaticNode(ua.TypeString, false))
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for ; g.gw.HubStats().SlowClosed == 0; i++ {
		if i == 1000 {
			t.Fatalf("the slow client was not closed after %d large messages; hub %+v", i, g.gw.HubStats())
		}
		text := strings.Repeat(fmt.Sprintf("%07d ", i), 4096)
		if err := g.gw.Sim().SetValue(node, ua.DataValue{Value: ua.NewStringVariant(text)}); err != nil {
			t.Fatal(err)
		}
		<-tick.C
	}
	// The slow client reads again: what was buffered, then the close.
	_ = slow.SetReadDeadline(time.Now().Add(e2eWait))
	readAfter := &collector{}
	err = readWS(slow, readAfter)
	t.Logf("slow client closed after %d large values; it read %d messages more, then %v", i, len(readAfter.all(t)), err)
	if !isCloseCode(err, websocket.ClosePolicyViolation) {
		t.Errorf("the slow client's stream ended with %v, want close 1008", err)
	}
	// The pipeline kept flowing to MQTT meanwhile, and goes on.
	sub.waitCount(t, g, "g", "counter", max(counted+10, sub.count("g", "counter")+5))
	msgs := sub.all(t)
	checkStream(t, msgs, streamCheck{publisher: "uagate", group: "g", writer: "counter", field: "Counter"})
	rb := checkStream(t, msgs, streamCheck{publisher: "uagate", group: "g", writer: "big"})
	if rb.dsms < 2 {
		t.Errorf("%d DataSetMessages of the large writer on MQTT", rb.dsms)
	}
	if st := g.gw.HubStats(); st.SlowClosed != 1 || st.Clients != 0 {
		t.Errorf("hub %+v: want one slow client closed and none left", st)
	}
}

// TestE2EConfigChangeWhileStreaming rewrites the -config file while data
// flows: a writer added and one removed while the third's stream goes on
// without a gap in its SequenceNumbers or its counter; then an invalid file,
// which is refused while the stream goes on.
func TestE2EConfigChangeWhileStreaming(t *testing.T) {
	conf := func(w config.DataSetWriter) string {
		return marshalConfig(t, &config.Config{
			WriterGroups: []config.WriterGroup{{
				Name: "live", PublishingInterval: dur(100 * time.Millisecond),
				Nodes:   config.NodeDefaults{SamplingInterval: ptr(dur(10 * time.Millisecond))},
				Writers: []config.DataSetWriter{writer("a", field("Counter", server.NodeCounter)), w},
			}},
			Sinks: embeddedMQTT(),
		})
	}
	b := writer("b", field("Step", server.NodeStep))
	c := writer("c", field("Sine", server.NodeSine))
	g := startGateway(t, "gateway.yaml", conf(b))
	sub := subscribeMQTT(t, g.gw.Addrs().MQTT, "", "", "", "opcua/json/#")
	sub.waitCount(t, g, "live", "a", 5)
	sub.waitCount(t, g, "live", "b", 5)

	g.rewrite(conf(c))
	g.waitLog("configuration change applied")
	sub.waitCount(t, g, "live", "c", 5)
	bAfter := sub.count("live", "b")
	sub.waitCount(t, g, "live", "c", 10)
	if n := sub.count("live", "b"); n != bAfter {
		t.Errorf("writer b removed, but %d more of its DataSetMessages arrived", n-bAfter)
	}

	// An unknown key: refused, the running configuration stays.
	g.rewrite(strings.Replace(conf(c), "samplingInterval", "samplingInteval", 1))
	g.waitLog("configuration change refused", "samplingInteval")
	aNow, cNow := sub.count("live", "a"), sub.count("live", "c")
	sub.waitCount(t, g, "live", "a", aNow+5)
	sub.waitCount(t, g, "live", "c", cNow+5)

	msgs := sub.all(t)
	ra := checkStream(t, msgs, streamCheck{publisher: "uagate", group: "live", writer: "a", field: "Counter"})
	rc := checkStream(t, msgs, streamCheck{publisher: "uagate", group: "live", writer: "c"})
	t.Logf("writer a: %d DataSetMessages, SequenceNumber %d..%d; writer c: %d from %d", ra.dsms, ra.first, ra.last, rc.dsms, rc.first)
	if rc.first != 1 || rc.writerID == ra.writerID {
		t.Errorf("writer c starts at SequenceNumber %d with DataSetWriterId %d (a has %d); want 1 and an id of its own", rc.first, rc.writerID, ra.writerID)
	}
}
