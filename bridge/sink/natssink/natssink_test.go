package natssink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

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

func counterOf(t *testing.T, data []byte) int {
	t.Helper()
	var body struct{ Counter *int }
	if err := json.Unmarshal(data, &body); err != nil || body.Counter == nil {
		t.Fatalf("payload %q: %v", data, err)
	}
	return *body.Counter
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

func connect(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

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
	tr := newTracker()
	odd := sink.Addr{Publisher: "pub.1", Group: "line 1", Writer: "a*b>c", Field: "T.x"}
	batched := addr
	batched.Writer = ""
	o.Enqueue(counterMessage(tr, 0, sink.KindData, addr))
	o.Enqueue(counterMessage(tr, 1, sink.KindData, batched))
	o.Enqueue(counterMessage(tr, 2, sink.KindMetaData, odd))
	o.Enqueue(counterMessage(tr, 3, sink.KindStatus, addr))
	o.Enqueue(counterMessage(tr, 4, sink.KindField, odd))
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
	brokertest.WaitFor(t, 5*time.Second, "settled", func() bool { return tr.settled() == 5 })
	tr.checkAll(t, 5)
	if _, err := sink.NewOutput(s, sink.OutputOptions{Guarantee: config.AtLeastOnce}); err == nil {
		t.Fatal("at-least-once over core NATS accepted")
	}
}

func jsConfig(url string) Config {
	return Config{URL: url, JetStream: &JetStream{Stream: "OPCUA", Create: true, AckTimeout: 2 * time.Second}}
}

// readStream returns every counter in the stream by sequence.
func readStream(t *testing.T, url string) []int {
	t.Helper()
	nc := connect(t, url)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "OPCUA")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for uint64(len(out)) < info.State.Msgs {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			out = append(out, counterOf(t, m.Data()))
			n++
		}
		if n == 0 {
			t.Fatalf("stream read stalled at %d of %d: %v", len(out), info.State.Msgs, batch.Error())
		}
	}
	return out
}

// JetStream: the stream is created, every message confirmed by its ack and
// stored in order.
func TestNATSJetStream(t *testing.T) {
	b := brokertest.StartNATS(t, brokertest.NATSOptions{JetStream: true})
	s, o := newOutput(t, jsConfig(b.URL()), sink.OutputOptions{Guarantee: config.AtLeastOnce})
	if s.Guarantee() != config.AtLeastOnce {
		t.Fatal("JetStream sink not at-least-once")
	}
	tr := newTracker()
	const n = 500
	for i := range n {
		o.Enqueue(counterMessage(tr, i, sink.KindData, addr))
	}
	brokertest.WaitFor(t, 10*time.Second, "all acked", func() bool { return tr.settled() == n })
	tr.checkAll(t, n)
	got := readStream(t, b.URL())
	if len(got) != n {
		t.Fatalf("stream holds %d messages, want %d", len(got), n)
	}
	for i, c := range got {
		if c != i {
			t.Fatalf("stream message %d has counter %d", i+1, c)
		}
	}
	if st := o.Stats(); st.Confirmed != n || st.Errors != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// JetStream at-least-once across a nats-server SIGKILL and restart
// mid-stream: no counter lost (duplicates counted), every message settled
// delivered once.
func TestNATSJetStreamAcrossServerRestart(t *testing.T) {
	b := brokertest.StartNATS(t, brokertest.NATSOptions{JetStream: true})
	_, o := newOutput(t, jsConfig(b.URL()), sink.OutputOptions{Guarantee: config.AtLeastOnce, QueueSize: 64, MaxInFlight: 32})
	tr := newTracker()
	const n = 3000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			o.Enqueue(counterMessage(tr, i, sink.KindData, addr))
		}
	}()
	brokertest.WaitFor(t, 20*time.Second, "a third through", func() bool { return o.Stats().Confirmed >= n/3 })
	b.Kill()
	brokertest.WaitFor(t, 10*time.Second, "the output to notice", func() bool { return !o.Stats().Connected })
	b.Start()
	<-done
	brokertest.WaitFor(t, 30*time.Second, "all settled", func() bool { return tr.settled() == n })
	tr.checkAll(t, n)
	seen := make([]int, n)
	for _, c := range readStream(t, b.URL()) {
		seen[c]++
	}
	dups := 0
	for c, k := range seen {
		if k == 0 {
			t.Errorf("counter %d lost", c)
		}
		dups += max(k-1, 0)
	}
	st := o.Stats()
	t.Logf("%d messages, %d stored twice, %d resends, %d reconnects, last error %q", n, dups, st.Retries, st.Reconnects, st.LastError)
	if st.Reconnects < 1 {
		t.Fatalf("no reconnect: %+v", st)
	}
}

// Refused credentials: a clear error wrapping sink.ErrUnauthorized, shown
// in Stats and retried; fixed on the server, the output delivers.
func TestNATSRefusedCredentials(t *testing.T) {
	b := brokertest.StartNATS(t, brokertest.NATSOptions{Users: map[string]string{"gw": "right", "sub": "sub"}})
	cfg := Config{URL: b.URL(), Username: "gw", Password: "wrong", Logger: testLogger(t)}
	direct, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = direct.Connect(context.Background())
	if !errors.Is(err, sink.ErrUnauthorized) || !strings.Contains(err.Error(), `as "gw"`) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("Connect = %v, want ErrUnauthorized naming the user, not the password", err)
	}
	_ = direct.Close(context.Background())

	_, o := newOutput(t, cfg, sink.OutputOptions{})
	tr := newTracker()
	o.Enqueue(counterMessage(tr, 0, sink.KindData, addr))
	brokertest.WaitFor(t, 10*time.Second, "repeated refusals", func() bool { return o.Stats().ConnectFailures >= 3 })
	if st := o.Stats(); st.Connected || !strings.Contains(st.LastError, "refused the credentials") || tr.settled() != 0 {
		t.Fatalf("while refused: %+v", st)
	}
	nc := connect(t, b.URL(), nats.UserInfo("sub", "sub"))
	got := make(chan *nats.Msg, 1)
	if _, err := nc.ChanSubscribe("opcua.json.>", got); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	b.SetAuth(t, map[string]string{"gw": "wrong", "sub": "sub"}, "")
	select {
	case m := <-got:
		if counterOf(t, m.Data) != 0 {
			t.Fatalf("got %s", m.Data)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("nothing delivered after the fix: %+v", o.Stats())
	}
	// The subscriber can have the message before the output, back from
	// Publish, settles it.
	brokertest.WaitFor(t, 10*time.Second, "the message settled", func() bool { return tr.settled() == 1 })
	tr.checkAll(t, 1)
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
	tr := newTracker()
	o.Enqueue(counterMessage(tr, 0, sink.KindData, addr))
	brokertest.WaitFor(t, 10*time.Second, "settled", func() bool { return tr.settled() == 1 })
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
	tr := newTracker()
	o.Enqueue(counterMessage(tr, 0, sink.KindData, addr))
	select {
	case m := <-got:
		if counterOf(t, m.Data) != 0 {
			t.Fatalf("got %s", m.Data)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("nothing delivered: %+v", o.Stats())
	}
	brokertest.WaitFor(t, 10*time.Second, "settled", func() bool { return tr.settled() == 1 })
	tr.checkAll(t, 1)
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

// TestNATSTLSClientCert: a server that requires TLS and verifies client
// certificates (Debian's nats-server) takes the sink with the CA and a
// client certificate; without the certificate, with one of another CA, or
// without the CA to check the server, the sink is refused with the reason.
func TestNATSTLSClientCert(t *testing.T) {
	tf := brokertest.NewTLSFiles(t)
	b := brokertest.StartNATS(t, brokertest.NATSOptions{TLS: tf, VerifyClients: true})
	good := &sink.TLSOptions{CAFile: tf.CA, CertFile: tf.ClientCert, KeyFile: tf.ClientKey}
	sub := connect(t, b.URL(), nats.RootCAs(tf.CA), nats.ClientCert(tf.ClientCert, tf.ClientKey))
	publishOne(t, Config{URL: b.URL(), TLS: good, Logger: testLogger(t)}, sub)

	refused(t, Config{URL: b.URL(), TLS: &sink.TLSOptions{CAFile: tf.CA}, Logger: testLogger(t)}, "require a client certificate")
	refused(t, Config{URL: b.URL(), TLS: &sink.TLSOptions{CAFile: tf.CA, CertFile: tf.OtherCert, KeyFile: tf.OtherKey}, Logger: testLogger(t)}, "require a client certificate")
	refused(t, Config{URL: b.URL(), TLS: &sink.TLSOptions{CertFile: tf.ClientCert, KeyFile: tf.ClientKey}, Logger: testLogger(t)},
		"certificate signed by unknown authority")
	// A plain connection to a TLS-only server.
	refused(t, Config{URL: strings.Replace(b.URL(), "tls://", "nats://", 1), Logger: testLogger(t)})
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
	publishOne(t, Config{URL: b.URL(), NKeyFile: gwSeed, Logger: testLogger(t)}, sub)

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
	publishOne(t, Config{URL: b.URL(), CredsFile: gw, Logger: testLogger(t)}, sub)

	s, err := New(Config{URL: b.URL(), CredsFile: stranger})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(context.Background()); !errors.Is(err, sink.ErrUnauthorized) || !strings.Contains(err.Error(), "stranger.creds") {
		t.Fatalf("a user of an unknown account: %v, want ErrUnauthorized naming the file", err)
	}
	_ = s.Close(context.Background())
}
