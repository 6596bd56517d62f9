package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	json "github.com/goccy/go-json"
	"github.com/gorilla/websocket"
	"github.com/nats-io/nats.go"

	"github.com/uagate/gateway/bridge/command"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// Commands from the messaging side, end to end: through Debian's
// nats-server and mosquitto and the WebSocket stream, to our simulation
// server and to node-opcua, with a client of the test reading back what
// the servers hold.

// cmdMaxPayload is the test's commands.maxPayload.
const cmdMaxPayload = 2048

// cmdClient sends a request as one caller and returns its response.
type cmdClient interface {
	do(t *testing.T, payload []byte) *command.Response
}

// upstream is a server under test and its nodes.
type upstream struct {
	name     string // endpoint and writer group
	url      string
	level    string // Int16, writable, allowed
	setpoint string // Double, writable, not allowed
	object   string // of method Add(a Double, b Double)
	add      string
}

// commandsConfig is a gateway on both upstreams with the test's rules:
// callers hmi-* may write Level, read everything and call Add; callers
// burst-* may read at a rate of three in a burst.
func commandsConfig(ups []upstream, sinks config.Sinks, keys []config.APIKey) *config.Config {
	cfg := &config.Config{Gateway: config.Gateway{PublisherID: "e2e"}, Sinks: sinks, HTTP: config.HTTP{APIKeys: keys}}
	rule := config.CommandRule{Name: "hmi", Callers: []string{"nats:hmi-*", "mqtt:hmi-*", "websocket:hmi-*"},
		Read: []config.CommandTarget{{Group: "*"}}}
	for _, u := range ups {
		cfg.Endpoints = append(cfg.Endpoints, config.Endpoint{Name: u.name, URL: u.url, SecurityPolicy: "None", SecurityMode: "None", AutoAccept: true})
		cfg.WriterGroups = append(cfg.WriterGroups, config.WriterGroup{Name: u.name, Endpoint: u.name, PublishingInterval: dur(100 * time.Millisecond),
			Writers: []config.DataSetWriter{writer("w", field("Level", u.level), field("Setpoint", u.setpoint))}})
		rule.Write = append(rule.Write, config.CommandTarget{Group: u.name, Writer: "w", Field: "Level"})
		rule.Call = append(rule.Call, config.CommandMethod{Endpoint: u.name, Object: u.object, Method: u.add})
	}
	cfg.Commands = config.Commands{MaxPayload: cmdMaxPayload, Rules: []config.CommandRule{rule,
		{Name: "burst", Callers: []string{"*:burst-*"}, Read: []config.CommandTarget{{Group: "*"}}, Rate: &config.CommandRate{PerSecond: 0.001, Burst: 3}}}}
	return cfg
}

func simUpstream(url string) upstream {
	return upstream{name: "sim", url: url, level: server.StaticNode(ua.TypeInt16, false), setpoint: server.NodeSetpoint,
		object: "ns=1;s=Demo.Methods", add: "ns=1;s=Demo.Methods.Add"}
}

func peerUpstream(url string) upstream {
	return upstream{name: "peer", url: url, level: nodeopcua.NodeLevel, setpoint: nodeopcua.NodeSetpoint,
		object: nodeopcua.NodeDemo, add: nodeopcua.NodeAdd}
}

// readBack reads a node's value with a session of the test's own.
func readBack(t *testing.T, url, node string) ua.Variant {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	c, err := client.Dial(ctx, url, &client.Config{SecurityPolicy: uasc.SecurityPolicyNone, AutoAccept: true})
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	defer c.Close()
	vals, err := c.ReadValues(ctx, ua.MustParseNodeID(node))
	if err != nil {
		t.Fatalf("read back %s: %v", node, err)
	}
	return vals[0].Value
}

// runCommands runs the scenarios through cl (a caller hmi-…) and burst (a
// caller burst-… of the same transport) against u; base makes the values
// this run writes its own.
func runCommands(t *testing.T, tr string, cl, burst cmdClient, u upstream, base int16) {
	id := func(s string) string { return fmt.Sprintf("%s-%s-%s", tr, u.name, s) }
	req := func(s string, m map[string]any) []byte {
		m["requestId"] = id(s)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write := func(s, f string, v any) []byte {
		return req(s, map[string]any{"op": "write", "group": u.name, "writer": "w", "field": f, "value": v})
	}
	level := func() int16 {
		v := readBack(t, u.url, u.level)
		if v.Type() != ua.TypeInt16 {
			t.Fatalf("%s %s: Level is a %s", tr, u.name, v.Type())
		}
		return v.Int16()
	}
	check := func(what string, r *command.Response, kind string, status ua.StatusCode) {
		t.Helper()
		if r.RequestID == "" || (kind == "" && (r.Error != nil || !r.Status.Good())) ||
			(kind != "" && (r.Error == nil || r.Error.Kind != kind || r.Error.Message == "")) || r.Status.Code != uint32(status) {
			t.Fatalf("%s %s %s: want %q %s, got %s", tr, u.name, what, kind, status.Name(), r.Marshal())
		}
	}

	// An allowed write takes effect: a JSON number becomes the Int16.
	r := cl.do(t, write("allowed", "Level", base))
	check("allowed write", r, "", ua.StatusGood)
	if r.RequestID != id("allowed") || r.Target == nil || r.Target.Type != "Int16" {
		t.Fatalf("%s %s: response %s", tr, u.name, r.Marshal())
	}
	if got := level(); got != base {
		t.Fatalf("%s %s: Level reads %d after writing %d", tr, u.name, got, base)
	}
	// A fresh read sees it.
	r = cl.do(t, req("read", map[string]any{"op": "read", "group": u.name, "writer": "w", "field": "Level"}))
	check("read", r, "", ua.StatusGood)
	if !strings.Contains(string(r.Value), fmt.Sprintf(`"Value":%d`, base)) {
		t.Fatalf("%s %s: read %s", tr, u.name, r.Marshal())
	}
	// A denied write is refused with the reason and has no effect.
	before := readBack(t, u.url, u.setpoint)
	r = cl.do(t, write("denied", "Setpoint", 99.5))
	check("denied write", r, command.KindDenied, ua.StatusBadUserAccessDenied)
	if after := readBack(t, u.url, u.setpoint); after.Double() != before.Double() {
		t.Fatalf("%s %s: a denied write changed Setpoint from %v to %v", tr, u.name, before, after)
	}
	// Wrong types.
	for _, v := range []any{3.5, 70000, "7", true} {
		check(fmt.Sprintf("write %v", v), cl.do(t, write(fmt.Sprintf("type-%v", v), "Level", v)), command.KindTypeMismatch, ua.StatusBadTypeMismatch)
	}
	if got := level(); got != base {
		t.Fatalf("%s %s: a refused write changed Level to %d", tr, u.name, got)
	}
	// Unknown targets.
	check("unknown field", cl.do(t, write("unknown", "Nope", 1)), command.KindUnknownTarget, ua.StatusBadNodeIdUnknown)
	check("unknown group", cl.do(t, req("unknown-group", map[string]any{"op": "write", "group": "nope", "writer": "w", "field": "Level", "value": 1})),
		command.KindUnknownTarget, ua.StatusBadNodeIdUnknown)
	// An oversized request is refused and named.
	r = cl.do(t, req("big", map[string]any{"op": "write", "group": u.name, "writer": "w", "field": "Level", "value": 1, "type": strings.Repeat("x", cmdMaxPayload)}))
	check("oversized", r, command.KindTooLarge, ua.StatusBadRequestTooLarge)
	if r.RequestID != id("big") {
		t.Fatalf("%s %s: oversized request answered as %q", tr, u.name, r.RequestID)
	}
	// A resent request is not run again.
	r = cl.do(t, write("allowed", "Level", base+1))
	if !r.Duplicate || !r.Status.Good() {
		t.Fatalf("%s %s: resent: %s", tr, u.name, r.Marshal())
	}
	if got := level(); got != base {
		t.Fatalf("%s %s: the resent request ran: Level %d", tr, u.name, got)
	}
	// A method call with arguments typed from InputArguments.
	r = cl.do(t, req("call", map[string]any{"op": "call", "endpoint": u.name, "object": u.object, "method": u.add, "arguments": []any{1.5, 2}}))
	check("call", r, "", ua.StatusGood)
	if len(r.OutputArguments) != 1 || !strings.Contains(string(r.OutputArguments[0]), `3.5`) {
		t.Fatalf("%s %s: Add: %s", tr, u.name, r.Marshal())
	}
	// A burst beyond the rate limit: three in the bucket, the rest refused.
	good, limited := 0, 0
	for i := range 6 {
		r := burst.do(t, req(fmt.Sprint("burst-", i), map[string]any{"op": "read", "group": u.name, "writer": "w", "field": "Level"}))
		switch {
		case r.Error == nil && r.Status.Good():
			good++
		case r.Error != nil && r.Error.Kind == command.KindRateLimited:
			limited++
		default:
			t.Fatalf("%s %s: burst: %s", tr, u.name, r.Marshal())
		}
	}
	if good+limited != 6 || limited < 3 {
		t.Fatalf("%s %s: burst of 6 at 3 a bucket: %d good, %d rate-limited", tr, u.name, good, limited)
	}
}

// natsCaller sends requests with NATS request-reply.
type natsCaller struct {
	nc      *nats.Conn
	subject string
}

func newNATSCaller(t *testing.T, url, subject string) *natsCaller {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return &natsCaller{nc: nc, subject: subject}
}

func (c *natsCaller) do(t *testing.T, payload []byte) *command.Response {
	t.Helper()
	m, err := c.nc.Request(c.subject, payload, e2eWait)
	if err != nil {
		t.Fatalf("nats request on %s: %v", c.subject, err)
	}
	return decodeResponse(t, m.Data)
}

func decodeResponse(t *testing.T, b []byte) *command.Response {
	t.Helper()
	var r command.Response
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("response %s: %v", b, err)
	}
	return &r
}

// waitCommandsReady waits until a request is answered (the transport
// subscribed and the command session connected).
func waitCommandsReady(t *testing.T, g *e2eGateway, cl cmdClient, group string) {
	t.Helper()
	r := cl.do(t, []byte(`{"requestId":"ready-`+group+`","op":"read","group":"`+group+`","writer":"w","field":"Level"}`))
	if r.Error != nil {
		t.Fatalf("first request: %s", r.Marshal())
	}
}

// TestCommandsNATS: the scenarios through nats-server, natively
// request-reply, against the simulation server and node-opcua.
func TestCommandsNATS(t *testing.T) {
	sim := startSim(t, 100*time.Millisecond)
	peer := nodeopcua.Start(t, nodeopcua.Options{LargeCount: -1})
	ns := brokertest.StartNATS(t, brokertest.NATSOptions{})
	ups := []upstream{simUpstream(sim.url()), peerUpstream(peer.URL)}
	g := startGateway(t, "gateway.yaml", marshalConfig(t, commandsConfig(ups, config.Sinks{NATS: []config.NATSSink{{Name: "nats", URL: ns.URL()}}}, nil)))
	hmi := newNATSCaller(t, ns.URL(), "opcua.json.command.e2e.hmi-1")
	burst := newNATSCaller(t, ns.URL(), "opcua.json.command.e2e.burst-1")
	waitUntil(t, g, e2eWait, "the command subscription", func() bool {
		_, err := hmi.nc.Request(hmi.subject, []byte(`{}`), 200*time.Millisecond)
		return err == nil
	})
	for i, u := range ups {
		waitCommandsReady(t, g, hmi, u.name)
		runCommands(t, "nats", hmi, burst, u, int16(100+i))
	}
	// Without a reply subject the answer goes to <subject>.reply.
	var mu sync.Mutex
	var got []byte
	sub, err := hmi.nc.Subscribe(hmi.subject+".reply", func(m *nats.Msg) {
		mu.Lock()
		got = m.Data
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := hmi.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := hmi.nc.Publish(hmi.subject, []byte(`{"requestId":"noreply","op":"read","group":"sim","writer":"w","field":"Level"}`)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, g, e2eWait, "the response on .reply", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got != nil
	})
	if r := decodeResponse(t, got); r.RequestID != "noreply" || !r.Status.Good() {
		t.Fatalf("response on .reply: %s", got)
	}
	st := g.gw.Commands().Stats()
	if st[1].Transport != command.TransportNATS || st[1].Good == 0 || st[1].Denied == 0 || st[1].RateLimited == 0 || st[1].Duplicates == 0 || st[1].Invalid == 0 {
		t.Fatalf("stats %+v", st[1])
	}
}

// mqttCaller publishes requests on <topic>/<caller> and takes the
// responses from <topic>/<caller>/reply (or the replyTo it names).
type mqttCaller struct {
	cl    mqtt.Client
	topic string
	mu    sync.Mutex
	resps map[string][]byte
}

func newMQTTCaller(t *testing.T, url, topic, reply string) *mqttCaller {
	t.Helper()
	c := &mqttCaller{topic: topic, resps: map[string][]byte{}}
	o := mqtt.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprintf("e2e-cmd-%d", time.Now().UnixNano())).SetOrderMatters(false)
	c.cl = mqtt.NewClient(o)
	if tok := c.cl.Connect(); !tok.WaitTimeout(e2eWait) || tok.Error() != nil {
		t.Fatalf("mqtt caller: %v", tok.Error())
	}
	t.Cleanup(func() { c.cl.Disconnect(100) })
	if reply == "" {
		reply = topic + "/reply"
	}
	tok := c.cl.Subscribe(reply, 1, func(_ mqtt.Client, m mqtt.Message) {
		var r struct {
			RequestID string `json:"requestId"`
		}
		_ = json.Unmarshal(m.Payload(), &r)
		c.mu.Lock()
		c.resps[r.RequestID] = append([]byte(nil), m.Payload()...)
		c.mu.Unlock()
	})
	if !tok.WaitTimeout(e2eWait) || tok.Error() != nil {
		t.Fatalf("mqtt caller subscribe: %v", tok.Error())
	}
	return c
}

func (c *mqttCaller) do(t *testing.T, payload []byte) *command.Response {
	t.Helper()
	var p struct {
		RequestID string `json:"requestId"`
	}
	_ = json.Unmarshal(payload, &p)
	id := p.RequestID
	c.mu.Lock()
	delete(c.resps, id)
	c.mu.Unlock()
	if tok := c.cl.Publish(c.topic, 1, false, payload); !tok.WaitTimeout(e2eWait) || tok.Error() != nil {
		t.Fatalf("mqtt publish: %v", tok.Error())
	}
	var got []byte
	if !testutil.Eventually(e2eWait, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		got = c.resps[id]
		return got != nil
	}) {
		t.Fatalf("no response to %q on %s/reply", id, c.topic)
	}
	return decodeResponse(t, got)
}

// TestCommandsMQTT: the scenarios through mosquitto with MQTT 3.1.1
// (responses on <topic>/<caller>/reply, or replyTo).
func TestCommandsMQTT(t *testing.T) {
	sim := startSim(t, 100*time.Millisecond)
	peer := nodeopcua.Start(t, nodeopcua.Options{LargeCount: -1})
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	ups := []upstream{simUpstream(sim.url()), peerUpstream(peer.URL)}
	g := startGateway(t, "gateway.yaml", marshalConfig(t, commandsConfig(ups, config.Sinks{MQTT: []config.MQTTSink{{Name: "mosquitto", URL: mosq.URL()}}}, nil)))
	hmi := newMQTTCaller(t, mosq.URL(), "opcua/json/command/e2e/hmi-1", "")
	burst := newMQTTCaller(t, mosq.URL(), "opcua/json/command/e2e/burst-1", "")
	waitUntil(t, g, e2eWait, "the command subscription", func() bool {
		hmi.cl.Publish(hmi.topic, 1, false, `{"requestId":"probe","op":"read","group":"sim","writer":"w","field":"Level"}`).Wait()
		return testutil.Eventually(time.Second, func() bool {
			hmi.mu.Lock()
			defer hmi.mu.Unlock()
			return hmi.resps["probe"] != nil
		})
	})
	for i, u := range ups {
		waitCommandsReady(t, g, hmi, u.name)
		runCommands(t, "mqtt", hmi, burst, u, int16(200+i))
	}
	// replyTo names the response topic; one under the request topic is
	// refused (the default is used).
	other := newMQTTCaller(t, mosq.URL(), "opcua/json/command/e2e/hmi-2", "e2e/answers")
	r := other.do(t, []byte(`{"requestId":"rt","op":"read","group":"sim","writer":"w","field":"Level","replyTo":"e2e/answers"}`))
	if r.Error != nil || r.RequestID != "rt" {
		t.Fatalf("replyTo: %s", r.Marshal())
	}
	r = hmi.do(t, []byte(`{"requestId":"loop","op":"read","group":"sim","writer":"w","field":"Level","replyTo":"opcua/json/command/e2e/x"}`))
	if r.Error != nil || r.RequestID != "loop" {
		t.Fatalf("replyTo under the request topic: %s", r.Marshal())
	}
}

// wsCaller sends {"command": …} on a WebSocket connection of the stream
// and reads {"commandResponse": …} from the same connection.
type wsCaller struct {
	conn *websocket.Conn
}

func newWSCaller(t *testing.T, g *e2eGateway, token string) *wsCaller {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	conn, resp, err := d.Dial(g.wsURL(""), http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		t.Fatalf("websocket: %v (%v)", err, resp)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &wsCaller{conn: conn}
}

func (c *wsCaller) do(t *testing.T, payload []byte) *command.Response {
	t.Helper()
	msg := append(append([]byte(`{"command":`), payload...), '}')
	if err := c.conn.WriteMessage(websocket.TextMessage, msg); err != nil {
		t.Fatalf("websocket write: %v", err)
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(e2eWait))
	for {
		_, p, err := c.conn.ReadMessage()
		if err != nil {
			t.Fatalf("websocket read: %v", err)
		}
		var m struct {
			Response json.RawMessage `json:"commandResponse"`
		}
		if json.Unmarshal(p, &m) == nil && len(m.Response) > 0 {
			return decodeResponse(t, m.Response)
		}
	}
}

// TestCommandsWebSocket: the scenarios on the WebSocket stream's
// connections; the caller is the API key's name.
func TestCommandsWebSocket(t *testing.T) {
	sim := startSim(t, 100*time.Millisecond)
	peer := nodeopcua.Start(t, nodeopcua.Options{LargeCount: -1})
	ups := []upstream{simUpstream(sim.url()), peerUpstream(peer.URL)}
	// Secrets are not marshalled: the tokens come from the environment.
	t.Setenv("E2E_HMI_TOKEN", "hmi-ws-token-0123456789")
	t.Setenv("E2E_BURST_TOKEN", "burst-ws-token-0123456789")
	keys := []config.APIKey{{Name: "hmi-ws", Role: "read", Token: config.Secret{Env: "E2E_HMI_TOKEN"}},
		{Name: "burst-ws", Role: "read", Token: config.Secret{Env: "E2E_BURST_TOKEN"}}}
	g := startGateway(t, "gateway.yaml", marshalConfig(t, commandsConfig(ups, config.Sinks{WebSocket: &config.WebSocketSink{}}, keys)))
	hmi := newWSCaller(t, g, "hmi-ws-token-0123456789")
	burst := newWSCaller(t, g, "burst-ws-token-0123456789")
	for i, u := range ups {
		waitCommandsReady(t, g, hmi, u.name)
		runCommands(t, "websocket", hmi, burst, u, int16(300+i))
	}
	// The stream still works on a connection that sends commands.
	if err := hmi.conn.WriteMessage(websocket.TextMessage, []byte(`{"subscribe":{"groups":["sim"],"kinds":["data"]}}`)); err != nil {
		t.Fatal(err)
	}
	_ = hmi.conn.SetReadDeadline(time.Now().Add(e2eWait))
	if _, p, err := hmi.conn.ReadMessage(); err != nil || !strings.Contains(string(p), `"MessageType":"ua-data"`) {
		t.Fatalf("data after commands: %s %v", p, err)
	}
	log := g.gw.Commands().Log(1000)
	found := false
	for _, e := range log {
		if e.Caller == "websocket:hmi-ws" && e.Op == command.OpWrite && e.Error == "" && len(e.OldValue) > 0 && len(e.Value) > 0 {
			found = true
		}
	}
	if !found {
		t.Fatalf("no logged write of websocket:hmi-ws with old and new value: %+v", log)
	}
}
