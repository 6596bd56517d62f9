package uasc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/ua"
)

// TestNodeOPCUA opens a channel with every policy and mode node-opcua offers,
// exchanges GetEndpoints (no session needed; its response spans several chunks
// with small buffers) and a Read without a session (a ServiceFault), and closes.
func TestNodeOPCUA(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node-opcua")
	}
	peer := nodeopcua.Start(t, nodeopcua.Options{LargeCount: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	eps, err := GetEndpoints(ctx, peer.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := newTestCert(t, "client", 2048, 1)
	seen := map[EndpointSecurity]bool{}
	for _, ep := range eps {
		key := EndpointSecurity{ep.SecurityPolicyURI, ep.SecurityMode}
		if seen[key] {
			continue
		}
		seen[key] = true
		p, err := PolicyByURI(ep.SecurityPolicyURI)
		if err != nil {
			t.Errorf("node-opcua offers %s: %v", ep.SecurityPolicyURI, err)
			continue
		}
		t.Run(p.Name+"_"+ep.SecurityMode.String(), func(t *testing.T) {
			cfg := &Config{SecurityPolicyURI: ep.SecurityPolicyURI, SecurityMode: ep.SecurityMode, Transport: smallBuffers}
			if !p.IsNone() {
				cfg.LocalCertificate, cfg.LocalKey, cfg.RemoteCertificate = client.der, client.key, ep.ServerCertificate
			}
			c, err := Dial(ctx, peer.URL, cfg)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer c.Close()
			var resp ua.GetEndpointsResponse
			out, err := c.SendRequest(ctx, &ua.GetEndpointsRequest{EndpointURL: peer.URL}, &resp)
			if err != nil {
				t.Fatalf("GetEndpoints: %v", err)
			}
			if out != &resp || len(resp.Endpoints) != len(eps) {
				t.Fatalf("GetEndpoints: %d endpoints, want %d", len(resp.Endpoints), len(eps))
			}
			_, err = c.SendRequest(ctx, readRequest("x", 1, 10), nil)
			var sf *ServiceFaultError
			if !errors.As(err, &sf) {
				t.Fatalf("Read without a session: %v, want a ServiceFault", err)
			}
			t.Logf("Read without a session: %v", sf.Status)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, want := range []EndpointSecurity{
		{SecurityPolicyNone, ua.MessageSecurityModeNone},
		{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSign},
		{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt},
		{SecurityPolicyAes128Sha256RsaOaep, ua.MessageSecurityModeSignAndEncrypt},
		{SecurityPolicyAes256Sha256RsaPss, ua.MessageSecurityModeSignAndEncrypt},
	} {
		if !seen[want] {
			t.Errorf("node-opcua did not offer %s %s", want.PolicyURI, want.Mode)
		}
	}

	// Token renewal: node-opcua's shortest lifetime is 2.5 s, renewed at 1.9 s.
	t.Run("renewal", func(t *testing.T) {
		var ep ua.EndpointDescription
		for _, e := range eps {
			if e.SecurityPolicyURI == SecurityPolicyAes256Sha256RsaPss && e.SecurityMode == ua.MessageSecurityModeSignAndEncrypt {
				ep = e
			}
		}
		c, err := Dial(ctx, peer.URL, &Config{
			SecurityPolicyURI: ep.SecurityPolicyURI, SecurityMode: ep.SecurityMode,
			LocalCertificate: client.der, LocalKey: client.key, RemoteCertificate: ep.ServerCertificate,
			Lifetime: 2500 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		tokens := map[uint32]bool{c.sc.sendTok.Load().id: true}
		deadline := time.Now().Add(30 * time.Second)
		for len(tokens) < 3 {
			if time.Now().After(deadline) {
				t.Fatalf("%d tokens within 30 s", len(tokens))
			}
			if _, err := c.SendRequest(ctx, &ua.GetEndpointsRequest{EndpointURL: peer.URL}, nil); err != nil {
				t.Fatalf("GetEndpoints with token %d: %v", c.sc.sendTok.Load().id, err)
			}
			tokens[c.sc.sendTok.Load().id] = true
			time.Sleep(50 * time.Millisecond) // pace the requests
		}
	})
}
