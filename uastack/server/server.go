package server

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
	"github.com/uagate/gateway/uastack/uasc"
)

// Server is the simulation OPC UA server. Make it with New, start it with
// Start, stop it with Close.
type Server struct {
	cfg   Config
	log   *slog.Logger
	start time.Time // wall clock and monotonic origin

	as        *addressSpace
	cert      []byte // as configured: leaf, possibly followed by issuers
	leaf      []byte
	key       *rsa.PrivateKey
	uascCfg   uasc.ServerConfig
	endpoints []ua.EndpointDescription // EndpointURL filled in by Start

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// sweepKick wakes the publishing sweep early (sweepSoon).
	sweepKick chan struct{}

	mu      sync.Mutex // guards ln, url, started, closed
	ln      *uacp.Listener
	url     string
	started bool
	closed  bool

	state atomic.Int32 // ua.ServerState

	// Request processing: a bounded queue and a pool of workers.
	queue   chan job
	workers atomic.Int32
	idle    atomic.Int32

	chMu     sync.Mutex
	channels map[*channel]struct{}

	sessMu       sync.RWMutex
	sessions     map[ua.NodeID]*session // by authentication token
	sessionCount atomic.Int32
	lastSession  atomic.Uint32

	subsMu     sync.Mutex
	subs       map[uint32]*subscription
	orphans    map[*subscription]struct{}
	lastSub    atomic.Uint32
	lastItem   atomic.Uint32
	transferMu sync.Mutex

	sampler *sampler
	alarms  *alarmSource

	stats counters
}

// counters are the server's statistics.
type counters struct {
	requests, tooBusy, faults                    atomic.Uint64
	publishResponses, notifications, keepAlives  atomic.Uint64
	republishes, sessionsCreated, sessionsClosed atomic.Uint64
	sessionsTimedOut, subsExpired, events        atomic.Uint64
	items                                        atomic.Int64
}

// Stats is a snapshot of the server's state and counters.
type Stats struct {
	Channels, Sessions, Subscriptions int
	MonitoredItems                    int64
	ParkedPublishRequests             int
	Workers                           int
	QueuedRequests                    int

	Requests         uint64 // service requests received
	TooBusy          uint64 // requests answered Bad_ServerTooBusy
	Faults           uint64 // requests answered with a ServiceFault
	PublishResponses uint64 // PublishResponses sent (keep-alives included)
	KeepAlives       uint64
	Notifications    uint64 // data change notifications and events sent
	Republishes      uint64
	SessionsCreated  uint64
	SessionsClosed   uint64 // closed by the client
	SessionsTimedOut uint64
	SubsExpired      uint64 // subscriptions whose lifetime expired
	Events           uint64 // events raised
}

// job is a request waiting for a worker.
type job struct {
	ch *channel
	r  *uasc.Request
}

// respChannel is what the server needs of a secure channel;
// *uasc.ServerChannel implements it (the fuzz tests use a recorder).
type respChannel interface {
	Respond(req *uasc.Request, resp ua.Structure) error
	RespondFault(req *uasc.Request, status ua.StatusCode) error
	ChannelID() uint32
	SecurityPolicy() *uasc.Policy
	SecurityMode() ua.MessageSecurityMode
	ClientCertificate() []byte
}

// channel is an open secure channel and the sessions bound to it.
type channel struct {
	respChannel
	sendChunk int // SendBufferSize: the largest chunk we send
	maxSend   int // MaxSendMessageSize, 0: no limit
	closed    atomic.Bool
	done      chan struct{} // closed when the channel ended

	senderOnce sync.Once
	out        chan sendItem // Publish responses for the sender goroutine

	mu       sync.Mutex
	sessions map[*session]struct{}
}

// close closes the secure channel (a slow client, a shutdown).
func (ch *channel) close() {
	if c, ok := ch.respChannel.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}

// New builds a server from cfg: its address space, certificate and endpoints.
// It does not listen yet (Start).
func New(cfg *Config) (*Server, error) {
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:       c,
		log:       c.Logger,
		start:     time.Now(),
		channels:  map[*channel]struct{}{},
		sweepKick: make(chan struct{}, 1),
		sessions:  map[ua.NodeID]*session{},
		subs:      map[uint32]*subscription{},
		orphans:   map[*subscription]struct{}{},
		queue:     make(chan job, c.MaxQueuedRequests),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.state.Store(int32(ua.ServerStateRunning))
	if err := s.setupCertificate(); err != nil {
		return nil, err
	}
	s.uascCfg = uasc.ServerConfig{
		Policies:           c.Policies,
		Certificate:        s.cert,
		Key:                s.key,
		ValidateClientCert: c.ValidateClientCert,
		MaxTokenLifetime:   c.MaxTokenLifetime,
		Transport:          c.Transport,
		Logger:             c.Logger,
	}
	if err := s.uascCfg.Validate(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.sampler = newSampler(s)
	s.as = newAddressSpace()
	s.as.namespaces = append([]string{"http://opcfoundation.org/UA/", c.NamespaceURI}, c.ExtraNamespaces...)
	b := &builder{as: s.as, ns: 1}
	b.buildStandard()
	s.buildServerObject(b)
	s.buildSim(b)
	return s, nil
}

// setupCertificate takes the configured certificate, or makes one in memory
// when the configuration needs one.
func (s *Server) setupCertificate() error {
	c := &s.cfg
	if c.Certificate != nil {
		leaf, err := pki.LeafDER(c.Certificate)
		if err != nil {
			return fmt.Errorf("server: Config.Certificate: %w", err)
		}
		x, err := x509.ParseCertificate(leaf)
		if err != nil {
			return fmt.Errorf("server: Config.Certificate: %w", err)
		}
		if pub, ok := x.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&c.Key.PublicKey) {
			return errors.New("server: Config.Key does not belong to Config.Certificate")
		}
		s.cert, s.leaf, s.key = c.Certificate, leaf, c.Key
		return nil
	}
	if !c.needsCertificate() {
		return nil
	}
	host, _ := os.Hostname()
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if host != "" {
		hosts = append(hosts, host)
	}
	der, key, err := pki.CreateCertificate(pki.CertRequest{
		ApplicationURI: c.ApplicationURI, CommonName: c.ApplicationName, Organization: "uagate", Hosts: hosts,
	}, nil, nil)
	if err != nil {
		return fmt.Errorf("server: creating a certificate: %w", err)
	}
	s.cert, s.leaf, s.key = der, der, key
	return nil
}

// Start listens on Config.Address and starts serving. It returns once the
// listener is bound (Addr, URL are valid then).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.started {
		return errors.New("server: already started")
	}
	ln, err := uacp.Listen(s.cfg.Address, s.cfg.Transport)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.ln = ln
	s.url = s.cfg.EndpointURL
	if s.url == "" {
		s.url = advertisedURL(ln.Addr())
	}
	s.endpoints = s.buildEndpoints(s.url)
	s.started = true
	for i := 0; i < s.cfg.MinWorkers; i++ {
		s.workers.Add(1)
		s.wg.Add(1)
		go s.worker(true)
	}
	s.wg.Add(3)
	go s.acceptLoop()
	go s.publishLoop()
	go s.alarms.run(s.ctx, &s.wg)
	s.log.Info("server: listening", "url", s.url, "endpoints", len(s.endpoints))
	return nil
}

// Addr returns the address the server listens on (nil before Start).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// URL returns the endpoint URL ("" before Start).
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Endpoints returns the server's endpoints (nil before Start). The caller must
// not modify them.
func (s *Server) Endpoints() []ua.EndpointDescription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endpoints
}

// Certificate returns the server's certificate (DER, possibly a chain); nil
// when it has none.
func (s *Server) Certificate() []byte { return s.cert }

// Close stops listening, closes every channel and waits for the server's
// goroutines to end. Sessions and subscriptions are dropped.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ln := s.ln
	s.mu.Unlock()
	s.state.Store(int32(ua.ServerStateShutdown))
	s.cancel()
	if ln != nil {
		_ = ln.Close()
	}
	s.chMu.Lock()
	chs := make([]*channel, 0, len(s.channels))
	for ch := range s.channels {
		chs = append(chs, ch)
	}
	s.chMu.Unlock()
	for _, ch := range chs {
		ch.close()
	}
	s.wg.Wait()
	// Release what subscriptions still hold.
	s.subsMu.Lock()
	subs := make([]*subscription, 0, len(s.subs))
	for _, sub := range s.subs {
		subs = append(subs, sub)
	}
	s.subsMu.Unlock()
	for _, sub := range subs {
		s.deleteSubscription(sub)
	}
	return nil
}

// Stats returns a snapshot of the server's state and counters.
func (s *Server) Stats() Stats {
	st := Stats{
		Requests:         s.stats.requests.Load(),
		TooBusy:          s.stats.tooBusy.Load(),
		Faults:           s.stats.faults.Load(),
		PublishResponses: s.stats.publishResponses.Load(),
		KeepAlives:       s.stats.keepAlives.Load(),
		Notifications:    s.stats.notifications.Load(),
		Republishes:      s.stats.republishes.Load(),
		SessionsCreated:  s.stats.sessionsCreated.Load(),
		SessionsClosed:   s.stats.sessionsClosed.Load(),
		SessionsTimedOut: s.stats.sessionsTimedOut.Load(),
		SubsExpired:      s.stats.subsExpired.Load(),
		Events:           s.stats.events.Load(),
		MonitoredItems:   s.stats.items.Load(),
		Workers:          int(s.workers.Load()),
		QueuedRequests:   len(s.queue),
	}
	s.chMu.Lock()
	st.Channels = len(s.channels)
	s.chMu.Unlock()
	s.sessMu.RLock()
	st.Sessions = len(s.sessions)
	sessions := make([]*session, 0, len(s.sessions))
	for _, se := range s.sessions {
		sessions = append(sessions, se)
	}
	s.sessMu.RUnlock()
	for _, se := range sessions {
		se.mu.Lock()
		st.ParkedPublishRequests += len(se.publishQ)
		se.mu.Unlock()
	}
	s.subsMu.Lock()
	st.Subscriptions = len(s.subs)
	s.subsMu.Unlock()
	return st
}

// SetValue sets the value of a writable variable from the application, as a
// Write would (the value's type must fit the variable).
func (s *Server) SetValue(id ua.NodeID, dv ua.DataValue) error {
	n := s.as.get(id)
	if n == nil {
		return ua.StatusBadNodeIdUnknown
	}
	if st := s.writeValue(n, dv); st != ua.StatusGood {
		return st
	}
	return nil
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept(s.ctx)
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, uacp.ErrClosed) {
				return
			}
			s.log.Warn("server: accept", "err", err)
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		s.chMu.Lock()
		full := len(s.channels) >= s.cfg.MaxChannelCount
		s.chMu.Unlock()
		if full {
			_ = conn.SendError(ua.StatusBadTcpServerTooBusy, "too many secure channels")
			_ = conn.Close()
			continue
		}
		s.wg.Add(1)
		go s.serveConn(conn)
	}
}

// serveConn opens the secure channel on conn and reads its requests until it
// ends.
func (s *Server) serveConn(conn *uacp.Conn) {
	defer s.wg.Done()
	sc, err := uasc.Accept(conn, &s.uascCfg)
	if err != nil {
		s.log.Debug("server: secure channel refused", "remote", conn.RemoteAddr(), "err", err)
		return
	}
	lim := conn.Limits()
	ch := &channel{respChannel: sc, sendChunk: int(lim.SendBufferSize), maxSend: int(lim.MaxSendMessageSize), done: make(chan struct{})}
	s.chMu.Lock()
	s.channels[ch] = struct{}{}
	s.chMu.Unlock()
	err = sc.Serve(s.ctx, func(r *uasc.Request) { s.enqueue(ch, r) })
	if err != nil && s.ctx.Err() == nil {
		s.log.Debug("server: channel ended", "channel", sc.ChannelID(), "err", err)
	}
	ch.closed.Store(true)
	close(ch.done)
	s.chMu.Lock()
	delete(s.channels, ch)
	s.chMu.Unlock()
	s.detachChannel(ch)
}

// enqueue hands a request to the workers, or answers Bad_TcpServerTooBusy
// when the queue is full. It runs on the channel's reader goroutine and never
// blocks for long.
//
// A Publish request is handled right here instead: it only processes its
// acknowledgements and parks (or takes what is ready, sent by the channel's
// sender), so it needs no worker, and the bursts of thousands of sessions
// renewing their Publish requests at once never fill the queue.
func (s *Server) enqueue(ch *channel, r *uasc.Request) {
	if _, ok := r.Message.(*ua.PublishRequest); ok {
		s.handle(ch, r)
		return
	}
	select {
	case s.queue <- job{ch, r}:
		if s.idle.Load() == 0 {
			s.maybeSpawnWorker()
		}
	default:
		s.stats.tooBusy.Add(1)
		_ = ch.RespondFault(r, ua.StatusBadTcpServerTooBusy)
	}
}

func (s *Server) maybeSpawnWorker() {
	for {
		n := s.workers.Load()
		if int(n) >= s.cfg.MaxWorkers {
			return
		}
		if s.workers.CompareAndSwap(n, n+1) {
			s.wg.Add(1)
			go s.worker(false)
			return
		}
	}
}

// workerIdleTimeout ends a worker above MinWorkers that found nothing to do.
const workerIdleTimeout = 5 * time.Second

func (s *Server) worker(permanent bool) {
	defer s.wg.Done()
	defer s.workers.Add(-1)
	var idle <-chan time.Time
	var t *time.Timer
	if !permanent {
		t = time.NewTimer(workerIdleTimeout)
		defer t.Stop()
		idle = t.C
	}
	for {
		s.idle.Add(1)
		select {
		case j := <-s.queue:
			s.idle.Add(-1)
			s.handle(j.ch, j.r)
			if t != nil {
				t.Reset(workerIdleTimeout)
			}
		case <-idle:
			s.idle.Add(-1)
			return
		case <-s.ctx.Done():
			s.idle.Add(-1)
			return
		}
	}
}

// handle processes one request. A panic is a bug; it is logged and answered
// with Bad_InternalError rather than taking the server down.
func (s *Server) handle(ch *channel, r *uasc.Request) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("server: panic in a service", "request", fmt.Sprintf("%T", r.Message), "panic", p, "stack", string(debug.Stack()))
			s.fault(ch, r, ua.StatusBadInternalError)
		}
	}()
	s.stats.requests.Add(1)
	switch m := r.Message.(type) {
	case *ua.GetEndpointsRequest:
		s.getEndpoints(ch, r, m)
		return
	case *ua.FindServersRequest:
		s.findServers(ch, r, m)
		return
	case *ua.CreateSessionRequest:
		s.createSession(ch, r, m)
		return
	case *ua.ActivateSessionRequest:
		s.activateSession(ch, r, m)
		return
	}
	hdr := requestHeader(r.Message)
	if hdr == nil {
		s.fault(ch, r, ua.StatusBadServiceUnsupported)
		return
	}
	if m, ok := r.Message.(*ua.CloseSessionRequest); ok {
		// A session may be closed before it is activated: a client that refuses
		// the server's CreateSession answer (a bad signature, an altered endpoint
		// list) must not leave it behind until it times out.
		sess, st := s.sessionToClose(ch, hdr.AuthenticationToken)
		if st != ua.StatusGood {
			s.fault(ch, r, st)
			return
		}
		s.closeSessionService(sess, ch, r, m)
		return
	}
	sess, st := s.sessionFor(ch, hdr.AuthenticationToken)
	if st != ua.StatusGood {
		s.fault(ch, r, st)
		return
	}
	switch m := r.Message.(type) {
	case *ua.CancelRequest:
		s.respond(ch, r, &ua.CancelResponse{})
	case *ua.ReadRequest:
		s.read(sess, ch, r, m)
	case *ua.WriteRequest:
		s.write(sess, ch, r, m)
	case *ua.BrowseRequest:
		s.browse(sess, ch, r, m)
	case *ua.BrowseNextRequest:
		s.browseNext(sess, ch, r, m)
	case *ua.TranslateBrowsePathsToNodeIDsRequest:
		s.translate(sess, ch, r, m)
	case *ua.RegisterNodesRequest:
		s.registerNodes(sess, ch, r, m)
	case *ua.UnregisterNodesRequest:
		s.unregisterNodes(sess, ch, r, m)
	case *ua.CallRequest:
		s.call(sess, ch, r, m)
	case *ua.HistoryReadRequest:
		s.historyRead(sess, ch, r, m)
	case *ua.CreateSubscriptionRequest:
		s.createSubscription(sess, ch, r, m)
	case *ua.ModifySubscriptionRequest:
		s.modifySubscription(sess, ch, r, m)
	case *ua.SetPublishingModeRequest:
		s.setPublishingMode(sess, ch, r, m)
	case *ua.DeleteSubscriptionsRequest:
		s.deleteSubscriptions(sess, ch, r, m)
	case *ua.TransferSubscriptionsRequest:
		s.transferSubscriptions(sess, ch, r, m)
	case *ua.PublishRequest:
		s.publish(sess, ch, r, m)
	case *ua.RepublishRequest:
		s.republish(sess, ch, r, m)
	case *ua.CreateMonitoredItemsRequest:
		s.createMonitoredItems(sess, ch, r, m)
	case *ua.ModifyMonitoredItemsRequest:
		s.modifyMonitoredItems(sess, ch, r, m)
	case *ua.SetMonitoringModeRequest:
		s.setMonitoringMode(sess, ch, r, m)
	case *ua.DeleteMonitoredItemsRequest:
		s.deleteMonitoredItems(sess, ch, r, m)
	default:
		s.fault(ch, r, ua.StatusBadServiceUnsupported)
	}
}

// respond sends a response; a channel that closed meanwhile is not an error of
// the server's.
func (s *Server) respond(ch *channel, r *uasc.Request, resp ua.Structure) {
	if err := ch.Respond(r, resp); err != nil && !ch.closed.Load() {
		s.log.Debug("server: response not sent", "response", fmt.Sprintf("%T", resp), "err", err)
	}
}

// fault answers r with a ServiceFault.
func (s *Server) fault(ch *channel, r *uasc.Request, st ua.StatusCode) {
	s.stats.faults.Add(1)
	_ = ch.RespondFault(r, st)
}

// now returns the monotonic time since the server started, in ns.
func (s *Server) now() int64 { return int64(time.Since(s.start)) }
