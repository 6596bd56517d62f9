package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/command"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// testBackend is a Backend over a real config.Config persisted to a file
// (so a "restart" — a new testBackend on the same file — sees the changes),
// real managed sessions and real certificate stores. The pipeline parts it
// stands in for (metadata, group and sink stats) are plain fields the tests
// set; the last values of a group are a real bridge.WriterGroup's or a
// fixed list (fixedValues).
type testBackend struct {
	mu      sync.Mutex
	cfg     *config.Config
	file    string
	applied int // successful ApplyConfig calls

	sessions map[string]*client.ManagedSession
	urls     map[string]string
	stores   map[string]*pki.Store
	values   map[string]valueSource // by writer group
	meta     map[string]*ua.DataSetMetaDataType
	stats    Stats
	failNext error           // ApplyConfig fails with it once (the runtime refusing a change)
	cmd      *command.Engine // allowCommands
}

func newTestBackend(t *testing.T, cfg *config.Config) *testBackend {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.json")
	if cfg == nil {
		cfg = &config.Config{}
	}
	b := &testBackend{cfg: cfg, file: file, sessions: map[string]*client.ManagedSession{},
		urls: map[string]string{}, stores: map[string]*pki.Store{}, meta: map[string]*ua.DataSetMetaDataType{},
		values: map[string]valueSource{}}
	if err := b.persist(cfg); err != nil {
		t.Fatal(err)
	}
	return b
}

// reopen is the restart: a backend that loads the persisted configuration.
func (b *testBackend) reopen(t *testing.T) *testBackend {
	t.Helper()
	data, err := os.ReadFile(b.file)
	if err != nil {
		t.Fatal(err)
	}
	_ = data
	cfg, _, err := config.Load(b.file)
	if err != nil {
		t.Fatal(err)
	}
	nb := &testBackend{cfg: cfg, file: b.file, sessions: map[string]*client.ManagedSession{},
		urls: map[string]string{}, stores: map[string]*pki.Store{}, meta: map[string]*ua.DataSetMetaDataType{},
		values: map[string]valueSource{}}
	return nb
}

func (b *testBackend) persist(c *config.Config) error {
	_, err := config.Save(c, b.file, filepath.Join(filepath.Dir(b.file), "secrets"))
	return err
}

func cloneConfig(c *config.Config) *config.Config { return c.Clone() }

func (b *testBackend) Config() *config.Config {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg
}

// validateMinimal stands in for bridge/config's Validate until it lands:
// unique names and resolvable references.
func validateMinimal(c *config.Config) error {
	eps := map[string]bool{}
	for i, e := range c.Endpoints {
		if e.Name == "" || eps[e.Name] {
			return fmt.Errorf("endpoints[%d]: name %q empty or duplicated: %w", i, e.Name, ErrInvalid)
		}
		eps[e.Name] = true
	}
	groups := map[string]bool{}
	for i, g := range c.WriterGroups {
		if g.Name == "" || groups[g.Name] {
			return fmt.Errorf("writerGroups[%d]: name %q empty or duplicated: %w", i, g.Name, ErrInvalid)
		}
		groups[g.Name] = true
		if !eps[g.Endpoint] {
			return fmt.Errorf("writerGroups[%d].endpoint %q: no such endpoint: %w", i, g.Endpoint, ErrInvalid)
		}
		ws := map[string]bool{}
		for j, w := range g.Writers {
			if w.Name == "" || ws[w.Name] {
				return fmt.Errorf("writerGroups[%d].writers[%d]: name %q empty or duplicated: %w", i, j, w.Name, ErrInvalid)
			}
			ws[w.Name] = true
			for k, f := range w.Fields {
				if _, err := ua.ParseExpandedNodeID(f.Node); err != nil {
					return fmt.Errorf("writerGroups[%d].writers[%d].fields[%d].node: %w", i, j, k, ErrInvalid)
				}
			}
		}
	}
	return nil
}

func (b *testBackend) ApplyConfig(ctx context.Context, change func(*config.Config) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	next := cloneConfig(b.cfg)
	if err := change(next); err != nil {
		return err
	}
	if err := validateMinimal(next); err != nil {
		return err
	}
	if err := b.failNext; err != nil {
		b.failNext = nil
		return err
	}
	if err := b.persist(next); err != nil {
		return err
	}
	b.cfg = next
	b.applied++
	return nil
}

func (b *testBackend) addSession(name, url string, m *client.ManagedSession) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sessions[name] = m
	b.urls[name] = url
}

func (b *testBackend) Endpoints() []EndpointStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	var names []string
	for n := range b.sessions {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []EndpointStatus
	for _, n := range names {
		out = append(out, NewEndpointStatus(n, b.urls[n], b.sessions[n]))
	}
	return out
}

// valueSource is a writer group's last-value cache: *bridge.WriterGroup or
// fixedValues.
type valueSource interface {
	LastValues(f bridge.ValueFilter, from, limit int) ([]bridge.FieldValue, int)
}

// fixedValues are a group's last values as a list; a value's position is
// its index, as bridge.WriterGroup.LastValues pages its slots.
type fixedValues []bridge.FieldValue

func (v fixedValues) LastValues(f bridge.ValueFilter, from, limit int) ([]bridge.FieldValue, int) {
	var out []bridge.FieldValue
	for i := max(from, 0); i < len(v); i++ {
		if (f.Writer != "" && v[i].Writer != f.Writer) || (f.Node != "" && v[i].Node != f.Node) {
			continue
		}
		if len(out) >= limit {
			return out, i
		}
		out = append(out, v[i])
	}
	return out, -1
}

func (b *testBackend) setValues(group string, vs valueSource) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.values[group] = vs
}

func (b *testBackend) LastValues(group string, f bridge.ValueFilter, from, limit int) ([]bridge.FieldValue, int, error) {
	b.mu.Lock()
	vs := b.values[group]
	b.mu.Unlock()
	if vs == nil {
		return nil, -1, fmt.Errorf("writer group %q does not run here: %w", group, ErrUnavailable)
	}
	vals, next := vs.LastValues(f, from, limit)
	return vals, next, nil
}

func (b *testBackend) Metadata(group, writer string) (*ua.DataSetMetaDataType, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m := b.meta[group+"/"+writer]; m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("the metadata of %s/%s is not known yet: %w", group, writer, ErrUnavailable)
}

func (b *testBackend) Session(ctx context.Context, endpoint string) (*client.Client, error) {
	b.mu.Lock()
	m := b.sessions[endpoint]
	b.mu.Unlock()
	if m == nil {
		return nil, fmt.Errorf("endpoint %q does not exist: %w", endpoint, ErrNotFound)
	}
	c, err := m.WaitConnected(ctx)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q is not connected: %v: %w", endpoint, err, ErrUnavailable)
	}
	return c, nil
}

func (b *testBackend) Store(endpoint string) (*pki.Store, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.stores[endpoint]; st != nil {
		return st, nil
	}
	return nil, fmt.Errorf("endpoint %q does not exist: %w", endpoint, ErrNotFound)
}

func (b *testBackend) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// quietLogger keeps test output readable.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestServer serves a Server on an httptest listener.
func newTestServer(t *testing.T, b Backend, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	opts.Backend = b
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) problem(t *testing.T) Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, r.body)
	}
	var p Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem body %s: %v", r.body, err)
	}
	return p
}

func (r reply) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
}

// do sends a request; body is sent as it is when it is a string or []byte,
// as JSON otherwise.
func do(t *testing.T, ts *httptest.Server, method, path, token string, body any) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil || unsafeMethod(method) {
		// As the dashboard and the CLI do: a request that changes state is
		// declared JSON (guard.go).
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// startSim starts the simulation server on a loopback port.
func startSim(t *testing.T, cfg *server.Config) *server.Server {
	t.Helper()
	if cfg == nil {
		cfg = &server.Config{}
	}
	cfg.Address = "127.0.0.1:0"
	if cfg.Policies == nil {
		cfg.Policies = []uasc.EndpointSecurity{{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}}
	}
	if cfg.Sim.Folders == 0 && cfg.Sim.Variables == 0 {
		cfg.Sim.Folders, cfg.Sim.Variables = -1, -1 // no Load folders unless asked for
	}
	cfg.Logger = quietLogger()
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// startSession starts a managed session to url and waits until it is
// connected (unless wait is false).
func startSession(t *testing.T, url string, cfg *client.ManagedConfig, wait bool) *client.ManagedSession {
	t.Helper()
	if cfg == nil {
		cfg = &client.ManagedConfig{}
	}
	cfg.Client.Logger = quietLogger()
	if cfg.Client.SecurityPolicy == "" {
		cfg.Client.SecurityPolicy = uasc.SecurityPolicyNone
	}
	cfg.Backoff.Initial = 20 * time.Millisecond
	m, err := client.NewManagedSession(url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	m.Start()
	if wait {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := m.WaitConnected(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

var errTest = errors.New("test")

// slogTo logs at debug level into w.
func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Commands implements CommandBackend: nil (Write and Call refused) until
// allowCommands.
func (b *testBackend) Commands() *command.Engine {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd
}

// allowCommands gives the backend a command engine with rules.
func (b *testBackend) allowCommands(t *testing.T, rules ...config.CommandRule) *command.Engine {
	t.Helper()
	cfg := &config.Config{Commands: config.Commands{Rules: rules}}
	cfg.ApplyDefaults()
	e, err := command.New(cfg, command.Options{Backend: cmdSessions{b}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	b.mu.Lock()
	b.cmd = e
	b.mu.Unlock()
	return e
}

// cmdSessions is the command engine's Backend over the test backend.
type cmdSessions struct{ b *testBackend }

func (c cmdSessions) Session(ctx context.Context, endpoint string) (*client.Client, error) {
	return c.b.Session(ctx, endpoint)
}

func (cmdSessions) BrowsedField(group, writer, field string) (string, bool) { return "", false }
