package mqttsink

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/embedded"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sinktest"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/internal/testutil"
)

var addr = sinktest.Addr

type received struct {
	topic    string
	payload  string
	retained bool
}

// subscriber is a paho client of the test, recording what it receives in
// order (a sinktest.Receiver).
type subscriber struct {
	client mqtt.Client

	mu   sync.Mutex
	msgs []received
}

// subscribe connects a subscriber to filter at QoS 1; with clean false its
// session outlives a disconnection (and, with the broker's persistence, a
// restart). opts adjusts paho's options (credentials, TLS).
func subscribe(t *testing.T, url, clientID string, clean bool, filter string, opts ...func(*mqtt.ClientOptions)) *subscriber {
	t.Helper()
	s := &subscriber{}
	o := mqtt.NewClientOptions().AddBroker(url).SetClientID(clientID).SetCleanSession(clean).
		SetAutoReconnect(true).SetMaxReconnectInterval(200 * time.Millisecond).SetConnectRetry(true).
		SetConnectRetryInterval(100 * time.Millisecond).SetResumeSubs(true).SetOrderMatters(true).
		SetOnConnectHandler(func(c mqtt.Client) {
			// After a reconnect the session is resumed from the broker's persistence;
			// subscribing again is harmless and covers a fresh session.
			c.Subscribe(filter, 1, nil)
		}).
		SetDefaultPublishHandler(func(_ mqtt.Client, m mqtt.Message) {
			s.mu.Lock()
			s.msgs = append(s.msgs, received{m.Topic(), string(m.Payload()), m.Retained()})
			s.mu.Unlock()
		})
	for _, f := range opts {
		f(o)
	}
	s.client = mqtt.NewClient(o)
	tok := s.client.Connect()
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscriber connect: %v", tok.Error())
	}
	st := s.client.Subscribe(filter, 1, nil)
	if !st.WaitTimeout(10*time.Second) || st.Error() != nil {
		t.Fatalf("subscribe: %v", st.Error())
	}
	t.Cleanup(func() { s.client.Disconnect(0) })
	return s
}

func (s *subscriber) snapshot() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.msgs...)
}

// Received implements sinktest.Receiver.
func (s *subscriber) Received() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(s.msgs))
	for i, m := range s.msgs {
		out[i] = []byte(m.payload)
	}
	return out
}

func (s *subscriber) waitTopic(t *testing.T, topic string, match func(received) bool) received {
	t.Helper()
	var got received
	testutil.WaitFor(t, 10*time.Second, "a message on "+topic, func() bool {
		for _, r := range s.snapshot() {
			if r.topic == topic && (match == nil || match(r)) {
				got = r
				return true
			}
		}
		return false
	})
	return got
}

func statusIs(state int) func(received) bool {
	return func(r received) bool {
		var st struct {
			MessageType string
			PublisherId string
			IsCyclic    bool
			Status      int
		}
		return json.Unmarshal([]byte(r.payload), &st) == nil && st.MessageType == "ua-status" &&
			st.PublisherId == "pub" && !st.IsCyclic && st.Status == state
	}
}

// newSink is New with the test's logger.
func newSink(t *testing.T, c Config) *Sink {
	t.Helper()
	if c.Logger == nil {
		c.Logger = testutil.Logger(t)
	}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newOutput starts an Output of a sink of c (sinktest.StartOutput).
func newOutput(t *testing.T, c Config, opts sink.OutputOptions) (*Sink, *sink.Output) {
	t.Helper()
	s := newSink(t, c)
	return s, sinktest.StartOutput(t, s, opts)
}

var clientIDs atomic.Int64

// clientID returns a client id no other client of the test binary uses.
func clientID(prefix string) string { return fmt.Sprintf("%s-%d", prefix, clientIDs.Add(1)) }

// TestConformance: the sink at QoS 1 against Debian's mosquitto, which can
// persist, authenticate and require client certificates; receivers
// subscribe to the data topics at QoS 1, with a persistent session in a
// persistent broker.
func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Guarantee: config.AtLeastOnce, Restart: true, Persistent: true, Auth: true, TLS: true,
		Start: func(t *testing.T, o sinktest.Options) *sinktest.Env {
			b := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{
				Users: o.Users, Persistence: o.Persistent, TLS: o.TLS, RequireClientCert: o.TLS != nil})
			var subOpts []func(*mqtt.ClientOptions)
			if o.Users != nil {
				subOpts = append(subOpts, func(c *mqtt.ClientOptions) {
					c.SetUsername(sinktest.ReceiverUser).SetPassword(sinktest.ReceiverPassword)
				})
			}
			if o.TLS != nil {
				tc, err := (&sink.TLSOptions{CAFile: o.TLS.CA, CertFile: o.TLS.ClientCert, KeyFile: o.TLS.ClientKey}).Config()
				if err != nil {
					t.Fatal(err)
				}
				subOpts = append(subOpts, func(c *mqtt.ClientOptions) { c.SetTLSConfig(tc) })
			}
			return &sinktest.Env{
				Sink: func(t *testing.T, c sinktest.SinkOptions) sink.Sink {
					// A persistent broker keeps the sink's session too.
					return newSink(t, Config{URL: b.URL(), QoS: 1, CleanSession: !o.Persistent, ClientID: clientID("gw"),
						Username: c.Username, Password: c.Password, TLS: c.TLS})
				},
				Receive: func(t *testing.T) sinktest.Receiver {
					return subscribe(t, b.URL(), clientID("sub"), !o.Persistent, "opcua/json/data/#", subOpts...)
				},
				// SIGTERM: mosquitto saves its persistence (sessions, queued
				// messages) and closes every connection; SIGKILL would lose
				// what it acknowledged since its last autosave, which is the
				// broker's loss, not the sink's.
				Stop:     b.Stop,
				Start:    b.Start,
				SetUsers: func(t *testing.T, users map[string]string) { b.SetUsers(t, users) },
			}
		},
	})
}

// TestConformanceEmbedded: the sink against the embedded broker (mochi-mqtt,
// in memory), which the gateway runs when no broker is configured; Stop
// closes it and Start listens again on its address.
func TestConformanceEmbedded(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Guarantee: config.AtLeastOnce, Restart: true,
		Start: func(t *testing.T, _ sinktest.Options) *sinktest.Env {
			log := testutil.Logger(t)
			start := func(listen string) *embedded.MQTT {
				ctx, cancel := context.WithTimeout(context.Background(), sinktest.Timeout)
				defer cancel()
				b, err := embedded.StartMQTT(ctx, listen, log)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			b := start("127.0.0.1:0")
			t.Cleanup(func() { b.Close() })
			url := b.URL()
			return &sinktest.Env{
				Sink: func(t *testing.T, c sinktest.SinkOptions) sink.Sink {
					return newSink(t, Config{URL: url, QoS: 1, CleanSession: true, ClientID: clientID("gw")})
				},
				Receive: func(t *testing.T) sinktest.Receiver {
					return subscribe(t, url, clientID("sub"), true, "opcua/json/data/#")
				},
				Stop:  func() { b.Close() },
				Start: func() { b = start(b.Addr()) },
			}
		},
	})
}

// The Part 14 topic tree, retained metadata, status and per-field values,
// and the publisher's status around the connection.
func TestMQTTTopicsAndRetained(t *testing.T) {
	b := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	sub := subscribe(t, b.URL(), "sub-live", true, "#")
	s, o := newOutput(t, Config{URL: b.URL(), QoS: 1, CleanSession: true, PublisherID: "pub"}, sink.OutputOptions{Guarantee: config.AtLeastOnce})
	if s.Guarantee() != config.AtLeastOnce {
		t.Fatal("QoS 1 sink not at-least-once")
	}
	tr := sinktest.NewTracker()
	batched := addr
	batched.Writer = ""
	field := addr
	field.Field = "Temperature#1"
	o.Enqueue(sinktest.Message(tr, 0, sink.KindData, addr))
	o.Enqueue(sinktest.Message(tr, 1, sink.KindData, batched))
	o.Enqueue(sinktest.Message(tr, 2, sink.KindMetaData, addr))
	fm := sinktest.Message(tr, 3, sink.KindField, field)
	fm.Retained = true
	o.Enqueue(fm)
	tr.Wait(t, 4, true)

	sub.waitTopic(t, "opcua/json/status/pub", statusIs(2)) // Operational
	for topic, want := range map[string]string{
		"opcua/json/data/pub/line1/temps":     `{"counter":0}`,
		"opcua/json/data/pub/line1":           `{"counter":1}`,
		"opcua/json/metadata/pub/line1/temps": `{"counter":2}`,
		"pub/line1/temps/Temperature_1":       `{"counter":3}`,
	} {
		if got := sub.waitTopic(t, topic, nil); got.payload != want {
			t.Errorf("%s: %q, want %q", topic, got.payload, want)
		}
	}
	sinktest.CloseQueue(t, o)
	sub.waitTopic(t, "opcua/json/status/pub", statusIs(0)) // Disabled at a graceful close

	// A late subscriber gets the retained state, not the data.
	late := subscribe(t, b.URL(), "sub-late", true, "#")
	late.waitTopic(t, "opcua/json/metadata/pub/line1/temps", func(r received) bool { return r.retained })
	late.waitTopic(t, "pub/line1/temps/Temperature_1", func(r received) bool { return r.retained })
	late.waitTopic(t, "opcua/json/status/pub", func(r received) bool { return r.retained && statusIs(0)(r) })
	for _, r := range late.snapshot() {
		if strings.HasPrefix(r.topic, "opcua/json/data/") {
			t.Errorf("data retained: %+v", r)
		}
	}
	if st := o.Stats(); st.Confirmed != 4 || st.Errors != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// The will (ua-status Error, retained) when the sink's connection dies
// without a DISCONNECT; Operational again once the Output reconnected.
func TestMQTTLastWill(t *testing.T) {
	b := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	p := brokertest.StartProxy(t, b.Addr())
	sub := subscribe(t, b.URL(), "sub-will", true, "opcua/json/status/#")
	_, o := newOutput(t, Config{URL: "tcp://" + p.Addr(), QoS: 1, CleanSession: true, PublisherID: "pub", KeepAlive: time.Second}, sink.OutputOptions{Guarantee: config.AtLeastOnce})
	sub.waitTopic(t, "opcua/json/status/pub", statusIs(2))
	p.Cut()
	will := sub.waitTopic(t, "opcua/json/status/pub", statusIs(3))
	if !strings.Contains(will.payload, `"IsCyclic":false`) {
		t.Errorf("will %s", will.payload)
	}
	// The next message finds the connection gone and reconnects.
	tr := sinktest.NewTracker()
	n := len(sub.snapshot())
	o.Enqueue(sinktest.Message(tr, 0, sink.KindData, addr))
	tr.Wait(t, 1, true)
	testutil.WaitFor(t, 10*time.Second, "Operational again", func() bool {
		msgs := sub.snapshot()
		return len(msgs) > n && statusIs(2)(msgs[len(msgs)-1])
	})
	if st := o.Stats(); st.Reconnects != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestMQTTConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "url is empty"},
		{Config{URL: "tcp://x:1", QoS: 3}, "qos 3"},
		{Config{URL: "tcp://x:1", QoS: 2}, "qos 2 needs cleanSession"},
		{Config{URL: "tcp://x:1", Topics: sink.TopicTemplates{Data: "a/{Writer}"}}, "unknown placeholder {Writer}"},
		{Config{URL: "tcp://x:1", TLS: &sink.TLSOptions{CAFile: "/nonexistent/ca.pem"}}, "CA file"},
		{Config{URL: "tcp://x:1", ProtocolVersion: 5}, "protocolVersion 5 is package mqtt5sink's"},
		{Config{URL: "tcp://x:1", ProtocolVersion: 3}, "protocolVersion 3: want 4 (MQTT 3.1.1) or 5"},
		{Config{URL: "tcp://x:1", MessageExpiry: time.Minute}, "messageExpiry needs protocolVersion 5"},
	} {
		s, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want %q", c.cfg, err, c.want)
		}
		if s != nil {
			_ = s.Close(context.Background())
		}
	}
	s, err := New(Config{URL: "tcp://x:1", QoS: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if s.Guarantee() != config.AtMostOnce {
		t.Fatal("QoS 0 sink not at-most-once")
	}
	if _, err := sink.NewOutput(s, sink.OutputOptions{Guarantee: config.AtLeastOnce}); err == nil {
		t.Fatal("at-least-once output over QoS 0 accepted")
	}
}
