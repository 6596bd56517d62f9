package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
)

// TestReadinessAndShutdown: /readyz waits for the session and the sink,
// honours the policy, and fails from the start of a Shutdown while the
// listener still serves; then the listener stops.
func TestReadinessAndShutdown(t *testing.T) {
	srv := startSim(t, &server.Config{})
	m := startSession(t, srv.URL(), nil, false)
	b := newTestBackend(t, nil)
	b.addSession("sim", srv.URL(), m)
	b.stats.Sinks = []SinkStats{{Kind: "mqtt", OutputStats: sink.OutputStats{Name: "broker"}}}
	s, err := New(Options{Backend: b, Listen: "127.0.0.1:0", ShutdownDelay: 300 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	base := s.URL()
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			return -1, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/healthz"); code != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("healthz: %d %s", code, body)
	}
	testutil.WaitFor(t, 10*time.Second, "the session", func() bool { return m.State() == client.StateConnected })
	code, body := get("/readyz")
	if code != 503 || !strings.Contains(body, `"waiting":["sink broker"]`) {
		t.Fatalf("readyz without the sink: %d %s", code, body)
	}
	b.mu.Lock()
	b.stats.Sinks[0].Connected = true
	b.mu.Unlock()
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"ready":true`) {
		t.Fatalf("readyz: %d %s", code, body)
	}
	// The dashboard.
	if code, body := get("/"); code != 200 || !strings.Contains(body, `src="js/app.js"`) {
		t.Fatalf("/: %d %s", code, body)
	}

	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	testutil.WaitFor(t, 5*time.Second, "readiness to fail", func() bool { c, _ := get("/readyz"); return c == 503 })
	if code, body := get("/healthz"); code != 200 {
		t.Fatalf("during the shutdown delay the listener serves: %d %s", code, body)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	if code, _ := get("/healthz"); code != -1 {
		t.Fatalf("still serving after Shutdown: %d", code)
	}

	// Policies: none of the sinks, any endpoint.
	b2 := newTestBackend(t, nil)
	b2.addSession("sim", srv.URL(), m)
	b2.addSession("down", "opc.tcp://127.0.0.1:1", nil)
	b2.stats.Sinks = []SinkStats{{OutputStats: sink.OutputStats{Name: "broker"}}}
	s2, _ := newTestServer(t, b2, Options{Ready: ReadyPolicy{Endpoints: RequireAny, Sinks: RequireNone}})
	if rd := s2.Readiness(); !rd.Ready || rd.EndpointsConnected != 1 || rd.EndpointsTotal != 2 {
		t.Fatalf("any/none: %+v", rd)
	}
	s3, _ := newTestServer(t, b2, Options{Ready: ReadyPolicy{Sinks: RequireNone}})
	if rd := s3.Readiness(); rd.Ready {
		t.Fatalf("all endpoints with one down: %+v", rd)
	}
	if _, err := New(Options{Backend: b2, Ready: ReadyPolicy{Sinks: "most"}}); err == nil {
		t.Fatal("a bad policy was accepted")
	}
}

// TestExposureRule: without keys only loopback, unless opened on purpose.
func TestExposureRule(t *testing.T) {
	b := newTestBackend(t, nil)
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0"} {
		if _, err := New(Options{Backend: b, Listen: addr, Logger: quietLogger()}); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
	for _, addr := range []string{":8080", "0.0.0.0:8080", "10.1.2.3:80"} {
		_, err := New(Options{Backend: b, Listen: addr, Logger: quietLogger()})
		if err == nil || !strings.Contains(err.Error(), "without API keys") {
			t.Errorf("%s: %v", addr, err)
		}
		if _, err := New(Options{Backend: b, Listen: addr, AllowUnauthenticated: true, Logger: quietLogger()}); err != nil {
			t.Errorf("%s opened: %v", addr, err)
		}
		if _, err := New(Options{Backend: b, Listen: addr, Keys: []Key{{Token: adminToken, Role: RoleAdmin}}, Logger: quietLogger()}); err != nil {
			t.Errorf("%s with keys: %v", addr, err)
		}
	}
	if _, err := New(Options{Backend: b, Keys: []Key{{Name: "short", Token: "abc", Role: RoleAdmin}}}); err == nil {
		t.Error("a short token was accepted")
	}
}

// TestKeysFile: keys from a mounted secret file, with roles, read again
// when the file changes; a broken file keeps the old keys. No token shows
// up in the log.
func TestKeysFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "keys")
	write := func(s string, mod time.Time) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(file, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().Add(-time.Hour)
	write("# keys\nadmin "+adminToken+" ops\nread "+readToken+"\n", t0)
	var logs testutil.LockedBuffer
	b := newTestBackend(t, baseConfig())
	_, ts := newTestServer(t, b, Options{KeysFile: file, Logger: slogTo(&logs)})
	if r := do(t, ts, "GET", "/api/v1/status", readToken, nil); r.status != 200 {
		t.Fatalf("read key: %d %s", r.status, r.body)
	}
	if r := do(t, ts, "DELETE", "/api/v1/writer-groups/line1", readToken, nil); r.status != 403 {
		t.Fatalf("read key deletes: %d", r.status)
	}
	// X-API-Key works too.
	req, _ := http.NewRequest("GET", ts.URL+"/api/v1/status", nil)
	req.Header.Set("X-API-Key", adminToken)
	if resp, err := ts.Client().Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("X-API-Key: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// Rotate: the read key is gone, a new one is there.
	newRead := "rotated-read-key-0123456789"
	write("admin "+adminToken+" ops\nread "+newRead+"\n", t0.Add(time.Minute))
	testutil.WaitFor(t, 5*time.Second, "the rotated key", func() bool {
		return do(t, ts, "GET", "/api/v1/status", newRead, nil).status == 200
	})
	if r := do(t, ts, "GET", "/api/v1/status", readToken, nil); r.status != 401 {
		t.Fatalf("old key after rotation: %d", r.status)
	}
	// A broken file keeps the keys read before.
	write("superuser "+newRead+"\n", t0.Add(2*time.Minute))
	testutil.WaitFor(t, 5*time.Second, "the broken file to be noticed", func() bool {
		do(t, ts, "GET", "/api/v1/status", newRead, nil) // keys are checked on requests
		return strings.Contains(logs.String(), "the keys file cannot be used")
	})
	if r := do(t, ts, "GET", "/api/v1/status", newRead, nil); r.status != 200 {
		t.Fatalf("keys after a broken file: %d", r.status)
	}
	for _, tok := range []string{adminToken, readToken, newRead} {
		if strings.Contains(logs.String(), tok) {
			t.Fatalf("a token is in the log:\n%s", logs.String())
		}
	}
	if _, err := New(Options{Backend: b, KeysFile: filepath.Join(dir, "missing")}); err == nil {
		t.Fatal("a missing keys file was accepted")
	}
}

// TestCORSAndWebSocketOrigins: preflights of allowed origins are answered,
// others are not; the mounted WebSocket handler checks the origin and the
// credentials (never from the URL).
func TestCORSAndWebSocketOrigins(t *testing.T) {
	b := newTestBackend(t, nil)
	ws := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hub") })
	_, ts := newTestServer(t, b, Options{CORSOrigins: []string{"https://ui.example"}, WebSocketOrigins: []string{"https://ui.example"},
		Keys:   []Key{{Name: "r", Token: readToken, Role: RoleRead}},
		Mounts: []Mount{{Pattern: "/ws", Handler: ws, Role: RoleRead, WebSocket: true}}})
	pre := func(origin string) *http.Response {
		req, _ := http.NewRequest("OPTIONS", ts.URL+"/api/v1/status", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "GET")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := pre("https://ui.example"); r.StatusCode != 204 || r.Header.Get("Access-Control-Allow-Origin") != "https://ui.example" ||
		!strings.Contains(r.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("allowed preflight: %d %v", r.StatusCode, r.Header)
	}
	if r := pre("https://evil.example"); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("other origin got CORS headers: %v", r.Header)
	}
	wsGet := func(origin, query, token string) int {
		req, _ := http.NewRequest("GET", ts.URL+"/ws"+query, nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := wsGet("https://ui.example", "", readToken); c != 200 {
		t.Errorf("allowed origin with a key: %d", c)
	}
	if c := wsGet("https://evil.example", "", readToken); c != 403 {
		t.Errorf("other origin: %d", c)
	}
	// A key in the URL is not taken (URLs end up in logs).
	if c := wsGet("https://ui.example", "?access_token="+readToken, ""); c != 401 {
		t.Errorf("access_token on the WebSocket: %d", c)
	}
	if c := wsGet("", "", readToken); c != 200 {
		t.Errorf("no origin (not a browser) with a key: %d", c)
	}
	if c := wsGet("https://ui.example", "", ""); c != 401 {
		t.Errorf("no credentials: %d", c)
	}
	if r := do(t, ts, "GET", "/api/v1/status?access_token="+readToken, "", nil); r.status != 401 {
		t.Errorf("access_token on the API: %d", r.status)
	}
}

// TestTLS serves HTTPS from certificate files and picks up a replaced
// certificate without a restart.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writePair := func(cn string) *x509.Certificate {
		der, key, err := pki.CreateCertificate(pki.CertRequest{CommonName: cn, ApplicationURI: "urn:test:" + cn,
			Hosts: []string{"127.0.0.1"}, KeyBits: 2048}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
		os.WriteFile(keyFile+".tmp", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
		os.WriteFile(certFile+".tmp", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
		os.Rename(keyFile+".tmp", keyFile)
		os.Rename(certFile+".tmp", certFile)
		c, _ := x509.ParseCertificate(der)
		return c
	}
	first := writePair("first")
	b := newTestBackend(t, nil)
	s, err := New(Options{Backend: b, Listen: "127.0.0.1:0", TLSCertFile: certFile, TLSKeyFile: keyFile, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	if !strings.HasPrefix(s.URL(), "https://") {
		t.Fatalf("URL %s", s.URL())
	}
	seen := func() string {
		pool := x509.NewCertPool()
		pool.AddCert(first)
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(s.URL() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	if cn := seen(); cn != "first" {
		t.Fatalf("served %q", cn)
	}
	writePair("second")
	testutil.WaitFor(t, 5*time.Second, "the new certificate", func() bool { return seen() == "second" })
	if _, err := New(Options{Backend: b, TLSCertFile: certFile}); err == nil {
		t.Fatal("a certificate without a key was accepted")
	}
}
