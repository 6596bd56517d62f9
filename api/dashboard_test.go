package api

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/wssink"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// The dashboard's test: a real browser (Debian's chromium, headless, driven
// over the DevTools protocol by chromedp) on the dashboard served by a real
// Server, over real writer groups (bridge.WriterGroup) subscribed to the
// simulation server through real sessions, streaming through a real
// WebSocket hub (wssink.Hub) mounted at /ws. Until the runtime in
// cmd/gateway implements Backend, dashBackend below is the wiring.

// dashBackend is testBackend (configuration, sessions, stores) with the
// pipeline behind it: last values and counters from the writer groups, the
// hub's counters as a sink, and writer changes applied to the running
// groups.
type dashBackend struct {
	*testBackend
	hub *wssink.Hub

	mu     sync.Mutex // serialises ApplyConfig; guards groups
	groups map[string]*dashGroup
}

type dashGroup struct {
	g        *bridge.WriterGroup
	endpoint string
	meter    *meter
}

// meter counts the bytes a group hands to its queue.
type meter struct {
	sink.Queue
	bytes atomic.Uint64
}

func (m *meter) Enqueue(msg *sink.Message) {
	m.bytes.Add(uint64(msg.Len()))
	m.Queue.Enqueue(msg)
}

func (b *dashBackend) group(name string) *dashGroup {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.groups[name]
}

func findGroupCfg(c *config.Config, name string) *config.WriterGroup {
	if i := findGroup(c, name); i >= 0 {
		return &c.WriterGroups[i]
	}
	return nil
}

// ApplyConfig persists the change, then adds, replaces or removes the
// dataset writers it touched in the running groups (new or removed groups
// are refused: the dashboard does not make them).
func (b *dashBackend) ApplyConfig(ctx context.Context, change func(*config.Config) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := cloneConfig(b.testBackend.Config())
	var next *config.Config
	err := b.testBackend.ApplyConfig(ctx, func(c *config.Config) error {
		if err := change(c); err != nil {
			return err
		}
		if len(c.WriterGroups) != len(old.WriterGroups) {
			return fmt.Errorf("the dashboard test's runtime does not add or remove writer groups: %w", ErrConflict)
		}
		next = cloneConfig(c)
		return nil
	})
	if err != nil {
		return err
	}
	var errs []error
	for i := range next.WriterGroups {
		ng := &next.WriterGroups[i]
		dg, og := b.groups[ng.Name], findGroupCfg(old, ng.Name)
		if dg == nil || og == nil {
			continue
		}
		for _, nw := range ng.Writers {
			j := findWriter(og, nw.Name)
			switch {
			case j < 0:
				errs = append(errs, dg.g.AddWriter(ctx, nw))
			case !reflect.DeepEqual(og.Writers[j], nw):
				errs = append(errs, dg.g.ReplaceWriter(ctx, nw))
			}
		}
		for _, ow := range og.Writers {
			if findWriter(ng, ow.Name) < 0 {
				errs = append(errs, dg.g.RemoveWriter(ctx, ow.Name))
			}
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (b *dashBackend) LastValues(f ValueFilter) []FieldValue {
	var out []FieldValue
	for _, gc := range b.Config().WriterGroups {
		if f.Group != "" && gc.Name != f.Group {
			continue
		}
		dg := b.group(gc.Name)
		if dg == nil {
			continue
		}
		for _, v := range dg.g.LastValues(f.Writer) {
			if f.Node != "" && v.Node != f.Node {
				continue
			}
			dv := v.Value
			if !v.HasValue {
				dv = ua.DataValue{Status: ua.StatusBadWaitingForInitialData}
				if v.Status.IsBad() {
					dv.Status = v.Status
				}
			}
			out = append(out, FieldValue{Group: gc.Name, Writer: v.Writer, Field: v.Field, Node: v.Node, Value: dv})
		}
	}
	return out
}

func (b *dashBackend) Stats() Stats {
	var st Stats
	for _, gc := range b.Config().WriterGroups {
		dg := b.group(gc.Name)
		if dg == nil {
			continue
		}
		s := dg.g.Stats()
		gs := GroupStats{Name: gc.Name, Endpoint: dg.endpoint, NotificationsIn: s.Notifications + s.Events,
			NotificationsOut: s.DataSetMessages - s.KeepAlives, Messages: s.Messages, Bytes: dg.meter.bytes.Load(),
			Errors: s.EncodeErrors + s.RefusedItems, Unacked: s.Unacked, Writers: len(s.Writers)}
		for _, w := range s.Writers {
			gs.Fields += w.Fields
		}
		st.Groups = append(st.Groups, gs)
	}
	hs := b.hub.Stats()
	st.Sinks = append(st.Sinks, SinkStats{Kind: "websocket", Bytes: hs.Bytes,
		Output: sink.OutputStats{Name: b.hub.Name(), Guarantee: sink.AtMostOnce, Enqueued: hs.Sent, Sent: hs.Sent, Connected: true}})
	return st
}

// startDashGroup makes and starts a writer group in the background (Start
// waits for the session, which may not connect yet).
func startDashGroup(t *testing.T, b *dashBackend, cfg config.WriterGroup, m *client.ManagedSession) *dashGroup {
	t.Helper()
	mt := &meter{Queue: b.hub}
	g, err := bridge.NewWriterGroup(cfg, bridge.Options{Session: m, Queues: []sink.Queue{mt}, PublisherID: "plant7-gw", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := g.Stop(sctx); err != nil {
			t.Errorf("Stop %s: %v", cfg.Name, err)
		}
	})
	dg := &dashGroup{g: g, endpoint: cfg.Endpoint, meter: mt}
	b.mu.Lock()
	b.groups[cfg.Name] = dg
	b.mu.Unlock()
	return dg
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
// and returns a chromedp context on a tab of it, and the console messages
// the page writes (errors and exceptions).
func startChromium(t *testing.T) (context.Context, func() []string) {
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
		chromedp.WindowSize(1600, 1040),
	}
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
				msgs = append(msgs, fmt.Sprintf("%s %s (%s:%d)", m.Type, m.Text, m.URL, m.Line))
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

// eval runs JavaScript in the page and returns its value.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// waitJS polls a JavaScript condition until it is true.
func waitJS(t *testing.T, ctx context.Context, timeout time.Duration, what, js string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !eval[bool](t, ctx, "!!("+js+")") {
		if time.Now().After(deadline) {
			shot(t, ctx, "dashboard-failed.png")
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shot saves a screenshot of the viewport under the artifacts directory.
func shot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return ""
	}
	p := filepath.Join(artifactsDir(t), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Errorf("screenshot: %v", err)
	}
	return p
}

// valueOf is the text of a field's value cell ("" when the row is not drawn).
func valueOf(key string) string {
	return fmt.Sprintf(`(document.querySelector('.vt-rows [data-key=%q] .v') || {}).textContent || ""`, key)
}

// TestDashboard: the page loads with the endpoints, groups, sinks and live
// values; values change as the stream brings them; only the rows in view are
// in the DOM; a variable ticked in the node browser and added through the UI
// becomes a field that streams; trusting the rejected certificate through
// the UI lets the secure endpoint connect and its group stream; the page
// logs no errors. The screenshot is kept (dashboard.png).
func TestDashboard(t *testing.T) {
	plant := startSimWith(t, server.SimConfig{DemoRate: 100 * time.Millisecond, Folders: 3, Variables: 100, Rates: []time.Duration{500 * time.Millisecond}, AlarmSources: -1},
		[]uasc.EndpointSecurity{{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}})
	press := startSimWith(t, server.SimConfig{DemoRate: 100 * time.Millisecond, Folders: -1, Variables: -1, AlarmSources: -1},
		[]uasc.EndpointSecurity{
			{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}, // discovery
			{PolicyURI: uasc.SecurityPolicyBasic256Sha256, Mode: ua.MessageSecurityModeSignAndEncrypt}})
	plantStore, err := pki.Open(t.TempDir(), pki.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	pressStore, err := pki.Open(t.TempDir(), pki.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	line1 := startSession(t, plant.URL(), &client.ManagedConfig{Client: client.Config{Store: plantStore}}, true)
	// The press refuses nothing, but the gateway does not trust it yet: the
	// session retries (quickly, for the test) until it is trusted.
	secure := startSession(t, press.URL(), &client.ManagedConfig{
		Client:  client.Config{Store: pressStore, SecurityPolicy: uasc.SecurityPolicyBasic256Sha256, SecurityMode: ua.MessageSecurityModeSignAndEncrypt},
		Backoff: client.Backoff{Max: 300 * time.Millisecond}}, false)

	interval := config.Duration(250 * time.Millisecond)
	demo := config.DataSetWriter{Name: "demo", Fields: []config.Field{
		{Name: "Counter", Node: server.NodeCounter}, {Name: "Random", Node: server.NodeRandom},
		{Name: "Step", Node: server.NodeStep}, {Name: "Setpoint", Node: server.NodeSetpoint},
		{Name: "Flapping", Node: server.NodeFlapping}, {Name: "Uncertain", Node: server.NodeUncertain},
		{Name: "Int32Matrix", Node: server.NodeInt32Matrix}}}
	load := config.DataSetWriter{Name: "load"}
	for f := range 3 {
		for v := range 100 {
			load.Fields = append(load.Fields, config.Field{Name: fmt.Sprintf("F%d.V%03d", f, v), Node: server.LoadNode(f, v)})
		}
	}
	cfg := &config.Config{
		Gateway: config.Gateway{PublisherID: "plant7-gw"},
		Endpoints: []config.Endpoint{{Name: "line1", URL: plant.URL(), SecurityPolicy: "None", SecurityMode: "None"},
			{Name: "press", URL: press.URL(), SecurityPolicy: "Basic256Sha256", SecurityMode: "SignAndEncrypt"}},
		WriterGroups: []config.WriterGroup{
			{Name: "line1", Endpoint: "line1", PublishingInterval: interval, Writers: []config.DataSetWriter{demo, load}},
			{Name: "press", Endpoint: "press", PublishingInterval: interval, Writers: []config.DataSetWriter{{Name: "hydraulics", Fields: []config.Field{
				{Name: "Pressure", Node: server.NodeSine}, {Name: "Strokes", Node: server.NodeCounter}}}}},
		},
	}
	tb := newTestBackend(t, cfg)
	tb.addSession("line1", plant.URL(), line1)
	tb.addSession("press", press.URL(), secure)
	tb.stores[""] = plantStore
	tb.stores["line1"] = plantStore
	tb.stores["press"] = pressStore
	hub := wssink.New(wssink.Options{Logger: quietLogger()})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hub.Close(ctx)
	})
	b := &dashBackend{testBackend: tb, hub: hub, groups: map[string]*dashGroup{}}
	startDashGroup(t, b, cfg.WriterGroups[0], line1)
	startDashGroup(t, b, cfg.WriterGroups[1], secure)
	_, ts := newTestServer(t, b, Options{Version: "1.4.0-test", Mounts: []Mount{{Pattern: "/ws", Handler: hub, Role: RoleRead, WebSocket: true}}})

	ctx, consoleErrors := startChromium(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	const wait = 20 * time.Second

	// The page shows the state: line1 connected, press failing on its
	// certificate, both groups, the WebSocket sink, the stream live.
	waitJS(t, ctx, wait, "line1 connected", `document.querySelector('tr[data-endpoint="line1"] .pill')?.textContent === "Connected"`)
	waitJS(t, ctx, wait, "press's certificate problem", `/trust/i.test(document.querySelector('tr[data-endpoint="press"] .problem')?.textContent)`)
	waitJS(t, ctx, wait, "both writer groups", `document.querySelectorAll('#wg-body tr[data-group]').length === 2`)
	waitJS(t, ctx, wait, "the websocket sink", `document.querySelector('#sink-body')?.textContent.includes("websocket")`)
	waitJS(t, ctx, wait, "the stream live", `document.getElementById("f-stream").textContent === "Live"`)
	if got := eval[string](t, ctx, `document.getElementById("f-publisher").textContent`); got != "plant7-gw" {
		t.Errorf("publisher shown %q", got)
	}

	// Live values change.
	counter := "line1/demo/Counter"
	waitJS(t, ctx, wait, "Counter's value", valueOf(counter)+` !== ""`)
	first := eval[string](t, ctx, valueOf(counter))
	waitJS(t, ctx, wait, "Counter's value to change", valueOf(counter)+fmt.Sprintf(` !== %q`, first))
	waitJS(t, ctx, wait, "a trend drawn", fmt.Sprintf(`document.querySelector('.vt-rows [data-key=%q] svg path')?.getAttribute("d")?.length > 10`, counter))
	waitJS(t, ctx, wait, "the Uncertain status", `document.querySelector('.vt-rows [data-key="line1/demo/Uncertain"] .pill.warn')`)
	// 309 fields, a few dozen rows in the DOM.
	waitJS(t, ctx, wait, "every field counted", `document.getElementById("val-count").textContent.startsWith("309 fields")`)
	if n := eval[int](t, ctx, `document.querySelectorAll(".vt-rows .vt-row").length`); n < 10 || n > 80 {
		t.Errorf("%d value rows in the DOM for 309 fields: want only those in view", n)
	}
	// Scrolling to the end draws the last rows.
	eval[bool](t, ctx, `(v => (v.scrollTop = v.scrollHeight, true))(document.querySelector("#val-table .vt-viewport"))`)
	waitJS(t, ctx, wait, "the last load field drawn", `document.querySelector('.vt-rows [data-key="press/hydraulics/Strokes"]')`)
	eval[bool](t, ctx, `(v => (v.scrollTop = 0, true))(document.querySelector("#val-table .vt-viewport"))`)

	// Add Demo.Sine through the node browser: expand Objects › Demo, tick
	// Sine, choose line1 › demo, Add.
	waitJS(t, ctx, wait, "the browser on line1", `document.getElementById("br-endpoint").value === "line1" && document.querySelector('#br-tree .node[data-node="ns=1;s=Demo"]')`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#br-tree .node[data-node="ns=1;s=Demo"] .tw`))); err != nil {
		t.Fatal(err)
	}
	sine := `#br-tree .node[data-node="` + server.NodeSine + `"]`
	waitJS(t, ctx, wait, "Demo's children", `document.querySelector('`+sine+` input')`)
	waitJS(t, ctx, wait, "Counter marked published", `document.querySelector('#br-tree .node[data-node="`+server.NodeCounter+`"] .tag')?.textContent === "published"`)
	eval[bool](t, ctx, `(s => (s.value = "line1/demo", s.dispatchEvent(new Event("change")), true))(document.getElementById("br-target"))`)
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(sine+` input`)),
		chromedp.WaitEnabled(chromedp.CSS(`#br-add-btn`)),
		chromedp.Click(chromedp.CSS(`#br-add-btn`)),
	); err != nil {
		t.Fatal(err)
	}
	added := "line1/demo/Sine"
	waitJS(t, ctx, wait, "the added field's value", valueOf(added)+` !== "" && `+valueOf(added)+` !== "—"`)
	v1 := eval[string](t, ctx, valueOf(added))
	waitJS(t, ctx, wait, "the added field to stream", valueOf(added)+fmt.Sprintf(` !== %q`, v1))
	if w := findGroupCfg(b.Config(), "line1").Writers[0]; w.Fields[len(w.Fields)-1].Node != server.NodeSine {
		t.Errorf("the configuration's demo writer ends with %+v", w.Fields[len(w.Fields)-1])
	}
	waitJS(t, ctx, wait, "Sine marked published", `document.querySelector('`+sine+` .tag')?.textContent === "published"`)

	// Trust the press's certificate: the rejected list shows it, Trust
	// asks for confirmation with the thumbprint, then the endpoint connects
	// and its group streams.
	tp := pki.ThumbprintHex(press.Certificate())
	waitJS(t, ctx, wait, "the rejected certificate", fmt.Sprintf(`document.querySelector('.cert.rejected[data-thumbprint=%q]')`, tp))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`.cert.rejected[data-thumbprint=%q] button[data-trust]`, tp)))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, wait, "the trust dialog", `document.getElementById("dlg-trust").open`)
	if info := eval[string](t, ctx, `document.getElementById("dlg-trust-info").textContent`); !strings.Contains(strings.ReplaceAll(info, ":", ""), tp) {
		t.Errorf("the trust dialog does not show the thumbprint %s: %q", tp, info)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#dlg-trust-ok`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, wait, "press connected", `document.querySelector('tr[data-endpoint="press"] .pill')?.textContent === "Connected"`)
	waitJS(t, ctx, wait, "press's security shown", `document.querySelector('tr[data-endpoint="press"]').textContent.includes("SignAndEncrypt")`)
	waitJS(t, ctx, wait, "the rejected list empty", `!document.querySelector('.cert.rejected')`)
	files, err := pressStore.List(pki.FolderTrusted)
	if err != nil || len(files) != 1 || files[0].Thumbprint != tp {
		t.Errorf("trusted after the click: %v %v", files, err)
	}
	eval[bool](t, ctx, `(s => (s.value = "press", s.dispatchEvent(new Event("change")), true))(document.getElementById("val-group"))`)
	pressure := "press/hydraulics/Pressure"
	waitJS(t, ctx, wait, "press values", valueOf(pressure)+` !== "" && `+valueOf(pressure)+` !== "—"`)
	p1 := eval[string](t, ctx, valueOf(pressure))
	waitJS(t, ctx, wait, "press values to stream", valueOf(pressure)+fmt.Sprintf(` !== %q`, p1))
	eval[bool](t, ctx, `(s => (s.value = "", s.dispatchEvent(new Event("change")), true))(document.getElementById("val-group"))`)

	// The figures: rates appear once two polls have passed.
	waitJS(t, ctx, wait, "throughput figures", `[...document.querySelectorAll('.kpi[data-kpi="notif"] b, .kpi[data-kpi="msgs"] b')].every(b => parseFloat(b.textContent) > 0)`)
	waitJS(t, ctx, wait, "trends on screen", `document.querySelectorAll('.vt-rows svg path[d^="M"]').length >= 5`)
	p := shot(t, ctx, "dashboard.png")
	t.Logf("screenshot: %s", p)

	for _, m := range consoleErrors() {
		t.Errorf("console: %s", m)
	}
}

// startSimWith starts a simulation server with generators on a loopback
// port.
func startSimWith(t *testing.T, sim server.SimConfig, policies []uasc.EndpointSecurity) *server.Server {
	t.Helper()
	srv, err := server.New(&server.Config{Address: "127.0.0.1:0", Policies: policies, Sim: sim, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// TestDashboardStatusNames: web/js/statuscodes.js holds the names of the
// standard status codes, as uastack/ua knows them (the stream's compact
// encoding sends the numbers only). UAGATE_UPDATE=1 rewrites it.
func TestDashboardStatusNames(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("// Generated from uastack/ua by TestDashboardStatusNames (UAGATE_UPDATE=1 rewrites it). Do not edit.\n")
	b.WriteString("// The symbolic names of the standard OPC UA status codes, by code (the upper 16 bits).\n")
	b.WriteString("export const STATUS_NAMES = {\n")
	for hi := range uint32(1 << 16) {
		s := ua.StatusCode(hi << 16)
		if n := s.Name(); n != "" {
			fmt.Fprintf(&b, "  0x%08X: %q,\n", uint32(s), n)
		}
	}
	b.WriteString("};\n")
	const file = "web/js/statuscodes.js"
	if os.Getenv("UAGATE_UPDATE") != "" {
		if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Fatalf("%s is not what uastack/ua gives: run UAGATE_UPDATE=1 go test -run TestDashboardStatusNames ./api/", file)
	}
	if !strings.Contains(string(got), `0x80320000: "BadWaitingForInitialData"`) {
		t.Fatal("BadWaitingForInitialData missing")
	}
}
