package gateway_test

// Helpers of the end-to-end tests (e2e_*_test.go): the whole gateway run
// in-process from a configuration file (cmdRunGateway, as `gateway run
// -config`), real upstreams (our simulation server on a port the test owns,
// the node-opcua peer), real brokers (internal/brokertest), and subscribers
// (paho, nats.go, gorilla) that parse every message as Part 14 JSON and check
// what a consumer relies on: the header, SequenceNumber per writer without
// gaps, MetaDataVersion equal to the writer's metadata, and the values of a
// counter field, which reveal every loss and every duplicate.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/gorilla/websocket"
	"github.com/nats-io/nats.go"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/gateway"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/server"
)

// e2eWait bounds every wait of these tests: generous for a loaded CI
// machine under the race detector; a passing test waits far less.
const e2eWait = 20 * time.Second

// waitUntil polls cond every 10 ms until it holds, failing the test with what
// (and the gateway's log, when g is not nil) after d.
func waitUntil(t *testing.T, g *e2eGateway, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			if g != nil {
				t.Fatalf("timed out after %v waiting for %s; gateway log:\n%s", d, what, g.logTail())
			}
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		<-tick.C
	}
}

// lockedBuffer collects the gateway's log, bounded.
type lockedBuffer = testutil.LockedBuffer

// isolate gives the embedded parts, the HTTP listener and the state
// directory of the gateways a test starts places of their own.
func isolate(t *testing.T) {
	t.Setenv("UAGATE_STATE_DIR", stateDir(t))
	t.Setenv("UAGATE_HTTP_LISTEN", "127.0.0.1:0")
	t.Setenv("UAGATE_SIM_LISTEN", "127.0.0.1:0")
	t.Setenv("UAGATE_MQTT_LISTEN", "127.0.0.1:0")
	t.Setenv("UAGATE_NATS_LISTEN", "127.0.0.1:0")
}

// stateDir is a state directory for a gateway of the test. It is not
// t.TempDir: a gateway stopped at its shutdown timeout leaves what still
// ends (a detach waiting for a dead broker's queue) to write its resume
// record later, so the directory is removed as far as it can be.
func stateDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "uagate-state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// e2eGateway is one gateway running the configuration file at path, as
// `gateway run -config FILE` does: loaded, started, the file watched, API
// changes saved to it.
type e2eGateway struct {
	t      *testing.T
	gw     *gateway.Gateway
	path   string
	log    *lockedBuffer
	cancel context.CancelFunc
}

// startGateway writes text to a file named name in a temporary directory
// and runs the gateway on it until the test ends. The embedded parts and the
// HTTP listener get ports of their own (isolate).
func startGateway(t *testing.T, name, text string) *e2eGateway {
	t.Helper()
	return startGatewayWith(t, name, text, nil)
}

// startGatewayWith is startGateway with options set by opts (nil: none).
func startGatewayWith(t *testing.T, name, text string, opts func(*gateway.Options)) *e2eGateway {
	t.Helper()
	isolate(t)
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &e2eGateway{t: t, path: path, log: &lockedBuffer{}}
	logger := slog.New(slog.NewTextHandler(g.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatalf("configuration: %v", err)
	}
	o := gateway.Options{Logger: logger}
	if !strings.HasSuffix(name, ".json") {
		o.SavePath = path
	} else {
		o.SavePath = filepath.Join(cfg.Gateway.StateDir, "gateway.yaml")
	}
	if opts != nil {
		opts(&o)
	}
	gw, err := gateway.New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel, g.gw = cancel, gw
	if err := gw.Start(ctx); err != nil {
		cancel()
		t.Fatalf("gateway did not start: %v\nlog:\n%s", err, g.log.String())
	}
	if err := gw.Watch(ctx, path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.cancel()
		done := make(chan error, 1)
		go func() {
			sctx, scancel := context.WithTimeout(context.Background(), cfg.Gateway.ShutdownTimeout.D())
			defer scancel()
			done <- gw.Stop(sctx)
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Logf("gateway stop: %v", err) // a test may leave it stuck on purpose
			}
		case <-time.After(cfg.Gateway.ShutdownTimeout.D() + 5*time.Second):
			var b strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
			t.Errorf("gateway did not stop in %v; goroutines:\n%s", cfg.Gateway.ShutdownTimeout.D()+5*time.Second, b.String())
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", g.logTail())
		}
	})
	return g
}

// logTail is the last 24 KiB of the gateway's log.
func (g *e2eGateway) logTail() string {
	s := g.log.String()
	if len(s) > 24<<10 {
		s = "…" + s[len(s)-24<<10:]
	}
	return s
}

// waitLog waits until the log contains every one of parts on one line, and
// returns that line.
func (g *e2eGateway) waitLog(parts ...string) string {
	g.t.Helper()
	var found string
	waitUntil(g.t, g, e2eWait, fmt.Sprintf("a log line with %q", parts), func() bool {
		found = logLine(g.log.String(), parts...)
		return found != ""
	})
	return found
}

// logLine returns the first line of log holding every one of parts.
func logLine(log string, parts ...string) string {
	for _, l := range strings.Split(log, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return l
		}
	}
	return ""
}

// rewrite replaces the configuration file (the watcher applies or refuses
// the change).
func (g *e2eGateway) rewrite(config string) {
	g.t.Helper()
	// Write and rename, as editors and ConfigMaps do: the watcher never sees
	// half a file.
	tmp := g.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(config), 0o600); err != nil {
		g.t.Fatal(err)
	}
	if err := os.Rename(tmp, g.path); err != nil {
		g.t.Fatal(err)
	}
}

// groupStats returns the counters of writer group name (zero until built).
func (g *e2eGateway) groupStats(name string) bridge.GroupStats {
	st, _ := g.gw.GroupStats(name)
	return st
}

// outputStats returns the counters of the sink name.
func (g *e2eGateway) outputStats(name string) sink.OutputStats {
	g.t.Helper()
	st, ok := g.gw.SinkStats(name)
	if !ok {
		g.t.Fatalf("no sink %q", name)
	}
	return st
}

// e2eSim is our simulation server on a loopback port the test owns, so that
// the test can restart it on the same port.
type e2eSim struct {
	t    *testing.T
	addr string
	rate time.Duration
	mu   sync.Mutex
	srv  *server.Server
}

// startSim starts a simulation server whose Demo generators tick every rate.
func startSim(t *testing.T, rate time.Duration) *e2eSim {
	t.Helper()
	s := &e2eSim{t: t, addr: "127.0.0.1:0", rate: rate}
	s.start()
	s.addr = s.srv.Addr().String()
	t.Cleanup(s.stop)
	return s
}

func (s *e2eSim) start() {
	s.t.Helper()
	srv, err := server.New(&server.Config{
		Address:  s.addr,
		Policies: nonePolicy,
		Sim:      server.SimConfig{DemoRate: s.rate, Folders: -1, AlarmSources: -1},
	})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		s.t.Fatalf("sim on %s: %v", s.addr, err)
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

func (s *e2eSim) stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// restart closes the server (its sessions and subscriptions die with it)
// and starts a new one on the same port.
func (s *e2eSim) restart() {
	s.t.Helper()
	s.stop()
	s.start()
}

func (s *e2eSim) url() string { return "opc.tcp://" + s.addr }

// simEndpoint is an endpoint without security on url.
func simEndpoint(name, url string) config.Endpoint {
	return config.Endpoint{Name: name, URL: url, SecurityPolicy: "None", SecurityMode: "None"}
}

// standalone is a configuration with nothing embedded and no HTTP listener
// whose one endpoint, "sim", is the server at url without security (its
// certificate accepted).
func standalone(url string) *config.Config {
	off := config.EmbeddedPart{Enabled: ptr(false)}
	return &config.Config{
		Embedded:  config.Embedded{Sim: off, MQTT: off, NATS: off},
		HTTP:      config.HTTP{Disabled: true},
		Endpoints: []config.Endpoint{{Name: "sim", URL: url, SecurityPolicy: "None", SecurityMode: "None", AutoAccept: true}},
	}
}

// jetStreamSink is the at-least-once sink "js" to stream UAGATE of the NATS
// server at url.
func jetStreamSink(url string, create bool) config.Sinks {
	return config.Sinks{NATS: []config.NATSSink{{
		Name: "js", URL: url, JetStream: &config.JetStream{Stream: "UAGATE", Create: create},
		Delivery: config.Delivery{Guarantee: config.AtLeastOnce, QueueSize: 4096},
	}}}
}

// field is a field named name on node.
func field(name, node string) config.Field { return config.Field{Name: name, Node: node} }

// writer is a dataset writer of the fields.
func writer(name string, fields ...config.Field) config.DataSetWriter {
	return config.DataSetWriter{Name: name, Fields: fields}
}

// embeddedMQTT is one sink, "mqtt", on the embedded broker.
func embeddedMQTT() config.Sinks {
	return config.Sinks{MQTT: []config.MQTTSink{{Name: "mqtt", URL: config.EmbeddedMQTTURL}}}
}

// ptr is the address of v, for the optional settings.
func ptr[T any](v T) *T { return &v }

// ---- messages ----

// cfgVersion is a ConfigurationVersion.
type cfgVersion struct{ MajorVersion, MinorVersion uint32 }

// dsm is a DataSetMessage as a subscriber reads it.
type dsm struct {
	DataSetWriterId   int
	DataSetWriterName string
	SequenceNumber    uint32
	MetaDataVersion   *cfgVersion
	MessageType       string
	Payload           map[string]json.RawMessage
}

// e2eMsg is one message received from a broker or the WebSocket stream.
type e2eMsg struct {
	topic    string
	retained bool
	size     int
	at       int // arrival index in its collector

	MessageId         string
	MessageType       string
	PublisherId       string
	WriterGroupName   string
	DataSetWriterId   int    // ua-metadata
	DataSetWriterName string // ua-metadata
	MetaData          *struct {
		Name   string
		Fields []struct {
			Name        string
			BuiltInType int
		}
		ConfigurationVersion cfgVersion
	}
	Messages json.RawMessage
	dsms     []dsm // Messages: an object (single shape) or an array (batched)
}

// parseMsg parses a Part 14 JSON message.
func parseMsg(topic string, payload []byte, retained bool) (*e2eMsg, error) {
	m := &e2eMsg{topic: topic, retained: retained, size: len(payload)}
	if err := json.Unmarshal(payload, m); err != nil {
		return nil, fmt.Errorf("%s: %w: %.200s", topic, err, payload)
	}
	if m.MessageType != "ua-data" {
		return m, nil
	}
	raw := bytes.TrimSpace(m.Messages)
	switch {
	case len(raw) > 0 && raw[0] == '{':
		var d dsm
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, fmt.Errorf("%s: Messages: %w", topic, err)
		}
		m.dsms = []dsm{d}
	case len(raw) > 0 && raw[0] == '[':
		if err := json.Unmarshal(raw, &m.dsms); err != nil {
			return nil, fmt.Errorf("%s: Messages: %w", topic, err)
		}
	default:
		return nil, fmt.Errorf("%s: ua-data without Messages: %.200s", topic, payload)
	}
	return m, nil
}

// collector keeps what one subscriber received.
type collector struct {
	mu   sync.Mutex
	msgs []*e2eMsg
	errs []error
}

func (c *collector) add(topic string, payload []byte, retained bool) {
	m, err := parseMsg(topic, payload, retained)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.errs = append(c.errs, err)
		return
	}
	m.at = len(c.msgs)
	c.msgs = append(c.msgs, m)
}

// all returns the messages received so far; it fails the test on a message
// that was not Part 14 JSON.
func (c *collector) all(t *testing.T) []*e2eMsg {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) > 0 {
		t.Fatalf("%d messages could not be parsed, the first: %v", len(c.errs), c.errs[0])
	}
	return append([]*e2eMsg(nil), c.msgs...)
}

// count returns how many ua-data DataSetMessages of group/writer (keep-alives
// excluded) arrived.
func (c *collector) count(group, writer string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.msgs {
		if m.MessageType != "ua-data" || m.WriterGroupName != group {
			continue
		}
		for _, d := range m.dsms {
			if d.DataSetWriterName == writer && d.MessageType != "ua-keepalive" {
				n++
			}
		}
	}
	return n
}

// waitCount waits until at least n DataSetMessages of group/writer arrived.
func (c *collector) waitCount(t *testing.T, g *e2eGateway, group, writer string, n int) {
	t.Helper()
	waitUntil(t, g, e2eWait, fmt.Sprintf("%d DataSetMessages of %s/%s", n, group, writer), func() bool {
		return c.count(group, writer) >= n
	})
}

// ---- subscribers ----

// subscribeMQTT subscribes to topic (QoS 1) on the broker at url. With
// clientID set the session is persistent (clean session false): a broker
// that restarts from its persistence file keeps queueing for it while it
// reconnects.
func subscribeMQTT(t *testing.T, url, clientID, user, password, topic string) *collector {
	t.Helper()
	c := &collector{}
	o := mqtt.NewClientOptions().AddBroker(url).SetAutoReconnect(true).
		SetConnectRetry(true).SetConnectRetryInterval(50 * time.Millisecond).
		SetMaxReconnectInterval(200 * time.Millisecond).SetOrderMatters(true)
	if clientID != "" {
		o.SetClientID(clientID).SetCleanSession(false)
	} else {
		o.SetClientID(fmt.Sprintf("e2e-sub-%d", time.Now().UnixNano()))
	}
	if user != "" {
		o.SetUsername(user).SetPassword(password)
	}
	handler := func(_ mqtt.Client, m mqtt.Message) { c.add(m.Topic(), m.Payload(), m.Retained()) }
	// A persistent session's queued messages may arrive before Subscribe
	// registered the handler again: paho gives those to the default handler.
	o.SetDefaultPublishHandler(handler)
	// Subscribe again on every connection: a clean session forgets it; for a
	// persistent one it is harmless.
	o.SetOnConnectHandler(func(cl mqtt.Client) { cl.Subscribe(topic, 1, handler) })
	cl := mqtt.NewClient(o)
	tok := cl.Connect()
	if !tok.WaitTimeout(e2eWait) || tok.Error() != nil {
		t.Fatalf("mqtt subscriber %s: %v", url, tok.Error())
	}
	t.Cleanup(func() { cl.Disconnect(100) })
	return c
}

// subscribeNATS subscribes to subject on the server at url (core NATS).
func subscribeNATS(t *testing.T, url, subject string) *collector {
	t.Helper()
	c := &collector{}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("nats subscriber %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) { c.add(m.Subject, m.Data, false) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

// wsURL is the WebSocket stream's URL with query q.
func (g *e2eGateway) wsURL(q string) string {
	u := url.URL{Scheme: "ws", Host: g.gw.Addrs().HTTP, Path: "/ws", RawQuery: q}
	return u.String()
}

// dialWS connects a WebSocket client.
func dialWS(t *testing.T, u string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	conn, resp, err := d.Dial(u, nil)
	if err != nil {
		t.Fatalf("websocket %s: %v (%v)", u, err, resp)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// readWS reads messages of conn into c until the connection ends; it returns
// the error that ended it.
func readWS(conn *websocket.Conn, c *collector) error {
	for {
		_, p, err := conn.ReadMessage()
		if err != nil {
			return err
		}
		c.add("ws", p, false)
	}
}

// ---- checks ----

// streamCheck says what a stream may show.
type streamCheck struct {
	publisher, group, writer string
	// field is a counter field (+1 per sample) whose values are checked;
	// "" checks no values.
	field string
	// dups allows duplicates (at-least-once after a broker outage): a
	// DataSetMessage seen again must be the same; they are counted.
	dups bool
	// seqGaps allows missing SequenceNumbers (a drop-oldest sink); they are
	// counted.
	seqGaps bool
	// resets allows the counter to start again, only at a key frame (an
	// upstream that restarted); they are counted.
	resets bool
}

// streamReport is what checkStream found.
type streamReport struct {
	dsms      int // data DataSetMessages, duplicates included
	dups      int
	missing   int // SequenceNumbers skipped
	resets    int
	keyFrames int
	first     uint32 // SequenceNumber of the first and the last
	last      uint32
	values    []float64 // the counter's values, in order, duplicates left out
	writerID  int
}

// counterValue reads a numeric field in the Variant encoding
// ({"UaType":11,"Value":5}, or a bare number).
func counterValue(raw json.RawMessage) (float64, error) {
	var v struct {
		UaType int
		Value  *float64
	}
	if err := json.Unmarshal(raw, &v); err == nil && v.Value != nil {
		return *v.Value, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, fmt.Errorf("field value %s is not a number", raw)
	}
	return f, nil
}

// checkStream checks the messages of one writer, in arrival order: the
// NetworkMessage header, the DataSetWriterId and MetaDataVersion against the
// writer's ua-metadata received before, SequenceNumbers increasing by one
// (duplicates and gaps only where allowed) and, with a field, the counter
// going up by one per DataSetMessage.
func checkStream(t *testing.T, msgs []*e2eMsg, sc streamCheck) streamReport {
	t.Helper()
	var r streamReport
	var meta *e2eMsg
	seen := map[uint32]float64{}
	have := false
	var prevVal float64
	hasPrev := false
	var prevRaw json.RawMessage
	for _, m := range msgs {
		switch m.MessageType {
		case "ua-metadata":
			if m.WriterGroupName == sc.group && m.DataSetWriterName == sc.writer {
				if m.PublisherId != sc.publisher || m.MetaData == nil {
					t.Fatalf("ua-metadata of %s/%s: PublisherId %q, MetaData %v", sc.group, sc.writer, m.PublisherId, m.MetaData)
				}
				meta = m
			}
			continue
		case "ua-data":
		case "ua-status":
			continue
		default:
			t.Fatalf("%s: MessageType %q", m.topic, m.MessageType)
		}
		if m.WriterGroupName != sc.group {
			continue
		}
		for _, d := range m.dsms {
			if d.DataSetWriterName != sc.writer {
				continue
			}
			where := fmt.Sprintf("%s/%s SequenceNumber %d (message %d on %s)", sc.group, sc.writer, d.SequenceNumber, m.at, m.topic)
			if m.PublisherId != sc.publisher || m.MessageId == "" {
				t.Fatalf("%s: PublisherId %q MessageId %q, want %q and an id", where, m.PublisherId, m.MessageId, sc.publisher)
			}
			if meta == nil {
				t.Fatalf("%s: data before the writer's ua-metadata", where)
			}
			if d.DataSetWriterId == 0 || d.DataSetWriterId != meta.DataSetWriterId {
				t.Fatalf("%s: DataSetWriterId %d, the metadata says %d", where, d.DataSetWriterId, meta.DataSetWriterId)
			}
			r.writerID = d.DataSetWriterId
			if d.MetaDataVersion == nil || *d.MetaDataVersion != meta.MetaData.ConfigurationVersion {
				t.Fatalf("%s: MetaDataVersion %v, the metadata's ConfigurationVersion is %v", where, d.MetaDataVersion, meta.MetaData.ConfigurationVersion)
			}
			if d.MessageType == "ua-keepalive" {
				continue
			}
			if d.MessageType != "ua-keyframe" && d.MessageType != "ua-deltaframe" {
				t.Fatalf("%s: DataSetMessage type %q", where, d.MessageType)
			}
			r.dsms++
			var val float64
			if sc.field != "" {
				raw, ok := d.Payload[sc.field]
				if !ok {
					t.Fatalf("%s: no field %s in %v", where, sc.field, d.Payload)
				}
				v, err := counterValue(raw)
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				val = v
			}
			if old, dup := seen[d.SequenceNumber]; dup {
				if !sc.dups {
					t.Fatalf("%s: received twice", where)
				}
				if sc.field != "" && old != val {
					t.Fatalf("%s: received again with %s = %v, first with %v", where, sc.field, val, old)
				}
				r.dups++
				continue
			}
			seen[d.SequenceNumber] = val
			if d.MessageType == "ua-keyframe" {
				r.keyFrames++
			}
			skipped := 0
			switch {
			case !have:
				r.first = d.SequenceNumber
			case d.SequenceNumber == r.last+1:
			case d.SequenceNumber > r.last+1 && sc.seqGaps:
				skipped = int(d.SequenceNumber - r.last - 1)
				r.missing += skipped
			default:
				t.Fatalf("%s: after %d; arrival order: %s", where, r.last, seqList(msgs, sc.group, sc.writer))
			}
			have, r.last = true, d.SequenceNumber
			if sc.field == "" {
				continue
			}
			// Each DataSetMessage of a counter writer carries one sample: a
			// skipped SequenceNumber took its value with it.
			if want := prevVal + 1 + float64(skipped); hasPrev && val != want {
				if !sc.resets || d.MessageType != "ua-keyframe" {
					t.Fatalf("%s: %s = %v after %v, want %v (a value lost or repeated): %s after %s", where, sc.field, val, prevVal, want, d.Payload[sc.field], prevRaw)
				}
				r.resets++
			}
			prevVal, hasPrev, prevRaw = val, true, d.Payload[sc.field]
			r.values = append(r.values, val)
		}
	}
	if r.dsms == 0 {
		t.Fatalf("no data of %s/%s in %d messages", sc.group, sc.writer, len(msgs))
	}
	return r
}

// seqList is the SequenceNumbers of a writer's DataSetMessages in arrival
// order, for failure messages.
func seqList(msgs []*e2eMsg, group, writer string) string {
	var b strings.Builder
	for _, m := range msgs {
		if m.MessageType != "ua-data" || m.WriterGroupName != group {
			continue
		}
		for _, d := range m.dsms {
			if d.DataSetWriterName == writer {
				fmt.Fprintf(&b, " %d", d.SequenceNumber)
			}
		}
	}
	return b.String()
}

// isCloseCode reports whether err is a WebSocket close with code.
func isCloseCode(err error, code int) bool {
	var ce *websocket.CloseError
	return errors.As(err, &ce) && ce.Code == code
}
