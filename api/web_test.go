package api

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/uagate/gateway/uastack/ua"
)

// The dashboard's assets (web/) are tested in a browser by TestDashboard in
// cmd/gateway, against the whole gateway.

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

// TestDashboardServed: / is the dashboard, its scripts are served as
// JavaScript (browsers refuse modules of another type), and every module
// import and asset the page names is embedded.
func TestDashboardServed(t *testing.T) {
	_, ts := newTestServer(t, newTestBackend(t, nil), Options{})
	r := do(t, ts, "GET", "/", "", nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !bytes.Contains(r.body, []byte(`src="js/app.js"`)) {
		t.Fatalf("GET /: %d %s\n%s", r.status, r.header.Get("Content-Type"), r.body)
	}
	refs := regexp.MustCompile(`(?:href|src)="([^"#:]+)"`).FindAllSubmatch(r.body, -1)
	imports := regexp.MustCompile(`from "\./([^"]+)"`)
	seen := map[string]bool{}
	var check func(path string)
	check = func(path string) {
		if seen[path] {
			return
		}
		seen[path] = true
		r := do(t, ts, "GET", "/"+path, "", nil)
		if r.status != 200 {
			t.Errorf("GET /%s: %d", path, r.status)
			return
		}
		if strings.HasSuffix(path, ".js") {
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
				t.Errorf("/%s served as %q", path, ct)
			}
			for _, m := range imports.FindAllSubmatch(r.body, -1) {
				check("js/" + string(m[1]))
			}
		}
	}
	for _, m := range refs {
		check(string(m[1]))
	}
	for _, want := range []string{"app.css", "favicon.svg", "js/app.js", "js/values.js", "js/browser.js", "js/ua.js", "js/spark.js", "js/api.js", "js/statuscodes.js"} {
		if !seen[want] {
			t.Errorf("%s is not reached from the page", want)
		}
	}
	if r := do(t, ts, "POST", "/", "", nil); r.status != 405 {
		t.Errorf("POST /: %d", r.status)
	}
}
