package api

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Role is what a key may do.
type Role uint8

const (
	// RolePublic needs no credentials (health, the dashboard's files).
	RolePublic Role = iota
	// RoleRead may read: status, values, configuration, metrics, Read and
	// Browse of upstream servers.
	RoleRead
	// RoleAdmin may also change: writer groups and nodes, certificates,
	// Write and Call on upstream servers.
	RoleAdmin
)

func (r Role) String() string {
	switch r {
	case RolePublic:
		return "public"
	case RoleRead:
		return "read"
	case RoleAdmin:
		return "admin"
	}
	return fmt.Sprintf("Role(%d)", r)
}

// ParseRole parses "read" or "admin".
func ParseRole(s string) (Role, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "read", "readonly", "read-only", "reader":
		return RoleRead, nil
	case "admin":
		return RoleAdmin, nil
	}
	return 0, fmt.Errorf("api: role %q: want read or admin", s)
}

// Key is an API key: a bearer token and the role it grants. Name is for
// logs (the token never is).
type Key struct {
	Name  string
	Token string
	Role  Role
}

// minTokenLength refuses tokens that could be guessed.
const minTokenLength = 16

// storedKey keeps the digest of a token: comparing digests takes the same
// time whatever the length of the token presented.
type storedKey struct {
	name   string
	digest [sha256.Size]byte
	role   Role
}

// principal is who a request was authenticated as (set in the context by
// the middleware, filled in by authorize).
type principal struct {
	name string
	role Role
}

// authenticator holds the keys: those of the options and those of the
// secret file, which is read again when its modification time or size
// changes (a rotated Kubernetes secret).
//
// The file can never turn authentication off: a file that becomes empty,
// unreadable or malformed keeps the keys read last (stale), and the state is
// reported loudly — an error in the log at each new problem, the metrics
// (uagate_api_keys_file_stale, uagate_api_keys_file_errors_total) and
// readiness — until a usable file comes. Anonymous access exists only when
// neither keys nor a file are configured at all (open), which New allows on
// loopback or with AllowUnauthenticated alone.
type authenticator struct {
	log    *slog.Logger
	inline []storedKey
	file   string
	open   bool // no keys and no file configured: anonymous admin

	mu       sync.Mutex
	fromFile []storedKey
	stamp    fileStamp
	checked  time.Time
	loaded   time.Time // when fromFile was read
	stale    error     // why the file cannot be used now (nil: it is in use)
	since    time.Time // when it became stale
	failures uint64    // failed reads of the file
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// keysFileCheckInterval bounds how often the key file's stamp is checked.
const keysFileCheckInterval = time.Second

// errNoKeys: a keys file without a single key.
var errNoKeys = errors.New("it holds no key")

func newAuthenticator(keys []Key, file string, log *slog.Logger) (*authenticator, error) {
	a := &authenticator{log: log, file: file, open: len(keys) == 0 && file == ""}
	for i, k := range keys {
		sk, err := makeKey(k)
		if err != nil {
			return nil, fmt.Errorf("api: Options.Keys[%d]: %w", i, err)
		}
		a.inline = append(a.inline, sk)
	}
	if file != "" {
		keys, stamp, err := a.read()
		if err != nil {
			return nil, err
		}
		a.fromFile, a.stamp, a.checked, a.loaded = keys, stamp, time.Now(), time.Now()
	}
	return a, nil
}

func makeKey(k Key) (storedKey, error) {
	if len(k.Token) < minTokenLength {
		return storedKey{}, fmt.Errorf("token of key %q is shorter than %d characters", k.Name, minTokenLength)
	}
	if k.Role != RoleRead && k.Role != RoleAdmin {
		return storedKey{}, fmt.Errorf("key %q: role %v: want read or admin", k.Name, k.Role)
	}
	return storedKey{name: k.Name, digest: sha256.Sum256([]byte(k.Token)), role: k.Role}, nil
}

// read reads the key file; a file without a key is an error. Its errors
// never quote a line: it holds secrets.
func (a *authenticator) read() ([]storedKey, fileStamp, error) {
	fi, err := os.Stat(a.file)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("api: keys file: %w", err)
	}
	stamp := fileStamp{fi.ModTime(), fi.Size()}
	if !fi.Mode().IsRegular() {
		return nil, stamp, fmt.Errorf("api: keys file %s is not a regular file", a.file)
	}
	if fi.Size() > 1<<20 {
		return nil, stamp, fmt.Errorf("api: keys file %s is larger than 1 MiB", a.file)
	}
	data, err := os.ReadFile(a.file)
	if err != nil {
		return nil, stamp, fmt.Errorf("api: keys file: %w", err)
	}
	defer clear(data)
	var keys []storedKey
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || len(f) > 3 {
			return nil, stamp, fmt.Errorf("api: keys file %s line %d: want \"<role> <token> [name]\"", a.file, n)
		}
		role, err := ParseRole(f[0])
		if err != nil {
			return nil, stamp, fmt.Errorf("api: keys file %s line %d: %w", a.file, n, err)
		}
		k := Key{Token: f[1], Role: role, Name: fmt.Sprintf("%s:%d", a.file, n)}
		if len(f) == 3 {
			k.Name = f[2]
		}
		sk, err := makeKey(k)
		if err != nil {
			return nil, stamp, fmt.Errorf("api: keys file %s line %d: %w", a.file, n, err)
		}
		keys = append(keys, sk)
	}
	if err := sc.Err(); err != nil {
		return nil, stamp, fmt.Errorf("api: keys file %s: %w", a.file, err)
	}
	if len(keys) == 0 {
		return nil, stamp, fmt.Errorf("api: keys file %s: %w", a.file, errNoKeys)
	}
	return keys, stamp, nil
}

// check reads the file again when it changed, or while it is stale, at
// most every keysFileCheckInterval. A file that cannot be used keeps the
// keys read last.
func (a *authenticator) check() {
	if a.file == "" {
		return
	}
	a.mu.Lock()
	if time.Since(a.checked) < keysFileCheckInterval {
		a.mu.Unlock()
		return
	}
	a.checked = time.Now()
	stamp, stale := a.stamp, a.stale != nil
	a.mu.Unlock()
	fi, err := os.Stat(a.file)
	if err == nil && !stale && fi.ModTime().Equal(stamp.mod) && fi.Size() == stamp.size {
		return
	}
	keys, st, err := a.read()
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.failures++
		if a.stale == nil || a.stale.Error() != err.Error() {
			if a.stale == nil {
				a.since = time.Now()
			}
			a.log.Error("api: the keys file cannot be used; authentication goes on with the keys read before, never without",
				"err", err, "keys", len(a.inline)+len(a.fromFile), "readAt", a.loaded.Format(time.RFC3339))
		}
		a.stale, a.stamp = err, st
		return
	}
	if a.stale != nil {
		a.log.Warn("api: the keys file is usable again", "file", a.file, "keys", len(keys), "staleFor", time.Since(a.since).Round(time.Second))
	} else {
		a.log.Info("api: keys file reloaded", "file", a.file, "keys", len(keys))
	}
	a.fromFile, a.stamp, a.loaded, a.stale = keys, st, time.Now(), nil
}

// keys returns the current keys, reloading the file when it changed.
func (a *authenticator) keys() ([]storedKey, []storedKey) {
	if a.file == "" {
		return a.inline, nil
	}
	a.check()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inline, a.fromFile
}

// KeysState is the state of the API keys, for readiness and metrics.
type KeysState struct {
	// Keys in use.
	Keys int
	// File is the keys file ("" without one).
	File string
	// Stale says why the file cannot be used ("" while it is in use): the
	// keys read at Loaded go on.
	Stale  string
	Since  time.Time // stale since
	Loaded time.Time // when the keys in use were read from the file
	// Errors counts the failed reads of the file.
	Errors uint64
}

func (a *authenticator) state() KeysState {
	a.check()
	a.mu.Lock()
	defer a.mu.Unlock()
	st := KeysState{Keys: len(a.inline) + len(a.fromFile), File: a.file, Loaded: a.loaded, Errors: a.failures}
	if a.stale != nil {
		st.Stale, st.Since = a.stale.Error(), a.since
	}
	return st
}

// lookup finds the key of a token. Every key is compared, in constant time,
// so the time taken does not say which one (or how much of one) matched.
func (a *authenticator) lookup(token string) (storedKey, bool) {
	return a.lookupDigest(sha256.Sum256([]byte(token)))
}

// tokenOf returns the API key a request carries: "Authorization: Bearer
// <token>" or "X-API-Key: <token>". Never a query parameter: URLs end up
// in logs and browser histories.
func tokenOf(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
		return "\x00invalid" // a scheme we do not take is wrong credentials, not none
	}
	return r.Header.Get("X-API-Key")
}

// credentials finds the key of a request: its API key, or its session
// cookie's (session.go). ok is false with a problem when the request
// carries none or a wrong one.
func (s *Server) credentials(r *http.Request) (storedKey, error) {
	if tok := tokenOf(r); tok != "" {
		if k, ok := s.auth.lookup(tok); ok {
			return k, nil
		}
		return storedKey{}, problemf(ErrUnauthorized, "the API key is not valid")
	}
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		if d, ok := s.sessions.key(c.Value, time.Now()); ok {
			if k, ok := s.auth.lookupDigest(d); ok {
				return k, nil
			}
		}
		return storedKey{}, problemf(ErrUnauthorized, "the session has ended: sign in again")
	}
	return storedKey{}, problemf(ErrUnauthorized, "this route needs an API key: send \"Authorization: Bearer <key>\"")
}

// authorize checks a request's credentials against the role a route needs.
func (s *Server) authorize(r *http.Request, need Role) error {
	who, _ := r.Context().Value(ctxPrincipal).(*principal)
	if who == nil {
		who = &principal{}
	}
	if need == RolePublic {
		return nil
	}
	if s.auth.open {
		// No keys and no keys file: the listener is on loopback (or
		// opened on purpose, New and Serve check which).
		who.name, who.role = "anonymous", RoleAdmin
		return nil
	}
	k, err := s.credentials(r)
	if err != nil {
		s.refuse(refusedUnauthorized)
		return err
	}
	who.name, who.role = k.name, k.role
	if k.role < need {
		s.refuse(refusedForbidden)
		return problemf(ErrForbidden, "%s %s needs the %s role; the key has %s", r.Method, r.URL.Path, need, k.role)
	}
	return nil
}

// originAllowed reports whether origin is in list ("*" allows any).
func originAllowed(list []string, origin string) bool {
	return slices.ContainsFunc(list, func(o string) bool {
		return o == "*" || strings.EqualFold(strings.TrimRight(o, "/"), origin)
	})
}

// cors answers preflight requests and sets the CORS headers of allowed
// origins; it reports whether the request was answered.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || len(s.opts.CORSOrigins) == 0 || !originAllowed(s.opts.CORSOrigins, origin) {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", "Content-Type, WWW-Authenticate")
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-API-Key")
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	return false
}

// checkWebSocketOrigin applies the WebSocket origin allow-list; without one,
// only the request's own host may connect (what a browser page served by
// this listener sends).
func (s *Server) checkWebSocketOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil // not a browser: credentials decide
	}
	if len(s.opts.WebSocketOrigins) > 0 {
		if originAllowed(s.opts.WebSocketOrigins, origin) {
			return nil
		}
	} else if u, err := url.Parse(origin); err == nil && strings.EqualFold(u.Host, r.Host) {
		return nil
	}
	return problemf(ErrForbidden, "origin %q may not open this WebSocket", origin)
}

// certReloader serves the TLS certificate from files, read again when they
// change (checked at most once a second).
type certReloader struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]fileStamp
	checked time.Time
}

func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	c := &certReloader{certFile: certFile, keyFile: keyFile}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *certReloader) stamps() ([2]fileStamp, error) {
	var out [2]fileStamp
	for i, f := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return out, err
		}
		out[i] = fileStamp{fi.ModTime(), fi.Size()}
	}
	return out, nil
}

func (c *certReloader) load() error {
	st, err := c.stamps()
	if err != nil {
		return fmt.Errorf("api: TLS: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("api: TLS certificate %s and key %s: %w", c.certFile, c.keyFile, err)
	}
	c.mu.Lock()
	c.cert, c.stamp, c.checked = &cert, st, time.Now()
	c.mu.Unlock()
	return nil
}

func (c *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	due := time.Since(c.checked) >= time.Second
	if due {
		c.checked = time.Now()
	}
	stamp := c.stamp
	c.mu.Unlock()
	if due {
		if st, err := c.stamps(); err == nil && st != stamp {
			_ = c.load() // a half-written pair fails to load; the old one serves until it is whole
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert == nil {
		return nil, errors.New("api: no TLS certificate")
	}
	return c.cert, nil
}
