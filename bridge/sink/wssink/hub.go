package wssink

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
)

// Close codes the hub sends.
const (
	// CloseSlowConsumer closes a client whose send queue is full (1008,
	// policy violation), with the reason ReasonSlowConsumer.
	CloseSlowConsumer = websocket.ClosePolicyViolation
	// ReasonSlowConsumer is the close reason of a slow consumer.
	ReasonSlowConsumer = "slow consumer: queue full"
)

// Defaults of Options.
const (
	DefaultName         = "websocket"
	DefaultClientQueue  = 256
	DefaultPingInterval = 30 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultMaxClients   = 1024
	// DefaultSubscribeTimeout bounds how long a client may stay connected
	// without a subscription.
	DefaultSubscribeTimeout = 10 * time.Second
	DefaultMaxMetaData      = 4096
	DefaultReadLimit        = 16 << 10
	DefaultWriteBuffer      = 16 << 10
)

// closeGrace bounds writing a close frame and waiting for the peer's reply
// before the socket is closed.
const closeGrace = 2 * time.Second

// Options configure a Hub. Zero values take the defaults above.
type Options struct {
	// Name identifies the hub in logs and metrics; default "websocket".
	Name string
	// AllowedOrigins lists the browser origins (scheme://host[:port], or
	// host[:port]) allowed besides the hub's own; "*" allows every origin.
	// Empty: same origin only. Requests without an Origin header (non-browser
	// clients) are always allowed; the token protects those.
	AllowedOrigins []string
	// Token, when set, is the bearer token every client must present
	// (Authorization: Bearer <token>, or ?token=<token> for browsers, which
	// cannot set headers on a WebSocket).
	Token string
	// ClientQueue bounds each client's send queue (messages). A client whose
	// queue is full is closed with CloseSlowConsumer. Default 256.
	ClientQueue int
	// PingInterval between pings; a client that answers neither pings nor
	// anything else for two intervals is dropped. Default 30s.
	PingInterval time.Duration
	// WriteTimeout bounds one write to a client. Default 10s.
	WriteTimeout time.Duration
	// MaxClients bounds the connected clients; more are refused with 503.
	// Default 1024.
	MaxClients int
	// SubscribeTimeout: a client that has neither subscribed (in its URL or
	// with a first message) nor sent a command this long after connecting
	// is closed, so that idle connections cannot hold the MaxClients slots.
	// Default DefaultSubscribeTimeout.
	SubscribeTimeout time.Duration
	// MaxMetaData bounds the cached metadata messages (one per dataset
	// writer). Default 4096.
	MaxMetaData int
	// ReadLimit bounds a message from a client (only subscriptions are
	// expected), bytes. Default 16 KiB.
	ReadLimit int64
	// WriteBufferSize of each connection: a message up to this size is
	// written with one copy into it and one system call, a larger one
	// straight from its payload after the first part. Default 16 KiB.
	WriteBufferSize int
	// Commands, when set, takes the text messages {"command": {…}} of
	// every client: caller names the client (CallerOf), request is the
	// inner object, and reply, called once, sends {"commandResponse": …}
	// on the same connection (through the client's queue: a client that
	// does not read its responses is closed as a slow consumer).
	Commands func(caller string, request []byte, reply func(response []byte))
	// CallerOf names the client of a handshake for Commands; default
	// "anonymous".
	CallerOf func(r *http.Request) string
	// Logger; default slog.Default().
	Logger *slog.Logger
}

func (o *Options) ensureDefaults() {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.ClientQueue <= 0 {
		o.ClientQueue = DefaultClientQueue
	}
	if o.PingInterval <= 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.MaxClients <= 0 {
		o.MaxClients = DefaultMaxClients
	}
	if o.SubscribeTimeout <= 0 {
		o.SubscribeTimeout = DefaultSubscribeTimeout
	}
	if o.MaxMetaData <= 0 {
		o.MaxMetaData = DefaultMaxMetaData
	}
	if o.ReadLimit <= 0 {
		o.ReadLimit = DefaultReadLimit
	}
	if o.WriteBufferSize <= 0 {
		o.WriteBufferSize = DefaultWriteBuffer
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Stats are the hub's counters.
type Stats struct {
	Clients    int    `json:"clients"`    // connected now
	Accepted   uint64 `json:"accepted"`   // connections upgraded
	Rejected   uint64 `json:"rejected"`   // handshakes refused: token, origin, selection, limit, closed
	Sent       uint64 `json:"sent"`       // messages written to clients (one per client)
	Bytes      uint64 `json:"bytes"`      // payload bytes written to clients
	SlowClosed uint64 `json:"slowClosed"` // clients closed because their queue was full
	IdleClosed uint64 `json:"idleClosed"` // clients closed because they did not subscribe in time
	MetaData   int    `json:"metaData"`   // metadata messages cached for replay
	MetaFull   uint64 `json:"metaFull"`   // metadata messages not cached because MaxMetaData was reached
}

// Hub is the WebSocket stream: an http.Handler that upgrades clients and a
// sink.Queue that fans the pipeline's messages out to them. See the package
// comment.
type Hub struct {
	opts      Options
	log       *slog.Logger
	upgrader  websocket.Upgrader
	tokenHash [sha256.Size]byte

	mu      sync.Mutex                // guards closed and changes of clients
	clients atomic.Pointer[[]*client] // copy on write: Enqueue reads it without a lock
	closed  atomic.Bool               // written under mu
	wg      sync.WaitGroup            // one per connected client, until its handler returns

	// metaMu orders cache updates with subscriptions, so that a subscriber
	// gets every metadata message exactly once: from the replay or live.
	// Lock order: metaMu, then a client's mu.
	metaMu sync.Mutex
	meta   []*sink.Message // latest metadata per writer, one reference each
	status *sink.Message   // latest status message, one reference

	accepted, rejected, sent, bytes, slow, metaFull atomic.Uint64
	idle                                            atomic.Uint64
}

var _ sink.Queue = (*Hub)(nil)

// New returns a hub; mount it on the HTTP listener (at /ws by default).
func New(opts Options) *Hub {
	opts.ensureDefaults()
	opts.AllowedOrigins = slices.Clone(opts.AllowedOrigins)
	h := &Hub{opts: opts, log: opts.Logger.With("sink", opts.Name)}
	h.upgrader = websocket.Upgrader{
		ReadBufferSize:  1024,
		WriteBufferSize: opts.WriteBufferSize,
		CheckOrigin:     originChecker(opts.AllowedOrigins),
		Error:           h.handshakeError,
	}
	if opts.Token != "" {
		h.tokenHash = sha256.Sum256([]byte(opts.Token))
	}
	empty := []*client{}
	h.clients.Store(&empty)
	return h
}

// originChecker returns the upgrader's CheckOrigin: nil (gorilla's same-origin
// check) for an empty list, allow-all for "*", else same origin or listed.
func originChecker(allowed []string) func(*http.Request) bool {
	if len(allowed) == 0 {
		return nil
	}
	norm := make([]string, 0, len(allowed))
	for _, a := range allowed {
		if a == "*" {
			return func(*http.Request) bool { return true }
		}
		norm = append(norm, strings.ToLower(strings.TrimRight(a, "/")))
	}
	return func(r *http.Request) bool {
		origin := r.Header.Get("Origin")
		if origin == "" {
			return true
		}
		u, err := url.Parse(origin)
		if err != nil {
			return false
		}
		if strings.EqualFold(u.Host, r.Host) {
			return true
		}
		o, host := strings.ToLower(origin), strings.ToLower(u.Host)
		for _, a := range norm {
			if a == o || a == host {
				return true
			}
		}
		return false
	}
}

// Name implements sink.Queue.
func (h *Hub) Name() string { return h.opts.Name }

// Guarantee implements sink.Queue: the hub is at most once.
func (h *Hub) Guarantee() config.Guarantee { return config.AtMostOnce }

// Enqueue implements sink.Queue: it offers m to every client whose selection
// matches (each takes a reference, or is closed as a slow consumer when its
// queue is full), caches metadata and status messages for replay, and gives
// up the hub's reference with Done(true). It never waits for a client.
func (h *Hub) Enqueue(m *sink.Message) {
	switch m.Kind {
	case sink.KindMetaData, sink.KindStatus:
		h.enqueueRetained(m)
	default:
		for _, c := range *h.clients.Load() {
			if sel := c.sel.Load(); sel != nil && sel.match(m) {
				c.offer(m)
			}
		}
	}
	m.Done(true)
}

// enqueueRetained caches a metadata or status message (replacing the
// writer's previous one) and fans it out, under metaMu so that a concurrent
// subscription sees it either in the cache or live, not both and not neither.
func (h *Hub) enqueueRetained(m *sink.Message) {
	h.metaMu.Lock()
	defer h.metaMu.Unlock()
	if !h.closed.Load() {
		h.cache(m)
	}
	for _, c := range *h.clients.Load() {
		if sel := c.sel.Load(); sel != nil && sel.match(m) {
			c.offer(m)
		}
	}
}

// cache keeps m as the latest of its kind and writer. Called with metaMu.
func (h *Hub) cache(m *sink.Message) {
	if m.Kind == sink.KindStatus {
		m.Retain(1)
		if h.status != nil {
			h.status.Done(true)
		}
		h.status = m
		return
	}
	for i, old := range h.meta {
		if old.Addr == m.Addr {
			m.Retain(1)
			h.meta[i] = m
			old.Done(true)
			return
		}
	}
	if len(h.meta) >= h.opts.MaxMetaData {
		h.metaFull.Add(1)
		return
	}
	m.Retain(1)
	h.meta = append(h.meta, m)
}

// subscribe gives c the selection sel and queues the cached metadata and
// status it selects for replay ahead of its live messages.
func (h *Hub) subscribe(c *client, sel *selection) {
	h.metaMu.Lock()
	defer h.metaMu.Unlock()
	var replay []*sink.Message
	if h.status != nil && sel.match(h.status) {
		h.status.Retain(1)
		replay = append(replay, h.status)
	}
	for _, m := range h.meta {
		if sel.match(m) {
			m.Retain(1)
			replay = append(replay, m)
		}
	}
	c.sel.Store(sel)
	c.setReplay(replay)
}

// ServeHTTP authenticates and upgrades a client, then serves it until it
// goes away or the hub closes.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.closed.Load() {
		h.refuse(w, r, http.StatusServiceUnavailable, "websocket hub is shutting down")
		return
	}
	if !h.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="uagate"`)
		h.refuse(w, r, http.StatusUnauthorized, "a bearer token is required (Authorization: Bearer, or ?token=)")
		return
	}
	sel, err := selectionFromQuery(r.URL.Query())
	if err != nil {
		h.refuse(w, r, http.StatusBadRequest, "websocket selection: "+err.Error())
		return
	}
	if len(*h.clients.Load()) >= h.opts.MaxClients {
		h.refuse(w, r, http.StatusServiceUnavailable, fmt.Sprintf("too many websocket clients (%d)", h.opts.MaxClients))
		return
	}
	conn, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered (handshakeError) and counted it
	}
	c := newClient(h, conn)
	c.caller = "anonymous"
	if h.opts.CallerOf != nil {
		c.caller = h.opts.CallerOf(r)
	}
	if code, reason := h.register(c); code != 0 {
		h.rejected.Add(1)
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(closeGrace))
		_ = conn.Close()
		return
	}
	defer h.wg.Done()
	h.accepted.Add(1)
	h.log.Debug("websocket client connected", "remote", c.remote)
	if sel != nil {
		h.subscribe(c, sel)
	} else {
		idle := time.AfterFunc(h.opts.SubscribeTimeout, func() {
			if c.sel.Load() == nil && !c.commanded.Load() && c.stop(websocket.ClosePolicyViolation, "no subscription within "+h.opts.SubscribeTimeout.String()) {
				h.idle.Add(1)
			}
		})
		defer idle.Stop()
	}
	go c.writeLoop()
	c.readLoop()
	close(c.readerDone)
	c.stop(0, "")
	<-c.writerDone
	h.unregister(c)
	h.log.Debug("websocket client gone", "remote", c.remote)
}

func (h *Hub) refuse(w http.ResponseWriter, r *http.Request, status int, reason string) {
	h.rejected.Add(1)
	h.log.Debug("websocket handshake refused", "remote", r.RemoteAddr, "status", status, "reason", reason)
	http.Error(w, reason, status)
}

// handshakeError answers a handshake the upgrader refused (403 for a foreign
// origin, 400 for a malformed request).
func (h *Hub) handshakeError(w http.ResponseWriter, r *http.Request, status int, reason error) {
	msg := reason.Error()
	if status == http.StatusForbidden {
		msg = fmt.Sprintf("websocket origin %q not allowed (sinks.websocket.allowedOrigins)", r.Header.Get("Origin"))
	}
	h.refuse(w, r, status, msg)
}

// authorized checks the bearer token. The hashes make the comparison take
// the same time whatever the length of the presented token.
func (h *Hub) authorized(r *http.Request) bool {
	if h.opts.Token == "" {
		return true
	}
	tok, ok := "", false
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		tok, ok = strings.TrimSpace(a[7:]), true
	} else if q := r.URL.Query(); q.Has("token") {
		tok, ok = q.Get("token"), true
	}
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], h.tokenHash[:]) == 1 && ok
}

// register adds c to the clients, unless the hub is closed or full (the
// check before the upgrade lets concurrent handshakes through); else it
// returns the close code and reason to send.
func (h *Hub) register(c *client) (int, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed.Load() {
		return websocket.CloseGoingAway, "server shutting down"
	}
	old := *h.clients.Load()
	if len(old) >= h.opts.MaxClients {
		return websocket.CloseTryAgainLater, "too many websocket clients"
	}
	next := make([]*client, len(old), len(old)+1)
	copy(next, old)
	next = append(next, c)
	h.clients.Store(&next)
	h.wg.Add(1)
	return 0, ""
}

func (h *Hub) unregister(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := *h.clients.Load()
	next := make([]*client, 0, len(old))
	for _, o := range old {
		if o != c {
			next = append(next, o)
		}
	}
	h.clients.Store(&next)
}

// Stats returns the hub's counters.
func (h *Hub) Stats() Stats {
	h.metaMu.Lock()
	nmeta := len(h.meta)
	h.metaMu.Unlock()
	return Stats{
		Clients:    len(*h.clients.Load()),
		Accepted:   h.accepted.Load(),
		Rejected:   h.rejected.Load(),
		IdleClosed: h.idle.Load(),
		Sent:       h.sent.Load(),
		Bytes:      h.bytes.Load(),
		SlowClosed: h.slow.Load(),
		MetaData:   nmeta,
		MetaFull:   h.metaFull.Load(),
	}
}

// Close refuses new clients, closes every client with 1001 (going away) and
// waits until they are gone; when ctx ends first it cuts their sockets and
// returns ctx's error once they are gone. It releases the cached metadata.
// Messages enqueued afterwards are settled at once.
func (h *Hub) Close(ctx context.Context) error {
	h.mu.Lock()
	already := h.closed.Swap(true)
	h.mu.Unlock()
	if already {
		return nil
	}
	for _, c := range *h.clients.Load() {
		c.stop(websocket.CloseGoingAway, "server shutting down")
	}
	done := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("websocket hub: closing clients: %w", ctx.Err())
		for _, c := range *h.clients.Load() {
			_ = c.conn.Close()
		}
		<-done
	}
	h.metaMu.Lock()
	for _, m := range h.meta {
		m.Done(true)
	}
	h.meta = nil
	if h.status != nil {
		h.status.Done(true)
		h.status = nil
	}
	h.metaMu.Unlock()
	return err
}
