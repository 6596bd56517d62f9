package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	json "github.com/goccy/go-json"
)

// Problems are RFC 9457 "problem details" (application/problem+json). Every
// error the API answers with is one: a type URI that names the kind of
// problem (stable, for programs), a title (the kind, for people), the HTTP
// status, a detail that says what was wrong with this request, and the
// request path as instance. Field names the request member at fault (a JSON
// pointer into the body, or a query or path parameter) when there is one.

// ProblemTypePrefix starts every problem type URI; the suffix is the slug of
// the kind ("not-found", "conflict", …). The URIs identify, they are not
// meant to be dereferenced (RFC 9457 §3.1.1).
const ProblemTypePrefix = "urn:uagate:problem:"

// Problem is an RFC 9457 problem details object.
type Problem struct {
	Type     string `json:"type" doc:"URI naming the kind of problem (urn:uagate:problem:<slug>)"`
	Title    string `json:"title" doc:"short summary of the kind of problem"`
	Status   int    `json:"status" doc:"HTTP status code"`
	Detail   string `json:"detail,omitempty" doc:"what was wrong with this request"`
	Instance string `json:"instance,omitempty" doc:"the request path"`
	Field    string `json:"field,omitempty" doc:"the request member at fault: a JSON pointer into the body, or a parameter name"`
}

// The kinds of problems. Each maps to one HTTP status.
var (
	ErrBadRequest    = &problemKind{"bad-request", "Bad request", http.StatusBadRequest}
	ErrMalformedJSON = &problemKind{"malformed-json", "Malformed JSON", http.StatusBadRequest}
	ErrUnknownField  = &problemKind{"unknown-field", "Unknown field", http.StatusBadRequest}
	ErrInvalid       = &problemKind{"invalid", "Invalid value", http.StatusBadRequest}
	ErrInvalidNodeID = &problemKind{"invalid-node-id", "Invalid node id", http.StatusBadRequest}
	ErrUnauthorized  = &problemKind{"unauthorized", "Missing or wrong credentials", http.StatusUnauthorized}
	ErrForbidden     = &problemKind{"forbidden", "Not allowed for this role", http.StatusForbidden}
	ErrNotFound      = &problemKind{"not-found", "Not found", http.StatusNotFound}
	ErrNoRoute       = &problemKind{"no-route", "No such route", http.StatusNotFound}
	ErrMethod        = &problemKind{"method-not-allowed", "Method not allowed", http.StatusMethodNotAllowed}
	ErrConflict      = &problemKind{"conflict", "Conflict", http.StatusConflict}
	ErrTooLarge      = &problemKind{"body-too-large", "Request body too large", http.StatusRequestEntityTooLarge}
	ErrMediaType     = &problemKind{"unsupported-media-type", "Unsupported media type", http.StatusUnsupportedMediaType}
	ErrUpstream      = &problemKind{"upstream", "Upstream OPC UA server failed the request", http.StatusBadGateway}
	ErrUnavailable   = &problemKind{"unavailable", "Unavailable", http.StatusServiceUnavailable}
	ErrInternal      = &problemKind{"internal", "Internal error", http.StatusInternalServerError}
)

// problemKind is a sentinel error naming a kind of problem. Backends wrap
// them (fmt.Errorf("writer group %q: %w", name, api.ErrNotFound)) and the
// API answers with the kind's status and the error's text as detail.
type problemKind struct {
	slug   string
	title  string
	status int
}

func (k *problemKind) Error() string { return k.title }

// Status is the HTTP status of the kind.
func (k *problemKind) Status() int { return k.status }

// Type is the problem type URI of the kind.
func (k *problemKind) Type() string { return ProblemTypePrefix + k.slug }

// fieldError names the request member at fault.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// problemf returns an error of kind k whose detail is the formatted text.
func problemf(k *problemKind, format string, args ...any) error {
	return fmt.Errorf("%s%w", fmt.Sprintf(format, args...), detailOnly{k})
}

// fieldProblemf is problemf naming the request member at fault.
func fieldProblemf(k *problemKind, field, format string, args ...any) error {
	return &fieldError{field: field, err: problemf(k, format, args...)}
}

// detailOnly wraps a kind without adding its title to the error text, so
// problemf's text is the detail alone.
type detailOnly struct{ k *problemKind }

func (d detailOnly) Error() string { return "" }
func (d detailOnly) Unwrap() error { return d.k }

// problemOf maps an error to a problem: the kind it wraps (internal when
// none), its text as detail (a kind's own title is no detail), and the field
// it names.
func problemOf(err error, instance string) Problem {
	var k *problemKind
	if !errors.As(err, &k) {
		k = ErrInternal
	}
	p := Problem{Type: k.Type(), Title: k.title, Status: k.status, Instance: instance}
	// A backend's fmt.Errorf("…: %w", ErrNotFound) ends in the kind's
	// title, which the problem carries already.
	if d := strings.TrimSuffix(err.Error(), ": "+k.title); d != k.title {
		p.Detail = d
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		p.Field = fe.field
	}
	return p
}

// writeProblem answers with the problem of err.
func writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	p := problemOf(err, r.URL.Path)
	if p.Status == http.StatusInternalServerError {
		// The detail of an unexpected error may say more about the inside
		// than a client should learn; it goes to the log instead.
		p.Detail = ""
	}
	writeProblemValue(w, p)
}

func writeProblemValue(w http.ResponseWriter, p Problem) {
	body, err := json.Marshal(p)
	if err != nil { // cannot happen for this type
		body = []byte(`{"type":"` + ProblemTypePrefix + `internal","title":"Internal error","status":500}`)
		p.Status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="uagate"`)
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}
