package uasc

import (
	"encoding/binary"
	"fmt"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/uacp"
)

// Layout of a secure conversation chunk (Part 6 §6.7.2):
//
//	message header   MessageType(3) ChunkType(1) MessageSize(4) SecureChannelId(4)
//	security header  OPN: SecurityPolicyUri, SenderCertificate, ReceiverCertificateThumbprint
//	                 MSG, CLO: TokenId(4)
//	sequence header  SequenceNumber(4) RequestId(4)
//	body
//	padding          PaddingSize, Padding, [ExtraPaddingSize]   (encrypted chunks only)
//	signature                                                   (signed chunks only)
//
// The signature covers everything before it; encryption covers the sequence
// header to the end of the signature.
const (
	// secureHeaderSize is the message header with the SecureChannelId.
	secureHeaderSize = uacp.HeaderSize + 4
	// symHeaderSize is the message header and the symmetric security header.
	symHeaderSize = secureHeaderSize + 4
	// seqHeaderSize is the sequence header.
	seqHeaderSize = 8
	// symPrefix is what precedes the body of a MSG or CLO chunk.
	symPrefix = symHeaderSize + seqHeaderSize
	// symTrailerMax bounds what sealing appends to a MSG body: padding of at most
	// one AES block plus its size byte, and an HMAC-SHA256.
	symTrailerMax = aesBlockSize + 1 + 32

	// maxPolicyURILength bounds the SecurityPolicyUri of an asymmetric header.
	maxPolicyURILength = 1024

	// seqWrapAfter is the highest sequence number after which a sender may wrap
	// around to a number below seqWrapBelow (Part 6 §6.7.2.4). Receivers also
	// accept a wrap from exactly this number, as node-opcua's generator does it.
	seqWrapAfter = 4294966271 // UInt32.MaxValue - 1024
	seqWrapBelow = 1024
)

// asymHeader is the asymmetric security header of an OPN chunk. Its byte slices
// alias the chunk.
type asymHeader struct {
	PolicyURI  []byte
	SenderCert []byte // DER, possibly a chain; nil when not signed
	Thumbprint []byte // SHA-1 of the receiver's certificate; nil when not encrypted
}

// parseAsymHeader parses the asymmetric security header of an OPN chunk b (header
// included) and returns it with the offset of the sequence header. It allocates
// nothing: the fields alias b.
func parseAsymHeader(b []byte) (asymHeader, int, error) {
	var h asymHeader
	off := secureHeaderSize
	if len(b) < off {
		return h, 0, fmt.Errorf("uasc: OPN chunk of %d bytes: %w", len(b), ErrMalformed)
	}
	var err error
	if h.PolicyURI, off, err = readBytes(b, off, maxPolicyURILength, "SecurityPolicyUri"); err != nil {
		return h, 0, err
	}
	if h.SenderCert, off, err = readBytes(b, off, len(b), "SenderCertificate"); err != nil {
		return h, 0, err
	}
	if h.Thumbprint, off, err = readBytes(b, off, pki.ThumbprintSize, "ReceiverCertificateThumbprint"); err != nil {
		return h, 0, err
	}
	return h, off, nil
}

// readBytes reads a length-prefixed String or ByteString at b[off:], at most max
// bytes long; -1 is null.
func readBytes(b []byte, off, max int, what string) ([]byte, int, error) {
	if len(b)-off < 4 {
		return nil, 0, fmt.Errorf("uasc: %s truncated: %w", what, ErrMalformed)
	}
	n := int32(binary.LittleEndian.Uint32(b[off:]))
	off += 4
	if n == -1 {
		return nil, off, nil
	}
	if n < 0 || int(n) > max || int(n) > len(b)-off {
		return nil, 0, fmt.Errorf("uasc: %s of %d bytes (at most %d, %d left): %w", what, n, max, len(b)-off, ErrMalformed)
	}
	return b[off : off+int(n) : off+int(n)], off + int(n), nil
}

// appendAsymHeader appends an asymmetric security header.
func appendAsymHeader(dst []byte, policyURI string, senderCert, thumbprint []byte) []byte {
	dst = appendLenBytes(dst, []byte(policyURI), policyURI == "")
	dst = appendLenBytes(dst, senderCert, senderCert == nil)
	return appendLenBytes(dst, thumbprint, thumbprint == nil)
}

func appendLenBytes(dst, p []byte, null bool) []byte {
	if null {
		return binary.LittleEndian.AppendUint32(dst, 0xFFFFFFFF)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(p)))
	return append(dst, p...)
}

// putSecureHeader writes the message header and SecureChannelId at the start of b.
func putSecureHeader(b []byte, mt uacp.MessageType, ct uacp.ChunkType, size int, channelID uint32) {
	uacp.PutHeader(b, mt, ct, uint32(size))
	binary.LittleEndian.PutUint32(b[uacp.HeaderSize:], channelID)
}

// putSeqHeader writes a sequence header at b.
func putSeqHeader(b []byte, seq, requestID uint32) {
	binary.LittleEndian.PutUint32(b, seq)
	binary.LittleEndian.PutUint32(b[4:], requestID)
}

// chunkChannelID returns the SecureChannelId of a chunk at least secureHeaderSize long.
func chunkChannelID(b []byte) uint32 { return binary.LittleEndian.Uint32(b[uacp.HeaderSize:]) }

// --- request and response header fields in an encoded message ---------------

// skipNodeID returns the offset after the NodeId encoded at b[off:], or -1.
func skipNodeID(b []byte, off int) int {
	if off >= len(b) {
		return -1
	}
	var n int
	switch b[off] {
	case 0x00: // two-byte
		n = 2
	case 0x01: // four-byte
		n = 4
	case 0x02: // numeric
		n = 7
	case 0x04: // guid
		n = 19
	case 0x03, 0x05: // string, byte string
		if len(b)-off < 7 {
			return -1
		}
		l := int32(binary.LittleEndian.Uint32(b[off+3:]))
		if l < -1 {
			return -1
		}
		n = 7 + int(max(l, 0))
	default:
		return -1
	}
	if n > len(b)-off {
		return -1
	}
	return off + n
}

// requestHeaderOffsets finds, in an encoded request (type NodeId first, then the
// RequestHeader), the offsets of RequestHeader.Timestamp, RequestHandle and
// TimeoutHint. Every request starts with a RequestHeader, so this works for all of
// them without knowing their Go type.
func requestHeaderOffsets(b []byte) (timestamp, handle, timeoutHint int, ok bool) {
	off := skipNodeID(b, 0) // type id
	if off < 0 {
		return 0, 0, 0, false
	}
	off = skipNodeID(b, off) // AuthenticationToken
	if off < 0 {
		return 0, 0, 0, false
	}
	timestamp = off
	handle = off + 8
	audit := handle + 8 // after RequestHandle and ReturnDiagnostics
	if len(b)-audit < 4 {
		return 0, 0, 0, false
	}
	l := int32(binary.LittleEndian.Uint32(b[audit:]))
	if l < -1 {
		return 0, 0, 0, false
	}
	timeoutHint = audit + 4 + int(max(l, 0))
	if timeoutHint+4 > len(b) {
		return 0, 0, 0, false
	}
	return timestamp, handle, timeoutHint, true
}

// responseHeaderOffsets finds, in an encoded response, the offsets of
// ResponseHeader.Timestamp and RequestHandle.
func responseHeaderOffsets(b []byte) (timestamp, handle int, ok bool) {
	off := skipNodeID(b, 0)
	if off < 0 || off+12 > len(b) {
		return 0, 0, false
	}
	return off, off + 8, true
}

func getUint32(b []byte) uint32    { return binary.LittleEndian.Uint32(b) }
func putUint32(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }
func getUint64(b []byte) uint64    { return binary.LittleEndian.Uint64(b) }
func putUint64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
