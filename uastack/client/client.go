package client

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// channel is what a session needs of a secure channel. *uasc.Channel implements
// it; unit tests fake it.
type channel interface {
	SendRequest(ctx context.Context, req, resp ua.Structure) (ua.Structure, error)
	SendRequestAsync(req, resp ua.Structure, timeout time.Duration, done func(ua.Structure, error)) error
	Close() error
	Done() <-chan struct{}
	Err() error
}

// Client is an activated session on a secure channel to one server. Its methods
// are safe for concurrent use. Close ends the session and the channel; the Client
// does not reconnect (that is the managed session's job).
type Client struct {
	cfg      Config
	url      string
	endpoint ua.EndpointDescription
	policy   *uasc.Policy
	log      *slog.Logger

	cert []byte          // our application instance certificate (nil without security)
	key  *rsa.PrivateKey // its key

	serverKey *rsa.PublicKey // of the validated server certificate; nil when it is not used

	conn channel // *uasc.Channel, or a fake in unit tests

	session *sessionState
	resumed bool // the session is one an earlier process made (ResumeSession)

	handle atomic.Uint32
	limits [numLimits]atomic.Uint32

	infoMu     sync.RWMutex
	namespaces []string

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	// The publish engine of the subscriptions made on this Client directly
	// (subscription.go); a ManagedSession has its own.
	subsOnce sync.Once
	subs     *publisher
}

// prepare does everything before the channel: configuration, endpoint selection,
// certificates.
func prepare(ctx context.Context, endpointURL string, cfg *Config) (*Client, error) {
	conf, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(endpointURL)
	if err != nil || u.Scheme != "opc.tcp" || u.Host == "" {
		return nil, fmt.Errorf("%w: %q, want opc.tcp://host:port/path", ErrEndpointURL, endpointURL)
	}
	c := &Client{cfg: conf, url: endpointURL, log: conf.Logger.With("endpoint", endpointURL)}

	endpoints := conf.Endpoints
	if len(endpoints) == 0 {
		endpoints, err = GetEndpoints(ctx, endpointURL, &conf)
		if err != nil {
			return nil, err
		}
	}
	ep, err := SelectEndpoint(endpoints, EndpointCriteria{
		SecurityPolicy:  conf.SecurityPolicy,
		SecurityMode:    conf.SecurityMode,
		TokenType:       conf.Identity.TokenType(),
		AllowDeprecated: conf.AllowDeprecated,
	})
	if err != nil {
		return nil, fmt.Errorf("client: %s: %w", endpointURL, err)
	}
	c.endpoint = *ep
	c.policy, _ = uasc.PolicyByURI(ep.SecurityPolicyURI)

	// The server certificate is trusted before anything is sent to it: before the
	// channel encrypts for it, before a password is encrypted for it.
	if certPolicy := c.serverCertificateUse(); certPolicy != nil {
		if len(ep.ServerCertificate) == 0 {
			return nil, fmt.Errorf("%w: the endpoint has none", ErrServerCertificate)
		}
		if err := c.validateServerCertificate(ep.ServerCertificate, certPolicy, u.Hostname()); err != nil {
			return nil, err
		}
	}

	if !c.policy.IsNone() || conf.Certificate != nil {
		if err := c.loadOwnCertificate(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// serverCertificateUse returns the policy under which the server certificate will
// be used (the channel's, or the user token's), or nil when it is not used at all.
func (c *Client) serverCertificateUse() *uasc.Policy {
	if !c.policy.IsNone() {
		return c.policy
	}
	if c.cfg.Identity.TokenType() == ua.UserTokenTypeAnonymous {
		return nil
	}
	tp := findTokenPolicy(&c.endpoint, c.cfg.Identity.TokenType())
	if tp == nil {
		return nil
	}
	if p, err := c.tokenPolicy(tp); err == nil && !p.IsNone() {
		return p
	}
	return nil
}

// validateServerCertificate checks the server's certificate with the Store.
// With AutoAccept the Store trusts a certificate it does not know, but only
// once every other check passed: an expired certificate, or one of another
// application, must not land in trusted/.
func (c *Client) validateServerCertificate(cert []byte, pol *uasc.Policy, host string) error {
	if c.cfg.Store == nil {
		return fmt.Errorf("client: Config.Store is required to validate the server certificate (used by %s)", pol.Name)
	}
	opts := pki.ValidateOptions{
		ApplicationURI: c.endpoint.Server.ApplicationURI,
		MinKeyBits:     pol.MinAsymKeyBits,
		MaxKeyBits:     pol.MaxAsymKeyBits,
		Role:           pki.PeerServer,
		AutoAccept:     c.cfg.AutoAccept,
	}
	if c.cfg.CheckHostname {
		opts.Hostname = host
	}
	leaf, err := c.cfg.Store.Validate(cert, opts)
	if err != nil {
		return fmt.Errorf("client: server certificate of %s: %w", c.url, err)
	}
	pub, ok := leaf.PublicKey.(*rsa.PublicKey)
	if !ok {
		return fmt.Errorf("%w: key is %T, not RSA", ErrServerCertificate, leaf.PublicKey)
	}
	c.serverKey = pub
	return nil
}

// loadOwnCertificate takes Config.Certificate or the Store's application instance
// certificate (created on first use).
func (c *Client) loadOwnCertificate() error {
	if c.cfg.Certificate != nil {
		c.cert, c.key = c.cfg.Certificate, c.cfg.PrivateKey
		return nil
	}
	if c.cfg.Store == nil {
		return fmt.Errorf("client: Config.Store (or Certificate) is required for SecurityPolicy %s", c.policy.Name)
	}
	_, der, key, err := c.cfg.Store.LoadOrCreateOwn(c.cfg.ApplicationURI, nil)
	if err != nil {
		return fmt.Errorf("client: application instance certificate: %w", err)
	}
	c.cert, c.key = der, key
	return nil
}

// start creates and activates the session on the open channel and reads what the
// client needs to know about the server.
func (c *Client) start(ctx context.Context) error {
	s, err := c.createSession(ctx)
	if err != nil {
		return fmt.Errorf("client: CreateSession at %s: %w", c.url, err)
	}
	if err := c.activateSession(ctx, s); err != nil {
		c.closeSessionQuietly(s)
		return fmt.Errorf("client: ActivateSession at %s as %s: %w", c.url, c.cfg.Identity, err)
	}
	c.session = s
	if err := c.readServerInfo(ctx); err != nil {
		c.closeSessionQuietly(s)
		return err
	}
	c.log.Debug("client: session activated", "policy", c.policy.Name, "mode", modeName(c.endpoint.SecurityMode),
		"identity", c.cfg.Identity.String(), "session", s.sessionID.String(), "limits", c.OperationLimits())
	return nil
}

// Close closes the session (deleting its subscriptions) and the secure channel.
// It is safe to call more than once; later calls return the first result.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		var errSession error
		if c.session != nil {
			ctx, cancel := context.WithTimeout(context.Background(), min(c.cfg.RequestTimeout, 5*time.Second))
			_, errSession = c.send(ctx, &ua.CloseSessionRequest{DeleteSubscriptions: true}, &ua.CloseSessionResponse{}, c.session.authToken)
			cancel()
			if errSession != nil {
				select {
				case <-c.conn.Done():
					errSession = nil // the channel was gone already: nothing to close
				default:
				}
			}
		}
		c.closeErr = errors.Join(errSession, c.conn.Close())
		if c.session != nil {
			clear(c.session.serverNonce)
		}
	})
	return c.closeErr
}

// Done is closed when the secure channel has ended (closed or failed); Err then
// says why.
func (c *Client) Done() <-chan struct{} { return c.conn.Done() }

// Err returns why the channel ended, or nil while it is open.
func (c *Client) Err() error { return c.conn.Err() }

// Endpoint returns the endpoint the client connected to.
func (c *Client) Endpoint() ua.EndpointDescription { return c.endpoint }

// SecurityPolicy returns the policy of the channel.
func (c *Client) SecurityPolicy() *uasc.Policy { return c.policy }

// SecurityMode returns the mode of the channel.
func (c *Client) SecurityMode() ua.MessageSecurityMode { return c.endpoint.SecurityMode }

// SessionID returns the server's id of the session (for diagnostics; requests
// carry the authentication token instead).
func (c *Client) SessionID() ua.NodeID { return c.session.sessionID }

// SessionTimeout returns the session timeout the server granted: a session
// without requests for that long is closed by the server.
func (c *Client) SessionTimeout() time.Duration { return c.session.revisedTimeout }

// Namespaces returns the server's namespace array as read at connect.
func (c *Client) Namespaces() []string {
	c.infoMu.RLock()
	defer c.infoMu.RUnlock()
	return c.namespaces
}

// ParseNodeID parses a node id ("ns=1;s=Demo.Counter", "i=85",
// "nsu=<uri>;s=Name"), resolving a namespace URI with the server's namespace
// array.
func (c *Client) ParseNodeID(s string) (ua.NodeID, error) {
	x, err := ua.ParseExpandedNodeID(s)
	if err != nil {
		return ua.NodeID{}, err
	}
	return x.Resolve(c.Namespaces())
}

// RequestHeader returns a request header for a service call on this session:
// authentication token, a fresh request handle, the time, and the timeout hint.
// Send fills it in by itself; this is for requests sent on the channel directly
// (SendRequestAsync, as Publish does).
func (c *Client) RequestHeader(timeout time.Duration) ua.RequestHeader {
	var h ua.RequestHeader
	c.fillHeader(&h, c.session.authToken, timeout)
	return h
}

func (c *Client) fillHeader(h *ua.RequestHeader, token ua.NodeID, timeout time.Duration) {
	h.AuthenticationToken = token
	h.Timestamp = ua.Now()
	h.RequestHandle = c.nextHandle()
	if timeout > 0 {
		h.TimeoutHint = uint32(min(timeout/time.Millisecond, math.MaxUint32))
	} else {
		h.TimeoutHint = 0
	}
}

func (c *Client) nextHandle() uint32 {
	for {
		if h := c.handle.Add(1); h != 0 {
			return h
		}
	}
}

// Send sends a service request on the session and waits for its response. It
// fills in the request header (authentication token, request handle, timestamp,
// timeout hint; the caller's ReturnDiagnostics and AuditEntryID stay). resp, when
// of the response's type, is decoded into and returned. A ServiceFault, or a
// response whose ServiceResult is Bad, is an error that wraps the status code.
// Without a deadline in ctx, Config.RequestTimeout applies.
func (c *Client) Send(ctx context.Context, req, resp ua.Structure) (ua.Structure, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	return c.send(ctx, req, resp, c.session.authToken)
}

// SendAsync sends a request like Send but does not wait: done is called with the
// response or the error when it arrives or the timeout passes. It is for requests
// that stay with the server for long (Publish).
func (c *Client) SendAsync(req, resp ua.Structure, timeout time.Duration, done func(ua.Structure, error)) error {
	return c.sendAsync(req, resp, timeout, func(r ua.Structure, err error) {
		done(r, serviceOutcome(req, r, err))
	})
}

// sendAsync is SendAsync with done called with the channel's outcome as it
// is (serviceOutcome judges it): a caller that keeps its done (and its
// request and response) between requests allocates nothing per request.
func (c *Client) sendAsync(req, resp ua.Structure, timeout time.Duration, done func(ua.Structure, error)) error {
	if c.closed.Load() {
		return ErrClosed
	}
	h := requestHeader(req)
	if h == nil {
		return fmt.Errorf("client: %s is not a service request", typeName(req))
	}
	if timeout <= 0 {
		timeout = c.cfg.RequestTimeout
	}
	c.fillHeader(h, c.session.authToken, timeout)
	return c.conn.SendRequestAsync(req, resp, timeout, done)
}

// serviceOutcome is the outcome of req as Send and SendAsync report it: the
// channel's error named by the service, or the response's service result.
func serviceOutcome(req, resp ua.Structure, err error) error {
	if err != nil {
		return fmt.Errorf("client: %s: %w", serviceName(req), err)
	}
	return checkServiceResult(req, resp)
}

func (c *Client) send(ctx context.Context, req, resp ua.Structure, token ua.NodeID) (ua.Structure, error) {
	h := requestHeader(req)
	if h == nil {
		return nil, fmt.Errorf("client: %s is not a service request", typeName(req))
	}
	// Without a deadline in ctx the channel applies Config.RequestTimeout (passed to
	// it as its RequestTimeout), so no timer is made here per request.
	timeout := c.cfg.RequestTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return nil, fmt.Errorf("client: %s: %w", serviceName(req), context.DeadlineExceeded)
		}
	}
	c.fillHeader(h, token, timeout)
	r, err := c.conn.SendRequest(ctx, req, resp)
	return r, serviceOutcome(req, r, err)
}

// checkServiceResult turns a Bad ServiceResult into an error.
func checkServiceResult(req, resp ua.Structure) error {
	if rh := responseHeader(resp); rh != nil && rh.ServiceResult.IsBad() {
		return fmt.Errorf("client: %s: %w", serviceName(req), rh.ServiceResult)
	}
	if f, ok := resp.(*ua.ServiceFault); ok {
		sc := f.ResponseHeader.ServiceResult
		if !sc.IsBad() {
			sc = ua.StatusBadUnexpectedError
		}
		return fmt.Errorf("client: %s: %w", serviceName(req), sc)
	}
	return nil
}

func typeName(v any) string {
	if v == nil {
		return "nil"
	}
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// serviceName is "Read" for a *ua.ReadRequest; it is used in error messages only.
func serviceName(req ua.Structure) string {
	return strings.TrimSuffix(typeName(req), "Request")
}
