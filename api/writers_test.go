package api

import (
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
)

// TestWriterGroupLifecycle adds, changes and removes groups, writers and
// fields through the API, checks each answer against the configuration the
// backend holds, and that a restart (a backend reading the persisted file)
// keeps the changes.
func TestWriterGroupLifecycle(t *testing.T) {
	b := newTestBackend(t, baseConfig())
	_, ts := newTestServer(t, b, Options{})

	// Add a group with one writer and two fields.
	r := do(t, ts, "POST", "/api/v1/writer-groups", "", `{"name":"line2","endpoint":"plc1","publishingInterval":"500ms",
		"messageShape":"batched","fieldEncoding":"dataValue","fieldContent":["sourceTimestamp","statusCode"],
		"nodes":{"samplingInterval":100,"deadband":{"type":"absolute","value":0.5}},
		"writers":[{"name":"pumps","fields":[{"name":"flow","node":"ns=1;s=Demo.Sine"},{"node":"nsu=urn:x;s=Pressure","queueSize":5}]}]}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if loc := r.header.Get("Location"); loc != "/api/v1/writer-groups/line2" {
		t.Errorf("Location %q", loc)
	}
	var g WriterGroup
	r.decode(t, &g)
	if g.Name != "line2" || *g.PublishingInterval != Duration(500*time.Millisecond) || len(g.Writers) != 1 || len(g.Writers[0].Fields) != 2 {
		t.Fatalf("created %+v", g)
	}
	cg := b.Config().WriterGroups[1]
	if cg.PublishingInterval.D() != 500*time.Millisecond || cg.MessageShape != "batched" ||
		!slices.Equal(cg.FieldContent, []string{"sourceTimestamp", "statusCode"}) ||
		cg.Nodes.SamplingInterval.D() != 100*time.Millisecond || cg.Nodes.Deadband != (config.Deadband{Type: "absolute", Value: 0.5}) ||
		cg.Writers[0].Fields[1].Node != "nsu=urn:x;s=Pressure" || cg.Writers[0].Fields[1].QueueSize != 5 {
		t.Fatalf("configured %+v", cg)
	}
	// The JSON reads back what was written.
	r = do(t, ts, "GET", "/api/v1/writer-groups/line2", "", nil)
	var back WriterGroup
	r.decode(t, &back)
	if !reflect.DeepEqual(back, g) {
		t.Errorf("GET differs from POST's answer:\n%+v\n%+v", back, g)
	}

	// Pages of one.
	r = do(t, ts, "GET", "/api/v1/writer-groups?limit=1", "", nil)
	var p1 Page[WriterGroup]
	r.decode(t, &p1)
	if len(p1.Items) != 1 || p1.Items[0].Name != "line1" || p1.NextCursor == "" {
		t.Fatalf("page 1 %+v", p1)
	}
	r = do(t, ts, "GET", "/api/v1/writer-groups?limit=1&cursor="+url.QueryEscape(p1.NextCursor), "", nil)
	var p2 Page[WriterGroup]
	r.decode(t, &p2)
	if len(p2.Items) != 1 || p2.Items[0].Name != "line2" || p2.NextCursor != "" {
		t.Fatalf("page 2 %+v", p2)
	}

	// A writer: add, change, read, remove.
	r = do(t, ts, "POST", "/api/v1/writer-groups/line2/writers", "", `{"name":"valves","id":7,"fields":[{"node":"i=2258"}]}`)
	if r.status != 201 {
		t.Fatalf("add writer: %d %s", r.status, r.body)
	}
	r = do(t, ts, "POST", "/api/v1/writer-groups/line2/writers", "", `{"name":"valves2","id":7,"fields":[]}`)
	if p := r.problem(t); p.Status != 409 || p.Field != "/id" {
		t.Fatalf("duplicate id: %+v", p)
	}
	r = do(t, ts, "PUT", "/api/v1/writer-groups/line2/writers/valves", "", `{"fields":[{"name":"t","node":"i=2258"},{"name":"u","node":"i=2259"}]}`)
	if r.status != 200 {
		t.Fatalf("put writer: %d %s", r.status, r.body)
	}
	if w := b.Config().WriterGroups[1].Writers[1]; w.Name != "valves" || w.ID != 0 || len(w.Fields) != 2 {
		t.Fatalf("put writer: %+v", w)
	}

	// Fields: add two at once, change one, remove one by name and one by node.
	r = do(t, ts, "POST", "/api/v1/writer-groups/line1/writers/motors/fields", "", `{"fields":[{"name":"temp","node":"i=2258"},{"node":"ns=1;s=Demo.Step"}]}`)
	if r.status != 200 {
		t.Fatalf("add fields: %d %s", r.status, r.body)
	}
	r = do(t, ts, "GET", "/api/v1/writer-groups/line1/writers/motors/fields", "", nil)
	var fp Page[Field]
	r.decode(t, &fp)
	if len(fp.Items) != 3 || fp.Items[2].Node != "ns=1;s=Demo.Step" {
		t.Fatalf("fields %+v", fp)
	}
	r = do(t, ts, "PUT", "/api/v1/writer-groups/line1/writers/motors/fields/temp", "", `{"name":"temp","node":"i=2258","samplingInterval":"250ms"}`)
	if r.status != 200 {
		t.Fatalf("put field: %d %s", r.status, r.body)
	}
	if f := b.Config().WriterGroups[0].Writers[0].Fields[1]; f.SamplingInterval == nil || f.SamplingInterval.D() != 250*time.Millisecond {
		t.Fatalf("put field: %+v", f)
	}
	if r = do(t, ts, "DELETE", "/api/v1/writer-groups/line1/writers/motors/fields/temp", "", nil); r.status != 204 {
		t.Fatalf("delete field: %d %s", r.status, r.body)
	}
	if r = do(t, ts, "DELETE", "/api/v1/writer-groups/line1/writers/motors/fields/"+url.PathEscape("ns=1;s=Demo.Step"), "", nil); r.status != 204 {
		t.Fatalf("delete field by node: %d %s", r.status, r.body)
	}
	if fs := b.Config().WriterGroups[0].Writers[0].Fields; len(fs) != 1 || fs[0].Name != "speed" {
		t.Fatalf("fields left %+v", fs)
	}
	if r = do(t, ts, "DELETE", "/api/v1/writer-groups/line2/writers/pumps", "", nil); r.status != 204 {
		t.Fatalf("delete writer: %d %s", r.status, r.body)
	}

	// The restart keeps it all.
	want := b.Config().Clone()
	want.ApplyDefaults() // as loading a file does
	after := b.reopen(t)
	if ch := config.Diff(want, after.Config()); !ch.Empty() {
		t.Fatalf("after a restart: %s\n%+v\nwant\n%+v", ch, after.Config(), want)
	}
	_, ts2 := newTestServer(t, after, Options{})
	r = do(t, ts2, "GET", "/api/v1/writer-groups/line2/writers", "", nil)
	var wp Page[DataSetWriter]
	r.decode(t, &wp)
	if len(wp.Items) != 1 || wp.Items[0].Name != "valves" {
		t.Fatalf("writers after restart %+v", wp)
	}

	// Remove a group; the other is untouched.
	line1 := cloneConfig(b.Config()).WriterGroups[0]
	if r = do(t, ts, "DELETE", "/api/v1/writer-groups/line2", "", nil); r.status != 204 {
		t.Fatalf("delete group: %d %s", r.status, r.body)
	}
	if gs := b.Config().WriterGroups; len(gs) != 1 || !reflect.DeepEqual(gs[0], line1) {
		t.Fatalf("groups left %+v", gs)
	}
}

// TestEndpointConfig adds, changes and removes an endpoint; its password is
// accepted and never returned, and kept by a PUT without one that leaves
// the URL and security as they were (TestEndpointPasswordStaysBound).
func TestEndpointConfig(t *testing.T) {
	b := newTestBackend(t, baseConfig())
	_, ts := newTestServer(t, b, Options{})
	r := do(t, ts, "POST", "/api/v1/endpoints", "", `{"name":"plc2","url":"opc.tcp://10.0.0.2:4840","securityMode":"SignAndEncrypt",
		"identity":{"type":"username","username":"op","password":"s3cret-pass"}}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), "s3cret-pass") {
		t.Fatalf("the password came back: %s", r.body)
	}
	var e Endpoint
	r.decode(t, &e)
	if e.Config == nil || !e.Config.Identity.HasPassword || e.State != "Disconnected" {
		t.Fatalf("endpoint %+v", e)
	}
	r = do(t, ts, "PUT", "/api/v1/endpoints/plc2", "", `{"url":"opc.tcp://10.0.0.2:4840","identity":{"type":"username","username":"op"},"requestTimeout":"5s"}`)
	if r.status != 200 {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	ep := b.Config().Endpoints[1]
	if ep.RequestTimeout.D() != 5*time.Second || ep.Identity.Password.Value != "s3cret-pass" {
		t.Fatalf("after PUT %+v", ep)
	}
	r = do(t, ts, "POST", "/api/v1/endpoints", "", `{"name":"plc2","url":"opc.tcp://x:1"}`)
	if p := r.problem(t); p.Status != 409 {
		t.Fatalf("duplicate: %+v", p)
	}
	r = do(t, ts, "POST", "/api/v1/endpoints", "", `{"name":"plc3","url":"http://x:1"}`)
	if p := r.problem(t); p.Status != 400 || p.Field != "/url" {
		t.Fatalf("bad url: %+v", p)
	}
	if r = do(t, ts, "DELETE", "/api/v1/endpoints/plc2", "", nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if len(b.Config().Endpoints) != 1 {
		t.Fatal("not deleted")
	}
}
