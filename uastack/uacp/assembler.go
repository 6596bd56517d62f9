package uacp

import (
	"fmt"

	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/ua"
)

// MaxPendingMessages bounds the messages an Assembler builds at once. Chunks of
// one message are sent one after another, but Part 6 does not forbid a sender to
// interleave two messages; a few in progress are accepted, more are refused.
const MaxPendingMessages = 8

// Message is a message reassembled from the bodies of its chunks, held in a pooled
// buffer.
//
// Ownership: the caller that received it from the Assembler owns it and must call
// Release once, after which neither the Message nor its Bytes may be used.
type Message struct {
	pooling.Header

	RequestID uint32
	Chunks    int // number of chunks it was assembled from

	buf   *pooling.Buffer
	pool  *pooling.BufferPool
	off   int // message bytes are buf.B[off : off+n]
	n     int
	dirty int // bytes of buf.B to clear on Release
}

var messages = pooling.NewPool[Message](0, func(m *Message) { *m = Message{} })

func init() { pooling.Register("uacp.Message", messages) }

// Bytes returns the message body: the concatenated chunk bodies.
func (m *Message) Bytes() []byte { return m.buf.B[m.off : m.off+m.n] }

// Len returns len(m.Bytes()).
func (m *Message) Len() int { return m.n }

// Release clears the buffer (it holds decrypted data) and gives it and m back to
// their pools.
func (m *Message) Release() {
	if m.buf != nil {
		clear(m.buf.B[:m.dirty])
		m.pool.Put(m.buf)
	}
	messages.Put(m)
}

// Assembler reassembles messages from the bodies of their chunks, for the secure
// channel layer, which feeds it after it has verified and decrypted each chunk. It
// enforces the receive limits: a message larger than maxMessageSize fails with
// ErrMessageTooLarge, one of more chunks than maxChunkCount with ErrTooManyChunks;
// both are protocol violations after which the channel should be closed. An abort
// chunk ('A') discards the message and yields an *AbortError, which fails only that
// request.
//
// An Assembler is used by one goroutine (the channel's reader); the Messages it
// returns may be released from any goroutine.
type Assembler struct {
	maxMessageSize int
	maxChunkCount  int
	pool           *pooling.BufferPool
	pending        [MaxPendingMessages]*Message
}

// NewAssembler returns an Assembler with the given limits; zero limits mean
// DefaultMaxMessageSize and DefaultMaxChunkCount, a nil pool pooling.Buffers.
func NewAssembler(maxMessageSize, maxChunkCount uint32, pool *pooling.BufferPool) *Assembler {
	if maxMessageSize == 0 {
		maxMessageSize = DefaultMaxMessageSize
	}
	if maxChunkCount == 0 {
		maxChunkCount = DefaultMaxChunkCount
	}
	if pool == nil {
		pool = pooling.Buffers
	}
	return &Assembler{maxMessageSize: int(maxMessageSize), maxChunkCount: int(maxChunkCount), pool: pool}
}

// Add adds the body of one chunk of request requestID; the body is copied. It
// returns the message when t is ChunkFinal, nil while more chunks are expected,
// and an *AbortError for ChunkAbort (whose body holds the sender's status code and
// reason).
func (a *Assembler) Add(requestID uint32, t ChunkType, body []byte) (*Message, error) {
	i := a.find(requestID)
	switch t {
	case ChunkAbort:
		if i >= 0 {
			a.discard(i)
		}
		code, reason, err := decodeAbort(body)
		if err != nil {
			code, reason = ua.StatusBadDecodingError, "malformed abort chunk"
		}
		return nil, &AbortError{RequestID: requestID, Code: code, Reason: reason}
	case ChunkFinal, ChunkIntermediate:
	default:
		return nil, fmt.Errorf("uacp: chunk type %s: %w", t, ErrHeaderInvalid)
	}

	if i < 0 {
		if t == ChunkFinal { // the common case: a message of one chunk
			if err := a.check(requestID, 1, len(body)); err != nil {
				return nil, err
			}
			m := a.newMessage(requestID, len(body))
			m.n = copy(m.buf.B, body)
			m.dirty = m.n
			m.Chunks = 1
			return m, nil
		}
		if i = a.free(); i < 0 {
			return nil, fmt.Errorf("uacp: request %d: %w", requestID, ErrTooManyPending)
		}
		a.pending[i] = a.newMessage(requestID, 2*len(body))
	}

	m := a.pending[i]
	if err := a.check(requestID, m.Chunks+1, m.n+len(body)); err != nil {
		a.discard(i)
		return nil, err
	}
	a.grow(m, m.n+len(body))
	copy(m.buf.B[m.n:], body)
	m.n += len(body)
	m.dirty = max(m.dirty, m.n)
	m.Chunks++
	if t == ChunkIntermediate {
		return nil, nil
	}
	a.pending[i] = nil
	return m, nil
}

// AddChunk is Add for a chunk read by a Conn whose body is c.Data[bodyStart:bodyEnd]
// (after the security and sequence headers, before padding and signature). When it
// is the final chunk of a message that has no other chunk, the message takes over
// the chunk's buffer instead of copying it: c is then released and its bytes belong
// to the message. Otherwise the body is copied and c stays with the caller.
func (a *Assembler) AddChunk(requestID uint32, c *Chunk, bodyStart, bodyEnd int) (*Message, error) {
	if bodyStart < 0 || bodyEnd < bodyStart || bodyEnd > len(c.Data) {
		return nil, fmt.Errorf("uacp: chunk body [%d:%d] outside %d bytes: %w", bodyStart, bodyEnd, len(c.Data), ErrHeaderInvalid)
	}
	if c.ChunkType != ChunkFinal || c.buf == nil || a.find(requestID) >= 0 {
		return a.Add(requestID, c.ChunkType, c.Data[bodyStart:bodyEnd])
	}
	if err := a.check(requestID, 1, bodyEnd-bodyStart); err != nil {
		return nil, err
	}
	m := messages.Get()
	m.RequestID = requestID
	m.Chunks = 1
	m.pool = c.pool
	m.buf, m.dirty = c.detach()
	m.off, m.n = bodyStart, bodyEnd-bodyStart
	return m, nil
}

// Pending returns the number of messages in progress.
func (a *Assembler) Pending() int {
	n := 0
	for _, m := range a.pending {
		if m != nil {
			n++
		}
	}
	return n
}

// Reset discards the messages in progress, for a channel that closes.
func (a *Assembler) Reset() {
	for i := range a.pending {
		if a.pending[i] != nil {
			a.discard(i)
		}
	}
}

func (a *Assembler) check(requestID uint32, chunks, size int) error {
	if chunks > a.maxChunkCount {
		return fmt.Errorf("uacp: request %d: more than %d chunks: %w", requestID, a.maxChunkCount, ErrTooManyChunks)
	}
	if size > a.maxMessageSize {
		return fmt.Errorf("uacp: request %d: message of more than %d bytes: %w", requestID, a.maxMessageSize, ErrMessageTooLarge)
	}
	return nil
}

func (a *Assembler) find(requestID uint32) int {
	for i, m := range a.pending {
		if m != nil && m.RequestID == requestID {
			return i
		}
	}
	return -1
}

func (a *Assembler) free() int {
	for i, m := range a.pending {
		if m == nil {
			return i
		}
	}
	return -1
}

func (a *Assembler) discard(i int) {
	a.pending[i].Release()
	a.pending[i] = nil
}

func (a *Assembler) newMessage(requestID uint32, size int) *Message {
	m := messages.Get()
	m.RequestID = requestID
	m.pool = a.pool
	m.buf = a.pool.Get(min(size, a.maxMessageSize))
	m.buf.B = m.buf.B[:cap(m.buf.B)]
	return m
}

// grow makes room for need bytes, doubling through the size classes up to the
// message limit (checked before).
func (a *Assembler) grow(m *Message, need int) {
	if need <= len(m.buf.B) {
		return
	}
	size := min(max(need, 2*len(m.buf.B)), a.maxMessageSize)
	nb := a.pool.Get(size)
	nb.B = nb.B[:cap(nb.B)]
	copy(nb.B, m.buf.B[:m.n])
	clear(m.buf.B[:m.dirty])
	a.pool.Put(m.buf)
	m.buf = nb
	m.dirty = m.n
}
