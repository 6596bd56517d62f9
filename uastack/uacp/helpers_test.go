package uacp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// chunk builds a chunk of size bytes whose body is a pattern derived from seed, so a
// reader can check it arrived intact.
func chunk(mt MessageType, ct ChunkType, size int, seed byte) []byte {
	b := make([]byte, size)
	PutHeader(b, mt, ct, uint32(size))
	for i := HeaderSize; i < size; i++ {
		b[i] = seed + byte(i)
	}
	return b
}

func checkChunk(b []byte) error {
	if len(b) < HeaderSize+1 {
		return nil
	}
	seed := b[HeaderSize] - byte(HeaderSize)
	for i := HeaderSize; i < len(b); i++ {
		if b[i] != seed+byte(i) {
			return fmt.Errorf("byte %d of %d is %#x, want %#x", i, len(b), b[i], seed+byte(i))
		}
	}
	return nil
}

func rawHello(recv, send uint32, url string) []byte {
	b, err := (&Hello{ReceiveBufferSize: recv, SendBufferSize: send, EndpointURL: url}).AppendBinary(nil)
	if err != nil {
		panic(err)
	}
	return b
}

// readRaw reads one whole message from a raw connection, within a second.
func readRaw(t *testing.T, nc net.Conn) (Header, []byte) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	hb := make([]byte, HeaderSize)
	if _, err := io.ReadFull(nc, hb); err != nil {
		t.Fatalf("reading a header from the peer: %v", err)
	}
	h, err := ParseHeader(hb)
	if err != nil {
		t.Fatal(err)
	}
	if h.MessageSize > 1<<20 {
		t.Fatalf("peer sent %s", h)
	}
	b := make([]byte, h.MessageSize)
	copy(b, hb)
	if _, err := io.ReadFull(nc, b[HeaderSize:]); err != nil {
		t.Fatalf("reading a %s body: %v", h.MessageType, err)
	}
	return h, b
}

// expectRawError reads an Error message with code from nc, then the end of the
// stream.
func expectRawError(t *testing.T, nc net.Conn, code ua.StatusCode) {
	t.Helper()
	h, b := readRaw(t, nc)
	if h.MessageType != MessageTypeError {
		t.Fatalf("peer sent %s, want ERR %v", h, code)
	}
	var e Error
	if err := e.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if e.Code != code {
		t.Fatalf("peer sent ERR %v (%s), want %v", e.Code, e.Reason, code)
	}
	expectEOF(t, nc)
}

// expectEOF checks that the peer closed nc (after anything else it sent).
func expectEOF(t *testing.T, nc net.Conn) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("peer did not close the connection (read %d bytes)", n)
	}
}

// rawServerConn performs the client side of the handshake by hand on a raw TCP
// connection to a NewServerConn, so the test can then misbehave as a client.
func rawServerConn(t *testing.T, cfg *Config) (srv *Conn, raw net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	raw, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Write(rawHello(65535, 65535, "opc.tcp://test/")); err != nil {
		t.Fatal(err)
	}
	srv, err = NewServerConn(t.Context(), nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if h, _ := readRaw(t, raw); h.MessageType != MessageTypeAcknowledge {
		t.Fatalf("got %s, want ACK", h)
	}
	return srv, raw
}

// pair returns a client and a server Conn connected over loopback TCP.
func pair(t *testing.T, ccfg, scfg *Config) (client, server *Conn) {
	t.Helper()
	l, err := Listen("127.0.0.1:0", scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	client, err = Dial(t.Context(), "opc.tcp://"+l.Addr().String()+"/test", ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = l.Accept(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

func putUint32(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }
