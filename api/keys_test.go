package api

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/internal/testutil"
)

// serveReal starts a Server on a loopback port of its own (Start) and
// returns it with a client for it.
func serveReal(t *testing.T, b Backend, opts Options) (*Server, *realClient) {
	t.Helper()
	opts.Backend = b
	opts.Listen = "127.0.0.1:0"
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s, &realClient{t: t, base: s.URL(), c: &http.Client{Timeout: 20 * time.Second}}
}

// realClient sends requests to a started Server.
type realClient struct {
	t    *testing.T
	base string
	c    *http.Client
}

// send sends method path with body (a string, sent as it is) and the
// headers given as name, value pairs; token, when set, as a bearer token.
func (rc *realClient) send(method, path, token, body string, headers ...string) reply {
	rc.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, rc.base+path, rd)
	if err != nil {
		rc.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := rc.c.Do(req)
	if err != nil {
		rc.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		rc.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// metric returns the value of a metric line of /metrics ("" when absent).
func (rc *realClient) metric(token, series string) string {
	rc.t.Helper()
	return metricIn(rc.send("GET", "/metrics", token, "").body, series)
}

// metricIn returns the value of a metric line of a /metrics body ("" when
// absent).
func metricIn(body []byte, series string) string {
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return v
		}
	}
	return ""
}

const writeBody = `{"nodes":[{"node":"ns=1;s=Demo.Static.Int32","type":"Int32","value":42}]}`

// allowStaticWrites is the command rule that lets every API key write the
// simulation server's Demo.Static nodes (Write is what the rules allow).
var allowStaticWrites = config.CommandRule{Callers: []string{"api:*"},
	Write: []config.CommandTarget{{Endpoint: "sim", Node: "ns=1;s=Demo.Static.*"}}}

// TestKeysFileNeverOpens: a keys file that becomes empty, unreadable or
// malformed keeps the keys read before — never anonymous access — and says
// so in the log (an error), the metrics and readiness, until a usable file
// comes. Each transition, with real requests: status, and an OPC UA Write
// to the simulation server.
func TestKeysFileNeverOpens(t *testing.T) {
	srv := startSim(t, nil)
	m := startSession(t, srv.URL(), nil, true)
	b := newTestBackend(t, nil)
	b.addSession("sim", srv.URL(), m)
	b.allowCommands(t, allowStaticWrites)
	dir := t.TempDir()
	file := filepath.Join(dir, "keys")
	stamp := time.Now().Add(-time.Hour)
	write := func(s string) {
		t.Helper()
		stamp = stamp.Add(time.Minute) // every version a new modification time
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(file, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	write("admin " + adminToken + " ops\nread " + readToken + " dash\n")
	var logs testutil.LockedBuffer
	_, c := serveReal(t, b, Options{KeysFile: file, Logger: slogTo(&logs)})

	ready := func() Readiness {
		var rd Readiness
		r := c.send("GET", "/readyz", "", "")
		r.decode(t, &rd)
		return rd
	}
	writeStatus := func(token string) int {
		return c.send("POST", "/api/v1/endpoints/sim/write", token, writeBody, "Content-Type", "application/json").status
	}
	// closed checks that nothing is served without a key, and that the
	// admin key adm still writes.
	closed := func(what, adm string) {
		t.Helper()
		if s := c.send("GET", "/api/v1/status", "", "").status; s != 401 {
			t.Errorf("%s: status without a key answered %d", what, s)
		}
		if s := writeStatus(""); s != 401 {
			t.Errorf("%s: a Write without a key answered %d", what, s)
		}
		if s := writeStatus(adm); s != 200 {
			t.Errorf("%s: a Write with the admin key answered %d", what, s)
		}
	}
	stale := func(what string) {
		t.Helper()
		testutil.WaitFor(t, 10*time.Second, what+" reported in readiness", func() bool {
			return ready().APIKeys != ""
		})
		if rd := ready(); rd.Ready || !strings.Contains(rd.APIKeys, "stay in use") {
			t.Errorf("%s: readiness %+v", what, rd)
		}
		if v := c.metric(readToken, "uagate_api_keys_file_stale"); v != "1" {
			t.Errorf("%s: uagate_api_keys_file_stale %q", what, v)
		}
	}
	healthy := func(what string) {
		t.Helper()
		testutil.WaitFor(t, 10*time.Second, what+": readiness without a keys problem", func() bool {
			return ready().APIKeys == ""
		})
	}

	closed("a good file", adminToken)
	if rd := ready(); !rd.Ready {
		t.Fatalf("not ready with a good keys file: %+v", rd)
	}

	// Replaced by a comment line: the keys read before stay.
	write("# rotated: nothing here\n")
	stale("an empty file")
	closed("an empty file", adminToken)
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "holds no key") {
		t.Errorf("no error logged for the empty file:\n%s", logs.String())
	}

	// A usable file again, with other keys: the old ones are gone.
	newAdmin := "rotated-admin-key-0123456789"
	write("admin " + newAdmin + "\nread " + readToken + "\n")
	healthy("rotated keys")
	closed("rotated keys", newAdmin)
	if s := writeStatus(adminToken); s != 401 {
		t.Errorf("the admin key rotated out answered %d", s)
	}
	if v := c.metric(readToken, "uagate_api_keys_file_stale"); v != "0" {
		t.Errorf("uagate_api_keys_file_stale %q after recovery", v)
	}

	// Deleted (unreadable): the keys read before stay.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	stale("a deleted file")
	closed("a deleted file", newAdmin)

	// Malformed.
	write("superuser " + newAdmin + "\n")
	stale("a malformed file")
	closed("a malformed file", newAdmin)
	n, _ := json.Marshal(c.metric(readToken, "uagate_api_keys_file_errors_total"))
	if string(n) == `""` || string(n) == `"0"` {
		t.Errorf("uagate_api_keys_file_errors_total %s", n)
	}

	write("admin " + adminToken + "\n")
	healthy("a good file again")
	closed("a good file again", adminToken)
	for _, tok := range []string{adminToken, readToken, newAdmin} {
		if strings.Contains(logs.String(), tok) {
			t.Fatalf("a token is in the log:\n%s", logs.String())
		}
	}

	// A file without keys is refused at start.
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("# none\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Backend: b, KeysFile: empty, Logger: quietLogger()}); err == nil || !strings.Contains(err.Error(), "holds no key") {
		t.Errorf("a keys file without keys: %v", err)
	}
}

// fakeListener is a listener whose address is not loopback (the tests
// listen on loopback only).
type fakeListener struct {
	net.Listener
	addr net.Addr
}

func (f fakeListener) Addr() net.Addr { return f.addr }

// TestExposureOnServe: the address Serve is given is checked too: an API
// without keys is not served on a non-loopback listener, whatever
// Options.Listen said.
func TestExposureOnServe(t *testing.T) {
	b := newTestBackend(t, nil)
	s, err := New(Options{Backend: b, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := fakeListener{ln, &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 8080}}
	if err := s.Serve(fake); err == nil || !strings.Contains(err.Error(), "without API keys") {
		t.Fatalf("Serve on 10.1.2.3 without keys: %v", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the refused listener is not closed: %v", err)
	}
}
