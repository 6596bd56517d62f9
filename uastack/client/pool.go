package client

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
)

// RateLimiter paces connection attempts: a token bucket that refills Rate
// tokens per second up to Burst. A nil *RateLimiter does not limit. It is safe
// for concurrent use.
type RateLimiter struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

// NewRateLimiter allows perSecond attempts per second on average and burst at
// once.
func NewRateLimiter(perSecond float64, burst int) *RateLimiter {
	if burst < 1 {
		burst = 1
	}
	return &RateLimiter{rate: perSecond, burst: float64(burst), tokens: float64(burst), last: time.Now()}
}

// Wait takes a token, waiting for one as long as needed, or until ctx ends.
func (l *RateLimiter) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil || l == nil || l.rate <= 0 {
		return err
	}
	l.mu.Lock()
	now := time.Now()
	l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	l.last = now
	l.tokens--
	var wait time.Duration
	if l.tokens < 0 {
		// The token is ours; it exists once the debt is paid off.
		wait = time.Duration(-l.tokens / l.rate * float64(time.Second))
	}
	l.mu.Unlock()
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		l.tokens++ // give it back
		l.mu.Unlock()
		return ctx.Err()
	}
}

// Defaults of PoolConfig.
const (
	DefaultConnectRate  = 10.0
	DefaultConnectBurst = 5
)

// Grouping says how a Pool maps endpoints to sessions.
type Grouping uint8

const (
	// PerEndpoint: one session per endpoint and identity (PoolKey without
	// the group); the group is ignored.
	PerEndpoint Grouping = iota
	// PerEndpointAndGroup: one session per endpoint, identity and group, to
	// spread the subscriptions of one server over several sessions (say, one
	// per writer group, or one per at-least-once subscription).
	PerEndpointAndGroup
)

// PoolConfig configures a Pool.
type PoolConfig struct {
	// Session is the configuration of every session (its Limiter is the
	// pool's).
	Session ManagedConfig
	// ConnectRate bounds connection attempts per second across the pool;
	// default DefaultConnectRate, negative: no limit.
	ConnectRate float64
	// ConnectBurst is the number of attempts allowed at once; default
	// DefaultConnectBurst.
	ConnectBurst int
	// Grouping maps endpoints (and groups) to sessions.
	Grouping Grouping
}

// PoolKey names a session of a Pool: the whole identity of the connection,
// so that two users of one endpoint, or one user over two security policies,
// never share a session by accident. It is comparable.
type PoolKey struct {
	URL string
	// SecurityPolicy is the policy URI asked for ("" the best the server
	// offers); SecurityMode the mode (Invalid: the best for the policy).
	SecurityPolicy string
	SecurityMode   ua.MessageSecurityMode
	// Identity names the user: "anonymous", "user:<name>" or
	// "x509:<certificate thumbprint>" (never a secret).
	Identity string
	Group    string // "" under PerEndpoint
}

// String is the key for logs (no secret in it).
func (k PoolKey) String() string {
	s := k.URL + " " + policyName(k.SecurityPolicy) + "/" + modeNameOrAny(k.SecurityMode) + " " + k.Identity
	if k.Group != "" {
		s += " [" + k.Group + "]"
	}
	return s
}

// poolSignature is what else must match for a session of a Pool to be
// reused: the rest of the configuration that changes how it connects and
// behaves. Callbacks, loggers and the limiter are not compared; the password
// only as a hash.
type poolSignature struct {
	secret                                   [sha256.Size]byte // password or X.509 user key material
	cert                                     [sha256.Size]byte // Certificate
	store                                    *pki.Store
	allowDeprecated, autoAccept, checkHost   bool
	insecurePassword                         bool
	appURI, appName, productURI, sessionName string
	sessionTimeout, requestTimeout, lifetime time.Duration
	locales, transport                       string
	backoff, permanentBackoff                Backoff
	connectTimeout, keepAlive, grace         time.Duration
	maxPublish                               int
}

func signature(c *ManagedConfig) poolSignature {
	cc := &c.Client
	sig := poolSignature{
		store: cc.Store, allowDeprecated: cc.AllowDeprecated, autoAccept: cc.AutoAccept, checkHost: cc.CheckHostname,
		insecurePassword: cc.AllowInsecurePassword, appURI: cc.ApplicationURI, appName: cc.ApplicationName,
		productURI: cc.ProductURI, sessionName: cc.SessionName, sessionTimeout: cc.SessionTimeout,
		requestTimeout: cc.RequestTimeout, lifetime: cc.ChannelLifetime, locales: strings.Join(cc.Locales, "\x00"),
		backoff: c.Backoff, permanentBackoff: c.PermanentBackoff, connectTimeout: c.ConnectTimeout, keepAlive: c.KeepAliveInterval,
		grace: c.KeepAliveGrace, maxPublish: c.MaxPublishRequests,
	}
	if cc.Identity != nil {
		sig.secret = cc.Identity.secretHash()
	}
	if cc.Certificate != nil {
		sig.cert = sha256.Sum256(cc.Certificate)
	}
	if cc.Transport != nil {
		sig.transport = fmt.Sprintf("%+v", *cc.Transport)
	}
	return sig
}

// Pool is a set of managed sessions across many endpoints, sharing one
// connect rate limiter so that a restart of many servers (or of the gateway)
// does not become a connect storm. It is safe for concurrent use.
type Pool struct {
	cfg     PoolConfig
	limiter *RateLimiter

	mu       sync.Mutex
	sessions map[PoolKey]*poolEntry
	closed   bool
}

type poolEntry struct {
	m   *ManagedSession
	sig poolSignature
}

// NewPool makes a pool.
func NewPool(cfg *PoolConfig) (*Pool, error) {
	var c PoolConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Grouping > PerEndpointAndGroup {
		return nil, fmt.Errorf("client: PoolConfig.Grouping %d unknown", c.Grouping)
	}
	if _, err := c.Session.withDefaults(); err != nil {
		return nil, fmt.Errorf("client: PoolConfig.Session: %w", err)
	}
	if c.ConnectRate == 0 {
		c.ConnectRate = DefaultConnectRate
	}
	if c.ConnectBurst <= 0 {
		c.ConnectBurst = DefaultConnectBurst
	}
	p := &Pool{cfg: c, sessions: map[PoolKey]*poolEntry{}}
	if c.ConnectRate > 0 {
		p.limiter = NewRateLimiter(c.ConnectRate, c.ConnectBurst)
	}
	return p, nil
}

// Key returns the key of the session Session or SessionWith would give for
// endpointURL, group and cfg (nil: the pool's configuration).
func (p *Pool) Key(endpointURL, group string, cfg *ManagedConfig) (PoolKey, error) {
	conf := p.cfg.Session
	if cfg != nil {
		conf = *cfg
	}
	return p.key(endpointURL, group, &conf)
}

func (p *Pool) key(endpointURL, group string, conf *ManagedConfig) (PoolKey, error) {
	k := PoolKey{URL: endpointURL, SecurityMode: conf.Client.SecurityMode, Identity: "anonymous"}
	if conf.Client.SecurityPolicy != "" {
		uri, err := ParseSecurityPolicy(conf.Client.SecurityPolicy)
		if err != nil {
			return PoolKey{}, fmt.Errorf("client: Config.SecurityPolicy: %w", err)
		}
		k.SecurityPolicy = uri
	}
	if id := conf.Client.Identity; id != nil {
		k.Identity = id.poolKey()
	}
	if p.cfg.Grouping == PerEndpointAndGroup {
		k.Group = group
	}
	return k, nil
}

// Session returns the session for an endpoint (and group, under
// PerEndpointAndGroup) with the pool's configuration, making and starting it
// on first use.
func (p *Pool) Session(endpointURL, group string) (*ManagedSession, error) {
	return p.SessionWith(endpointURL, group, nil)
}

// SessionWith is Session with a configuration of its own (nil: the pool's);
// the pool's limiter applies in any case. The session is the one of the key
// (URL, security policy and mode, user identity, group: see Key); when the
// pool has one for that key made with a different configuration (another
// password, timeouts, certificate …), the result is ErrPoolConflict, not the
// other session.
func (p *Pool) SessionWith(endpointURL, group string, cfg *ManagedConfig) (*ManagedSession, error) {
	conf := p.cfg.Session
	if cfg != nil {
		conf = *cfg
	}
	key, err := p.key(endpointURL, group, &conf)
	if err != nil {
		return nil, err
	}
	sig := signature(&conf)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if e, ok := p.sessions[key]; ok {
		if e.sig != sig {
			return nil, fmt.Errorf("%w: %s", ErrPoolConflict, key)
		}
		return e.m, nil
	}
	conf.Limiter = p.limiter
	if key.Group != "" {
		conf.Client.SessionName = sessionName(conf.Client.SessionName, key.Group)
	}
	m, err := NewManagedSession(endpointURL, &conf)
	if err != nil {
		return nil, err
	}
	p.sessions[key] = &poolEntry{m: m, sig: sig}
	m.Start()
	return m, nil
}

func sessionName(base, group string) string {
	if base == "" {
		base = DefaultSessionName
	}
	return base + " [" + group + "]"
}

// Take forgets the session of a key and returns it (nil: none) for the
// caller to close: a later SessionWith of the key makes a new one. It does no
// I/O, so a caller may hold its own lock across it and close outside.
func (p *Pool) Take(key PoolKey) *ManagedSession {
	p.mu.Lock()
	e := p.sessions[key]
	delete(p.sessions, key)
	p.mu.Unlock()
	if e == nil {
		return nil
	}
	return e.m
}

// Remove closes (ManagedSession.Close with ctx) and forgets the session of a
// key.
func (p *Pool) Remove(ctx context.Context, key PoolKey) error {
	if m := p.Take(key); m != nil {
		return m.Close(ctx)
	}
	return nil
}

// Sessions returns the pool's sessions by key, in key order.
func (p *Pool) Sessions() []PoolEntry {
	p.mu.Lock()
	out := make([]PoolEntry, 0, len(p.sessions))
	for k, e := range p.sessions {
		out = append(out, PoolEntry{Key: k, Session: e.m})
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key.less(out[j].Key) })
	return out
}

func (k PoolKey) less(o PoolKey) bool {
	switch {
	case k.URL != o.URL:
		return k.URL < o.URL
	case k.Group != o.Group:
		return k.Group < o.Group
	case k.SecurityPolicy != o.SecurityPolicy:
		return k.SecurityPolicy < o.SecurityPolicy
	case k.SecurityMode != o.SecurityMode:
		return k.SecurityMode < o.SecurityMode
	}
	return k.Identity < o.Identity
}

// PoolEntry is a session of a pool with its key.
type PoolEntry struct {
	Key     PoolKey
	Session *ManagedSession
}

// States counts the pool's sessions by state (for metrics and health).
func (p *Pool) States() map[State]int {
	out := map[State]int{}
	for _, e := range p.Sessions() {
		out[e.Session.State()]++
	}
	return out
}

// Close closes every session in parallel, each draining until ctx ends (see
// ManagedSession.Close), and refuses new ones.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	all := p.sessions
	p.sessions = map[PoolKey]*poolEntry{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, 0, len(all))
	var mu sync.Mutex
	for _, e := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.m.Close(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
