package mqtt5sink

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sinktest"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/internal/testutil"
)

// mosquittoSub runs Debian's mosquitto_sub as an MQTT 5 subscriber of
// filter, printing each message as one line of format (prefixed "MSG|"),
// and returns once the broker acknowledged its subscription; lines returns
// the messages so far.
func mosquittoSub(t *testing.T, b *brokertest.Mosquitto, filter, format string) (lines func() []string) {
	t.Helper()
	host, port, _ := strings.Cut(b.Addr(), ":")
	// stdbuf: mosquitto_sub's stdout is a pipe here, which stdio would
	// buffer until it exits.
	cmd := exec.Command(brokertest.Binary(t, "stdbuf"), "-oL", brokertest.Binary(t, "mosquitto_sub"), "-V", "mqttv5",
		"-h", host, "-p", port, "-q", "1", "-d", "--retain-as-published", "-t", filter, "-F", "MSG|"+format)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var msgs []string
	subscribed := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := sc.Text()
			mu.Lock()
			if strings.HasPrefix(l, "MSG|") {
				msgs = append(msgs, strings.TrimPrefix(l, "MSG|"))
			} else if strings.Contains(l, "received SUBACK") {
				subscribed = true
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
	})
	testutil.WaitFor(t, 10*time.Second, "mosquitto_sub subscribed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return subscribed
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), msgs...)
	}
}

// TestMQTT5Properties: what each kind of message carries, as paho.golang
// (autopaho) and Debian's mosquitto_sub (libmosquitto) receive it.
func TestMQTT5Properties(t *testing.T) {
	b := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	sub := subscribe(t, b.URL(), "sub-props", true, "#", subOptions{})
	lines := mosquittoSub(t, b, "#", "%t|%r|%C|%F|%E|%P|%p")
	s := newSink(t, Config{URL: b.URL(), QoS: 1, CleanSession: true, PublisherID: "pub", MessageExpiry: 90 * time.Second})
	o := sinktest.StartOutput(t, s, sink.OutputOptions{Guarantee: config.AtLeastOnce})
	tr := sinktest.NewTracker()
	batched := addr
	batched.Writer = ""
	field := addr
	field.Field = "Temp\x01erature"
	samples := sinktest.Message(tr, 2, sink.KindData, sink.Addr{Publisher: "pub", Group: "legacy"})
	samples.Samples = true
	fm := sinktest.Message(tr, 4, sink.KindField, field)
	fm.Retained = true
	for _, m := range []*sink.Message{
		sinktest.Message(tr, 0, sink.KindData, addr),
		sinktest.Message(tr, 1, sink.KindData, batched),
		samples,
		sinktest.Message(tr, 3, sink.KindMetaData, addr),
		fm,
	} {
		o.Enqueue(m)
	}
	tr.Wait(t, 5, true)

	type want struct {
		topic    string
		retained bool
		expiry   bool
		user     map[string]string
	}
	wants := []want{
		{"opcua/json/status/pub", true, false, map[string]string{"UAMessageType": "ua-status", "PublisherId": "pub"}},
		{"opcua/json/data/pub/line1/temps", false, true, map[string]string{"UAMessageType": "ua-data", "PublisherId": "pub", "WriterGroup": "line1", "DataSetWriter": "temps"}},
		{"opcua/json/data/pub/line1", false, true, map[string]string{"UAMessageType": "ua-data", "PublisherId": "pub", "WriterGroup": "line1"}},
		{"opcua/json/data/pub/legacy", false, true, map[string]string{"MessageSchema": SamplesSchema, "PublisherId": "pub", "WriterGroup": "legacy"}},
		{"opcua/json/metadata/pub/line1/temps", true, false, map[string]string{"UAMessageType": "ua-metadata", "PublisherId": "pub", "WriterGroup": "line1", "DataSetWriter": "temps"}},
		{"pub/line1/temps/Temp_erature", true, false, map[string]string{"PublisherId": "pub", "WriterGroup": "line1", "DataSetWriter": "temps", "Field": "Temp_erature"}},
	}
	for _, w := range wants {
		r := sub.waitTopic(t, w.topic, nil)
		p := r.props
		if p == nil || p.ContentType != "application/json" || p.PayloadFormat == nil || *p.PayloadFormat != 1 || r.retained != w.retained {
			t.Errorf("%s: retained %v, properties %+v", w.topic, r.retained, p)
			continue
		}
		if got := p.MessageExpiry != nil; got != w.expiry || (got && (*p.MessageExpiry == 0 || *p.MessageExpiry > 90)) {
			t.Errorf("%s: message expiry %v, want one: %v", w.topic, p.MessageExpiry, w.expiry)
		}
		if len(p.User) != len(w.user) {
			t.Errorf("%s: user properties %v, want %v", w.topic, p.User, w.user)
		}
		for k, v := range w.user {
			if got := r.user(k); got != v {
				t.Errorf("%s: user property %s = %q, want %q", w.topic, k, got, v)
			}
		}
	}

	// libmosquitto reads the same: content type, payload format, expiry
	// and the user properties in order.
	var got []string
	testutil.WaitFor(t, 10*time.Second, "mosquitto_sub's messages", func() bool {
		got = lines()
		return len(got) >= len(wants)
	})
	for i, w := range wants {
		f := strings.SplitN(got[i], "|", 7)
		if len(f) != 7 || f[0] != w.topic || f[1] != map[bool]string{true: "1", false: "0"}[w.retained] || f[2] != "application/json" || f[3] != "1" {
			t.Errorf("mosquitto_sub %q, want topic %s retained %v", got[i], w.topic, w.retained)
			continue
		}
		if e, err := strconv.Atoi(f[4]); (f[4] != "") != w.expiry || (w.expiry && (err != nil || e <= 0 || e > 90)) {
			t.Errorf("%s: mosquitto_sub expiry %q", w.topic, f[4])
		}
		for k, v := range w.user {
			if !strings.Contains(f[5], k+":"+v) {
				t.Errorf("%s: mosquitto_sub user properties %q lack %s:%s", w.topic, f[5], k, v)
			}
		}
		if !json.Valid([]byte(f[6])) {
			t.Errorf("%s: payload %q", w.topic, f[6])
		}
	}
	t.Logf("mosquitto_sub: %s", got[1])
}

// TestMQTT5LastWill: the will (ua-status Error, retained, with its
// properties) when the connection dies without a DISCONNECT; Operational
// again once the Output reconnected; Disabled at Close, with no will.
func TestMQTT5LastWill(t *testing.T) {
	b := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	p := brokertest.StartProxy(t, b.Addr())
	sub := subscribe(t, b.URL(), "sub-will", true, "opcua/json/status/#", subOptions{})
	s := newSink(t, Config{URL: "tcp://" + p.Addr(), QoS: 1, CleanSession: true, PublisherID: "pub", KeepAlive: time.Second})
	o := sinktest.StartOutput(t, s, sink.OutputOptions{Guarantee: config.AtLeastOnce})
	status := func(state int) func(received) bool {
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
	sub.waitTopic(t, "opcua/json/status/pub", status(2))
	// Connected: a first attempt a busy machine made fail (counted as a
	// connect failure, not a reconnect) is over.
	testutil.WaitFor(t, 10*time.Second, "connected", func() bool { return o.Stats().Connected })
	reconnects := o.Stats().Reconnects
	p.Cut()
	will := sub.waitTopic(t, "opcua/json/status/pub", status(3))
	// The will's content type and payload format are not sent: paho.golang
	// v0.23.0 packs will properties as CONNECT properties, which have
	// neither; the user properties go through.
	if will.props == nil || will.user("UAMessageType") != "ua-status" || will.user("PublisherId") != "pub" {
		t.Errorf("will properties %+v", will.props)
	}
	tr := sinktest.NewTracker()
	n := len(sub.snapshot())
	o.Enqueue(sinktest.Message(tr, 0, sink.KindData, addr))
	tr.Wait(t, 1, true)
	testutil.WaitFor(t, 10*time.Second, "Operational again", func() bool {
		msgs := sub.snapshot()
		return len(msgs) > n && status(2)(msgs[len(msgs)-1])
	})
	if st := o.Stats(); st.Reconnects != reconnects+1 {
		t.Fatalf("stats %+v, want one reconnect more than %d", st, reconnects)
	}
	sinktest.CloseQueue(t, o)
	sub.waitTopic(t, "opcua/json/status/pub", status(0))
	n = len(sub.snapshot())
	if testutil.Consistently(300*time.Millisecond, func() bool { return len(sub.snapshot()) == n }) == false {
		t.Fatalf("after a graceful close: %+v", sub.snapshot()[n:])
	}
}

// TestMQTT5QoS2: QoS 2 (PUBREC, PUBREL, PUBCOMP) delivers in order, each
// confirmed once.
func TestMQTT5QoS2(t *testing.T) {
	b := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	sub := subscribe(t, b.URL(), "sub-qos2", true, "opcua/json/data/#", subOptions{})
	s := newSink(t, Config{URL: b.URL(), QoS: 2, CleanSession: true})
	o := sinktest.StartOutput(t, s, sink.OutputOptions{Guarantee: config.AtLeastOnce})
	tr := sinktest.NewTracker()
	const n = 300
	for i := range n {
		o.Enqueue(sinktest.Message(tr, i, sink.KindData, addr))
	}
	tr.Wait(t, n, true)
	testutil.WaitFor(t, 10*time.Second, "all received", func() bool { return len(sub.Received()) >= n })
	for i, p := range sub.Received() {
		if c, ok := sinktest.Counter(p); !ok || c != i {
			t.Fatalf("message %d: %s", i, p)
		}
	}
	if st := o.Stats(); st.Confirmed != n || st.Errors != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestMQTT5Config(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		// The rest of Config.Validate is mqttsink's, tested there.
		{Config{}, "url is empty"},
		{Config{URL: "tcp://x:1", ProtocolVersion: 4}, "protocolVersion 4 is package mqttsink's"},
		{Config{URL: "tcp://x:1", MessageExpiry: -time.Second}, "messageExpiry -1s out of range"},
		{Config{URL: "tcp://x:1", Topics: sink.TopicTemplates{Data: "a/{Writer}"}}, "unknown placeholder {Writer}"},
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bad := newSink(t, Config{URL: "http://127.0.0.1:1"})
	if err := bad.Connect(ctx); err == nil || !strings.Contains(err.Error(), `scheme "http"`) {
		t.Errorf("Connect to http:// = %v", err)
	}
}
