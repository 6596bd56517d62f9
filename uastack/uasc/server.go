package uasc

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
)

// Defaults of ServerConfig.
const (
	DefaultMaxTokenLifetime = time.Hour
	DefaultMinTokenLifetime = time.Second
	DefaultOpenTimeout      = 10 * time.Second
)

// EndpointSecurity is a security policy and mode a server accepts.
type EndpointSecurity struct {
	PolicyURI string
	Mode      ua.MessageSecurityMode
}

// ServerConfig is the configuration of the server side of secure channels.
type ServerConfig struct {
	// Policies are the policy and mode pairs clients may open channels with;
	// empty means None only. Deprecated policies are allowed when listed.
	Policies []EndpointSecurity
	// Certificate (DER, optionally followed by its issuers) and Key are the
	// server's; required when a policy other than None is listed.
	Certificate []byte
	Key         *rsa.PrivateKey
	// ValidateClientCert vets the certificate chain a client signs its
	// OpenSecureChannel request with; an error refuses the channel (with the
	// status code the error wraps, else Bad_SecurityChecksFailed). Nil accepts
	// every certificate: for tests only.
	ValidateClientCert func(chain []byte) error
	// MaxTokenLifetime and MinTokenLifetime bound the lifetime a client may ask
	// for (DefaultMaxTokenLifetime, DefaultMinTokenLifetime); a request of 0
	// gets the maximum.
	MaxTokenLifetime time.Duration
	MinTokenLifetime time.Duration
	// OpenTimeout bounds the wait for a client's first OpenSecureChannel
	// request (DefaultOpenTimeout).
	OpenTimeout time.Duration
	// Transport is the configuration the connections were made with; its
	// Buffers pool serves the channels' buffers (nil: pooling.Buffers).
	Transport *uacp.Config
	// Logger receives the channel's few logs; nil discards them.
	Logger *slog.Logger
}

// Validate reports the first setting that cannot work, naming the field.
func (c *ServerConfig) Validate() error {
	_, err := c.resolve()
	return err
}

func (c *ServerConfig) resolve() (ServerConfig, error) {
	var cfg ServerConfig
	if c != nil {
		cfg = *c
	}
	if len(cfg.Policies) == 0 {
		cfg.Policies = []EndpointSecurity{{PolicyURI: SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}}
	}
	var local *asymSecurity // parsed once, for the first policy that needs it
	for i, e := range cfg.Policies {
		p, err := PolicyByURI(e.PolicyURI)
		if err != nil {
			return cfg, fmt.Errorf("uasc: ServerConfig.Policies[%d]: %w (%w)", i, ErrPolicyRejected, err)
		}
		switch {
		case p.IsNone() && e.Mode != ua.MessageSecurityModeNone,
			!p.IsNone() && e.Mode != ua.MessageSecurityModeSign && e.Mode != ua.MessageSecurityModeSignAndEncrypt:
			return cfg, fmt.Errorf("uasc: ServerConfig.Policies[%d]: mode %s with policy %s: %w", i, e.Mode, p.Name, ErrModeRejected)
		}
		if p.IsNone() {
			continue
		}
		if local == nil {
			local = &asymSecurity{policy: p}
			if err := local.setLocal(cfg.Certificate, cfg.Key); err != nil {
				return cfg, fmt.Errorf("uasc: ServerConfig.Certificate/Key for %s: %w", p.Name, err)
			}
		} else if err := p.CheckAsymKey(&cfg.Key.PublicKey); err != nil {
			return cfg, fmt.Errorf("uasc: ServerConfig.Key for %s: %w (%w)", p.Name, ErrPolicyRejected, err)
		}
	}
	if cfg.MaxTokenLifetime <= 0 {
		cfg.MaxTokenLifetime = DefaultMaxTokenLifetime
	}
	if cfg.MinTokenLifetime <= 0 {
		cfg.MinTokenLifetime = DefaultMinTokenLifetime
	}
	if cfg.MinTokenLifetime > cfg.MaxTokenLifetime {
		return cfg, fmt.Errorf("uasc: ServerConfig.MinTokenLifetime %v above MaxTokenLifetime %v", cfg.MinTokenLifetime, cfg.MaxTokenLifetime)
	}
	if cfg.OpenTimeout <= 0 {
		cfg.OpenTimeout = DefaultOpenTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

func (c *ServerConfig) allows(policyURI string, mode ua.MessageSecurityMode) bool {
	for _, e := range c.Policies {
		if e.PolicyURI == policyURI && e.Mode == mode {
			return true
		}
	}
	return false
}

func (c *ServerConfig) allowsPolicy(policyURI string) bool {
	for _, e := range c.Policies {
		if e.PolicyURI == policyURI {
			return true
		}
	}
	return false
}

// Request is a service request received on a ServerChannel. Answer it with
// ServerChannel.Respond or RespondFault, from any goroutine, at any time (a
// Publish may be parked and answered later).
type Request struct {
	// ID is the request id of the secure conversation; the response carries it.
	ID uint32
	// Handle and TimeoutHint are RequestHeader.RequestHandle and TimeoutHint.
	Handle      uint32
	TimeoutHint time.Duration
	// Message is the decoded request; it belongs to the handler.
	Message ua.Structure
	// Received is when the request's last chunk arrived.
	Received time.Time
}

// ServerChannel is the server side of a secure channel. Serve reads the requests
// on one goroutine; Respond may be called from any.
type ServerChannel struct {
	sc  secureConn
	cfg ServerConfig
	log *slog.Logger

	clientCert []byte // as sent: leaf, possibly followed by issuers
	lastToken  uint32 // reader only

	mu          sync.Mutex
	err         error
	serverNonce []byte
	clientNonce []byte

	done    chan struct{}
	serving atomic.Bool
}

// Accept opens the server side of a secure channel on an established connection:
// it waits for the client's OpenSecureChannel request (at most cfg.OpenTimeout),
// checks it against cfg and answers it. A refused request is answered with an
// Error message carrying the reason's status code, and the connection is closed.
func Accept(conn *uacp.Conn, cfg *ServerConfig) (*ServerChannel, error) {
	c, err := cfg.resolve()
	if err != nil {
		_ = conn.SendError(ua.StatusBadInternalError, "server configuration")
		return nil, err
	}
	s := &ServerChannel{cfg: c, log: c.Logger, done: make(chan struct{})}
	s.sc.init(conn, transportBuffers(c.Transport), c.Logger, true)
	_ = conn.SetReadDeadline(time.Now().Add(c.OpenTimeout))
	ch, err := conn.ReadChunk()
	if err == nil {
		if ch.MessageType != uacp.MessageTypeOpen {
			err = fmt.Errorf("uasc: %s before OpenSecureChannel: %w", ch.MessageType, ErrUnexpectedMessage)
		} else {
			err = s.handleOpen(ch, true)
		}
	}
	if err == nil {
		err = conn.SetReadDeadline(time.Time{})
	}
	if err != nil {
		s.refuse(err)
		s.sc.releaseSend()
		return nil, err
	}
	return s, nil
}

// refuse answers err with an Error message and closes the connection.
func (s *ServerChannel) refuse(err error) {
	var ue *uacp.Error
	if errors.As(err, &ue) || errors.Is(err, uacp.ErrClosed) || errors.Is(err, uacp.ErrTimeout) {
		s.sc.conn.Close()
		return
	}
	// The reason goes to an unauthenticated peer: the status code's name only,
	// never err's text, which can name files of ours (the rejected/ copy of its
	// certificate) or other internals. The details go to our log.
	sc := statusOf(err, ua.StatusBadSecurityChecksFailed)
	s.log.Info("uasc: channel refused", "status", sc, "err", err)
	_ = s.sc.conn.SendError(sc, sc.String())
}

// handleOpen handles an OpenSecureChannel request: the first (Issue, from Accept)
// or a renewal (from Serve).
func (s *ServerChannel) handleOpen(ch *uacp.Chunk, first bool) error {
	reqID, req, err := s.openRequest(ch, first)
	if err != nil {
		return err
	}
	return s.respondOpen(reqID, req, first)
}

// openRequest opens, decodes and checks an OpenSecureChannel request. For the
// first, the policy and the client certificate are learnt from it.
func (s *ServerChannel) openRequest(ch *uacp.Chunk, first bool) (uint32, *ua.OpenSecureChannelRequest, error) {
	var reqID uint32
	var body []byte
	if first {
		if ch.ChunkType != uacp.ChunkFinal {
			return 0, nil, fmt.Errorf("uasc: OPN chunk type %s: %w", ch.ChunkType, ErrUnexpectedMessage)
		}
		h, off, err := parseAsymHeader(ch.Data)
		if err != nil {
			return 0, nil, err
		}
		if err := s.learn(&h); err != nil {
			return 0, nil, err
		}
		if reqID, body, err = s.sc.openAsymBody(ch.Data, off); err != nil {
			return 0, nil, err
		}
	} else {
		if id := chunkChannelID(ch.Data); id != s.sc.channelID {
			return 0, nil, fmt.Errorf("uasc: OPN for channel %d on channel %d: %w", id, s.sc.channelID, ErrChannelID)
		}
		var err error
		if reqID, body, err = s.sc.openAsymChunk(ch.Data, ch.ChunkType); err != nil {
			return 0, nil, err
		}
	}
	out, err := s.sc.decode(body, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("uasc: decoding OpenSecureChannel request: %w", err)
	}
	req, ok := out.(*ua.OpenSecureChannelRequest)
	if !ok {
		return 0, nil, fmt.Errorf("uasc: %T in an OPN message: %w", out, ErrUnexpectedMessage)
	}
	p := s.sc.sec.policy
	if first {
		if req.RequestType != ua.SecurityTokenRequestTypeIssue {
			return 0, nil, fmt.Errorf("uasc: first OpenSecureChannel is a %s: %w", req.RequestType, ua.StatusBadRequestTypeInvalid)
		}
		if !s.cfg.allows(p.URI, req.SecurityMode) {
			return 0, nil, fmt.Errorf("uasc: %s with mode %s is not offered: %w", p.Name, req.SecurityMode, ErrModeRejected)
		}
	} else {
		if req.RequestType != ua.SecurityTokenRequestTypeRenew {
			return 0, nil, fmt.Errorf("uasc: OpenSecureChannel %s on an open channel: %w", req.RequestType, ua.StatusBadRequestTypeInvalid)
		}
		if req.SecurityMode != s.sc.sec.mode {
			return 0, nil, fmt.Errorf("uasc: renewal with mode %s on a %s channel: %w", req.SecurityMode, s.sc.sec.mode, ErrModeRejected)
		}
	}
	if err := p.CheckNonce(req.ClientNonce); err != nil {
		return 0, nil, fmt.Errorf("uasc: client nonce: %w (%w)", ErrNonceInvalid, err)
	}
	return reqID, req, nil
}

// respondOpen issues a token for a checked OpenSecureChannel request and sends
// the response.
func (s *ServerChannel) respondOpen(reqID uint32, req *ua.OpenSecureChannelRequest, first bool) error {
	p := s.sc.sec.policy
	if first {
		s.sc.sec.mode = req.SecurityMode
		s.sc.initSym()
	}
	serverNonce, err := p.NewNonce()
	if err != nil {
		return err
	}
	lifetime := durationMS(req.RequestedLifetime)
	if lifetime == 0 {
		lifetime = s.cfg.MaxTokenLifetime
	}
	lifetime = min(max(lifetime, s.cfg.MinTokenLifetime), s.cfg.MaxTokenLifetime)
	if first {
		s.sc.channelID = newChannelID()
	}
	s.lastToken++
	t, err := newToken(p, s.lastToken, lifetime, req.ClientNonce, serverNonce, true)
	if err != nil {
		return err
	}
	now := ua.Now()
	resp := &ua.OpenSecureChannelResponse{
		ResponseHeader: ua.ResponseHeader{Timestamp: now, RequestHandle: req.RequestHeader.RequestHandle},
		SecurityToken: ua.ChannelSecurityToken{
			ChannelID:       s.sc.channelID,
			TokenID:         t.id,
			CreatedAt:       now,
			RevisedLifetime: toMS(lifetime),
		},
		ServerNonce: serverNonce,
	}
	// The new token is valid for what the client sends from now on; the server
	// goes on sending with the current one until the client uses the new one.
	s.sc.addRecvToken(t)
	if first {
		s.sc.sendTok.Store(t)
	}
	s.mu.Lock()
	s.serverNonce, s.clientNonce = serverNonce, req.ClientNonce
	s.mu.Unlock()
	if err := s.sc.sendOpen(reqID, resp); err != nil {
		return err
	}
	if !first {
		s.log.Debug("uasc: security token renewed", "channel", s.sc.channelID, "token", t.id, "lifetime", lifetime)
	}
	return nil
}

// learn takes the policy and the client certificate from the first OPN's
// security header.
func (s *ServerChannel) learn(h *asymHeader) error {
	a := &s.sc.sec
	p, err := PolicyByURI(string(h.PolicyURI))
	if err != nil {
		return fmt.Errorf("uasc: %w (%w)", ErrPolicyRejected, err)
	}
	if !s.cfg.allowsPolicy(p.URI) {
		return fmt.Errorf("uasc: policy %s is not offered: %w", p.Name, ErrPolicyRejected)
	}
	a.policy = p
	if p.IsNone() {
		return nil
	}
	if err := a.setLocal(s.cfg.Certificate, s.cfg.Key); err != nil {
		return err
	}
	if len(h.SenderCert) == 0 {
		return fmt.Errorf("uasc: OPN without a sender certificate: %w", ErrSecurityChecks)
	}
	if string(h.Thumbprint) != string(a.localThumb) {
		return fmt.Errorf("uasc: OPN encrypted for another certificate (thumbprint %x): %w", h.Thumbprint, ErrCertificate)
	}
	chain := append([]byte(nil), h.SenderCert...)
	if v := s.cfg.ValidateClientCert; v != nil {
		if err := v(chain); err != nil {
			return fmt.Errorf("uasc: client certificate refused: %w", err)
		}
	}
	if err := a.setRemote(chain); err != nil {
		return err
	}
	s.clientCert = chain
	return nil
}

// Serve reads requests until the channel ends and hands each one to handler, on
// the calling goroutine; handler must not block for long (hand slow work to
// other goroutines and answer from there). Token renewals are handled here.
// Serve returns nil when the client closed the channel or Close was called,
// ctx's error when ctx ended it, and the failure otherwise.
func (s *ServerChannel) Serve(ctx context.Context, handler func(req *Request)) error {
	if !s.serving.CompareAndSwap(false, true) {
		return errors.New("uasc: ServerChannel.Serve called twice")
	}
	stop := context.AfterFunc(ctx, func() { s.fail(fmt.Errorf("uasc: %w (%w)", ErrChannelClosed, context.Cause(ctx))) })
	defer stop()
	defer s.sc.asm.Reset()
	for {
		ch, err := s.sc.conn.ReadChunk()
		if err == nil {
			err = s.handleChunk(ch, handler)
		}
		if err != nil {
			s.fail(err)
			err = s.Err()
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.Is(err, ErrChannelClosed):
				return nil
			}
			return err
		}
	}
}

func (s *ServerChannel) handleChunk(ch *uacp.Chunk, handler func(req *Request)) error {
	switch ch.MessageType {
	case uacp.MessageTypeMessage:
		reqID, start, end, err := s.sc.openSym(ch.Data)
		if err != nil {
			return err
		}
		if ch.ChunkType == uacp.ChunkFinal && s.sc.asm.Pending() == 0 {
			s.dispatch(reqID, ch.Data[start:end], handler)
			return nil
		}
		msg, err := s.sc.asm.Add(reqID, ch.ChunkType, ch.Data[start:end])
		if err != nil {
			var ae *uacp.AbortError
			if errors.As(err, &ae) {
				return nil // the client gave up on this request
			}
			return err
		}
		if msg != nil {
			s.dispatch(reqID, msg.Bytes(), handler)
			msg.Release()
		}
		return nil
	case uacp.MessageTypeOpen:
		return s.handleOpen(ch, false)
	case uacp.MessageTypeClose:
		if _, _, _, err := s.sc.openSym(ch.Data); err != nil {
			return err
		}
		return ErrChannelClosed
	default:
		return fmt.Errorf("uasc: %s from the client: %w", ch.MessageType, ErrUnexpectedMessage)
	}
}

// dispatch decodes a request and hands it to handler. A request that cannot be
// decoded is answered with a ServiceFault; the channel stays open.
func (s *ServerChannel) dispatch(reqID uint32, body []byte, handler func(*Request)) {
	r := &Request{ID: reqID, Received: time.Now()}
	if _, h, hint, ok := requestHeaderOffsets(body); ok {
		r.Handle = getUint32(body[h:])
		r.TimeoutHint = durationMS(getUint32(body[hint:]))
	}
	msg, err := s.sc.decode(body, nil)
	if err != nil {
		s.log.Debug("uasc: undecodable request", "channel", s.sc.channelID, "request", reqID, "err", err)
		_ = s.RespondFault(r, statusOf(err, ua.StatusBadDecodingError))
		return
	}
	r.Message = msg
	handler(r)
}

// Respond sends the response to req. A zero ResponseHeader.Timestamp and
// RequestHandle are set on the wire to now and to the request's handle. A
// response larger than the client accepts is replaced by a ServiceFault with
// Bad_ResponseTooLarge, and the error says so. Safe for concurrent use.
func (s *ServerChannel) Respond(req *Request, resp ua.Structure) error {
	m, b, err := s.sc.encode(resp, false)
	if err != nil {
		_ = s.RespondFault(req, ua.StatusBadEncodingError)
		return err
	}
	defer m.release()
	body := b[symPrefix:]
	if ts, h, ok := responseHeaderOffsets(body); ok {
		if getUint64(body[ts:]) == 0 {
			putUint64(body[ts:], uint64(ua.Now()))
		}
		if getUint32(body[h:]) == 0 {
			putUint32(body[h:], req.Handle)
		}
	}
	err = s.sc.sendSym(uacp.MessageTypeMessage, req.ID, b, ErrResponseTooLarge)
	if errors.Is(err, ErrResponseTooLarge) {
		_ = s.RespondFault(req, ua.StatusBadResponseTooLarge)
	}
	return err
}

// RespondFault answers req with a ServiceFault carrying status.
func (s *ServerChannel) RespondFault(req *Request, status ua.StatusCode) error {
	f := &ua.ServiceFault{ResponseHeader: ua.ResponseHeader{
		Timestamp:     ua.Now(),
		RequestHandle: req.Handle,
		ServiceResult: status,
	}}
	m, b, err := s.sc.encode(f, false)
	if err != nil {
		return err
	}
	defer m.release()
	return s.sc.sendSym(uacp.MessageTypeMessage, req.ID, b, ErrResponseTooLarge)
}

// fail ends the channel; only the first call counts.
func (s *ServerChannel) fail(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	s.mu.Unlock()
	if !errors.Is(err, ErrChannelClosed) {
		var ue *uacp.Error
		if !errors.Is(err, uacp.ErrClosed) && !errors.Is(err, uacp.ErrTimeout) && !errors.As(err, &ue) {
			// A violation by the client: tell it why before closing.
			_ = s.sc.conn.SendError(statusOf(err, ua.StatusBadTcpInternalError), err.Error())
		}
		s.log.Debug("uasc: channel failed", "channel", s.sc.channelID, "err", err)
	}
	s.sc.conn.Close()
	s.sc.releaseSend()
	close(s.done)
}

// Close closes the channel; Serve returns nil.
func (s *ServerChannel) Close() error {
	s.fail(ErrChannelClosed)
	return nil
}

// Done is closed when the channel ends.
func (s *ServerChannel) Done() <-chan struct{} { return s.done }

// Err returns why the channel ended (ErrChannelClosed after Close or the
// client's CloseSecureChannel), or nil while it is open.
func (s *ServerChannel) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// ChannelID returns the SecureChannelId.
func (s *ServerChannel) ChannelID() uint32 { return s.sc.channelID }

// SecurityPolicy returns the channel's security policy.
func (s *ServerChannel) SecurityPolicy() *Policy { return s.sc.sec.policy }

// SecurityMode returns the channel's message security mode.
func (s *ServerChannel) SecurityMode() ua.MessageSecurityMode { return s.sc.sec.mode }

// ClientCertificate returns the certificate (chain) the client signed its
// OpenSecureChannel with; nil for policy None.
func (s *ServerChannel) ClientCertificate() []byte { return s.clientCert }

// ClientNonce and ServerNonce return the nonces of the last OpenSecureChannel
// exchange. The slices must not be modified.
func (s *ServerChannel) ClientNonce() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clientNonce
}

// ServerNonce returns the server nonce of the last OpenSecureChannel response.
func (s *ServerChannel) ServerNonce() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serverNonce
}

// EndpointURL returns the EndpointUrl the client sent in its Hello.
func (s *ServerChannel) EndpointURL() string { return s.sc.conn.EndpointURL() }

// Conn returns the underlying connection (addresses, limits).
func (s *ServerChannel) Conn() *uacp.Conn { return s.sc.conn }
