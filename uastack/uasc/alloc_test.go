package uasc

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
)

// testChannel returns a client Channel without a connection, its receive side set
// up for a mode, and the server-side sender of its chunks.
func testChannel(t testing.TB, uri string, mode ua.MessageSecurityMode) (*Channel, *secureConn) {
	c := &Channel{log: slog.New(slog.DiscardHandler), done: make(chan struct{})}
	c.reg.m = make(map[uint32]*pending)
	c.reg.onTimer = c.expire
	initSymTest(t, &c.sc, uri, mode, false)
	send := &secureConn{}
	initSymTest(t, send, uri, mode, true)
	t.Cleanup(func() {
		c.mu.Lock()
		c.reg.drain()
		c.mu.Unlock()
	})
	return c, send
}

// doubleResponse is a ReadResponse of three Doubles: nothing in it needs memory
// of its own when decoded into a response of the same shape.
func doubleResponse() *ua.ReadResponse {
	return &ua.ReadResponse{Results: []ua.DataValue{
		{Value: ua.NewDoubleVariant(1.5), SourceTimestamp: 1},
		{Value: ua.NewDoubleVariant(2.5), SourceTimestamp: 2},
		{Value: ua.NewDoubleVariant(3.5), SourceTimestamp: 3},
	}}
}

var modes = []EndpointSecurity{
	{SecurityPolicyNone, ua.MessageSecurityModeNone},
	{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSign},
	{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt},
}

// TestReceiveAllocs: in steady state, receiving a one-chunk response (verify,
// decrypt in place, route, decode into the caller's response, complete an
// asynchronous request) allocates nothing; nor does registering the request.
func TestReceiveAllocs(t *testing.T) {
	for _, m := range modes {
		c, send := testChannel(t, m.PolicyURI, m.Mode)
		body := encodeBody(t, doubleResponse())
		resp := &ua.ReadResponse{}
		var got error
		done := func(_ ua.Structure, err error) { got = err }
		sendBuf := make([]byte, 0, 1024)
		recvBuf := make([]byte, 1024)
		chunk := &uacp.Chunk{}
		run := func() {
			p := getPending(kindMessage)
			p.resp, p.done = resp, done
			id, err := c.register(p, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			b := append(sendBuf[:symPrefix], body...)
			seq := send.nextSeq()
			b = send.sealSym(b, uacp.MessageTypeMessage, uacp.ChunkFinal, seq, id, send.sendTok.Load())
			send.sendSeq = seq
			n := copy(recvBuf, b)
			chunk.Header = uacp.Header{MessageType: uacp.MessageTypeMessage, ChunkType: uacp.ChunkFinal, MessageSize: uint32(n)}
			chunk.Data = recvBuf[:n]
			if err := c.handleChunk(chunk); err != nil || got != nil {
				t.Fatal(err, got)
			}
		}
		for range 10 {
			run()
		}
		allocs := testing.AllocsPerRun(1000, run)
		if len(resp.Results) != 3 || resp.Results[2].Value.Double() != 3.5 {
			t.Fatalf("%s: response %+v", m.Mode, resp.Results)
		}
		if allocs != 0 && !raceEnabled {
			t.Errorf("%s/%s: %.1f allocations per response", m.PolicyURI, m.Mode, allocs)
		}
	}
}

// BenchmarkReceive measures the receive path of one response chunk: open
// (verify, decrypt), route by request id, decode into a reused response.
func BenchmarkReceive(b *testing.B) {
	for _, m := range modes {
		p, _ := PolicyByURI(m.PolicyURI)
		b.Run(p.Name+"_"+m.Mode.String(), func(b *testing.B) {
			c, send := testChannel(b, m.PolicyURI, m.Mode)
			body := encodeBody(b, doubleResponse())
			const reqID = 42
			sealed := send.sealSym(append(make([]byte, symPrefix, 1024), body...), uacp.MessageTypeMessage, uacp.ChunkFinal, 5, reqID, send.sendTok.Load())
			resp := &ua.ReadResponse{}
			done := func(ua.Structure, error) {}
			recvBuf := make([]byte, len(sealed))
			chunk := &uacp.Chunk{Header: uacp.Header{MessageType: uacp.MessageTypeMessage, ChunkType: uacp.ChunkFinal, MessageSize: uint32(len(sealed))}}
			b.SetBytes(int64(len(sealed)))
			b.ReportAllocs()
			for b.Loop() {
				p := getPending(kindMessage)
				p.resp, p.done, p.id = resp, done, reqID
				c.mu.Lock()
				c.reg.m[reqID] = p
				c.reg.h.push(p)
				c.mu.Unlock()
				c.sc.recvSeq, c.sc.recvSeqSeen = 4, true
				copy(recvBuf, sealed)
				chunk.Data = recvBuf
				if err := c.handleChunk(chunk); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRoundTrip measures a small Read over loopback against our server, per
// mode (both sides run in this process; allocations include the server's).
func BenchmarkRoundTrip(b *testing.B) {
	srv := startServer(b, serverOptions{handler: func(s *ServerChannel, r *Request) { _ = s.Respond(r, doubleResponse()) }})
	for _, m := range modes {
		p, _ := PolicyByURI(m.PolicyURI)
		b.Run(p.Name+"_"+m.Mode.String(), func(b *testing.B) {
			c := srv.dial(b, srv.clientConfig(b, m))
			req := readRequest("n", 3, 10)
			resp := &ua.ReadResponse{}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.SendRequest(ctx, req, resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
