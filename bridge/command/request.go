package command

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/uastack/ua"
)

// Transports a Caller comes through.
const (
	TransportMQTT      = "mqtt"
	TransportNATS      = "nats"
	TransportWebSocket = "websocket"
	TransportAPI       = "api"
	TransportSparkplug = "sparkplug"
)

// Caller is who sent a request, as the transport knows it: the MQTT topic
// level or NATS subject token naming the caller (bound to the client id or
// user by the broker's ACL), or the API key's name (REST and WebSocket).
type Caller struct {
	Transport string // TransportMQTT, TransportNATS, …
	Sink      string // the sink whose broker carried it ("" for api and websocket)
	ID        string
}

// String is "<transport>[/<sink>]:<id>", the form rules match.
func (c Caller) String() string {
	if c.Sink != "" {
		return c.Transport + "/" + c.Sink + ":" + c.ID
	}
	return c.Transport + ":" + c.ID
}

// Op is what a request does.
type Op string

// Operations.
const (
	OpWrite Op = "write" // Write of the Value attribute
	OpCall  Op = "call"  // Call of a method
	OpRead  Op = "read"  // a fresh Read of the Value attribute (maxAge 0)
)

// Request is one command. Its target is a field of the configuration
// (Group, Writer, Field) or a node of an endpoint (Endpoint, Node); a call
// names Object and Method (and the endpoint, or a group whose endpoint it
// is).
type Request struct {
	// RequestID identifies the request for its response and for
	// idempotency: the same caller sending the same id again within the
	// idempotency window gets the first response, nothing is done twice.
	RequestID string `json:"requestId"`
	Op        Op     `json:"op"`
	Group     string `json:"group,omitempty"`
	Writer    string `json:"writer,omitempty"`
	Field     string `json:"field,omitempty"`
	Endpoint  string `json:"endpoint,omitempty"`
	Node      string `json:"node,omitempty"`
	Object    string `json:"object,omitempty"`
	Method    string `json:"method,omitempty"`
	// Value to write: a JSON value of the node's type (a number for an
	// Int16 node becomes an Int16), or an OPC UA JSON Variant
	// ({"UaType":4,"Value":7}) whose type must be the node's.
	Value json.RawMessage `json:"value,omitempty"`
	// Type, when set, is the built-in type the caller expects the node to
	// have (Double, Int16, …); another type is refused.
	Type string `json:"type,omitempty"`
	// Arguments of a call, each a JSON value of the argument's type or a
	// Variant.
	Arguments []json.RawMessage `json:"arguments,omitempty"`
	// ReplyTo is where the response goes on MQTT 3.1.1 (default
	// <topic>/reply); ignored by the other transports.
	ReplyTo string `json:"replyTo,omitempty"`
}

// Response is the one answer to a request.
type Response struct {
	RequestID string `json:"requestId"`
	Op        Op     `json:"op,omitempty"`
	// Status is the outcome: Good, the server's status of the operation,
	// or the status of a refusal (Error says why).
	Status StatusCode `json:"status"`
	// Error is set when the gateway refused or could not complete the
	// request.
	Error *Error `json:"error,omitempty"`
	// Target is the node the request resolved to.
	Target *Target `json:"target,omitempty"`
	// OldValue (write) is the Variant read before the write; Value the one
	// written, or (read) the DataValue read.
	OldValue json.RawMessage `json:"oldValue,omitempty"`
	Value    json.RawMessage `json:"value,omitempty"`
	// InputArgumentResults and OutputArguments of a call.
	InputArgumentResults []StatusCode      `json:"inputArgumentResults,omitempty"`
	OutputArguments      []json.RawMessage `json:"outputArguments,omitempty"`
	// Diagnostics are the server's, where it gave any.
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
	// Duplicate: the request id was seen within the idempotency window;
	// this is the first request's response, nothing was done again.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Target is a resolved request target.
type Target struct {
	Endpoint string `json:"endpoint"`
	Node     string `json:"node,omitempty"`
	Object   string `json:"object,omitempty"`
	Method   string `json:"method,omitempty"`
	Group    string `json:"group,omitempty"`
	Writer   string `json:"writer,omitempty"`
	Field    string `json:"field,omitempty"`
	// Type is the built-in type written (write).
	Type string `json:"type,omitempty"`
}

func (t *Target) String() string {
	if t == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(t.Endpoint)
	if t.Group != "" {
		b.WriteString(" " + t.Group + "/" + t.Writer + "/" + t.Field)
	}
	if t.Node != "" {
		b.WriteString(" " + t.Node)
	}
	if t.Method != "" {
		b.WriteString(" " + t.Object + " " + t.Method)
	}
	return b.String()
}

// StatusCode is an OPC UA StatusCode with its symbolic name.
type StatusCode struct {
	Code   uint32 `json:"code"`
	Symbol string `json:"symbol,omitempty"`
}

// Status returns s as a StatusCode.
func Status(s ua.StatusCode) StatusCode { return StatusCode{Code: uint32(s), Symbol: s.Name()} }

// Good reports whether the status is Good.
func (s StatusCode) Good() bool { return ua.StatusCode(s.Code).IsGood() }

// Diagnostic is a DiagnosticInfo of the server with its strings resolved.
type Diagnostic struct {
	// Index is the operation (argument of a call) it belongs to; -1: the
	// service.
	Index           int         `json:"index"`
	SymbolicID      string      `json:"symbolicId,omitempty"`
	NamespaceURI    string      `json:"namespaceUri,omitempty"`
	LocalizedText   string      `json:"localizedText,omitempty"`
	AdditionalInfo  string      `json:"additionalInfo,omitempty"`
	InnerStatusCode *StatusCode `json:"innerStatusCode,omitempty"`
}

// Error kinds: why the gateway refused or could not complete a request.
const (
	KindInvalid       = "invalid"        // malformed: not JSON, a member missing or wrong
	KindTooLarge      = "too-large"      // over commands.maxPayload
	KindUnknownTarget = "unknown-target" // no such group, writer, field, endpoint
	KindTypeMismatch  = "type-mismatch"  // the value is not of the node's type
	KindDenied        = "denied"         // no rule allows it for this caller
	KindRateLimited   = "rate-limited"   // over the caller's rate
	KindBusy          = "busy"           // the endpoint's command queue is full
	KindTimeout       = "timeout"        // not done within the endpoint's request timeout
	KindUnavailable   = "unavailable"    // the endpoint is not connected, or the gateway stops
	KindUpstream      = "upstream"       // the server refused the service (a ServiceFault)
)

// Error says why a request was refused or failed, in words for the caller.
type Error struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Kind + ": " + e.Message }

// refusal is an Error with the status a response carries for it.
type refusal struct {
	status ua.StatusCode
	err    Error
}

func (r *refusal) Error() string { return r.err.Error() }

func refuse(kind string, status ua.StatusCode, format string, args ...any) *refusal {
	return &refusal{status: status, err: Error{Kind: kind, Message: fmt.Sprintf(format, args...)}}
}

// failure makes the response of a refusal.
func failure(req *Request, err error) *Response {
	resp := &Response{}
	if req != nil {
		resp.RequestID, resp.Op = req.RequestID, req.Op
	}
	var r *refusal
	if !errors.As(err, &r) {
		r = refuse(KindUpstream, ua.StatusBadUnexpectedError, "%v", err)
	}
	resp.Status = Status(r.status)
	e := r.err
	resp.Error = &e
	return resp
}

// maxIDLength bounds a request id.
const maxIDLength = 256

// Decode parses a request of at most maxPayload bytes. On failure it
// returns the response to send (with the request id when it could be read).
func Decode(payload []byte, maxPayload int) (*Request, *Response) {
	if len(payload) > maxPayload {
		req := &Request{RequestID: peekID(payload, maxPayload)}
		return nil, failure(req, refuse(KindTooLarge, ua.StatusBadRequestTooLarge, "the request has %d bytes; at most %d (commands.maxPayload)", len(payload), maxPayload))
	}
	var req Request
	d := json.NewDecoder(bytes.NewReader(payload))
	d.DisallowUnknownFields()
	if err := d.Decode(&req); err != nil {
		req.RequestID = peekID(payload, maxPayload)
		return nil, failure(&req, refuse(KindInvalid, ua.StatusBadDecodingError, "not a command request: %v", err))
	}
	if d.More() {
		return nil, failure(&req, refuse(KindInvalid, ua.StatusBadDecodingError, "more than one JSON value"))
	}
	if err := req.check(); err != nil {
		return nil, failure(&req, err)
	}
	return &req, nil
}

// peekID finds the request id of a request that cannot be decoded as a
// whole, so that its refusal can name it; "" when there is none.
func peekID(payload []byte, maxPayload int) string {
	return peekMember(payload, `"requestId"`, maxPayload)
}

// PeekReplyTo finds the replyTo member of a request ("" when there is none
// or it cannot be read), for a transport that answers before or without
// the engine's decoding.
func PeekReplyTo(payload []byte) string {
	return peekMember(payload, `"replyTo"`, DefaultMaxPayload)
}

// DefaultMaxPayload is the request size PeekReplyTo looks into.
const DefaultMaxPayload = 64 << 10

// peekMember finds the first string member name of a JSON object in the
// first max bytes of payload.
func peekMember(payload []byte, name string, max int) string {
	if len(payload) > max {
		payload = payload[:max]
	}
	i := bytes.Index(payload, []byte(name))
	if i < 0 {
		return ""
	}
	rest := bytes.TrimLeft(payload[i+len(name):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return ""
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	var v string
	d := json.NewDecoder(bytes.NewReader(rest))
	if d.Decode(&v) != nil || len(v) > maxIDLength {
		return ""
	}
	return v
}

// CheckReplyTo checks a reply topic (sep '/') or subject (sep '.') a
// request names: no wildcards, nothing of the broker's own ($…), and not
// under the request prefix (the gateway would take its answer for a
// request).
func CheckReplyTo(to string, sep byte, prefix string) error {
	wild := "+#"
	if sep == '.' {
		wild = "*> \t"
	}
	switch {
	case to == "":
		return fmt.Errorf("empty")
	case strings.ContainsAny(to, wild) || strings.ContainsRune(to, 0):
		return fmt.Errorf("%q has wildcards", to)
	case strings.HasPrefix(to, "$"):
		return fmt.Errorf("%q: topics starting with $ belong to the broker", to)
	case to == prefix || strings.HasPrefix(to, prefix+string(sep)) && strings.Count(to[len(prefix)+1:], string(sep)) == 0:
		return fmt.Errorf("%q is a request topic", to)
	}
	return nil
}

// check validates the members a request of its operation needs.
func (r *Request) check() error {
	switch {
	case r.RequestID == "":
		return refuse(KindInvalid, ua.StatusBadInvalidArgument, "requestId is missing: every request carries one")
	case len(r.RequestID) > maxIDLength:
		return refuse(KindInvalid, ua.StatusBadInvalidArgument, "requestId has %d bytes; at most %d", len(r.RequestID), maxIDLength)
	}
	byField := r.Group != "" || r.Writer != "" || r.Field != ""
	switch r.Op {
	case OpWrite, OpRead:
		switch {
		case byField && (r.Group == "" || r.Writer == "" || r.Field == ""):
			return refuse(KindInvalid, ua.StatusBadInvalidArgument, "a field is named by group, writer and field")
		case byField && (r.Node != "" || r.Endpoint != ""):
			return refuse(KindInvalid, ua.StatusBadInvalidArgument, "name a field (group, writer, field) or a node (endpoint, node), not both")
		case !byField && (r.Node == "" || r.Endpoint == ""):
			return refuse(KindInvalid, ua.StatusBadInvalidArgument, "no target: name a field (group, writer, field) or a node (endpoint, node)")
		case r.Object != "" || r.Method != "" || len(r.Arguments) > 0:
			return refuse(KindInvalid, ua.StatusBadInvalidArgument, "object, method and arguments belong to a call")
		}
		if r.Op == OpWrite && isNull(r.Value) {
			return refuse(KindInvalid, ua.StatusBadInvalidArgument, "value is missing")
		}
		if r.Op == OpRead && len(r.Value) > 0 {
			return refuse(KindInvalid, ua.StatusBadInvalidArgument, "a read takes no value")
		}
	case OpCall:
		switch {
		case r.Object == "" || r.Method == "":
			return refuse(KindInvalid, ua.StatusBadInvalidArgument, "a call names object and method (node ids)")
		case r.Endpoint == "" && r.Group == "":
			return refuse(KindInvalid, ua.StatusBadInvalidArgument, "a call names its endpoint (or a writer group of it)")
		case r.Endpoint != "" && r.Group != "":
			return refuse(KindInvalid, ua.StatusBadInvalidArgument, "name the endpoint or a writer group, not both")
		case r.Writer != "" || r.Field != "" || r.Node != "" || len(r.Value) > 0 || r.Type != "":
			return refuse(KindInvalid, ua.StatusBadInvalidArgument, "writer, field, node, value and type belong to a write or read")
		}
	case "":
		return refuse(KindInvalid, ua.StatusBadInvalidArgument, "op is missing: write, call or read")
	default:
		return refuse(KindInvalid, ua.StatusBadInvalidArgument, "op %q: want write, call or read", r.Op)
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// Marshal encodes a response.
func (r *Response) Marshal() []byte {
	b, err := json.Marshal(r)
	if err != nil { // cannot happen: every member is plain data or valid JSON
		b, _ = json.Marshal(failure(&Request{RequestID: r.RequestID, Op: r.Op}, refuse(KindUpstream, ua.StatusBadEncodingError, "encoding the response: %v", err)))
	}
	return b
}
