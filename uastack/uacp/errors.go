package uacp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/uagate/gateway/uastack/ua"
)

// Sentinel errors. Each wraps the OPC UA status code it stands for, so both
// errors.Is(err, uacp.ErrMessageTooLarge) and errors.Is(err,
// ua.StatusBadTcpMessageTooLarge) hold for an error built on it. Errors returned by
// this package add the details (sizes, types) around them with %w.
var (
	// ErrTooManyPending: chunks of more than MaxPendingMessages messages in
	// progress (assembler.go).
	ErrTooManyPending = fmt.Errorf("%w: too many messages in progress", ua.StatusBadEncodingLimitsExceeded)
	// ErrMessageTooLarge: a chunk larger than the negotiated buffer size, or a
	// message larger than MaxMessageSize.
	ErrMessageTooLarge = fmt.Errorf("%w: message too large", ua.StatusBadTcpMessageTooLarge)
	// ErrTooManyChunks: a message with more chunks than MaxChunkCount.
	ErrTooManyChunks = fmt.Errorf("%w: too many chunks", ua.StatusBadEncodingLimitsExceeded)
	// ErrMessageTypeInvalid: a message type that is unknown, or not expected at
	// this point (a HEL after the handshake, an OPN during it).
	ErrMessageTypeInvalid = fmt.Errorf("%w: unexpected message type", ua.StatusBadTcpMessageTypeInvalid)
	// ErrHeaderInvalid: a MessageSize smaller than the header, or a chunk type
	// other than F, C or A.
	ErrHeaderInvalid = fmt.Errorf("%w: invalid message header", ua.StatusBadDecodingError)
	// ErrTruncated: a message body shorter than its fields.
	ErrTruncated = fmt.Errorf("%w: message truncated", ua.StatusBadDecodingError)
	// ErrBufferTooSmall: a peer offered a buffer size below MinBufferSize.
	ErrBufferTooSmall = fmt.Errorf("%w: buffer size below %d bytes", ua.StatusBadTcpNotEnoughResources, MinBufferSize)
	// ErrProtocolVersion: a server answered with a protocol version above the one
	// asked for.
	ErrProtocolVersion = fmt.Errorf("%w: protocol version", ua.StatusBadProtocolVersionUnsupported)
	// ErrEndpointURLInvalid: an EndpointUrl that cannot be parsed, is too long, or
	// that the server does not serve.
	ErrEndpointURLInvalid = fmt.Errorf("%w: endpoint URL", ua.StatusBadTcpEndpointUrlInvalid)
	// ErrClosed: the connection was closed, by this side or by the peer.
	ErrClosed = fmt.Errorf("%w: connection closed", ua.StatusBadConnectionClosed)
	// ErrTimeout: a deadline passed (handshake, chunk or caller deadline).
	// Timeout errors also match os.ErrDeadlineExceeded.
	ErrTimeout = fmt.Errorf("%w: timeout", ua.StatusBadTimeout)
	// ErrServerTooBusy: a listener with too many handshakes in progress refused a
	// connection.
	ErrServerTooBusy = fmt.Errorf("%w: too many pending handshakes", ua.StatusBadTcpServerTooBusy)
)

// Error is the Error message (ERR, Part 6 §7.1.2.5). It is also the error returned
// when the peer sends one: errors.As(err, &e) gives the peer's code and reason, and
// errors.Is(err, ua.StatusBadTcpMessageTooLarge) tests the code.
type Error struct {
	Code   ua.StatusCode
	Reason string // at most MaxReasonLength bytes; longer ones are dropped on decode
}

func (e *Error) Error() string {
	if e.Reason == "" {
		return "uacp: peer sent ERR " + e.Code.String()
	}
	return "uacp: peer sent ERR " + e.Code.String() + ": " + e.Reason
}

// Unwrap returns the status code, or Bad_TcpInternalError when the peer sent one
// that is not Bad: an error always unwraps to a Bad code.
func (e *Error) Unwrap() error { return badCode(e.Code) }

// AbortError reports a message the sender aborted with an 'A' chunk (Part 6 §6.7.3).
// It fails that request only: the channel stays open.
type AbortError struct {
	RequestID uint32
	Code      ua.StatusCode
	Reason    string
}

func (e *AbortError) Error() string {
	msg := fmt.Sprintf("uacp: request %d aborted by the sender: %s", e.RequestID, e.Code)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// Unwrap returns the status code, or Bad_TcpInternalError when the sender gave
// one that is not Bad.
func (e *AbortError) Unwrap() error { return badCode(e.Code) }

func badCode(c ua.StatusCode) ua.StatusCode {
	if c.IsBad() {
		return c
	}
	return ua.StatusBadTcpInternalError
}

// ioError maps an error from the network to this package's errors, keeping the
// original in the chain: a deadline becomes ErrTimeout (and still matches
// os.ErrDeadlineExceeded), an end of stream or reset becomes ErrClosed (and still
// matches io.EOF / io.ErrUnexpectedEOF).
func ioError(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("uacp: %s: %w (%w)", op, ErrTimeout, err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed), errors.Is(err, io.ErrClosedPipe),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return fmt.Errorf("uacp: %s: %w (%w)", op, ErrClosed, err)
	default:
		return fmt.Errorf("uacp: %s: %w (%w)", op, ua.StatusBadCommunicationError, err)
	}
}
