package api

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPICoversRoutes checks the document against the listener: every
// pattern registered on the mux (but the catch-alls and the dashboard) is
// documented, and every documented operation answers — with anything but
// "no such route" or "method not allowed".
func TestOpenAPICoversRoutes(t *testing.T) {
	b := newTestBackend(t, baseConfig())
	s, ts := newTestServer(t, b, Options{Keys: []Key{{Name: "ops", Token: adminToken, Role: RoleAdmin}}})
	r := do(t, ts, "GET", "/api/v1/openapi.json", "", nil)
	if r.status != 200 {
		t.Fatalf("openapi.json: %d %s", r.status, r.body)
	}
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	r.decode(t, &doc)
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	for _, p := range s.patterns {
		switch p {
		case "/", "/api/", "/v2/":
			continue
		}
		if !documented[p] {
			t.Errorf("route %q is served but not documented", p)
		}
	}
	// Every $ref resolves.
	refs := regexp.MustCompile(`"\$ref":"#/components/schemas/([^"]+)"`).FindAllStringSubmatch(string(r.body), -1)
	if len(refs) == 0 {
		t.Fatal("no schema references at all")
	}
	for _, m := range refs {
		if _, ok := doc.Components.Schemas[m[1]]; !ok {
			t.Errorf("$ref to missing schema %q", m[1])
		}
	}
	// Every documented operation answers.
	param := regexp.MustCompile(`\{[^}]+\}`)
	var ops []string
	for op := range documented {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		url := param.ReplaceAllString(path, "x")
		var body any
		if method == "POST" || method == "PUT" || method == "PATCH" {
			body = "{}"
		}
		rep := do(t, ts, method, url, adminToken, body)
		if rep.status == http.StatusMethodNotAllowed {
			t.Errorf("%s: 405", op)
		}
		if strings.Contains(string(rep.body), "urn:uagate:problem:no-route") {
			t.Errorf("%s: no route", op)
		}
		if rep.status >= 500 && rep.status != http.StatusBadGateway && rep.status != http.StatusServiceUnavailable {
			t.Errorf("%s: %d %s", op, rep.status, rep.body)
		}
	}
	if len(ops) < 40 {
		t.Errorf("only %d operations documented", len(ops))
	}
}
