//go:build !race

package uasc

import (
	"context"
	"testing"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
)

// Allocation tests: the race detector allocates on its own account, so they
// are built without it only (scripts/test.sh runs them in a step of their own).

// TestSendAllocs: a whole request as the client sees it (encode, register, chunk,
// sign/encrypt, write; then receive, verify, decode into resp, complete) allocates
// nothing in steady state. The server side is a minimal loop that answers every
// chunk with a pre-encoded response without allocating either, since the
// allocation count is process-wide.
func TestSendAllocs(t *testing.T) {
	body := encodeBody(t, doubleResponse())
	ln, err := uacp.Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cert := newTestCert(t, "server", 2048, 0)
	go func() {
		conn, err := ln.Accept(context.Background())
		if err != nil {
			return
		}
		s, err := Accept(conn, &ServerConfig{Policies: allEndpoints(), Certificate: cert.der, Key: cert.key})
		if err != nil {
			return
		}
		defer s.Close()
		buf := make([]byte, 0, 4096)
		for {
			ch, err := s.sc.conn.ReadChunk()
			if err != nil || ch.MessageType != uacp.MessageTypeMessage {
				return
			}
			reqID, _, _, err := s.sc.openSym(ch.Data)
			if err != nil {
				return
			}
			s.sc.wmu.Lock()
			seq := s.sc.nextSeq()
			b := s.sc.sealSym(append(buf[:symPrefix], body...), uacp.MessageTypeMessage, uacp.ChunkFinal, seq, reqID, s.sc.sendTok.Load())
			s.sc.sendSeq = seq
			s.sc.wmu.Unlock()
			if s.sc.conn.WriteChunk(b) != nil {
				return
			}
		}
	}()
	srv := &testServer{cert: cert}
	c, err := Dial(context.Background(), "opc.tcp://"+ln.Addr().String(),
		srv.clientConfig(t, EndpointSecurity{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := readRequest("n", 3, 10)
	resp := &ua.ReadResponse{}
	run := func() {
		if _, err := c.SendRequest(context.Background(), req, resp); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		run()
	}
	if allocs := testing.AllocsPerRun(200, run); allocs != 0 {
		t.Errorf("%.1f allocations per request", allocs)
	}
}
