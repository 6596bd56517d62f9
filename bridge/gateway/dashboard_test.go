package gateway_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// The dashboard's test: the whole gateway (startGateway with a
// configuration file) on two simulation servers, and a real browser —
// Debian's chromium, headless, driven over the DevTools protocol by chromedp
// — on the dashboard it serves at /.

// startSimServer starts a simulation server with generators on a loopback
// port.
func startSimServer(t *testing.T, sim server.SimConfig, policies []uasc.EndpointSecurity) *server.Server {
	t.Helper()
	srv, err := server.New(&server.Config{Address: "127.0.0.1:0", Policies: policies, Sim: sim, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// startDashboardGateway runs the gateway on a configuration file until the
// test ends (startGateway) and returns the base URL of its HTTP listener, the
// configuration file (where changes made through the API are saved) and its
// log.
func startDashboardGateway(t *testing.T, yaml string) (string, string, *lockedBuffer) {
	t.Helper()
	g := startGateway(t, "gateway.yaml", yaml)
	return "http://" + g.gw.Addrs().HTTP, g.path, g.log
}

// artifactsDir is where the test keeps what a person looks at:
// $UAGATE_ARTIFACTS, or testdata/artifacts (git-ignored).
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("UAGATE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startChromium starts a headless chromium of its own (an empty profile)
// and returns a chromedp context on a tab of it, and a func returning the
// console errors, warnings and uncaught exceptions of the page so far.
func startChromium(t *testing.T, extra ...chromedp.ExecAllocatorOption) (context.Context, func() []string) {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: apt-get install chromium (scripts/test.sh does)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("lang", "en-GB"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1600, 1000),
	}
	opts = append(opts, extra...)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil { // starts the browser and opens the tab
		cancel()
		acancel()
		t.Fatalf("starting chromium: %v", err)
	}
	var (
		mu   sync.Mutex
		msgs []string
		wg   sync.WaitGroup
	)
	lctx, lcancel := context.WithCancel(ctx)
	console := chromedp.Console(lctx)
	wg.Go(func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || m.Type == chromedp.ConsoleWarning {
				mu.Lock()
				msgs = append(msgs, fmt.Sprintf("%s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line))
				mu.Unlock()
			}
		}
	})
	t.Cleanup(func() {
		lcancel()
		wg.Wait()
		cancel()
		acancel()
	})
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), msgs...)
	}
}

// page drives the dashboard in the browser.
type page struct {
	t   *testing.T
	ctx context.Context
}

// eval runs JavaScript in the page and returns its value.
func eval[T any](p page, js string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// wait polls a JavaScript condition until it is true.
func (p page) wait(timeout time.Duration, what, js string) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for !eval[bool](p, "!!("+js+")") {
		if time.Now().After(deadline) {
			p.shot("dashboard-failed.png")
			p.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p page) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.shot("dashboard-failed.png")
		p.t.Fatal(err)
	}
}

// choose sets a select's value as a user's choice does (a change event).
func (p page) choose(id, value string) {
	p.t.Helper()
	eval[bool](p, fmt.Sprintf(`(s => (s.value = %q, s.dispatchEvent(new Event("change")), s.value === %[1]q))(document.getElementById(%q))`, value, id))
}

// shot saves a screenshot of the viewport under the artifacts directory.
func (p page) shot(name string) string {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100)) // 100: PNG, the whole page
	if err != nil {
		p.t.Errorf("screenshot: %v", err)
		return ""
	}
	path := filepath.Join(artifactsDir(p.t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Errorf("screenshot: %v", err)
	}
	return path
}

// valueOf is the text of a field's value cell ("" while its row is not
// drawn).
func valueOf(key string) string {
	return fmt.Sprintf(`((document.querySelector('.vt-rows [data-key=%q] .v') || {}).textContent || "")`, key)
}

// hasValue: the field's cell shows a value.
func hasValue(key string) string { return valueOf(key) + ` !== "" && ` + valueOf(key) + ` !== "—"` }

// TestDashboard: the gateway's page loads with the endpoints, writer groups,
// sinks and live values; values change as the stream brings them; only the
// rows in view are in the DOM; a variable ticked in the node browser and
// added through the UI becomes a field that streams; trusting the rejected
// certificate through the UI lets the secure endpoint connect and its group
// stream; the page logs no error. The screenshot is kept (dashboard.png).
func TestDashboard(t *testing.T) {
	plant := startSimServer(t, server.SimConfig{DemoRate: 100 * time.Millisecond, Folders: 3, Variables: 100,
		Rates: []time.Duration{500 * time.Millisecond}, AlarmSources: -1},
		[]uasc.EndpointSecurity{{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}})
	press := startSimServer(t, server.SimConfig{DemoRate: 100 * time.Millisecond, Folders: -1, Variables: -1, AlarmSources: -1},
		[]uasc.EndpointSecurity{
			{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}, // discovery
			{PolicyURI: uasc.SecurityPolicyBasic256Sha256, Mode: ua.MessageSecurityModeSignAndEncrypt}})

	load := writer("load")
	for f := range 3 {
		for v := range 100 {
			load.Fields = append(load.Fields, field(fmt.Sprintf("F%d.V%03d", f, v), server.LoadNode(f, v)))
		}
	}
	base, file, stderr := startDashboardGateway(t, marshalConfig(t, &config.Config{
		Gateway: config.Gateway{PublisherID: "plant7-gw"},
		Endpoints: []config.Endpoint{
			{Name: "line1", URL: plant.URL(), SecurityPolicy: "None", SecurityMode: "None"},
			{Name: "press", URL: press.URL(), SecurityPolicy: "Basic256Sha256", SecurityMode: "SignAndEncrypt"},
		},
		WriterGroups: []config.WriterGroup{{
			Name: "line1", Endpoint: "line1", PublishingInterval: dur(250 * time.Millisecond),
			Writers: []config.DataSetWriter{writer("demo",
				field("Counter", server.NodeCounter),
				field("Random", server.NodeRandom),
				field("Step", server.NodeStep),
				field("Setpoint", server.NodeSetpoint),
				field("Flapping", server.NodeFlapping),
				field("Uncertain", server.NodeUncertain),
				field("Int32Matrix", server.NodeInt32Matrix),
			), load},
		}, {
			Name: "press", Endpoint: "press", PublishingInterval: dur(250 * time.Millisecond),
			Writers: []config.DataSetWriter{writer("hydraulics",
				field("Pressure", server.NodeSine),
				field("Strokes", server.NodeCounter),
			)},
		}},
		Sinks: config.Sinks{
			WebSocket: &config.WebSocketSink{},
			File:      []config.FileSink{{Name: "archive", Path: filepath.Join(t.TempDir(), "archive.jsonl")}},
			MQTT:      []config.MQTTSink{{Name: "scada", URL: config.EmbeddedMQTTURL, Sparkplug: &config.Sparkplug{GroupID: "plant7"}}},
		},
		Commands: config.Commands{Rules: []config.CommandRule{{Name: "operators", Callers: []string{"api:*"},
			Write: []config.CommandTarget{{Endpoint: "line1", Node: server.NodeSetpoint}}}}},
	}))

	ctx, consoleErrors := startChromium(t)
	p := page{t, ctx}
	p.do(chromedp.Navigate(base + "/"))
	const wait = 20 * time.Second

	// The page shows the state: line1 connected, press failing on its
	// certificate, both groups, the sinks, the stream live.
	p.wait(wait, "line1 connected", `document.querySelector('tr[data-endpoint="line1"] .pill')?.textContent === "Connected"`)
	p.wait(wait, "press's certificate problem", `/trust/i.test(document.querySelector('tr[data-endpoint="press"] .problem')?.textContent)`)
	p.wait(wait, "both writer groups", `document.querySelectorAll('#wg-body tr[data-group]').length === 2`)
	p.wait(wait, "the websocket and file sinks", `(t => t.includes("websocket") && t.includes("archive"))(document.getElementById("sink-body").textContent)`)
	// The Sparkplug node on the embedded broker: online, its ids, bdSeq
	// and seq, the devices of line1 born, press's not (its endpoint waits
	// for its certificate to be trusted).
	sparkplugState := func(devices string) string {
		return `/sparkplug plant7\/plant7-gw · bdSeq 0 · seq \d+ · devices ` + devices + `\b/.test(document.querySelector('tr[data-sink="scada"] .sparkplug')?.textContent)`
	}
	p.wait(wait, "the Sparkplug node online", `document.querySelector('tr[data-sink="scada"] .pill')?.textContent === "Online"`)
	p.wait(wait, "the Sparkplug node's state", sparkplugState(`2\/3`))
	p.wait(wait, "the stream live", `document.getElementById("f-stream").textContent === "Live"`)
	if got := eval[string](p, `document.getElementById("f-publisher").textContent`); got != "plant7-gw" {
		t.Errorf("publisher shown %q", got)
	}

	// Live values change; a trend is drawn; statuses show.
	counter := "line1/demo/Counter"
	p.wait(wait, "Counter's value", hasValue(counter))
	first := eval[string](p, valueOf(counter))
	p.wait(wait, "Counter's value to change", valueOf(counter)+fmt.Sprintf(` !== %q`, first))
	p.wait(wait, "a trend drawn", fmt.Sprintf(`document.querySelector('.vt-rows [data-key=%q] svg path')?.getAttribute("d")?.length > 10`, counter))
	p.wait(wait, "the Uncertain status", `document.querySelector('.vt-rows [data-key="line1/demo/Uncertain"] .pill.warn')`)
	// 309 fields, a few dozen rows in the DOM; scrolling draws the end.
	p.wait(wait, "every field counted", `document.getElementById("val-count").textContent.startsWith("309 fields")`)
	if n := eval[int](p, `document.querySelectorAll(".vt-rows .vt-row").length`); n < 10 || n > 80 {
		t.Errorf("%d value rows in the DOM for 309 fields: want only those in view", n)
	}
	eval[bool](p, `(v => (v.scrollTop = v.scrollHeight, true))(document.querySelector("#val-table .vt-viewport"))`)
	p.wait(wait, "the last field drawn", `document.querySelector('.vt-rows [data-key="press/hydraulics/Strokes"]')`)
	eval[bool](p, `(v => (v.scrollTop = 0, true))(document.querySelector("#val-table .vt-viewport"))`)

	// The command log: a write of Setpoint and a refused one.
	for _, body := range []string{
		`{"nodes":[{"node":"` + server.NodeSetpoint + `","type":"Double","value":42.5}]}`,
		`{"nodes":[{"node":"` + server.StaticNode(ua.TypeInt16, false) + `","type":"Int16","value":3}]}`,
	} {
		resp, err := http.Post(base+"/api/v1/endpoints/line1/write", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	p.wait(wait, "the command log", `(t => t.includes("api:anonymous") && t.includes("42.5") && t.includes("Good") && t.includes("denied"))(document.getElementById("cmd-body").textContent)`)

	// Add Demo.Sine through the node browser: expand Objects › Demo, tick
	// Sine, choose line1 › demo, Add.
	p.wait(wait, "the browser on line1", `document.getElementById("br-endpoint").value === "line1" && document.querySelector('#br-tree .node[data-node="ns=1;s=Demo"]')`)
	p.do(chromedp.Click(chromedp.CSS(`#br-tree .node[data-node="ns=1;s=Demo"] .tw`)))
	sine := `#br-tree .node[data-node="` + server.NodeSine + `"]`
	p.wait(wait, "Demo's children", `document.querySelector('`+sine+` input')`)
	p.choose("br-target", "line1/demo")
	p.wait(wait, "Counter marked published", `document.querySelector('#br-tree .node[data-node="`+server.NodeCounter+`"] .tag')?.textContent === "published"`)
	p.do(chromedp.Click(chromedp.CSS(sine+` input`)),
		chromedp.WaitEnabled(chromedp.CSS(`#br-add-btn`)),
		chromedp.Click(chromedp.CSS(`#br-add-btn`)))
	added := "line1/demo/Sine"
	p.wait(wait, "the added field's value", hasValue(added))
	v1 := eval[string](p, valueOf(added))
	p.wait(wait, "the added field to stream", valueOf(added)+fmt.Sprintf(` !== %q`, v1))
	p.wait(wait, "Sine marked published", `document.querySelector('`+sine+` .tag')?.textContent === "published"`)
	if saved, err := os.ReadFile(file); err != nil || !strings.Contains(string(saved), server.NodeSine) {
		t.Errorf("the configuration file does not have the added field (%v):\n%s", err, saved)
	}

	// Trust the press's certificate: the rejected list shows it; Trust asks
	// for confirmation with the thumbprint; then the endpoint connects (at
	// its next attempt) and its group streams.
	tp := pki.ThumbprintHex(press.Certificate())
	p.wait(wait, "the rejected certificate", fmt.Sprintf(`document.querySelector('.cert.rejected[data-thumbprint=%q]')`, tp))
	// From the top of the page: scrolled into view from below, the button
	// would sit under the sticky header, which would take the click.
	eval[bool](p, `(scrollTo(0, 0), true)`)
	p.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`.cert.rejected[data-thumbprint=%q] button[data-trust]`, tp))))
	p.wait(wait, "the trust dialog", `document.getElementById("dlg-trust").open`)
	if info := eval[string](p, `document.getElementById("dlg-trust-info").textContent`); !strings.Contains(strings.ReplaceAll(info, ":", ""), tp) {
		t.Errorf("the trust dialog does not show the thumbprint %s: %q", tp, info)
	}
	p.do(chromedp.Click(chromedp.CSS(`#dlg-trust-ok`)))
	p.wait(wait, "the rejected list empty", `!document.querySelector('.cert.rejected')`)
	p.wait(45*time.Second, "press connected", `document.querySelector('tr[data-endpoint="press"] .pill')?.textContent === "Connected"`)
	p.wait(wait, "press's security shown", `document.querySelector('tr[data-endpoint="press"]').textContent.includes("SignAndEncrypt")`)
	p.wait(wait, "press's Sparkplug device born", sparkplugState(`3\/3`))
	p.choose("val-group", "press")
	pressure := "press/hydraulics/Pressure"
	p.wait(wait, "press values", hasValue(pressure))
	p1 := eval[string](p, valueOf(pressure))
	p.wait(wait, "press values to stream", valueOf(pressure)+fmt.Sprintf(` !== %q`, p1))
	p.choose("val-group", "")

	// The figures, and the page as an operator sees it.
	p.wait(wait, "ready", `document.getElementById("f-ready").textContent === "Ready"`)
	p.wait(wait, "throughput figures", `[...document.querySelectorAll('.kpi[data-kpi="notif"] b, .kpi[data-kpi="msgs"] b')].every(b => parseFloat(b.textContent) > 0)`)
	p.wait(wait, "trends on screen", `document.querySelectorAll('.vt-rows svg path[d^="M"]').length >= 10`)
	p.wait(wait, "the notices gone", `!document.querySelector(".toast")`)
	eval[bool](p, `(scrollTo(0, 0), true)`)
	t.Logf("screenshot: %s", p.shot("dashboard.png"))

	for _, m := range consoleErrors() {
		t.Errorf("console: %s", m)
	}
	if t.Failed() {
		t.Logf("gateway stderr:\n%s", stderr)
	}
}
