package pki

import (
	"crypto/rand"
	"crypto/x509"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestAutoAcceptOnlyAfterChecks: AutoAccept waives the trust list, nothing else. A
// certificate that fails another check is refused and is not written to trusted/,
// so the next connection cannot skip the check by finding it trusted.
func TestAutoAcceptOnlyAfterChecks(t *testing.T) {
	now := time.Now()
	s := newStore(t, Options{AutoAccept: true, Now: func() time.Time { return now }})
	expired, _ := selfSigned(t, 0, func(r *CertRequest) {
		r.CommonName = "expired"
		r.NotBefore = now.Add(-48 * time.Hour)
		r.Validity = 24 * time.Hour
	})
	future, _ := selfSigned(t, 0, func(r *CertRequest) { r.CommonName = "future"; r.NotBefore = now.Add(time.Hour) })
	good, _ := selfSigned(t, 1, nil)
	cases := []struct {
		name string
		der  []byte
		opts ValidateOptions
		want error
	}{
		{"expired", expired.Raw, serverOpts(), ErrExpired},
		{"not yet valid", future.Raw, serverOpts(), ErrNotYetValid},
		{"other application", good.Raw, ValidateOptions{ApplicationURI: "urn:someone:else"}, ErrURIMismatch},
		{"other host", good.Raw, ValidateOptions{ApplicationURI: serverURI, Hostname: "plc9"}, ErrHostnameMismatch},
		{"key too small", good.Raw, ValidateOptions{MinKeyBits: 4096}, ErrKeySize},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := s.Validate(c.der, c.opts); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if list, _ := s.List(FolderTrusted); len(list) != 0 {
				t.Fatalf("refused certificate auto-accepted into trusted/: %s", list[0].Path)
			}
		})
	}

	// Usage: a client-only certificate presented by a server.
	key := testKey(t, 2)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(9), NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	clientOnly, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Validate(clientOnly, ValidateOptions{Role: PeerServer}); !errors.Is(err, ErrUseNotAllowed) {
		t.Fatalf("client-only as server: %v, want ErrUseNotAllowed", err)
	}
	if list, _ := s.List(FolderTrusted); len(list) != 0 {
		t.Fatal("certificate with the wrong usage auto-accepted")
	}

	// One that passes everything is accepted and trusted from then on.
	if _, err := s.Validate(good.Raw, serverOpts()); err != nil {
		t.Fatal(err)
	}
	list, _ := s.List(FolderTrusted)
	if len(list) != 1 || list[0].Thumbprint != ThumbprintHex(good.Raw) {
		t.Fatalf("trusted: %+v", list)
	}
	if rej, _ := s.List(FolderRejected); len(rej) != 0 {
		t.Fatalf("auto-accept wrote %d files to rejected/", len(rej))
	}
}

// TestTrustListCached: validations do not re-read the trust lists while they are
// unchanged, and see every change an operator makes: a file added, replaced in
// place, removed.
func TestTrustListCached(t *testing.T) {
	s := newStore(t, Options{})
	a, _ := selfSigned(t, 0, nil)
	b, _ := selfSigned(t, 1, func(r *CertRequest) { r.CommonName = "PLC 2" })
	writeDER(t, s, FolderTrusted, "a.der", a.Raw)

	if _, err := s.Validate(a.Raw, serverOpts()); err != nil {
		t.Fatal(err)
	}
	loads := s.folderLoads.Load()
	if loads == 0 {
		t.Fatal("no folder loaded")
	}
	for range 100 {
		if _, err := s.Validate(a.Raw, serverOpts()); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.folderLoads.Load(); got != loads {
		t.Fatalf("100 validations of an unchanged store reloaded folders %d times", got-loads)
	}

	// Added: b is trusted at once.
	if _, err := s.Validate(b.Raw, serverOpts()); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("b before trusting: %v", err)
	}
	writeDER(t, s, FolderTrusted, "b.der", b.Raw)
	if _, err := s.Validate(b.Raw, serverOpts()); err != nil {
		t.Fatalf("b after adding it: %v", err)
	}
	if got := s.folderLoads.Load(); got != loads+1 {
		t.Fatalf("adding a file caused %d reloads, want 1", got-loads)
	}

	// Replaced in place (same name, the directory listing unchanged): a.der now
	// holds b, so a is no longer trusted.
	writeDER(t, s, FolderTrusted, "a.der", b.Raw)
	if _, err := s.Validate(a.Raw, serverOpts()); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("a after its file was overwritten: %v", err)
	}

	// Removed.
	if err := os.Remove(filepath.Join(s.Path(FolderTrusted), "b.der")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(s.Path(FolderTrusted), "a.der")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Validate(b.Raw, serverOpts()); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("b after removing it: %v", err)
	}
}

// TestCRLReplacedInPlace: a CRL copied over the old one (as a cron job would) is
// seen by the next validation.
func TestCRLReplacedInPlace(t *testing.T) {
	ca, caKey := newCA(t, 1, "Example Root CA", nil, nil)
	leaf := issued(t, 2, leafReq(), ca, caKey)
	s := newStore(t, Options{})
	writeDER(t, s, FolderTrusted, "ca.der", ca.Raw)
	crlFile := filepath.Join(s.Dir(), "trusted/crl", "ca.crl")
	mkCRL := func(n int64, revoked ...*x509.Certificate) []byte {
		t.Helper()
		var entries []x509.RevocationListEntry
		for _, c := range revoked {
			entries = append(entries, x509.RevocationListEntry{SerialNumber: c.SerialNumber, RevocationTime: time.Now().Add(-time.Minute)})
		}
		der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
			Number: big.NewInt(n), ThisUpdate: time.Now().Add(-time.Minute), NextUpdate: time.Now().Add(time.Hour),
			RevokedCertificateEntries: entries,
		}, ca, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	if err := os.WriteFile(crlFile, mkCRL(1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Validate(leaf.Raw, serverOpts()); err != nil {
		t.Fatalf("with an empty CRL: %v", err)
	}
	// os.WriteFile truncates and rewrites the same inode: the folder's listing
	// stays the same, only the file's size and mtime change.
	if err := os.WriteFile(crlFile, mkCRL(2, leaf), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Validate(leaf.Raw, serverOpts()); !errors.Is(err, ErrRevoked) {
		t.Fatalf("after the CRL update: %v, want ErrRevoked", err)
	}
}

// TestRejectedWrittenOnce: a peer that retries with the same untrusted certificate
// 100 times costs one file in rejected/, written once.
func TestRejectedWrittenOnce(t *testing.T) {
	s := newStore(t, Options{})
	c, _ := selfSigned(t, 0, nil)
	var first os.FileInfo
	for i := range 100 {
		_, err := s.Validate(c.Raw, serverOpts())
		var ue *UntrustedError
		if !errors.As(err, &ue) || ue.Path == "" {
			t.Fatalf("attempt %d: %v", i, err)
		}
		info, err := os.Stat(ue.Path)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = info
		} else if !os.SameFile(first, info) || !info.ModTime().Equal(first.ModTime()) {
			t.Fatalf("attempt %d rewrote %s", i, ue.Path)
		}
	}
	if n := s.rejectSaves.Load(); n != 1 {
		t.Fatalf("%d writes to rejected/, want 1", n)
	}
	entries, _ := os.ReadDir(s.Path(FolderRejected))
	if len(entries) != 1 {
		t.Fatalf("%d files in rejected/, want 1", len(entries))
	}

	// An operator who deletes the copy gets it back on the next refusal; one
	// whose content was damaged is rewritten.
	p := filepath.Join(s.Path(FolderRejected), entries[0].Name())
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Validate(c.Raw, serverOpts()); !errors.Is(err, ErrUntrusted) {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != string(c.Raw) {
		t.Fatalf("not saved again after removal: %v", err)
	}
	damaged := append([]byte(nil), c.Raw...)
	damaged[10] ^= 0xff
	if err := os.WriteFile(p, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Validate(c.Raw, serverOpts()); !errors.Is(err, ErrUntrusted) {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != string(c.Raw) {
		t.Fatal("damaged copy in rejected/ not rewritten")
	}
	if n := s.rejectSaves.Load(); n != 3 {
		t.Fatalf("%d writes to rejected/, want 3", n)
	}
}
