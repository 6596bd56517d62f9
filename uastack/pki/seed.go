package pki

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Seed directories: what Import copies from, each optional.
const (
	SeedOwn        = "own"         // the own certificate and its key: tls.crt + tls.key (a TLS Secret), or <name>.crt/.der/.pem + <name>.key
	SeedTrusted    = "trusted"     // trusted certificates (DER or PEM, any name)
	SeedIssuers    = "issuers"     // CA certificates that are not trusted by themselves
	SeedTrustedCRL = "trusted-crl" // CRLs of trusted CAs
	SeedIssuerCRL  = "issuers-crl" // CRLs of the issuers
)

// ImportResult counts what Import copied.
type ImportResult struct {
	Own, Trusted, Issuers, CRLs int
}

// Import copies a seed directory into the store: an own certificate with its
// private key, trusted and issuer certificates and CRLs, laid out in the
// sub-directories named by the Seed constants (a Kubernetes Secret mounted
// per sub-directory, for instance). It is how several replicas get the same
// application certificate — one that every server trusts once — and the
// same trust lists. Files are written under the store's own names, so
// importing the same seed again changes nothing; what the store holds
// besides is kept. Entries starting with "." (a Secret volume's internals)
// are skipped.
func (s *Store) Import(seed string) (ImportResult, error) {
	var res ImportResult
	if _, err := os.Stat(seed); err != nil {
		return res, fmt.Errorf("pki: seed: %w", err)
	}
	n, err := s.importOwn(filepath.Join(seed, SeedOwn))
	res.Own = n
	if err != nil {
		return res, err
	}
	for _, c := range []struct {
		sub string
		f   Folder
		n   *int
	}{{SeedTrusted, FolderTrusted, &res.Trusted}, {SeedIssuers, FolderIssuers, &res.Issuers}} {
		err := eachSeedFile(filepath.Join(seed, c.sub), func(p string) error {
			certs, err := readCerts(p)
			if err != nil {
				return fmt.Errorf("pki: seed %s: %w", p, err)
			}
			for _, cert := range certs {
				if err := s.write(filepath.Join(s.Path(c.f), fileBase(cert)+".der"), cert.Raw, 0o644); err != nil {
					return err
				}
				*c.n++
			}
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	for _, c := range []struct{ sub, dir string }{{SeedTrustedCRL, dirTrustedCRL}, {SeedIssuerCRL, dirIssuerCRL}} {
		err := eachSeedFile(filepath.Join(seed, c.sub), func(p string) error {
			crls, err := readCRLs(p)
			if err != nil || len(crls) == 0 {
				return fmt.Errorf("pki: seed %s: not a CRL: %v", p, err)
			}
			for i, crl := range crls {
				name := fmt.Sprintf("%s-%d.crl", strings.TrimSuffix(filepath.Base(p), filepath.Ext(p)), i)
				if err := s.write(filepath.Join(s.path(c.dir), name), crl.Raw, 0o644); err != nil {
					return err
				}
				res.CRLs++
			}
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

func (s *Store) write(p string, data []byte, perm os.FileMode) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return writeFileAtomic(p, data, perm)
}

// importOwn copies the certificate and key pairs of dir into own/.
func (s *Store) importOwn(dir string) (int, error) {
	n := 0
	err := eachSeedFile(dir, func(p string) error {
		ext := filepath.Ext(p)
		if ext == ".key" || filepath.Base(p) == "ca.crt" {
			return nil // a key goes with its certificate; ca.crt of a TLS Secret is no own certificate
		}
		keyPath := strings.TrimSuffix(p, ext) + ".key"
		if _, err := os.Stat(keyPath); err != nil {
			return fmt.Errorf("pki: seed %s: no private key %s beside it", p, filepath.Base(keyPath))
		}
		certs, err := readCerts(p)
		if err != nil || len(certs) == 0 {
			return fmt.Errorf("pki: seed %s: not a certificate: %v", p, err)
		}
		key, err := readKey(keyPath)
		if err != nil {
			return fmt.Errorf("pki: seed %s: %w", keyPath, err)
		}
		cert := certs[0]
		if pub, ok := cert.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
			return fmt.Errorf("pki: seed %s: %w", p, errors.New("the private key does not belong to the certificate"))
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return fmt.Errorf("pki: seed %s: %w", keyPath, err)
		}
		base := fileBase(cert)
		// The key first, as LoadOrCreateOwn writes them.
		if err := s.write(filepath.Join(s.path(dirOwnPrivate), base+".pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return err
		}
		if err := s.write(filepath.Join(s.Path(FolderOwn), base+".der"), cert.Raw, 0o644); err != nil {
			return err
		}
		n++
		return nil
	})
	return n, err
}

// eachSeedFile calls fn with every regular file of dir (none when dir does
// not exist), skipping names that start with ".".
func eachSeedFile(dir string, fn func(string) error) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pki: seed: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			continue // a Secret volume's files are symbolic links: Stat follows them
		}
		if err := fn(p); err != nil {
			return err
		}
	}
	return nil
}
