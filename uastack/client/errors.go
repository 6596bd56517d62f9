package client

import (
	"errors"
	"fmt"

	"github.com/uagate/gateway/uastack/ua"
)

// Sentinel errors. Each wraps the OPC UA status code it corresponds to, so both
// errors.Is(err, ErrX) and errors.Is(err, ua.StatusBadX) hold.
var (
	// ErrClosed: the client was closed. BadSessionClosed.
	ErrClosed = fmt.Errorf("client: closed: %w", ua.StatusBadSessionClosed)
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
	// ErrServerEndpoints: the endpoints the server returned in CreateSession do
	// not include the one we connected to (a sign of a downgrade attack).
	// BadSecurityChecksFailed.
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

// errorsIsAny reports whether err matches one of the targets.
func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
