package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
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
	// PerEndpoint: one session per endpoint URL; the group is ignored.
	PerEndpoint Grouping = iota
	// PerEndpointAndGroup: one session per endpoint URL and group, to spread
	// the subscriptions of one server over several sessions (say, one per
	// writer group).
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

// PoolKey names a session of a Pool.
type PoolKey struct {
	URL   string
	Group string // "" under PerEndpoint
}

// Pool is a set of managed sessions across many endpoints, sharing one
// connect rate limiter so that a restart of many servers (or of the gateway)
// does not become a connect storm. It is safe for concurrent use.
type Pool struct {
	cfg     PoolConfig
	limiter *RateLimiter

	mu       sync.Mutex
	sessions map[PoolKey]*ManagedSession
	closed   bool
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
	p := &Pool{cfg: c, sessions: map[PoolKey]*ManagedSession{}}
	if c.ConnectRate > 0 {
		p.limiter = NewRateLimiter(c.ConnectRate, c.ConnectBurst)
	}
	return p, nil
}

// Session returns the session for an endpoint (and group, under
// PerEndpointAndGroup), making and starting it on first use with the pool's
// configuration.
func (p *Pool) Session(endpointURL, group string) (*ManagedSession, error) {
	return p.SessionWith(endpointURL, group, nil)
}

// SessionWith is Session with a configuration of its own for a session made
// now (nil: the pool's); the pool's limiter applies in any case.
func (p *Pool) SessionWith(endpointURL, group string, cfg *ManagedConfig) (*ManagedSession, error) {
	key := PoolKey{URL: endpointURL}
	if p.cfg.Grouping == PerEndpointAndGroup {
		key.Group = group
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if m, ok := p.sessions[key]; ok {
		return m, nil
	}
	conf := p.cfg.Session
	if cfg != nil {
		conf = *cfg
	}
	conf.Limiter = p.limiter
	if key.Group != "" {
		conf.Client.SessionName = sessionName(conf.Client.SessionName, key.Group)
	}
	m, err := NewManagedSession(endpointURL, &conf)
	if err != nil {
		return nil, err
	}
	p.sessions[key] = m
	m.Start()
	return m, nil
}

func sessionName(base, group string) string {
	if base == "" {
		base = DefaultSessionName
	}
	return base + " [" + group + "]"
}

// Remove closes and forgets the session of a key.
func (p *Pool) Remove(endpointURL, group string) error {
	key := PoolKey{URL: endpointURL}
	if p.cfg.Grouping == PerEndpointAndGroup {
		key.Group = group
	}
	p.mu.Lock()
	m := p.sessions[key]
	delete(p.sessions, key)
	p.mu.Unlock()
	if m == nil {
		return nil
	}
	return m.Close()
}

// Sessions returns the pool's sessions by key, in key order.
func (p *Pool) Sessions() []PoolEntry {
	p.mu.Lock()
	out := make([]PoolEntry, 0, len(p.sessions))
	for k, m := range p.sessions {
		out = append(out, PoolEntry{Key: k, Session: m})
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key.URL != out[j].Key.URL {
			return out[i].Key.URL < out[j].Key.URL
		}
		return out[i].Key.Group < out[j].Key.Group
	})
	return out
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

// Close closes every session (in parallel) and refuses new ones.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	all := p.sessions
	p.sessions = map[PoolKey]*ManagedSession{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, 0, len(all))
	var mu sync.Mutex
	for _, m := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Close(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
