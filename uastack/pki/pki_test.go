package pki

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Keys are expensive to generate (more so under -race); tests share a few.
var (
	keysMu sync.Mutex
	keys   = map[int]*rsa.PrivateKey{}
)

func testKey(t testing.TB, i int) *rsa.PrivateKey {
	t.Helper()
	keysMu.Lock()
	defer keysMu.Unlock()
	if k, ok := keys[i]; ok {
		return k
	}
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keys[i] = k
	return k
}

func newStore(t *testing.T, opts Options) *Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := Open(filepath.Join(t.TempDir(), "pki"), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const serverURI = "urn:plc1:example:server"

// selfSigned creates a self-signed application certificate for serverURI and
// host "plc1" / 10.0.0.1.
func selfSigned(t *testing.T, keyIdx int, mod func(*CertRequest)) (*x509.Certificate, *rsa.PrivateKey) {
	t.Helper()
	req := CertRequest{
		ApplicationURI: serverURI,
		CommonName:     "PLC 1/Server",
		Organization:   "Example",
		Hosts:          []string{"plc1", "10.0.0.1"},
		Key:            testKey(t, keyIdx),
	}
	if mod != nil {
		mod(&req)
	}
	der, key, err := CreateCertificate(req, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

func issued(t *testing.T, keyIdx int, req CertRequest, ca *x509.Certificate, caKey *rsa.PrivateKey) *x509.Certificate {
	t.Helper()
	req.Key = testKey(t, keyIdx)
	der, _, err := CreateCertificate(req, ca, caKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newCA(t *testing.T, keyIdx int, name string, parent *x509.Certificate, parentKey *rsa.PrivateKey) (*x509.Certificate, *rsa.PrivateKey) {
	t.Helper()
	req := CertRequest{CommonName: name, Organization: "Example", IsCA: true, Key: testKey(t, keyIdx)}
	der, key, err := CreateCertificate(req, parent, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

func writeDER(t *testing.T, s *Store, f Folder, name string, der []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.Path(f), name), der, 0o644); err != nil {
		t.Fatal(err)
	}
}

func serverOpts() ValidateOptions {
	return ValidateOptions{ApplicationURI: serverURI, Hostname: "plc1", MinKeyBits: 2048, MaxKeyBits: 4096}
}

func TestOpenCreatesLayout(t *testing.T) {
	s := newStore(t, Options{})
	for _, d := range []string{"own/certs", "own/private", "trusted/certs", "trusted/crl",
		"issuers/certs", "issuers/crl", "rejected/certs"} {
		info, err := os.Stat(filepath.Join(s.Dir(), d))
		if err != nil || !info.IsDir() {
			t.Fatalf("%s: %v", d, err)
		}
	}
	info, _ := os.Stat(filepath.Join(s.Dir(), "own/private"))
	if info.Mode().Perm() != 0o700 {
		t.Errorf("own/private mode %v, want 0700", info.Mode().Perm())
	}
}

func TestLoadOrCreateOwn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	opts := Options{Logger: slog.New(slog.DiscardHandler), ApplicationName: "Test Gateway", Organization: "ACME"}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	const uri = "urn:gw-host:uagate:gateway"
	cert, der, key, err := s.LoadOrCreateOwn(uri, []string{"gw-host", "192.168.1.5", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cert.Raw, der) {
		t.Error("cert.Raw != der")
	}
	if got := ApplicationURI(cert); got != uri {
		t.Errorf("URI %q, want %q", got, uri)
	}
	if cert.Subject.CommonName != "Test Gateway" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "ACME" {
		t.Errorf("subject %v", cert.Subject)
	}
	if len(cert.DNSNames) != 1 || cert.DNSNames[0] != "gw-host" {
		t.Errorf("DNS names %v", cert.DNSNames)
	}
	if len(cert.IPAddresses) != 2 || !cert.IPAddresses[0].Equal(net.ParseIP("192.168.1.5")) || !cert.IPAddresses[1].Equal(net.IPv6loopback) {
		t.Errorf("IPs %v", cert.IPAddresses)
	}
	if key.N.BitLen() != 2048 {
		t.Errorf("key %d bits", key.N.BitLen())
	}
	if cert.SignatureAlgorithm != x509.SHA256WithRSA {
		t.Errorf("signature algorithm %v", cert.SignatureAlgorithm)
	}
	wantKU := x509.KeyUsageDigitalSignature | x509.KeyUsageContentCommitment | x509.KeyUsageKeyEncipherment |
		x509.KeyUsageDataEncipherment | x509.KeyUsageCertSign
	if cert.KeyUsage != wantKU {
		t.Errorf("key usage %b, want %b", cert.KeyUsage, wantKU)
	}
	if len(cert.ExtKeyUsage) != 2 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth || cert.ExtKeyUsage[1] != x509.ExtKeyUsageClientAuth {
		t.Errorf("ext key usage %v", cert.ExtKeyUsage)
	}
	if d := cert.NotAfter.Sub(cert.NotBefore); d != DefaultValidity {
		t.Errorf("validity %v", d)
	}
	if !bytes.Equal(cert.RawSubject, cert.RawIssuer) || cert.CheckSignature(cert.SignatureAlgorithm, cert.RawTBSCertificate, cert.Signature) != nil {
		t.Error("not a valid self-signed certificate")
	}
	if !cert.BasicConstraintsValid || cert.IsCA || len(cert.SubjectKeyId) == 0 || !bytes.Equal(cert.AuthorityKeyId, cert.SubjectKeyId) {
		t.Errorf("constraints/key ids: valid=%v ca=%v ski=%x aki=%x", cert.BasicConstraintsValid, cert.IsCA, cert.SubjectKeyId, cert.AuthorityKeyId)
	}

	base := "Test Gateway [" + ThumbprintHex(der) + "]"
	if b, err := os.ReadFile(filepath.Join(dir, "own/certs", base+".der")); err != nil || !bytes.Equal(b, der) {
		t.Fatalf("own cert file: %v", err)
	}
	info, err := os.Stat(filepath.Join(dir, "own/private", base+".pem"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", info.Mode().Perm())
	}

	// Second start: same certificate and key.
	s2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	cert2, der2, key2, err := s2.LoadOrCreateOwn(uri, []string{"gw-host"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(der, der2) || !cert2.Equal(cert) || !key2.Equal(key) {
		t.Fatal("reload returned a different certificate or key")
	}

	// Our own certificate passes our own validation once trusted.
	if _, err := s2.Trust(der); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Validate(der, ValidateOptions{ApplicationURI: uri, Hostname: "192.168.1.5", MinKeyBits: 2048, MaxKeyBits: 4096}); err != nil {
		t.Fatal(err)
	}
}

func TestLoadOrCreateOwnReplacesExpired(t *testing.T) {
	now := time.Now()
	opts := Options{Logger: slog.New(slog.DiscardHandler), Validity: time.Hour, KeyBits: 1024, Now: func() time.Time { return now }}
	dir := filepath.Join(t.TempDir(), "pki")
	s, _ := Open(dir, opts)
	_, der1, _, err := s.LoadOrCreateOwn("urn:a", []string{"h"})
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour) // the first one has expired
	_, der2, _, err := s.LoadOrCreateOwn("urn:a", []string{"h"})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(der1, der2) {
		t.Fatal("expired own certificate was reused")
	}
	// Another application URI gets its own certificate.
	c3, _, _, err := s.LoadOrCreateOwn("urn:b", []string{"h"})
	if err != nil {
		t.Fatal(err)
	}
	if ApplicationURI(c3) != "urn:b" {
		t.Fatalf("URI %q", ApplicationURI(c3))
	}
}

func TestUntrustedGoesToRejectedThenTrusted(t *testing.T) {
	s := newStore(t, Options{})
	cert, _ := selfSigned(t, 0, nil)

	_, err := s.Validate(cert.Raw, serverOpts())
	if !errors.Is(err, ErrUntrusted) {
		t.Fatalf("err = %v, want ErrUntrusted", err)
	}
	var ue *UntrustedError
	if !errors.As(err, &ue) {
		t.Fatalf("err is %T, want *UntrustedError", err)
	}
	wantName := "PLC 1_Server [" + ThumbprintHex(cert.Raw) + "].der"
	if filepath.Base(ue.Path) != wantName || filepath.Dir(ue.Path) != s.Path(FolderRejected) {
		t.Fatalf("rejected path %q, want %s in %s", ue.Path, wantName, s.Path(FolderRejected))
	}
	if b, err := os.ReadFile(ue.Path); err != nil || !bytes.Equal(b, cert.Raw) {
		t.Fatalf("rejected file: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{ue.Path, s.Path(FolderTrusted), "gateway pki trust " + ThumbprintHex(cert.Raw)} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not contain %q", msg, want)
		}
	}

	// The operator moves the file to trusted/certs.
	if err := os.Rename(ue.Path, filepath.Join(s.Path(FolderTrusted), wantName)); err != nil {
		t.Fatal(err)
	}
	leaf, err := s.Validate(cert.Raw, serverOpts())
	if err != nil {
		t.Fatal(err)
	}
	if !leaf.Equal(cert) {
		t.Fatal("returned leaf differs")
	}

	// Untrusting it brings the refusal back.
	if err := s.Remove(FolderTrusted, strings.ToLower(ThumbprintHex(cert.Raw))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Validate(cert.Raw, serverOpts()); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("after removal: %v", err)
	}
	// TrustRejected does what `gateway pki trust` will do.
	p, err := s.TrustRejected(ThumbprintHex(cert.Raw))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(p) != s.Path(FolderTrusted) {
		t.Fatalf("trusted to %s", p)
	}
	if _, err := s.Validate(cert.Raw, serverOpts()); err != nil {
		t.Fatal(err)
	}
	if rej, _ := s.List(FolderRejected); len(rej) != 0 {
		t.Fatalf("rejected still holds %d", len(rej))
	}
	if _, err := s.TrustRejected("00"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown thumbprint: %v", err)
	}
}

func TestAutoAccept(t *testing.T) {
	s := newStore(t, Options{AutoAccept: true})
	cert, _ := selfSigned(t, 0, nil)
	if _, err := s.Validate(cert.Raw, serverOpts()); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(FolderTrusted)
	if err != nil || len(list) != 1 || list[0].Thumbprint != ThumbprintHex(cert.Raw) {
		t.Fatalf("trusted list %v %v", list, err)
	}
	// Auto-accept trusts, it does not waive the other checks.
	if _, err := s.Validate(cert.Raw, ValidateOptions{ApplicationURI: "urn:other"}); !errors.Is(err, ErrURIMismatch) {
		t.Fatalf("err = %v, want ErrURIMismatch", err)
	}
}

func TestExpiredAndNotYetValid(t *testing.T) {
	now := time.Now()
	s := newStore(t, Options{Now: func() time.Time { return now }})
	cert, _ := selfSigned(t, 0, func(r *CertRequest) {
		r.NotBefore = now.Add(-48 * time.Hour)
		r.Validity = 24 * time.Hour
	})
	if _, err := s.Trust(cert.Raw); err != nil {
		t.Fatal(err)
	}
	_, err := s.Validate(cert.Raw, serverOpts())
	if !errors.Is(err, ErrExpired) {
		t.Fatalf("err = %v, want ErrExpired", err)
	}
	var ce *CertError
	if !errors.As(err, &ce) || ce.Issuer || ce.Thumbprint != ThumbprintHex(cert.Raw) {
		t.Fatalf("CertError %+v", ce)
	}

	future, _ := selfSigned(t, 0, func(r *CertRequest) { r.NotBefore = now.Add(time.Hour) })
	s.Trust(future.Raw)
	if _, err := s.Validate(future.Raw, serverOpts()); !errors.Is(err, ErrNotYetValid) {
		t.Fatalf("err = %v, want ErrNotYetValid", err)
	}
}

func TestURIAndHostname(t *testing.T) {
	s := newStore(t, Options{})
	cert, _ := selfSigned(t, 0, nil)
	s.Trust(cert.Raw)

	cases := []struct {
		name string
		opts ValidateOptions
		want error
	}{
		{"match", serverOpts(), nil},
		{"ip", ValidateOptions{ApplicationURI: serverURI, Hostname: "10.0.0.1"}, nil},
		{"no checks", ValidateOptions{}, nil},
		{"uri", ValidateOptions{ApplicationURI: "urn:plc2:example:server"}, ErrURIMismatch},
		{"uri case", ValidateOptions{ApplicationURI: "URN:plc1:example:server"}, ErrURIMismatch},
		{"host", ValidateOptions{Hostname: "plc2"}, ErrHostnameMismatch},
		{"other ip", ValidateOptions{Hostname: "10.0.0.2"}, ErrHostnameMismatch},
		{"key too small for policy", ValidateOptions{MinKeyBits: 3072}, ErrKeySize},
		{"key too large for policy", ValidateOptions{MinKeyBits: 1024, MaxKeyBits: 1024}, ErrKeySize},
		{"client role", ValidateOptions{Role: PeerClient}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Validate(cert.Raw, c.opts)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func TestUseNotAllowed(t *testing.T) {
	s := newStore(t, Options{})
	key := testKey(t, 0)
	mk := func(ku x509.KeyUsage, eku []x509.ExtKeyUsage) []byte {
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(7),
			Subject:      pkix.Name{CommonName: "odd"},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
			KeyUsage:     ku,
			ExtKeyUsage:  eku,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		s.Trust(der)
		return der
	}
	all := x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageDataEncipherment
	cases := []struct {
		name string
		der  []byte
		role Role
		want error
	}{
		{"client-only as server", mk(all, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}), PeerServer, ErrUseNotAllowed},
		{"client-only as client", mk(all, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}), PeerClient, nil},
		{"any", mk(all, []x509.ExtKeyUsage{x509.ExtKeyUsageAny}), PeerServer, nil},
		{"no signature", mk(x509.KeyUsageKeyEncipherment|x509.KeyUsageDataEncipherment, nil), PeerServer, ErrUseNotAllowed},
		{"no encipherment", mk(x509.KeyUsageDigitalSignature, nil), PeerServer, ErrUseNotAllowed},
		{"no extensions", mk(0, nil), PeerServer, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Validate(c.der, ValidateOptions{Role: c.role})
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func TestTamperedSignature(t *testing.T) {
	s := newStore(t, Options{AutoAccept: true})
	cert, _ := selfSigned(t, 0, nil)
	der := bytes.Clone(cert.Raw)
	der[len(der)-1] ^= 1 // last byte of the signature
	if _, err := s.Validate(der, serverOpts()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	if _, err := s.Validate([]byte{0x30, 0x82, 0xff}, serverOpts()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("truncated: %v", err)
	}
	if list, _ := s.List(FolderTrusted); len(list) != 0 {
		t.Fatal("an invalid certificate was auto-accepted")
	}
}

func leafReq() CertRequest {
	return CertRequest{ApplicationURI: serverURI, CommonName: "PLC 1", Hosts: []string{"plc1"}}
}

func TestIssuerChain(t *testing.T) {
	ca, caKey := newCA(t, 1, "Example Root CA", nil, nil)
	leaf := issued(t, 2, leafReq(), ca, caKey)
	chain := append(bytes.Clone(leaf.Raw), ca.Raw...)

	t.Run("CA only in issuers is not trust", func(t *testing.T) {
		s := newStore(t, Options{})
		writeDER(t, s, FolderIssuers, "ca.der", ca.Raw)
		if _, err := s.Validate(leaf.Raw, serverOpts()); !errors.Is(err, ErrUntrusted) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("trusted CA", func(t *testing.T) {
		s := newStore(t, Options{})
		writeDER(t, s, FolderTrusted, "ca.der", ca.Raw)
		if _, err := s.Validate(leaf.Raw, serverOpts()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Validate(chain, serverOpts()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("missing issuer", func(t *testing.T) {
		s := newStore(t, Options{})
		_, err := s.Validate(leaf.Raw, serverOpts())
		var ue *UntrustedError
		if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "Example Root CA") {
			t.Fatalf("err = %v", err)
		}
		// Trusting the leaf itself is enough, even without its CA.
		writeDER(t, s, FolderTrusted, "leaf.der", leaf.Raw)
		if _, err := s.Validate(leaf.Raw, serverOpts()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("intermediate from issuers", func(t *testing.T) {
		inter, interKey := newCA(t, 3, "Example Plant CA", ca, caKey)
		leaf2 := issued(t, 2, leafReq(), inter, interKey)
		s := newStore(t, Options{})
		writeDER(t, s, FolderTrusted, "root.der", ca.Raw)
		if _, err := s.Validate(leaf2.Raw, serverOpts()); !errors.Is(err, ErrUntrusted) {
			t.Fatalf("without intermediate: %v", err)
		}
		writeDER(t, s, FolderIssuers, "inter.der", inter.Raw)
		if _, err := s.Validate(leaf2.Raw, serverOpts()); err != nil {
			t.Fatal(err)
		}
		// Sent by the peer instead of found in issuers/.
		s2 := newStore(t, Options{})
		writeDER(t, s2, FolderTrusted, "root.der", ca.Raw)
		if _, err := s2.Validate(append(bytes.Clone(leaf2.Raw), inter.Raw...), serverOpts()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("expired issuer", func(t *testing.T) {
		now := time.Now()
		s := newStore(t, Options{Now: func() time.Time { return now.Add(6 * 365 * 24 * time.Hour) }})
		writeDER(t, s, FolderTrusted, "ca.der", ca.Raw)
		young := issued(t, 2, CertRequest{ApplicationURI: serverURI, CommonName: "PLC 1", Hosts: []string{"plc1"},
			NotBefore: now.Add(5 * 365 * 24 * time.Hour)}, ca, caKey)
		_, err := s.Validate(young.Raw, serverOpts())
		var ce *CertError
		if !errors.Is(err, ErrExpired) || !errors.As(err, &ce) || !ce.Issuer || ce.Subject != "Example Root CA" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("issuer that is not a CA", func(t *testing.T) {
		notCA, notCAKey := selfSigned(t, 1, func(r *CertRequest) { r.CommonName = "Not A CA" })
		leaf3 := issued(t, 2, leafReq(), notCA, notCAKey)
		s := newStore(t, Options{})
		writeDER(t, s, FolderTrusted, "notca.der", notCA.Raw)
		_, err := s.Validate(leaf3.Raw, serverOpts())
		var ce *CertError
		if !errors.Is(err, ErrUseNotAllowed) || !errors.As(err, &ce) || !ce.Issuer {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("forged issuer name", func(t *testing.T) {
		// Same subject as the CA, different key: the leaf's signature does not verify.
		fake, _ := newCA(t, 3, "Example Root CA", nil, nil)
		s := newStore(t, Options{})
		writeDER(t, s, FolderTrusted, "fake.der", fake.Raw)
		if _, err := s.Validate(leaf.Raw, serverOpts()); !errors.Is(err, ErrInvalid) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestRevokedViaCRL(t *testing.T) {
	ca, caKey := newCA(t, 1, "Example Root CA", nil, nil)
	leaf := issued(t, 2, leafReq(), ca, caKey)
	other := issued(t, 3, leafReq(), ca, caKey)

	s := newStore(t, Options{})
	writeDER(t, s, FolderTrusted, "ca.der", ca.Raw)
	if _, err := s.Validate(leaf.Raw, serverOpts()); err != nil {
		t.Fatalf("before CRL: %v", err)
	}

	crl, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
		Number:     big.NewInt(1),
		ThisUpdate: time.Now().Add(-time.Minute),
		NextUpdate: time.Now().Add(24 * time.Hour),
		RevokedCertificateEntries: []x509.RevocationListEntry{
			{SerialNumber: leaf.SerialNumber, RevocationTime: time.Now().Add(-time.Minute)},
		},
	}, ca, caKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir(), "trusted/crl", "ca.crl"), crl, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = s.Validate(leaf.Raw, serverOpts())
	var ce *CertError
	if !errors.Is(err, ErrRevoked) || !errors.As(err, &ce) || ce.Issuer {
		t.Fatalf("err = %v, want ErrRevoked of the leaf", err)
	}
	if _, err := s.Validate(other.Raw, serverOpts()); err != nil {
		t.Fatalf("not revoked: %v", err)
	}

	// A CRL with the CA's name but not its signature is ignored.
	fake, fakeKey := newCA(t, 3, "Example Root CA", nil, nil)
	_ = fake
	s2 := newStore(t, Options{RequireCRL: true})
	writeDER(t, s2, FolderTrusted, "ca.der", ca.Raw)
	forged, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
		Number: big.NewInt(1), ThisUpdate: time.Now(), NextUpdate: time.Now().Add(time.Hour),
		RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: leaf.SerialNumber, RevocationTime: time.Now()}},
	}, fake, fakeKey)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s2.Dir(), "issuers/crl", "forged.crl"), forged, 0o644)
	if _, err := s2.Validate(leaf.Raw, serverOpts()); !errors.Is(err, ErrRevocationUnknown) {
		t.Fatalf("RequireCRL with only a forged CRL: %v", err)
	}
}

func TestRejectedFolderIsBounded(t *testing.T) {
	s := newStore(t, Options{MaxRejected: 2})
	for i := 0; i < 4; i++ {
		c, _ := selfSigned(t, 0, func(r *CertRequest) { r.CommonName = "peer" + string(rune('A'+i)) })
		if _, err := s.Validate(c.Raw, ValidateOptions{}); !errors.Is(err, ErrUntrusted) {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(s.Path(FolderRejected))
	if len(entries) != 2 {
		t.Fatalf("%d files in rejected, want 2", len(entries))
	}
}

func TestConcurrentValidate(t *testing.T) {
	s := newStore(t, Options{})
	trusted, _ := selfSigned(t, 0, nil)
	untrusted, _ := selfSigned(t, 1, func(r *CertRequest) { r.CommonName = "stranger" })
	s.Trust(trusted.Raw)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				if _, err := s.Validate(trusted.Raw, serverOpts()); err != nil {
					errs <- err
					return
				}
				if _, err := s.Validate(untrusted.Raw, serverOpts()); !errors.Is(err, ErrUntrusted) {
					errs <- fmt.Errorf("untrusted: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if rej, _ := s.List(FolderRejected); len(rej) != 1 {
		t.Fatalf("%d rejected files, want 1", len(rej))
	}
}

func TestSplitChain(t *testing.T) {
	a, _ := selfSigned(t, 0, nil)
	b, _ := newCA(t, 1, "CA", nil, nil)
	chain := append(bytes.Clone(a.Raw), b.Raw...)
	parts, err := SplitChain(chain)
	if err != nil || len(parts) != 2 || !bytes.Equal(parts[0], a.Raw) || !bytes.Equal(parts[1], b.Raw) {
		t.Fatalf("SplitChain: %d parts, %v", len(parts), err)
	}
	leaf, err := LeafDER(chain)
	if err != nil || !bytes.Equal(leaf, a.Raw) {
		t.Fatalf("LeafDER: %v", err)
	}
	certs, err := ParseChain(chain)
	if err != nil || len(certs) != 2 || !certs[1].Equal(b) {
		t.Fatalf("ParseChain: %v", err)
	}
	if Thumbprint(a.Raw) == Thumbprint(b.Raw) || len(ThumbprintHex(a.Raw)) != 40 {
		t.Fatal("thumbprints")
	}
	for _, bad := range [][]byte{nil, {0x30}, {0x31, 0x00}, {0x30, 0x80}, {0x30, 0x85, 1, 2, 3, 4, 5}, {0x30, 0x05, 1}, chain[:len(chain)-1]} {
		if _, err := SplitChain(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("SplitChain(% x): %v", bad[:min(len(bad), 8)], err)
		}
	}
	long := bytes.Repeat([]byte{0x30, 0x00}, MaxChainCerts+1)
	if _, err := SplitChain(long); !errors.Is(err, ErrInvalid) {
		t.Error("chain longer than MaxChainCerts accepted")
	}
}

func TestLeafDERAllocs(t *testing.T) {
	a, _ := selfSigned(t, 0, nil)
	if n := testing.AllocsPerRun(100, func() { _, _ = LeafDER(a.Raw) }); n != 0 {
		t.Fatalf("LeafDER allocates %v", n)
	}
}

func TestSanitizeName(t *testing.T) {
	for in, want := range map[string]string{
		"PLC 1/Server":          "PLC 1_Server",
		"../../etc/passwd":      "_.._etc_passwd",
		"":                      "unknown",
		"  ":                    "unknown",
		"Ünïcode":               "_n_code",
		strings.Repeat("a", 99): strings.Repeat("a", 64),
	} {
		if got := sanitizeName(in); got != want {
			t.Errorf("sanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzSplitChain fuzzes our DER framing. ParseChain adds only x509.ParseCertificate,
// which the Go project fuzzes, and which runs too slowly under coverage
// instrumentation (RSA key checks) to fuzz usefully here.
func FuzzSplitChain(f *testing.F) {
	// A stored certificate: generating an RSA key in every fuzz worker, under coverage
	// instrumentation, would take most of the fuzzing time.
	c, err := os.ReadFile("testdata/selfsigned.der")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(c)
	f.Add(append(bytes.Clone(c), c...))
	f.Add(c[:len(c)/2])
	f.Add([]byte{0x30, 0x84, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		parts, err := SplitChain(b)
		if err != nil {
			return
		}
		n := 0
		for _, p := range parts {
			n += len(p)
		}
		if n != len(b) {
			t.Fatalf("parts cover %d of %d bytes", n, len(b))
		}
		if leaf, err := LeafDER(b); err != nil || !bytes.Equal(leaf, parts[0]) {
			t.Fatalf("LeafDER disagrees with SplitChain: %v", err)
		}
	})
}
