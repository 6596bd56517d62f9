package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startSim starts the simulation server in process; closed when the test
// ends. Load has `load` variables in one folder that never change after
// their initial value.
func startSim(t testing.TB, demoRate time.Duration, load int) *server.Server {
	t.Helper()
	return startSimWith(t, demoRate, load, nil)
}

// startSimWith is startSim with the server's configuration changed by opts
// (nil: none).
func startSimWith(t testing.TB, demoRate time.Duration, load int, opts func(*server.Config)) *server.Server {
	t.Helper()
	cfg := &server.Config{
		Address:  "127.0.0.1:0",
		Policies: []uasc.EndpointSecurity{{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}},
		Logger:   quietLog,
		Sim: server.SimConfig{
			DemoRate:      demoRate,
			Folders:       1,
			Variables:     load,
			Rates:         []time.Duration{time.Hour},
			AlarmSources:  1,
			AlarmInterval: 100 * time.Millisecond,
		},
	}
	if load <= 0 {
		cfg.Sim.Folders, cfg.Sim.Variables = -1, -1
	}
	if opts != nil {
		opts(cfg)
	}
	srv, err := server.New(cfg)
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// startSession opens a managed session to url; closed when the test ends.
func startSession(t testing.TB, url string) *client.ManagedSession {
	t.Helper()
	return startSessionAs(t, url, nil, "None")
}

// startSessionAs is startSession for a user (nil: anonymous) over policy
// (a secure one with SignAndEncrypt).
func startSessionAs(t testing.TB, url string, id client.Identity, policy string) *client.ManagedSession {
	t.Helper()
	cc := client.Config{SecurityPolicy: policy, Logger: quietLog, RequestTimeout: 10 * time.Second, Identity: id}
	if policy != "None" {
		cc.SecurityMode = ua.MessageSecurityModeSignAndEncrypt
	}
	if id != nil || policy != "None" {
		// The password is encrypted for the server's certificate (and the
		// channel secured with it), which the client's store trusts
		// (AutoAccept).
		store, err := pki.Open(t.TempDir(), pki.Options{Logger: quietLog, AutoAccept: true})
		if err != nil {
			t.Fatal(err)
		}
		cc.Store = store
	}
	m, err := client.NewManagedSession(url, &client.ManagedConfig{Client: cc})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Close(ctx)
	})
	return m
}

// received is one message a testQueue got, parsed.
type received struct {
	kind     sink.Kind
	addr     sink.Addr
	token    uint64
	retained bool
	payload  []byte
	nm       *jsonenc.NetworkMessage  // KindData
	md       *jsonenc.MetaDataMessage // KindMetaData
}

// testQueue is a real in-process consumer: it parses every message's JSON
// with jsonenc's decoder, records it and settles it (delivered unless
// undeliver says otherwise). A message that does not parse fails the test.
type testQueue struct {
	t         testing.TB
	name      string
	guarantee config.Guarantee
	types     jsonenc.FieldTypes
	samples   bool // data messages are in the samples format
	undeliver func(m *sink.Message) bool

	mu   sync.Mutex
	msgs []received
	hold bool            // keep messages unsettled until release
	held []*sink.Message // messages not settled yet
}

// release settles the held messages as delivered.
func (q *testQueue) release() {
	q.mu.Lock()
	held := q.held
	q.held = nil
	q.mu.Unlock()
	for _, m := range held {
		m.Done(true)
	}
}

func newTestQueue(t testing.TB, name string) *testQueue {
	return &testQueue{t: t, name: name}
}

func (q *testQueue) Name() string                { return q.name }
func (q *testQueue) Guarantee() config.Guarantee { return q.guarantee }
func (q *testQueue) Enqueue(m *sink.Message) {
	r := received{kind: m.Kind, addr: m.Addr, token: m.Token, retained: m.Retained, payload: slices.Clone(m.Payload())}
	var err error
	d := jsonenc.NewDecoder(jsonenc.DecoderOptions{})
	switch m.Kind {
	case sink.KindData:
		if q.samples {
			_, err = d.DecodeSamples(r.payload, q.types)
			break
		}
		r.nm, err = d.DecodeNetworkMessage(r.payload, q.types)
	case sink.KindMetaData:
		r.md, err = d.DecodeMetaDataMessage(r.payload)
	default:
		if !json.Valid(r.payload) {
			err = fmt.Errorf("not JSON")
		}
	}
	if err != nil {
		q.t.Errorf("queue %s: message %s does not parse: %v: %s", q.name, m.Kind, err, r.payload)
	}
	if want := q.samples && m.Kind == sink.KindData; m.Samples != want {
		q.t.Errorf("queue %s: message %s marked Samples %v, want %v", q.name, m.Kind, m.Samples, want)
	}
	q.mu.Lock()
	q.msgs = append(q.msgs, r)
	if q.hold {
		q.held = append(q.held, m)
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	m.Done(q.undeliver == nil || !q.undeliver(m))
}

func (q *testQueue) all() []received {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.msgs)
}

// dsm is one DataSetMessage as received, with the message it came in.
type dsm struct {
	jsonenc.DataSetMessage
	msg   int // index of the message in the queue
	addr  sink.Addr
	token uint64
	nm    *jsonenc.NetworkMessage
}

// dataSetMessages returns the DataSetMessages of writer (by name; "" all)
// in arrival order.
func dataSetMessages(msgs []received, writer string) []dsm {
	var out []dsm
	for i, r := range msgs {
		if r.kind != sink.KindData || r.nm == nil {
			continue
		}
		for _, m := range r.nm.Messages {
			if writer == "" || m.DataSetWriterName == writer {
				out = append(out, dsm{DataSetMessage: m, msg: i, addr: r.addr, token: r.token, nm: r.nm})
			}
		}
	}
	return out
}

func dur(d time.Duration) *config.Duration { x := config.Duration(d); return &x }

// defaulted returns cfg with config's defaults applied, as the loader
// gives it to NewWriterGroup.
func defaulted(cfg config.WriterGroup) config.WriterGroup {
	cfg.Writers = slices.Clone(cfg.Writers)
	for i := range cfg.Writers {
		cfg.Writers[i].Fields = slices.Clone(cfg.Writers[i].Fields)
	}
	cfg.ApplyDefaults()
	return cfg
}

// writerFor returns wc with the defaults it gets as the last writer of
// group cfg's configuration: what a reload hands to AddWriter.
func writerFor(cfg config.WriterGroup, wc config.DataSetWriter) config.DataSetWriter {
	cfg.Writers = append(slices.Clone(cfg.Writers), wc)
	cfg = defaulted(cfg)
	return cfg.Writers[len(cfg.Writers)-1]
}

// startGroup builds and starts a writer group (config's defaults applied);
// stopped when the test ends.
func startGroup(t testing.TB, m *client.ManagedSession, cfg config.WriterGroup, opts Options) *WriterGroup {
	t.Helper()
	return startGroupWith(t, m, cfg, opts, nil)
}

// startGroupWith is startGroup with a hook that sees the group before Start.
func startGroupWith(t testing.TB, m *client.ManagedSession, cfg config.WriterGroup, opts Options, before func(*WriterGroup)) *WriterGroup {
	t.Helper()
	opts.Session = m
	if opts.PublisherID == "" {
		opts.PublisherID = "test-pub"
	}
	opts.Logger = testutil.Logger(t)
	g, err := NewWriterGroup(defaulted(cfg), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	if before != nil {
		before(g)
	}
	if err := g.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return g
}

// allValues returns the state of every field of a writer ("" for all
// writers), in field order: every page at once.
func allValues(g *WriterGroup, writer string) []FieldValue {
	vs, _ := g.LastValues(ValueFilter{Writer: writer}, 0, math.MaxInt)
	return vs
}

func fieldValue(m *jsonenc.DataSetMessage, name string) (ua.DataValue, bool) {
	for _, f := range m.Fields {
		if f.Name == name {
			return f.Value, true
		}
	}
	return ua.DataValue{}, false
}
