package api

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
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
type authenticator struct {
	log    *slog.Logger
	inline []storedKey
	file   string

	mu       sync.Mutex
	fromFile []storedKey
	stamp    fileStamp
	checked  time.Time
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// keysFileCheckInterval bounds how often the key file's stamp is checked.
const keysFileCheckInterval = time.Second

func newAuthenticator(keys []Key, file string, log *slog.Logger) (*authenticator, error) {
	a := &authenticator{log: log, file: file}
	for i, k := range keys {
		sk, err := makeKey(k)
		if err != nil {
			return nil, fmt.Errorf("api: Options.Keys[%d]: %w", i, err)
		}
		a.inline = append(a.inline, sk)
	}
	if file != "" {
		if err := a.reload(); err != nil {
			return nil, err
		}
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

// reload reads the key file. Its errors never quote a line: it holds
// secrets.
func (a *authenticator) reload() error {
	fi, err := os.Stat(a.file)
	if err != nil {
		return fmt.Errorf("api: keys file: %w", err)
	}
	if fi.Size() > 1<<20 {
		return fmt.Errorf("api: keys file %s is larger than 1 MiB", a.file)
	}
	data, err := os.ReadFile(a.file)
	if err != nil {
		return fmt.Errorf("api: keys file: %w", err)
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
			return fmt.Errorf("api: keys file %s line %d: want \"<role> <token> [name]\"", a.file, n)
		}
		role, err := ParseRole(f[0])
		if err != nil {
			return fmt.Errorf("api: keys file %s line %d: %w", a.file, n, err)
		}
		k := Key{Token: f[1], Role: role, Name: fmt.Sprintf("%s:%d", a.file, n)}
		if len(f) == 3 {
			k.Name = f[2]
		}
		sk, err := makeKey(k)
		if err != nil {
			return fmt.Errorf("api: keys file %s line %d: %w", a.file, n, err)
		}
		keys = append(keys, sk)
	}
	a.mu.Lock()
	a.fromFile, a.stamp, a.checked = keys, fileStamp{fi.ModTime(), fi.Size()}, time.Now()
	a.mu.Unlock()
	return nil
}

// keys returns the current keys, reloading the file when it changed. A file
// that became unreadable keeps the keys read last (logged).
func (a *authenticator) keys() ([]storedKey, []storedKey) {
	if a.file == "" {
		return a.inline, nil
	}
	a.mu.Lock()
	due := time.Since(a.checked) >= keysFileCheckInterval
	if due {
		a.checked = time.Now()
	}
	stamp := a.stamp
	a.mu.Unlock()
	if due {
		if fi, err := os.Stat(a.file); err == nil && (fi.ModTime() != stamp.mod || fi.Size() != stamp.size) {
			if err := a.reload(); err != nil {
				a.log.Warn("api: keys file changed but cannot be used; keeping the keys read before", "err", err)
			} else {
				a.log.Info("api: keys file reloaded", "file", a.file)
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inline, a.fromFile
}

func (a *authenticator) configured() bool {
	in, ff := a.keys()
	return len(in)+len(ff) > 0
}

// lookup finds the key of a token. Every key is compared, in constant time,
// so the time taken does not say which one (or how much of one) matched.
func (a *authenticator) lookup(token string) (storedKey, bool) {
	d := sha256.Sum256([]byte(token))
	var found storedKey
	ok := 0
	in, ff := a.keys()
	for _, list := range [][]storedKey{in, ff} {
		for _, k := range list {
			if subtle.ConstantTimeCompare(d[:], k.digest[:]) == 1 && ok == 0 {
				found, ok = k, 1
			}
		}
	}
	return found, ok == 1
}

// tokenOf returns the credentials of a request: "Authorization: Bearer
// <token>", "X-API-Key: <token>" or, for WebSockets, the access_token query
// parameter.
func tokenOf(r *http.Request, allowQuery bool) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
		return "\x00invalid" // a scheme we do not take is wrong credentials, not none
	}
	if k := r.Header.Get("X-API-Key"); k != "" {
		return k
	}
	if allowQuery {
		return r.URL.Query().Get("access_token")
	}
	return ""
}

// authorize checks a request's credentials against the role a route needs.
func (s *Server) authorize(r *http.Request, need Role, allowQuery bool) error {
	who, _ := r.Context().Value(ctxPrincipal).(*principal)
	if who == nil {
		who = &principal{}
	}
	if need == RolePublic {
		return nil
	}
	if !s.auth.configured() {
		// No keys: the listener is on loopback (or opened on purpose).
		who.name, who.role = "anonymous", RoleAdmin
		return nil
	}
	tok := tokenOf(r, allowQuery)
	if tok == "" {
		return problemf(ErrUnauthorized, "this route needs an API key: send \"Authorization: Bearer <key>\"")
	}
	k, ok := s.auth.lookup(tok)
	if !ok {
		return problemf(ErrUnauthorized, "the API key is not valid")
	}
	who.name, who.role = k.name, k.role
	if k.role < need {
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
