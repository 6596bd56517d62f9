package pki

import (
	"errors"
	"fmt"
)

// Sentinel errors. Validation errors wrap exactly one of them (test with errors.Is);
// the comment names the OPC UA status code each one maps to.
var (
	// ErrInvalid: the certificate cannot be parsed, or a signature in its chain does
	// not verify. BadCertificateInvalid.
	ErrInvalid = errors.New("certificate invalid")
	// ErrUntrusted: neither the certificate nor any CA it chains to is in
	// trusted/certs, or its chain is incomplete. BadCertificateUntrusted.
	ErrUntrusted = errors.New("certificate untrusted")
	// ErrExpired: the certificate's validity ended. BadCertificateTimeInvalid
	// (BadCertificateIssuerTimeInvalid when CertError.Issuer).
	ErrExpired = errors.New("certificate expired")
	// ErrNotYetValid: the certificate's validity has not started.
	// BadCertificateTimeInvalid (BadCertificateIssuerTimeInvalid when CertError.Issuer).
	ErrNotYetValid = errors.New("certificate not yet valid")
	// ErrRevoked: a CRL of the issuer lists the certificate. BadCertificateRevoked
	// (BadCertificateIssuerRevoked when CertError.Issuer).
	ErrRevoked = errors.New("certificate revoked")
	// ErrRevocationUnknown: Options.RequireCRL is set and no CRL of the issuer was
	// found. BadCertificateRevocationUnknown (…IssuerRevocationUnknown when Issuer).
	ErrRevocationUnknown = errors.New("certificate revocation status unknown")
	// ErrURIMismatch: no SubjectAltName URI equals the expected ApplicationUri.
	// BadCertificateUriInvalid.
	ErrURIMismatch = errors.New("certificate application URI mismatch")
	// ErrHostnameMismatch: no SubjectAltName DNS name or IP address matches the host
	// the peer was reached at. BadCertificateHostNameInvalid.
	ErrHostnameMismatch = errors.New("certificate hostname mismatch")
	// ErrUseNotAllowed: key usage or extended key usage forbid the use, or an issuer
	// is not a CA. BadCertificateUseNotAllowed (…IssuerUseNotAllowed when Issuer).
	ErrUseNotAllowed = errors.New("certificate use not allowed")
	// ErrKeySize: the public key is not RSA or its size is outside the limits of the
	// security policy. BadSecurityPolicyRejected.
	ErrKeySize = errors.New("certificate key size not allowed by security policy")
	// ErrNotFound: no certificate with the given thumbprint is in the folder.
	ErrNotFound = errors.New("certificate not found")
)

// CertError is a refusal of one certificate of a chain. It unwraps to its sentinel.
type CertError struct {
	Err        error  // one of the sentinel errors
	Subject    string // subject common name of the certificate that failed
	Thumbprint string // its SHA-1 thumbprint, upper-case hex
	Issuer     bool   // the certificate that failed is an issuer, not the leaf
	Detail     string // human-readable specifics
}

func (e *CertError) Error() string {
	what := "certificate"
	if e.Issuer {
		what = "issuer certificate"
	}
	s := fmt.Sprintf("pki: %s %q [%s]: %v", what, e.Subject, e.Thumbprint, e.Err)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *CertError) Unwrap() error { return e.Err }

// UntrustedError is the refusal of a certificate that is not trusted. It unwraps to
// ErrUntrusted. Path is the copy written to rejected/certs ("" if writing it failed,
// then SaveErr says why).
type UntrustedError struct {
	Subject    string
	Thumbprint string
	Reason     string // why it is not trusted
	Path       string // copy in rejected/certs
	TrustedDir string // where to move it to trust it
	SaveErr    error
}

func (e *UntrustedError) Error() string {
	s := fmt.Sprintf("pki: certificate %q [%s] is not trusted", e.Subject, e.Thumbprint)
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	if e.Path != "" {
		s += fmt.Sprintf("; it was saved to %s; to trust it, move it to %s or run `gateway pki trust %s`",
			e.Path, e.TrustedDir, e.Thumbprint)
	} else {
		s += fmt.Sprintf("; to trust it, copy it to %s", e.TrustedDir)
		if e.SaveErr != nil {
			s += fmt.Sprintf(" (saving it to rejected/ failed: %v)", e.SaveErr)
		}
	}
	return s
}

func (e *UntrustedError) Unwrap() error { return ErrUntrusted }
