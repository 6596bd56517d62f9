package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
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
