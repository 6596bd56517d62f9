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

	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
)

// Defaults of Config.
const (
	// DefaultLifetime is the token lifetime a client asks for.
	DefaultLifetime = time.Hour
	// DefaultRequestTimeout bounds a request whose context has no deadline.
	DefaultRequestTimeout = 30 * time.Second
	// renewAt is the fraction of a token's lifetime after which it is renewed.
	renewNum, renewDen = 3, 4
	// closeWriteTimeout bounds the CloseSecureChannel message sent by Close.
	closeWriteTimeout = 2 * time.Second
	// minRenewInterval is the shortest time between two renewals.
	minRenewInterval = 100 * time.Millisecond
)

// Config is the configuration of a client channel. Zero fields take defaults.
type Config struct {
	// SecurityPolicyURI is the policy, one of the SecurityPolicy… constants;
	// "" means None.
	SecurityPolicyURI string
	// SecurityMode is None, Sign or SignAndEncrypt. Zero (Invalid) means None
	// for policy None and SignAndEncrypt for the others.
	SecurityMode ua.MessageSecurityMode
	// LocalCertificate is this application's certificate, DER, optionally
	// followed by its issuers; LocalKey its private key. Both are required
	// unless the policy is None.
	LocalCertificate []byte
	LocalKey         *rsa.PrivateKey
	// RemoteCertificate is the server's certificate (DER or DER chain) from
	// its EndpointDescription; required unless the policy is None. The
	// certificate the server signs its OpenSecureChannel responses with must
	// be this one. Validating it against a trust list is the caller's job
	// (pki.Store), before Dial.
	RemoteCertificate []byte
	// Lifetime is the requested token lifetime (DefaultLifetime); tokens are
	// renewed after 75% of the lifetime the server revised it to.
	Lifetime time.Duration
	// RequestTimeout bounds requests whose context has no deadline, and the
	// OpenSecureChannel exchanges (DefaultRequestTimeout).
	RequestTimeout time.Duration
	// AllowDeprecated allows Basic128Rsa15 and Basic256.
	AllowDeprecated bool
	// Transport configures the connection (nil: uacp defaults); its Buffers
	// pool also serves this channel's buffers.
	Transport *uacp.Config
	// Logger receives the channel's few logs (renewals, dropped responses);
	// nil discards them.
	Logger *slog.Logger
}

// Validate reports the first setting that cannot work, naming the field.
func (c *Config) Validate() error {
	_, _, err := c.resolve()
	return err
}

// resolve returns the configuration with defaults filled in and the asymmetric
// security it describes.
func (c *Config) resolve() (Config, asymSecurity, error) {
	var cfg Config
	if c != nil {
		cfg = *c
	}
	var sec asymSecurity
	uri := cfg.SecurityPolicyURI
	if uri == "" {
		uri = SecurityPolicyNone
	}
	p, err := PolicyByURI(uri)
	if err != nil {
		return cfg, sec, fmt.Errorf("uasc: Config.SecurityPolicyURI: %w (%w)", ErrPolicyRejected, err)
	}
	if p.Deprecated && !cfg.AllowDeprecated {
		return cfg, sec, fmt.Errorf("uasc: Config.SecurityPolicyURI: %s is deprecated; set AllowDeprecated to use it: %w", p.Name, ErrPolicyRejected)
	}
	cfg.SecurityPolicyURI = p.URI
	sec.policy = p
	switch cfg.SecurityMode {
	case ua.MessageSecurityModeInvalid:
		cfg.SecurityMode = ua.MessageSecurityModeSignAndEncrypt
		if p.IsNone() {
			cfg.SecurityMode = ua.MessageSecurityModeNone
		}
	case ua.MessageSecurityModeNone:
		if !p.IsNone() {
			return cfg, sec, fmt.Errorf("uasc: Config.SecurityMode None with policy %s: %w", p.Name, ErrModeRejected)
		}
	case ua.MessageSecurityModeSign, ua.MessageSecurityModeSignAndEncrypt:
		if p.IsNone() {
			return cfg, sec, fmt.Errorf("uasc: Config.SecurityMode %s with policy None: %w", cfg.SecurityMode, ErrModeRejected)
		}
	default:
		return cfg, sec, fmt.Errorf("uasc: Config.SecurityMode %d: %w", cfg.SecurityMode, ErrModeRejected)
	}
	sec.mode = cfg.SecurityMode
	if !p.IsNone() {
		if err := sec.setLocal(cfg.LocalCertificate, cfg.LocalKey); err != nil {
			return cfg, sec, fmt.Errorf("uasc: Config.LocalCertificate/LocalKey: %w", err)
		}
		if len(cfg.RemoteCertificate) == 0 {
			return cfg, sec, fmt.Errorf("uasc: Config.RemoteCertificate is required with policy %s: %w", p.Name, ErrCertificate)
		}
		if err := sec.setRemote(cfg.RemoteCertificate); err != nil {
			return cfg, sec, fmt.Errorf("uasc: Config.RemoteCertificate: %w", err)
		}
	}
	switch {
	case cfg.Lifetime < 0:
		return cfg, sec, fmt.Errorf("uasc: Config.Lifetime %v is negative", cfg.Lifetime)
	case cfg.Lifetime == 0:
		cfg.Lifetime = DefaultLifetime
	}
	switch {
	case cfg.RequestTimeout < 0:
		return cfg, sec, fmt.Errorf("uasc: Config.RequestTimeout %v is negative", cfg.RequestTimeout)
	case cfg.RequestTimeout == 0:
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if err := cfg.Transport.Validate(); err != nil {
		return cfg, sec, fmt.Errorf("uasc: Config.Transport: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, sec, nil
}

func transportBuffers(t *uacp.Config) *pooling.BufferPool {
	if t != nil && t.Buffers != nil {
		return t.Buffers
	}
	return pooling.Buffers
}

// Channel is the client side of a secure channel. It is safe for concurrent use:
// any number of goroutines may send requests; one reader goroutine, owned by the
// channel, receives the responses and routes them by request id.
type Channel struct {
	sc  secureConn
	cfg Config
	log *slog.Logger

	mu          sync.Mutex
	reg         registry
	err         error // why the channel ended; nil while it is open
	closing     bool  // Close was called
	closedErr   error // what requests fail with once it ended
	serverNonce []byte
	renewTimer  *time.Timer

	done       chan struct{}
	readerDone chan struct{}
	closeOnce  sync.Once
	inCallback atomic.Int32 // > 0 while the reader runs a completion
}

// Dial connects to an opc.tcp endpoint (TCP, Hello/Acknowledge) and opens a secure
// channel on it (OpenSecureChannel Issue). ctx bounds the whole of it; it has no
// say over the channel once Dial returned.
func Dial(ctx context.Context, endpointURL string, cfg *Config) (*Channel, error) {
	c, sec, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	conn, err := uacp.Dial(ctx, endpointURL, c.Transport)
	if err != nil {
		return nil, err
	}
	return open(ctx, conn, c, sec)
}

// NewClientChannel opens a secure channel on an established connection, such as
// one a server opened by reverse connect. It performs the OpenSecureChannel
// exchange, bounded by cfg.RequestTimeout. On failure conn is closed.
func NewClientChannel(conn *uacp.Conn, cfg *Config) (*Channel, error) {
	c, sec, err := cfg.resolve()
	if err != nil {
		conn.Close()
		return nil, err
	}
	return open(context.Background(), conn, c, sec)
}

func open(ctx context.Context, conn *uacp.Conn, cfg Config, sec asymSecurity) (*Channel, error) {
	c := &Channel{
		cfg:        cfg,
		log:        cfg.Logger,
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	c.reg.m = make(map[uint32]*pending)
	c.reg.onTimer = c.expire
	c.sc.sec = sec
	c.sc.init(conn, transportBuffers(cfg.Transport), cfg.Logger, false)
	c.sc.initSym()
	if err := c.issue(ctx); err != nil {
		c.sc.releaseSend()
		conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("uasc: OpenSecureChannel: %w (%w)", context.Cause(ctx), err)
		}
		return nil, err
	}
	go c.readLoop()
	return c, nil
}

// issue performs the first OpenSecureChannel exchange, before the reader runs.
func (c *Channel) issue(ctx context.Context) error {
	conn := c.sc.conn
	deadline := time.Now().Add(c.cfg.RequestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetReadDeadline(deadline)
	stop := conn.CloseWhenDone(ctx)
	defer stop()

	nonce, err := c.sc.sec.policy.NewNonce()
	if err != nil {
		return err
	}
	c.reg.lastID++
	reqID := c.reg.lastID
	if err := c.sc.sendOpen(reqID, c.openRequest(ua.SecurityTokenRequestTypeIssue, nonce)); err != nil {
		return fmt.Errorf("uasc: OpenSecureChannel: %w", err)
	}
	ch, err := conn.ReadChunk()
	if err != nil {
		return fmt.Errorf("uasc: OpenSecureChannel: %w", err)
	}
	if ch.MessageType != uacp.MessageTypeOpen {
		return fmt.Errorf("uasc: OpenSecureChannel answered with %s: %w", ch.MessageType, ErrUnexpectedMessage)
	}
	id, resp, err := c.openResponse(ch)
	if err != nil {
		return err
	}
	if id != reqID {
		return fmt.Errorf("uasc: OpenSecureChannel response for request %d, sent %d: %w", id, reqID, ErrUnexpectedMessage)
	}
	if err := c.installToken(resp, nonce, false); err != nil {
		return err
	}
	return conn.SetReadDeadline(time.Time{})
}

func (c *Channel) openRequest(t ua.SecurityTokenRequestType, nonce []byte) *ua.OpenSecureChannelRequest {
	return &ua.OpenSecureChannelRequest{
		RequestHeader: ua.RequestHeader{
			Timestamp:   ua.Now(),
			TimeoutHint: toMS(c.cfg.RequestTimeout),
		},
		ClientProtocolVersion: uacp.ProtocolVersion,
		RequestType:           t,
		SecurityMode:          c.sc.sec.mode,
		ClientNonce:           nonce,
		RequestedLifetime:     toMS(c.cfg.Lifetime),
	}
}

// openResponse opens and decodes an OPN chunk from the server.
func (c *Channel) openResponse(ch *uacp.Chunk) (uint32, *ua.OpenSecureChannelResponse, error) {
	reqID, body, err := c.sc.openAsymChunk(ch.Data, ch.ChunkType)
	if err != nil {
		return 0, nil, err
	}
	out, err := c.sc.decode(body, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("uasc: decoding OpenSecureChannel response: %w", err)
	}
	switch m := out.(type) {
	case *ua.OpenSecureChannelResponse:
		if id := chunkChannelID(ch.Data); id != m.SecurityToken.ChannelID {
			return 0, nil, fmt.Errorf("uasc: OPN chunk for channel %d with a token for channel %d: %w", id, m.SecurityToken.ChannelID, ErrChannelID)
		}
		return reqID, m, nil
	case *ua.ServiceFault:
		return 0, nil, fmt.Errorf("uasc: OpenSecureChannel: %w", newServiceFault(m))
	default:
		return 0, nil, fmt.Errorf("uasc: OpenSecureChannel answered with %T: %w", out, ErrUnexpectedMessage)
	}
}

// installToken takes the token of an OpenSecureChannel response into use: for
// receiving at once (the previous token stays valid until the server uses the new
// one), for sending from the next message on. It schedules the next renewal.
func (c *Channel) installToken(resp *ua.OpenSecureChannelResponse, clientNonce []byte, renew bool) error {
	p := c.sc.sec.policy
	if err := p.CheckNonce(resp.ServerNonce); err != nil {
		return fmt.Errorf("uasc: server nonce: %w (%w)", ErrNonceInvalid, err)
	}
	st := resp.SecurityToken
	if renew {
		if st.ChannelID != c.sc.channelID {
			return fmt.Errorf("uasc: renewed token for channel %d on channel %d: %w", st.ChannelID, c.sc.channelID, ErrChannelID)
		}
	} else {
		if st.ChannelID == 0 {
			return fmt.Errorf("uasc: server assigned channel id 0: %w", ErrChannelID)
		}
		c.sc.channelID = st.ChannelID
	}
	lifetime := durationMS(st.RevisedLifetime)
	if lifetime <= 0 {
		lifetime = c.cfg.Lifetime
	}
	t, err := newToken(p, st.TokenID, lifetime, clientNonce, resp.ServerNonce, false)
	if err != nil {
		return err
	}
	c.sc.addRecvToken(t)
	c.sc.sendTok.Store(t)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.serverNonce = resp.ServerNonce
	if c.err == nil {
		// A floor keeps a server that revises the lifetime to next to nothing
		// from making the client renew in a tight loop.
		d := max(lifetime*renewNum/renewDen, minRenewInterval)
		if c.renewTimer == nil {
			c.renewTimer = time.AfterFunc(d, c.renew)
		} else {
			c.renewTimer.Reset(d)
		}
	}
	if renew {
		c.log.Debug("uasc: security token renewed", "channel", c.sc.channelID, "token", t.id, "lifetime", lifetime)
	}
	return nil
}

// renew sends an OpenSecureChannel Renew request; the reader installs the token
// of the response. Runs on the renewal timer.
func (c *Channel) renew() {
	nonce, err := c.sc.sec.policy.NewNonce()
	if err != nil {
		c.fail(fmt.Errorf("uasc: renewing the security token: %w", err))
		return
	}
	p := getPending(kindOpen)
	p.nonce = nonce
	id, err := c.register(p, c.cfg.RequestTimeout)
	if err != nil {
		pendings.Put(p)
		return // closed meanwhile
	}
	if err := c.sc.sendOpen(id, c.openRequest(ua.SecurityTokenRequestTypeRenew, nonce)); err != nil {
		if c.unregister(id, p) {
			pendings.Put(p)
		}
		c.fail(fmt.Errorf("uasc: renewing the security token: %w", err))
	}
}

// register gives p a request id and a deadline, unless the channel ended. It
// returns the id: once registered, p may be completed and recycled at any moment
// (an asynchronous request), so the caller must not read p again.
func (c *Channel) register(p *pending, timeout time.Duration) (uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closedErr != nil {
		return 0, c.closedErr
	}
	c.reg.add(p, timeout)
	return p.id, nil
}

// unregister removes p, registered as id, unless someone took it already (to
// complete it).
func (c *Channel) unregister(id uint32, p *pending) bool {
	c.mu.Lock()
	ok := c.reg.remove(id, p)
	c.mu.Unlock()
	return ok
}

func (c *Channel) take(id uint32) *pending {
	c.mu.Lock()
	p := c.reg.take(id)
	c.mu.Unlock()
	return p
}

// expire fails the requests whose deadline passed. It runs on the registry's
// timer.
func (c *Channel) expire() {
	c.mu.Lock()
	exp := c.reg.expired(time.Now().UnixNano(), nil)
	c.mu.Unlock()
	for _, p := range exp {
		if p.kind == kindOpen {
			pendings.Put(p)
			c.fail(fmt.Errorf("uasc: renewing the security token: %w", ErrTimeout))
			continue
		}
		c.complete(p, nil, ErrTimeout)
	}
}

// complete hands a request its result. For a synchronous request the waiter gets
// it (and puts p back); an asynchronous one gets its callback, and p goes back
// here.
func (c *Channel) complete(p *pending, out ua.Structure, err error) {
	if p.done == nil {
		p.out, p.err = out, err
		p.ready <- struct{}{}
		return
	}
	done := p.done
	pendings.Put(p)
	done(out, err)
}

// SendRequest sends req, a service request, and waits for its response. The
// caller fills req's RequestHeader, except that a zero Timestamp and a zero
// TimeoutHint are set on the wire (not in req) to now and to the request's
// timeout. The timeout is ctx's deadline, or Config.RequestTimeout without one.
//
// resp, when not nil and of the response's type, is decoded into (its slices
// reused) and returned; otherwise a new response is allocated. A ServiceFault is
// returned as a *ServiceFaultError. A request that times out fails with an error
// matching ErrTimeout; a cancelled ctx returns ctx's error. Either way a response
// that arrives later is dropped and resp is not touched again.
func (c *Channel) SendRequest(ctx context.Context, req ua.Structure, resp ua.Structure) (ua.Structure, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	timeout := c.cfg.RequestTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
		if timeout <= 0 {
			return nil, fmt.Errorf("uasc: %w (%w)", ErrTimeout, context.DeadlineExceeded)
		}
	}
	p := getPending(kindMessage)
	p.resp = resp
	id, err := c.send(req, p, timeout)
	if err != nil {
		pendings.Put(p)
		return nil, err
	}
	select {
	case <-p.ready:
	case <-ctx.Done():
		if c.unregister(id, p) {
			pendings.Put(p)
			err := context.Cause(ctx)
			if errors.Is(err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("uasc: %w (%w)", ErrTimeout, err)
			}
			return nil, err
		}
		<-p.ready // being completed right now
	}
	out, err := p.out, p.err
	pendings.Put(p)
	return out, err
}

// SendRequestAsync sends req like SendRequest but does not wait: done is called
// exactly once with the response (resp or a new one) or an error, unless
// SendRequestAsync itself returns an error, in which case it is never called.
// timeout <= 0 means Config.RequestTimeout.
//
// done runs on the channel's reader goroutine (a response), on its timer (a
// timeout) or on the goroutine that closes the channel; it must not block, since
// no other response is read meanwhile. It may send further requests.
func (c *Channel) SendRequestAsync(req ua.Structure, resp ua.Structure, timeout time.Duration, done func(ua.Structure, error)) error {
	if done == nil {
		return errors.New("uasc: SendRequestAsync without a done function")
	}
	if timeout <= 0 {
		timeout = c.cfg.RequestTimeout
	}
	p := getPending(kindMessage)
	p.resp, p.done = resp, done
	if _, err := c.send(req, p, timeout); err != nil {
		pendings.Put(p)
		return err
	}
	return nil
}

// send encodes req, registers p and sends req; it returns the request id. When it
// returns an error p is not registered and was not completed. Otherwise p may be
// completed (and, if asynchronous, recycled) before send returns.
func (c *Channel) send(req ua.Structure, p *pending, timeout time.Duration) (uint32, error) {
	m, b, err := c.sc.encode(req, true)
	if err != nil {
		return 0, err
	}
	defer m.release()
	body := b[symPrefix:]
	if _, err := c.sc.checkSendSize(len(body), ErrRequestTooLarge); err != nil {
		return 0, err
	}
	if ts, _, hint, ok := requestHeaderOffsets(body); ok {
		if getUint64(body[ts:]) == 0 {
			putUint64(body[ts:], uint64(ua.Now()))
		}
		if getUint32(body[hint:]) == 0 {
			putUint32(body[hint:], toMS(timeout))
		}
	}
	id, err := c.register(p, timeout)
	if err != nil {
		return 0, err
	}
	if err := c.sc.sendSym(uacp.MessageTypeMessage, id, b, ErrRequestTooLarge); err != nil {
		if c.unregister(id, p) {
			if errors.Is(err, uacp.ErrClosed) {
				err = closedError(err)
			}
			return 0, err
		}
		// Completed meanwhile (the channel failed): the waiter or done has
		// its error already.
	}
	return id, nil
}

// readLoop is the reader goroutine: it reads, opens and dispatches chunks until
// the connection fails or closes.
func (c *Channel) readLoop() {
	defer close(c.readerDone)
	defer c.sc.asm.Reset()
	for {
		ch, err := c.sc.conn.ReadChunk()
		if err == nil {
			err = c.handleChunk(ch)
		}
		if err != nil {
			c.inCallback.Add(1) // fail completes requests from here
			c.fail(err)
			c.inCallback.Add(-1)
			return
		}
	}
}

func (c *Channel) handleChunk(ch *uacp.Chunk) error {
	switch ch.MessageType {
	case uacp.MessageTypeMessage:
		reqID, start, end, err := c.sc.openSym(ch.Data)
		if err != nil {
			return err
		}
		if ch.ChunkType == uacp.ChunkFinal && c.sc.asm.Pending() == 0 {
			// The common case, a message of one chunk: decoded straight
			// from the receive buffer.
			c.dispatch(reqID, ch.Data[start:end])
			return nil
		}
		return c.assemble(reqID, ch.ChunkType, ch.Data[start:end])
	case uacp.MessageTypeOpen:
		reqID, resp, err := c.openResponse(ch)
		if err != nil {
			return err
		}
		p := c.take(reqID)
		if p == nil || p.kind != kindOpen {
			return fmt.Errorf("uasc: OpenSecureChannel response to request %d, which is no renewal: %w", reqID, ErrUnexpectedMessage)
		}
		nonce := p.nonce
		pendings.Put(p)
		return c.installToken(resp, nonce, true)
	default:
		return fmt.Errorf("uasc: %s from the server: %w", ch.MessageType, ErrUnexpectedMessage)
	}
}

// assemble feeds a chunk of a multi-chunk message (or an abort chunk) to the
// assembler and dispatches the message once complete.
func (c *Channel) assemble(reqID uint32, ct uacp.ChunkType, body []byte) error {
	msg, err := c.sc.asm.Add(reqID, ct, body)
	if err != nil {
		var ae *uacp.AbortError
		if errors.As(err, &ae) {
			if p := c.take(reqID); p != nil {
				c.finish(p, nil, fmt.Errorf("uasc: %w", ae))
			}
			return nil
		}
		return err
	}
	if msg == nil {
		return nil
	}
	defer msg.Release()
	c.dispatch(reqID, msg.Bytes())
	return nil
}

// dispatch decodes a response and completes its request. A response to an
// unknown request (timed out, cancelled) is dropped; one that cannot be decoded
// fails its request only.
func (c *Channel) dispatch(reqID uint32, body []byte) {
	p := c.take(reqID)
	if p == nil {
		c.log.Debug("uasc: response to an unknown request dropped", "channel", c.sc.channelID, "request", reqID)
		return
	}
	if p.kind != kindMessage {
		pendings.Put(p)
		c.fail(fmt.Errorf("uasc: MSG in response to OpenSecureChannel request %d: %w", reqID, ErrUnexpectedMessage))
		return
	}
	out, err := c.sc.decode(body, p.resp)
	if err != nil {
		out, err = nil, fmt.Errorf("uasc: decoding the response to request %d: %w", reqID, err)
	} else if f, ok := out.(*ua.ServiceFault); ok {
		out, err = nil, newServiceFault(f)
	}
	c.finish(p, out, err)
}

// finish completes p from the reader goroutine.
func (c *Channel) finish(p *pending, out ua.Structure, err error) {
	c.inCallback.Add(1)
	c.complete(p, out, err)
	c.inCallback.Add(-1)
}

// fail ends the channel because of err: the connection is closed and every
// pending request fails. Only the first call counts.
func (c *Channel) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	if c.closing {
		// The server answers CloseSecureChannel by closing the connection,
		// which the reader may see before Close gets here.
		err = ErrChannelClosed
	}
	c.err = err
	c.closedErr = closedError(err)
	all := c.reg.drain()
	if c.renewTimer != nil {
		c.renewTimer.Stop()
	}
	c.mu.Unlock()
	c.sc.conn.Close()
	c.sc.releaseSend()
	for _, p := range all {
		if p.kind == kindOpen {
			pendings.Put(p)
			continue
		}
		c.complete(p, nil, c.closedErr)
	}
	if !errors.Is(err, ErrChannelClosed) {
		c.log.Debug("uasc: channel failed", "channel", c.sc.channelID, "err", err)
	}
	close(c.done)
}

// Close sends CloseSecureChannel, closes the connection and waits for the reader
// goroutine to end. Pending requests fail with ErrChannelClosed. Close is
// idempotent; it returns nil also when the channel had failed before.
func (c *Channel) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		alive := c.err == nil
		c.closing = true
		c.mu.Unlock()
		if alive {
			c.sendClose()
		}
		c.fail(ErrChannelClosed)
		if c.inCallback.Load() == 0 {
			<-c.readerDone
		}
	})
	return nil
}

func (c *Channel) sendClose() {
	m, b, err := c.sc.encode(&ua.CloseSecureChannelRequest{RequestHeader: ua.RequestHeader{Timestamp: ua.Now()}}, true)
	if err != nil {
		return
	}
	defer m.release()
	c.mu.Lock()
	c.reg.lastID++
	if c.reg.lastID == 0 {
		c.reg.lastID++
	}
	id := c.reg.lastID
	c.mu.Unlock()
	_ = c.sc.conn.SetWriteDeadline(time.Now().Add(closeWriteTimeout))
	_ = c.sc.sendSym(uacp.MessageTypeClose, id, b, ErrRequestTooLarge)
}

// Done is closed when the channel ends: closed, failed, or closed by the server.
func (c *Channel) Done() <-chan struct{} { return c.done }

// Err returns why the channel ended (ErrChannelClosed after Close), or nil while
// it is open.
func (c *Channel) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// ChannelID returns the SecureChannelId the server assigned.
func (c *Channel) ChannelID() uint32 { return c.sc.channelID }

// SecurityPolicy returns the channel's security policy.
func (c *Channel) SecurityPolicy() *Policy { return c.sc.sec.policy }

// SecurityMode returns the channel's message security mode.
func (c *Channel) SecurityMode() ua.MessageSecurityMode { return c.sc.sec.mode }

// RemoteCertificate returns the server certificate of the configuration (DER,
// possibly a chain); nil for policy None.
func (c *Channel) RemoteCertificate() []byte { return c.cfg.RemoteCertificate }

// ServerNonce returns the server nonce of the last OpenSecureChannel response.
// The slice must not be modified.
func (c *Channel) ServerNonce() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.serverNonce
}

// EndpointURL returns the endpoint URL of the connection.
func (c *Channel) EndpointURL() string { return c.sc.conn.EndpointURL() }

// Limits returns the limits the connection negotiated.
func (c *Channel) Limits() uacp.Limits { return c.sc.lim }
