package uacp

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/ua"
)

const (
	// readAheadSize is the read-ahead buffer of a Conn: small chunks (most
	// publish responses) are then read several per system call; chunks larger
	// than it are read straight into their pooled buffer.
	readAheadSize = 4096
	// errorWriteTimeout bounds the write of an Error message on a connection
	// that is being closed for a protocol violation.
	errorWriteTimeout = time.Second
	// drainTimeout and drainLimit bound the reading of what a peer sent after a
	// violation, so that closing does not reset the connection before the peer
	// has read our Error message.
	drainTimeout = 250 * time.Millisecond
	drainLimit   = 64 << 10
)

// Chunk is one received chunk of a secure conversation message (OPN, CLO or MSG).
//
// Ownership: the Chunk and its bytes belong to the Conn that returned it. They are
// valid until Release is called or the next ReadChunk, whichever comes first; after
// that the buffer is reused or back in the pool and must not be touched. The bytes
// are writable, so the secure channel can decrypt in place. A chunk that is not
// released is recycled by the next ReadChunk without a trip through the pool;
// releasing it lets an idle connection hold no buffer at all.
type Chunk struct {
	Header
	// Data is the whole chunk, header included: len(Data) == MessageSize.
	Data []byte

	buf  *pooling.Buffer
	pool *pooling.BufferPool
	used int // high-water mark of buf.B written since the buffer was taken
}

// Body returns the bytes after the header.
func (c *Chunk) Body() []byte { return c.Data[HeaderSize:] }

// Release gives the chunk's buffer back to the pool, cleared (it may hold
// decrypted data). Releasing twice, or a chunk the Conn already recycled, is
// harmless.
func (c *Chunk) Release() {
	if c.buf != nil {
		clear(c.buf.B[:c.used])
		c.pool.Put(c.buf)
		c.buf = nil
	}
	c.Data = nil
	c.used = 0
}

// detach hands the chunk's buffer to the caller (an assembled message), with the
// number of bytes that must be cleared when it is returned.
func (c *Chunk) detach() (*pooling.Buffer, int) {
	b, used := c.buf, c.used
	c.buf, c.Data, c.used = nil, nil, 0
	return b, used
}

// Conn is an established opc.tcp connection: the handshake is done and the limits
// are negotiated. It carries secure conversation chunks.
//
// ReadChunk must be called from one goroutine at a time (the channel's reader).
// WriteChunk, WriteChunks, SendError, Close and the deadline setters may be called
// from any goroutine.
type Conn struct {
	nc     net.Conn
	br     *bufio.Reader
	cfg    Config
	limits Limits

	endpointURL string
	serverURI   string

	// reader state, owned by the goroutine calling ReadChunk
	chunk Chunk
	rerr  error // sticky: the connection is unusable for reading

	readDeadline  atomic.Int64 // caller's, Unix nanoseconds; 0 = none
	writeDeadline atomic.Int64

	wmu  sync.Mutex
	werr error // sticky, under wmu

	closeOnce sync.Once
	closed    atomic.Bool
	closeErr  error
}

func newConn(nc net.Conn, cfg *Config) *Conn {
	return &Conn{
		nc:    nc,
		br:    bufio.NewReaderSize(nc, readAheadSize),
		cfg:   *cfg,
		chunk: Chunk{pool: cfg.Buffers},
	}
}

// Limits returns the negotiated limits.
func (c *Conn) Limits() Limits { return c.limits }

// EndpointURL returns the EndpointUrl of the handshake: the URL dialled, the one the
// client sent in its Hello, or the one a ReverseHello named.
func (c *Conn) EndpointURL() string { return c.endpointURL }

// ServerURI returns the ServerUri of the ReverseHello on a client connection made by
// reverse connect, "" otherwise.
func (c *Conn) ServerURI() string { return c.serverURI }

// LocalAddr returns the local network address.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// RemoteAddr returns the peer's network address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// NewAssembler returns an Assembler enforcing this side's receive limits.
func (c *Conn) NewAssembler() *Assembler {
	return NewAssembler(c.limits.MaxRecvMessageSize, c.limits.MaxRecvChunkCount, c.cfg.Buffers)
}

// ReadChunk reads the next chunk. OPN, CLO and MSG chunks are returned; an Error
// message from the peer is returned as an *Error and ends the connection. The
// header is checked before anything is allocated or read beyond it: a MessageSize
// above the negotiated ReceiveBufferSize, an unknown or out-of-place message type,
// or a MessageSize below the header size makes ReadChunk send an Error message to
// the peer, close the connection and return the matching error. Such errors, and the
// end of the stream, are sticky: every later call returns them.
//
// A deadline that passes while no byte of a chunk has arrived returns an error
// matching ErrTimeout and leaves the connection usable; once a chunk has begun, a
// timeout closes it, because the stream can no longer be resynchronised.
//
// See Chunk for how long the result is valid.
func (c *Conn) ReadChunk() (*Chunk, error) {
	if c.rerr != nil {
		c.chunk.Release()
		return nil, c.rerr
	}
	armed := false
	if c.br.Buffered() < HeaderSize {
		if c.br.Buffered() == 0 {
			if _, err := c.br.Peek(1); err != nil {
				if isTimeout(err) && !c.closed.Load() {
					return nil, ioError("read", err) // idle: nothing lost
				}
				return nil, c.failRead(ioError("read", err))
			}
		}
		armed = c.armChunkDeadline()
	}
	hb, err := c.br.Peek(HeaderSize)
	if err != nil {
		return nil, c.failRead(ioError("read header", unexpectedEOF(err)))
	}
	h := Header{
		MessageType: MessageType(hb[0]) | MessageType(hb[1])<<8 | MessageType(hb[2])<<16,
		ChunkType:   ChunkType(hb[3]),
		MessageSize: binary.LittleEndian.Uint32(hb[4:8]),
	}
	switch {
	case h.MessageType.IsSecureConversation() || h.MessageType == MessageTypeError:
	default:
		return nil, c.violation(ua.StatusBadTcpMessageTypeInvalid,
			fmt.Errorf("uacp: read: message type %s: %w", h.MessageType, ErrMessageTypeInvalid))
	}
	if h.MessageSize < HeaderSize || !h.ChunkType.Valid() {
		return nil, c.violation(ua.StatusBadDecodingError,
			fmt.Errorf("uacp: read: header %s: %w", h, ErrHeaderInvalid))
	}
	if h.MessageSize > c.limits.ReceiveBufferSize {
		return nil, c.violation(ua.StatusBadTcpMessageTooLarge,
			fmt.Errorf("uacp: read: chunk of %d bytes, ReceiveBufferSize %d: %w", h.MessageSize, c.limits.ReceiveBufferSize, ErrMessageTooLarge))
	}
	size := int(h.MessageSize)
	if !armed && c.br.Buffered() < size {
		armed = c.armChunkDeadline()
	}

	ch := &c.chunk
	if ch.buf == nil {
		ch.buf = c.cfg.Buffers.Get(int(c.limits.ReceiveBufferSize))
	}
	b := ch.buf.B[:size]
	ch.used = max(ch.used, size)
	if _, err := io.ReadFull(c.br, b); err != nil {
		return nil, c.failRead(ioError("read chunk", unexpectedEOF(err)))
	}
	if armed {
		c.restoreReadDeadline()
	}
	if h.MessageType == MessageTypeError {
		e := new(Error)
		if err := e.UnmarshalBinary(b); err != nil {
			return nil, c.failRead(err)
		}
		return nil, c.failRead(e)
	}
	ch.Header = h
	ch.Data = b
	return ch, nil
}

// failRead makes err sticky, gives the receive buffer back and closes the
// connection.
func (c *Conn) failRead(err error) error {
	c.rerr = err
	c.chunk.Release()
	c.Close()
	return err
}

// violation reports a protocol violation by the peer: it sends an Error message
// with code, closes the connection and makes err sticky.
func (c *Conn) violation(code ua.StatusCode, err error) error {
	c.rerr = err
	c.chunk.Release()
	c.abort(code, err.Error(), true)
	return err
}

func (c *Conn) armChunkDeadline() bool {
	if c.cfg.ChunkTimeout <= 0 {
		return false
	}
	d := time.Now().Add(c.cfg.ChunkTimeout)
	if cd := c.readDeadline.Load(); cd != 0 && cd <= d.UnixNano() {
		return false // the caller's deadline comes first anyway
	}
	_ = c.nc.SetReadDeadline(d)
	return true
}

func (c *Conn) restoreReadDeadline() {
	_ = c.nc.SetReadDeadline(unixTime(c.readDeadline.Load()))
}

// SetReadDeadline sets the deadline of ReadChunk, as net.Conn does; zero clears it.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.readDeadline.Store(unixNano(t))
	return c.nc.SetReadDeadline(t)
}

// SetWriteDeadline sets a deadline for the writes; the per-write WriteTimeout
// applies too, the earlier one wins. Zero clears it.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.writeDeadline.Store(unixNano(t))
	return c.nc.SetWriteDeadline(t)
}

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// WriteChunk writes one complete chunk, header included. It checks that the chunk
// fits the negotiated SendBufferSize and that its header's MessageSize matches its
// length; a chunk that does not is refused without being sent. A failed write closes
// the connection (part of a chunk may have gone out) and the error is sticky. Safe
// for concurrent use: each chunk is written whole.
func (c *Conn) WriteChunk(b []byte) error {
	if err := c.checkOutgoing(b); err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.beginWrite(); err != nil {
		return err
	}
	return c.write(b)
}

// WriteChunks writes the chunks of one message back to back, with no chunk of
// another writer in between.
func (c *Conn) WriteChunks(chunks [][]byte) error {
	for _, b := range chunks {
		if err := c.checkOutgoing(b); err != nil {
			return err
		}
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.beginWrite(); err != nil {
		return err
	}
	for _, b := range chunks {
		if err := c.write(b); err != nil {
			return err
		}
	}
	return nil
}

func (c *Conn) checkOutgoing(b []byte) error {
	if len(b) < HeaderSize {
		return fmt.Errorf("uacp: write: chunk of %d bytes: %w", len(b), ErrHeaderInvalid)
	}
	if n := binary.LittleEndian.Uint32(b[4:8]); int64(n) != int64(len(b)) {
		return fmt.Errorf("uacp: write: MessageSize %d for %d bytes: %w", n, len(b), ErrHeaderInvalid)
	}
	if int64(len(b)) > int64(c.limits.SendBufferSize) {
		return fmt.Errorf("uacp: write: chunk of %d bytes, SendBufferSize %d: %w", len(b), c.limits.SendBufferSize, ErrMessageTooLarge)
	}
	return nil
}

// beginWrite checks the sticky error and arms the write deadline; c.wmu is held.
func (c *Conn) beginWrite() error {
	if c.werr != nil {
		return c.werr
	}
	if c.closed.Load() {
		return fmt.Errorf("uacp: write: %w", ErrClosed)
	}
	d := c.writeDeadline.Load()
	if c.cfg.WriteTimeout > 0 {
		if t := time.Now().Add(c.cfg.WriteTimeout).UnixNano(); d == 0 || t < d {
			d = t
		}
	}
	if d != 0 {
		_ = c.nc.SetWriteDeadline(unixTime(d))
	}
	return nil
}

// write writes b; c.wmu is held.
func (c *Conn) write(b []byte) error {
	if _, err := c.nc.Write(b); err != nil {
		c.werr = ioError("write", err)
		c.Close()
		return c.werr
	}
	return nil
}

// SendError sends an Error message with code and reason and closes the connection,
// as Part 6 asks of a side that gives up on a connection. It does not wait for a
// writer that holds the connection: if one does, the Error message is skipped.
func (c *Conn) SendError(code ua.StatusCode, reason string) error {
	return c.abort(code, reason, false)
}

// abort sends an Error message if the writer is free, then closes. With drain it
// first half-closes and reads what the peer still sends for a moment, so the
// close does not turn into a reset that could discard the Error message before
// the peer reads it.
func (c *Conn) abort(code ua.StatusCode, reason string, drain bool) error {
	var werr error
	if c.wmu.TryLock() {
		if c.werr == nil && !c.closed.Load() {
			msg := Error{Code: code, Reason: reason}
			b, _ := msg.AppendBinary(make([]byte, 0, HeaderSize+8+min(len(reason), MaxReasonLength)))
			_ = c.nc.SetWriteDeadline(time.Now().Add(errorWriteTimeout))
			_, werr = c.nc.Write(b)
			c.werr = fmt.Errorf("uacp: write: %w", ErrClosed)
			if cw, ok := c.nc.(interface{ CloseWrite() error }); ok && drain && werr == nil {
				_ = cw.CloseWrite()
				_ = c.nc.SetReadDeadline(time.Now().Add(drainTimeout))
				_, _ = io.CopyN(io.Discard, c.nc, drainLimit)
			}
		}
		c.wmu.Unlock()
	}
	c.Close()
	if werr != nil {
		return ioError("write Error message", werr)
	}
	return nil
}

// Close closes the connection. Blocked reads and writes return errors matching
// ErrClosed. Close is idempotent.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.closeErr = c.nc.Close()
	})
	return c.closeErr
}

// CloseWhenDone closes the connection when ctx is done. The returned stop function
// detaches it again (and reports whether it did so before ctx was done). No
// goroutine waits for ctx meanwhile.
func (c *Conn) CloseWhenDone(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, func() { c.Close() })
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// unexpectedEOF turns an io.EOF met inside a message into io.ErrUnexpectedEOF.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func unixTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
