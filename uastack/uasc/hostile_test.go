package uasc

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
)

// craft says how craftChunk spoils a chunk.
type craft struct {
	seqSkip      int32  // added to the sequence number
	tokenDelta   uint32 // added to the token id
	channelDelta uint32 // added to the channel id
	badPadding   bool   // padding bytes that do not match the size (signed correctly)
	flipSig      bool   // a bit of the signature flipped
	flipCipher   bool   // a bit of the encrypted part flipped after signing
	cut          int    // bytes cut from the end (MessageSize fixed up)
}

// craftChunk secures a chunk as sealSym does, spoiled as o says, and accounts for
// its sequence number.
func craftChunk(s *secureConn, mt uacp.MessageType, ct uacp.ChunkType, reqID uint32, body []byte, o craft) []byte {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	t := s.sendTok.Load()
	b := make([]byte, symPrefix, symPrefix+len(body)+symTrailerMax)
	b = append(b, body...)
	seq := uint32(int64(s.nextSeq()) + int64(o.seqSkip))
	binary.LittleEndian.PutUint32(b[secureHeaderSize:], t.id+o.tokenDelta)
	putSeqHeader(b[symHeaderSize:], seq, reqID)
	total, pad := len(b), 0
	if s.encrypt {
		pad = PaddingSize(len(b)-symHeaderSize, aesBlockSize, s.sigSize, false)
		total += pad + 1
	}
	total += s.sigSize
	putSecureHeader(b, mt, ct, total, s.channelID+o.channelDelta)
	if s.encrypt {
		b = AppendPadding(b, pad, false)
		if o.badPadding {
			b[len(b)-1] = byte(pad + 7)
		}
	}
	if s.sigSize > 0 {
		b = t.send.Sign(b, b)
		if o.flipSig {
			b[len(b)-1] ^= 1
		}
	}
	if s.encrypt {
		_ = t.send.EncryptInPlace(b[symHeaderSize:])
		if o.flipCipher {
			b[symHeaderSize+3] ^= 0x40
		}
	}
	if o.cut > 0 {
		b = b[:len(b)-o.cut]
		binary.LittleEndian.PutUint32(b[4:], uint32(len(b)))
	}
	s.sendSeq = seq
	return b
}

// encodeBody encodes a message body as it travels in chunks.
func encodeBody(t testing.TB, m ua.Structure) []byte {
	e := ua.NewEncoder(nil)
	e.WriteStructure(m)
	if err := e.Err(); err != nil {
		t.Fatal(err)
	}
	return e.Bytes()
}

// TestHostileServer: a server that sends chunks that fail a check ends the
// channel with a typed error, which pending requests get too.
func TestHostileServer(t *testing.T) {
	sign := EndpointSecurity{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSign}
	encrypt := EndpointSecurity{SecurityPolicyAes256Sha256RsaPss, ua.MessageSecurityModeSignAndEncrypt}
	none := EndpointSecurity{SecurityPolicyNone, ua.MessageSecurityModeNone}
	cases := []struct {
		name string
		ep   EndpointSecurity
		o    craft
		mt   uacp.MessageType
		want error
	}{
		{"signature/sign", sign, craft{flipSig: true}, 0, ErrSecurityChecks},
		{"signature/encrypt", encrypt, craft{flipSig: true}, 0, ErrSecurityChecks},
		{"ciphertext", encrypt, craft{flipCipher: true}, 0, ErrSecurityChecks},
		{"padding", encrypt, craft{badPadding: true}, 0, ErrSecurityChecks},
		{"not whole blocks", encrypt, craft{cut: 1}, 0, ErrSecurityChecks},
		{"signature cut", sign, craft{cut: 5}, 0, ErrSecurityChecks},
		{"sequence gap", sign, craft{seqSkip: 1}, 0, ErrSequenceNumber},
		{"sequence replay", encrypt, craft{seqSkip: -1}, 0, ErrSequenceNumber},
		{"sequence none", none, craft{seqSkip: 1000}, 0, ErrSequenceNumber},
		{"channel id", none, craft{channelDelta: 1}, 0, ErrChannelID},
		{"token id", sign, craft{tokenDelta: 1}, 0, ErrTokenUnknown},
		{"CLO from server", sign, craft{}, uacp.MessageTypeClose, ErrUnexpectedMessage},
	}
	srv := startServer(t, serverOptions{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv.setHandler(func(s *ServerChannel, r *Request) {
				mt := tc.mt
				if mt == 0 {
					mt = uacp.MessageTypeMessage
				}
				b := craftChunk(&s.sc, mt, uacp.ChunkFinal, r.ID, encodeBody(t, &ua.ReadResponse{}), tc.o)
				_ = s.sc.conn.WriteChunk(b)
			})
			c := srv.dial(t, srv.clientConfig(t, tc.ep))
			var resp ua.ReadResponse
			_, err := c.SendRequest(context.Background(), readRequest("h", 1, 10), &resp)
			if !errors.Is(err, ErrChannelClosed) || !errors.Is(err, tc.want) {
				t.Fatalf("request: %v, want %v", err, tc.want)
			}
			if err := waitErr(t, c); !errors.Is(err, tc.want) {
				t.Fatalf("Err: %v", err)
			} else {
				t.Log(err)
			}
		})
	}
}

// TestHostileBytes: raw bytes no server should send.
func TestHostileBytes(t *testing.T) {
	cases := []struct {
		name  string
		bytes func(s *ServerChannel, r *Request) []byte
		close bool
		want  error
	}{
		{"garbage", func(*ServerChannel, *Request) []byte { return []byte("GARBAGE!GARBAGE!") }, false, ua.StatusBadTcpMessageTypeInvalid},
		{"oversized chunk", func(*ServerChannel, *Request) []byte {
			return []byte{'M', 'S', 'G', 'F', 0, 0, 0x10, 0}
		}, false, ua.StatusBadTcpMessageTooLarge},
		{"header only", func(s *ServerChannel, _ *Request) []byte {
			b := make([]byte, 12)
			putSecureHeader(b, uacp.MessageTypeMessage, uacp.ChunkFinal, 12, s.ChannelID())
			return b
		}, false, ua.StatusBadDecodingError},
		{"bad chunk type", func(s *ServerChannel, _ *Request) []byte {
			b := make([]byte, 24)
			putSecureHeader(b, uacp.MessageTypeMessage, 'X', 24, s.ChannelID())
			return b
		}, false, ua.StatusBadDecodingError},
		{"truncated chunk", func(s *ServerChannel, _ *Request) []byte {
			b := make([]byte, 60)
			putSecureHeader(b, uacp.MessageTypeMessage, uacp.ChunkFinal, 100, s.ChannelID())
			return b
		}, true, ua.StatusBadConnectionClosed},
		{"closed mid-message", func(s *ServerChannel, r *Request) []byte {
			return craftChunk(&s.sc, uacp.MessageTypeMessage, uacp.ChunkIntermediate, r.ID, make([]byte, 1000), craft{})
		}, true, ua.StatusBadConnectionClosed},
	}
	srv := startServer(t, serverOptions{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv.setHandler(func(s *ServerChannel, r *Request) {
				nc := srv.raw.last()
				_, _ = nc.Write(tc.bytes(s, r))
				if tc.close {
					nc.Close()
				}
			})
			c := srv.dial(t, srv.clientConfig(t, EndpointSecurity{SecurityPolicyBasic128Rsa15, ua.MessageSecurityModeSign}))
			_, err := c.SendRequest(context.Background(), readRequest("h", 1, 10), nil)
			if !errors.Is(err, ErrChannelClosed) || !errors.Is(err, tc.want) {
				t.Fatalf("request: %v, want %v", err, tc.want)
			}
			if err := waitErr(t, c); !errors.Is(err, tc.want) {
				t.Fatalf("Err: %v", err)
			}
		})
	}
}

// TestHostileLimits: a server that sends more than the client's MaxMessageSize or
// MaxChunkCount ends the channel; memory stays within those limits.
func TestHostileLimits(t *testing.T) {
	srv := startServer(t, serverOptions{})
	ep := EndpointSecurity{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt}
	for _, tc := range []struct {
		name      string
		transport *uacp.Config
		chunks    int
		want      error
	}{
		{"message size", &uacp.Config{MaxMessageSize: 32 << 10}, 10, ua.StatusBadTcpMessageTooLarge},
		{"chunk count", &uacp.Config{MaxChunkCount: 3}, 4, ua.StatusBadEncodingLimitsExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.setHandler(func(s *ServerChannel, r *Request) {
				for range tc.chunks {
					b := craftChunk(&s.sc, uacp.MessageTypeMessage, uacp.ChunkIntermediate, r.ID, make([]byte, 4000), craft{})
					if s.sc.conn.WriteChunk(b) != nil {
						return
					}
				}
			})
			cfg := srv.clientConfig(t, ep)
			cfg.Transport = tc.transport
			c := srv.dial(t, cfg)
			_, err := c.SendRequest(context.Background(), readRequest("h", 1, 10), nil)
			if !errors.Is(err, ErrChannelClosed) || !errors.Is(err, tc.want) {
				t.Fatalf("request: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestAbortChunk: an abort chunk fails its request with the status it carries;
// the channel stays open.
func TestAbortChunk(t *testing.T) {
	srv := startServer(t, serverOptions{})
	srv.setHandler(func(s *ServerChannel, r *Request) {
		if rr, ok := r.Message.(*ua.ReadRequest); ok && rr.NodesToRead[0].NodeID.Text == "abort" {
			b := craftChunk(&s.sc, uacp.MessageTypeMessage, uacp.ChunkIntermediate, r.ID, make([]byte, 3000), craft{})
			_ = s.sc.conn.WriteChunk(b)
			_ = s.sc.sendAbort(r.ID, ua.StatusBadTooManyOperations, "changed my mind")
			return
		}
		echoHandler(s, r)
	})
	for _, ep := range []EndpointSecurity{
		{SecurityPolicyNone, ua.MessageSecurityModeNone},
		{SecurityPolicyAes128Sha256RsaOaep, ua.MessageSecurityModeSignAndEncrypt},
	} {
		c := srv.dial(t, srv.clientConfig(t, ep))
		abort := &ua.ReadRequest{NodesToRead: []ua.ReadValueID{{NodeID: ua.NewStringNodeID(1, "abort")}}}
		_, err := c.SendRequest(context.Background(), abort, nil)
		var ae *uacp.AbortError
		if !errors.As(err, &ae) || !errors.Is(err, ua.StatusBadTooManyOperations) || ae.Reason != "changed my mind" {
			t.Fatalf("aborted request: %v", err)
		}
		req := readRequest("after", 3, 3000)
		out, err := c.SendRequest(context.Background(), req, nil)
		checkEcho(t, req, out, err)
		c.Close()
	}
}

// TestUndecodableResponse: a response that verifies but does not decode fails
// its request only.
func TestUndecodableResponse(t *testing.T) {
	srv := startServer(t, serverOptions{})
	srv.setHandler(func(s *ServerChannel, r *Request) {
		if rr, ok := r.Message.(*ua.ReadRequest); ok && rr.NodesToRead[0].NodeID.Text == "bad" {
			body := encodeBody(t, &ua.ReadResponse{Results: make([]ua.DataValue, 3)})
			b := craftChunk(&s.sc, uacp.MessageTypeMessage, uacp.ChunkFinal, r.ID, body[:len(body)-3], craft{})
			_ = s.sc.conn.WriteChunk(b)
			return
		}
		echoHandler(s, r)
	})
	c := srv.dial(t, srv.clientConfig(t, EndpointSecurity{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSign}))
	bad := &ua.ReadRequest{NodesToRead: []ua.ReadValueID{{NodeID: ua.NewStringNodeID(1, "bad")}}}
	if _, err := c.SendRequest(context.Background(), bad, nil); !errors.Is(err, ua.StatusBadDecodingError) || errors.Is(err, ErrChannelClosed) {
		t.Fatalf("got %v", err)
	}
	req := readRequest("after", 1, 10)
	out, err := c.SendRequest(context.Background(), req, nil)
	checkEcho(t, req, out, err)
}

// TestHostileClient: a client that sends a chunk with a bad signature is cut off
// with an Error message naming the reason.
func TestHostileClient(t *testing.T) {
	srv := startServer(t, serverOptions{})
	for _, tc := range []struct {
		name string
		ep   EndpointSecurity
		o    craft
		want error
	}{
		{"signature", EndpointSecurity{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt}, craft{flipSig: true}, ErrSecurityChecks},
		{"sequence", EndpointSecurity{SecurityPolicyNone, ua.MessageSecurityModeNone}, craft{seqSkip: 2}, ErrSequenceNumber},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := srv.dial(t, srv.clientConfig(t, tc.ep))
			srv.nextChannel()
			b := craftChunk(&c.sc, uacp.MessageTypeMessage, uacp.ChunkFinal, 99, encodeBody(t, readRequest("x", 1, 10)), tc.o)
			if err := c.sc.conn.WriteChunk(b); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-srv.errs:
				if !errors.Is(err, tc.want) {
					t.Fatalf("server: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("server did not fail")
			}
			err := waitErr(t, c)
			var ue *uacp.Error
			if !errors.As(err, &ue) || ue.Code != statusOf(tc.want, 0) {
				t.Fatalf("client: %v", err)
			}
		})
	}
}

// sendAbort sends an abort chunk, as a sender that gives up on a message does ('A') for requestID with a status and reason.
func (s *secureConn) sendAbort(requestID uint32, code ua.StatusCode, reason string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.sendBuf == nil {
		return ErrChannelClosed
	}
	if len(reason) > 256 {
		reason = reason[:256]
	}
	b := s.sendBuf.B[:symPrefix]
	b = binary.LittleEndian.AppendUint32(b, uint32(code))
	b = appendLenBytes(b, []byte(reason), reason == "")
	seq := s.nextSeq()
	b = s.sealSym(b, uacp.MessageTypeMessage, uacp.ChunkAbort, seq, requestID, s.sendTok.Load())
	s.sendSeq = seq
	return s.conn.WriteChunk(b)
}

// TestBadOpenResponse: a server whose OpenSecureChannel response is wrong in one
// way or another makes Dial fail with a typed error.
func TestBadOpenResponse(t *testing.T) {
	cert := newTestCert(t, "server", 2048, 0)
	other := newTestCert(t, "other", 2048, 2)
	cases := []struct {
		name   string
		mutate func(s *ServerChannel, reqID *uint32, resp *ua.OpenSecureChannelResponse) ua.Structure
		want   error
	}{
		{"short nonce", func(_ *ServerChannel, _ *uint32, r *ua.OpenSecureChannelResponse) ua.Structure {
			r.ServerNonce = r.ServerNonce[:16]
			return r
		}, ErrNonceInvalid},
		{"token of another channel", func(_ *ServerChannel, _ *uint32, r *ua.OpenSecureChannelResponse) ua.Structure {
			r.SecurityToken.ChannelID++
			return r
		}, ErrChannelID},
		{"another request", func(_ *ServerChannel, id *uint32, r *ua.OpenSecureChannelResponse) ua.Structure {
			*id += 1
			return r
		}, ErrUnexpectedMessage},
		{"signed by another certificate", func(s *ServerChannel, _ *uint32, r *ua.OpenSecureChannelResponse) ua.Structure {
			s.sc.sec.localCert, s.sc.sec.localKey = other.der, other.key
			return r
		}, ErrCertificate},
		{"bad signature", func(s *ServerChannel, _ *uint32, r *ua.OpenSecureChannelResponse) ua.Structure {
			s.sc.sec.localKey = other.key // signs with a key that is not the certificate's
			return r
		}, ErrSecurityChecks},
		{"service fault", func(_ *ServerChannel, _ *uint32, r *ua.OpenSecureChannelResponse) ua.Structure {
			return &ua.ServiceFault{ResponseHeader: ua.ResponseHeader{ServiceResult: ua.StatusBadTooManySessions}}
		}, ua.StatusBadTooManySessions},
		{"MSG instead of OPN", nil, ErrUnexpectedMessage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := uacp.Listen("127.0.0.1:0", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				conn, err := ln.Accept(context.Background())
				if err != nil {
					return
				}
				defer conn.Close()
				cfg, _ := (&ServerConfig{Policies: allEndpoints(), Certificate: cert.der, Key: cert.key}).resolve()
				s := &ServerChannel{cfg: cfg, log: cfg.Logger, done: make(chan struct{})}
				s.sc.init(conn, nil, cfg.Logger, true)
				ch, err := conn.ReadChunk()
				if err != nil {
					return
				}
				reqID, req, err := s.openRequest(ch, true)
				if err != nil {
					t.Error(err)
					return
				}
				s.sc.sec.mode = req.SecurityMode
				s.sc.initSym()
				s.sc.channelID = 1234
				if tc.mutate == nil {
					tok, _ := newToken(s.sc.sec.policy, 1, time.Hour, req.ClientNonce, make([]byte, 32), true)
					s.sc.sendTok.Store(tok)
					_ = conn.WriteChunk(craftChunk(&s.sc, uacp.MessageTypeMessage, uacp.ChunkFinal, reqID, encodeBody(t, &ua.ReadResponse{}), craft{}))
				} else {
					resp := &ua.OpenSecureChannelResponse{
						SecurityToken: ua.ChannelSecurityToken{ChannelID: 1234, TokenID: 1, RevisedLifetime: 60000},
						ServerNonce:   make([]byte, 32),
					}
					msg := tc.mutate(s, &reqID, resp)
					_ = s.sc.sendOpen(reqID, msg)
				}
				for {
					if _, err := conn.ReadChunk(); err != nil {
						return
					}
				}
			}()
			srv := &testServer{cert: cert}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = Dial(ctx, "opc.tcp://"+ln.Addr().String(),
				srv.clientConfig(t, EndpointSecurity{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt}))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}
