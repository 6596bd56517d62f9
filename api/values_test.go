package api

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

func TestLastValuesAndMetadata(t *testing.T) {
	cfg := baseConfig()
	cfg.WriterGroups[0].Writers = append(cfg.WriterGroups[0].Writers, cfg.WriterGroups[0].Writers[0])
	cfg.WriterGroups[0].Writers[1].Name = "pumps"
	b := newTestBackend(t, cfg)
	ts0 := ua.DateTime(133000000000000000)
	b.setValues("line1", fixedValues{
		{Writer: "motors", Field: "speed", Node: "ns=1;s=Demo.Counter", HasValue: true, Value: ua.DataValue{Value: ua.NewDoubleVariant(1.5), SourceTimestamp: ts0}},
		{Writer: "pumps", Field: "speed", Node: "ns=1;s=Demo.Counter", HasValue: true, Value: ua.DataValue{Value: ua.NewDoubleVariant(1.5), SourceTimestamp: ts0}},
		{Writer: "pumps", Field: "state", Node: "ns=1;s=Demo.Step", HasValue: true, Value: ua.DataValue{Value: ua.NewStringVariant("on"), Status: ua.StatusCode(0x408F0000)}},
	})
	b.meta["line1/motors"] = &ua.DataSetMetaDataType{Name: "motors", Fields: []ua.FieldMetaData{{Name: "speed", BuiltInType: uint8(ua.TypeDouble), ValueRank: -1}}}
	_, ts := newTestServer(t, b, Options{})

	get := func(path string) Page[LastValue] {
		t.Helper()
		r := do(t, ts, "GET", path, "", nil)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
		var p Page[LastValue]
		r.decode(t, &p)
		return p
	}
	if p := get("/api/v1/values"); len(p.Items) != 3 || string(p.Items[0].Value) != `{"UaType":11,"Value":1.5,"SourceTimestamp":"2022-06-18T04:26:40Z"}` {
		t.Fatalf("all: %+v", p)
	}
	if p := get("/api/v1/writer-groups/line1/writers/pumps/values"); len(p.Items) != 2 || p.Items[1].Field != "state" ||
		!strings.Contains(string(p.Items[1].Value), `"Status":{"Code":1083113472}`) {
		t.Fatalf("by writer: %+v %s", p, p.Items[1].Value)
	}
	if p := get("/api/v1/values?node=" + url.QueryEscape("ns=1;s=Demo.Counter")); len(p.Items) != 2 {
		t.Fatalf("by node: %+v", p)
	}
	if p := get("/api/v1/writer-groups/line1/values?limit=2"); len(p.Items) != 2 || p.NextCursor == "" {
		t.Fatalf("by group, paged: %+v", p)
	}
	if p := get("/api/v1/values?group=line1&writer=motors&encoding=verbose"); len(p.Items) != 1 || !strings.Contains(string(p.Items[0].Value), `"UaType":11`) {
		t.Fatalf("verbose: %+v", p)
	}
	r := do(t, ts, "GET", "/api/v1/values?node=ns%3Dz", "", nil)
	if p := r.problem(t); p.Type != "urn:uagate:problem:invalid-node-id" || p.Field != "node" {
		t.Fatalf("bad node: %+v", p)
	}
	r = do(t, ts, "GET", "/api/v1/values?writer=motors", "", nil)
	if p := r.problem(t); p.Status != 400 || p.Field != "writer" {
		t.Fatalf("writer without group: %+v", p)
	}
	r = do(t, ts, "GET", "/api/v1/writer-groups/line9/values", "", nil)
	if p := r.problem(t); p.Status != 404 {
		t.Fatalf("unknown group: %+v", p)
	}

	r = do(t, ts, "GET", "/api/v1/writer-groups/line1/writers/motors/metadata", "", nil)
	if r.status != 200 || !strings.Contains(string(r.body), `"Name":"motors"`) || !strings.Contains(string(r.body), `"Fields":[{"Name":"speed"`) {
		t.Fatalf("metadata: %d %s", r.status, r.body)
	}
	r = do(t, ts, "GET", "/api/v1/writer-groups/line1/writers/pumps/metadata", "", nil)
	if p := r.problem(t); p.Status != 503 || p.Detail != "the metadata of line1/pumps is not known yet" {
		t.Fatalf("unknown metadata: %+v", p)
	}
}

// countingValues counts the values a group's cache was asked for.
type countingValues struct {
	valueSource
	asked, read int
}

func (c *countingValues) LastValues(f bridge.ValueFilter, from, limit int) ([]bridge.FieldValue, int) {
	vs, next := c.valueSource.LastValues(f, from, limit)
	c.asked += max(limit, 0)
	c.read += len(vs)
	return vs, next
}

// getPages reads every page of path and returns the values, the cursors
// and how many pages there were.
func getPages(t *testing.T, ts *httptest.Server, path string) (vals []LastValue, pages int) {
	t.Helper()
	cursor := ""
	for {
		p := path
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		r := do(t, ts, "GET", p, "", nil)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", p, r.status, r.body)
		}
		var page Page[LastValue]
		r.decode(t, &page)
		vals, pages = append(vals, page.Items...), pages+1
		if page.NextCursor == "" {
			return vals, pages
		}
		if len(page.Items) == 0 || pages > 10000 {
			t.Fatalf("%s: page %d of %d values with a cursor", p, pages, len(page.Items))
		}
		cursor = page.NextCursor
	}
}

func valueKeys(vals []LastValue) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = v.Group + "/" + v.Writer + "/" + v.Field
	}
	return out
}

// TestValuesPages: pages run across writer groups in configuration order
// and skip a group that does not run here; a page ending where a group ends
// has a cursor only when a later group has a match; each group is asked for
// no more values than the page still needs.
func TestValuesPages(t *testing.T) {
	cfg := baseConfig()
	for _, name := range []string{"line2", "line3", "line4"} {
		g := cfg.WriterGroups[0]
		g.Name = name
		cfg.WriterGroups = append(cfg.WriterGroups, g)
	}
	b := newTestBackend(t, cfg)
	mk := func(n int, node func(i int) string) *countingValues {
		vs := make(fixedValues, n)
		for i := range vs {
			vs[i] = bridge.FieldValue{Writer: "motors", Field: fmt.Sprintf("f%04d", i), Node: node(i), HasValue: true,
				Value: ua.DataValue{Value: ua.NewInt32Variant(int32(i))}}
		}
		return &countingValues{valueSource: vs}
	}
	even := func(i int) string { return fmt.Sprintf("ns=1;s=N%d", i%2) }
	l1, l2, l4 := mk(3, even), mk(2000, even), mk(1, func(int) string { return "ns=1;s=Other" })
	b.setValues("line1", l1)
	b.setValues("line2", l2)
	b.setValues("line4", l4) // line3 does not run here
	_, ts := newTestServer(t, b, Options{})

	vals, pages := getPages(t, ts, "/api/v1/values?limit=2")
	if len(vals) != 2004 || pages != 1002 {
		t.Fatalf("%d values in %d pages", len(vals), pages)
	}
	keys := valueKeys(vals)
	if keys[0] != "line1/motors/f0000" || keys[2] != "line1/motors/f0002" || keys[3] != "line2/motors/f0000" ||
		keys[2003] != "line4/motors/f0000" || !slices.IsSorted(keys[3:2003]) {
		t.Fatalf("order: %v … %v", keys[:5], keys[2000:])
	}
	// Node N1: f0001 of line1, every odd field of line2; a page of 1000
	// ends in line2, the last ends at its end with no match after it.
	page := func(path string) Page[LastValue] {
		t.Helper()
		r := do(t, ts, "GET", path, "", nil)
		var p Page[LastValue]
		r.decode(t, &p)
		return p
	}
	l2.asked, l2.read = 0, 0
	p := page("/api/v1/values?node=ns%3D1%3Bs%3DN1&limit=1000")
	if len(p.Items) != 1000 || p.NextCursor == "" || p.Items[999].Field != "f1997" {
		t.Fatalf("first page by node: %d items, cursor %q, last %+v", len(p.Items), p.NextCursor, p.Items[len(p.Items)-1])
	}
	if l2.read != 999 || l2.asked != 999 {
		t.Fatalf("line2 asked for %d values and read %d for a page of 1000", l2.asked, l2.read)
	}
	if p = page("/api/v1/values?node=ns%3D1%3Bs%3DN1&limit=1000&cursor=" + p.NextCursor); len(p.Items) != 1 || p.Items[0].Field != "f1999" || p.NextCursor != "" {
		t.Fatalf("second page by node: %+v", p)
	}
	// A page that ends with line1 gets a cursor, since line2 has more.
	if p = page("/api/v1/values?limit=3"); len(p.Items) != 3 || p.NextCursor == "" {
		t.Fatalf("page ending with line1: %+v", p)
	}
	// The group of a cursor removed: the page goes on with the group now in
	// its place.
	p = page("/api/v1/values?limit=1")
	if err := b.ApplyConfig(t.Context(), func(c *config.Config) error { c.WriterGroups = c.WriterGroups[1:]; return nil }); err != nil {
		t.Fatal(err)
	}
	if p = page("/api/v1/values?limit=1&cursor=" + p.NextCursor); len(p.Items) != 1 || p.Items[0].Group != "line2" || p.Items[0].Field != "f0000" {
		t.Fatalf("after the cursor's group was removed: %+v", p)
	}
}

// TestValuesCursorHostile: a cursor that is not one the API handed out is
// a 400 naming the cursor, whatever it holds; so is a bad limit.
func TestValuesCursorHostile(t *testing.T) {
	b := newTestBackend(t, baseConfig())
	b.setValues("line1", fixedValues{{Writer: "motors", Field: "speed", Node: "ns=1;s=Demo.Counter"}})
	_, ts := newTestServer(t, b, Options{})
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, c := range []string{
		enc(`{"i":9223372036854775807}`),
		enc(`{"k":"line1","i":9223372036854775807}`),
		enc(`{"k":"line1","i":92233720368547758070}`),
		enc(`{"k":"line1","i":2147483648}`),
		enc(`{"k":"line1","i":-1}`),
		enc(`{"k":"line1","i":0,"g":-1}`),
		enc(`{"k":"line1","i":0,"g":9223372036854775807}`),
		enc(`{"k":"line1","i":1.5}`),
		enc(`{"k":"","i":0}`),
		enc(`{"k":7}`),
		enc(`[]`),
		enc(`not json`),
		"!!not-base64!!",
		strings.Repeat("A", 4000),
	} {
		for _, path := range []string{"/api/v1/values", "/api/v1/writer-groups/line1/values", "/api/v1/writer-groups/line1/writers/motors/values"} {
			r := do(t, ts, "GET", path+"?cursor="+url.QueryEscape(c), "", nil)
			if p := r.problem(t); p.Status != 400 || p.Field != "cursor" {
				t.Errorf("%s cursor %q: %d %+v", path, c, r.status, p)
			}
		}
	}
	for _, l := range []string{"0", "-1", "1001", "9223372036854775808", "x"} {
		r := do(t, ts, "GET", "/api/v1/values?limit="+l, "", nil)
		if p := r.problem(t); p.Status != 400 || p.Field != "limit" {
			t.Errorf("limit %s: %+v", l, p)
		}
	}
	// The other lists' cursors: a position no list has is a 400 problem
	// (TestBadCursors tries every paged route).
	r := do(t, ts, "GET", "/api/v1/writer-groups?cursor="+enc(`{"k":"x","i":9223372036854775807}`), "", nil)
	if p := r.problem(t); p.Status != 400 || p.Field != "cursor" {
		t.Errorf("writer groups with a cursor past any list: %d %s", r.status, r.body)
	}
	// A good cursor in range is fine, also one past a group's last slot.
	r = do(t, ts, "GET", "/api/v1/values?cursor="+enc(`{"k":"line1","i":2147483647,"g":0}`), "", nil)
	if r.status != 200 {
		t.Errorf("cursor past the group's end: %d %s", r.status, r.body)
	}
}

// discardQueue takes every message and settles it.
type discardQueue struct{}

func (discardQueue) Name() string                { return "discard" }
func (discardQueue) Guarantee() config.Guarantee { return config.AtMostOnce }
func (discardQueue) Enqueue(m *sink.Message)     { m.Done(true) }

// TestValuesFromWriterGroups pages the last values of real writer groups
// subscribed to the simulation server: every field once, in order, by node
// across groups.
func TestValuesFromWriterGroups(t *testing.T) {
	srv := startSim(t, &server.Config{Sim: server.SimConfig{Folders: 2, Variables: 150, Rates: []time.Duration{100 * time.Millisecond}}})
	m := startSession(t, srv.URL(), nil, true)
	fields := func(f, from, to int) []config.Field {
		var out []config.Field
		for v := from; v < to; v++ {
			out = append(out, config.Field{Name: fmt.Sprintf("V%05d", v), Node: server.LoadNode(f, v)})
		}
		return out
	}
	cfg := &config.Config{
		Endpoints: []config.Endpoint{{Name: "sim", URL: srv.URL()}},
		WriterGroups: []config.WriterGroup{
			{Name: "g1", Endpoint: "sim", PublishingInterval: config.Duration(100 * time.Millisecond), Writers: []config.DataSetWriter{
				{Name: "F000", Fields: fields(0, 0, 150)}, {Name: "F001", Fields: fields(1, 0, 50)}}},
			{Name: "g2", Endpoint: "sim", PublishingInterval: config.Duration(100 * time.Millisecond), Writers: []config.DataSetWriter{
				{Name: "F001", Fields: fields(1, 50, 150)}, {Name: "again", Fields: fields(0, 7, 8)}}},
		},
	}
	b := newTestBackend(t, cfg)
	for _, gc := range cfg.WriterGroups {
		gc.ApplyDefaults() // as loading a file does
		g, err := bridge.NewWriterGroup(gc, bridge.Options{Session: m, Queues: []sink.Queue{discardQueue{}}, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Stop(context.Background()) })
		if err := g.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		b.setValues(gc.Name, g)
	}
	_, ts := newTestServer(t, b, Options{})
	testutil.WaitFor(t, 20*time.Second, "a value of every field", func() bool {
		vals, _ := getPages(t, ts, "/api/v1/values?limit=1000")
		for _, v := range vals {
			if strings.Contains(string(v.Value), "Status") {
				return false
			}
		}
		return len(vals) == 301
	})
	vals, pages := getPages(t, ts, "/api/v1/values?limit=100")
	keys := valueKeys(vals)
	if pages != 4 || len(keys) != 301 || keys[0] != "g1/F000/V00000" || keys[150] != "g1/F001/V00000" ||
		keys[200] != "g2/F001/V00050" || keys[300] != "g2/again/V00007" {
		t.Fatalf("%d pages, %d values: %v … %v", pages, len(keys), keys[:3], keys[len(keys)-3:])
	}
	vals, pages = getPages(t, ts, "/api/v1/values?limit=1&node="+url.QueryEscape(server.LoadNode(0, 7)))
	if keys := valueKeys(vals); pages != 2 || !slices.Equal(keys, []string{"g1/F000/V00007", "g2/again/V00007"}) {
		t.Fatalf("by node: %d pages, %v", pages, keys)
	}
	vals, _ = getPages(t, ts, "/api/v1/writer-groups/g2/writers/F001/values?limit=30")
	if len(vals) != 100 || vals[99].Field != "V00149" {
		t.Fatalf("by writer: %d values", len(vals))
	}
}
