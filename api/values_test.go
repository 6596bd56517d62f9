package api

import (
	"net/url"
	"strings"
	"testing"

	"github.com/uagate/gateway/uastack/ua"
)

func TestLastValuesAndMetadata(t *testing.T) {
	cfg := baseConfig()
	cfg.WriterGroups[0].Writers = append(cfg.WriterGroups[0].Writers, cfg.WriterGroups[0].Writers[0])
	cfg.WriterGroups[0].Writers[1].Name = "pumps"
	b := newTestBackend(t, cfg)
	ts0 := ua.DateTime(133000000000000000)
	b.values = []FieldValue{
		{Group: "line1", Writer: "motors", Field: "speed", Node: "ns=1;s=Demo.Counter", Value: ua.DataValue{Value: ua.NewDoubleVariant(1.5), SourceTimestamp: ts0}},
		{Group: "line1", Writer: "pumps", Field: "speed", Node: "ns=1;s=Demo.Counter", Value: ua.DataValue{Value: ua.NewDoubleVariant(1.5), SourceTimestamp: ts0}},
		{Group: "line1", Writer: "pumps", Field: "state", Node: "ns=1;s=Demo.Step", Value: ua.DataValue{Value: ua.NewStringVariant("on"), Status: ua.StatusCode(0x408F0000)}},
	}
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
