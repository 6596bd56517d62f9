package api

import (
	"strings"
	"testing"

	"github.com/uagate/gateway/bridge/config"
)

// TestEndpointPasswordStaysBound: a stored password is kept by a PUT that
// does not give it only while the endpoint still goes where it went: a PUT
// that changes the URL, the security policy or mode, or turns autoAccept on
// is refused with a problem naming the password, and nothing changes; with
// the password given again it is taken.
func TestEndpointPasswordStaysBound(t *testing.T) {
	b := newTestBackend(t, baseConfig())
	_, ts := newTestServer(t, b, Options{})
	ep := "/api/v1/endpoints/plc2"
	r := do(t, ts, "POST", "/api/v1/endpoints", "", `{"name":"plc2","url":"opc.tcp://plc2:4840","securityMode":"SignAndEncrypt",
		"securityPolicy":"Basic256Sha256","identity":{"type":"username","username":"op","password":"s3cr3t-plc2"}}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	hasPassword := func() bool {
		var e Endpoint
		do(t, ts, "GET", ep, "", nil).decode(t, &e)
		return e.Config != nil && e.Config.Identity != nil && e.Config.Identity.HasPassword
	}
	if r := do(t, ts, "PUT", ep, "", `{"url":"opc.tcp://plc2:4840","securityMode":"SignAndEncrypt","securityPolicy":"Basic256Sha256",
		"identity":{"type":"username","username":"op"},"requestTimeout":"10s"}`); r.status != 200 || !hasPassword() {
		t.Fatalf("a PUT that changes the timeout only: %d %s, password kept %v", r.status, r.body, hasPassword())
	}
	for _, tc := range []struct{ name, body, what string }{
		{"another host", `{"url":"opc.tcp://evil.example:4840","securityMode":"SignAndEncrypt","securityPolicy":"Basic256Sha256","identity":{"type":"username","username":"op"}}`, "URL"},
		{"no security", `{"url":"opc.tcp://plc2:4840","securityMode":"None","securityPolicy":"None","identity":{"type":"username","username":"op"}}`, "security policy"},
		{"sign only", `{"url":"opc.tcp://plc2:4840","securityMode":"Sign","securityPolicy":"Basic256Sha256","identity":{"type":"username","username":"op"}}`, "security mode"},
		{"trust anything", `{"url":"opc.tcp://plc2:4840","securityMode":"SignAndEncrypt","securityPolicy":"Basic256Sha256","autoAccept":true,"identity":{"type":"username","username":"op"}}`, "certificate trust (autoAccept)"},
	} {
		before := b.applied
		r := do(t, ts, "PUT", ep, "", tc.body)
		if r.status != 400 {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
			continue
		}
		p := r.problem(t)
		if p.Field != "/identity/password" || p.Detail != "the endpoint's "+tc.what+" changed: give the password again (a stored password is not sent elsewhere)" {
			t.Errorf("%s: %+v", tc.name, p)
		}
		if b.applied != before {
			t.Errorf("%s: the configuration changed", tc.name)
		}
	}
	if got := b.Config().Endpoints[len(b.Config().Endpoints)-1]; got.URL != "opc.tcp://plc2:4840" || got.Identity.Password.Reveal() != "s3cr3t-plc2" {
		t.Fatalf("the endpoint after the refusals: %s, password kept %v", got.URL, got.Identity.Password.IsSet())
	}
	// With the password given again: taken.
	r = do(t, ts, "PUT", ep, "", `{"url":"opc.tcp://plc3:4840","identity":{"type":"username","username":"op","password":"s3cr3t-plc3"}}`)
	if r.status != 200 || !hasPassword() {
		t.Fatalf("a new URL with the password: %d %s", r.status, r.body)
	}
}

// TestReadRoleSeesNoLocalPaths: the read role gets an endpoint's state
// without the gateway's file paths (PKI store, key and password files), in
// its last error too; the admin role gets them.
func TestReadRoleSeesNoLocalPaths(t *testing.T) {
	if got := redactPaths(`certificate not trusted: saved to /var/lib/uagate/pki/rejected/certs/plc [abc].der; see C:\ProgramData\uagate\pki`); got !=
		`certificate not trusted: saved to …/plc [abc].der; see …/pki` {
		t.Errorf("redacted: %q", got)
	}
	c := baseConfig()
	c.Endpoints[0].PKI = "/var/lib/uagate/pki"
	c.Endpoints[0].Identity = config.Identity{Type: "x509", CertFile: "/etc/uagate/user/cert.pem", KeyFile: "/etc/uagate/user/key.pem"}
	b := newTestBackend(t, c)
	_, ts := newTestServer(t, b, Options{Keys: []Key{{Name: "ops", Token: adminToken, Role: RoleAdmin}, {Name: "viewer", Token: readToken, Role: RoleRead}}})
	for _, tc := range []struct {
		token string
		paths bool
	}{{readToken, false}, {adminToken, true}} {
		for _, path := range []string{"/api/v1/endpoints", "/api/v1/endpoints/plc1", "/api/v1/status"} {
			r := do(t, ts, "GET", path, tc.token, nil)
			has := strings.Contains(string(r.body), "/var/lib/uagate") || strings.Contains(string(r.body), "/etc/uagate/user")
			if r.status != 200 || (path != "/api/v1/status" && has != tc.paths) {
				t.Errorf("%s as %s: %d, paths shown %v: %s", path, map[bool]string{false: "read", true: "admin"}[tc.paths], r.status, has, r.body)
			}
		}
	}
}
