package command

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// sessionBackend is a Backend over one real managed session.
type sessionBackend struct {
	m       *client.ManagedSession
	browsed map[string]string // group/writer/field → node
	// gate, when set, holds Session until it is closed (to fill a queue).
	gate chan struct{}
}

func (b *sessionBackend) Session(ctx context.Context, endpoint string) (*client.Client, error) {
	if b.gate != nil {
		select {
		case <-b.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return b.m.WaitConnected(ctx)
}

func (b *sessionBackend) BrowsedField(group, writer, field string) (string, bool) {
	n, ok := b.browsed[group+"/"+writer+"/"+field]
	return n, ok
}

// startSim starts the simulation server.
func startSim(t *testing.T) *server.Server {
	t.Helper()
	srv, err := server.New(&server.Config{Address: "127.0.0.1:0", Logger: testutil.Logger(t),
		Policies: []uasc.EndpointSecurity{{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}},
		Sim:      server.SimConfig{Folders: -1, Variables: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func startSession(t *testing.T, url string) *client.ManagedSession {
	t.Helper()
	m, err := client.NewManagedSession(url, &client.ManagedConfig{Client: client.Config{
		SecurityPolicy: uasc.SecurityPolicyNone, Logger: testutil.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	m.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := m.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	return m
}

// testConfig is a configuration of endpoint "sim" with a writer group
// "line" of writer "w" whose fields are the given name → node pairs, and
// the rules.
func testConfig(url string, fields map[string]string, rules ...config.CommandRule) *config.Config {
	w := config.DataSetWriter{Name: "w"}
	for name, node := range fields {
		w.Fields = append(w.Fields, config.Field{Name: name, Node: node})
	}
	cfg := &config.Config{
		Endpoints:    []config.Endpoint{{Name: "sim", URL: url, SecurityPolicy: "None", SecurityMode: "None", AutoAccept: true}},
		WriterGroups: []config.WriterGroup{{Name: "line", Endpoint: "sim", Writers: []config.DataSetWriter{w}}},
		Sinks:        config.Sinks{File: []config.FileSink{{Path: "-"}}},
		Commands:     config.Commands{Rules: rules},
	}
	cfg.ApplyDefaults()
	return cfg
}

type fixture struct {
	t   *testing.T
	srv *server.Server
	m   *client.ManagedSession
	b   *sessionBackend
	e   *Engine
	now *fakeClock
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newFixture starts a sim, a session and an engine with cfgf's
// configuration (given the sim's URL); the engine's clock is real unless
// fake is set.
func newFixture(t *testing.T, fake bool, cfgf func(url string) *config.Config) *fixture {
	t.Helper()
	f := &fixture{t: t, srv: startSim(t)}
	f.m = startSession(t, f.srv.URL())
	f.b = &sessionBackend{m: f.m}
	cfg := cfgf(f.srv.URL())
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	opts := Options{Backend: f.b, Logger: testutil.Logger(t)}
	if fake {
		f.now = &fakeClock{t: time.Now()}
		opts.Now = f.now.Now
	}
	e, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	f.e = e
	return f
}

func (f *fixture) do(caller Caller, payload string) *Response {
	f.t.Helper()
	ch := make(chan *Response, 1)
	f.e.SubmitPayload(caller, []byte(payload), func(r *Response) { ch <- r })
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		f.t.Fatalf("no response to %s", payload)
		return nil
	}
}

// value reads a node's value with the fixture's own session.
func (f *fixture) value(node string) ua.Variant {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := f.m.WaitConnected(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	vals, err := c.ReadValues(ctx, ua.MustParseNodeID(node))
	if err != nil {
		f.t.Fatal(err)
	}
	return vals[0].Value
}

func wantRefusal(t *testing.T, what string, r *Response, kind string, status ua.StatusCode) {
	t.Helper()
	if r.Error == nil || r.Error.Kind != kind || r.Status.Code != uint32(status) {
		t.Fatalf("%s: want %s (%s), got %s", what, kind, status.Name(), r.Marshal())
	}
	if r.Error.Message == "" {
		t.Fatalf("%s: a refusal without a reason: %s", what, r.Marshal())
	}
}

func wantGood(t *testing.T, what string, r *Response) {
	t.Helper()
	if r.Error != nil || !r.Status.Good() {
		t.Fatalf("%s: want Good, got %s", what, r.Marshal())
	}
}
