package api

import (
	"net/http"
	"strings"
	"time"

	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/bridge/command"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/ua"
)

// Commands: the REST API's Write and Call are authorised by the command
// rules (commands.rules, package bridge/command), as the commands from MQTT,
// NATS and the WebSocket stream are: the caller is "api:<key name>"
// ("api:anonymous" without keys), nothing is allowed unless a rule lists
// it, each request takes a token of the caller's rate, and every operation
// goes to the command log. The routes below expose the rules, the counters
// and the log.

// CommandBackend is implemented by a Backend with a command engine. A
// Backend without one (or with a nil engine) refuses Write and Call.
type CommandBackend interface {
	Commands() *command.Engine
}

// ErrTooManyRequests answers a caller over its command rate.
var ErrTooManyRequests = &problemKind{"too-many-requests", "Too many requests", http.StatusTooManyRequests}

// CallerName is the name of the API key a request was authenticated with
// ("anonymous" without keys), as command rules name API and WebSocket
// callers.
func CallerName(r *http.Request) string {
	if who, _ := r.Context().Value(ctxPrincipal).(*principal); who != nil && who.name != "" {
		return who.name
	}
	return "anonymous"
}

func (s *Server) commands() *command.Engine {
	if cb, ok := s.b.(CommandBackend); ok {
		return cb.Commands()
	}
	return nil
}

// commandGate authorises the operations of one Write or Call request.
type commandGate struct {
	e        *command.Engine
	caller   command.Caller
	endpoint string
	start    time.Time
}

// gate takes the caller's rate token for a Write or Call request.
func (s *Server) gate(r *http.Request) (*commandGate, error) {
	e := s.commands()
	if e == nil {
		return nil, problemf(ErrForbidden, "Write and Call are allowed by command rules (commands.rules), and this gateway has no command engine")
	}
	g := &commandGate{e: e, caller: command.Caller{Transport: command.TransportAPI, ID: CallerName(r)},
		endpoint: r.PathValue("endpoint"), start: time.Now()}
	if err := e.Allow(g.caller); err != nil {
		return nil, problemf(ErrTooManyRequests, "%v", err)
	}
	return g, nil
}

// check authorises one operation; field is its place in the request.
func (g *commandGate) check(field string, op command.Op, node, method ua.NodeID, ns []string) error {
	if err := g.e.Authorize(g.caller, op, g.endpoint, node, method, ns); err != nil {
		g.e.Record(g.caller, op, command.Target{Endpoint: g.endpoint, Node: node.String()}, nil, nil, ua.StatusBadUserAccessDenied, err, g.start)
		return fieldProblemf(ErrForbidden, field, "%v", err)
	}
	return nil
}

// variantJSON is a Variant as OPC UA JSON for the command log.
func variantJSON(v *ua.Variant, ns []string) json.RawMessage {
	b, err := jsonenc.AppendVariant(nil, v, jsonenc.Options{NamespaceURIs: ns})
	if err != nil || len(b) == 0 {
		return nil
	}
	return b
}

// CommandsView is the command authorisation in force and its counters.
type CommandsView struct {
	// Enabled: the MQTT, NATS and WebSocket transports take commands.
	Enabled bool `json:"enabled"`
	// Rules grant callers writes, calls and reads; nothing else is allowed
	// (the REST API's Write and Call included).
	Rules []config.CommandRule `json:"rules"`
	// Rate is the rate limit of a caller no rule gives one.
	Rate config.CommandRate `json:"rate"`
	// Topic and Subject are where requests go (MQTT <topic>/<caller>,
	// NATS <subject>.<caller>).
	Topic   string             `json:"topic,omitempty"`
	Subject string             `json:"subject,omitempty"`
	Stats   []command.Stats    `json:"stats"`
	Log     []command.LogEntry `json:"log,omitempty"`
}

// CommandLog is the last commands, newest first.
type CommandLog struct {
	Entries []command.LogEntry `json:"entries"`
}

func (s *Server) commandRoutes() []*route {
	unavailable := http.StatusServiceUnavailable
	return []*route{
		{method: "GET", path: v1 + "/commands", id: "getCommands", tag: "commands",
			summary: "The command authorisation in force (rules, rates, topics) and its counters",
			role:    RoleRead, response: CommandsView{}, problems: []int{unavailable}, h: s.getCommands},
		{method: "GET", path: v1 + "/commands/log", id: "getCommandLog", tag: "commands",
			summary: "The last commands, newest first: who, what, the value before and after, the result",
			role:    RoleRead, query: []param{pLimit}, response: CommandLog{}, problems: []int{http.StatusBadRequest, unavailable}, h: s.getCommandLog},
	}
}

func (s *Server) getCommands(w http.ResponseWriter, r *http.Request) error {
	e := s.commands()
	if e == nil {
		return problemf(ErrUnavailable, "no command engine")
	}
	cfg := s.b.Config()
	pub := cfg.Gateway.PublisherID
	rules, rate := e.Rules()
	v := CommandsView{Enabled: cfg.Commands.On(), Rules: rules, Rate: rate, Stats: e.Stats()}
	if v.Rules == nil {
		v.Rules = []config.CommandRule{}
	}
	if v.Enabled {
		v.Topic = strings.ReplaceAll(cfg.Commands.Topic, "{PublisherId}", pub)
		v.Subject = strings.ReplaceAll(cfg.Commands.Subject, "{PublisherId}", pub)
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) getCommandLog(w http.ResponseWriter, r *http.Request) error {
	e := s.commands()
	if e == nil {
		return problemf(ErrUnavailable, "no command engine")
	}
	limit := 100
	if r.URL.Query().Get("limit") != "" {
		var err error
		if limit, err = pageLimit(r); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, CommandLog{Entries: e.Log(limit)})
}
