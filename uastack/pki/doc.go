// Package pki manages the application instance certificate of the gateway and the
// trust lists it uses to decide whether a peer's certificate is acceptable
// (OPC UA Part 4 §6.1.3, Part 6 §6.2.2, Part 12 §F "directory store").
//
// A Store is a directory laid out like the stores of the other OPC UA stacks, so an
// operator can manage it with a file manager:
//
//	<dir>/own/certs       our certificate(s), DER (.der)
//	<dir>/own/private     our private key(s), PEM, mode 0600, same base name as the cert
//	<dir>/trusted/certs   peer certificates or CA certificates we trust
//	<dir>/trusted/crl     CRLs of the trusted CAs
//	<dir>/issuers/certs   CA certificates used to build chains, not trusted by themselves
//	<dir>/issuers/crl     CRLs of those CAs
//	<dir>/rejected/certs  certificates that were refused, for an operator to inspect
//
// Validation reads the trust lists from disk every time it runs: it happens once per
// connection attempt, and an operator who moves a file from rejected/certs to
// trusted/certs must not have to restart the gateway.
//
// Untrusted by default. A certificate that chains to nothing in trusted/ is refused
// with an *UntrustedError that names the copy written to rejected/certs and says how
// to trust it. Options.AutoAccept (development only) trusts such certificates instead
// and logs a warning.
//
// Errors. Every refusal wraps one of the exported sentinel errors (ErrUntrusted,
// ErrExpired, ErrRevoked …), each of which corresponds to one OPC UA status code
// (BadCertificateUntrusted, BadCertificateTimeInvalid, BadCertificateRevoked …); a
// *CertError says which certificate of the chain failed and whether it was an issuer,
// which selects the BadCertificateIssuer… variant of the code.
//
// Ownership. Certificates and keys returned by a Store belong to the caller; the
// Store keeps no reference to them. A Store is safe for concurrent use.
//
// Only the standard library's crypto is used.
package pki
