package api

import (
	"testing"
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
