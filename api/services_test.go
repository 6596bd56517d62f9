package api

import (
	"strings"
	"testing"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/uastack/server"
)

// TestServicesAgainstSim runs Read, Write, Browse with continuation,
// TranslateBrowsePathsToNodeIds and Call through the API against the
// simulation server, on a real managed session. The server allows two nodes
// per Read and Write, so larger requests only work when split.
func TestServicesAgainstSim(t *testing.T) {
	srv := startSim(t, &server.Config{MaxNodesPerRead: 2, MaxNodesPerWrite: 2, MaxNodesPerMethodCall: 1})
	m := startSession(t, srv.URL(), nil, true)
	b := newTestBackend(t, nil)
	b.addSession("sim", srv.URL(), m)
	_, ts := newTestServer(t, b, Options{})
	ep := "/api/v1/endpoints/sim"
	// Write and Call are what the command rules allow: none yet.
	r0 := do(t, ts, "POST", ep+"/write", "", `{"nodes":[{"node":"ns=1;s=Demo.Static.Int32","type":"Int32","value":1}]}`)
	if p := r0.problem(t); p.Status != 403 || !strings.Contains(p.Detail, "commands.rules") {
		t.Fatalf("write without a command engine: %+v", p)
	}
	b.allowCommands(t, config.CommandRule{Callers: []string{"api:*"},
		Write: []config.CommandTarget{{Endpoint: "sim", Node: "ns=1;s=Demo.Static.*"}},
		Call:  []config.CommandMethod{{Endpoint: "sim", Object: "ns=1;s=Demo.Methods", Method: "ns=1;s=Demo.Methods.*"}}})

	// Status: connected, with the server's limits.
	r := do(t, ts, "GET", ep, "", nil)
	var st Endpoint
	r.decode(t, &st)
	if !st.Connected || st.State != "Connected" || st.OperationLimits == nil || st.OperationLimits.MaxNodesPerRead != 2 || st.SessionID == "" {
		t.Fatalf("status %+v", st)
	}

	// Write five values (three requests upstream), read them back (three).
	var nodes []string
	for _, ty := range []string{"Double", "Int32", "String", "Boolean", "UInt16"} {
		nodes = append(nodes, "ns=1;s=Demo.Static."+ty)
	}
	r = do(t, ts, "POST", ep+"/write", "", `{"nodes":[
		{"node":"ns=1;s=Demo.Static.Double","value":{"UaType":11,"Value":2.5}},
		{"node":"ns=1;s=Demo.Static.Int32","type":"Int32","value":-7},
		{"node":"ns=1;s=Demo.Static.String","type":"String","value":"hello"},
		{"node":"ns=1;s=Demo.Static.Boolean","value":{"UaType":1,"Value":true}},
		{"node":"ns=1;s=Demo.Static.UInt16","type":"UInt16","value":65535}]}`)
	var wr WriteResponse
	r.decode(t, &wr)
	if r.status != 200 || len(wr.Results) != 5 {
		t.Fatalf("write: %d %s", r.status, r.body)
	}
	for i, sc := range wr.Results {
		if sc.Code != 0 {
			t.Errorf("write %s: %+v", nodes[i], sc)
		}
	}
	body := `{"nodes":[`
	for i, n := range nodes {
		if i > 0 {
			body += ","
		}
		body += `{"node":"` + n + `"}`
	}
	r = do(t, ts, "POST", ep+"/read", "", body+`],"timestamps":"neither"}`)
	var rr ReadResponse
	r.decode(t, &rr)
	// Part 6 1.05 DataValues carry the Variant's members at their top level.
	want := []string{`{"UaType":11,"Value":2.5}`, `{"UaType":6,"Value":-7}`,
		`{"UaType":12,"Value":"hello"}`, `{"UaType":1,"Value":true}`, `{"UaType":5,"Value":65535}`}
	if len(rr.Results) != len(want) {
		t.Fatalf("read: %s", r.body)
	}
	for i := range want {
		if string(rr.Results[i]) != want[i] {
			t.Errorf("read %s: %s, want %s", nodes[i], rr.Results[i], want[i])
		}
	}
	// Another attribute, and a bad node id in the middle (nothing is sent).
	r = do(t, ts, "POST", ep+"/read", "", `{"nodes":[{"node":"ns=1;s=Demo.Counter","attribute":"DisplayName"}],"timestamps":"neither"}`)
	if r.decode(t, &rr); len(rr.Results) != 1 || !strings.Contains(string(rr.Results[0]), `"Text":"Counter"`) {
		t.Fatalf("read DisplayName: %s", r.body)
	}
	r = do(t, ts, "POST", ep+"/read", "", `{"nodes":[{"node":"i=2258"},{"node":"ns=1;x=1"}]}`)
	if p := r.problem(t); p.Type != "urn:uagate:problem:invalid-node-id" || p.Field != "/nodes/1/node" {
		t.Fatalf("bad node: %+v", p)
	}
	r = do(t, ts, "POST", ep+"/write", "", `{"nodes":[{"node":"ns=1;s=Demo.Static.Int32","type":"Int32","value":"seven"}]}`)
	if p := r.problem(t); p.Status != 400 || p.Field != "/nodes/0/value" {
		t.Fatalf("bad value: %+v", p)
	}

	// Browse Demo two references at a time, to the end.
	r = do(t, ts, "POST", ep+"/browse", "", `{"node":"ns=1;s=Demo","maxReferences":2}`)
	var br BrowseResponse
	r.decode(t, &br)
	if r.status != 200 || len(br.References) != 2 || br.ContinuationPoint == "" {
		t.Fatalf("browse: %d %s", r.status, r.body)
	}
	names := map[string]bool{}
	pages := 1
	for {
		for _, ref := range br.References {
			names[ref.BrowseName] = true
		}
		if br.ContinuationPoint == "" {
			break
		}
		r = do(t, ts, "POST", ep+"/browse/next", "", map[string]any{"continuationPoint": br.ContinuationPoint})
		br = BrowseResponse{}
		r.decode(t, &br)
		if r.status != 200 {
			t.Fatalf("browse next: %d %s", r.status, r.body)
		}
		pages++
	}
	if !names["1:Counter"] || !names["1:Setpoint"] || !names["1:Methods"] || pages < 3 {
		t.Fatalf("browsed %d pages: %v", pages, names)
	}
	r = do(t, ts, "POST", ep+"/browse/next", "", `{"continuationPoint":"AAAAAAAAAAAAAA"}`)
	if p := r.problem(t); p.Status != 400 || p.Field != "/continuationPoint" {
		t.Fatalf("foreign continuation point: %+v", p)
	}

	// Translate.
	r = do(t, ts, "POST", ep+"/translate", "", `{"paths":[{"path":"/1:Demo/1:Counter"},{"start":"ns=1;s=Demo","path":"/1:Nothing"}]}`)
	var tr TranslateResponse
	r.decode(t, &tr)
	if len(tr.Results) != 2 || len(tr.Results[0].Targets) != 1 || tr.Results[0].Targets[0].Node != "ns=1;s=Demo.Counter" ||
		tr.Results[1].StatusCode.Symbol != "BadNoMatch" {
		t.Fatalf("translate: %s", r.body)
	}

	// Call Add twice (the server takes one call per request).
	r = do(t, ts, "POST", ep+"/call", "", `{"calls":[
		{"object":"ns=1;s=Demo.Methods","method":"ns=1;s=Demo.Methods.Add","arguments":[{"UaType":11,"Value":2},{"UaType":11,"Value":3.5}]},
		{"object":"ns=1;s=Demo.Methods","method":"ns=1;s=Demo.Methods.Echo","arguments":[{"UaType":12,"Value":"hi"}]}]}`)
	var cr CallResponse
	r.decode(t, &cr)
	if len(cr.Results) != 2 || string(cr.Results[0].OutputArguments[0]) != `{"UaType":11,"Value":5.5}` ||
		string(cr.Results[1].OutputArguments[0]) != `{"UaType":12,"Value":"hi"}` {
		t.Fatalf("call: %s", r.body)
	}

	// What no rule lists is refused, and nothing is written; only Value
	// attributes; every operation is in the command log.
	r = do(t, ts, "POST", ep+"/write", "", `{"nodes":[{"node":"ns=1;s=Demo.Setpoint","type":"Double","value":5}]}`)
	if p := r.problem(t); p.Status != 403 || p.Field != "/nodes/0/node" || !strings.Contains(p.Detail, "api:anonymous") {
		t.Fatalf("write of a node no rule lists: %+v", p)
	}
	r = do(t, ts, "POST", ep+"/write", "", `{"nodes":[{"node":"ns=1;s=Demo.Static.Int32","attribute":"DisplayName","value":{"UaType":21,"Value":{"Text":"x"}}}]}`)
	if p := r.problem(t); p.Status != 403 || p.Field != "/nodes/0/attribute" {
		t.Fatalf("write of another attribute: %+v", p)
	}
	r = do(t, ts, "POST", ep+"/call", "", `{"calls":[{"object":"i=2253","method":"i=11492","arguments":[{"UaType":7,"Value":1}]}]}`)
	if p := r.problem(t); p.Status != 403 || p.Field != "/calls/0/method" {
		t.Fatalf("call of a method no rule lists: %+v", p)
	}
	var log CommandLog
	do(t, ts, "GET", "/api/v1/commands/log?limit=50", "", nil).decode(t, &log)
	var writes, denied, calls int
	for _, e := range log.Entries {
		switch {
		case e.Error != "":
			denied++
		case e.Op == "write" && e.Caller == "api:anonymous" && len(e.Value) > 0 && e.Status.Symbol == "Good":
			writes++
		case e.Op == "call":
			calls++
		}
	}
	if writes != 5 || denied != 2 || calls != 2 {
		t.Fatalf("command log: %d writes, %d denied, %d calls: %+v", writes, denied, calls, log.Entries)
	}
	var cv CommandsView
	do(t, ts, "GET", "/api/v1/commands", "", nil).decode(t, &cv)
	if len(cv.Rules) != 1 || cv.Rules[0].Callers[0] != "api:*" || len(cv.Stats) == 0 {
		t.Fatalf("commands: %+v", cv)
	}

	// Unknown endpoint.
	r = do(t, ts, "POST", "/api/v1/endpoints/nope/read", "", `{"nodes":[{"node":"i=2258"}]}`)
	if p := r.problem(t); p.Status != 404 || p.Detail != `endpoint "nope" does not exist` {
		t.Fatalf("unknown endpoint: %+v", p)
	}
}

// TestBrowseContinuationPointsBounded: the server keeps few continuation
// points per session, and every API caller shares the session. A read key
// that browses again and again without continuing keeps at most
// maxCPPerCaller of them (its oldest are released upstream), so another
// caller can still browse and continue; a caller cannot continue another's
// browse.
func TestBrowseContinuationPointsBounded(t *testing.T) {
	srv := startSim(t, &server.Config{MaxBrowseContinuationPoints: 6})
	m := startSession(t, srv.URL(), nil, true)
	b := newTestBackend(t, nil)
	b.addSession("sim", srv.URL(), m)
	s, ts := newTestServer(t, b, Options{Keys: []Key{{Name: "ops", Token: adminToken, Role: RoleAdmin}, {Name: "viewer", Token: readToken, Role: RoleRead}}})
	ep := "/api/v1/endpoints/sim"
	browse := func(token string) BrowseResponse {
		t.Helper()
		var br BrowseResponse
		r := do(t, ts, "POST", ep+"/browse", token, `{"node":"ns=1;s=Demo","maxReferences":1}`)
		r.decode(t, &br)
		if r.status != 200 || br.StatusCode.Code != 0 || br.ContinuationPoint == "" {
			t.Fatalf("browse: %d %s", r.status, r.body)
		}
		return br
	}
	var first BrowseResponse
	for i := range 30 {
		br := browse(readToken)
		if i == 0 {
			first = br
		}
	}
	if n := s.cps.held("sim"); n != maxCPPerCaller {
		t.Errorf("%d continuation points held after 30 browses of one caller, want %d", n, maxCPPerCaller)
	}
	// The first one was released to make room.
	r := do(t, ts, "POST", ep+"/browse/next", readToken, map[string]any{"continuationPoint": first.ContinuationPoint})
	if p := r.problem(t); p.Status != 400 {
		t.Errorf("a released continuation point: %+v", p)
	}
	// Another caller browses and continues; it cannot use the viewer's.
	own := browse(adminToken)
	viewers := browse(readToken)
	r = do(t, ts, "POST", ep+"/browse/next", adminToken, map[string]any{"continuationPoint": viewers.ContinuationPoint})
	if p := r.problem(t); p.Status != 400 {
		t.Errorf("another caller's continuation point: %+v", p)
	}
	r = do(t, ts, "POST", ep+"/browse/next", adminToken, map[string]any{"continuationPoint": own.ContinuationPoint})
	var next BrowseResponse
	r.decode(t, &next)
	if r.status != 200 || next.StatusCode.Code != 0 || len(next.References) != 1 {
		t.Errorf("continuing: %d %s", r.status, r.body)
	}
	// Released explicitly.
	r = do(t, ts, "POST", ep+"/browse/next", readToken, map[string]any{"continuationPoint": viewers.ContinuationPoint, "release": true})
	if r.status != 200 {
		t.Errorf("release: %d %s", r.status, r.body)
	}
}
