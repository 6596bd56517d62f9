package pki

import (
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestImport: a seed laid out as Kubernetes Secrets mount it (a TLS
// Secret's tls.crt, tls.key and ca.crt under own/, certificates and CRLs
// under the others, the volume's dot-entries beside them) fills two stores
// alike: both load the seeded own certificate (the one every server trusts
// once), trust the same certificates and read the CRL. Importing again
// changes nothing; a key that does not match its certificate is refused.
func TestImport(t *testing.T) {
	seed := t.TempDir()
	put := func(sub, name string, data []byte) {
		t.Helper()
		d := filepath.Join(seed, sub)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name), data, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	pemOf := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }
	const uri = "urn:plant1:uagate:gateway"
	own, ownKey := selfSigned(t, 0, func(r *CertRequest) { r.ApplicationURI = uri; r.CommonName = "uagate"; r.Hosts = []string{"gateway"} })
	keyDER, err := x509.MarshalPKCS8PrivateKey(ownKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, caKey := newCA(t, 1, "Plant CA", nil, nil)
	plc, _ := selfSigned(t, 2, nil)
	put("own", "tls.crt", pemOf("CERTIFICATE", own.Raw))
	put("own", "tls.key", pemOf("PRIVATE KEY", keyDER))
	put("own", "ca.crt", pemOf("CERTIFICATE", ca.Raw))
	put("own", "..data", []byte("volume internals"))
	put("trusted", "plc1.pem", append(pemOf("CERTIFICATE", plc.Raw), pemOf("CERTIFICATE", ca.Raw)...))
	put("issuers", "ca.der", ca.Raw)
	crl, err := x509.CreateRevocationList(nil, &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: time.Now().Add(-time.Hour),
		NextUpdate: time.Now().Add(24 * time.Hour)}, ca, caKey)
	if err != nil {
		t.Fatal(err)
	}
	put("trusted-crl", "plant.crl", crl)

	for i := range 2 { // two replicas' stores
		s := newStore(t, Options{})
		for range 2 { // imported twice: the same result
			res, err := s.Import(seed)
			if err != nil {
				t.Fatal(err)
			}
			if res != (ImportResult{Own: 1, Trusted: 2, Issuers: 1, CRLs: 1}) {
				t.Fatalf("store %d: imported %+v", i, res)
			}
		}
		cert, _, key, err := s.LoadOrCreateOwn(uri, []string{"gateway"})
		if err != nil || ThumbprintHex(cert.Raw) != ThumbprintHex(own.Raw) || !key.Equal(ownKey) {
			t.Fatalf("store %d: own certificate %v (%v), want the seeded one", i, cert.Subject, err)
		}
		for _, c := range []struct {
			f    Folder
			want int
		}{{FolderOwn, 1}, {FolderTrusted, 2}, {FolderIssuers, 1}} {
			if l, _ := s.List(c.f); len(l) != c.want {
				t.Errorf("store %d: %d certificates in %s, want %d", i, len(l), c.f, c.want)
			}
		}
		if crls := s.loadCRLs(dirTrustedCRL); len(crls) != 1 {
			t.Errorf("store %d: %d trusted CRLs", i, len(crls))
		}
	}

	other, _ := selfSigned(t, 3, nil)
	put("own", "tls.crt", pemOf("CERTIFICATE", other.Raw))
	if _, err := newStore(t, Options{}).Import(seed); err == nil || !strings.Contains(err.Error(), "does not belong") {
		t.Errorf("a key of another certificate: %v", err)
	}
	if _, err := newStore(t, Options{}).Import(filepath.Join(seed, "missing")); err == nil {
		t.Error("a missing seed directory was accepted")
	}
}
