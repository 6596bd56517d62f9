package uacp

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/ua"
)

func TestLoopback(t *testing.T) {
	testutil.CheckLeaks(t)
	client, server := pair(t,
		&Config{ReceiveBufferSize: 32768, SendBufferSize: 16384, MaxMessageSize: 1 << 20, MaxChunkCount: 64},
		&Config{ReceiveBufferSize: 65535, SendBufferSize: 65536, MaxMessageSize: 2 << 20, MaxChunkCount: 128})

	cl, sl := client.Limits(), server.Limits()
	wantC := Limits{ReceiveBufferSize: 32768, SendBufferSize: 16384, MaxRecvMessageSize: 1 << 20, MaxRecvChunkCount: 64,
		MaxSendMessageSize: 2 << 20, MaxSendChunkCount: 128}
	wantS := Limits{ReceiveBufferSize: 16384, SendBufferSize: 32768, MaxRecvMessageSize: 2 << 20, MaxRecvChunkCount: 128,
		MaxSendMessageSize: 1 << 20, MaxSendChunkCount: 64}
	if cl != wantC || sl != wantS {
		t.Fatalf("limits:\nclient %+v\nwant   %+v\nserver %+v\nwant   %+v", cl, wantC, sl, wantS)
	}
	if server.EndpointURL() != client.EndpointURL() || !strings.HasSuffix(server.EndpointURL(), "/test") {
		t.Fatalf("endpoint URLs: client %q, server %q", client.EndpointURL(), server.EndpointURL())
	}

	// Client → server: every secure conversation type and chunk type, sizes from
	// the smallest to the negotiated maximum.
	sent := [][]byte{
		chunk(MessageTypeOpen, ChunkFinal, 200, 1),
		chunk(MessageTypeMessage, ChunkIntermediate, 16384, 2),
		chunk(MessageTypeMessage, ChunkIntermediate, HeaderSize, 3),
		chunk(MessageTypeMessage, ChunkFinal, 9000, 4),
		chunk(MessageTypeMessage, ChunkAbort, 30, 5),
		chunk(MessageTypeClose, ChunkFinal, 57, 6),
	}
	if err := client.WriteChunks(sent[:2]); err != nil {
		t.Fatal(err)
	}
	for _, b := range sent[2:] {
		if err := client.WriteChunk(b); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range sent {
		ch, err := server.ReadChunk()
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if string(ch.Data) != string(want) || ch.MessageSize != uint32(len(want)) {
			t.Fatalf("chunk %d: got %s, want %d bytes", i, ch.Header, len(want))
		}
		if len(ch.Body()) != len(want)-HeaderSize {
			t.Fatalf("chunk %d: body of %d bytes", i, len(ch.Body()))
		}
		if i%2 == 0 {
			ch.Release()
			ch.Release() // twice is harmless
		}
	}

	// Server → client, then the client goes away: the server sees the end.
	if err := server.WriteChunk(chunk(MessageTypeMessage, ChunkFinal, 32768, 9)); err != nil {
		t.Fatal(err)
	}
	ch, err := client.ReadChunk()
	if err != nil || len(ch.Data) != 32768 || checkChunk(ch.Data) != nil {
		t.Fatalf("client read: %v", err)
	}
	client.Close()
	_, err = server.ReadChunk()
	if !errors.Is(err, ErrClosed) || !errors.Is(err, io.EOF) || !errors.Is(err, ua.StatusBadConnectionClosed) {
		t.Fatalf("after the peer closed: %v", err)
	}
	if _, err2 := server.ReadChunk(); err2 != err {
		t.Fatalf("error not sticky: %v then %v", err, err2)
	}
	if _, err := client.ReadChunk(); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
	if err := client.WriteChunk(chunk(MessageTypeMessage, ChunkFinal, 100, 0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
}

func TestConcurrentWriters(t *testing.T) {
	testutil.CheckLeaks(t)
	client, server := pair(t, nil, nil)
	const writers, per = 8, 30
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				size := HeaderSize + 1 + (w*per+i)*997%40000
				if err := client.WriteChunk(chunk(MessageTypeMessage, ChunkFinal, size, byte(w*per+i))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range writers * per {
		ch, err := server.ReadChunk()
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if err := checkChunk(ch.Data); err != nil {
			t.Fatalf("chunk %d interleaved or corrupt: %v", i, err)
		}
	}
	wg.Wait()
}

func TestWriteChecks(t *testing.T) {
	testutil.CheckLeaks(t)
	client, _ := pair(t, nil, &Config{ReceiveBufferSize: 8192})
	if err := client.WriteChunk(chunk(MessageTypeMessage, ChunkFinal, 8193, 0)); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("oversized chunk: %v", err)
	}
	b := chunk(MessageTypeMessage, ChunkFinal, 100, 0)
	putUint32(b[4:], 99)
	if err := client.WriteChunk(b); !errors.Is(err, ErrHeaderInvalid) {
		t.Fatalf("size mismatch: %v", err)
	}
	if err := client.WriteChunk([]byte("MSG")); !errors.Is(err, ErrHeaderInvalid) {
		t.Fatalf("short chunk: %v", err)
	}
	if err := client.WriteChunks([][]byte{chunk(MessageTypeMessage, ChunkIntermediate, 100, 0), chunk(MessageTypeMessage, ChunkFinal, 9000, 0)}); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("oversized chunk in WriteChunks: %v", err)
	}
	// Nothing of the refused chunks went out: the connection still works.
	if err := client.WriteChunk(chunk(MessageTypeMessage, ChunkFinal, 8192, 0)); err != nil {
		t.Fatal(err)
	}
}

func TestDialErrors(t *testing.T) {
	testutil.CheckLeaks(t)
	l, err := Listen("127.0.0.1:0", &Config{CheckEndpointURL: func(u string) error {
		if !strings.HasSuffix(u, "/good") {
			return errors.New("no such endpoint")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	base := "opc.tcp://" + l.Addr().String()

	_, err = Dial(t.Context(), base+"/bad", nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != ua.StatusBadTcpEndpointUrlInvalid || !strings.Contains(e.Reason, "no such endpoint") {
		t.Fatalf("Dial to a refused endpoint: %v", err)
	}
	if !errors.Is(err, ua.StatusBadTcpEndpointUrlInvalid) {
		t.Fatalf("%v does not match its status", err)
	}
	c, err := Dial(t.Context(), base+"/good", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if s, err := l.Accept(t.Context()); err != nil {
		t.Fatal(err)
	} else {
		s.Close()
	}

	if _, err := Dial(t.Context(), "http://x/", nil); !errors.Is(err, ErrEndpointURLInvalid) {
		t.Fatalf("bad URL: %v", err)
	}
	if _, err := Dial(t.Context(), base, &Config{ReceiveBufferSize: 10}); err == nil {
		t.Fatal("invalid config accepted")
	}
	// Nobody listens.
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadURL := "opc.tcp://" + dead.Addr().String()
	dead.Close()
	if _, err := Dial(t.Context(), deadURL, nil); !errors.Is(err, ua.StatusBadCommunicationError) {
		t.Fatalf("connection refused: %v", err)
	}
}

// hostileServer accepts one connection and hands it, after reading the Hello, to
// behave.
func hostileServer(t *testing.T, behave func(nc net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
		hb := make([]byte, HeaderSize)
		if _, err := io.ReadFull(nc, hb); err != nil {
			return
		}
		h, _ := ParseHeader(hb)
		if _, err := io.CopyN(io.Discard, nc, int64(h.MessageSize)-HeaderSize); err != nil {
			return
		}
		behave(nc)
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return "opc.tcp://" + ln.Addr().String() + "/x"
}

func TestHostileServer(t *testing.T) {
	ack := func(recv, send uint32) []byte {
		b, _ := (&Acknowledge{ReceiveBufferSize: recv, SendBufferSize: send}).AppendBinary(nil)
		return b
	}
	cases := []struct {
		name   string
		behave func(nc net.Conn)
		want   error
		// the client answers a violation with this code; 0: it just closes
		errSent ua.StatusCode
	}{
		{"garbage", func(nc net.Conn) { nc.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n")) }, ErrMessageTypeInvalid, ua.StatusBadTcpMessageTypeInvalid},
		{"OPN instead of ACK", func(nc net.Conn) { nc.Write(chunk(MessageTypeOpen, ChunkFinal, 40, 0)) }, ErrMessageTypeInvalid, ua.StatusBadTcpMessageTypeInvalid},
		{"oversized ACK", func(nc net.Conn) {
			b := ack(8192, 8192)
			putUint32(b[4:], 1<<30)
			nc.Write(b)
		}, ErrMessageTooLarge, ua.StatusBadTcpMessageTooLarge},
		{"size below header", func(nc net.Conn) { nc.Write([]byte{'A', 'C', 'K', 'F', 4, 0, 0, 0}) }, ErrHeaderInvalid, ua.StatusBadDecodingError},
		{"small buffers", func(nc net.Conn) { nc.Write(ack(1024, 8192)) }, ErrBufferTooSmall, ua.StatusBadTcpNotEnoughResources},
		{"truncated ACK then close", func(nc net.Conn) { nc.Write(ack(8192, 8192)[:20]) }, io.ErrUnexpectedEOF, 0},
		{"close", func(nc net.Conn) {}, ErrClosed, 0},
		{"ERR", func(nc net.Conn) {
			b, _ := (&Error{Code: ua.StatusBadTcpServerTooBusy, Reason: "busy"}).AppendBinary(nil)
			nc.Write(b)
		}, ua.StatusBadTcpServerTooBusy, 0},
		{"silence", func(nc net.Conn) {
			var b [1]byte
			nc.Read(b[:]) // until the client gives up
		}, ErrTimeout, 0},
		{"half a header", func(nc net.Conn) {
			nc.Write([]byte("ACK"))
			var b [1]byte
			nc.Read(b[:])
		}, ErrTimeout, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testutil.CheckLeaks(t)
			got := make(chan ua.StatusCode, 1)
			url := hostileServer(t, func(nc net.Conn) {
				tc.behave(nc)
				if tc.errSent == 0 {
					return
				}
				_ = nc.SetReadDeadline(time.Now().Add(2 * time.Second))
				b, _ := io.ReadAll(io.LimitReader(nc, MaxHandshakeSize))
				var e Error
				if err := e.UnmarshalBinary(b); err == nil {
					got <- e.Code
				}
			})
			start := time.Now()
			c, err := Dial(t.Context(), url, &Config{HandshakeTimeout: 300 * time.Millisecond})
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("Dial took %v", d)
			}
			if tc.errSent != 0 {
				select {
				case code := <-got:
					if code != tc.errSent {
						t.Fatalf("client sent ERR %v, want %v", code, tc.errSent)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("client sent no ERR %v", tc.errSent)
				}
			}
		})
	}
}

func TestHostileClientHandshake(t *testing.T) {
	cases := []struct {
		name  string
		send  []byte
		close bool // close after sending
		want  error
		code  ua.StatusCode // ERR the listener answers with; 0: none, it just closes
	}{
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), false, ErrMessageTypeInvalid, ua.StatusBadTcpMessageTypeInvalid},
		{"MSG before HEL", chunk(MessageTypeMessage, ChunkFinal, 100, 0), false, ErrMessageTypeInvalid, ua.StatusBadTcpMessageTypeInvalid},
		{"oversized HEL", func() []byte {
			b := rawHello(65535, 65535, "opc.tcp://x/")
			putUint32(b[4:], 1<<31)
			return b
		}(), false, ErrMessageTooLarge, ua.StatusBadTcpMessageTooLarge},
		{"size below header", []byte{'H', 'E', 'L', 'F', 0, 0, 0, 0}, false, ErrHeaderInvalid, ua.StatusBadDecodingError},
		{"small buffers", rawHello(1024, 65535, "opc.tcp://x/"), false, ErrBufferTooSmall, ua.StatusBadTcpNotEnoughResources},
		{"URL too long", func() []byte {
			b := Header{MessageType: MessageTypeHello, ChunkType: ChunkFinal}.append(nil)
			b = appendUint32s(b, 0, 65535, 65535, 0, 0)
			b = appendString(b, "opc.tcp://x/"+strings.Repeat("y", MaxURLLength))
			return patchSize(b, 0)
		}(), false, ErrEndpointURLInvalid, ua.StatusBadTcpEndpointUrlInvalid},
		{"truncated HEL then close", rawHello(65535, 65535, "opc.tcp://x/")[:30], true, io.ErrUnexpectedEOF, 0},
		{"slowloris", []byte("HE"), false, ErrTimeout, 0},
		{"silence", nil, false, ErrTimeout, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testutil.CheckLeaks(t)
			errs := make(chan error, 4)
			l, err := Listen("127.0.0.1:0", &Config{
				HandshakeTimeout: 300 * time.Millisecond,
				OnHandshakeError: func(_ net.Addr, err error) { errs <- err },
			})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			nc, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if _, err := nc.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if tc.close {
				nc.(*net.TCPConn).CloseWrite()
			}
			if tc.code != 0 {
				expectRawError(t, nc, tc.code)
			} else {
				expectEOF(t, nc)
			}
			select {
			case err := <-errs:
				if !errors.Is(err, tc.want) {
					t.Fatalf("handshake error %v, want %v", err, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no handshake error reported")
			}
			if failed, _ := l.HandshakeFailures(); failed != 1 {
				t.Fatalf("HandshakeFailures = %d", failed)
			}
			// The listener still serves well-behaved clients.
			c, err := Dial(t.Context(), "opc.tcp://"+l.Addr().String(), nil)
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
		})
	}
}

func TestListenerBusyAndClose(t *testing.T) {
	testutil.CheckLeaks(t)
	errs := make(chan error, 8)
	l, err := Listen("127.0.0.1:0", &Config{
		MaxPendingHandshakes: 1,
		HandshakeTimeout:     5 * time.Second,
		OnHandshakeError:     func(_ net.Addr, err error) { errs <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	// A silent client holds the only handshake slot …
	silent, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// … (wait until the listener has taken it) …
	var busy net.Conn
	if !testutil.Eventually(2*time.Second, func() bool {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			return false
		}
		h, b := readRaw(t, c)
		var e Error
		if h.MessageType == MessageTypeError && e.UnmarshalBinary(b) == nil && e.Code == ua.StatusBadTcpServerTooBusy {
			busy = c
			return true
		}
		c.Close()
		return false
	}) {
		t.Fatal("no Bad_TcpServerTooBusy")
	}
	busy.Close()
	if _, n := l.HandshakeFailures(); n == 0 {
		t.Fatal("busy refusals not counted")
	}
	if err := <-errs; !errors.Is(err, ErrServerTooBusy) {
		t.Fatalf("OnHandshakeError: %v", err)
	}

	// Accept gives up with its context …
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Accept(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Accept with an expiring context: %v", err)
	}
	// … and Close ends the pending handshake and fails Accept.
	done := make(chan error, 1)
	go func() {
		_, err := l.Accept(context.Background())
		done <- err
	}()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	expectEOF(t, silent)
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestReadChunkHostile(t *testing.T) {
	cases := []struct {
		name  string
		send  []byte
		close bool
		want  error
		code  ua.StatusCode
	}{
		{"garbage", []byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08"), false, ErrMessageTypeInvalid, ua.StatusBadTcpMessageTypeInvalid},
		{"HEL after handshake", rawHello(65535, 65535, "opc.tcp://x/"), false, ErrMessageTypeInvalid, ua.StatusBadTcpMessageTypeInvalid},
		{"oversized", func() []byte {
			b := chunk(MessageTypeMessage, ChunkFinal, 64, 0)
			putUint32(b[4:], 65536)
			return b
		}(), false, ErrMessageTooLarge, ua.StatusBadTcpMessageTooLarge},
		{"4 GiB", []byte{'M', 'S', 'G', 'F', 0xff, 0xff, 0xff, 0xff}, false, ErrMessageTooLarge, ua.StatusBadTcpMessageTooLarge},
		{"size below header", []byte{'M', 'S', 'G', 'F', 7, 0, 0, 0}, false, ErrHeaderInvalid, ua.StatusBadDecodingError},
		{"chunk type X", chunk(MessageTypeMessage, 'X', 20, 0), false, ErrHeaderInvalid, ua.StatusBadDecodingError},
		{"truncated chunk then close", chunk(MessageTypeMessage, ChunkFinal, 5000, 0)[:3000], true, io.ErrUnexpectedEOF, 0},
		{"truncated header then close", []byte("MSGF\x10"), true, io.ErrUnexpectedEOF, 0},
		{"slowloris header", []byte("MSGF\x10"), false, ErrTimeout, 0},
		{"slowloris body", chunk(MessageTypeMessage, ChunkFinal, 5000, 0)[:100], false, ErrTimeout, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testutil.CheckLeaks(t)
			// A pool of its own shows whether a receive buffer was taken.
			pool := pooling.NewBufferPool(pooling.BufferPoolConfig{})
			srv, raw := rawServerConn(t, &Config{ReceiveBufferSize: 65535, ChunkTimeout: 200 * time.Millisecond, Buffers: pool})
			if _, err := raw.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if tc.close {
				raw.(*net.TCPConn).CloseWrite()
			}
			start := time.Now()
			ch, err := srv.ReadChunk()
			if ch != nil || !errors.Is(err, tc.want) {
				t.Fatalf("ReadChunk = %v, %v; want %v", ch, err, tc.want)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("ReadChunk took %v", d)
			}
			if tc.code != 0 {
				expectRawError(t, raw, tc.code)
				// Refused before allocating: no receive buffer was taken.
				for _, c := range pool.Stats().Classes {
					if c.Misses+c.Hits != 0 {
						t.Fatalf("a %d-byte buffer was taken for a refused chunk", c.Size)
					}
				}
			} else {
				expectEOF(t, raw)
			}
			if _, err2 := srv.ReadChunk(); !errors.Is(err2, tc.want) {
				t.Fatalf("error not sticky: %v", err2)
			}
			if err := srv.WriteChunk(chunk(MessageTypeMessage, ChunkFinal, 100, 0)); err == nil {
				t.Fatal("write on a failed connection succeeded")
			}
		})
	}
}

func TestReadChunkPeerError(t *testing.T) {
	testutil.CheckLeaks(t)
	srv, raw := rawServerConn(t, nil)
	b, _ := (&Error{Code: ua.StatusBadSecureChannelClosed, Reason: "bye"}).AppendBinary(nil)
	raw.Write(b)
	_, err := srv.ReadChunk()
	var e *Error
	if !errors.As(err, &e) || e.Code != ua.StatusBadSecureChannelClosed || e.Reason != "bye" {
		t.Fatalf("ReadChunk after ERR: %v", err)
	}
	if _, err2 := srv.ReadChunk(); err2 != err {
		t.Fatalf("not sticky: %v", err2)
	}
	expectEOF(t, raw)
}

func TestReadDeadlineIdle(t *testing.T) {
	testutil.CheckLeaks(t)
	srv, raw := rawServerConn(t, &Config{ChunkTimeout: 5 * time.Second})
	srv.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := srv.ReadChunk()
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.Is(err, ua.StatusBadTimeout) {
		t.Fatalf("idle deadline: %v", err)
	}
	// Nothing was lost: the connection goes on.
	srv.SetReadDeadline(time.Time{})
	raw.Write(chunk(MessageTypeMessage, ChunkFinal, 300, 7))
	ch, err := srv.ReadChunk()
	if err != nil || checkChunk(ch.Data) != nil || len(ch.Data) != 300 {
		t.Fatalf("after an idle timeout: %v", err)
	}
	// A caller deadline that passes mid-chunk ends the connection.
	srv.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	raw.Write(chunk(MessageTypeMessage, ChunkFinal, 300, 7)[:20])
	if _, err := srv.ReadChunk(); !errors.Is(err, ErrTimeout) {
		t.Fatalf("mid-chunk deadline: %v", err)
	}
	expectEOF(t, raw)
}

func TestCloseWhenDone(t *testing.T) {
	testutil.CheckLeaks(t)
	client, server := pair(t, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	stop := client.CloseWhenDone(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() {
		_, err := client.ReadChunk()
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("ReadChunk after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancel did not unblock ReadChunk")
	}
	if _, err := server.ReadChunk(); !errors.Is(err, ErrClosed) {
		t.Fatalf("peer: %v", err)
	}
}

func TestDialContextCancel(t *testing.T) {
	testutil.CheckLeaks(t)
	url := hostileServer(t, func(nc net.Conn) {
		var b [1]byte
		nc.Read(b[:])
	})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := Dial(ctx, url, &Config{HandshakeTimeout: 10 * time.Second})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrClosed) {
		t.Fatalf("Dial cancelled: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cancel took %v", d)
	}
}

func TestSendError(t *testing.T) {
	testutil.CheckLeaks(t)
	client, server := pair(t, nil, nil)
	if err := server.SendError(ua.StatusBadTcpInternalError, "shutting down"); err != nil {
		t.Fatal(err)
	}
	_, err := client.ReadChunk()
	var e *Error
	if !errors.As(err, &e) || e.Code != ua.StatusBadTcpInternalError || e.Reason != "shutting down" {
		t.Fatalf("client got %v", err)
	}
}

func TestReverseConnect(t *testing.T) {
	testutil.CheckLeaks(t)
	var seen struct {
		sync.Mutex
		uri, url string
	}
	rl, err := ListenReverse("127.0.0.1:0", &Config{CheckReverseHello: func(serverURI, endpointURL string) error {
		seen.Lock()
		seen.uri, seen.url = serverURI, endpointURL
		seen.Unlock()
		if serverURI == "urn:evil" {
			return errors.New("unknown server")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	clientURL := "opc.tcp://" + rl.Addr().String()

	type result struct {
		c   *Conn
		err error
	}
	srvc := make(chan result, 1)
	go func() {
		c, err := DialReverse(t.Context(), clientURL, "urn:good", "opc.tcp://server.example:4840/UA", &Config{SendBufferSize: 16384})
		srvc <- result{c, err}
	}()
	client, err := rl.Accept(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	r := <-srvc
	if r.err != nil {
		t.Fatal(r.err)
	}
	server := r.c
	defer server.Close()
	if client.ServerURI() != "urn:good" || client.EndpointURL() != "opc.tcp://server.example:4840/UA" ||
		server.EndpointURL() != client.EndpointURL() || server.ServerURI() != "" {
		t.Fatalf("client %q %q, server %q", client.ServerURI(), client.EndpointURL(), server.EndpointURL())
	}
	if client.Limits().ReceiveBufferSize != 16384 || server.Limits().SendBufferSize != 16384 {
		t.Fatalf("limits: client %+v server %+v", client.Limits(), server.Limits())
	}
	// The client speaks first on the new channel, as with a forward connection.
	if err := client.WriteChunk(chunk(MessageTypeOpen, ChunkFinal, 500, 3)); err != nil {
		t.Fatal(err)
	}
	ch, err := server.ReadChunk()
	if err != nil || ch.MessageType != MessageTypeOpen || checkChunk(ch.Data) != nil {
		t.Fatalf("server read %v, %v", ch, err)
	}
	if err := server.WriteChunk(chunk(MessageTypeOpen, ChunkFinal, 16384, 4)); err != nil {
		t.Fatal(err)
	}
	if ch, err := client.ReadChunk(); err != nil || len(ch.Data) != 16384 {
		t.Fatalf("client read %v", err)
	}

	// A server the client does not want is told so.
	_, err = DialReverse(t.Context(), rl.Addr().String(), "urn:evil", "opc.tcp://evil:4840", nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != ua.StatusBadTcpEndpointUrlInvalid {
		t.Fatalf("refused reverse connect: %v", err)
	}
	// A client that is not there.
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := dead.Addr().String()
	dead.Close()
	if _, err := DialReverse(t.Context(), addr, "urn:good", "opc.tcp://x", nil); !errors.Is(err, ua.StatusBadCommunicationError) {
		t.Fatalf("reverse dial to nobody: %v", err)
	}
}

func TestReverseListenerHostile(t *testing.T) {
	for _, tc := range []struct {
		name string
		send []byte
		want error
		code ua.StatusCode
	}{
		{"HEL instead of RHE", rawHello(65535, 65535, "opc.tcp://x/"), ErrMessageTypeInvalid, ua.StatusBadTcpMessageTypeInvalid},
		{"RHE with a bad URL", func() []byte {
			b, _ := (&ReverseHello{ServerURI: "urn:x", EndpointURL: "http://x/"}).AppendBinary(nil)
			return b
		}(), ErrEndpointURLInvalid, ua.StatusBadTcpEndpointUrlInvalid},
		{"oversized RHE", []byte{'R', 'H', 'E', 'F', 0, 0, 0, 1}, ErrMessageTooLarge, ua.StatusBadTcpMessageTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testutil.CheckLeaks(t)
			errs := make(chan error, 1)
			rl, err := ListenReverse("127.0.0.1:0", &Config{OnHandshakeError: func(_ net.Addr, err error) { errs <- err }})
			if err != nil {
				t.Fatal(err)
			}
			defer rl.Close()
			nc, err := net.Dial("tcp", rl.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.Write(tc.send)
			expectRawError(t, nc, tc.code)
			if err := <-errs; !errors.Is(err, tc.want) {
				t.Fatalf("handshake error %v, want %v", err, tc.want)
			}
		})
	}
}

func TestNewConnOverPipe(t *testing.T) {
	testutil.CheckLeaks(t)
	a, b := net.Pipe()
	type result struct {
		c   *Conn
		err error
	}
	srv := make(chan result, 1)
	go func() {
		c, err := NewServerConn(t.Context(), b, nil)
		srv <- result{c, err}
	}()
	client, err := NewClientConn(t.Context(), a, "opc.tcp://pipe/", &Config{ChunkTimeout: -1, WriteTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	r := <-srv
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.c.Close()
	go client.WriteChunk(chunk(MessageTypeMessage, ChunkFinal, 1000, 1))
	if ch, err := r.c.ReadChunk(); err != nil || checkChunk(ch.Data) != nil {
		t.Fatalf("%v", err)
	}
	if r.c.LocalAddr() == nil || r.c.RemoteAddr() == nil {
		t.Fatal("no addresses")
	}
}
