package client

import (
	"errors"
	"fmt"
	"net"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
)

// Sentinel errors. Each wraps the OPC UA status code it corresponds to, so both
// errors.Is(err, ErrX) and errors.Is(err, ua.StatusBadX) hold (ErrGaveUp is
// the client's own and wraps none).
var (
	// ErrClosed: the client was closed. BadSessionClosed.
	ErrClosed = fmt.Errorf("client: closed: %w", ua.StatusBadSessionClosed)
	// ErrNotConnected: the managed session is not connected right now; what
	// was asked is done once it is (subscriptions and items are created on
	// connect). BadNotConnected.
	ErrNotConnected = fmt.Errorf("client: not connected: %w", ua.StatusBadNotConnected)
	// ErrGaveUp: a managed session stopped reconnecting because
	// Backoff.MaxElapsed passed without a connection.
	ErrGaveUp = errors.New("client: gave up reconnecting")
	// ErrEndpointURL: the endpoint URL is not opc.tcp://host[:port][/path].
	// BadTcpEndpointUrlInvalid.
	ErrEndpointURL = fmt.Errorf("client: invalid endpoint URL: %w", ua.StatusBadTcpEndpointUrlInvalid)
	// ErrNoEndpoint: the server offers no endpoint that meets the configuration
	// (security policy, mode, user token type, transport). BadSecurityPolicyRejected.
	ErrNoEndpoint = fmt.Errorf("client: no matching endpoint: %w", ua.StatusBadSecurityPolicyRejected)
	// ErrServerCertificate: the certificate in CreateSession differs from the one
	// of the endpoint, or is missing. BadCertificateInvalid.
	ErrServerCertificate = fmt.Errorf("client: server certificate does not match the endpoint's: %w", ua.StatusBadCertificateInvalid)
	// ErrServerSignature: the server's signature over our certificate and nonce
	// does not verify, or uses another algorithm than the policy's.
	// BadApplicationSignatureInvalid.
	ErrServerSignature = fmt.Errorf("client: server signature invalid: %w", ua.StatusBadApplicationSignatureInvalid)
	// ErrServerNonce: the server nonce is shorter than 32 bytes on a secure
	// endpoint, or missing where a password must be encrypted. BadNonceInvalid.
	ErrServerNonce = fmt.Errorf("client: invalid server nonce: %w", ua.StatusBadNonceInvalid)
	// ErrServerEndpoints: the endpoints the server returned in CreateSession
	// differ from those of GetEndpoints (*EndpointMismatchError unwraps to it),
	// a sign of a downgrade attack. BadSecurityChecksFailed.
	ErrServerEndpoints = fmt.Errorf("client: endpoint missing from CreateSession's endpoint list: %w", ua.StatusBadSecurityChecksFailed)
	// ErrBadResponse: the server answered with the wrong number of results or
	// otherwise broke the service contract. BadUnexpectedError.
	ErrBadResponse = fmt.Errorf("client: malformed response: %w", ua.StatusBadUnexpectedError)
	// ErrUnknownSequence: Subscription.Ack of a number that is not waiting for
	// an acknowledgement (never delivered, acknowledged already, or from before
	// the subscription was created anew); nothing changed.
	// BadSequenceNumberUnknown.
	ErrUnknownSequence = fmt.Errorf("client: sequence number not waiting for an acknowledgement: %w", ua.StatusBadSequenceNumberUnknown)
	// ErrNotManualAck: Subscription.Ack on a subscription whose AckMode is
	// AckOnReturn. BadInvalidState.
	ErrNotManualAck = fmt.Errorf("client: the subscription acknowledges by itself (AckOnReturn): %w", ua.StatusBadInvalidState)
	// ErrPoolConflict: a Pool already has a session for the connection
	// identity asked for, made with a different configuration.
	// BadInvalidArgument.
	ErrPoolConflict = fmt.Errorf("client: the pool has a session for this endpoint and identity with another configuration: %w", ua.StatusBadInvalidArgument)
)

// FailureReason says why connecting fails in a way that retrying at once
// cannot mend: someone has to change the configuration, a trust list or the
// server's user database. A ManagedSession in StateFailed reports it
// (FailureReason) and retries on its slow schedule (PermanentBackoff), so that
// the fix is picked up without hammering the server (a wrong password retried
// every second locks accounts on many servers).
type FailureReason uint8

const (
	// FailureNone: the error is not a permanent one (or there is none).
	FailureNone FailureReason = iota
	// FailureIdentity: the server refused the user: wrong password, unknown
	// user, a user certificate it does not accept (BadUserAccessDenied,
	// BadIdentityTokenRejected, BadIdentityTokenInvalid,
	// BadUserSignatureInvalid).
	FailureIdentity
	// FailureUntrustedCertificate: the server's certificate is not in the
	// Store's trust list (*pki.UntrustedError); moving the copy in rejected/
	// to trusted/ mends it.
	FailureUntrustedCertificate
	// FailureCertificate: a certificate was refused for another reason: the
	// server's is invalid, expired, revoked, for another host or application,
	// or does not match its endpoint; or the server refused ours
	// (BadCertificate…, BadSecurityChecksFailed, BadNoValidCertificates,
	// BadApplicationSignatureInvalid).
	FailureCertificate
	// FailureNoEndpoint: the server offers no endpoint with the configured
	// security policy, mode and user token type (ErrNoEndpoint,
	// BadSecurityPolicyRejected).
	FailureNoEndpoint
	// FailureEndpointURL: the endpoint URL cannot be used: it does not parse
	// (ErrEndpointURL), its host name does not resolve, or the server knows no
	// endpoint under its path (BadTcpEndpointUrlInvalid).
	FailureEndpointURL
)

var failureNames = [...]string{
	FailureNone:                 "none",
	FailureIdentity:             "identity-rejected",
	FailureUntrustedCertificate: "certificate-untrusted",
	FailureCertificate:          "certificate-rejected",
	FailureNoEndpoint:           "no-matching-endpoint",
	FailureEndpointURL:          "endpoint-url-invalid",
}

// String names the reason in lower-case words, fit for a metrics label or a
// JSON field ("identity-rejected", "certificate-untrusted" …).
func (r FailureReason) String() string {
	if int(r) < len(failureNames) {
		return failureNames[r]
	}
	return fmt.Sprintf("FailureReason(%d)", uint8(r))
}

// ClassifyFailure says whether err, from connecting (Dial), is a permanent
// failure and which; FailureNone for anything a retry may cure (the server
// down, busy or slow, the network broken).
func ClassifyFailure(err error) FailureReason {
	if err == nil {
		return FailureNone
	}
	var untrusted *pki.UntrustedError
	var certErr *pki.CertError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &untrusted):
		return FailureUntrustedCertificate
	case errors.As(err, &certErr):
		return FailureCertificate
	case errorsIsAny(err, ua.StatusBadUserAccessDenied, ua.StatusBadIdentityTokenRejected,
		ua.StatusBadIdentityTokenInvalid, ua.StatusBadUserSignatureInvalid):
		return FailureIdentity
	case isCertificateStatus(err) || errorsIsAny(err, ua.StatusBadSecurityChecksFailed,
		ua.StatusBadNoValidCertificates, ua.StatusBadApplicationSignatureInvalid):
		return FailureCertificate
	case errors.Is(err, ErrNoEndpoint) || errors.Is(err, ua.StatusBadSecurityPolicyRejected):
		return FailureNoEndpoint
	case errors.Is(err, ErrEndpointURL) || errors.Is(err, ua.StatusBadTcpEndpointUrlInvalid):
		return FailureEndpointURL
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return FailureEndpointURL
	}
	return FailureNone
}

// IsPermanent reports whether err is a permanent failure (ClassifyFailure).
func IsPermanent(err error) bool { return ClassifyFailure(err) != FailureNone }

// certificateStatuses are the BadCertificate… codes (Part 4 §7.34).
var certificateStatuses = [...]ua.StatusCode{
	ua.StatusBadCertificateInvalid, ua.StatusBadCertificateTimeInvalid, ua.StatusBadCertificateIssuerTimeInvalid,
	ua.StatusBadCertificateHostNameInvalid, ua.StatusBadCertificateUriInvalid, ua.StatusBadCertificateUseNotAllowed,
	ua.StatusBadCertificateIssuerUseNotAllowed, ua.StatusBadCertificateUntrusted, ua.StatusBadCertificateRevocationUnknown,
	ua.StatusBadCertificateIssuerRevocationUnknown, ua.StatusBadCertificateRevoked, ua.StatusBadCertificateIssuerRevoked,
	ua.StatusBadCertificateChainIncomplete, ua.StatusBadCertificatePolicyCheckFailed,
}

func isCertificateStatus(err error) bool {
	for _, c := range certificateStatuses {
		if errors.Is(err, c) {
			return true
		}
	}
	return false
}

// errorsIsAny reports whether err matches one of the targets.
func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
