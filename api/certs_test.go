package api

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// TestCertificatesTrustFlow: a session to a server whose certificate the
// store does not trust gives up with the reason; the API lists the refused
// certificate under rejected, trusts it, and the next session connects.
// Removing it from trusted refuses the server again.
func TestCertificatesTrustFlow(t *testing.T) {
	srv := startSim(t, &server.Config{Policies: []uasc.EndpointSecurity{
		{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}, // discovery
		{PolicyURI: uasc.SecurityPolicyBasic256Sha256, Mode: ua.MessageSecurityModeSignAndEncrypt}}})
	store, err := pki.Open(t.TempDir(), pki.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := func() *client.ManagedConfig {
		return &client.ManagedConfig{Client: client.Config{Store: store, SecurityPolicy: uasc.SecurityPolicyBasic256Sha256,
			SecurityMode: ua.MessageSecurityModeSignAndEncrypt}, Backoff: client.Backoff{MaxElapsed: 200 * time.Millisecond}}
	}
	m := startSession(t, srv.URL(), cfg(), false)
	b := newTestBackend(t, nil)
	b.addSession("secure", srv.URL(), m)
	b.stores[""] = store
	b.stores["secure"] = store
	_, ts := newTestServer(t, b, Options{})

	testutil.WaitFor(t, 15*time.Second, "the session to give up", func() bool { return m.State() == client.StateDisconnected && m.Err() != nil })
	r := do(t, ts, "GET", "/api/v1/endpoints/secure", "", nil)
	var st Endpoint
	r.decode(t, &st)
	if st.Connected || st.PermanentFailure == "" || !strings.Contains(st.PermanentFailure, "is not trusted") {
		t.Fatalf("status of a refused server: %+v", st.EndpointStatus)
	}

	r = do(t, ts, "GET", "/api/v1/certificates?endpoint=secure", "", nil)
	var certs Certificates
	r.decode(t, &certs)
	if len(certs.Rejected) != 1 || len(certs.Trusted) != 0 {
		t.Fatalf("certificates: %s", r.body)
	}
	rej := certs.Rejected[0]
	if rej.Thumbprint != pki.ThumbprintHex(srv.Certificate()) && !strings.HasPrefix(string(srv.Certificate()), string(rej.DER)) {
		t.Fatalf("rejected %s is not the server's", rej.Thumbprint)
	}
	if !strings.Contains(rej.ApplicationURI, "urn:") || rej.NotAfter.Before(time.Now()) {
		t.Errorf("rejected certificate described as %+v", rej)
	}

	// Trust it (lower case works); the next session connects.
	r = do(t, ts, "POST", "/api/v1/certificates/rejected/"+strings.ToLower(rej.Thumbprint)+"/trust", "", nil)
	var trusted Certificate
	r.decode(t, &trusted)
	if r.status != 200 || trusted.Folder != "trusted" || trusted.Thumbprint != rej.Thumbprint {
		t.Fatalf("trust: %d %s", r.status, r.body)
	}
	r = do(t, ts, "GET", "/api/v1/certificates/rejected", "", nil)
	var page Page[Certificate]
	if r.decode(t, &page); len(page.Items) != 0 {
		t.Fatalf("still rejected: %s", r.body)
	}
	m2 := startSession(t, srv.URL(), cfg(), true)
	b.addSession("secure", srv.URL(), m2)
	testutil.WaitFor(t, 10*time.Second, "the endpoint to show connected", func() bool {
		var e Endpoint
		do(t, ts, "GET", "/api/v1/endpoints/secure", "", nil).decode(t, &e)
		return e.Connected && e.SecurityPolicy == uasc.SecurityPolicyBasic256Sha256 && e.SecurityMode == "SignAndEncrypt"
	})

	// Connected, the session has its own certificate in the store.
	r = do(t, ts, "GET", "/api/v1/certificates/own", "", nil)
	if r.decode(t, &page); len(page.Items) != 1 || page.Items[0].Folder != "own" {
		t.Fatalf("own: %s", r.body)
	}

	// Trusting it again: it is not in rejected any more.
	r = do(t, ts, "POST", "/api/v1/certificates/rejected/"+rej.Thumbprint+"/trust", "", nil)
	if p := r.problem(t); p.Status != 404 || p.Detail != "no certificate "+rej.Thumbprint+" in rejected" {
		t.Fatalf("trust twice: %+v", p)
	}
	r = do(t, ts, "DELETE", "/api/v1/certificates/trusted/xyz", "", nil)
	if p := r.problem(t); p.Status != 400 || p.Field != "thumbprint" {
		t.Fatalf("bad thumbprint: %+v", p)
	}
	r = do(t, ts, "GET", "/api/v1/certificates/elsewhere", "", nil)
	if p := r.problem(t); p.Status != 404 {
		t.Fatalf("bad folder: %+v", p)
	}

	// Remove it from trusted: a new connection is refused again.
	if r = do(t, ts, "DELETE", "/api/v1/certificates/trusted/"+rej.Thumbprint, "", nil); r.status != 204 {
		t.Fatalf("remove: %d %s", r.status, r.body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, srv.URL(), &client.Config{Store: store, SecurityPolicy: uasc.SecurityPolicyBasic256Sha256,
		SecurityMode: ua.MessageSecurityModeSignAndEncrypt, Logger: quietLogger()})
	if err == nil {
		c.Close()
		t.Fatal("a removed certificate is still trusted")
	}
	if r = do(t, ts, "GET", "/api/v1/certificates?endpoint=other", "", nil); r.problem(t).Status != 404 {
		t.Fatalf("unknown store: %s", r.body)
	}
}
