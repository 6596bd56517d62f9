package uacp

import (
	"encoding/binary"
	"fmt"
)

// HeaderSize is the size of the message header that starts every message and chunk.
const HeaderSize = 8

// MessageType is the three-byte ASCII message type of a header, packed little-endian
// into the low 24 bits so that it compares and switches as an integer.
type MessageType uint32

// Message types. The connection protocol handles HEL, ACK, ERR and RHE itself and
// passes the secure conversation types OPN, CLO and MSG up to the secure channel.
const (
	MessageTypeHello        MessageType = 'H' | 'E'<<8 | 'L'<<16
	MessageTypeAcknowledge  MessageType = 'A' | 'C'<<8 | 'K'<<16
	MessageTypeError        MessageType = 'E' | 'R'<<8 | 'R'<<16
	MessageTypeReverseHello MessageType = 'R' | 'H'<<8 | 'E'<<16
	MessageTypeOpen         MessageType = 'O' | 'P'<<8 | 'N'<<16
	MessageTypeClose        MessageType = 'C' | 'L'<<8 | 'O'<<16
	MessageTypeMessage      MessageType = 'M' | 'S'<<8 | 'G'<<16
)

// String returns the three letters ("HEL"), with non-printable bytes escaped.
func (t MessageType) String() string {
	b := [3]byte{byte(t), byte(t >> 8), byte(t >> 16)}
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return fmt.Sprintf("%q", b[:])
		}
	}
	return string(b[:])
}

// IsSecureConversation reports whether t is OPN, CLO or MSG, the types passed up to
// the secure channel layer.
func (t MessageType) IsSecureConversation() bool {
	return t == MessageTypeOpen || t == MessageTypeClose || t == MessageTypeMessage
}

// IsKnown reports whether t is one of the seven defined message types.
func (t MessageType) IsKnown() bool {
	switch t {
	case MessageTypeHello, MessageTypeAcknowledge, MessageTypeError, MessageTypeReverseHello,
		MessageTypeOpen, MessageTypeClose, MessageTypeMessage:
		return true
	}
	return false
}

// ChunkType is the fourth header byte: whether a chunk is the final one of its
// message. Connection protocol messages always carry ChunkFinal.
type ChunkType byte

const (
	ChunkFinal        ChunkType = 'F'
	ChunkIntermediate ChunkType = 'C'
	ChunkAbort        ChunkType = 'A'
)

// String returns the letter.
func (c ChunkType) String() string {
	if c < 0x20 || c > 0x7e {
		return fmt.Sprintf("0x%02x", byte(c))
	}
	return string(rune(c))
}

// Valid reports whether c is F, C or A.
func (c ChunkType) Valid() bool { return c == ChunkFinal || c == ChunkIntermediate || c == ChunkAbort }

// Header is the message header (Part 6 §7.1.2.2). MessageSize counts the whole
// message, header included.
type Header struct {
	MessageType MessageType
	ChunkType   ChunkType
	MessageSize uint32
}

// ParseHeader decodes the first HeaderSize bytes of b. It checks only that the
// bytes are there and that MessageSize covers the header; what the types and the
// size may be is for the caller, who knows the limits.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("uacp: header of %d bytes: %w", len(b), ErrTruncated)
	}
	h := Header{
		MessageType: MessageType(b[0]) | MessageType(b[1])<<8 | MessageType(b[2])<<16,
		ChunkType:   ChunkType(b[3]),
		MessageSize: binary.LittleEndian.Uint32(b[4:8]),
	}
	if h.MessageSize < HeaderSize {
		return h, fmt.Errorf("uacp: %s header with MessageSize %d: %w", h.MessageType, h.MessageSize, ErrHeaderInvalid)
	}
	return h, nil
}

// AppendBinary appends the eight header bytes to dst.
func (h Header) AppendBinary(dst []byte) ([]byte, error) {
	return h.append(dst), nil
}

func (h Header) append(dst []byte) []byte {
	dst = append(dst, byte(h.MessageType), byte(h.MessageType>>8), byte(h.MessageType>>16), byte(h.ChunkType))
	return binary.LittleEndian.AppendUint32(dst, h.MessageSize)
}

// PutHeader writes a header at the start of b (at least HeaderSize long): the secure
// channel layer encodes a chunk after a placeholder and fills the header in last.
func PutHeader(b []byte, t MessageType, c ChunkType, size uint32) {
	_ = b[HeaderSize-1]
	b[0], b[1], b[2], b[3] = byte(t), byte(t>>8), byte(t>>16), byte(c)
	binary.LittleEndian.PutUint32(b[4:8], size)
}

func (h Header) String() string {
	return fmt.Sprintf("%s%s %d bytes", h.MessageType, h.ChunkType, h.MessageSize)
}
