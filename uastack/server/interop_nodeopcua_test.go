package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// TestNodeOPCUAClient: node-opcua's client (an independent implementation)
// connects with every policy and mode the server offers, deprecated ones
// included, browses, reads and subscribes; user names too. It needs Node.js and
// testpeer's node_modules (scripts/install-node-opcua.sh) and fails without.
func TestNodeOPCUAClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node")
	}
	s := startServer(t, nil)

	// Node 20 refuses the RSA PKCS#1 v1.5 decryption (CVE-2023-46809) that
	// Basic128Rsa15 needs unless told otherwise; a Node without the switch
	// cannot test that policy.
	nodeArgs := []string{"--security-revert=CVE-2023-46809"}
	if err := exec.Command("node", append(nodeArgs, "-e", "0")...).Run(); err != nil {
		t.Logf("node does not take %s (%v): Basic128Rsa15 not tested", nodeArgs[0], err)
		nodeArgs = nil
	}
	var cases []nodeCase
	for _, e := range AllPolicies() {
		p, _ := uasc.PolicyByURI(e.PolicyURI)
		if nodeArgs == nil && p.URI == uasc.SecurityPolicyBasic128Rsa15 {
			continue
		}
		mode := strings.TrimPrefix(e.Mode.String(), "MessageSecurityMode")
		cases = append(cases, nodeCase{Name: p.Name + "_" + mode, Policy: p.Name, Mode: mode})
	}
	cases = append(cases,
		nodeCase{Name: "None_None_user", Policy: "None", Mode: "None", User: "user1", Password: "password1"},
		nodeCase{Name: "Basic256Sha256_SignAndEncrypt_user", Policy: "Basic256Sha256", Mode: "SignAndEncrypt", User: "user1", Password: "password1"},
	)
	results, stderr := runNodeClient(t, s.URL(), nodeArgs, cases)
	seen := map[string]bool{}
	for _, r := range results {
		seen[r.Name] = true
		if !r.OK {
			t.Errorf("%s: %s", r.Name, r.Error)
			continue
		}
		if len(r.Values) < 3 || r.Values[2] <= r.Values[0] || !contains(r.Browse, "Server") || !contains(r.Browse, "Demo") {
			t.Errorf("%s: browse %v, values %v", r.Name, r.Browse, r.Values)
		}
		t.Logf("%s: ok in %d ms, counter %v", r.Name, r.MS, r.Values)
	}
	for _, c := range cases {
		if !seen[c.Name] {
			t.Errorf("%s: no result\n%s", c.Name, tail(stderr, 4000))
		}
	}
	if st := s.Stats(); st.SessionsCreated < uint64(len(cases)) {
		t.Errorf("server saw %d sessions", st.SessionsCreated)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestNodeOPCUAClientUntrusted: the server, with a PKI that does not trust
// node-opcua's client certificate, refuses its secure channel with
// Bad_SecurityChecksFailed (Part 6 §6.7.4: a server does not tell a client why
// its certificate failed) and saves the certificate to rejected/; once an
// operator moves it to trusted/, the same client connects.
func TestNodeOPCUAClientUntrusted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node")
	}
	store, err := pki.Open(t.TempDir(), pki.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var refusals atomic.Int32
	s := startServer(t, func(c *Config) {
		c.ValidateClientCert = func(chain []byte) error {
			_, err := store.Validate(chain, pki.ValidateOptions{Role: pki.PeerClient})
			if err != nil {
				refusals.Add(1)
			}
			return err
		}
	})
	clientPKI := t.TempDir()
	cases := []nodeCase{{Name: "Basic256Sha256_SignAndEncrypt", Policy: "Basic256Sha256", Mode: "SignAndEncrypt"}}

	res, stderr := runNodeClient(t, s.URL(), nil, cases, "NODECLIENT_PKI="+clientPKI)
	if len(res) != 1 || res[0].OK {
		t.Fatalf("untrusted client: %+v\n%s", res, tail(stderr, 4000))
	}
	t.Logf("node-opcua reports: %s", res[0].Error)
	if refusals.Load() == 0 {
		t.Fatal("the server did not refuse the certificate")
	}
	if st := s.Stats(); st.SessionsCreated != 0 {
		t.Fatalf("%d sessions created with an untrusted certificate", st.SessionsCreated)
	}
	rejected, err := store.List(pki.FolderRejected)
	if err != nil {
		t.Fatal(err)
	}
	if len(rejected) != 1 {
		t.Fatalf("%d certificates in rejected/, want node-opcua's one", len(rejected))
	}
	if uri := pki.ApplicationURI(rejected[0].Cert); !strings.Contains(uri, "uagate-nodeclient") {
		t.Fatalf("rejected certificate is %q's", uri)
	}

	if !strings.Contains(res[0].Error, "rejected by server") {
		t.Errorf("node-opcua's error does not say it was rejected: %s", res[0].Error)
	}
	// node-opcua reports a dropped connection, not the status of the ERR
	// message before it; our own client shows what the server sent.
	ctx := testContext(t, time.Minute)
	if _, err := uasc.Dial(ctx, s.URL(), &uasc.Config{
		SecurityPolicyURI: uasc.SecurityPolicyBasic256Sha256, SecurityMode: ua.MessageSecurityModeSignAndEncrypt,
		LocalCertificate: clientPair.der, LocalKey: clientPair.key, RemoteCertificate: s.Certificate(),
	}); !errors.Is(err, ua.StatusBadSecurityChecksFailed) {
		t.Fatalf("an untrusted Go client got %v, want BadSecurityChecksFailed", err)
	} else if strings.Contains(err.Error(), store.Path(pki.FolderRejected)) || strings.Contains(err.Error(), "rejected/") {
		// The ERR reason goes to an unauthenticated peer: no paths of ours.
		t.Fatalf("the server told an untrusted client where it keeps rejected certificates: %v", err)
	}

	// What an operator does: move the file to trusted/.
	nodeCert := rejected[0]
	if err := os.Rename(nodeCert.Path, filepath.Join(store.Path(pki.FolderTrusted), filepath.Base(nodeCert.Path))); err != nil {
		t.Fatal(err)
	}
	res, stderr = runNodeClient(t, s.URL(), nil, cases, "NODECLIENT_PKI="+clientPKI)
	if len(res) != 1 || !res[0].OK || len(res[0].Values) < 3 {
		t.Fatalf("after trusting: %+v\n%s", res, tail(stderr, 4000))
	}
	if st := s.Stats(); st.SessionsCreated != 1 {
		t.Fatalf("%d sessions after trusting, want 1", st.SessionsCreated)
	}
	rej, _ := store.List(pki.FolderRejected)
	for _, r := range rej {
		if r.Thumbprint == nodeCert.Thumbprint {
			t.Fatal("node-opcua's certificate is in rejected/ again")
		}
	}
}

// nodeCase is one connection nodeclient.mjs makes.
type nodeCase struct {
	Name     string `json:"name"`
	Policy   string `json:"policy"`
	Mode     string `json:"mode"`
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
}

// nodeResult is what nodeclient.mjs reports for a case.
type nodeResult struct {
	Name   string    `json:"name"`
	OK     bool      `json:"ok"`
	Error  string    `json:"error"`
	Browse []string  `json:"browse"`
	Read   float64   `json:"read"`
	Values []float64 `json:"values"`
	MS     int       `json:"ms"`
}

// runNodeClient runs testdata/nodeclient.mjs (node-opcua's client) against url
// with the given cases and returns its results and its stderr. env adds
// KEY=VALUE settings (NODECLIENT_PKI). It fails the test when node cannot run.
func runNodeClient(t *testing.T, url string, nodeArgs []string, cases []nodeCase, env ...string) ([]nodeResult, string) {
	t.Helper()
	if err := nodeopcua.Installed(); err != nil {
		t.Fatalf("node-opcua not installed: %v (run scripts/install-node-opcua.sh)", err)
	}
	dir, _ := nodeopcua.Dir()
	arg, _ := json.Marshal(cases)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append(nodeArgs, filepath.Join("testdata", "nodeclient.mjs"), url, string(arg))...)
	cmd.Env = append(append(os.Environ(), "NODEOPCUA_DIR="+dir), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, tail(stderr.String(), 4000))
	}
	var results []nodeResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "RESULT ")
		if !ok {
			continue // node-opcua's own chatter
		}
		var r nodeResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Errorf("bad line %q: %v", sc.Text(), err)
			continue
		}
		results = append(results, r)
	}
	return results, stderr.String()
}
