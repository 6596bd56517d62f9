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
// Validation keeps the parsed trust lists (trusted/ and issuers/, certificates and
// CRLs) in memory and checks before each use, with a stat of every file, whether a
// folder changed (a file added, removed, or rewritten in place); only then is it
// parsed again. An operator who moves a file from rejected/certs to trusted/certs,
// or replaces a CRL, need not restart the gateway, and a peer that opens many
// secure channels does not make us parse the trust list for each.
//
// Untrusted by default. A certificate that chains to nothing in trusted/ is refused
// with an *UntrustedError that names the copy written to rejected/certs and says how
// to trust it; the copy is written once, however often the peer retries.
// Options.AutoAccept (development only) trusts such certificates instead and logs a
// warning, but only once every other check (validity, hostname, application URI,
// key usage, revocation) passed: it waives the trust list, nothing else.
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
