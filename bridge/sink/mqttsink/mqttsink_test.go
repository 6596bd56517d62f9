package mqttsink

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/brokertest"
)

var fastBackoff = sink.OutputOptions{}.Backoff

func init() {
	fastBackoff.Initial, fastBackoff.Max = 20*time.Millisecond, 200*time.Millisecond
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// tracker records how each token was settled.
type tracker struct {
	mu        sync.Mutex
	delivered map[uint64]int
	failed    map[uint64]int
}

func newTracker() *tracker { return &tracker{delivered: map[uint64]int{}, failed: map[uint64]int{}} }

func (tr *tracker) Settled(token uint64, delivered bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if delivered {
		tr.delivered[token]++
	} else {
		tr.failed[token]++
	}
}

func (tr *tracker) settled() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.delivered) + len(tr.failed)
}

// checkAll asserts tokens [0,n) were each settled exactly once, delivered.
func (tr *tracker) checkAll(t *testing.T, n int) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for i := uint64(0); i < uint64(n); i++ {
		if tr.delivered[i] != 1 || tr.failed[i] != 0 {
			t.Errorf("token %d: delivered %d, undelivered %d; want delivered once", i, tr.delivered[i], tr.failed[i])
		}
	}
}

var addr = sink.Addr{Publisher: "pub", Group: "line1", Writer: "temps"}

func counterMessage(tr sink.Tracker, i int, k sink.Kind, a sink.Addr) *sink.Message {
	m := sink.NewMessage(64)
	m.SetPayload(fmt.Appendf(nil, `{"counter":%d}`, i))
	m.Kind, m.Addr, m.Tracker, m.Token = k, a, tr, uint64(i)
	return m
}

type received struct {
	topic    string
	payload  string
	retained bool
}

// subscriber is a paho client of the test, recording what it receives.
type subscriber struct {
	t      *testing.T
	client mqtt.Client

	mu       sync.Mutex
	msgs     []received
	counters map[int]int // counter → times received
}

func subscribe(t *testing.T, url, clientID string, clean bool, filter string) *subscriber {
	t.Helper()
	return subscribeTLS(t, url, clientID, clean, filter, nil)
}

// subscribeTLS is subscribe over TLS with tc (nil: plain).
func subscribeTLS(t *testing.T, url, clientID string, clean bool, filter string, tc *tls.Config) *subscriber {
	t.Helper()
	s := &subscriber{t: t, counters: map[int]int{}}
	o := mqtt.NewClientOptions().AddBroker(url).SetClientID(clientID).SetCleanSession(clean).
		SetAutoReconnect(true).SetMaxReconnectInterval(200 * time.Millisecond).SetConnectRetry(true).
		SetConnectRetryInterval(100 * time.Millisecond).SetResumeSubs(true).SetOrderMatters(false).
		SetOnConnectHandler(func(c mqtt.Client) {
			// After a reconnect the session is resumed from the broker's persistence;
			// subscribing again is harmless and covers a fresh session.
			c.Subscribe(filter, 1, nil)
		}).
		SetDefaultPublishHandler(func(_ mqtt.Client, m mqtt.Message) {
			var body struct{ Counter *int }
			_ = json.Unmarshal(m.Payload(), &body)
			s.mu.Lock()
			s.msgs = append(s.msgs, received{m.Topic(), string(m.Payload()), m.Retained()})
			if body.Counter != nil {
				s.counters[*body.Counter]++
			}
			s.mu.Unlock()
		})
	if tc != nil {
		o.SetTLSConfig(tc)
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

func (s *subscriber) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.counters)
}

func (s *subscriber) waitTopic(t *testing.T, topic string, match func(received) bool) received {
	t.Helper()
	var got received
	brokertest.WaitFor(t, 10*time.Second, "a message on "+topic, func() bool {
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

func newOutput(t *testing.T, c Config, opts sink.OutputOptions) (*Sink, *sink.Output) {
	t.Helper()
	if c.Logger == nil {
		c.Logger = testLogger(t)
	}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Backoff == (sink.OutputOptions{}).Backoff {
		opts.Backoff = fastBackoff
	}
	opts.Logger = c.Logger
	o, err := sink.NewOutput(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	o.Start()
	t.Cleanup(func() { closeOutput(t, o) })
	return s, o
}

func closeOutput(t *testing.T, o *sink.Output) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := o.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
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
	tr := newTracker()
	batched := addr
	batched.Writer = ""
	field := addr
	field.Field = "Temperature#1"
	o.Enqueue(counterMessage(tr, 0, sink.KindData, addr))
	o.Enqueue(counterMessage(tr, 1, sink.KindData, batched))
	o.Enqueue(counterMessage(tr, 2, sink.KindMetaData, addr))
	fm := counterMessage(tr, 3, sink.KindField, field)
	fm.Retained = true
	o.Enqueue(fm)
	brokertest.WaitFor(t, 10*time.Second, "4 settled", func() bool { return tr.settled() == 4 })
	tr.checkAll(t, 4)

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
	closeOutput(t, o)
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
	tr := newTracker()
	n := len(sub.snapshot())
	o.Enqueue(counterMessage(tr, 0, sink.KindData, addr))
	brokertest.WaitFor(t, 10*time.Second, "delivered after reconnect", func() bool { return tr.settled() == 1 })
	tr.checkAll(t, 1)
	brokertest.WaitFor(t, 10*time.Second, "Operational again", func() bool {
		msgs := sub.snapshot()
		return len(msgs) > n && statusIs(2)(msgs[len(msgs)-1])
	})
	if st := o.Stats(); st.Reconnects != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// QoS 1 at-least-once across a broker stop and restart mid-stream: every
// counter arrives (duplicates allowed and counted), every message is
// settled delivered exactly once.
func TestMQTTAtLeastOnceAcrossBrokerRestart(t *testing.T) {
	b := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{Persistence: true})
	sub := subscribe(t, b.URL(), "sub-persistent", false, "opcua/json/data/#")
	_, o := newOutput(t, Config{URL: b.URL(), QoS: 1, ClientID: "gw-restart", PublisherID: "pub"},
		sink.OutputOptions{Guarantee: config.AtLeastOnce, QueueSize: 64, MaxInFlight: 32})
	tr := newTracker()
	const n = 3000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			o.Enqueue(counterMessage(tr, i, sink.KindData, addr))
		}
	}()
	brokertest.WaitFor(t, 20*time.Second, "a third through", func() bool { return sub.distinct() >= n/3 })
	// SIGTERM: mosquitto saves its persistence (sessions, queued messages) and
	// closes every connection; SIGKILL would lose what it acknowledged since
	// its last autosave, which is the broker's loss, not the sink's.
	b.Stop()
	brokertest.WaitFor(t, 10*time.Second, "the output to notice", func() bool { return !o.Stats().Connected })
	b.Start()
	<-done
	brokertest.WaitFor(t, 30*time.Second, "every counter", func() bool { return sub.distinct() == n })
	brokertest.WaitFor(t, 10*time.Second, "all settled", func() bool { return tr.settled() == n })
	tr.checkAll(t, n)
	dups := 0
	sub.mu.Lock()
	for _, c := range sub.counters {
		dups += c - 1
	}
	sub.mu.Unlock()
	st := o.Stats()
	t.Logf("%d messages, %d duplicates at the subscriber, %d resends, %d reconnects, last error %q", n, dups, st.Retries, st.Reconnects, st.LastError)
	if st.Reconnects < 1 {
		t.Fatalf("no reconnect: %+v", st)
	}
}

// Drop-oldest with the broker away: the queue keeps the newest, the rest is
// dropped, counted and settled as delivered; the kept ones go out once the
// broker is back.
func TestMQTTDropOldestWhileBrokerDown(t *testing.T) {
	b := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	s, o := newOutput(t, Config{URL: b.URL(), QoS: 1, CleanSession: true}, sink.OutputOptions{Policy: config.DropOldest, QueueSize: 10})
	brokertest.WaitFor(t, 10*time.Second, "connected", func() bool { return o.Stats().Connected })
	b.Stop()
	brokertest.WaitFor(t, 10*time.Second, "the sink to notice", func() bool { return !s.Connected() })
	tr := newTracker()
	const n = 100
	for i := range n {
		o.Enqueue(counterMessage(tr, i, sink.KindData, addr))
	}
	st := o.Stats()
	// One message may have reached the window before the worker saw the
	// connection gone; the queue keeps the 10 newest.
	if st.Dropped < n-11 || st.Dropped > n-10 || st.Queued != 10 {
		t.Fatalf("with the broker down: %+v", st)
	}
	b.Start()
	brokertest.WaitFor(t, 20*time.Second, "all settled", func() bool { return tr.settled() == n })
	tr.checkAll(t, n)
	st = o.Stats()
	if st.Confirmed+st.Errors+st.Dropped != n {
		t.Fatalf("confirmed %d + errors %d + dropped %d != %d", st.Confirmed, st.Errors, st.Dropped, n)
	}
}

// Refused credentials: a clear error (wrapping sink.ErrUnauthorized),
// retried with backoff and shown in Stats; fixed on the broker, the output
// connects and delivers.
func TestMQTTRefusedCredentials(t *testing.T) {
	b := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{Users: map[string]string{"gw": "right"}})
	cfg := Config{URL: b.URL(), QoS: 1, CleanSession: true, Username: "gw", Password: "wrong", Logger: testLogger(t)}

	direct, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = direct.Connect(context.Background())
	if !errors.Is(err, sink.ErrUnauthorized) || !strings.Contains(err.Error(), `as "gw"`) {
		t.Fatalf("Connect = %v, want ErrUnauthorized naming the user", err)
	}
	if err := direct.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	_, o := newOutput(t, cfg, sink.OutputOptions{Guarantee: config.AtLeastOnce})
	tr := newTracker()
	o.Enqueue(counterMessage(tr, 0, sink.KindData, addr))
	brokertest.WaitFor(t, 10*time.Second, "repeated refusals", func() bool { return o.Stats().ConnectFailures >= 3 })
	st := o.Stats()
	if st.Connected || !strings.Contains(st.LastError, "refused the credentials") || tr.settled() != 0 {
		t.Fatalf("while refused: %+v", st)
	}
	b.SetUsers(t, map[string]string{"gw": "wrong"})
	brokertest.WaitFor(t, 10*time.Second, "delivered once allowed", func() bool { return tr.settled() == 1 })
	tr.checkAll(t, 1)
	if !o.Stats().Connected {
		t.Fatal("not connected")
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

// TestMQTTTLSClientCert: mosquitto with a TLS-only listener that requires a
// client certificate of its CA (Debian's mosquitto): the sink connects with
// the CA and a client certificate and its messages arrive, at QoS 1; without
// a certificate, with one of another CA, or without the CA to check the
// broker, it is refused and says why.
func TestMQTTTLSClientCert(t *testing.T) {
	tf := brokertest.NewTLSFiles(t)
	b := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{TLS: tf, RequireClientCert: true})
	subTLS, err := (&sink.TLSOptions{CAFile: tf.CA, CertFile: tf.ClientCert, KeyFile: tf.ClientKey}).Config()
	if err != nil {
		t.Fatal(err)
	}
	sub := subscribeTLS(t, b.URL(), "tls-sub", true, "opcua/#", subTLS)

	good := &sink.TLSOptions{CAFile: tf.CA, CertFile: tf.ClientCert, KeyFile: tf.ClientKey}
	_, o := newOutput(t, Config{URL: b.URL(), QoS: 1, CleanSession: true, TLS: good, Logger: testLogger(t)},
		sink.OutputOptions{Guarantee: config.AtLeastOnce})
	tr := newTracker()
	for i := range 5 {
		o.Enqueue(counterMessage(tr, i, sink.KindData, addr))
	}
	brokertest.WaitFor(t, 10*time.Second, "five confirmed", func() bool { return tr.settled() == 5 })
	tr.checkAll(t, 5)
	brokertest.WaitFor(t, 10*time.Second, "five received over TLS", func() bool { return sub.distinct() == 5 })

	for _, c := range []struct {
		name string
		tls  *sink.TLSOptions
		why  string
	}{
		{"no client certificate", &sink.TLSOptions{CAFile: tf.CA}, "require a client certificate"},
		{"a certificate of another CA", &sink.TLSOptions{CAFile: tf.CA, CertFile: tf.OtherCert, KeyFile: tf.OtherKey}, "require a client certificate"},
		{"no CA for the broker", &sink.TLSOptions{CertFile: tf.ClientCert, KeyFile: tf.ClientKey}, "certificate signed by unknown authority"},
	} {
		s, err := New(Config{URL: b.URL(), QoS: 1, CleanSession: true, TLS: c.tls, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = s.Connect(ctx)
		cancel()
		_ = s.Close(context.Background())
		t.Logf("%s: %v", c.name, err)
		if err == nil {
			t.Errorf("%s: connected", c.name)
		} else if !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.why)
		}
	}
}
