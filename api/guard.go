package api

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// The listener's defences against browsers used as a weapon: a page on any
// site can make its visitor's browser send requests to a gateway the
// visitor reaches (a default one on localhost, one inside the plant
// network), and a DNS name the attacker controls can be made to resolve to
// that gateway's address (DNS rebinding), so that the page's own origin
// reaches it. Checked on every request, before the route:
//
//   - Host: the request's Host must be an IP address, a loopback name
//     (localhost, *.localhost) or one of Options.AllowedHosts. A rebound
//     name is none of those, so neither REST nor /ws answers it.
//   - Sec-Fetch-Site: cross-site (a request a page of another site made)
//     is refused unless its Origin is allowed (CORSOrigins, or the
//     WebSocket origins for a WebSocket); a link followed to the dashboard
//     (a navigation) is not.
//   - State-changing requests (POST, PUT, PATCH, DELETE) must be ones a
//     browser sends cross-origin only after a CORS preflight, which only
//     the allowed origins pass: a JSON Content-Type, or credentials in a
//     header (Authorization, X-API-Key), or X-Requested-With. A form or a
//     fetch with a text/plain or Blob body is none of those. Their Origin,
//     when sent, must be this listener's own or an allowed one.
//
// Refusals are problems (403, or 415 for the media type) and are counted by
// reason (uagate_api_refused_total).

// refusal is why a request or a connection was refused, a label of
// uagate_api_refused_total.
type refusal int

const (
	refusedHost refusal = iota
	refusedOrigin
	refusedMediaType
	refusedUnauthorized
	refusedForbidden
	refusedConnections
	refusedBodyTimeout
	numRefusals
)

var refusalReasons = [numRefusals]string{"host", "origin", "media-type", "unauthorized", "forbidden", "connections", "body-timeout"}

func (s *Server) refuse(r refusal) { s.refused[r].Add(1) }

// hostAllowed reports whether a request's Host names this listener: an IP
// address, a loopback name, or an allowed host ("*" any; ".example.com"
// that domain and its subdomains).
func hostAllowed(allowed []string, host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if h == "" {
		return false
	}
	if net.ParseIP(h) != nil || h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	for _, a := range allowed {
		a = strings.ToLower(strings.TrimSuffix(a, "."))
		switch {
		case a == "*", a == h:
			return true
		case strings.HasPrefix(a, ".") && (h == a[1:] || strings.HasSuffix(h, a)):
			return true
		}
	}
	return false
}

// unsafeMethod: a method that may change state.
func unsafeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// isJSON reports whether a Content-Type is JSON.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// preflighted reports whether a browser would have sent r cross-origin only
// after a CORS preflight: a JSON body, a credentials header, or
// X-Requested-With. DELETE, PUT and PATCH always are; POST is not.
func preflighted(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return true
	}
	h := r.Header
	return isJSON(h.Get("Content-Type")) || h.Get("Authorization") != "" || h.Get("X-API-Key") != "" || h.Get("X-Requested-With") != ""
}

// sameOrigin reports whether origin is the listener's own as the request
// names it (its Host, checked already). The scheme is not compared: behind
// a proxy that terminates TLS the page's https origin reaches a plain
// listener.
func sameOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// guard applies the checks above; it answers a refused request itself and
// reports whether the request may go on.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) bool {
	if !hostAllowed(s.opts.AllowedHosts, r.Host) {
		s.refuse(refusedHost)
		writeProblem(w, r, problemf(ErrForbidden, "the Host %q is not a name of this gateway: add it to http.allowedHosts", r.Host))
		return false
	}
	if strings.Contains(r.URL.RawQuery, ";") {
		// Go's query parser drops a query with a raw ';' (node ids have
		// one): the filter would silently not apply.
		writeProblem(w, r, problemf(ErrBadRequest, "the query has a raw ';' (a node id's?): encode it as %%3B (and '=' as %%3D)"))
		return false
	}
	origin := r.Header.Get("Origin")
	allowedOrigin := origin != "" && (sameOrigin(r, origin) || originAllowed(s.opts.CORSOrigins, origin) ||
		(len(s.opts.WebSocketOrigins) > 0 && isWebSocket(r) && originAllowed(s.opts.WebSocketOrigins, origin)))
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" && !allowedOrigin && r.Header.Get("Sec-Fetch-Mode") != "navigate" {
		s.refuse(refusedOrigin)
		writeProblem(w, r, problemf(ErrForbidden, "a request from a page of another site (origin %q) is not allowed: add the origin to http.corsOrigins", origin))
		return false
	}
	if !unsafeMethod(r.Method) {
		return true
	}
	if origin != "" && !allowedOrigin {
		s.refuse(refusedOrigin)
		writeProblem(w, r, problemf(ErrForbidden, "%s from origin %q is not allowed: add the origin to http.corsOrigins", r.Method, origin))
		return false
	}
	if !preflighted(r) {
		s.refuse(refusedMediaType)
		writeProblem(w, r, problemf(ErrMediaType, "%s needs \"Content-Type: application/json\" (or an Authorization or X-Requested-With header)", r.Method))
		return false
	}
	return true
}

// isWebSocket reports whether r asks for a WebSocket upgrade.
func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// contentSecurityPolicy lets the dashboard load its own files and talk to
// its own listener (REST and /ws), and nothing else: no inline script or
// style, no other origin, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; manifest-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// securityHeaders are set on every answer: the dashboard's CSP, no framing
// (clickjacking), no content sniffing, no referrer to other sites.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}
