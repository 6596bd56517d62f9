package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// Browser sessions: the dashboard's login form posts an API key to
// /api/v1/login, which answers with a session cookie (HttpOnly, so the
// page's scripts never hold the key; SameSite=Strict, so no other site's
// page sends it; Secure on HTTPS). The session names the key by its digest
// and is checked against the keys in use at every request: a key rotated
// out of the keys file ends its sessions. Sessions live in memory (a
// restart asks for the key again), at most maxSessions of them, for
// sessionTTL each.

const (
	// SessionCookie is the name of the session cookie.
	SessionCookie = "uagate_session"
	sessionTTL    = 12 * time.Hour
	maxSessions   = 1024
)

type session struct {
	key     [sha256.Size]byte // digest of the API key it was opened with
	expires time.Time
}

// sessions maps the digest of a session id to its session.
type sessions struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]session
}

// open starts a session for the key of digest key and returns its id.
func (ss *sessions) open(key [sha256.Size]byte, now time.Time) string {
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	id := base64.RawURLEncoding.EncodeToString(raw[:])
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m == nil {
		ss.m = map[[sha256.Size]byte]session{}
	}
	if len(ss.m) >= maxSessions {
		// Expired ones first, then the one ending soonest.
		var oldest [sha256.Size]byte
		var at time.Time
		for d, s := range ss.m {
			if now.After(s.expires) {
				delete(ss.m, d)
				continue
			}
			if at.IsZero() || s.expires.Before(at) {
				oldest, at = d, s.expires
			}
		}
		if len(ss.m) >= maxSessions {
			delete(ss.m, oldest)
		}
	}
	ss.m[sha256.Sum256([]byte(id))] = session{key: key, expires: now.Add(sessionTTL)}
	return id
}

// key returns the key digest of a live session.
func (ss *sessions) key(id string, now time.Time) ([sha256.Size]byte, bool) {
	d := sha256.Sum256([]byte(id))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[d]
	if !ok {
		return [sha256.Size]byte{}, false
	}
	if now.After(s.expires) {
		delete(ss.m, d)
		return [sha256.Size]byte{}, false
	}
	return s.key, true
}

func (ss *sessions) close(id string) {
	d := sha256.Sum256([]byte(id))
	ss.mu.Lock()
	delete(ss.m, d)
	ss.mu.Unlock()
}

// lookupDigest finds the key in use whose token has digest d, comparing
// every key in constant time.
func (a *authenticator) lookupDigest(d [sha256.Size]byte) (storedKey, bool) {
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

// LoginRequest is the body of POST /api/v1/login.
type LoginRequest struct {
	Key string `json:"key" doc:"an API key"`
}

// Login is the answer of POST /api/v1/login: who the session is.
type Login struct {
	Name string `json:"name,omitempty" doc:"the key's name"`
	Role string `json:"role" doc:"read or admin"`
}

func (s *Server) sessionCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: SessionCookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
}

// login checks a key and opens a session for it (a cookie).
func (s *Server) login(w http.ResponseWriter, r *http.Request) error {
	var req LoginRequest
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if s.auth.open {
		return writeJSON(w, http.StatusOK, Login{Name: "anonymous", Role: RoleAdmin.String()})
	}
	k, ok := s.auth.lookup(req.Key)
	if req.Key == "" || !ok {
		s.refuse(refusedUnauthorized)
		return problemf(ErrUnauthorized, "the API key is not valid")
	}
	id := s.sessions.open(k.digest, time.Now())
	http.SetCookie(w, s.sessionCookie(r, id, int(sessionTTL/time.Second)))
	return writeJSON(w, http.StatusOK, Login{Name: k.name, Role: k.role.String()})
}

// logout ends the request's session.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) error {
	if c, err := r.Cookie(SessionCookie); err == nil {
		s.sessions.close(c.Value)
	}
	http.SetCookie(w, s.sessionCookie(r, "", -1))
	w.WriteHeader(http.StatusNoContent)
	return nil
}
