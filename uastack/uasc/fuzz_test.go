package uasc

import (
	"testing"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
)

// fuzzLimits are small receive limits, so that the fuzzer also proves memory
// stays within them.
var fuzzLimits = uacp.Limits{
	ReceiveBufferSize: 8192, SendBufferSize: 8192,
	MaxRecvMessageSize: 64 << 10, MaxRecvChunkCount: 16,
	MaxSendMessageSize: 64 << 10, MaxSendChunkCount: 16,
}

// initSymTest makes s one end of a channel in policy uri and mode, with one token
// derived from fixed nonces, within fuzzLimits.
func initSymTest(t testing.TB, s *secureConn, uri string, mode ua.MessageSecurityMode, isServer bool) {
	p, err := PolicyByURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	cn, sn := make([]byte, p.NonceLength), make([]byte, p.NonceLength)
	for i := range cn {
		cn[i], sn[i] = byte(i), byte(3*i+1)
	}
	s.lim, s.isServer, s.channelID = fuzzLimits, isServer, 7
	s.sec.policy, s.sec.mode = p, mode
	s.initSym()
	s.asm = uacp.NewAssembler(fuzzLimits.MaxRecvMessageSize, fuzzLimits.MaxRecvChunkCount, nil)
	s.decLimits = ua.DefaultLimits
	s.decLimits.MaxMessageSize = int(fuzzLimits.MaxRecvMessageSize)
	tok, err := newToken(p, 1, 0, cn, sn, isServer)
	if err != nil {
		t.Fatal(err)
	}
	s.recvToks[0] = tok
	s.sendTok.Store(tok)
}

// symPair returns a sender (client) and a receiver (server) of MSG chunks for a
// policy and mode, sharing a token.
func symPair(t testing.TB, uri string, mode ua.MessageSecurityMode) (send, recv *secureConn) {
	send, recv = &secureConn{}, &secureConn{}
	initSymTest(t, send, uri, mode, false)
	initSymTest(t, recv, uri, mode, true)
	return send, recv
}

var fuzzModes = []struct {
	uri  string
	mode ua.MessageSecurityMode
}{
	{SecurityPolicyNone, ua.MessageSecurityModeNone},
	{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSign},
	{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt},
}

// FuzzSymmetricChunk feeds arbitrary MSG chunks to the receive path of each mode:
// verify, decrypt, padding, sequence header, reassembly and decoding of the body.
// Seeded with valid chunks of each mode, their truncations and an abort chunk.
func FuzzSymmetricChunk(f *testing.F) {
	recvs := make([]*secureConn, len(fuzzModes))
	for i, m := range fuzzModes {
		send, recv := symPair(f, m.uri, m.mode)
		recvs[i] = recv
		body := encodeBody(f, &ua.ReadResponse{Results: []ua.DataValue{{Value: ua.NewStringVariant("hello")}}})
		for _, ct := range []uacp.ChunkType{uacp.ChunkFinal, uacp.ChunkIntermediate} {
			b := append(make([]byte, symPrefix, 512), body...)
			chunk := send.sealSym(b, uacp.MessageTypeMessage, ct, 1, 5, send.sendTok.Load())
			f.Add(byte(i), append([]byte(nil), chunk...))
			for _, cut := range []int{1, 16, len(chunk) / 2, len(chunk) - symPrefix} {
				t := append([]byte(nil), chunk[:len(chunk)-cut]...)
				putSecureHeader(t, uacp.MessageTypeMessage, ct, len(t), 7)
				f.Add(byte(i), t)
			}
		}
		abort := append(make([]byte, symPrefix, 256), 0x00, 0x00, 0x80, 0x80, 2, 0, 0, 0, 'n', 'o')
		f.Add(byte(i), append([]byte(nil), send.sealSym(abort, uacp.MessageTypeMessage, uacp.ChunkAbort, 1, 5, send.sendTok.Load())...))
	}
	f.Fuzz(func(t *testing.T, mode byte, data []byte) {
		s := recvs[int(mode)%len(recvs)]
		if len(data) < uacp.HeaderSize || len(data) > int(fuzzLimits.ReceiveBufferSize) {
			return // the connection layer refuses these
		}
		b := append([]byte(nil), data...)
		s.recvSeqSeen = false
		reqID, start, end, err := s.openSym(b)
		if err != nil {
			return
		}
		if start < symPrefix || end > len(b) || start > end {
			t.Fatalf("body [%d:%d] of %d bytes", start, end, len(b))
		}
		var resp ua.ReadResponse
		ct := uacp.ChunkType(b[3])
		if ct == uacp.ChunkFinal && s.asm.Pending() == 0 {
			_, _ = s.decode(b[start:end], &resp)
			return
		}
		msg, err := s.asm.Add(reqID, ct, b[start:end])
		if err != nil || msg == nil {
			return
		}
		if msg.Len() > int(fuzzLimits.MaxRecvMessageSize) {
			t.Fatalf("message of %d bytes", msg.Len())
		}
		_, _ = s.decode(msg.Bytes(), &resp)
		msg.Release()
	})
}

// FuzzOpenSecureChannel feeds arbitrary OPN chunks to the server's parsing of a
// first OpenSecureChannel request and to the client's parsing of a response,
// for policy None and Basic256Sha256. Seeded with valid chunks and truncations.
func FuzzOpenSecureChannel(f *testing.F) {
	clientCert := newTestCert(f, "fuzz-client", 2048, 1)
	serverCert := newTestCert(f, "fuzz-server", 2048, 0)
	scfg := &ServerConfig{
		Policies: []EndpointSecurity{
			{SecurityPolicyNone, ua.MessageSecurityModeNone},
			{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt},
		},
		Certificate: serverCert.der, Key: serverCert.key,
	}
	server, err := scfg.resolve()
	if err != nil {
		f.Fatal(err)
	}
	clients := map[string]asymSecurity{}
	for _, uri := range []string{SecurityPolicyNone, SecurityPolicyBasic256Sha256} {
		cfg := &Config{SecurityPolicyURI: uri, LocalCertificate: clientCert.der, LocalKey: clientCert.key, RemoteCertificate: serverCert.der}
		if uri == SecurityPolicyNone {
			cfg = &Config{}
		}
		_, sec, err := cfg.resolve()
		if err != nil {
			f.Fatal(err)
		}
		clients[uri] = sec
	}
	// The server's view of the Basic256Sha256 client, to seal responses.
	srvSec := clients[SecurityPolicyBasic256Sha256]
	srvSec.localCert, srvSec.localKey, srvSec.localThumb = serverCert.der, serverCert.key, clients[SecurityPolicyBasic256Sha256].remoteThumb
	if err := srvSec.setRemote(clientCert.der); err != nil {
		f.Fatal(err)
	}

	nonce := make([]byte, 32)
	for uri, sec := range clients {
		req := encodeBody(f, &ua.OpenSecureChannelRequest{
			RequestType: ua.SecurityTokenRequestTypeIssue, SecurityMode: sec.mode,
			ClientNonce: nonce[:sec.policy.NonceLength], RequestedLifetime: 60000,
		})
		chunk, err := sec.seal(0, 1, 1, req, 8192)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(false, chunk)
		for _, cut := range []int{1, 100, len(chunk) / 2} {
			f.Add(false, chunk[:len(chunk)-cut])
		}
		respSec := srvSec
		if uri == SecurityPolicyNone {
			respSec = sec
		}
		resp := encodeBody(f, &ua.OpenSecureChannelResponse{
			SecurityToken: ua.ChannelSecurityToken{ChannelID: 9, TokenID: 1, RevisedLifetime: 60000},
			ServerNonce:   nonce[:sec.policy.NonceLength],
		})
		chunk, err = respSec.seal(9, 1, 1, resp, 8192)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(true, chunk)
		f.Add(true, chunk[:len(chunk)-7])
	}

	f.Fuzz(func(t *testing.T, response bool, data []byte) {
		if len(data) < uacp.HeaderSize || len(data) > 8192 {
			return
		}
		b := append([]byte(nil), data...)
		ch := &uacp.Chunk{Header: uacp.Header{MessageType: uacp.MessageTypeOpen, ChunkType: uacp.ChunkType(b[3]), MessageSize: uint32(len(b))}, Data: b}
		if !response {
			s := &ServerChannel{cfg: server}
			s.sc.lim = fuzzLimits
			s.sc.decLimits = ua.DefaultLimits
			if _, req, err := s.openRequest(ch, true); err == nil && req == nil {
				t.Fatal("no request and no error")
			}
			return
		}
		for _, sec := range clients {
			c := &Channel{}
			c.sc.sec = sec
			c.sc.lim = fuzzLimits
			c.sc.decLimits = ua.DefaultLimits
			c.sc.decLimits.MaxMessageSize = int(fuzzLimits.MaxRecvMessageSize)
			copy(b, data) // opening decrypts in place
			if _, resp, err := c.openResponse(ch); err == nil && resp == nil {
				t.Fatal("no response and no error")
			}
		}
	})
}
