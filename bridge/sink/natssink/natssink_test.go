package natssink

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sinktest"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/internal/testutil"
)

var addr = sinktest.Addr

func counterOf(t *testing.T, data []byte) int {
	t.Helper()
	c, ok := sinktest.Counter(data)
	if !ok {
		t.Fatalf("payload %q: not a counter", data)
	}
	return c
}

// newOutput starts an Output of a sink of c (sinktest.StartOutput).
func newOutput(t *testing.T, c Config, opts sink.OutputOptions) (*Sink, *sink.Output) {
	t.Helper()
	if c.Logger == nil {
		c.Logger = testutil.Logger(t)
	}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return s, sinktest.StartOutput(t, s, opts)
}

func connect(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// stream is the stream the JetStream sinks of the tests create.
const stream = "OPCUA"

// coreReceiver subscribes to the data subjects.
func coreReceiver(t *testing.T, nc *nats.Conn) sinktest.Receiver {
	t.Helper()
	var r sinktest.Payloads
	if _, err := nc.Subscribe("opcua.json.data.>", func(m *nats.Msg) { r.Add(m.Data) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &r
}

// streamReceiver reads the stream, from its first message, at every call.
type streamReceiver struct{ nc *nats.Conn }

// Received implements sinktest.Receiver: what the stream holds, in order;
// nothing while it cannot be read (not created yet, the server restarting).
func (r streamReceiver) Received() [][]byte {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(r.nc)
	if err != nil {
		return nil
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil
	}
	var out [][]byte
	for left := int(info.State.Msgs); left > 0; {
		batch, err := cons.Fetch(min(left, 500), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil
		}
		k := 0
		for m := range batch.Messages() {
			out = append(out, append([]byte(nil), m.Data()...))
			k++
		}
		if k == 0 {
			return nil
		}
		left -= k
	}
	return out
}

// harness runs the sink against Debian's nats-server: core NATS
// (at-most-once, receivers subscribe to the data subjects) or JetStream
// (at-least-once, receivers read the stream, which lives in the server's
// store across Stop and Start). nats-server refuses a payload over its
// max_payload, 1 MiB by default.
func harness(js bool) sinktest.Harness {
	h := sinktest.Harness{Guarantee: config.AtMostOnce, Restart: true, Auth: true, TLS: true, MaxPayload: 1 << 20}
	if js {
		h.Guarantee, h.Persistent = config.AtLeastOnce, true
	}
	h.Start = func(t *testing.T, o sinktest.Options) *sinktest.Env {
		b := brokertest.StartNATS(t, brokertest.NATSOptions{JetStream: js, Users: o.Users, TLS: o.TLS, VerifyClients: o.TLS != nil})
		subOpts := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}
		if o.Users != nil {
			subOpts = append(subOpts, nats.UserInfo(sinktest.ReceiverUser, sinktest.ReceiverPassword))
		}
		if o.TLS != nil {
			subOpts = append(subOpts, nats.RootCAs(o.TLS.CA), nats.ClientCert(o.TLS.ClientCert, o.TLS.ClientKey))
		}
		return &sinktest.Env{
			Sink: func(t *testing.T, c sinktest.SinkOptions) sink.Sink {
				cfg := Config{URL: b.URL(), Username: c.Username, Password: c.Password, TLS: c.TLS, Logger: testutil.Logger(t)}
				if js {
					cfg.JetStream = &JetStream{Stream: stream, Create: true, AckTimeout: 2 * time.Second}
				}
				s, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			Receive: func(t *testing.T) sinktest.Receiver {
				nc := connect(t, b.URL(), subOpts...)
				if js {
					return streamReceiver{nc}
				}
				return coreReceiver(t, nc)
			},
			// SIGKILL: no goodbye to the clients; JetStream's store survives it.
			Stop:     b.Kill,
			Start:    b.Start,
			SetUsers: func(t *testing.T, users map[string]string) { b.SetAuth(t, users, "") },
		}
	}
	return h
}

func TestConformanceCore(t *testing.T)      { sinktest.Run(t, harness(false)) }
func TestConformanceJetStream(t *testing.T) { sinktest.Run(t, harness(true)) }

// Core NATS: the subject tree with sanitized names, at-most-once.
func TestNATSCoreSubjects(t *testing.T) {
	b := brokertest.StartNATS(t, brokertest.NATSOptions{})
	nc := connect(t, b.URL())
	got := make(chan *nats.Msg, 100)
	if _, err := nc.ChanSubscribe("opcua.json.>", got); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	s, o := newOutput(t, Config{URL: b.URL()}, sink.OutputOptions{})
	if s.Guarantee() != config.AtMostOnce {
		t.Fatal("core NATS sink not at-most-once")
	}
	tr := sinktest.NewTracker()
	odd := sink.Addr{Publisher: "pub.1", Group: "line 1", Writer: "a*b>c", Field: "T.x"}
	batched := addr
	batched.Writer = ""
	o.Enqueue(sinktest.Message(tr, 0, sink.KindData, addr))
	o.Enqueue(sinktest.Message(tr, 1, sink.KindData, batched))
	o.Enqueue(sinktest.Message(tr, 2, sink.KindMetaData, odd))
	o.Enqueue(sinktest.Message(tr, 3, sink.KindStatus, addr))
	o.Enqueue(sinktest.Message(tr, 4, sink.KindField, odd))
	want := []string{
		"opcua.json.data.pub.line1.temps",
		"opcua.json.data.pub.line1",
		"opcua.json.metadata.pub_1.line_1.a_b_c",
		"opcua.json.status.pub",
		"opcua.json.field.pub_1.line_1.a_b_c.T_x",
	}
	for i, w := range want {
		select {
		case m := <-got:
			if m.Subject != w || counterOf(t, m.Data) != i {
				t.Errorf("message %d on %s: %s, want %s", i, m.Subject, m.Data, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d (%s) did not arrive", i, w)
		}
	}
	tr.Wait(t, 5, true)
	if _, err := sink.NewOutput(s, sink.OutputOptions{Guarantee: config.AtLeastOnce}); err == nil {
		t.Fatal("at-least-once over core NATS accepted")
	}
}

func TestNATSToken(t *testing.T) {
	b := brokertest.StartNATS(t, brokertest.NATSOptions{Token: "s3cret"})
	bad, err := New(Config{URL: b.URL(), Token: "nope"})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Connect(context.Background()); !errors.Is(err, sink.ErrUnauthorized) || strings.Contains(err.Error(), "nope") {
		t.Fatalf("bad token: %v", err)
	}
	_ = bad.Close(context.Background())
	_, o := newOutput(t, Config{URL: b.URL(), Token: "s3cret"}, sink.OutputOptions{})
	tr := sinktest.NewTracker()
	o.Enqueue(sinktest.Message(tr, 0, sink.KindData, addr))
	tr.Wait(t, 1, true)
	if st := o.Stats(); st.Confirmed != 1 || st.ConnectFailures != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestNATSConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "url is empty"},
		{Config{URL: "nats://x:1", Username: "u", Token: "t"}, "more than one"},
		{Config{URL: "nats://x:1", JetStream: &JetStream{Create: true}}, "without a stream name"},
		{Config{URL: "nats://x:1", Subjects: sink.TopicTemplates{Data: "a.{Bad}"}}, "unknown placeholder"},
		{Config{URL: "nats://x:1", TLS: &sink.TLSOptions{CertFile: "c.pem"}}, "go together"},
	} {
		s, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want %q", c.cfg, err, c.want)
		}
		if s != nil {
			_ = s.Close(context.Background())
		}
	}
}

// publishOne sends counter 0 through an Output of c and waits until a
// subscriber (sub) receives it.
func publishOne(t *testing.T, c Config, sub *nats.Conn) {
	t.Helper()
	got := make(chan *nats.Msg, 4)
	if _, err := sub.ChanSubscribe("opcua.json.>", got); err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	_, o := newOutput(t, c, sink.OutputOptions{})
	tr := sinktest.NewTracker()
	o.Enqueue(sinktest.Message(tr, 0, sink.KindData, addr))
	select {
	case m := <-got:
		if counterOf(t, m.Data) != 0 {
			t.Fatalf("got %s", m.Data)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("nothing delivered: %+v", o.Stats())
	}
	tr.Wait(t, 1, true)
	if st := o.Stats(); st.ConnectFailures != 0 || !st.Connected {
		t.Errorf("stats %+v", st)
	}
}

// refused checks that a sink of c cannot connect and says why.
func refused(t *testing.T, c Config, why ...string) {
	t.Helper()
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = s.Connect(ctx)
	_ = s.Close(context.Background())
	if err == nil {
		t.Fatalf("%+v connected", c)
	}
	t.Logf("refused: %v", err)
	for _, w := range why {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Connect = %v, want it to say %q", err, w)
		}
	}
}

// TestNATSPlainToTLSServer: a plain connection to a server that requires
// TLS is refused.
func TestNATSPlainToTLSServer(t *testing.T) {
	tf := brokertest.NewTLSFiles(t)
	b := brokertest.StartNATS(t, brokertest.NATSOptions{TLS: tf, VerifyClients: true})
	refused(t, Config{URL: strings.Replace(b.URL(), "tls://", "nats://", 1), Logger: testutil.Logger(t)})
}

// TestNATSNKey: nkey authentication with a seed file.
func TestNATSNKey(t *testing.T) {
	dir := t.TempDir()
	seedFile := func(name string) (string, string) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		p := filepath.Join(dir, name+".nk")
		if err := os.WriteFile(p, seed, 0o600); err != nil {
			t.Fatal(err)
		}
		return p, pub
	}
	gwSeed, gwPub := seedFile("gateway")
	subSeed, subPub := seedFile("subscriber")
	strangerSeed, _ := seedFile("stranger")
	b := brokertest.StartNATS(t, brokertest.NATSOptions{NKeys: []string{gwPub, subPub}})
	opt, err := nats.NkeyOptionFromSeed(subSeed)
	if err != nil {
		t.Fatal(err)
	}
	sub := connect(t, b.URL(), opt)
	publishOne(t, Config{URL: b.URL(), NKeyFile: gwSeed, Logger: testutil.Logger(t)}, sub)

	s, err := New(Config{URL: b.URL(), NKeyFile: strangerSeed})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(context.Background()); !errors.Is(err, sink.ErrUnauthorized) || !strings.Contains(err.Error(), "stranger.nk") {
		t.Fatalf("an unknown nkey: %v, want ErrUnauthorized naming the file", err)
	}
	_ = s.Close(context.Background())
	refused(t, Config{URL: b.URL(), NKeyFile: filepath.Join(dir, "missing.nk")}, "missing.nk")
}

// TestNATSCreds: a .creds file (user JWT and seed) against a server in
// operator mode, as NGS or a decentralized-auth NATS deployment runs.
func TestNATSCreds(t *testing.T) {
	dir := t.TempDir()
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	opJWT, err := jwt.NewOperatorClaims(opPub).Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	acct, _ := nkeys.CreateAccount()
	acctPub, _ := acct.PublicKey()
	acctJWT, err := jwt.NewAccountClaims(acctPub).Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	creds := func(name string, signer nkeys.KeyPair) string {
		u, _ := nkeys.CreateUser()
		pub, _ := u.PublicKey()
		seed, _ := u.Seed()
		uc := jwt.NewUserClaims(pub)
		uc.Name = name
		ujwt, err := uc.Encode(signer)
		if err != nil {
			t.Fatal(err)
		}
		b, err := jwt.FormatUserConfig(ujwt, seed)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name+".creds")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gw := creds("gateway", acct)
	subCreds := creds("subscriber", acct)
	other, _ := nkeys.CreateAccount() // an account the server does not know
	stranger := creds("stranger", other)
	opFile := filepath.Join(dir, "operator.jwt")
	if err := os.WriteFile(opFile, []byte(opJWT), 0o600); err != nil {
		t.Fatal(err)
	}
	b := brokertest.StartNATS(t, brokertest.NATSOptions{Operator: &brokertest.Operator{
		JWTFile: opFile, Accounts: map[string]string{acctPub: acctJWT}}})
	sub := connect(t, b.URL(), nats.UserCredentials(subCreds))
	publishOne(t, Config{URL: b.URL(), CredsFile: gw, Logger: testutil.Logger(t)}, sub)

	s, err := New(Config{URL: b.URL(), CredsFile: stranger})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(context.Background()); !errors.Is(err, sink.ErrUnauthorized) || !strings.Contains(err.Error(), "stranger.creds") {
		t.Fatalf("a user of an unknown account: %v, want ErrUnauthorized naming the file", err)
	}
	_ = s.Close(context.Background())
}

func TestMsgID(t *testing.T) {
	for _, c := range []struct{ payload, want string }{
		{`{"MessageId":"a1-b2","MessageType":"ua-data"}`, "a1-b2"},
		{`{"MessageId":"redelivered-a1-b2","MessageType":"ua-data"}`, "a1-b2"},
		{`{"MessageId":"","MessageType":"ua-data"}`, ""},
		{`[{"NodeId":"i=2258"}]`, ""},
		{`{"MessageId":"unterminated`, ""},
	} {
		if got := msgID([]byte(c.payload)); got != c.want {
			t.Errorf("msgID(%s) = %q, want %q", c.payload, got, c.want)
		}
	}
}

// A NetworkMessage sent again, marked redelivered (a restart's resend from
// the store-and-forward log), is stored once: its Nats-Msg-Id is the first
// one's.
func TestJetStreamDropsRedelivered(t *testing.T) {
	b := brokertest.StartNATS(t, brokertest.NATSOptions{JetStream: true})
	_, o := newOutput(t, Config{URL: b.URL(), JetStream: &JetStream{Stream: stream, Create: true, AckTimeout: 2 * time.Second}},
		sink.OutputOptions{Guarantee: config.AtLeastOnce})
	tr := sinktest.NewTracker()
	for i, p := range []string{
		`{"MessageId":"m1","MessageType":"ua-data","Messages":[{"counter":1}]}`,
		`{"MessageId":"redelivered-m1","MessageType":"ua-data","Messages":[{"counter":1}]}`,
		`{"MessageId":"m2","MessageType":"ua-data","Messages":[{"counter":2}]}`,
	} {
		m := sinktest.Message(tr, i, sink.KindData, addr)
		m.SetPayload([]byte(p))
		o.Enqueue(m)
	}
	testutil.WaitFor(t, sinktest.Timeout, "three confirmed", func() bool { return tr.Count() == 3 })
	got := streamReceiver{connect(t, b.URL())}.Received()
	if len(got) != 2 || !strings.Contains(string(got[0]), `"m1"`) || !strings.Contains(string(got[1]), `"m2"`) {
		t.Fatalf("the stream holds %q, want m1 and m2 once each", got)
	}
}
