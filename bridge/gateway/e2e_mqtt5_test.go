package gateway_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/bridge/command"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/testpeer/nodeopcua"
)

// mqtt5Msg is a message an MQTT 5 client of the test received.
type mqtt5Msg struct {
	topic   string
	payload []byte
	props   *paho.PublishProperties
}

// mqtt5Client is an MQTT 5 client of the test (autopaho), subscribed to
// filters, recording what it receives.
type mqtt5Client struct {
	cm *autopaho.ConnectionManager
	mu sync.Mutex
	in []mqtt5Msg
}

func newMQTT5Client(t *testing.T, brokerURL string, filters ...string) *mqtt5Client {
	t.Helper()
	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	c := &mqtt5Client{}
	up := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{
		ServerUrls: []*url.URL{u}, KeepAlive: 30, CleanStartOnInitialConnection: true,
		OnConnectionUp: func(*autopaho.ConnectionManager, *paho.Connack) {
			select {
			case up <- struct{}{}:
			default:
			}
		},
		ClientConfig: paho.ClientConfig{
			ClientID: fmt.Sprintf("e2e-mqtt5-%d", time.Now().UnixNano()),
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(p paho.PublishReceived) (bool, error) {
				c.mu.Lock()
				c.in = append(c.in, mqtt5Msg{p.Packet.Topic, append([]byte(nil), p.Packet.Payload...), p.Packet.Properties})
				c.mu.Unlock()
				return true, nil
			}},
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c.cm = cm
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer dcancel()
		_ = cm.Disconnect(dctx)
		cancel()
		<-cm.Done()
	})
	select {
	case <-up:
	case <-time.After(e2eWait):
		t.Fatal("mqtt5 client: not connected")
	}
	for _, f := range filters {
		sctx, scancel := context.WithTimeout(context.Background(), e2eWait)
		_, err := cm.Subscribe(sctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: f, QoS: 1}}})
		scancel()
		if err != nil {
			t.Fatalf("mqtt5 subscribe %s: %v", f, err)
		}
	}
	return c
}

// publish sends a QoS 1 request with MQTT 5 properties.
func (c *mqtt5Client) publish(t *testing.T, topic string, payload []byte, props *paho.PublishProperties) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	if _, err := c.cm.Publish(ctx, &paho.Publish{QoS: 1, Topic: topic, Payload: payload, Properties: props}); err != nil {
		t.Fatalf("mqtt5 publish %s: %v", topic, err)
	}
}

// wait returns the first message received that match accepts.
func (c *mqtt5Client) wait(t *testing.T, what string, match func(mqtt5Msg) bool) mqtt5Msg {
	t.Helper()
	var got mqtt5Msg
	ok := testutil.Eventually(e2eWait, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, m := range c.in {
			if match(m) {
				got = m
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("mqtt5: no %s", what)
	}
	return got
}

// mqtt5Caller sends requests on <topic>/<caller> with a Response Topic
// and Correlation Data, and takes the response that carries the
// correlation data back.
type mqtt5Caller struct {
	*mqtt5Client
	topic, responses string
	n                int
}

func newMQTT5Caller(t *testing.T, brokerURL, topic, responses string) *mqtt5Caller {
	return &mqtt5Caller{mqtt5Client: newMQTT5Client(t, brokerURL, responses), topic: topic, responses: responses}
}

func (c *mqtt5Caller) do(t *testing.T, payload []byte) *command.Response {
	t.Helper()
	c.n++
	corr := fmt.Appendf(nil, "corr-%d-%d", time.Now().UnixNano(), c.n)
	c.publish(t, c.topic, payload, &paho.PublishProperties{ResponseTopic: c.responses, CorrelationData: corr})
	m := c.wait(t, "response with correlation "+string(corr), func(m mqtt5Msg) bool {
		return m.topic == c.responses && m.props != nil && string(m.props.CorrelationData) == string(corr)
	})
	if m.props.ContentType != "application/json" || m.props.PayloadFormat == nil || *m.props.PayloadFormat != 1 {
		t.Fatalf("response properties %+v", m.props)
	}
	return decodeResponse(t, m.payload)
}

// TestCommandsMQTT5: the scenarios through mosquitto with MQTT 5 against
// the simulation server and node-opcua: responses on the request's
// Response Topic with its Correlation Data; without one, on replyTo or
// <topic>/reply as with MQTT 3.1.1; a response topic under the request
// topic is not used. The sink's data messages carry their properties.
func TestCommandsMQTT5(t *testing.T) {
	sim := startSim(t, 100*time.Millisecond)
	peer := nodeopcua.Start(t, nodeopcua.Options{LargeCount: -1})
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	ups := []upstream{simUpstream(sim.url()), peerUpstream(peer.URL)}
	data := newMQTT5Client(t, mosq.URL(), "opcua/json/data/e2e/#")
	g := startGateway(t, "gateway.yaml", marshalConfig(t, commandsConfig(ups, config.Sinks{MQTT: []config.MQTTSink{
		{Name: "mosquitto", URL: mosq.URL(), ProtocolVersion: config.MQTTv5, MessageExpiry: config.Duration(time.Minute)}}}, nil)))
	hmi := newMQTT5Caller(t, mosq.URL(), "opcua/json/command/e2e/hmi-1", "e2e/v5/hmi")
	burst := newMQTT5Caller(t, mosq.URL(), "opcua/json/command/e2e/burst-1", "e2e/v5/burst")
	waitUntil(t, g, e2eWait, "the command subscription", func() bool {
		hmi.publish(t, hmi.topic, []byte(`{"requestId":"probe","op":"read","group":"sim","writer":"w","field":"Level"}`),
			&paho.PublishProperties{ResponseTopic: hmi.responses, CorrelationData: []byte("probe")})
		return testutil.Eventually(time.Second, func() bool {
			hmi.mu.Lock()
			defer hmi.mu.Unlock()
			for _, m := range hmi.in {
				if m.props != nil && string(m.props.CorrelationData) == "probe" {
					return true
				}
			}
			return false
		})
	})
	for i, u := range ups {
		waitCommandsReady(t, g, hmi, u.name)
		runCommands(t, "mqtt5", hmi, burst, u, int16(400+i))
	}

	// Without a response topic: replyTo, else <topic>/<caller>/reply.
	plain := newMQTT5Client(t, mosq.URL(), "opcua/json/command/e2e/hmi-3/reply", "e2e/v5/answers")
	plain.publish(t, "opcua/json/command/e2e/hmi-3", []byte(`{"requestId":"v5-default","op":"read","group":"sim","writer":"w","field":"Level"}`), nil)
	plain.publish(t, "opcua/json/command/e2e/hmi-3", []byte(`{"requestId":"v5-replyto","op":"read","group":"sim","writer":"w","field":"Level","replyTo":"e2e/v5/answers"}`), nil)
	// A response topic on a request topic is refused: the default is used.
	plain.publish(t, "opcua/json/command/e2e/hmi-3", []byte(`{"requestId":"v5-loop","op":"read","group":"sim","writer":"w","field":"Level"}`),
		&paho.PublishProperties{ResponseTopic: "opcua/json/command/e2e/x", CorrelationData: []byte("loop")})
	for id, topic := range map[string]string{"v5-default": "opcua/json/command/e2e/hmi-3/reply", "v5-replyto": "e2e/v5/answers", "v5-loop": "opcua/json/command/e2e/hmi-3/reply"} {
		m := plain.wait(t, "response to "+id, func(m mqtt5Msg) bool {
			var r struct {
				RequestID string `json:"requestId"`
			}
			return json.Unmarshal(m.payload, &r) == nil && r.RequestID == id
		})
		if r := decodeResponse(t, m.payload); m.topic != topic || r.Error != nil || !r.Status.Good() {
			t.Errorf("%s: on %s (want %s): %s", id, m.topic, topic, m.payload)
		}
		if id == "v5-loop" && (m.props == nil || string(m.props.CorrelationData) != "loop") {
			t.Errorf("%s: correlation data not echoed: %+v", id, m.props)
		}
	}

	// The data messages' properties.
	d := data.wait(t, "a data message of sim", func(m mqtt5Msg) bool { return m.topic == "opcua/json/data/e2e/sim/w" })
	p := d.props
	if p == nil || p.ContentType != "application/json" || p.PayloadFormat == nil || *p.PayloadFormat != 1 ||
		p.MessageExpiry == nil || *p.MessageExpiry == 0 || *p.MessageExpiry > 60 ||
		p.User.Get("UAMessageType") != "ua-data" || p.User.Get("PublisherId") != "e2e" ||
		p.User.Get("WriterGroup") != "sim" || p.User.Get("DataSetWriter") != "w" {
		t.Fatalf("data message properties %+v", p)
	}
	var nm struct{ MessageType, PublisherId string }
	if err := json.Unmarshal(d.payload, &nm); err != nil || nm.MessageType != "ua-data" || nm.PublisherId != "e2e" {
		t.Fatalf("data message %s: %v", d.payload, err)
	}
	found := false
	for _, s := range g.gw.Commands().Stats() {
		if s.Transport == command.TransportMQTT {
			found = true
			if s.Good == 0 || s.Denied == 0 || s.RateLimited == 0 || s.Duplicates == 0 || s.Invalid == 0 {
				t.Fatalf("stats %+v", s)
			}
		}
	}
	if !found {
		t.Fatal("no stats of the mqtt transport")
	}
}

// TestE2EMQTT5Refused: a message an MQTT 5 broker refuses for good in its
// PUBACK (mosquitto's ACL denies the topic: reason code 0x87, Not
// authorized) goes to the dead-letter file and is acknowledged, instead of
// being sent again and again and holding the writer group at its
// maxUnacked: the other writer of the group streams on. (Debian's
// mosquitto 2.0.11 also closes the connection after each denial: the
// sink connects again and resends what was in flight, at least once.)
func TestE2EMQTT5Refused(t *testing.T) {
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{ACL: "topic readwrite opcua/json/status/#\n" +
		"topic readwrite opcua/json/metadata/#\ntopic readwrite opcua/json/data/+/g/ok\ntopic read opcua/json/#\n"})
	sub := newMQTT5Client(t, mosq.URL(), "opcua/json/data/#")
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		WriterGroups: []config.WriterGroup{{
			Name: "g", PublishingInterval: dur(50 * time.Millisecond), MaxUnacked: 4,
			Nodes:   config.NodeDefaults{SamplingInterval: ptr(dur(10 * time.Millisecond))},
			Writers: []config.DataSetWriter{counterWriter("ok"), counterWriter("denied")},
		}},
		Sinks: config.Sinks{MQTT: []config.MQTTSink{{Name: "m5", URL: mosq.URL(), ProtocolVersion: config.MQTTv5, QoS: ptr(1),
			Delivery: config.Delivery{Guarantee: config.AtLeastOnce}}}},
	}))
	okData := func() int {
		sub.mu.Lock()
		defer sub.mu.Unlock()
		n := 0
		for _, m := range sub.in {
			if strings.HasSuffix(m.topic, "/g/ok") {
				n++
			}
		}
		return n
	}
	// Far more messages than maxUnacked: the refusals hold nothing back.
	waitUntil(t, g, e2eWait, "40 data messages of the allowed writer", func() bool { return okData() >= 40 })
	st := g.outputStats("m5")
	if st.DeadLettered < 10 || st.Undelivered != 0 {
		t.Errorf("sink stats %+v: want the denied writer's messages dead-lettered, none undelivered", st)
	}
	if gs := g.groupStats("g"); gs.Undelivered != 0 || gs.Acked < 20 {
		t.Errorf("writer group: %d acknowledged, %d undelivered: the refusals held the subscription", gs.Acked, gs.Undelivered)
	}
	sub.mu.Lock()
	for _, m := range sub.in {
		if strings.HasSuffix(m.topic, "/g/denied") {
			t.Errorf("a denied message reached the subscriber on %s", m.topic)
			break
		}
	}
	sub.mu.Unlock()
	b, err := os.ReadFile(filepath.Join(g.gw.Config().Gateway.StateDir, "deadletters.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var dl struct{ Sink, Kind, Group, Writer, Reason string }
	line, _, _ := strings.Cut(string(b), "\n")
	if err := json.Unmarshal([]byte(line), &dl); err != nil {
		t.Fatalf("dead letter %q: %v", line, err)
	}
	if dl.Sink != "m5" || dl.Kind != "data" || dl.Group != "g" || dl.Writer != "denied" || !strings.Contains(dl.Reason, "0x87") {
		t.Errorf("dead letter: %+v", dl)
	}
}
