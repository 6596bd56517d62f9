package uasc

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
)

// token is one security token of a channel: its id and the symmetric keys of both
// directions derived from the nonces of the OpenSecureChannel that issued it.
type token struct {
	id       uint32
	created  time.Time
	lifetime time.Duration
	send     *SymCipher // the keys this side signs and encrypts with; nil for None
	recv     *SymCipher // the keys the peer signs and encrypts with; nil for None
}

// expired reports whether the token is past its lifetime plus the 25% of grace
// the other stacks give a token whose renewal is late.
func (t *token) expired(now time.Time) bool {
	return t.lifetime > 0 && now.Sub(t.created) > t.lifetime+t.lifetime/4
}

// newToken derives the keys of a token. The client's keys are what the client
// sends with, the server's what the server sends with.
func newToken(p *Policy, id uint32, lifetime time.Duration, clientNonce, serverNonce []byte, isServer bool) (*token, error) {
	t := &token{id: id, created: time.Now(), lifetime: lifetime}
	if p.IsNone() {
		return t, nil
	}
	ck, sk := p.ChannelKeys(clientNonce, serverNonce)
	defer ck.Clear()
	defer sk.Clear()
	cc, err := p.NewSymCipher(ck)
	if err != nil {
		return nil, err
	}
	sc, err := p.NewSymCipher(sk)
	if err != nil {
		return nil, err
	}
	if isServer {
		t.send, t.recv = sc, cc
	} else {
		t.send, t.recv = cc, sc
	}
	return t, nil
}

// asymSecurity is what the asymmetric (OPN) chunks of a channel are secured with.
type asymSecurity struct {
	policy      *Policy
	mode        ua.MessageSecurityMode
	localCert   []byte // as sent: leaf, possibly followed by its issuers
	localKey    *rsa.PrivateKey
	localThumb  []byte // SHA-1 of the local leaf
	remoteCert  []byte // the peer's leaf, DER
	remotePub   *rsa.PublicKey
	remoteThumb []byte // SHA-1 of remoteCert
}

// setLocal sets this side's certificate (chain) and key, checking that they belong
// together and suit the policy.
func (a *asymSecurity) setLocal(cert []byte, key *rsa.PrivateKey) error {
	if len(cert) == 0 || key == nil {
		return fmt.Errorf("uasc: %s needs a certificate and a private key: %w", a.policy.Name, ErrCertificate)
	}
	leaf, err := pki.LeafDER(cert)
	if err != nil {
		return fmt.Errorf("uasc: own certificate: %w (%w)", ErrCertificate, err)
	}
	pub, err := rsaPublicKey(leaf)
	if err != nil {
		return fmt.Errorf("uasc: own certificate: %w", err)
	}
	if !pub.Equal(&key.PublicKey) {
		return fmt.Errorf("uasc: the private key does not belong to the own certificate: %w", ErrCertificate)
	}
	if err := a.policy.CheckAsymKey(pub); err != nil {
		return fmt.Errorf("uasc: own key: %w (%w)", ErrPolicyRejected, err)
	}
	th := pki.Thumbprint(leaf)
	a.localCert, a.localKey, a.localThumb = cert, key, th[:]
	return nil
}

// setRemote sets the peer's certificate (chain allowed; the leaf is used).
func (a *asymSecurity) setRemote(cert []byte) error {
	leaf, err := pki.LeafDER(cert)
	if err != nil || len(leaf) == 0 {
		return fmt.Errorf("uasc: peer certificate: %w (%v)", ErrCertificate, err)
	}
	pub, err := rsaPublicKey(leaf)
	if err != nil {
		return fmt.Errorf("uasc: peer certificate: %w", err)
	}
	if err := a.policy.CheckAsymKey(pub); err != nil {
		return fmt.Errorf("uasc: peer key: %w (%w)", ErrPolicyRejected, err)
	}
	th := pki.Thumbprint(leaf)
	a.remoteCert, a.remotePub, a.remoteThumb = leaf, pub, th[:]
	return nil
}

func rsaPublicKey(der []byte) (*rsa.PublicKey, error) {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("%w (%w)", ErrCertificate, err)
	}
	pub, ok := c.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: %T key, RSA needed", ErrCertificate, c.PublicKey)
	}
	return pub, nil
}

// seal builds a whole OPN chunk (Part 6 §6.7.2): signed with the local key and
// encrypted for the peer unless the policy is None, whatever the mode (OPN is
// secured asymmetrically even in Sign mode). The result must fit maxSize.
func (a *asymSecurity) seal(channelID, seq, requestID uint32, body []byte, maxSize int) ([]byte, error) {
	p := a.policy
	if p.IsNone() {
		b := make([]byte, secureHeaderSize, secureHeaderSize+4+len(SecurityPolicyNone)+8+seqHeaderSize+len(body))
		b = appendAsymHeader(b, SecurityPolicyNone, nil, nil)
		b = binary.LittleEndian.AppendUint32(b, seq)
		b = binary.LittleEndian.AppendUint32(b, requestID)
		b = append(b, body...)
		if len(b) > maxSize {
			return nil, fmt.Errorf("uasc: OPN chunk of %d bytes, SendBufferSize %d: %w", len(b), maxSize, uacp.ErrMessageTooLarge)
		}
		putSecureHeader(b, uacp.MessageTypeOpen, uacp.ChunkFinal, len(b), channelID)
		return b, nil
	}
	sigSize := a.localKey.Size()
	pb := p.AsymPlaintextBlockSize(a.remotePub)
	cb := p.AsymCiphertextBlockSize(a.remotePub)
	extra := p.AsymExtraPadding(a.remotePub)

	hdr := appendAsymHeader(make([]byte, secureHeaderSize, secureHeaderSize+12+len(p.URI)+len(a.localCert)+len(a.remoteThumb)),
		p.URI, a.localCert, a.remoteThumb)
	hdrLen := len(hdr)
	plainLen := seqHeaderSize + len(body)
	pad := PaddingSize(plainLen, pb, sigSize, extra)
	plainTotal := plainLen + pad + PaddingOverhead(extra) + sigSize
	total := hdrLen + plainTotal/pb*cb
	if total > maxSize {
		return nil, fmt.Errorf("uasc: OPN chunk of %d bytes (certificate of %d bytes), SendBufferSize %d: %w",
			total, len(a.localCert), maxSize, uacp.ErrMessageTooLarge)
	}
	putSecureHeader(hdr, uacp.MessageTypeOpen, uacp.ChunkFinal, total, channelID)

	plain := make([]byte, 0, hdrLen+plainTotal)
	plain = append(plain, hdr...)
	plain = binary.LittleEndian.AppendUint32(plain, seq)
	plain = binary.LittleEndian.AppendUint32(plain, requestID)
	plain = append(plain, body...)
	plain = AppendPadding(plain, pad, extra)
	sig, err := p.AsymSign(a.localKey, plain)
	if err != nil {
		return nil, err
	}
	plain = append(plain, sig...)
	out, err := p.AppendAsymEncrypt(hdr, a.remotePub, plain[hdrLen:])
	clear(plain)
	if err != nil {
		return nil, err
	}
	if len(out) != total {
		return nil, fmt.Errorf("uasc: OPN chunk of %d bytes, computed %d", len(out), total)
	}
	return out, nil
}

// open decrypts and verifies an OPN chunk b in place, given the offset of its
// sequence header (after parseAsymHeader). It returns where the sequence header
// starts and where the body ends. The remote certificate must be set.
func (a *asymSecurity) open(b []byte, off int) (seqStart, end int, err error) {
	p := a.policy
	if p.IsNone() {
		if len(b)-off < seqHeaderSize {
			return 0, 0, fmt.Errorf("uasc: OPN chunk of %d bytes: %w", len(b), ErrMalformed)
		}
		return off, len(b), nil
	}
	ct := b[off:]
	kb := a.localKey.Size()
	if len(ct) == 0 || len(ct)%kb != 0 {
		return 0, 0, fmt.Errorf("uasc: OPN: %d encrypted bytes, not a multiple of %d: %w", len(ct), kb, ErrSecurityChecks)
	}
	// Plaintext blocks are shorter than ciphertext blocks, so decrypting into
	// the chunk itself never overwrites a block not yet read.
	plain, err := p.AppendAsymDecrypt(ct[:0], a.localKey, ct)
	if err != nil {
		return 0, 0, securityError("OPN decrypt", err)
	}
	plainEnd := off + len(plain)
	sigSize := a.remotePub.Size()
	if len(plain) < seqHeaderSize+sigSize+PaddingOverhead(false) {
		return 0, 0, fmt.Errorf("uasc: OPN plaintext of %d bytes: %w", len(plain), ErrSecurityChecks)
	}
	sigStart := plainEnd - sigSize
	if err := p.AsymVerify(a.remotePub, b[:sigStart], b[sigStart:plainEnd]); err != nil {
		return 0, 0, securityError("OPN signature", err)
	}
	n, err := ParsePadding(b[off:sigStart], p.AsymExtraPadding(&a.localKey.PublicKey))
	if err != nil {
		return 0, 0, securityError("OPN padding", err)
	}
	end = sigStart - n
	if end-off < seqHeaderSize {
		return 0, 0, fmt.Errorf("uasc: OPN without sequence header: %w", ErrMalformed)
	}
	return off, end, nil
}

// secureConn is the part of a secure channel both sides share: the chunk
// protection of MSG and CLO, sequence numbers, tokens, reassembly and the send
// path. The client Channel and the ServerChannel embed it.
type secureConn struct {
	conn     *uacp.Conn
	lim      uacp.Limits
	bufs     *pooling.BufferPool
	log      *slog.Logger
	isServer bool
	sec      asymSecurity

	// Set by the first OpenSecureChannel, before the reader runs; constant after.
	channelID uint32
	sigSize   int  // symmetric signature size; 0 in mode None
	encrypt   bool // mode SignAndEncrypt
	maxBody   int  // body bytes in one MSG chunk

	// Send side, under wmu.
	wmu     sync.Mutex
	sendSeq uint32          // last sequence number sent
	sendBuf *pooling.Buffer // chunk buffer of multi-chunk messages; nil once closed
	sendTok atomic.Pointer[token]

	// Receive side, owned by the reader goroutine.
	recvSeq     uint32
	recvSeqSeen bool
	recvToks    [2]*token // newest first; [1] until the peer uses [0]
	asm         *uacp.Assembler
	dec         ua.Decoder
	decLimits   ua.Limits
}

func (s *secureConn) init(conn *uacp.Conn, bufs *pooling.BufferPool, log *slog.Logger, isServer bool) {
	if bufs == nil {
		bufs = pooling.Buffers
	}
	s.conn, s.lim, s.bufs, s.log, s.isServer = conn, conn.Limits(), bufs, log, isServer
	s.asm = uacp.NewAssembler(s.lim.MaxRecvMessageSize, s.lim.MaxRecvChunkCount, bufs)
	s.decLimits = ua.DefaultLimits
	s.decLimits.MaxMessageSize = int(s.lim.MaxRecvMessageSize)
	s.sendBuf = bufs.Get(int(s.lim.SendBufferSize))
	s.sendSeq = initialSendSeq
}

// initialSendSeq is the sequence number before the first one sent; tests move it
// close to the wrap-around.
var initialSendSeq uint32

// initSym fixes the symmetric chunk sizes once policy and mode are known.
func (s *secureConn) initSym() {
	sb := int(s.lim.SendBufferSize)
	switch s.sec.mode {
	case ua.MessageSecurityModeSignAndEncrypt:
		s.sigSize, s.encrypt = s.sec.policy.SymSignatureSize, true
		s.maxBody = MaxPayloadSize(sb, symHeaderSize, s.sigSize, aesBlockSize, aesBlockSize, false) - seqHeaderSize
	case ua.MessageSecurityModeSign:
		s.sigSize, s.encrypt = s.sec.policy.SymSignatureSize, false
		s.maxBody = MaxPayloadSize(sb, symHeaderSize, s.sigSize, 0, 0, false) - seqHeaderSize
	default:
		s.sigSize, s.encrypt = 0, false
		s.maxBody = MaxPayloadSize(sb, symHeaderSize, 0, 0, 0, false) - seqHeaderSize
	}
}

// releaseSend gives the send buffer back; later sends fail with ErrChannelClosed.
func (s *secureConn) releaseSend() {
	s.wmu.Lock()
	if s.sendBuf != nil {
		s.bufs.PutClear(s.sendBuf)
		s.sendBuf = nil
	}
	s.wmu.Unlock()
}

// nextSeq returns the sequence number after the last one sent (wmu held). It
// wraps after UInt32.MaxValue to 1, which Part 6 §6.7.2.4 allows.
func (s *secureConn) nextSeq() uint32 {
	n := s.sendSeq + 1
	if n == 0 {
		n = 1
	}
	return n
}

// checkSeq checks the sequence number of a received chunk: each one follows the
// previous one, except that after seqWrapAfter it may wrap to below seqWrapBelow.
func (s *secureConn) checkSeq(seq uint32) error {
	if !s.recvSeqSeen {
		s.recvSeq, s.recvSeqSeen = seq, true
		return nil
	}
	prev := s.recvSeq
	if (seq == prev+1 && seq != 0) || (prev >= seqWrapAfter && seq < seqWrapBelow) {
		s.recvSeq = seq
		return nil
	}
	return fmt.Errorf("uasc: sequence number %d after %d: %w", seq, prev, ErrSequenceNumber)
}

// checkSendSize checks a message body of n bytes against the peer's limits
// before anything is sent; tooLarge is the error to wrap.
func (s *secureConn) checkSendSize(n int, tooLarge error) (chunks int, err error) {
	if m := s.lim.MaxSendMessageSize; m != 0 && int64(n) > int64(m) {
		return 0, fmt.Errorf("uasc: message of %d bytes, the peer accepts %d: %w", n, m, tooLarge)
	}
	chunks = max(1, (n+s.maxBody-1)/s.maxBody)
	if m := s.lim.MaxSendChunkCount; m != 0 && int64(chunks) > int64(m) {
		return 0, fmt.Errorf("uasc: message of %d chunks, the peer accepts %d: %w", chunks, m, tooLarge)
	}
	return chunks, nil
}

// sealSym completes a MSG or CLO chunk in b, whose body ends at len(b) and whose
// capacity has room for padding and signature: it writes the headers, pads,
// signs and encrypts in place.
func (s *secureConn) sealSym(b []byte, mt uacp.MessageType, ct uacp.ChunkType, seq, requestID uint32, t *token) []byte {
	bodyEnd := len(b)
	binary.LittleEndian.PutUint32(b[secureHeaderSize:], t.id)
	putSeqHeader(b[symHeaderSize:], seq, requestID)
	total, pad := bodyEnd, 0
	if s.encrypt {
		pad = PaddingSize(bodyEnd-symHeaderSize, aesBlockSize, s.sigSize, false)
		total += pad + PaddingOverhead(false)
	}
	total += s.sigSize
	putSecureHeader(b, mt, ct, total, s.channelID)
	if s.encrypt {
		b = AppendPadding(b, pad, false)
	}
	if s.sigSize > 0 {
		b = t.send.Sign(b, b)
	}
	if s.encrypt {
		_ = t.send.EncryptInPlace(b[symHeaderSize:]) // a whole number of blocks by construction
	}
	return b
}

// sendSym sends a MSG or CLO message. enc holds its encoding after symPrefix
// reserved bytes; it is secured in place when it fits one chunk, else copied
// chunk by chunk into the send buffer. tooLarge is the error to wrap when the
// message exceeds the peer's limits, in which case nothing is sent.
func (s *secureConn) sendSym(mt uacp.MessageType, requestID uint32, enc []byte, tooLarge error) error {
	body := enc[symPrefix:]
	n, err := s.checkSendSize(len(body), tooLarge)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.sendBuf == nil {
		return ErrChannelClosed
	}
	t := s.sendTok.Load()
	if n == 1 && cap(enc)-len(enc) >= symTrailerMax {
		seq := s.nextSeq()
		b := s.sealSym(enc, mt, uacp.ChunkFinal, seq, requestID, t)
		s.sendSeq = seq
		return s.conn.WriteChunk(b)
	}
	buf := s.sendBuf.B[:cap(s.sendBuf.B)]
	for i := 0; i < n; i++ {
		piece := body[i*s.maxBody : min((i+1)*s.maxBody, len(body))]
		ct := uacp.ChunkIntermediate
		if i == n-1 {
			ct = uacp.ChunkFinal
		}
		b := append(buf[:symPrefix], piece...)
		seq := s.nextSeq()
		b = s.sealSym(b, mt, ct, seq, requestID, t)
		s.sendSeq = seq
		if err := s.conn.WriteChunk(b); err != nil {
			return err
		}
	}
	return nil
}

// sendOpen sends an OPN message (one chunk, asymmetric security).
func (s *secureConn) sendOpen(requestID uint32, msg ua.Structure) error {
	e := ua.NewEncoder(make([]byte, 0, 256))
	e.WriteStructure(msg)
	if err := e.Err(); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.sendBuf == nil {
		return ErrChannelClosed
	}
	seq := s.nextSeq()
	b, err := s.sec.seal(s.channelID, seq, requestID, e.Bytes(), int(s.lim.SendBufferSize))
	if err != nil {
		return err
	}
	s.sendSeq = seq
	return s.conn.WriteChunk(b)
}

// recvToken returns the receive token with the given id, or nil.
func (s *secureConn) recvToken(id uint32) *token {
	if t := s.recvToks[0]; t != nil && t.id == id {
		return t
	}
	if t := s.recvToks[1]; t != nil && t.id == id {
		return t
	}
	return nil
}

// addRecvToken makes t the newest token; the previous one stays valid for
// incoming chunks until the peer uses t.
func (s *secureConn) addRecvToken(t *token) {
	s.recvToks[1], s.recvToks[0] = s.recvToks[0], t
}

// openSym verifies and decrypts a MSG or CLO chunk in place and checks its
// sequence number. It returns the request id and the body's bounds in b.
func (s *secureConn) openSym(b []byte) (requestID uint32, bodyStart, bodyEnd int, err error) {
	if len(b) < symPrefix {
		return 0, 0, 0, fmt.Errorf("uasc: chunk of %d bytes: %w", len(b), ErrMalformed)
	}
	if id := chunkChannelID(b); id != s.channelID {
		return 0, 0, 0, fmt.Errorf("uasc: chunk for channel %d on channel %d: %w", id, s.channelID, ErrChannelID)
	}
	tid := binary.LittleEndian.Uint32(b[secureHeaderSize:])
	t := s.recvToken(tid)
	if t == nil {
		return 0, 0, 0, fmt.Errorf("uasc: token %d: %w", tid, ErrTokenUnknown)
	}
	if s.isServer && t.expired(time.Now()) {
		return 0, 0, 0, fmt.Errorf("uasc: token %d expired: %w", tid, ErrTokenUnknown)
	}
	end := len(b)
	if s.encrypt {
		if (end-symHeaderSize)%aesBlockSize != 0 {
			return 0, 0, 0, fmt.Errorf("uasc: %d encrypted bytes: %w", end-symHeaderSize, ErrSecurityChecks)
		}
		_ = t.recv.DecryptInPlace(b[symHeaderSize:])
	}
	if s.sigSize > 0 {
		if end-symPrefix < s.sigSize {
			return 0, 0, 0, fmt.Errorf("uasc: chunk of %d bytes: %w", len(b), ErrSecurityChecks)
		}
		end -= s.sigSize
		if !t.recv.Verify(b[:end], b[end:end+s.sigSize]) {
			return 0, 0, 0, fmt.Errorf("uasc: chunk signature: %w", ErrSecurityChecks)
		}
	}
	if s.encrypt {
		n, err := ParsePadding(b[symHeaderSize:end], false)
		if err != nil {
			return 0, 0, 0, securityError("chunk padding", err)
		}
		end -= n
		if end < symPrefix {
			return 0, 0, 0, fmt.Errorf("uasc: padding covers the sequence header: %w", ErrSecurityChecks)
		}
	}
	if err := s.checkSeq(binary.LittleEndian.Uint32(b[symHeaderSize:])); err != nil {
		return 0, 0, 0, err
	}
	if t == s.recvToks[0] && s.recvToks[1] != nil {
		// The peer moved to the newest token: the previous one is done with,
		// and a server now answers with the new one too (Part 6 §6.7.4).
		s.recvToks[1] = nil
		if s.isServer {
			s.sendTok.Store(t)
		}
	}
	return binary.LittleEndian.Uint32(b[symHeaderSize+4:]), symPrefix, end, nil
}

// openAsymChunk checks the security header of an OPN chunk against the channel
// (policy, certificates) and opens it. With learn set (a server's first OPN), the
// policy and the peer certificate are taken from the header instead; accept vets
// them. It returns the request id and the body.
func (s *secureConn) openAsymChunk(b []byte, ct uacp.ChunkType) (requestID uint32, body []byte, err error) {
	if ct != uacp.ChunkFinal {
		return 0, nil, fmt.Errorf("uasc: OPN chunk type %s: %w", ct, ErrUnexpectedMessage)
	}
	h, off, err := parseAsymHeader(b)
	if err != nil {
		return 0, nil, err
	}
	if err := s.checkAsymHeader(&h); err != nil {
		return 0, nil, err
	}
	return s.openAsymBody(b, off)
}

// checkAsymHeader checks an asymmetric security header against the channel.
func (s *secureConn) checkAsymHeader(h *asymHeader) error {
	a := &s.sec
	if string(h.PolicyURI) != a.policy.URI {
		return fmt.Errorf("uasc: OPN with policy %q on a %s channel: %w", h.PolicyURI, a.policy.Name, ErrSecurityChecks)
	}
	if a.policy.IsNone() {
		return nil
	}
	leaf, err := pki.LeafDER(h.SenderCert)
	if err != nil || string(leaf) != string(a.remoteCert) {
		return fmt.Errorf("uasc: OPN signed with another certificate than the peer's: %w", ErrCertificate)
	}
	if string(h.Thumbprint) != string(a.localThumb) {
		return fmt.Errorf("uasc: OPN encrypted for another certificate (thumbprint %x): %w", h.Thumbprint, ErrSecurityChecks)
	}
	return nil
}

// openAsymBody decrypts and verifies an OPN chunk whose header was checked, checks
// the sequence number and returns the request id and body.
func (s *secureConn) openAsymBody(b []byte, off int) (uint32, []byte, error) {
	seqStart, end, err := s.sec.open(b, off)
	if err != nil {
		return 0, nil, err
	}
	if err := s.checkSeq(binary.LittleEndian.Uint32(b[seqStart:])); err != nil {
		return 0, nil, err
	}
	return binary.LittleEndian.Uint32(b[seqStart+4:]), b[seqStart+seqHeaderSize : end], nil
}

// decode decodes a message body with the channel's limits. into, when of the
// message's type, is decoded into.
func (s *secureConn) decode(body []byte, into ua.Structure) (ua.Structure, error) {
	s.dec.Reset(body, &s.decLimits)
	return s.dec.ReadStructure(into)
}

// --- encoding outgoing messages ---------------------------------------------

// outMsg is an outgoing message being encoded into a pooled buffer.
type outMsg struct {
	pooling.Header
	enc  ua.Encoder
	buf  *pooling.Buffer
	bufs *pooling.BufferPool
}

var outMsgs = pooling.NewPool[outMsg](0, func(m *outMsg) { *m = outMsg{} })

func init() { pooling.Register("uasc.outMsg", outMsgs) }

var zeroPrefix [symPrefix]byte

// encodeBufferSize is the pooled buffer an outgoing message is encoded
// into first (see encode).
const encodeBufferSize = 8 << 10

// encode encodes msg, type id first, after symPrefix reserved bytes. The caller
// releases the result.
func (s *secureConn) encode(msg ua.Structure, small bool) (*outMsg, []byte, error) {
	m := outMsgs.Get()
	m.bufs = s.bufs
	// small (a client's requests): most are far smaller than a chunk
	// (Publish requests and their acknowledgements, reads, keep-alives), and
	// a buffer of the chunk size each kept the pool's 64 KiB class full of
	// buffers that had carried a hundred bytes (8 MiB at a hundred
	// sessions). A larger request grows the encoder's slice by append (an
	// allocation, the price of the rare large request) and sendSym splits
	// it as before. A server's responses (Publish responses of thousands of
	// values) start at the chunk size.
	size := int(s.lim.SendBufferSize)
	if small {
		size = min(size, encodeBufferSize)
	}
	m.buf = s.bufs.Get(size)
	m.enc.Reset(m.buf.B[:cap(m.buf.B)])
	m.enc.WriteRaw(zeroPrefix[:])
	m.enc.WriteStructure(msg)
	if err := m.enc.Err(); err != nil {
		m.release()
		return nil, nil, fmt.Errorf("uasc: encoding %T: %w", msg, err)
	}
	return m, m.enc.Bytes(), nil
}

// release clears what was written (a request may carry secrets in plaintext) and
// gives the buffer back.
func (m *outMsg) release() {
	b := m.enc.Bytes()
	if cap(b) > 0 && cap(m.buf.B) > 0 && &b[:1][0] == &m.buf.B[:1][0] {
		clear(b)
	} else {
		clear(b)
		clear(m.buf.B[:cap(m.buf.B)])
	}
	m.bufs.Put(m.buf)
	m.enc.Reset(nil)
	outMsgs.Put(m)
}

// --- channel ids ------------------------------------------------------------

// lastChannelID numbers the channels of the server side, from a random start so
// that ids are not reused across restarts soon.
var lastChannelID atomic.Uint32

func init() { lastChannelID.Store(uint32(time.Now().UnixNano()) & 0x7fffffff) }

func newChannelID() uint32 {
	for {
		if id := lastChannelID.Add(1); id != 0 {
			return id
		}
	}
}

func durationMS(ms uint32) time.Duration { return time.Duration(ms) * time.Millisecond }

func toMS(d time.Duration) uint32 {
	ms := d.Milliseconds()
	switch {
	case ms <= 0:
		return 0
	case ms > 0xFFFFFFFF:
		return 0xFFFFFFFF
	}
	return uint32(ms)
}
