package main

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/pki"
)

// The CLI tests run the commands in-process against the node-opcua peer.

const cliLarge = 1500 // variables in Demo/Large: enough for progress lines

type cliResult struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return cliResult{code, out.String(), errb.String()}
}

func (r cliResult) must(t *testing.T, code int) cliResult {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

func TestCLI(t *testing.T) {
	peer := nodeopcua.Start(t, nodeopcua.Options{
		LargeCount: cliLarge,
		Limits:     nodeopcua.OperationLimits{MaxNodesPerBrowse: 50, MaxNodesPerRead: 5},
	})
	url := peer.URL
	pkiDir := t.TempDir()
	// The first connection trusts the peer, for the subtests that follow.
	runCLI(t, "read", "-pki", pkiDir, "-auto-accept", url, nodeopcua.NodeInt32).must(t, 0)

	t.Run("ReadTable", func(t *testing.T) {
		r := runCLI(t, "read", "-pki", pkiDir, url, nodeopcua.NodeCounter, nodeopcua.NodeString, nodeopcua.NodeDoubleArray, "ns=1;s=Nope").must(t, 0)
		for _, want := range []string{"NODE ID", "SOURCE TIMESTAMP", "Hello, gateway", "[1.5 2.5 3.5 4.5]", "Double[]", "BadNodeIdUnknown"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("no %q in\n%s", want, r.stdout)
			}
		}
		if lines := strings.Count(r.stdout, "\n"); lines != 5 {
			t.Errorf("%d lines, want a header and 4 rows:\n%s", lines, r.stdout)
		}
	})

	t.Run("ReadJSON", func(t *testing.T) {
		// Flags after the endpoint work too; 7 nodes at a peer that reads 5 at a time.
		r := runCLI(t, "read", url, "-json", "-pki", pkiDir, "-policy", "Aes128_Sha256_RsaOaep", "-mode", "Sign",
			nodeopcua.NodeInt32, nodeopcua.NodeBoolean, nodeopcua.NodeDoubleArray, nodeopcua.NodeString,
			nodeopcua.LargeNode(0), nodeopcua.LargeNode(1), nodeopcua.LargeNode(2)).must(t, 0)
		var got []struct {
			NodeID, Type, Status, SourceTimestamp string
			Value                                 any
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		want := []struct {
			id, typ string
			val     any
		}{
			{nodeopcua.NodeInt32, "Int32", -42.0}, {nodeopcua.NodeBoolean, "Boolean", true},
			{nodeopcua.NodeDoubleArray, "Double[]", []any{1.5, 2.5, 3.5, 4.5}}, {nodeopcua.NodeString, "String", "Hello, gateway"},
			{nodeopcua.LargeNode(0), "Int32", 0.0}, {nodeopcua.LargeNode(1), "Int32", 1.0}, {nodeopcua.LargeNode(2), "Int32", 2.0},
		}
		if len(got) != len(want) {
			t.Fatalf("%d results: %s", len(got), r.stdout)
		}
		for i, w := range want {
			g := got[i]
			if g.NodeID != w.id || g.Type != w.typ || g.Status != "Good" || fmt.Sprint(g.Value) != fmt.Sprint(w.val) {
				t.Errorf("result %d: %+v, want %v %s %v", i, g, w.id, w.typ, w.val)
			}
		}
	})

	t.Run("UntrustedThenTrusted", func(t *testing.T) {
		dir := t.TempDir()
		r := runCLI(t, "read", "-pki", dir, url, nodeopcua.NodeInt32).must(t, 1)
		m := regexp.MustCompile(`saved to (.+\.der);`).FindStringSubmatch(r.stderr)
		if m == nil || filepath.Dir(m[1]) != filepath.Join(dir, "rejected", "certs") {
			t.Fatalf("the error does not name the rejected file:\n%s", r.stderr)
		}
		if _, err := os.Stat(m[1]); err != nil {
			t.Fatal(err)
		}
		thumb := regexp.MustCompile(`\[([0-9A-F]{40})\]`).FindStringSubmatch(r.stderr)
		if thumb == nil {
			t.Fatalf("no thumbprint in %s", r.stderr)
		}
		runCLI(t, "pki", "-pki", dir, "trust", thumb[1]).must(t, 0)
		r = runCLI(t, "read", "-pki", dir, url, nodeopcua.NodeInt32).must(t, 0)
		if !strings.Contains(r.stdout, "-42") {
			t.Fatalf("after trusting:\n%s", r.stdout)
		}
		r = runCLI(t, "pki", "-pki", dir, "list").must(t, 0)
		if !strings.Contains(r.stdout, "trusted/certs") || !strings.Contains(r.stdout, nodeopcua.ApplicationURI) {
			t.Fatalf("pki list:\n%s", r.stdout)
		}
	})

	t.Run("UserFromEnv", func(t *testing.T) {
		t.Setenv(passwordEnv, nodeopcua.Users["user1"])
		runCLI(t, "read", "-pki", pkiDir, "-user", "user1", "-policy", "Basic256Sha256", "-mode", "SignAndEncrypt", url, nodeopcua.NodeCounter).must(t, 0)
		t.Setenv(passwordEnv, "not-the-password")
		r := runCLI(t, "read", "-pki", pkiDir, "-user", "user1", url, nodeopcua.NodeCounter).must(t, 1)
		if !strings.Contains(r.stderr, "BadUserAccessDenied") || strings.Contains(r.stderr, "not-the-password") {
			t.Fatalf("stderr:\n%s", r.stderr)
		}
	})

	t.Run("X509User", func(t *testing.T) {
		der, key, err := pki.CreateCertificate(pki.CertRequest{ApplicationURI: "urn:test:cli-user", CommonName: "cli user"}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		certFile, keyFile := filepath.Join(dir, "user.der"), filepath.Join(dir, "user.pem")
		os.WriteFile(certFile, der, 0o600)
		os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
		runCLI(t, "read", "-pki", pkiDir, "-cert", certFile, "-key", keyFile, "-policy", "None", url, nodeopcua.NodeCounter).must(t, 0)
	})

	t.Run("BrowseTable", func(t *testing.T) {
		r := runCLI(t, "browse", "-pki", pkiDir, url, nodeopcua.NodeDemo).must(t, 0)
		for _, want := range []string{"BROWSE NAME", "1:Counter", "ns=1;s=Demo.Setpoint", "1:Large", "FolderType", "Method"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("no %q in\n%s", want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "V00000") {
			t.Errorf("depth 1 went deeper:\n%s", r.stdout)
		}
		r = runCLI(t, "browse", "-pki", pkiDir, url).must(t, 0) // the Objects folder
		if !strings.Contains(r.stdout, "Server") || !strings.Contains(r.stdout, "1:Demo") {
			t.Errorf("Objects:\n%s", r.stdout)
		}
	})

	t.Run("BrowseRecursiveJSON", func(t *testing.T) {
		r := runCLI(t, "browse", "-pki", pkiDir, "-depth", "3", "-json", url, nodeopcua.NodeDemo).must(t, 0)
		var got []struct {
			NodeID, BrowseName, NodeClass, Parent string
			Depth                                 int
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v\n%.2000s", err, r.stdout)
		}
		large := 0
		for _, n := range got {
			if n.Parent == nodeopcua.NodeLarge {
				if want := nodeopcua.LargeNode(large); n.NodeID != want || n.Depth != 2 {
					t.Fatalf("child %d of Large: %+v, want %s at depth 2", large, n, want)
				}
				large++
			}
		}
		if large != cliLarge {
			t.Fatalf("%d children of Large, want %d", large, cliLarge)
		}
		if !strings.Contains(r.stderr, "browse: 1") || !strings.Contains(r.stderr, "browse: done") {
			t.Fatalf("no progress on stderr:\n%s", r.stderr)
		}
	})

	t.Run("UsageErrors", func(t *testing.T) {
		for _, args := range [][]string{
			{"read", "-pki", pkiDir, url},
			{"read", "-pki", pkiDir, "-policy", "Basic512", url, "i=85"},
			{"read", "-pki", pkiDir, "-mode", "Encrypt", url, "i=85"},
			{"read", "-pki", pkiDir, url, "ns=x;i=1"},
			{"browse", "-pki", pkiDir},
			{"browse", "-pki", pkiDir, "-depth", "-1", url},
			{"read", "-pki", pkiDir, "-password", "x", url, "i=85"},
			{"pki", "-pki", pkiDir, "frobnicate"},
		} {
			r := runCLI(t, args...)
			if r.code != 2 {
				t.Errorf("%q: exit %d, want 2\n%s", args, r.code, r.stderr)
			}
		}
		if r := runCLI(t, "read", "-h"); r.code != 0 || !strings.Contains(r.stderr, "Usage: gateway read") {
			t.Errorf("read -h: %d\n%s", r.code, r.stderr)
		}
	})
}
