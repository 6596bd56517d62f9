package gateway_test

import (
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/server"
)

// TestE2EExternalBrokersAndUpstreams runs the gateway with two upstreams (our
// simulation server and the node-opcua peer) and three outputs besides the
// embedded ones (Debian's mosquitto and nats-server, the WebSocket stream),
// and checks every message each subscriber received: the header, the
// DataSetWriterId and MetaDataVersion against the retained or replayed
// ua-metadata, SequenceNumbers from 1 without gaps per writer, and both
// counters going up by one per DataSetMessage (sampling faster than the
// counters change: every value, once).
func TestE2EExternalBrokersAndUpstreams(t *testing.T) {
	sim := startSim(t, 100*time.Millisecond)
	peer := nodeopcua.Start(t, nodeopcua.Options{LargeCount: -1, Env: []string{"COUNTER_EXCEPTION_BASED=1"}})
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	ns := brokertest.StartNATS(t, brokertest.NATSOptions{})
	// Subscribed before the gateway starts: core NATS keeps nothing for
	// later, and both streams are checked from SequenceNumber 1.
	onMQTT := subscribeMQTT(t, mosq.URL(), "", "", "", "opcua/json/#")
	onNATS := subscribeNATS(t, ns.URL(), "opcua.json.>")

	peerCounter := field("Counter", nodeopcua.NodeCounter)
	peerCounter.SamplingInterval, peerCounter.QueueSize = ptr(dur(0)), 100
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		Gateway:   config.Gateway{PublisherID: "e2e"},
		Endpoints: []config.Endpoint{simEndpoint("sim", sim.url()), simEndpoint("peer", peer.URL)},
		WriterGroups: []config.WriterGroup{{
			Name: "sim", Endpoint: "sim", PublishingInterval: dur(200 * time.Millisecond),
			Nodes: config.NodeDefaults{SamplingInterval: ptr(dur(20 * time.Millisecond))},
			Writers: []config.DataSetWriter{
				writer("counter", field("Counter", server.NodeCounter)),
				writer("step", field("Step", server.NodeStep), field("Sine", server.NodeSine)),
			},
		}, {
			Name: "peer", Endpoint: "peer", PublishingInterval: dur(200 * time.Millisecond),
			Writers: []config.DataSetWriter{writer("counter", peerCounter)},
		}},
		Sinks: config.Sinks{
			MQTT:      []config.MQTTSink{{Name: "mosquitto", URL: mosq.URL(), Delivery: config.Delivery{Guarantee: config.AtLeastOnce}}},
			NATS:      []config.NATSSink{{Name: "nats", URL: ns.URL()}},
			WebSocket: &config.WebSocketSink{},
		},
	}))

	ws := dialWS(t, g.wsURL("group=sim,peer&kind=data,metadata"))
	onWS := &collector{}
	wsDone := make(chan error, 1)
	go func() { wsDone <- readWS(ws, onWS) }()

	const n = 12 // 1.2 s of each counter
	for _, c := range []*collector{onMQTT, onNATS, onWS} {
		c.waitCount(t, g, "sim", "counter", n)
		c.waitCount(t, g, "sim", "step", n/2)
		c.waitCount(t, g, "peer", "counter", n)
	}
	for _, sub := range []struct {
		name string
		c    *collector
		// fromOne: subscribed before the first message.
		fromOne bool
	}{{"mosquitto", onMQTT, true}, {"nats-server", onNATS, true}, {"websocket", onWS, false}} {
		msgs := sub.c.all(t)
		ids := map[string]int{}
		for _, w := range []struct{ group, writer, field string }{
			{"sim", "counter", "Counter"}, {"sim", "step", ""}, {"peer", "counter", "Counter"},
		} {
			r := checkStream(t, msgs, streamCheck{publisher: "e2e", group: w.group, writer: w.writer, field: w.field})
			if sub.fromOne && r.first != 1 {
				t.Errorf("%s: %s/%s starts at SequenceNumber %d, want 1", sub.name, w.group, w.writer, r.first)
			}
			if r.keyFrames == 0 {
				t.Errorf("%s: %s/%s: no key frame in %d DataSetMessages", sub.name, w.group, w.writer, r.dsms)
			}
			ids[w.group+"/"+w.writer] = r.writerID
			t.Logf("%s: %s/%s: %d DataSetMessages (SequenceNumber %d..%d, %d key frames), values %v", sub.name, w.group, w.writer, r.dsms, r.first, r.last, r.keyFrames, r.values)
		}
		if ids["sim/counter"] == ids["sim/step"] {
			t.Errorf("%s: writers counter and step share DataSetWriterId %d", sub.name, ids["sim/counter"])
		}
		// The metadata describes the fields with the types the servers gave.
		for _, m := range msgs {
			if m.MessageType != "ua-metadata" || m.DataSetWriterName != "counter" {
				continue
			}
			if f := m.MetaData.Fields; len(f) != 1 || f[0].Name != "Counter" || f[0].BuiltInType != 11 {
				t.Errorf("%s: metadata of %s/counter: fields %+v, want Counter of type Double (11)", sub.name, m.WriterGroupName, f)
			}
		}
	}
	// Retained on MQTT: a subscriber that comes late gets the metadata of
	// every writer at once.
	late := subscribeMQTT(t, mosq.URL(), "", "", "", "opcua/json/metadata/#")
	waitUntil(t, g, e2eWait, "3 retained ua-metadata messages", func() bool {
		n := 0
		for _, m := range late.all(t) {
			if m.retained && m.MessageType == "ua-metadata" {
				n++
			}
		}
		return n == 3
	})
	select {
	case err := <-wsDone:
		t.Fatalf("websocket stream ended: %v", err)
	default:
	}
}
