package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// The managed session: a session that stays up, and subscriptions that keep
// delivering, whatever happens to the server or the network.
//
// One worker goroutine owns the connection. It connects (Dial), creates the
// subscriptions and their items, and then supervises: the channel ending, a
// Publish that shows the session is gone, a subscription that has been silent
// for longer than its keep-alive window (plus KeepAliveGrace), or a failed read
// of the server's ServerStatus.State (every KeepAliveInterval) each start a
// recovery. The status read runs asynchronously: a read waiting for its answer
// on a stalled connection must not keep the supervision from noticing the
// silence of the subscriptions meanwhile. A recovery tries in order:
//
//  1. reactivate: a new secure channel, and ActivateSession of the same
//     session on it (Part 4 §6.7). The subscriptions continue; messages sent
//     on the dead channel are still in the server's retransmission queue and
//     are republished from the AvailableSequenceNumbers of the next Publish
//     response, so nothing is lost.
//  2. transfer: when the server no longer has the session, a new session and
//     TransferSubscriptions(sendInitialValues=false); the available messages
//     of each subscription are republished.
//  3. recreate: each subscription that cannot be transferred is created anew
//     with all its items; OnGap reports the loss (to == 0).
//
// The first connection of a managed session given an earlier process's
// session (ManagedConfig.SavedSession) starts at step 1 with it: ActivateSession
// of that session on a new channel (ResumeSession), its subscriptions taken
// up as they are (SubscriptionConfig.Resume); when the server no longer has
// it, a new session is made and the subscriptions to resume are transferred,
// or recreated.
//
// After a recovery every subscription must be heard from within its keep-alive
// window; one that is not starts another recovery, one step further down the
// list (a session that reactivates but whose subscriptions stay silent is
// replaced by a new one, then the subscriptions are recreated).
//
// Failed attempts are retried after Backoff (1 s doubling to 30 s with jitter,
// ×4 when the server says it is busy, never above the maximum), forever by
// default. Connection attempts of many sessions go through a shared
// RateLimiter when one is configured (the Pool does), so a server coming back
// is not hit by a connect storm.
//
// A permanent failure (ClassifyFailure: the user or a certificate refused, no
// endpoint with the configured security, an endpoint URL that cannot work)
// puts the session in StateFailed with its FailureReason, and the next
// attempts follow PermanentBackoff (1 min doubling to 10 min): retrying a
// wrong password every second locks the account on many servers, and nothing
// but a changed trust list, configuration or server can mend it. The slow
// retries pick such a change up: a rejected server certificate moved to
// trusted/ makes the next one succeed.

// State of a managed session.
type State int32

const (
	StateDisconnected State = iota // not started, or gave up (Backoff.MaxElapsed)
	StateConnecting                // first connection being made
	StateConnected                 // session active, subscriptions created
	StateReconnecting              // recovering after a fault
	StateFailed                    // a permanent failure (FailureReason); retrying slowly (PermanentBackoff)
	StateClosing                   // Close called
	StateClosed
)

func (s State) String() string {
	switch s {
	case StateDisconnected:
		return "Disconnected"
	case StateConnecting:
		return "Connecting"
	case StateConnected:
		return "Connected"
	case StateReconnecting:
		return "Reconnecting"
	case StateFailed:
		return "Failed"
	case StateClosing:
		return "Closing"
	case StateClosed:
		return "Closed"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// Defaults of ManagedConfig.
const (
	DefaultConnectTimeout    = 30 * time.Second
	DefaultKeepAliveInterval = 5 * time.Second
	// DefaultPermanentBackoffInitial and DefaultPermanentBackoffMax are the
	// defaults of PermanentBackoff: slow enough that a wrong password does not
	// lock an account, quick enough that a fix is seen within minutes.
	DefaultPermanentBackoffInitial = time.Minute
	DefaultPermanentBackoffMax     = 10 * time.Minute
)

// ManagedConfig configures a ManagedSession. The zero value is complete.
type ManagedConfig struct {
	// Client configures every connection (Dial).
	Client Config
	// Backoff is the delay between failed attempts.
	Backoff Backoff
	// PermanentBackoff is the delay between attempts after a permanent
	// failure (StateFailed); zero Initial and Max are
	// DefaultPermanentBackoffInitial and DefaultPermanentBackoffMax. Its
	// MaxElapsed gives up after so long in StateFailed (0: never); the
	// MaxElapsed of Backoff, which counts every failure in a row, applies
	// too, and a slow retry does not wait past it.
	PermanentBackoff Backoff
	// ConnectTimeout bounds one attempt: connecting, activating, and
	// transferring or recreating the subscriptions; default DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// KeepAliveInterval is how often the server's ServerStatus.State is read to
	// check the session; default DefaultKeepAliveInterval, negative never. The
	// subscriptions' keep-alives are checked all the time besides.
	KeepAliveInterval time.Duration
	// KeepAliveGrace is added to a subscription's keep-alive window before its
	// silence starts a recovery; default DefaultKeepAliveGrace.
	KeepAliveGrace time.Duration
	// MaxPublishRequests bounds the Publish requests kept at the server;
	// default DefaultMaxPublishRequests.
	MaxPublishRequests int
	// Limiter, when set, paces connection attempts (shared by a Pool's
	// sessions).
	Limiter *RateLimiter
	// PublishLatency, when set, is told the time from each Publish request
	// to its response (which includes the time it waited at the server for
	// a notification): the publish round-trip histogram of the metrics.
	PublishLatency interface{ Observe(time.Duration) }
	// OnStateChange is told of every state change, with the error that caused
	// it (nil for Connected); StateFailed is told again at every failed slow
	// retry. It runs on the session's worker goroutine and must not block.
	OnStateChange func(m *ManagedSession, state State, err error)
	// SavedSession, when set, is asked once, by the worker before its
	// first connection, for a session an earlier process made (its
	// SessionState, kept through OnSession; nil: none): that connection
	// activates it on a new secure channel (ResumeSession) before it would
	// create one, so that its subscriptions continue without a transfer.
	// When the server no longer has it, a new session is created.
	SavedSession func() *SessionState
	// OnSession is told the session's state after every activation (a new
	// session, one reactivated or resumed): what a later process needs to
	// activate it again (SavedSession). It runs on the worker goroutine; keep it
	// short (a small file written atomically is fine).
	OnSession func(m *ManagedSession, st SessionState)
}

func (c *ManagedConfig) withDefaults() (ManagedConfig, error) {
	var cfg ManagedConfig
	if c != nil {
		cfg = *c
	}
	if err := cfg.Client.Validate(); err != nil {
		return cfg, err
	}
	if err := cfg.Backoff.Validate(); err != nil {
		return cfg, err
	}
	if err := cfg.PermanentBackoff.Validate(); err != nil {
		return cfg, fmt.Errorf("client: ManagedConfig.PermanentBackoff: %w", err)
	}
	if cfg.PermanentBackoff.Initial == 0 {
		cfg.PermanentBackoff.Initial = DefaultPermanentBackoffInitial
	}
	if cfg.PermanentBackoff.Max == 0 {
		cfg.PermanentBackoff.Max = max(DefaultPermanentBackoffMax, cfg.PermanentBackoff.Initial)
	}
	if cfg.ConnectTimeout < 0 || cfg.KeepAliveGrace < 0 || cfg.MaxPublishRequests < 0 {
		return cfg, errors.New("client: ManagedConfig: ConnectTimeout, KeepAliveGrace and MaxPublishRequests must not be negative")
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.KeepAliveInterval == 0 {
		cfg.KeepAliveInterval = DefaultKeepAliveInterval
	}
	if cfg.KeepAliveGrace == 0 {
		cfg.KeepAliveGrace = DefaultKeepAliveGrace
	}
	if cfg.MaxPublishRequests == 0 {
		cfg.MaxPublishRequests = DefaultMaxPublishRequests
	}
	if cfg.Client.Logger == nil {
		cfg.Client.Logger = slog.Default()
	}
	if cfg.Client.RequestTimeout == 0 {
		cfg.Client.RequestTimeout = DefaultRequestTimeout
	}
	return cfg, nil
}

// ManagedStats count a managed session's recoveries and show its publish
// engine.
type ManagedStats struct {
	Connects      uint64 // sessions created
	Reactivations uint64 // sessions reactivated on a new channel
	Transfers     uint64 // subscriptions transferred to a new session
	Recreations   uint64 // subscriptions created anew
	Faults        uint64 // recoveries started
	// PublishRequests are the Publish requests outstanding at the server now:
	// more the longer the round trip (see the header of publish.go).
	PublishRequests int
	// PublishLimit bounds PublishRequests: MaxPublishRequests, lower after
	// the server answered BadTooManyPublishRequests (raised by one again
	// every minute while it holds).
	PublishLimit int
}

// ManagedSession is a session to one endpoint that reconnects, recovers its
// subscriptions and reports its state. Its methods are safe for concurrent use.
type ManagedSession struct {
	url string
	cfg ManagedConfig
	log *slog.Logger
	pub *publisher

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	retry  chan struct{} // RetryNow: ends a wait between connection attempts

	mu      sync.Mutex
	state   State
	err     error
	reason  FailureReason // of StateFailed
	changed chan struct{} // closed and replaced on every state change
	client  *Client
	started bool
	done    chan struct{} // closed when the worker ends (and while none runs)

	faults chan managedFault

	// worker only
	saved       *SessionState // ManagedConfig.SavedSession's until it was tried
	askedSaved  bool
	old         *Client   // the last session, which the server may still have
	lostAt      time.Time // when it failed
	level       int       // recovery step to start from: 0 reactivate, 1 transfer, 2 recreate
	permanent   Backoff   // the slow schedule after permanent failures
	verifyFrom  time.Time
	probe       *statusProbe // readStatus's, kept between reads (the run goroutine's)
	verifying   bool
	retrying    atomic.Bool
	retryWG     sync.WaitGroup
	lastErr     error
	closeOnce   sync.Once
	closeResult error
	detach      atomic.Bool // Detach: Close keeps the subscriptions at the server
	suspend     atomic.Bool // Suspend: Close keeps the session too

	stats struct {
		connects, reactivations, transfers, recreations, faults atomic.Uint64
	}
}

type managedFault struct {
	c   *Client
	sub *Subscription
	err error
}

// NewManagedSession makes a managed session to endpointURL; Start connects it.
func NewManagedSession(endpointURL string, cfg *ManagedConfig) (*ManagedSession, error) {
	conf, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &ManagedSession{
		url:     endpointURL,
		cfg:     conf,
		log:     conf.Client.Logger.With("endpoint", endpointURL),
		changed: make(chan struct{}),
		retry:   make(chan struct{}, 1),
		faults:  make(chan managedFault, 16),
		done:    make(chan struct{}),
	}
	close(m.done) // no worker yet
	m.permanent = conf.PermanentBackoff
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.pub = newPublisher(m.log, conf.MaxPublishRequests, conf.KeepAliveGrace, conf.Client.RequestTimeout)
	m.pub.latency = conf.PublishLatency
	m.pub.onFault = func(c *Client, sub *Subscription, err error) {
		select {
		case m.faults <- managedFault{c, sub, err}:
		default:
		}
	}
	m.pub.start(nil)
	return m, nil
}

// Start starts connecting in the background; WaitConnected waits for it.
func (m *ManagedSession) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.state >= StateClosing {
		return
	}
	m.started = true
	done := make(chan struct{})
	m.done = done
	go m.run(done)
}

// URL returns the endpoint URL.
func (m *ManagedSession) URL() string { return m.url }

// State returns the current state.
func (m *ManagedSession) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state
}

// Err returns the error of the last failure (the reason for the current
// Reconnecting or Failed state, or why it gave up), nil while connected.
func (m *ManagedSession) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// FailureReason says which permanent failure keeps the session in
// StateFailed; FailureNone in every other state.
func (m *ManagedSession) FailureReason() FailureReason {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reason
}

// Stats returns the session's recovery counters.
func (m *ManagedSession) Stats() ManagedStats {
	return ManagedStats{
		Connects:      m.stats.connects.Load(),
		Reactivations: m.stats.reactivations.Load(),
		Transfers:     m.stats.transfers.Load(),
		Recreations:   m.stats.recreations.Load(),
		Faults:        m.stats.faults.Load(),

		PublishRequests: int(m.pub.statInflight.Load()),
		PublishLimit:    int(m.pub.statLimit.Load()),
	}
}

// Client returns the current session's Client, nil while there is none. It
// may end at any moment (use it for one-off calls; subscriptions belong to the
// ManagedSession).
func (m *ManagedSession) Client() *Client {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != StateConnected {
		return nil
	}
	return m.client
}

// WaitConnected waits until the session is connected, ctx ends, or the
// session is closed (ErrClosed) or gave up (its error). A session in
// StateFailed is still retrying: WaitConnected goes on waiting (watch State,
// or OnStateChange, to give up on a permanent failure).
func (m *ManagedSession) WaitConnected(ctx context.Context) (*Client, error) {
	for {
		m.mu.Lock()
		st, ch, c, err := m.state, m.changed, m.client, m.err
		m.mu.Unlock()
		switch {
		case st == StateConnected:
			return c, nil
		case st >= StateClosing:
			return nil, ErrClosed
		case st == StateDisconnected && err != nil:
			return nil, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Subscriptions returns the session's subscriptions.
func (m *ManagedSession) Subscriptions() []*Subscription { return m.pub.list() }

func (m *ManagedSession) setState(st State, err error) {
	m.mu.Lock()
	if m.state >= StateClosing && st < StateClosing {
		m.mu.Unlock()
		return
	}
	same := m.state == st && errors.Is(m.err, err) && errors.Is(err, m.err)
	m.state, m.err = st, err
	m.reason = FailureNone
	if st == StateFailed {
		m.reason = ClassifyFailure(err)
	}
	reason := m.reason
	if !same {
		close(m.changed)
		m.changed = make(chan struct{})
	}
	m.mu.Unlock()
	if same {
		return
	}
	switch {
	case st == StateFailed:
		m.log.Error("client: managed session "+st.String(), "reason", reason.String(), "err", err)
	case err != nil:
		m.log.Info("client: managed session "+st.String(), "err", err)
	default:
		m.log.Info("client: managed session " + st.String())
	}
	if m.cfg.OnStateChange != nil {
		m.cfg.OnStateChange(m, st, err)
	}
}

// CreateSubscription adds a subscription to the session. When the session is
// connected it is created at once (a server's refusal is the error);
// otherwise it is created when the session connects, and recovered with the
// session from then on.
func (m *ManagedSession) CreateSubscription(ctx context.Context, cfg *SubscriptionConfig) (*Subscription, error) {
	if m.ctx.Err() != nil {
		return nil, ErrClosed
	}
	s, err := newSubscription(m.pub, cfg)
	if err != nil {
		return nil, err
	}
	m.pub.add(s)
	c := m.pub.current()
	if c == nil || c.closed.Load() {
		return s, nil
	}
	if err := m.pub.ensure(ctx, c, s); err != nil {
		if isConnectionError(err) {
			return s, nil // the recovery creates it
		}
		m.pub.remove(s)
		return nil, err
	}
	return s, nil
}

// ensure creates s on c unless it exists, and the items that are not there.
func (p *publisher) ensure(ctx context.Context, c *Client, s *Subscription) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if s.id.Load() == 0 {
		resumed, err := p.resumeOn(ctx, c, s) // resume.go: SubscriptionConfig.Resume
		if err != nil {
			return err
		}
		if !resumed {
			s.forgetServerItems()
			if err := p.create(ctx, c, s); err != nil {
				return err
			}
		}
	}
	_, _, err := s.createAll(ctx, c, false)
	return err
}

// isConnectionError reports whether err is the connection's or the session's
// fault rather than the server refusing a request.
func isConnectionError(err error) bool {
	return errors.Is(err, uasc.ErrChannelClosed) || errors.Is(err, ErrClosed) || errors.Is(err, ErrNotConnected) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errorsIsAny(err, ua.StatusBadTimeout, ua.StatusBadSecureChannelClosed, ua.StatusBadConnectionClosed) || isSessionGone(err)
}

// DefaultCloseTimeout bounds the drain of a ManagedSession.Close whose
// context has no deadline.
const DefaultCloseTimeout = 5 * time.Second

// Close drains and closes the session: no new Publish requests go out; until
// ctx ends (DefaultCloseTimeout when it has no deadline), the responses to the
// requests still at the server are delivered, running gap fills end, and
// AckManual subscriptions get the chance to acknowledge what they were given;
// the acknowledgements go to the server in a last Publish request (those not
// made by the deadline are dropped, and the server keeps those messages as
// long as it keeps the subscription). Then the session is closed (deleting
// its subscriptions on the server) and the worker stops. Subscriptions deliver
// RetryNow ends a wait between connection attempts (the quick backoff, or
// the slow schedule of a permanent failure) so that the next attempt starts
// at once: after the cause was fixed, a rejected server certificate trusted
// or a password changed. It does nothing while connected, and never blocks.
func (m *ManagedSession) RetryNow() {
	select {
	case m.retry <- struct{}{}:
	default:
	}
}

// nothing more. Calls after the first return its result at once.
func (m *ManagedSession) Close(ctx context.Context) error {
	m.closeOnce.Do(func() {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, DefaultCloseTimeout)
			defer cancel()
		}
		m.setState(StateClosing, nil)
		m.pub.quiesce(ctx)
		m.cancel()
		m.mu.Lock()
		done := m.done
		m.mu.Unlock()
		<-done // the worker's, or closed from the start
		m.retryWG.Wait()
		m.mu.Lock()
		c := m.client
		m.client = nil
		m.mu.Unlock()
		// What answers the requests still out is of no interest now.
		m.pub.bind(nil)
		if c != nil && !c.closed.Load() {
			if m.suspend.Load() {
				m.closeResult = c.abandonSession()
			} else if m.detach.Load() {
				m.closeResult = c.closeKeeping(ctx)
			} else {
				m.closeResult = c.Close()
			}
		}
		m.pub.close()
		m.setStateClosed()
	})
	return m.closeResult
}

func (m *ManagedSession) setStateClosed() {
	m.mu.Lock()
	m.state, m.err, m.reason = StateClosed, nil, FailureNone
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
	m.log.Info("client: managed session Closed")
	if m.cfg.OnStateChange != nil {
		m.cfg.OnStateChange(m, StateClosed, nil)
	}
}

// run is the worker: connect, supervise, recover, until Close.
func (m *ManagedSession) run(done chan struct{}) {
	defer close(done)
	if f := m.cfg.SavedSession; f != nil && !m.askedSaved {
		m.askedSaved = true
		m.saved = f()
	}
	bo := m.cfg.Backoff
	ever := false
	for m.ctx.Err() == nil {
		trying := StateConnecting
		if ever {
			trying = StateReconnecting
		}
		// A failed session stays Failed through its slow retries: a state
		// that flickered to Connecting every minute would hide it.
		if m.stateNow() != StateFailed {
			m.setState(trying, m.lastErr)
		}
		if err := m.cfg.Limiter.Wait(m.ctx); err != nil {
			return
		}
		c, err := m.connect()
		if err != nil {
			if m.ctx.Err() != nil {
				return
			}
			m.lastErr = err
			permanent := IsPermanent(err)
			// Backoff.MaxElapsed counts every failure in a row, permanent
			// or not; a slow retry does not wait past it.
			d, gerr := bo.Next(err)
			if gerr == nil && permanent {
				d, gerr = m.permanent.Next(err)
				if left, ok := bo.left(); ok {
					d = min(d, max(left, 0))
				}
			}
			if gerr != nil {
				m.setState(StateDisconnected, fmt.Errorf("%w: %w", gerr, err))
				m.mu.Lock()
				m.started = false
				m.mu.Unlock()
				return
			}
			if permanent {
				m.log.Warn("client: connecting failed permanently; retrying slowly", "err", err, "retryIn", d.Round(time.Millisecond))
				m.setState(StateFailed, err)
			} else {
				m.log.Warn("client: connecting failed", "err", err, "retryIn", d.Round(time.Millisecond))
				m.setState(trying, err)
			}
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-m.retry:
				t.Stop()
				m.log.Info("client: retrying now")
			case <-m.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		ever = true
		select { // a RetryNow meant for the wait just ended
		case <-m.retry:
		default:
		}
		m.old = nil
		m.lastErr = nil
		m.permanent.Reset()
		m.mu.Lock()
		m.client = c
		m.mu.Unlock()
		if m.cfg.OnSession != nil {
			m.cfg.OnSession(m, c.SessionState())
		}
		m.verifyFrom, m.verifying = time.Now(), true
		m.setState(StateConnected, nil)

		why := m.supervise(c, &bo)
		if m.ctx.Err() != nil {
			return
		}
		m.stats.faults.Add(1)
		m.lastErr = why
		m.log.Warn("client: session fault; recovering", "err", why, "step", m.level)
		m.pub.bind(nil)
		m.mu.Lock()
		m.client = nil
		m.mu.Unlock()
		m.old, m.lostAt = c, time.Now()
		// Until they deliver again, the subscriptions report no communication.
		for _, s := range m.pub.list() {
			if s.silent.CompareAndSwap(false, true) && s.cfg.OnStatusChange != nil {
				s.cfg.OnStatusChange(s, ua.StatusBadNoCommunication)
			}
		}
		if m.verifying {
			// The recovery did not bring the subscriptions back: an attempt
			// that failed, so wait before the next one.
			d, err := bo.Next(why)
			if err != nil {
				m.setState(StateDisconnected, fmt.Errorf("%w: %w", err, why))
				m.mu.Lock()
				m.started = false
				m.mu.Unlock()
				return
			}
			m.setState(StateReconnecting, why)
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-m.ctx.Done():
				t.Stop()
				return
			}
		}
	}
}

func (m *ManagedSession) stateNow() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state
}

// connect makes a working session: the old one reactivated, or a new one with
// the subscriptions transferred or recreated.
func (m *ManagedSession) connect() (*Client, error) {
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.ConnectTimeout)
	defer cancel()
	if old := m.old; old != nil {
		if m.level > 0 {
			// The session answers but its subscriptions stay silent: close it,
			// leaving the subscriptions to be transferred (or, one step
			// further, deleting them), so it does not linger at the server.
			old.closeSessionFor(m.level >= 2)
		}
		old.abandon()
		// The server keeps a session for its timeout after the last request.
		if m.level == 0 && time.Since(m.lostAt) < old.SessionTimeout() {
			nc, rejected, err := old.reactivate(ctx)
			if err == nil {
				m.stats.reactivations.Add(1)
				m.log.Info("client: session reactivated on a new channel")
				// Before any Publish goes out on it: values resent now are
				// compared with the last ones delivered.
				m.pub.post(func() {
					for _, s := range m.pub.loopSubs() {
						s.armResend()
					}
					clear(m.pub.scratch)
				})
				m.pub.bind(nc)
				m.pub.deleteOrphans(ctx, nc)
				m.createMissing(ctx, nc)
				return nc, nil
			}
			if !rejected {
				return nil, err
			}
			m.log.Info("client: the server no longer has the session; creating a new one", "err", err)
			m.old = nil
		}
	}
	if st := m.saved; st != nil {
		nc, err := ResumeSession(ctx, m.url, &m.cfg.Client, st)
		if err == nil {
			m.saved = nil
			m.stats.reactivations.Add(1)
			m.log.Info("client: the session of an earlier process reactivated on a new channel", "session", st.SessionID)
			m.pub.bind(nc)
			m.createMissing(ctx, nc)
			return nc, nil
		}
		if !errors.Is(err, ErrSessionNotResumed) {
			return nil, err // the server may still have it: try again
		}
		m.saved = nil
		m.log.Info("client: the session of an earlier process cannot be used; creating a new one", "err", err)
	}
	nc, err := Dial(ctx, m.url, &m.cfg.Client)
	if err != nil {
		return nil, err
	}
	m.stats.connects.Add(1)
	// Subscriptions deleted while disconnected went with the old session (or
	// are orphans the server lets expire); their ids may be reused now.
	m.pub.dropOrphans()
	if err := m.restore(ctx, nc); err != nil {
		nc.Close()
		return nil, err
	}
	m.pub.bind(nc)
	m.createMissing(ctx, nc)
	return nc, nil
}

// restore moves the subscriptions to the new session nc: transfer where the
// server still has them, recreate the others.
func (m *ManagedSession) restore(ctx context.Context, nc *Client) error {
	var transfer, lost []*Subscription
	for _, s := range m.pub.list() {
		if s.id.Load() != 0 {
			transfer = append(transfer, s)
		}
	}
	if len(transfer) > 0 && m.level < 2 {
		ids := make([]uint32, len(transfer))
		for i, s := range transfer {
			ids[i] = s.id.Load()
		}
		req := &ua.TransferSubscriptionsRequest{SubscriptionIDs: ids, SendInitialValues: false}
		var resp ua.TransferSubscriptionsResponse
		_, err := nc.Send(ctx, req, &resp)
		switch {
		case err == nil && len(resp.Results) == len(ids):
			for i, s := range transfer {
				r := &resp.Results[i]
				if !r.StatusCode.IsGood() {
					m.log.Info("client: subscription not transferred; recreating it", "subscription", ids[i], "status", r.StatusCode)
					lost = append(lost, s)
					continue
				}
				m.stats.transfers.Add(1)
				s.stats.transferred.Add(1)
				s.since.Store(time.Now().UnixNano())
				avail := append([]uint32(nil), r.AvailableSequenceNumbers...)
				m.pub.post(func() { m.pub.afterTransfer(nc, s, avail) })
				if s.cfg.OnStatusChange != nil {
					s.cfg.OnStatusChange(s, ua.StatusGoodSubscriptionTransferred)
				}
			}
		case err != nil && isConnectionError(err) && !isSessionGone(err):
			return err
		default:
			m.log.Info("client: TransferSubscriptions failed; recreating the subscriptions", "err", err)
			lost = transfer
		}
	} else {
		lost = transfer
	}
	for _, s := range lost {
		m.pub.post(func() { m.pub.reportLost(s) })
		m.pub.unregister(s)
		if err := m.pub.ensure(ctx, nc, s); err != nil {
			if isConnectionError(err) {
				return err
			}
			m.log.Warn("client: recreating a subscription failed", "err", err)
			continue
		}
		m.stats.recreations.Add(1)
		s.stats.recreated.Add(1)
	}
	return nil
}

// createMissing creates the subscriptions that are not on the server yet
// (added while disconnected, or whose recreation failed) and the items
// missing in the others.
func (m *ManagedSession) createMissing(ctx context.Context, c *Client) {
	for _, s := range m.pub.list() {
		if err := m.pub.ensure(ctx, c, s); err != nil {
			m.log.Warn("client: creating a subscription failed", "err", err)
		}
	}
}

// afterTransfer republishes what the server kept of a transferred
// subscription beyond what was delivered, and opens the window for dropping
// resent values; it runs on the dispatch loop. Its unacknowledged messages
// (AckManual) stay as they are: the server kept them with the subscription.
func (p *publisher) afterTransfer(c *Client, s *Subscription, avail []uint32) {
	s.armResend()
	st := s.syncSeq()
	next := seqNext(st.last)
	var end uint32
	found := false
	for _, a := range avail {
		if a == next || seqAfter(a, next) {
			if !found || seqAfter(a, end) {
				end, found = a, true
			}
		}
	}
	if found {
		p.behind(c, s, st, end, avail, 0)
	}
}

// reportLost tells OnGap that a subscription was lost with what it had not
// delivered; it runs on the dispatch loop.
func (p *publisher) reportLost(s *Subscription) {
	st := s.syncSeq()
	from := seqNext(st.last)
	s.stats.lost.Add(1)
	p.log.Warn("client: subscription lost; recreating it", "subscription", s.id.Load(), "lostFrom", from)
	if s.cfg.OnGap != nil {
		s.cfg.OnGap(s, from, 0)
	}
}

// supervise watches a connected session until it fails or the session is
// closed; it returns why.
func (m *ManagedSession) supervise(c *Client, bo *Backoff) error {
	tick := min(m.cfg.KeepAliveGrace/2, 250*time.Millisecond)
	t := time.NewTimer(tick)
	defer t.Stop()
	var statusAt time.Time
	if m.cfg.KeepAliveInterval > 0 {
		statusAt = time.Now().Add(m.cfg.KeepAliveInterval)
	}
	var probe *statusProbe // the status read out, nil when none is
	var status chan error  // its answer's channel
	defer func() { m.dropStatus(probe) }()
	for {
		select {
		case <-m.ctx.Done():
			return nil
		case err := <-status:
			probe, status = nil, nil
			if err != nil {
				m.level = 0
				return err
			}
			statusAt = time.Now().Add(m.cfg.KeepAliveInterval)
		case <-c.Done():
			m.level = 0
			return fmt.Errorf("client: channel ended: %w", c.Err())
		case f := <-m.faults:
			if f.c != c && f.c != nil {
				continue // about an earlier session
			}
			if f.sub != nil {
				m.recoverSubscription(c, f.sub, f.err)
				continue
			}
			m.level = 0
			return f.err
		case <-m.pub.maintain:
			t.Reset(0) // look now
		case now := <-t.C:
			if silent := m.pub.silent(now); len(silent) > 0 {
				for _, s := range silent {
					if s.silent.CompareAndSwap(false, true) && s.cfg.OnStatusChange != nil {
						s.cfg.OnStatusChange(s, ua.StatusBadNoCommunication)
					}
				}
				if m.verifying {
					// Recovered, yet silent: the next recovery goes one step further.
					m.level = min(m.level+1, 2)
				} else {
					m.level = 0
				}
				return fmt.Errorf("client: %d subscription(s) silent for longer than their keep-alive window: %w", len(silent), ua.StatusBadNoCommunication)
			}
			if m.verifying && m.pub.allHeardSince(m.verifyFrom) {
				m.verifying, m.level = false, 0
				bo.Reset()
			}
			if status == nil && !statusAt.IsZero() && !now.Before(statusAt) {
				probe = m.readStatus(c)
				status = probe.out
			}
			maintain := m.pub.needsMaintenance(now)
			if maintain && m.retrying.CompareAndSwap(false, true) {
				m.retryWG.Add(1)
				go func() {
					defer m.retryWG.Done()
					defer m.retrying.Store(false)
					m.createMissingQuick(c)
					m.pub.retryItems(c, now)
				}()
			}
			t.Reset(m.nextCheck(now, tick, maintain, status == nil, statusAt))
		}
	}
}

// superviseIdle bounds supervise's sleep while nothing is due. What it
// cannot see coming tells it (publisher.wakeMaintenance: a subscription
// added or lost, items waiting to be created or refused, a revised
// keep-alive window), so this is only a backstop.
const superviseIdle = 10 * time.Second

// nextCheck returns how long supervise may sleep after its check at now:
// tick while something needs it soon (maintenance, a recovery being
// verified, a handler running), else until the first subscription would
// fall silent, failed items are due or the next status read is, at most
// superviseIdle. A session at rest is then looked at when the status read
// is due (every KeepAliveInterval), not four times a second, and a silence
// is still seen when it begins.
func (m *ManagedSession) nextCheck(now time.Time, tick time.Duration, maintain, statusIdle bool, statusAt time.Time) time.Duration {
	if maintain || m.verifying {
		return tick
	}
	next, ok := m.pub.restUntil(now)
	if !ok {
		return tick
	}
	if statusIdle && !statusAt.IsZero() {
		next = minTime(next, statusAt)
	}
	return max(next.Sub(now), tick)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// createMissingQuick creates subscriptions that are missing on the server
// without waiting for one busy with another operation.
func (m *ManagedSession) createMissingQuick(c *Client) {
	for _, s := range m.pub.list() {
		if s.id.Load() != 0 || !s.opMu.TryLock() {
			continue
		}
		s.opMu.Unlock()
		ctx, cancel := context.WithTimeout(m.ctx, m.cfg.ConnectTimeout)
		if err := m.pub.ensure(ctx, c, s); err != nil {
			m.log.Debug("client: creating a subscription failed", "err", err)
		}
		cancel()
	}
}

// recoverSubscription recreates one subscription the server ended (its
// lifetime ran out) while the session is fine.
func (m *ManagedSession) recoverSubscription(c *Client, s *Subscription, why error) {
	if s.id.Load() == 0 {
		return
	}
	m.pub.post(func() { m.pub.reportLost(s) })
	m.pub.unregister(s)
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.ConnectTimeout)
	defer cancel()
	if err := m.pub.ensure(ctx, c, s); err != nil {
		m.log.Warn("client: recreating a subscription failed", "err", err, "cause", why)
		return
	}
	m.stats.recreations.Add(1)
	s.stats.recreated.Add(1)
}

// readStatus sends a Read of Server.ServerStatus.State (the session answers
// and the server is running) and returns the probe whose out channel its
// outcome arrives on: nil, or why the session is to be recovered. It does
// not wait: the answer comes on the channel's reader goroutine, and out has
// room for it, so nobody needs to be listening when it does.
//
// A session at rest does this every KeepAliveInterval for as long as it
// runs, so the read is one kept statusProbe, not a request, a response, a
// channel and two closures made each time: it allocates nothing. supervise
// (the run goroutine alone) sends one read at a time, takes its answer
// before the next, and forgets the probe (dropStatus) when it returns with
// a read still out, whose answer may come later.
func (m *ManagedSession) readStatus(c *Client) *statusProbe {
	p := m.probe
	if p == nil {
		p = newStatusProbe(m.pub)
		m.probe = p
	}
	timeout := min(c.cfg.RequestTimeout, max(m.cfg.KeepAliveInterval, time.Second))
	p.start = time.Now()
	if err := c.sendAsync(&p.req, &p.resp, timeout, p.done); err != nil {
		p.finish(err)
	}
	return p
}

// dropStatus forgets the probe of a read whose answer supervise will not
// take.
func (m *ManagedSession) dropStatus(p *statusProbe) {
	if p != nil && m.probe == p {
		m.probe = nil
	}
}

// statusProbe is readStatus's request, kept for the next read.
type statusProbe struct {
	pub   *publisher
	req   ua.ReadRequest
	resp  ua.ReadResponse
	start time.Time
	out   chan error
	done  func(ua.Structure, error) // p.answer, bound once
}

func newStatusProbe(pub *publisher) *statusProbe {
	p := &statusProbe{pub: pub, out: make(chan error, 1)}
	p.req = ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnNeither, NodesToRead: []ua.ReadValueID{
		{NodeID: ua.NewNumericNodeID(0, ua.ID_Server_ServerStatus_State), AttributeID: AttributeValue},
	}}
	p.done = p.answer
	return p
}

// answer is the channel's callback (on its reader goroutine).
func (p *statusProbe) answer(r ua.Structure, err error) {
	if err = serviceOutcome(&p.req, r, err); err == nil {
		p.pub.observeRTT(time.Since(p.start))
	}
	p.finish(err)
}

// finish hands the outcome over to out.
func (p *statusProbe) finish(err error) {
	var resp *ua.ReadResponse
	if err == nil {
		resp = &p.resp
	}
	// The reader goroutine must never block here.
	select {
	case p.out <- checkStatus(resp, err):
	default:
	}
}

// checkStatus judges the answer to readStatus.
func checkStatus(resp *ua.ReadResponse, err error) error {
	if err != nil {
		return fmt.Errorf("client: keep-alive read of ServerStatus.State: %w", err)
	}
	if len(resp.Results) != 1 {
		return fmt.Errorf("%w: Read of 1 node returned %d results", ErrBadResponse, len(resp.Results))
	}
	dv := &resp.Results[0]
	if dv.Status.IsBad() {
		return fmt.Errorf("client: keep-alive read of ServerStatus.State: %w", dv.Status)
	}
	if st := dv.Value.Int32(); dv.Value.Type() == ua.TypeInt32 && st != 0 {
		return fmt.Errorf("client: server state is %d, not Running: %w", st, ua.StatusBadServerHalted)
	}
	return nil
}

// allHeardSince reports whether every subscription on the server was heard
// from after t.
func (p *publisher) allHeardSince(t time.Time) bool {
	for _, s := range p.list() {
		// A held subscription gets no requests: it cannot be heard from, and
		// that is not the session's fault.
		if s.id.Load() != 0 && !s.held() && s.lastActivity.Load() < t.UnixNano() {
			return false
		}
	}
	return true
}
