package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uagate/gateway/internal/testutil"
)

// logBuffer collects log records for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testLogger() (*slog.Logger, *logBuffer) {
	b := new(logBuffer)
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

func ctx5s(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func pahoConnect(t *testing.T, url, id string) paho.Client {
	t.Helper()
	opts := paho.NewClientOptions().AddBroker(url).SetClientID(id).
		SetAutoReconnect(false).SetConnectTimeout(5 * time.Second)
	c := paho.NewClient(opts)
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("mqtt connect %s: %v", url, tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}

func wait(t *testing.T, what string, tok paho.Token) {
	t.Helper()
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("%s: %v", what, tok.Error())
	}
}

// receive returns the next message of ch, or fails after a bound.
func receive(t *testing.T, ch <-chan paho.Message) paho.Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(5 * time.Second): // a bound on a wait, not a sleep
		t.Fatal("no MQTT message within 5 s")
		return nil
	}
}

func TestMQTT(t *testing.T) {
	testutil.CheckLeaks(t)
	log, logs := testLogger()
	m, err := StartMQTT(ctx5s(t), "127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !strings.HasPrefix(m.URL(), "tcp://127.0.0.1:") || m.URL() != "tcp://"+m.Addr() || strings.HasSuffix(m.Addr(), ":0") {
		t.Fatalf("URL %q, Addr %q", m.URL(), m.Addr())
	}

	// Publish and subscribe, QoS 1.
	sub := pahoConnect(t, m.URL(), "sub")
	got := make(chan paho.Message, 16)
	wait(t, "subscribe", sub.Subscribe("opcua/json/data/#", 1, func(_ paho.Client, msg paho.Message) { got <- msg }))
	pub := pahoConnect(t, m.URL(), "pub")
	wait(t, "publish", pub.Publish("opcua/json/data/uagate/g1/w1", 1, false, `{"MessageType":"ua-data"}`))
	if msg := receive(t, got); msg.Topic() != "opcua/json/data/uagate/g1/w1" || string(msg.Payload()) != `{"MessageType":"ua-data"}` || msg.Retained() {
		t.Errorf("got %s %q retained=%v", msg.Topic(), msg.Payload(), msg.Retained())
	}

	// A retained message reaches a subscriber that comes later; the newer one replaces it.
	wait(t, "publish retained", pub.Publish("opcua/json/metadata/uagate/g1/w1", 1, true, "meta v1"))
	wait(t, "publish retained", pub.Publish("opcua/json/metadata/uagate/g1/w1", 1, true, "meta v2"))
	late := pahoConnect(t, m.URL(), "late")
	gotLate := make(chan paho.Message, 16)
	wait(t, "subscribe", late.Subscribe("opcua/json/metadata/#", 1, func(_ paho.Client, msg paho.Message) { gotLate <- msg }))
	if msg := receive(t, gotLate); string(msg.Payload()) != "meta v2" || !msg.Retained() {
		t.Errorf("retained: got %q retained=%v", msg.Payload(), msg.Retained())
	}

	// Only warnings reach the log, and a loopback listener warns of nothing.
	if s := logs.String(); strings.Contains(s, "mochi") || strings.Contains(s, "level=WARN") {
		t.Errorf("log:\n%s", s)
	}

	m.Close()
	m.Close() // twice is harmless
	if !testutil.Eventually(5*time.Second, func() bool { return !sub.IsConnectionOpen() }) {
		t.Error("client still connected after Close")
	}
	if c, err := net.Dial("tcp", m.Addr()); err == nil {
		_ = c.Close()
		t.Error("broker still accepts after Close")
	}
}

func TestMQTTWarnsBeyondLoopback(t *testing.T) {
	testutil.CheckLeaks(t)
	log, logs := testLogger()
	m, err := StartMQTT(ctx5s(t), "0.0.0.0:0", log)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !strings.Contains(logs.String(), `level=WARN msg="embedded MQTT broker listens beyond loopback`) {
		t.Errorf("no warning in:\n%s", logs.String())
	}
	if !strings.HasPrefix(m.URL(), "tcp://127.0.0.1:") {
		t.Errorf("URL %q: want loopback for a wildcard listener", m.URL())
	}
	pahoConnect(t, m.URL(), "c") // reachable through loopback
}

// busyPort returns an address something already listens on.
func busyPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}

func TestBusyPort(t *testing.T) {
	testutil.CheckLeaks(t)
	log, _ := testLogger()
	addr := busyPort(t)
	_, err := StartMQTT(ctx5s(t), addr, log)
	checkBusy(t, err, "mqtt", addr)
	_, err = StartNATS(ctx5s(t), addr, t.TempDir(), log)
	checkBusy(t, err, "nats", addr)
}

func checkBusy(t *testing.T, err error, part, addr string) {
	t.Helper()
	want := fmt.Sprintf("embedded %s: listen %s: address already in use (set embedded.%s.listen or embedded.%s.enabled: false)", part, addr, part, part)
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant       %s", err, want)
	}
	var le *ListenError
	if !errors.As(err, &le) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("%v: want a *ListenError wrapping EADDRINUSE", err)
	}
}

func TestListenRefused(t *testing.T) {
	log, _ := testLogger()
	for _, tc := range []struct{ listen, want string }{
		{"127.0.0.1", "embedded mqtt: listen 127.0.0.1: want host:port: address 127.0.0.1: missing port in address (set embedded.mqtt.listen or embedded.mqtt.enabled: false)"},
		{"127.0.0.1:http2x", "embedded mqtt: listen 127.0.0.1:http2x: want host:port: lookup tcp/http2x: unknown port (set embedded.mqtt.listen or embedded.mqtt.enabled: false)"},
	} {
		if _, err := StartMQTT(ctx5s(t), tc.listen, log); err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v\nwant %s", tc.listen, err, tc.want)
		}
	}
	if _, err := StartNATS(ctx5s(t), "127.0.0.1:0", "", log); err == nil || !strings.Contains(err.Error(), "store directory is required") {
		t.Errorf("no store dir: %v", err)
	}
}

func TestNATS(t *testing.T) {
	testutil.CheckLeaks(t)
	log, logs := testLogger()
	store := t.TempDir()
	n, err := StartNATS(ctx5s(t), "127.0.0.1:0", store, log)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if !strings.HasPrefix(n.URL(), "nats://127.0.0.1:") || n.URL() != "nats://"+n.Addr() || strings.HasSuffix(n.Addr(), ":4222") {
		t.Fatalf("URL %q, Addr %q: want the port the system chose", n.URL(), n.Addr())
	}
	nc, err := nats.Connect(n.URL(), nats.Timeout(5*time.Second), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	// Core publish and subscribe.
	sub, err := nc.SubscribeSync("opcua.json.data.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("opcua.json.data.uagate.g1.w1", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.NextMsg(5 * time.Second); err != nil || string(msg.Data) != "hello" {
		t.Fatalf("core: %v %v", msg, err)
	}

	// JetStream: create a stream, publish (acknowledged by the stream),
	// consume and acknowledge.
	ctx := ctx5s(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "UA", Subjects: []string{"opcua.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx, "opcua.json.data.uagate.g1.w1", []byte(`{"MessageType":"ua-data"}`))
	if err != nil || ack.Stream != "UA" || ack.Sequence != 1 {
		t.Fatalf("publish ack %+v, %v", ack, err)
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "gw", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for msg := range batch.Messages() {
		if string(msg.Data()) != `{"MessageType":"ua-data"}` {
			t.Errorf("jetstream message %q", msg.Data())
		}
		if err := msg.DoubleAck(ctx); err != nil {
			t.Fatalf("ack: %v", err)
		}
		got++
	}
	if err := batch.Error(); err != nil || got != 1 {
		t.Fatalf("fetched %d messages: %v", got, err)
	}
	if info, err := cons.Info(ctx); err != nil || info.NumAckPending != 0 || info.AckFloor.Stream != 1 {
		t.Fatalf("consumer after ack: %+v, %v", info, err)
	}
	nc.Close()
	n.Close()
	n.Close() // twice is harmless
	if s := logs.String(); strings.Contains(s, "level=INFO msg=Starting") || strings.Contains(s, "Listening for client") {
		t.Errorf("nats-server notices reached the log:\n%s", s)
	}

	// The store survives a restart.
	n2, err := StartNATS(ctx5s(t), "127.0.0.1:0", store, log)
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	nc2, err := nats.Connect(n2.URL(), nats.Timeout(5*time.Second), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	js2, err := jetstream.New(nc2)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := js2.Stream(ctx5s(t), "UA")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s2.Info(ctx5s(t)); err != nil || info.State.Msgs != 1 {
		t.Fatalf("stream after restart: %+v, %v", info, err)
	}
}

// TestMQTTCloseWithClientConnecting: a connection the broker accepted but
// that has not sent its CONNECT yet (a client reconnecting while the broker
// shuts down) does not hold Close.
func TestMQTTCloseWithClientConnecting(t *testing.T) {
	testutil.CheckLeaks(t)
	log, _ := testLogger()
	m, err := StartMQTT(ctx5s(t), "127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testutil.WaitFor(t, 5*time.Second, "the connection accepted", func() bool {
		m.ln.mu.Lock()
		defer m.ln.mu.Unlock()
		return len(m.ln.open) == 1
	})
	closed := make(chan struct{})
	go func() {
		m.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second): // a bound on a wait, not a sleep
		t.Fatal("Close still waits for a connection that never sent CONNECT")
	}
}

// TestMQTTRetainedKept: the embedded broker keeps a retained message however
// old it is (metadata and status are published once and must outlive a
// day), while one that carries its own MQTT 5 expiry goes when it expires;
// that one going shows the broker's sweep of retained messages ran.
func TestMQTTRetainedKept(t *testing.T) {
	m, err := StartMQTT(ctx5s(t), "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	now := time.Now().Unix()
	old := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Retain: true}, TopicName: "opcua/json/metadata/uagate/g1/w1",
		Payload: []byte("meta"), Created: now - 3*24*3600, ProtocolVersion: 4}
	expiring := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Retain: true}, TopicName: "opcua/json/metadata/uagate/g1/w2",
		Payload: []byte("meta"), Created: now - 10, Expiry: now - 1, ProtocolVersion: 5}
	m.srv.Topics.RetainMessage(old)
	m.srv.Topics.RetainMessage(expiring)
	retained := func(topic string) bool {
		_, ok := m.srv.Topics.Retained.GetAll()[topic]
		return ok
	}
	if !testutil.Eventually(10*time.Second, func() bool { return !retained(expiring.TopicName) }) {
		t.Fatal("the expired MQTT 5 message is still retained: the sweep did not run")
	}
	if !retained(old.TopicName) {
		t.Error("a three-day-old retained message was deleted")
	}
}
