package uacp

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/uagate/gateway/uastack/ua"
)

const (
	// ProtocolVersion is the connection protocol version this package speaks.
	ProtocolVersion = 0
	// MinBufferSize is the smallest ReceiveBufferSize and SendBufferSize accepted
	// from a peer or in a Config (Part 6 §7.1.2.3; the 1024-byte minimum of ECC
	// policies is not supported).
	MinBufferSize = 8192
	// MaxURLLength bounds EndpointUrl and ServerUri (Part 6 §7.1.2.3, §7.1.2.6).
	MaxURLLength = 4096
	// MaxReasonLength bounds the Reason of an Error; longer ones are dropped.
	MaxReasonLength = 4096
	// MaxHandshakeSize bounds the HEL, ACK, ERR and RHE messages accepted during a
	// handshake: a ReverseHello with two URLs of MaxURLLength is the largest.
	MaxHandshakeSize = HeaderSize + 2*(4+MaxURLLength) + 20
)

// Hello is the Hello message (HEL, Part 6 §7.1.2.3) a client sends first.
type Hello struct {
	ProtocolVersion   uint32
	ReceiveBufferSize uint32 // largest chunk the client can receive
	SendBufferSize    uint32 // largest chunk the client will send
	MaxMessageSize    uint32 // largest response message the client accepts; 0: no limit
	MaxChunkCount     uint32 // most chunks in a response message; 0: no limit
	EndpointURL       string
}

// Acknowledge is the Acknowledge message (ACK, Part 6 §7.1.2.4) a server answers a
// Hello with.
type Acknowledge struct {
	ProtocolVersion   uint32
	ReceiveBufferSize uint32 // largest chunk the server can receive
	SendBufferSize    uint32 // largest chunk the server will send
	MaxMessageSize    uint32 // largest request message the server accepts; 0: no limit
	MaxChunkCount     uint32 // most chunks in a request message; 0: no limit
}

// ReverseHello is the ReverseHello message (RHE, Part 6 §7.1.2.6) a server sends
// on a connection it opened to a client.
type ReverseHello struct {
	ServerURI   string // the server's ApplicationUri
	EndpointURL string // the URL the client is to put in its Hello
}

// AppendBinary appends the whole message, header included, to dst.
func (m *Hello) AppendBinary(dst []byte) ([]byte, error) {
	if len(m.EndpointURL) > MaxURLLength {
		return dst, fmt.Errorf("uacp: Hello EndpointUrl of %d bytes: %w", len(m.EndpointURL), ErrEndpointURLInvalid)
	}
	start := len(dst)
	dst = Header{MessageType: MessageTypeHello, ChunkType: ChunkFinal}.append(dst)
	dst = appendUint32s(dst, m.ProtocolVersion, m.ReceiveBufferSize, m.SendBufferSize, m.MaxMessageSize, m.MaxChunkCount)
	dst = appendString(dst, m.EndpointURL)
	return patchSize(dst, start), nil
}

// UnmarshalBinary decodes a whole Hello message, header included. An EndpointUrl
// longer than MaxURLLength fails with ErrEndpointURLInvalid.
func (m *Hello) UnmarshalBinary(b []byte) error {
	d, err := body(b, MessageTypeHello)
	if err != nil {
		return err
	}
	m.ProtocolVersion = d.ReadUInt32()
	m.ReceiveBufferSize = d.ReadUInt32()
	m.SendBufferSize = d.ReadUInt32()
	m.MaxMessageSize = d.ReadUInt32()
	m.MaxChunkCount = d.ReadUInt32()
	m.EndpointURL, err = readURL(&d, "Hello EndpointUrl")
	return err
}

// AppendBinary appends the whole message, header included, to dst.
func (m *Acknowledge) AppendBinary(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = Header{MessageType: MessageTypeAcknowledge, ChunkType: ChunkFinal}.append(dst)
	dst = appendUint32s(dst, m.ProtocolVersion, m.ReceiveBufferSize, m.SendBufferSize, m.MaxMessageSize, m.MaxChunkCount)
	return patchSize(dst, start), nil
}

// UnmarshalBinary decodes a whole Acknowledge message, header included.
func (m *Acknowledge) UnmarshalBinary(b []byte) error {
	d, err := body(b, MessageTypeAcknowledge)
	if err != nil {
		return err
	}
	m.ProtocolVersion = d.ReadUInt32()
	m.ReceiveBufferSize = d.ReadUInt32()
	m.SendBufferSize = d.ReadUInt32()
	m.MaxMessageSize = d.ReadUInt32()
	m.MaxChunkCount = d.ReadUInt32()
	return decodeErr(&d, "Acknowledge")
}

// AppendBinary appends the whole message, header included, to dst. A Reason longer
// than MaxReasonLength is cut at a character boundary.
func (m *Error) AppendBinary(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = Header{MessageType: MessageTypeError, ChunkType: ChunkFinal}.append(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(m.Code))
	reason := m.Reason
	if len(reason) > MaxReasonLength {
		cut := MaxReasonLength
		for cut > 0 && !utf8.RuneStart(reason[cut]) {
			cut--
		}
		reason = reason[:cut]
	}
	dst = appendString(dst, reason)
	return patchSize(dst, start), nil
}

// UnmarshalBinary decodes a whole Error message, header included. A Reason longer
// than MaxReasonLength is ignored, as the specification asks.
func (m *Error) UnmarshalBinary(b []byte) error {
	d, err := body(b, MessageTypeError)
	if err != nil {
		return err
	}
	return m.decode(&d)
}

func (m *Error) decode(d *ua.Decoder) error {
	m.Code = d.ReadStatusCode()
	m.Reason = d.ReadString()
	if len(m.Reason) > MaxReasonLength {
		m.Reason = ""
	}
	return decodeErr(d, "Error")
}

// AppendBinary appends the whole message, header included, to dst.
func (m *ReverseHello) AppendBinary(dst []byte) ([]byte, error) {
	if len(m.ServerURI) > MaxURLLength || len(m.EndpointURL) > MaxURLLength {
		return dst, fmt.Errorf("uacp: ReverseHello URI of %d/%d bytes: %w", len(m.ServerURI), len(m.EndpointURL), ErrEndpointURLInvalid)
	}
	start := len(dst)
	dst = Header{MessageType: MessageTypeReverseHello, ChunkType: ChunkFinal}.append(dst)
	dst = appendString(dst, m.ServerURI)
	dst = appendString(dst, m.EndpointURL)
	return patchSize(dst, start), nil
}

// UnmarshalBinary decodes a whole ReverseHello message, header included. URIs
// longer than MaxURLLength fail with ErrEndpointURLInvalid.
func (m *ReverseHello) UnmarshalBinary(b []byte) error {
	d, err := body(b, MessageTypeReverseHello)
	if err != nil {
		return err
	}
	if m.ServerURI, err = readURL(&d, "ReverseHello ServerUri"); err != nil {
		return err
	}
	m.EndpointURL, err = readURL(&d, "ReverseHello EndpointUrl")
	return err
}

// decodeAbort decodes the body of an abort chunk: Error (UInt32) and Reason.
func decodeAbort(b []byte) (ua.StatusCode, string, error) {
	var m Error
	d := ua.NewDecoder(b, &messageLimits)
	err := m.decode(d)
	return m.Code, m.Reason, err
}

// messageLimits bound the strings of connection protocol messages only by the
// message, whose size is bounded before it is read: an overlong URL then gets its
// own status code, and an overlong Reason is ignored, rather than failing with a
// generic limit error.
var messageLimits = ua.Limits{
	MaxStringLength:     math.MaxInt32,
	MaxByteStringLength: 0,
	MaxArrayLength:      0,
	MaxNestingDepth:     1,
}

// body checks the header of a whole message b against the expected type and
// returns a decoder over its body.
func body(b []byte, want MessageType) (ua.Decoder, error) {
	var d ua.Decoder
	h, err := ParseHeader(b)
	if err != nil {
		return d, err
	}
	if h.MessageType != want {
		return d, fmt.Errorf("uacp: got %s, want %s: %w", h.MessageType, want, ErrMessageTypeInvalid)
	}
	if h.ChunkType != ChunkFinal {
		return d, fmt.Errorf("uacp: %s with chunk type %s: %w", h.MessageType, h.ChunkType, ErrHeaderInvalid)
	}
	if int64(h.MessageSize) != int64(len(b)) {
		return d, fmt.Errorf("uacp: %s MessageSize %d but %d bytes: %w", h.MessageType, h.MessageSize, len(b), ErrHeaderInvalid)
	}
	d.Reset(b[HeaderSize:], &messageLimits)
	return d, nil
}

func readURL(d *ua.Decoder, what string) (string, error) {
	s := d.ReadString()
	if err := decodeErr(d, what); err != nil {
		return "", err
	}
	if len(s) > MaxURLLength {
		return "", fmt.Errorf("uacp: %s of %d bytes: %w", what, len(s), ErrEndpointURLInvalid)
	}
	return s, nil
}

func decodeErr(d *ua.Decoder, what string) error {
	if err := d.Err(); err != nil {
		return fmt.Errorf("uacp: decoding %s: %w", what, err)
	}
	return nil
}

func appendUint32s(dst []byte, vs ...uint32) []byte {
	for _, v := range vs {
		dst = binary.LittleEndian.AppendUint32(dst, v)
	}
	return dst
}

// appendString writes a String as the ua codec does: "" as null (-1).
func appendString(dst []byte, s string) []byte {
	if s == "" {
		return binary.LittleEndian.AppendUint32(dst, 0xFFFFFFFF)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

func patchSize(dst []byte, start int) []byte {
	binary.LittleEndian.PutUint32(dst[start+4:], uint32(len(dst)-start))
	return dst
}
