package uacp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// memConn is a net.Conn that reads a fixed input and discards what is written.
type memConn struct {
	r      *bytes.Reader
	closed bool
}

func (c *memConn) Read(p []byte) (int, error) {
	if c.closed {
		return 0, net.ErrClosed
	}
	return c.r.Read(p)
}

func (c *memConn) Write(p []byte) (int, error) {
	if c.closed {
		return 0, net.ErrClosed
	}
	return len(p), nil
}

func (c *memConn) Close() error                     { c.closed = true; return nil }
func (c *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// seeds adds valid inputs and all their truncations.
func seeds(f *testing.F, valid ...[]byte) {
	for _, v := range valid {
		for n := 0; n <= len(v); n++ {
			f.Add(v[:n])
		}
	}
}

// typed reports whether err carries an OPC UA status code, as every error of this
// package must.
func typed(err error) bool {
	var sc ua.StatusCode
	return errors.As(err, &sc) && sc.IsBad()
}

func FuzzHello(f *testing.F) {
	var valid [][]byte
	for _, tc := range messageCases {
		b, _ := tc.msg.AppendBinary(nil)
		valid = append(valid, b)
	}
	seeds(f, valid...)
	fresh := []func() message{
		func() message { return new(Hello) },
		func() message { return new(Acknowledge) },
		func() message { return new(Error) },
		func() message { return new(ReverseHello) },
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, mk := range fresh {
			m := mk()
			err := m.UnmarshalBinary(b)
			if err != nil {
				if !typed(err) {
					t.Fatalf("%T: untyped error %v", m, err)
				}
				continue
			}
			// What decodes re-encodes, no longer than it came, to the same value.
			enc, err := m.AppendBinary(nil)
			if err != nil {
				t.Fatalf("%T %+v: re-encoding: %v", m, m, err)
			}
			if len(enc) > len(b) {
				t.Fatalf("%T: re-encoded to %d bytes from %d", m, len(enc), len(b))
			}
			again := mk()
			if err := again.UnmarshalBinary(enc); err != nil || !reflect.DeepEqual(again, m) {
				t.Fatalf("%T: %+v re-decoded as %+v (%v)", m, m, again, err)
			}
		}
	})
}

// chunkStream builds a stream of chunks for seeds.
func chunkStream(chunks ...[]byte) []byte {
	var b []byte
	for _, c := range chunks {
		b = append(b, c...)
	}
	return b
}

func FuzzReadChunk(f *testing.F) {
	withID := func(c []byte, id uint32) []byte {
		binary.LittleEndian.PutUint32(c[HeaderSize:], id)
		return c
	}
	errMsg, _ := (&Error{Code: ua.StatusBadTcpInternalError, Reason: "x"}).AppendBinary(nil)
	seeds(f,
		chunkStream(withID(chunk(MessageTypeOpen, ChunkFinal, 120, 1), 1)),
		chunkStream(
			withID(chunk(MessageTypeMessage, ChunkIntermediate, 100, 2), 7),
			withID(chunk(MessageTypeMessage, ChunkIntermediate, 40, 3), 8),
			withID(chunk(MessageTypeMessage, ChunkFinal, 60, 4), 7),
			withID(chunk(MessageTypeMessage, ChunkAbort, 20, 5), 8),
			withID(chunk(MessageTypeClose, ChunkFinal, 12, 6), 9),
		),
		chunkStream(withID(chunk(MessageTypeMessage, ChunkFinal, 50, 7), 3), errMsg),
	)
	f.Add([]byte("MSGF\xff\xff\xff\xff"))
	f.Add([]byte("HELF\x20\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, _ := (&Config{ReceiveBufferSize: MinBufferSize}).withDefaults()
		c := newConn(&memConn{r: bytes.NewReader(b)}, &cfg)
		c.limits = Limits{ReceiveBufferSize: MinBufferSize, SendBufferSize: MinBufferSize, MaxRecvMessageSize: 4 * MinBufferSize, MaxRecvChunkCount: 4}
		a := c.NewAssembler()
		defer a.Reset()
		read := 0
		for {
			ch, err := c.ReadChunk()
			if err != nil {
				if !typed(err) {
					t.Fatalf("untyped error %v", err)
				}
				if !c.closed.Load() {
					t.Fatalf("connection left open after %v", err)
				}
				return
			}
			read += len(ch.Data)
			if read > len(b) || int(ch.MessageSize) != len(ch.Data) || ch.MessageSize > MinBufferSize ||
				!ch.MessageType.IsSecureConversation() || !ch.ChunkType.Valid() {
				t.Fatalf("bad chunk %s of %d bytes", ch.Header, len(ch.Data))
			}
			if len(ch.Body()) < 4 {
				ch.Release()
				continue
			}
			id := binary.LittleEndian.Uint32(ch.Body())
			m, err := a.AddChunk(id, ch, HeaderSize+4, len(ch.Data))
			if err != nil && !typed(err) {
				t.Fatalf("assembler: untyped error %v", err)
			}
			if m != nil {
				if m.Len() > 4*MinBufferSize || m.Chunks > 4 {
					t.Fatalf("message of %d bytes, %d chunks passed the limits", m.Len(), m.Chunks)
				}
				m.Release()
			}
		}
	})
}

// FuzzHandshake runs both sides of the handshakes against arbitrary peer bytes.
func FuzzHandshake(f *testing.F) {
	ack, _ := (&Acknowledge{ReceiveBufferSize: 8192, SendBufferSize: 8192}).AppendBinary(nil)
	rhe, _ := (&ReverseHello{ServerURI: "urn:x", EndpointURL: "opc.tcp://x:1/"}).AppendBinary(nil)
	errMsg, _ := (&Error{Code: ua.StatusBadTcpServerTooBusy}).AppendBinary(nil)
	seeds(f, rawHello(8192, 65535, "opc.tcp://x/"), ack, rhe, errMsg, append(rhe, ack...))
	f.Fuzz(func(t *testing.T, b []byte) {
		ctx := context.Background()
		cfg, _ := (*Config)(nil).withDefaults()
		for name, hs := range map[string]func() (*Conn, error){
			"server": func() (*Conn, error) { return newServerConn(ctx, &memConn{r: bytes.NewReader(b)}, &cfg) },
			"client": func() (*Conn, error) {
				return newClientConn(ctx, &memConn{r: bytes.NewReader(b)}, "opc.tcp://x/", &cfg)
			},
			"reverse": func() (*Conn, error) { return newReverseClientConn(ctx, &memConn{r: bytes.NewReader(b)}, &cfg) },
		} {
			c, err := hs()
			if err != nil {
				if !typed(err) && !errors.Is(err, io.EOF) {
					t.Fatalf("%s: untyped error %v", name, err)
				}
				continue
			}
			l := c.Limits()
			if l.ReceiveBufferSize < MinBufferSize || l.SendBufferSize < MinBufferSize ||
				l.ReceiveBufferSize > cfg.ReceiveBufferSize || l.SendBufferSize > cfg.SendBufferSize {
				t.Fatalf("%s: negotiated %+v", name, l)
			}
			c.Close()
		}
	})
}
