package uasc

import (
	"errors"
	"fmt"

	"github.com/uagate/gateway/uastack/ua"
)

// Sentinel errors of the secure channel. Each wraps the OPC UA status code it
// stands for, so errors.Is(err, uasc.ErrSequenceNumber) and errors.Is(err,
// ua.StatusBadSequenceNumberInvalid) both hold for an error built on it; the errors
// returned add details around them with %w.
//
// An error that ends a channel is also returned, wrapped in ErrChannelClosed, to
// every request still pending: errors.Is(err, ErrChannelClosed) says the channel is
// gone, errors.Is(err, ua.StatusBadSecurityChecksFailed) (say) says why.
var (
	// ErrChannelClosed: the channel was closed (Close, the peer, or a fault);
	// pending and later requests fail with it.
	ErrChannelClosed = fmt.Errorf("%w: secure channel closed", ua.StatusBadSecureChannelClosed)
	// ErrTimeout: a request got no response within its timeout.
	ErrTimeout = fmt.Errorf("%w: request timed out", ua.StatusBadTimeout)

	// ErrSecurityChecks: a signature, padding or decryption failed, or a chunk's
	// security header does not match the channel.
	ErrSecurityChecks = fmt.Errorf("%w: security checks failed", ua.StatusBadSecurityChecksFailed)
	// ErrSequenceNumber: a chunk whose sequence number does not follow the previous one.
	ErrSequenceNumber = fmt.Errorf("%w: sequence number", ua.StatusBadSequenceNumberInvalid)
	// ErrChannelID: a chunk for another secure channel.
	ErrChannelID = fmt.Errorf("%w: secure channel id", ua.StatusBadSecureChannelIdInvalid)
	// ErrTokenUnknown: a chunk secured with a token that is unknown or expired.
	ErrTokenUnknown = fmt.Errorf("%w: security token unknown or expired", ua.StatusBadSecureChannelTokenUnknown)
	// ErrMalformed: a chunk too short for its headers, or with invalid header fields.
	ErrMalformed = fmt.Errorf("%w: malformed chunk", ua.StatusBadDecodingError)
	// ErrUnexpectedMessage: a message type or chunk type that is not allowed at this point.
	ErrUnexpectedMessage = fmt.Errorf("%w: unexpected message", ua.StatusBadTcpMessageTypeInvalid)
	// ErrPolicyRejected: the security policy is unknown, deprecated without
	// AllowDeprecated, or not offered by the server.
	ErrPolicyRejected = fmt.Errorf("%w: security policy rejected", ua.StatusBadSecurityPolicyRejected)
	// ErrModeRejected: the security mode does not fit the policy or is not offered.
	ErrModeRejected = fmt.Errorf("%w: security mode rejected", ua.StatusBadSecurityModeRejected)
	// ErrCertificate: a certificate that cannot be used (not RSA, unparsable, not
	// the one expected).
	ErrCertificate = fmt.Errorf("%w: certificate invalid", ua.StatusBadCertificateInvalid)
	// ErrNonceInvalid: a nonce of the wrong length for the policy.
	ErrNonceInvalid = fmt.Errorf("%w: nonce invalid", ua.StatusBadNonceInvalid)
	// ErrRequestTooLarge: a request larger than the server accepts
	// (MaxMessageSize, MaxChunkCount); nothing was sent and the channel stays open.
	ErrRequestTooLarge = fmt.Errorf("%w: request too large", ua.StatusBadRequestTooLarge)
	// ErrResponseTooLarge: a response larger than the client accepts; the server
	// sent a ServiceFault with Bad_ResponseTooLarge instead.
	ErrResponseTooLarge = fmt.Errorf("%w: response too large", ua.StatusBadResponseTooLarge)
)

// Errors of the policy crypto (policy.go). They carry no status code of their
// own (securityError wraps them as ErrSecurityChecks on the wire); the comment
// names the OPC UA status code each maps to.
var (
	// ErrUnknownPolicy: the URI names no supported policy. BadSecurityPolicyRejected.
	ErrUnknownPolicy = errors.New("uasc: unsupported security policy")
	// ErrPolicyNone: a cryptographic operation was asked of SecurityPolicy#None; the
	// caller should not sign or encrypt at all. BadSecurityChecksFailed.
	ErrPolicyNone = errors.New("uasc: security policy None has no cryptography")
	// ErrKeyLength: an RSA key is outside the policy's MinAsymKeyBits..MaxAsymKeyBits.
	// BadSecurityPolicyRejected.
	ErrKeyLength = errors.New("uasc: RSA key length not allowed by security policy")
	// ErrSignature: an asymmetric signature does not verify. BadSecurityChecksFailed
	// (BadApplicationSignatureInvalid / BadIdentityTokenInvalid in session services).
	ErrSignature = errors.New("uasc: signature invalid")
	// ErrDecrypt: asymmetric decryption failed. It says nothing more, on purpose:
	// details would be a padding oracle. BadSecurityChecksFailed.
	ErrDecrypt = errors.New("uasc: decryption failed")
	// ErrBlockSize: data to encrypt or decrypt symmetrically is not a whole number of
	// blocks. BadSecurityChecksFailed.
	ErrBlockSize = errors.New("uasc: length not a multiple of the cipher block size")
	// ErrPadding: the chunk padding is malformed. BadSecurityChecksFailed.
	ErrPadding = errors.New("uasc: invalid chunk padding")
	// ErrNonce: a peer's nonce has the wrong length for the policy. BadNonceInvalid.
	ErrNonce = errors.New("uasc: invalid nonce length")
)

// ServiceFaultError is returned for a request the server answered with a
// ServiceFault.
type ServiceFaultError struct {
	Status        ua.StatusCode // ResponseHeader.ServiceResult (Bad_UnknownResponse if the server sent a good one)
	RequestHandle uint32
	Fault         *ua.ServiceFault // the whole fault: diagnostics and string table
}

func (e *ServiceFaultError) Error() string {
	return "uasc: service fault: " + e.Status.String()
}

// Unwrap returns the status code, so errors.Is(err, ua.StatusBadSessionIdInvalid)
// works on a fault.
func (e *ServiceFaultError) Unwrap() error { return e.Status }

func newServiceFault(f *ua.ServiceFault) *ServiceFaultError {
	st := f.ResponseHeader.ServiceResult
	if !st.IsBad() {
		st = ua.StatusBadUnknownResponse
	}
	return &ServiceFaultError{Status: st, RequestHandle: f.ResponseHeader.RequestHandle, Fault: f}
}

// closedError is the error pending requests fail with when the channel ends
// because of cause: it matches ErrChannelClosed and, through cause, whatever
// caused it.
func closedError(cause error) error {
	if cause == nil || errors.Is(cause, ErrChannelClosed) {
		return ErrChannelClosed
	}
	return fmt.Errorf("%w: %w", ErrChannelClosed, cause)
}

// statusOf returns the Bad status code err wraps, or def.
func statusOf(err error, def ua.StatusCode) ua.StatusCode {
	var sc ua.StatusCode
	if errors.As(err, &sc) && sc.IsBad() {
		return sc
	}
	return def
}

// securityError wraps an error of the policy crypto (ErrSignature, ErrPadding,
// ErrDecrypt …, which carry no status code) as ErrSecurityChecks.
func securityError(what string, err error) error {
	return fmt.Errorf("uasc: %s: %w (%w)", what, ErrSecurityChecks, err)
}
