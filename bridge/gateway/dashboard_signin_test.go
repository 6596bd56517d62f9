package gateway_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// TestDashboardSignIn: the dashboard of a gateway with API keys, in
// chromium. From its own origin: the page asks for a key, the sign-in form
// sends it once and the gateway answers with a session cookie the page's
// scripts cannot read; the state and the live stream (its WebSocket
// authenticated by the cookie) show; no URL the page requested carries the
// key and nothing is kept in the browser's storage. From a foreign origin
// (another site, in the same browser with the session open): a Blob-bodied
// POST, a JSON POST and a WebSocket to the gateway are refused and change
// nothing. Through a rebound DNS name (evil.test resolving to the
// gateway's address) the gateway answers nothing but a refusal.
func TestDashboardSignIn(t *testing.T) {
	const adminKey = "dashboard-admin-key-0123456789"
	plant := startSimServer(t, server.SimConfig{DemoRate: 100 * time.Millisecond, Folders: -1, Variables: -1, AlarmSources: -1},
		[]uasc.EndpointSecurity{{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}})
	c := standalone(plant.URL())
	c.Embedded = config.Embedded{}
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("admin "+adminKey+" ops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.HTTP = config.HTTP{KeysFile: keys}
	c.WriterGroups = []config.WriterGroup{{Name: "line1", Endpoint: "sim", PublishingInterval: dur(250 * time.Millisecond),
		Writers: []config.DataSetWriter{writer("demo", field("Counter", server.NodeCounter))}}}
	c.Sinks = config.Sinks{WebSocket: &config.WebSocketSink{}}
	g := startGateway(t, "gateway.yaml", marshalConfig(t, c))
	base, stderr := "http://"+g.gw.Addrs().HTTP, g.log
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))

	ctx, consoleErrors := startChromium(t, chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1"))
	p := page{t, ctx}
	const wait = 20 * time.Second
	p.do(chromedp.Navigate(base + "/"))
	p.wait(wait, "the sign-in form", `document.getElementById("dlg-key").open`)
	p.do(chromedp.SendKeys(chromedp.CSS(`#dlg-key-input`), adminKey),
		chromedp.Click(chromedp.CSS(`#dlg-key-ok`)))
	p.wait(wait, "the endpoint connected", `document.querySelector('tr[data-endpoint="sim"] .pill')?.textContent === "Connected"`)
	p.wait(wait, "the stream live", `document.getElementById("f-stream").textContent === "Live"`)
	p.wait(wait, "Counter's value", hasValue("line1/demo/Counter"))
	if ck := eval[string](p, `document.cookie`); strings.Contains(ck, "uagate_session") {
		t.Errorf("the page's scripts can read the session cookie: %q", ck)
	}
	if n := eval[int](p, `localStorage.length + sessionStorage.length`); n != 0 {
		t.Errorf("%d items kept in the browser's storage", n)
	}
	urls := eval[[]string](p, `performance.getEntriesByType("resource").map(e => e.name).concat([location.href])`)
	for _, u := range urls {
		if strings.Contains(u, adminKey) || strings.Contains(u, "access_token") {
			t.Errorf("a URL carries the key: %s", u)
		}
	}
	for _, m := range consoleErrors() {
		// The first requests, before the sign-in, are refused.
		if !strings.Contains(m, "401") && !strings.Contains(m, "HTTP Authentication failed") {
			t.Errorf("console: %s", m)
		}
	}

	// Another site's page, the session open in the same browser.
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>cute cats</title>`)
	}))
	t.Cleanup(attacker.Close)
	_, aport, _ := net.SplitHostPort(strings.TrimPrefix(attacker.URL, "http://"))
	p.do(chromedp.Navigate("http://localhost:" + aport + "/"))
	gw := base // http://127.0.0.1:port: another site than localhost
	eval[bool](p, fmt.Sprintf(`(() => {
		window.results = {};
		const group = JSON.stringify({name: "stolen", endpoint: "sim", writers: [{name: "w", fields: [{node: "i=2258"}]}]});
		fetch(%[1]q + "/api/v1/writer-groups", {method: "POST", mode: "no-cors", credentials: "include", body: new Blob([group])})
			.then(r => results.blob = "sent " + r.type, e => results.blob = "error " + e);
		fetch(%[1]q + "/api/v1/writer-groups", {method: "POST", credentials: "include", headers: {"Content-Type": "application/json"}, body: group})
			.then(r => results.json = "answered " + r.status, e => results.json = "error " + e);
		const ws = new WebSocket(%[2]q);
		ws.onopen = () => results.ws = "open";
		ws.onerror = () => results.ws = "refused";
		return true;
	})()`, gw, "ws://127.0.0.1:"+port+"/ws"))
	p.wait(wait, "the attacker's requests to end", `results.blob && results.json && results.ws`)
	res := eval[map[string]string](p, `results`)
	if !strings.HasPrefix(res["json"], "error") || res["ws"] != "refused" {
		t.Errorf("the foreign page's requests: %v", res)
	}
	for _, wg := range g.gw.Config().WriterGroups {
		if wg.Name == "stolen" {
			t.Errorf("the foreign page created a writer group")
		}
	}

	// DNS rebinding: evil.test resolves to the gateway's address.
	p.do(chromedp.Navigate("http://evil.test:" + port + "/"))
	if body := eval[string](p, `document.body.innerText`); !strings.Contains(body, "not a name of this gateway") {
		t.Errorf("the gateway answered a rebound name: %.200s", body)
	}
	if t.Failed() {
		t.Logf("gateway log:\n%s", stderr)
	}
}
