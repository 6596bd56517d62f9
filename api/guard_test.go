package api

import (
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestBrowsersCannotDriveTheAPI: what a page of another site can make its
// visitor's browser send to a default (local, keyless) gateway, as real
// requests with the headers browsers set: a Write with a Blob body (no
// Content-Type, no preflight), a writer group created the same way, the
// same with a text/plain body, requests through a rebound DNS name (the
// page's own origin, Host the attacker's name), and a cross-site read.
// Each is refused, and nothing changed: the value written is still the one
// before, no group was added.
func TestBrowsersCannotDriveTheAPI(t *testing.T) {
	srv := startSim(t, nil)
	m := startSession(t, srv.URL(), nil, true)
	b := newTestBackend(t, baseConfig())
	b.addSession("sim", srv.URL(), m)
	b.allowCommands(t, allowStaticWrites)
	_, c := serveReal(t, b, Options{AllowedHosts: []string{"gw.plant.example", ".cell.plant.example"},
		CORSOrigins: []string{"https://ui.plant.example"}})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(c.base, "http://"))
	write := "/api/v1/endpoints/sim/write"
	value := func() string {
		r := c.send("POST", "/api/v1/endpoints/sim/read", "", `{"nodes":[{"node":"ns=1;s=Demo.Static.Int32"}],"timestamps":"neither"}`, "Content-Type", "application/json")
		if r.status != 200 {
			t.Fatalf("read: %d %s", r.status, r.body)
		}
		return string(r.body)
	}
	before := value()
	evil := "https://evil.example"
	group := `{"name":"stolen","endpoint":"plc1","writers":[{"name":"w","fields":[{"node":"i=2258"}]}]}`
	for _, tc := range []struct {
		name, method, path, body string
		headers                  []string
		status                   int
	}{
		{"a Write with a Blob body from another site", "POST", write, writeBody,
			[]string{"Origin", evil, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors"}, 403},
		{"a Write with a Blob body, an older browser (no Sec-Fetch-*)", "POST", write, writeBody,
			[]string{"Origin", evil}, 403},
		{"a Write with a text/plain body", "POST", write, writeBody,
			[]string{"Origin", evil, "Content-Type", "text/plain"}, 403},
		{"a Write without Content-Type, no Origin", "POST", write, writeBody, nil, 415},
		{"a Write declared text/plain, no Origin", "POST", write, writeBody, []string{"Content-Type", "text/plain"}, 415},
		{"a writer group created with a Blob body", "POST", "/api/v1/writer-groups", group,
			[]string{"Origin", evil, "Sec-Fetch-Site", "cross-site"}, 403},
		{"a writer group created without Content-Type", "POST", "/api/v1/writer-groups", group, nil, 415},
		{"a retry of the configuration without Content-Type", "POST", "/api/v1/config/retry", "", nil, 415},
		{"DNS rebinding: a Write from the rebound page", "POST", write, writeBody,
			[]string{"Host", "evil.example:" + port, "Origin", "http://evil.example:" + port, "Sec-Fetch-Site", "same-origin", "Content-Type", "application/json"}, 403},
		{"DNS rebinding: a read", "GET", "/api/v1/status", "", []string{"Host", "evil.example:" + port}, 403},
		{"DNS rebinding: the WebSocket", "GET", "/ws", "", []string{"Host", "evil.example:" + port, "Upgrade", "websocket"}, 403},
		{"DNS rebinding: the dashboard", "GET", "/", "", []string{"Host", "evil.example"}, 403},
		{"a cross-site read", "GET", "/api/v1/status", "", []string{"Origin", evil, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors"}, 403},
		{"a same-site page of another origin writing", "POST", write, writeBody,
			[]string{"Origin", "http://127.0.0.1:1", "Sec-Fetch-Site", "same-site", "Content-Type", "application/json"}, 403},
	} {
		r := c.send(tc.method, tc.path, "", tc.body, tc.headers...)
		if r.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
			continue
		}
		if p := r.problem(t); p.Detail == "" {
			t.Errorf("%s: a problem without detail", tc.name)
		}
	}
	if got := value(); got != before {
		t.Errorf("the value changed: %s, was %s", got, before)
	}
	for _, g := range b.Config().WriterGroups {
		if g.Name == "stolen" {
			t.Error("a writer group was created")
		}
	}
	if v := c.metric("", `uagate_api_refused_total{reason="host"}`); v != "4" {
		t.Errorf(`uagate_api_refused_total{reason="host"} %q, want 4`, v)
	}

	// What is allowed: the listener's own pages, the allowed origins and
	// hosts, non-browser clients declaring JSON, a link followed from
	// another site.
	for _, tc := range []struct {
		name, method, path, body string
		headers                  []string
		status                   int
	}{
		{"the dashboard's own Write", "POST", write, writeBody,
			[]string{"Origin", c.base, "Sec-Fetch-Site", "same-origin", "Content-Type", "application/json"}, 200},
		{"an allowed origin", "POST", write, writeBody,
			[]string{"Origin", "https://ui.plant.example", "Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"}, 200},
		{"a client declaring JSON", "POST", write, writeBody, []string{"Content-Type", "application/json"}, 200},
		{"an allowed host", "GET", "/api/v1/status", "", []string{"Host", "gw.plant.example:" + port}, 200},
		{"an allowed domain", "GET", "/api/v1/status", "", []string{"Host", "press.cell.plant.example"}, 200},
		{"an IP address", "GET", "/api/v1/status", "", []string{"Host", "10.1.2.3:8080"}, 200},
		{"localhost", "GET", "/api/v1/status", "", []string{"Host", "localhost:" + port}, 200},
		{"a link to the dashboard from another site", "GET", "/", "",
			[]string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate"}, 200},
		{"DELETE (always preflighted)", "DELETE", "/api/v1/writer-groups/nope", "", nil, 404},
	} {
		if r := c.send(tc.method, tc.path, "", tc.body, tc.headers...); r.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
		}
	}
}

// TestSecurityHeaders: every answer carries the dashboard's strict CSP, no
// framing and no sniffing; the dashboard's page has no inline script or
// style the CSP would block.
func TestSecurityHeaders(t *testing.T) {
	_, c := serveReal(t, newTestBackend(t, nil), Options{})
	for _, p := range []string{"/", "/js/app.js", "/api/v1/status", "/api/v1/nope"} {
		r := c.send("GET", p, "", "")
		h := r.header
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") ||
			strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", p, csp)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", p, h)
		}
		if p == "/" {
			page := string(r.body)
			if strings.Contains(page, "style=") || strings.Contains(page, "<style") || regexp.MustCompile(`\son[a-z]+=`).MatchString(page) {
				t.Errorf("the page has inline style or handlers")
			}
			for _, s := range strings.Split(page, "<script")[1:] {
				if !strings.Contains(s[:strings.Index(s, ">")], "src=") {
					t.Errorf("an inline script: <script%s", s[:min(len(s), 80)])
				}
			}
		}
	}
}

// TestRawSemicolonInQuery: a node id's ';' unencoded in a query would make
// Go's parser drop the whole query (a filter silently not applied): the
// request is refused, saying how to encode it; encoded, it filters.
func TestRawSemicolonInQuery(t *testing.T) {
	_, ts := newTestServer(t, newTestBackend(t, nil), Options{})
	r := do(t, ts, "GET", "/api/v1/values?node=ns=1;s=Demo.Counter", "", nil)
	if p := r.problem(t); r.status != http.StatusBadRequest || !strings.Contains(p.Detail, "%3B") {
		t.Errorf("raw ';': %d %+v", r.status, p)
	}
	if r := do(t, ts, "GET", "/api/v1/values?node=ns%3D1%3Bs%3DDemo.Counter", "", nil); r.status != http.StatusOK {
		t.Errorf("encoded: %d %s", r.status, r.body)
	}
}

// TestSessionCookie: a browser signs in with a key and gets a session
// cookie (HttpOnly, SameSite=Strict) that authenticates the API and the
// WebSocket; a wrong key gets none; the session ends with logout, and
// with its key rotated out; a key in the URL is never taken.
func TestSessionCookie(t *testing.T) {
	b := newTestBackend(t, baseConfig())
	ws := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hub")) })
	_, c := serveReal(t, b, Options{Keys: []Key{{Name: "ops", Token: adminToken, Role: RoleAdmin}, {Name: "dash", Token: readToken, Role: RoleRead}},
		Mounts: []Mount{{Pattern: "/ws", Handler: ws, Role: RoleRead, WebSocket: true}}})
	login := func(key string) (reply, string) {
		r := c.send("POST", "/api/v1/login", "", `{"key":"`+key+`"}`, "Content-Type", "application/json", "Origin", c.base, "Sec-Fetch-Site", "same-origin")
		for _, ck := range (&http.Response{Header: r.header}).Cookies() {
			if ck.Name == SessionCookie {
				return r, ck.Raw
			}
		}
		return r, ""
	}
	if r, ck := login("wrong-key-0123456789abcdef"); r.status != 401 || ck != "" {
		t.Fatalf("a wrong key: %d, cookie %q", r.status, ck)
	}
	r, raw := login(readToken)
	var who Login
	r.decode(t, &who)
	if r.status != 200 || who.Role != "read" || who.Name != "dash" {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	for _, attr := range []string{"HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(raw, attr) {
			t.Errorf("the cookie %q lacks %s", raw, attr)
		}
	}
	cookie := strings.SplitN(raw, ";", 2)[0]
	if strings.Contains(cookie, readToken) {
		t.Fatal("the cookie carries the key")
	}
	if r := c.send("GET", "/api/v1/status", "", "", "Cookie", cookie); r.status != 200 {
		t.Errorf("status with the session: %d", r.status)
	}
	if r := c.send("GET", "/ws", "", "", "Cookie", cookie, "Origin", c.base, "Upgrade", "websocket"); r.status != 200 {
		t.Errorf("the WebSocket with the session: %d %s", r.status, r.body)
	}
	if r := c.send("DELETE", "/api/v1/writer-groups/line1", "", "", "Cookie", cookie, "Origin", c.base); r.status != 403 {
		t.Errorf("a read session deleting: %d", r.status)
	}
	if r := c.send("POST", "/api/v1/logout", "", "", "Cookie", cookie, "Content-Type", "application/json"); r.status != 204 {
		t.Errorf("logout: %d", r.status)
	}
	if r := c.send("GET", "/api/v1/status", "", "", "Cookie", cookie); r.status != 401 {
		t.Errorf("status after logout: %d", r.status)
	}
	if r := c.send("GET", "/api/v1/status?access_token="+readToken, "", ""); r.status != 401 {
		t.Errorf("a key in the URL: %d", r.status)
	}
}

// TestHostAllowed: the names a listener answers.
func TestHostAllowed(t *testing.T) {
	allowed := []string{"gw.example", ".plant.example", "*.bad"}
	for host, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:8080": true, "10.0.0.5": true, "localhost": true, "LOCALHOST:80": true,
		"a.localhost": true, "gw.example": true, "GW.EXAMPLE.:443": true, "plant.example": true, "x.y.plant.example": true,
		"evil.example": false, "gw.example.evil": false, "evilplant.example": false, "": false, "x.bad": false,
	} {
		if got := hostAllowed(allowed, host); got != want {
			t.Errorf("%q: %v, want %v", host, got, want)
		}
	}
	if !hostAllowed([]string{"*"}, "anything.example") {
		t.Error(`"*" does not allow every name`)
	}
}
