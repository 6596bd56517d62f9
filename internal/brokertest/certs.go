package brokertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are PEM files for a broker's TLS listener and its clients: a CA,
// a server certificate for 127.0.0.1 and localhost signed by it, and a
// client certificate signed by it. Other is a client certificate from
// another CA, which a broker that verifies clients must refuse.
type TLSFiles struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	OtherCert, OtherKey   string // signed by a CA the broker does not know
	ClientCommonName, Dir string
}

// NewTLSFiles writes a fresh CA and its certificates into a test directory.
func NewTLSFiles(t testing.TB) *TLSFiles {
	t.Helper()
	dir := t.TempDir()
	f := &TLSFiles{Dir: dir, ClientCommonName: "uagate-test-client"}
	caKey, caCert := newCA(t, "uagate test CA")
	f.CA = filepath.Join(dir, "ca.pem")
	writePEM(t, f.CA, "CERTIFICATE", caCert.Raw)

	f.ServerCert, f.ServerKey = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	issue(t, caCert, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, f.ServerCert, f.ServerKey)

	f.ClientCert, f.ClientKey = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	issue(t, caCert, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: f.ClientCommonName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, f.ClientCert, f.ClientKey)

	otherKey, otherCA := newCA(t, "some other CA")
	f.OtherCert, f.OtherKey = filepath.Join(dir, "other.pem"), filepath.Join(dir, "other.key")
	issue(t, otherCA, otherKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "stranger"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, f.OtherCert, f.OtherKey)
	return f
}

func nextSerial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func newCA(t testing.TB, name string) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}

func issue(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, tmpl *x509.Certificate, certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = nextSerial(t)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certPath, "CERTIFICATE", der)
	writePEM(t, keyPath, "PRIVATE KEY", keyDER)
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	writeFile(t, path, string(pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})))
}
