package pki

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Role is the role of the peer whose certificate is validated; it selects the
// extended key usage the certificate must allow.
type Role uint8

const (
	// PeerServer: we are the client, the certificate is a server's (serverAuth).
	PeerServer Role = iota
	// PeerClient: we are the server, the certificate is a client's (clientAuth).
	PeerClient
)

// ValidateOptions say what a peer certificate is validated against. Empty fields
// skip their check.
type ValidateOptions struct {
	// ApplicationURI is the ApplicationUri the peer claims (EndpointDescription.Server
	// or CreateSessionRequest.ClientDescription); a SubjectAltName URI must equal it.
	ApplicationURI string
	// Hostname is the host the peer was reached at (no port); a SubjectAltName DNS
	// name or IP address must match it.
	Hostname string
	// MinKeyBits and MaxKeyBits are the security policy's limits for the RSA key.
	MinKeyBits, MaxKeyBits int
	// Role of the peer; the zero value is PeerServer.
	Role Role
	// AutoAccept does for this call what Options.AutoAccept does for every
	// call: an untrusted certificate is written to trusted/certs once every
	// other check passed (a client whose own configuration says to accept the
	// server's certificate, with a Store shared by others that do not).
	AutoAccept bool
}

// maxChainDepth bounds chain building, so issuer loops in a store cannot hang us.
const maxChainDepth = 8

// Validate checks a peer's certificate, sent as concatenated DER certificates (leaf
// first, then optional issuers), in the order of OPC UA Part 4 Table 106:
// structure, chain building (with the sent issuers, issuers/certs and
// trusted/certs), signatures, key size, trust, validity periods, hostname,
// application URI, key usage, revocation. It returns the parsed leaf on success.
//
// A leaf that is not trusted (nor any CA it chains to) is copied to rejected/certs
// (once: a peer that retries does not rewrite it) and refused with an
// *UntrustedError naming the copy, unless Options.AutoAccept; then it is written to
// trusted/certs, but only after all the other checks passed.
func (s *Store) Validate(chain []byte, opts ValidateOptions) (*x509.Certificate, error) {
	certs, err := ParseChain(chain)
	if err != nil {
		return nil, err
	}
	leaf := certs[0]
	trusted := s.loadCerts(FolderTrusted)
	issuers := s.loadCerts(FolderIssuers)

	leafTrusted := containsCert(trusted, leaf)

	// Build the chain towards a self-signed root.
	candidates := make([]*x509.Certificate, 0, len(certs)-1+len(issuers)+len(trusted))
	candidates = append(candidates, certs[1:]...)
	candidates = append(candidates, issuers...)
	candidates = append(candidates, trusted...)
	path := []*x509.Certificate{leaf}
	incomplete := ""
	for cur := leaf; ; {
		if bytes.Equal(cur.RawSubject, cur.RawIssuer) &&
			cur.CheckSignature(cur.SignatureAlgorithm, cur.RawTBSCertificate, cur.Signature) == nil {
			break // self-signed root; its self-signature is verified
		}
		if len(path) > maxChainDepth {
			return nil, certErr(ErrInvalid, cur, len(path) > 1, fmt.Sprintf("chain longer than %d", maxChainDepth))
		}
		parent, bad, detail, sentinel := findIssuer(cur, candidates, path)
		if sentinel != nil {
			return nil, certErr(sentinel, bad, bad != leaf, detail)
		}
		if parent == nil {
			if bytes.Equal(cur.RawSubject, cur.RawIssuer) {
				return nil, certErr(ErrInvalid, cur, len(path) > 1, "self-signature does not verify")
			}
			incomplete = fmt.Sprintf("issuer %q not found in issuers/ or trusted/", cur.Issuer.CommonName)
			break
		}
		path = append(path, parent)
		cur = parent
	}

	if err := checkKeySize(leaf, opts.MinKeyBits, opts.MaxKeyBits); err != nil {
		return nil, err
	}

	// Trust: the leaf itself, or a CA of a complete chain, is in trusted/certs. An
	// explicitly trusted leaf needs no complete chain: trusting these exact bytes is
	// the strongest statement an operator can make.
	isTrusted := leafTrusted
	if !isTrusted && incomplete == "" {
		for _, c := range path[1:] {
			if containsCert(trusted, c) {
				isTrusted = true
				break
			}
		}
	}
	if !isTrusted {
		reason := incomplete
		if reason == "" {
			reason = "neither it nor an issuer is in trusted/certs"
		}
		if !s.opts.AutoAccept && !opts.AutoAccept {
			e := &UntrustedError{
				Subject:    leaf.Subject.CommonName,
				Thumbprint: ThumbprintHex(leaf.Raw),
				Reason:     reason,
				TrustedDir: s.Path(FolderTrusted),
			}
			var saved bool
			e.Path, saved, e.SaveErr = s.reject(leaf)
			// Warn once per certificate (when it is saved); a peer retrying
			// with it would flood the log otherwise.
			lvl := slog.LevelWarn
			if !saved && e.SaveErr == nil {
				lvl = slog.LevelDebug
			}
			s.log.Log(context.Background(), lvl, "pki: refused untrusted certificate", "subject", e.Subject,
				"thumbprint", e.Thumbprint, "reason", reason, "rejectedFile", e.Path)
			return nil, e
		}
		// AutoAccept: the certificate is trusted below, once every other check
		// passed. Auto-accepting waives the trust list, nothing else: an expired
		// certificate, or one for another application, must not land in trusted/.
	}

	now := s.opts.Now()
	for i, c := range path {
		if now.Before(c.NotBefore) {
			return nil, certErr(ErrNotYetValid, c, i > 0, "valid from "+c.NotBefore.UTC().Format(time.RFC3339))
		}
		if now.After(c.NotAfter) {
			return nil, certErr(ErrExpired, c, i > 0, "valid until "+c.NotAfter.UTC().Format(time.RFC3339))
		}
	}

	if h := strings.Trim(opts.Hostname, "[]"); h != "" {
		if err := leaf.VerifyHostname(h); err != nil {
			return nil, certErr(ErrHostnameMismatch, leaf, false,
				fmt.Sprintf("%q not in %v %v", h, leaf.DNSNames, leaf.IPAddresses))
		}
	}
	if opts.ApplicationURI != "" && !hasURI(leaf, opts.ApplicationURI) {
		return nil, certErr(ErrURIMismatch, leaf, false,
			fmt.Sprintf("expected %q, certificate has %q", opts.ApplicationURI, sanURIs(leaf)))
	}
	if err := checkUsage(leaf, opts.Role); err != nil {
		return nil, err
	}
	if err := s.checkRevocation(path); err != nil {
		return nil, err
	}
	if !isTrusted {
		p, err := s.Trust(leaf.Raw)
		s.log.Warn("pki: AUTO-ACCEPTED untrusted certificate (development setting; do not use in production)",
			"subject", leaf.Subject.CommonName, "thumbprint", ThumbprintHex(leaf.Raw),
			"trustedFile", p, "err", err)
	}
	return leaf, nil
}

// findIssuer returns the candidate that issued c, or nil if none did. When
// candidates carry c's issuer name but none signed it, sentinel and detail say why.
// bad is the certificate at fault: c for a bad signature, the issuer for a misuse.
func findIssuer(c *x509.Certificate, candidates, path []*x509.Certificate) (parent, bad *x509.Certificate, detail string, sentinel error) {
	for _, p := range candidates {
		if !bytes.Equal(p.RawSubject, c.RawIssuer) || containsCert(path, p) {
			continue
		}
		err := c.CheckSignatureFrom(p)
		if err == nil {
			return p, nil, "", nil
		}
		if sentinel == nil {
			var cv x509.ConstraintViolationError
			if errors.As(err, &cv) {
				bad, sentinel, detail = p, ErrUseNotAllowed, fmt.Sprintf("issuer %q is not a CA allowed to sign certificates", p.Subject.CommonName)
			} else {
				bad, sentinel, detail = c, ErrInvalid, fmt.Sprintf("signature by %q does not verify: %v", p.Subject.CommonName, err)
			}
		}
	}
	return nil, bad, detail, sentinel
}

func certErr(err error, c *x509.Certificate, issuer bool, detail string) *CertError {
	return &CertError{Err: err, Subject: c.Subject.CommonName, Thumbprint: ThumbprintHex(c.Raw), Issuer: issuer, Detail: detail}
}

func checkKeySize(c *x509.Certificate, minBits, maxBits int) error {
	if minBits == 0 && maxBits == 0 {
		return nil
	}
	pub, ok := c.PublicKey.(*rsa.PublicKey)
	if !ok {
		return certErr(ErrKeySize, c, false, fmt.Sprintf("key is %T, the security policy needs RSA", c.PublicKey))
	}
	bits := pub.N.BitLen()
	if (minBits > 0 && bits < minBits) || (maxBits > 0 && bits > maxBits) {
		return certErr(ErrKeySize, c, false, fmt.Sprintf("RSA key has %d bits, the security policy allows %d to %d", bits, minBits, maxBits))
	}
	return nil
}

// checkUsage applies Part 6 §6.2.2: the key must be usable for signatures and for
// key or data encryption; if extended key usage is present it must allow the peer's
// role. Absent extensions restrict nothing (RFC 5280).
func checkUsage(c *x509.Certificate, role Role) error {
	if ku := c.KeyUsage; ku != 0 {
		if ku&x509.KeyUsageDigitalSignature == 0 {
			return certErr(ErrUseNotAllowed, c, false, "key usage lacks digitalSignature")
		}
		if ku&(x509.KeyUsageKeyEncipherment|x509.KeyUsageDataEncipherment) == 0 {
			return certErr(ErrUseNotAllowed, c, false, "key usage lacks keyEncipherment and dataEncipherment")
		}
	}
	if len(c.ExtKeyUsage) == 0 && len(c.UnknownExtKeyUsage) == 0 {
		return nil
	}
	want, name := x509.ExtKeyUsageServerAuth, "serverAuth"
	if role == PeerClient {
		want, name = x509.ExtKeyUsageClientAuth, "clientAuth"
	}
	for _, u := range c.ExtKeyUsage {
		if u == want || u == x509.ExtKeyUsageAny {
			return nil
		}
	}
	return certErr(ErrUseNotAllowed, c, false, "extended key usage lacks "+name)
}

// checkRevocation looks each certificate of the path up in the CRLs its issuer
// signed, from trusted/crl and issuers/crl.
func (s *Store) checkRevocation(path []*x509.Certificate) error {
	if len(path) < 2 {
		return nil // a self-signed certificate has nobody to revoke it
	}
	crls := slices.Concat(s.loadCRLs(dirTrustedCRL), s.loadCRLs(dirIssuerCRL))
	for i := 0; i < len(path)-1; i++ {
		c, issuer := path[i], path[i+1]
		found := false
		for _, crl := range crls {
			if !bytes.Equal(crl.RawIssuer, issuer.RawSubject) || crl.CheckSignatureFrom(issuer) != nil {
				continue
			}
			found = true
			for _, r := range crl.RevokedCertificateEntries {
				if r.SerialNumber != nil && r.SerialNumber.Cmp(c.SerialNumber) == 0 {
					return certErr(ErrRevoked, c, i > 0,
						fmt.Sprintf("revoked by %q on %s", issuer.Subject.CommonName, r.RevocationTime.UTC().Format(time.RFC3339)))
				}
			}
		}
		if !found {
			if s.opts.RequireCRL {
				return certErr(ErrRevocationUnknown, c, i > 0, fmt.Sprintf("no CRL of %q in trusted/crl or issuers/crl", issuer.Subject.CommonName))
			}
			s.log.Debug("pki: no CRL for issuer; revocation not checked", "issuer", issuer.Subject.CommonName,
				"subject", c.Subject.CommonName)
		}
	}
	return nil
}

func containsCert(list []*x509.Certificate, c *x509.Certificate) bool {
	for _, x := range list {
		if bytes.Equal(x.Raw, c.Raw) {
			return true
		}
	}
	return false
}

// loadCerts returns the certificates of trusted/ or issuers/ (cached until the
// folder changes, see cache.go); unreadable files are skipped with a warning, so
// one bad file does not take the whole trust list down.
func (s *Store) loadCerts(f Folder) []*x509.Certificate {
	return loadFolder(s, s.certCache(f), s.Path(f), readCerts, "certificate")
}

// loadCRLs returns the CRLs of trusted/crl or issuers/crl, cached like loadCerts.
func (s *Store) loadCRLs(rel string) []*x509.RevocationList {
	return loadFolder(s, s.crlCache(rel), s.path(rel), readCRLs, "CRL")
}
