package api

import (
	"context"
	"crypto/tls"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	DefaultListen         = "127.0.0.1:8080"
	DefaultRequestTimeout = 30 * time.Second
	DefaultReadTimeout    = 30 * time.Second
	DefaultMaxConnections = 2048
)

// Options configure a Server. Backend is required; the rest have defaults.
type Options struct {
	// Backend is the gateway's runtime.
	Backend Backend
	// Version is reported by /api/v1/status and the OpenAPI document.
	Version string

	// Listen is the address of the HTTP listener (host:port); default
	// DefaultListen. Without API keys only a loopback address is accepted,
	// unless AllowUnauthenticated.
	Listen string
	// TLSCertFile and TLSKeyFile switch the listener to HTTPS. The files are
	// read again when they change (certificate rotation without a restart).
	TLSCertFile string
	TLSKeyFile  string

	// Keys are the API keys (bearer tokens) and their roles.
	Keys []Key
	// KeysFile is a mounted secret with more keys, one a line: "<role>
	// <token> [name]" (role read or admin; # starts a comment). It is read
	// again when it changes.
	KeysFile string
	// AllowUnauthenticated opens an API without keys on a non-loopback
	// address (a warning is logged). Without it such a configuration is an
	// error: anyone who reaches the port could change what is published.
	AllowUnauthenticated bool
	// PublicMetrics serves /metrics without credentials even when keys are
	// configured (for a scraper inside a trusted network).
	PublicMetrics bool

	// AllowedHosts are the names (the Host header) this listener answers
	// besides IP addresses and loopback names: the names clients use to
	// reach it (a Service's DNS name, an ingress host). ".example.com"
	// allows the domain and its subdomains, "*" any name. Requests for any
	// other name are refused, which stops DNS rebinding.
	AllowedHosts []string

	// CORSOrigins are the origins allowed to call the API from a browser
	// ("*" any); empty: none (same-origin only).
	CORSOrigins []string
	// WebSocketOrigins are the origins allowed to open the mounted WebSocket
	// handlers ("*" any); empty: the request's own host only.
	WebSocketOrigins []string

	// MaxBodyBytes bounds a request body; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// ReadTimeout bounds reading a whole request, body included (a client
	// that trickles its body holds a handler no longer); default
	// DefaultReadTimeout. WebSockets are not bound by it once open.
	ReadTimeout time.Duration
	// MaxConnections bounds the open connections (WebSockets included);
	// one more is answered 503 and closed. Default DefaultMaxConnections.
	MaxConnections int
	// RequestTimeout bounds an on-demand call to an upstream server (Read,
	// Write, Browse, …); default DefaultRequestTimeout.
	RequestTimeout time.Duration

	// Mounts are further handlers on the same listener (the WebSocket hub at
	// /ws, for instance).
	Mounts []Mount

	// Ready says which endpoints and sinks /readyz waits for.
	Ready ReadyPolicy
	// ShutdownDelay is how long Shutdown keeps serving with /readyz failing
	// before it stops the listener, so that load balancers take the
	// instance out first; default 0.
	ShutdownDelay time.Duration

	// Histograms are the latency histograms /metrics exports (fed by the
	// pipeline and the sinks); nil: none.
	Histograms *Histograms

	Logger *slog.Logger // default slog.Default()
}

// Mount is a handler served beside the API.
type Mount struct {
	// Pattern is an http.ServeMux pattern ("/ws", "GET /stream/").
	Pattern string
	Handler http.Handler
	// Role needed to use it (RolePublic: none).
	Role Role
	// WebSocket applies the WebSocket origin allow-list. Browsers cannot
	// set headers on a WebSocket: a page authenticates it with its session
	// cookie (POST /api/v1/login).
	WebSocket bool
}

// Server is the HTTP side of the gateway: the REST API under /api/v1, the
// OPC Publisher configuration API under /v2, /metrics, /healthz, /readyz,
// the mounted handlers and the dashboard. Its methods are safe for
// concurrent use.
type Server struct {
	opts     Options
	b        Backend
	log      *slog.Logger
	auth     *authenticator
	sessions sessions
	cps      cpRegistry // browse continuation points (browsecp.go)
	handler  http.Handler
	routes   []*route
	started  time.Time

	mux      *http.ServeMux
	pathMux  *http.ServeMux // the API's path patterns without methods, to tell 405 from 404
	patterns []string       // every pattern registered on mux
	paths    map[string]bool

	shuttingDown atomic.Bool
	refused      [numRefusals]atomic.Uint64

	mu      sync.Mutex
	srv     *http.Server
	ln      net.Listener
	serveWG sync.WaitGroup
	certs   *certReloader
}

//go:embed web
var webFS embed.FS

// New makes a Server. It checks the options (TLS files, keys, the listen
// address against the authentication rule) but does not listen yet.
func New(opts Options) (*Server, error) {
	if opts.Backend == nil {
		return nil, errors.New("api: Options.Backend is nil")
	}
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if err := opts.Ready.validate(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, b: opts.Backend, log: opts.Logger, started: time.Now()}
	var err error
	if s.auth, err = newAuthenticator(opts.Keys, opts.KeysFile, s.log); err != nil {
		return nil, err
	}
	if err := s.checkExposure(opts.Listen); err != nil {
		return nil, err
	}
	if (opts.TLSCertFile == "") != (opts.TLSKeyFile == "") {
		return nil, errors.New("api: TLS needs both a certificate file and a key file")
	}
	if opts.TLSCertFile != "" {
		if s.certs, err = newCertReloader(opts.TLSCertFile, opts.TLSKeyFile); err != nil {
			return nil, err
		}
	}
	s.mux = http.NewServeMux()
	s.pathMux = http.NewServeMux()
	s.paths = map[string]bool{}
	s.routes = s.apiRoutes()
	for _, rt := range s.routes {
		s.handle(rt.method+" "+rt.path, s.routeHandler(rt))
		s.addPath(rt.path)
	}
	for _, m := range opts.Mounts {
		if m.Handler == nil || m.Pattern == "" {
			return nil, fmt.Errorf("api: mount %q has no handler or pattern", m.Pattern)
		}
		s.handle(m.Pattern, s.mountHandler(m))
	}
	// Anything else under the API's prefixes is a problem+json 404 or 405;
	// the rest is the dashboard.
	s.handle("/api/", http.HandlerFunc(s.noRoute))
	s.handle("/v2/", http.HandlerFunc(s.noRoute))
	web, _ := fs.Sub(webFS, "web")
	files := http.FileServerFS(web)
	s.handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeProblem(w, r, problemf(ErrMethod, "%s is not allowed on %s; allowed: GET, HEAD", r.Method, r.URL.Path))
			return
		}
		files.ServeHTTP(w, r)
	}))
	s.handler = s.middleware(s.mux)
	return s, nil
}

func (s *Server) handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
	s.patterns = append(s.patterns, pattern)
}

// addPath records a route's path (once) for telling 405 from 404.
func (s *Server) addPath(path string) {
	if s.paths[path] {
		return
	}
	s.paths[path] = true
	s.pathMux.Handle(path, http.NotFoundHandler())
}

// Handler returns the server's handler (for tests, or to serve it on a
// listener of the caller's).
func (s *Server) Handler() http.Handler { return s.handler }

// checkExposure enforces the rule that an API without keys listens on
// loopback only, unless explicitly opened. It holds at every moment: keys
// configured (inline or a keys file) never give way to anonymous access
// (authenticator), and Serve checks the address it is given.
func (s *Server) checkExposure(addr string) error {
	if !s.auth.open || isLoopback(addr) {
		return nil
	}
	if !s.opts.AllowUnauthenticated {
		return fmt.Errorf("api: listening on %s without API keys would let anyone who reaches it change what is published; configure keys, listen on a loopback address, or allow unauthenticated access explicitly", addr)
	}
	s.log.Warn("api: listening without API keys on a non-loopback address; anyone who reaches it has admin rights", "listen", addr)
	return nil
}

// isLoopback reports whether a listen address binds loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Start listens on Options.Listen and serves in the background until
// Shutdown.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	return s.Serve(ln)
}

// Serve serves on ln in the background until Shutdown; the Server owns ln.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		ln.Close()
		return errors.New("api: Server already serving")
	}
	if s.shuttingDown.Load() {
		ln.Close()
		return errors.New("api: Server shut down")
	}
	if a := ln.Addr().String(); s.auth.open && !s.opts.AllowUnauthenticated && !isLoopback(a) {
		ln.Close()
		return s.checkExposure(a)
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: min(10*time.Second, s.opts.ReadTimeout),
		ReadTimeout:       s.opts.ReadTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	ln = &limitListener{Listener: ln, s: s, max: int64(s.opts.MaxConnections), answer: s.certs == nil}
	if s.certs != nil {
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.certs.get}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	s.srv, s.ln = srv, ln
	s.serveWG.Add(1)
	go func() {
		defer s.serveWG.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("api: serving ended", "err", err)
		}
	}()
	s.log.Info("api: listening", "addr", ln.Addr().String(), "tls", s.certs != nil)
	return nil
}

// Addr returns the listener's address, nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// URL returns the base URL of the listener ("http://127.0.0.1:8080"), ""
// before Start.
func (s *Server) URL() string {
	a := s.Addr()
	if a == nil {
		return ""
	}
	scheme := "http"
	if s.certs != nil {
		scheme = "https"
	}
	return scheme + "://" + a.String()
}

// Shutdown fails readiness at once, keeps serving for ShutdownDelay (or
// until ctx ends) so that load balancers stop sending, then stops accepting
// and waits for the requests in flight until ctx ends; what is still running
// then is cut off. It returns ctx's error when it had to cut.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shuttingDown.Store(true)
	s.log.Info("api: shutting down: readiness fails from now")
	if d := s.opts.ShutdownDelay; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		srv.Close()
	}
	s.serveWG.Wait()
	return err
}

// ShuttingDown reports whether Shutdown was called.
func (s *Server) ShuttingDown() bool { return s.shuttingDown.Load() }
