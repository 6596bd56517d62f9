package server

import (
	"bytes"
	"crypto/x509"
	"errors"
	"net"
	"slices"
	"testing"

	"github.com/uagate/gateway/uastack/pki"
)

// TestUseStore: the certificate is created once in the store for the names
// the server is reached by, and client certificates are checked against the
// store's trust list.
func TestUseStore(t *testing.T) {
	dir := t.TempDir()
	store, err := pki.Open(dir, pki.Options{ApplicationName: DefaultApplicationName})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Address: "192.0.2.7:4840"}
	if err := cfg.UseStore(store); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(cfg.Certificate)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cert.DNSNames, "localhost") || !slices.ContainsFunc(cert.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("192.0.2.7")) }) ||
		pki.ApplicationURI(cert) != DefaultApplicationURI || cfg.Key == nil {
		t.Errorf("certificate for %v %v, %s", cert.DNSNames, cert.IPAddresses, pki.ApplicationURI(cert))
	}
	again := &Config{Address: "0.0.0.0:4840"}
	if err := again.UseStore(store); err != nil || !bytes.Equal(again.Certificate, cfg.Certificate) {
		t.Errorf("a second server on the store has another certificate (%v)", err)
	}

	client, _, err := pki.CreateCertificate(pki.CertRequest{ApplicationURI: "urn:test:client", CommonName: "client"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateClientCert(client); !errors.Is(err, pki.ErrUntrusted) {
		t.Errorf("an unknown client: %v, want ErrUntrusted", err)
	}
	if _, err := store.Trust(client); err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateClientCert(client); err != nil {
		t.Errorf("a trusted client: %v", err)
	}
}
