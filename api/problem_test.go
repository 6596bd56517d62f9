package api

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/uagate/gateway/bridge/config"
)

const (
	adminToken = "admin-token-0123456789abcdef"
	readToken  = "read-token-0123456789abcdefgh"
)

func baseConfig() *config.Config {
	return &config.Config{
		Endpoints: []config.Endpoint{{Name: "plc1", URL: "opc.tcp://127.0.0.1:4840"}},
		WriterGroups: []config.WriterGroup{{Name: "line1", Endpoint: "plc1", Writers: []config.DataSetWriter{
			{Name: "motors", Fields: []config.Field{{Name: "speed", Node: "ns=1;s=Demo.Counter"}}},
		}}},
	}
}

// TestBadInput sends each kind of bad request and checks the exact problem
// it gets, and that nothing was changed.
func TestBadInput(t *testing.T) {
	b := newTestBackend(t, baseConfig())
	_, ts := newTestServer(t, b, Options{Keys: []Key{{Name: "ops", Token: adminToken, Role: RoleAdmin},
		{Name: "viewer", Token: readToken, Role: RoleRead}}, MaxBodyBytes: 256})
	groups := "/api/v1/writer-groups"
	big := `{"name":"g","endpoint":"plc1","writers":[],"x":"` + strings.Repeat("a", 300) + `"}`
	cases := []struct {
		name                string
		method, path, token string
		body                any
		ctype               string
		want                Problem
	}{
		{"malformed JSON", "POST", groups, adminToken, `{"name":"g",`, "",
			Problem{Type: "urn:uagate:problem:malformed-json", Title: "Malformed JSON", Status: 400, Detail: "malformed JSON: unexpected end of input"}},
		{"not an object", "POST", groups, adminToken, `{"name": tru}`, "",
			Problem{Type: "urn:uagate:problem:malformed-json", Title: "Malformed JSON", Status: 400}},
		{"trailing data", "POST", groups, adminToken, `{"name":"g","endpoint":"plc1","writers":[]} {}`, "",
			Problem{Type: "urn:uagate:problem:malformed-json", Title: "Malformed JSON", Status: 400, Detail: "unexpected data after the JSON value"}},
		{"empty body", "POST", groups, adminToken, ``, "",
			Problem{Type: "urn:uagate:problem:malformed-json", Title: "Malformed JSON", Status: 400, Detail: "the request body is empty; a JSON object is expected"}},
		{"unknown field", "POST", groups, adminToken, `{"name":"g","endpoint":"plc1","writers":[],"colour":"red"}`, "",
			Problem{Type: "urn:uagate:problem:unknown-field", Title: "Unknown field", Status: 400, Detail: `unknown field "colour"`, Field: "colour"}},
		{"wrong type", "POST", groups, adminToken, `{"name":"g","endpoint":"plc1","keyFrameCount":"ten","writers":[]}`, "",
			Problem{Type: "urn:uagate:problem:invalid", Title: "Invalid value", Status: 400, Detail: "/keyFrameCount: wrong JSON type (string), want integer", Field: "/keyFrameCount"}},
		{"invalid node id", "POST", groups, adminToken, `{"name":"g","endpoint":"plc1","writers":[{"name":"w","fields":[{"node":"ns=x;s=A"}]}]}`, "",
			Problem{Type: "urn:uagate:problem:invalid-node-id", Title: "Invalid node id", Status: 400,
				Detail: `node id "ns=x;s=A" is not valid (want "ns=<index>;s=<name>", "nsu=<uri>;i=<n>", "i=<n>", …)`, Field: "/writers/0/fields/0/node"}},
		{"bad name", "POST", groups, adminToken, `{"name":"a/b","endpoint":"plc1","writers":[]}`, "",
			Problem{Type: "urn:uagate:problem:invalid", Title: "Invalid value", Status: 400,
				Detail: `writer group "a/b": a name cannot contain '/', '+' or '#' (it is a topic level)`, Field: "/name"}},
		{"unknown endpoint", "POST", groups, adminToken, `{"name":"g","endpoint":"nowhere","writers":[]}`, "",
			Problem{Type: "urn:uagate:problem:invalid", Title: "Invalid value", Status: 400, Detail: `endpoint "nowhere" does not exist`, Field: "/endpoint"}},
		{"oversized body", "POST", groups, adminToken, big, "",
			Problem{Type: "urn:uagate:problem:body-too-large", Title: "Request body too large", Status: 413, Detail: "the request body exceeds 256 bytes"}},
		{"media type", "POST", groups, adminToken, `name=g`, "application/x-www-form-urlencoded",
			Problem{Type: "urn:uagate:problem:unsupported-media-type", Title: "Unsupported media type", Status: 415,
				Detail: `Content-Type "application/x-www-form-urlencoded": want application/json`}},
		{"no credentials", "GET", groups, "", nil, "",
			Problem{Type: "urn:uagate:problem:unauthorized", Title: "Missing or wrong credentials", Status: 401,
				Detail: `this route needs an API key: send "Authorization: Bearer <key>"`}},
		{"wrong credentials", "GET", groups, "not-a-key-0123456789", nil, "",
			Problem{Type: "urn:uagate:problem:unauthorized", Title: "Missing or wrong credentials", Status: 401, Detail: "the API key is not valid"}},
		{"read role changes", "DELETE", groups + "/line1", readToken, nil, "",
			Problem{Type: "urn:uagate:problem:forbidden", Title: "Not allowed for this role", Status: 403,
				Detail: "DELETE /api/v1/writer-groups/line1 needs the admin role; the key has read"}},
		{"unknown group", "GET", groups + "/nope", readToken, nil, "",
			Problem{Type: "urn:uagate:problem:not-found", Title: "Not found", Status: 404, Detail: `writer group "nope" does not exist`, Field: "group"}},
		{"unknown writer", "DELETE", groups + "/line1/writers/nope", adminToken, nil, "",
			Problem{Type: "urn:uagate:problem:not-found", Title: "Not found", Status: 404, Detail: `writer group "line1" has no dataset writer "nope"`, Field: "writer"}},
		{"unknown field of writer", "DELETE", groups + "/line1/writers/motors/fields/torque", adminToken, nil, "",
			Problem{Type: "urn:uagate:problem:not-found", Title: "Not found", Status: 404, Detail: `dataset writer "motors" has no field "torque"`, Field: "field"}},
		{"duplicate group", "POST", groups, adminToken, `{"name":"line1","endpoint":"plc1","writers":[]}`, "",
			Problem{Type: "urn:uagate:problem:conflict", Title: "Conflict", Status: 409, Detail: `writer group "line1" exists already`, Field: "/name"}},
		{"duplicate field", "POST", groups + "/line1/writers/motors/fields", adminToken, `{"fields":[{"name":"temp","node":"i=2258"},{"name":"speed","node":"i=2259"}]}`, "",
			Problem{Type: "urn:uagate:problem:conflict", Title: "Conflict", Status: 409, Detail: `dataset writer "motors" has a field "speed" already`, Field: "/fields/1/name"}},
		{"endpoint in use", "DELETE", "/api/v1/endpoints/plc1", adminToken, nil, "",
			Problem{Type: "urn:uagate:problem:conflict", Title: "Conflict", Status: 409, Detail: `endpoint "plc1" is used by writer groups line1; remove them first`}},
		{"rename", "PUT", groups + "/line1", adminToken, `{"name":"line2","endpoint":"plc1","writers":[]}`, "",
			Problem{Type: "urn:uagate:problem:invalid", Title: "Invalid value", Status: 400,
				Detail: `the body names writer group "line2", the path "line1"; a group cannot be renamed`, Field: "/name"}},
		{"bad cursor", "GET", groups + "?cursor=zz", readToken, nil, "",
			Problem{Type: "urn:uagate:problem:invalid", Title: "Invalid value", Status: 400, Detail: `cursor "zz" is not one this API handed out`, Field: "cursor"}},
		{"bad limit", "GET", groups + "?limit=0", readToken, nil, "",
			Problem{Type: "urn:uagate:problem:invalid", Title: "Invalid value", Status: 400, Detail: `limit "0": want a number from 1 to 1000`, Field: "limit"}},
		{"method", "PATCH", groups + "/line1", adminToken, `{}`, "",
			Problem{Type: "urn:uagate:problem:method-not-allowed", Title: "Method not allowed", Status: 405,
				Detail: "PATCH is not allowed on /api/v1/writer-groups/line1; allowed: DELETE, GET, PUT"}},
		{"no route", "GET", "/api/v1/nothing", readToken, nil, "",
			Problem{Type: "urn:uagate:problem:no-route", Title: "No such route", Status: 404, Detail: "no route GET /api/v1/nothing"}},
	}
	before := cloneConfig(b.Config())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, ts.URL+c.path, nil)
			if c.body != nil {
				req.Body = http.NoBody
				req, _ = http.NewRequest(c.method, ts.URL+c.path, strings.NewReader(c.body.(string)))
				ct := c.ctype
				if ct == "" {
					ct = "application/json"
				}
				req.Header.Set("Content-Type", ct)
			}
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			r := readReply(t, resp)
			p := r.problem(t)
			want := c.want
			want.Instance = strings.SplitN(c.path, "?", 2)[0]
			if want.Detail == "" && want.Type == "urn:uagate:problem:malformed-json" {
				want.Detail = p.Detail // the parser's own words; the kind is what counts
				if !strings.HasPrefix(p.Detail, "malformed JSON") {
					t.Errorf("detail %q does not say malformed JSON", p.Detail)
				}
			}
			if p != want {
				t.Errorf("problem\n got %+v\nwant %+v", p, want)
			}
			if r.status != want.Status {
				t.Errorf("HTTP status %d, problem says %d", r.status, want.Status)
			}
			if want.Status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if want.Status == 405 && r.header.Get("Allow") != "DELETE, GET, PUT" {
				t.Errorf("Allow %q", r.header.Get("Allow"))
			}
		})
	}
	if b.applied != 0 {
		t.Errorf("%d changes applied by bad requests", b.applied)
	}
	if !reflect.DeepEqual(b.Config(), before) {
		t.Error("the configuration changed")
	}
}

// TestRefusedChangeChangesNothing: when the runtime refuses a change that
// passed the API's checks, nothing is changed and the problem is the
// runtime's.
func TestRefusedChangeChangesNothing(t *testing.T) {
	b := newTestBackend(t, baseConfig())
	_, ts := newTestServer(t, b, Options{})
	b.failNext = problemf(ErrConflict, "the sessions of plc1 are being replaced; try again")
	r := do(t, ts, "POST", "/api/v1/writer-groups/line1/writers", "", map[string]any{"name": "valves", "fields": []any{map[string]any{"node": "i=2258"}}})
	p := r.problem(t)
	want := Problem{Type: "urn:uagate:problem:conflict", Title: "Conflict", Status: 409,
		Detail: "the sessions of plc1 are being replaced; try again", Instance: "/api/v1/writer-groups/line1/writers"}
	if p != want {
		t.Fatalf("got %+v\nwant %+v", p, want)
	}
	if len(b.Config().WriterGroups[0].Writers) != 1 || b.applied != 0 {
		t.Fatal("a refused change was applied")
	}
	// An error the backend does not classify is a 500 whose text stays in
	// the log.
	b.failNext = errTest
	r = do(t, ts, "DELETE", "/api/v1/writer-groups/line1", "", nil)
	if p := r.problem(t); p != (Problem{Type: "urn:uagate:problem:internal", Title: "Internal error", Status: 500, Instance: "/api/v1/writer-groups/line1"}) {
		t.Fatalf("got %+v", p)
	}
	if len(b.Config().WriterGroups) != 1 {
		t.Fatal("a failed delete was applied")
	}
}

func readReply(t *testing.T, resp *http.Response) reply {
	t.Helper()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: []byte(sb.String())}
}
