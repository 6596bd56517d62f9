package api

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
)

// route is one operation of the API: how it is served and how the OpenAPI
// document describes it. The document is generated from the same table, so
// the two cannot drift; TestOpenAPICoversRoutes checks the listener against
// the document in both directions.
type route struct {
	method, path string // an http.ServeMux pattern: "GET /api/v1/endpoints/{endpoint}"
	id           string // operationId
	tag          string
	summary      string
	role         Role
	query        []param
	request      any // zero value of the body type; nil: no body
	response     any // zero value of the 2xx body type; nil: no body
	status       int // the success status; default 200
	contentType  string
	problems     []int // the problem statuses it may answer with (besides 401/403/500)
	h            func(w http.ResponseWriter, r *http.Request) error
}

type param struct {
	name, desc string
	schema     string // "string", "integer", "boolean"
}

var (
	pLimit  = param{"limit", "most items in the answer (default 100, at most 1000)", "integer"}
	pCursor = param{"cursor", "the nextCursor of the previous page", "string"}
)

// routeHandler wraps a route's handler: credentials, then the handler, then
// the mapping of its error to a problem.
func (s *Server) routeHandler(rt *route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.authorize(r, rt.role); err != nil {
			writeProblem(w, r, err)
			return
		}
		if err := rt.h(w, r); err != nil {
			if problemOf(err, "").Status >= 500 {
				s.log.Warn("api: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			writeProblem(w, r, err)
		}
	})
}

// mountHandler wraps a mounted handler with its role and, for WebSockets,
// the origin allow-list.
func (s *Server) mountHandler(m Mount) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.WebSocket {
			if err := s.checkWebSocketOrigin(r); err != nil {
				writeProblem(w, r, err)
				return
			}
		}
		if err := s.authorize(r, m.Role); err != nil {
			writeProblem(w, r, err)
			return
		}
		m.Handler.ServeHTTP(w, r)
	})
}

// noRoute answers a path under /api/ or /v2/ that no route serves: 405
// (with Allow) when the path exists with other methods, 404 otherwise.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	if _, p := s.pathMux.Handler(r); p != "" {
		var allow []string
		for _, rt := range s.routes {
			if rt.path == p {
				allow = append(allow, rt.method)
			}
		}
		slices.Sort(allow)
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeProblem(w, r, problemf(ErrMethod, "%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
		return
	}
	writeProblem(w, r, problemf(ErrNoRoute, "no route %s %s", r.Method, r.URL.Path))
}

type ctxKey int

const ctxPrincipal ctxKey = iota

// statusWriter records the status for the access log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach Hijack and Flush (WebSockets,
// streaming).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack hands the connection to a mounted WebSocket handler: gorilla's
// Upgrader asserts http.Hijacker on the writer it is given instead of using
// http.ResponseController, so Unwrap alone is not enough.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("api: the connection cannot be taken over")
	}
	if w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return h.Hijack()
}

// middleware wraps the mux: panic recovery, the access log, the browser
// defences (guard.go), CORS.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		var who principal
		r = r.WithContext(context.WithValue(r.Context(), ctxPrincipal, &who))
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("api: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v)
				if sw.status == 0 {
					writeProblem(sw, r, ErrInternal)
				}
			}
			// The path only: a query may carry an access token.
			s.log.Debug("api: request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
				"duration", time.Since(start), "key", who.name)
		}()
		securityHeaders(sw.Header())
		if !s.guard(sw, r) || s.cors(sw, r) {
			return
		}
		next.ServeHTTP(sw, r)
	})
}
