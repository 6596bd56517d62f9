package config

import (
	"strconv"
	"strings"

	"github.com/uagate/gateway/uastack/ua"
)

// Commands are requests from the messaging side to the OPC UA servers:
// write a value, call a method, read now. They arrive on the brokers of the
// MQTT and NATS sinks (a connection of their own) and on the WebSocket
// stream, and the REST API's Write and Call go through the same rules.
// Authorisation is explicit and default-deny: nothing is written, called or
// read unless a rule lists it for the caller (package bridge/command).
//
//	commands:
//	  rules:
//	    - callers: ["mqtt:hmi-*", "api:operator"]
//	      write: [{group: line1, writer: press, field: Setpoint}]
//	      call:  [{endpoint: plc1, object: "ns=2;s=Press", method: "ns=2;s=Press.Reset"}]
//	      read:  [{group: line1}]
//	      rate:  {perSecond: 2, burst: 5}
type Commands struct {
	// Enabled switches the command transports on; default: on when rules
	// are listed.
	Enabled *bool `yaml:"enabled"`
	// Sinks names the MQTT and NATS sinks whose brokers carry commands;
	// default every MQTT and NATS sink.
	Sinks []string `yaml:"sinks"`
	// WebSocket takes commands on the WebSocket stream's connections;
	// default true (when the stream is configured).
	WebSocket *bool `yaml:"websocket"`
	// Topic is the MQTT topic requests are published under: one more level
	// names the caller (<topic>/<caller>), which the broker's ACL binds to
	// the client id or user (mosquitto: "pattern write <topic>/%c").
	// Default opcua/json/command/{PublisherId}.
	Topic string `yaml:"topic"`
	// Subject is the NATS subject of requests, one more token naming the
	// caller (<subject>.<caller>), bound to the user by the server's
	// publish permissions. Default opcua.json.command.{PublisherId}.
	Subject string `yaml:"subject"`
	// QueueSize bounds the commands waiting for an endpoint; a full queue
	// answers "busy". Default 64.
	QueueSize int `yaml:"queueSize"`
	// Workers run an endpoint's commands concurrently; default 4.
	Workers int `yaml:"workers"`
	// MaxPayload bounds a request, bytes; default 65536.
	MaxPayload int `yaml:"maxPayload"`
	// IdempotencyWindow is how long a request id is remembered: a request
	// sent again (a QoS 1 redelivery) within it is answered with the first
	// one's response, not executed again. Default 10m.
	IdempotencyWindow Duration `yaml:"idempotencyWindow"`
	// IdempotencyEntries bounds the request ids remembered; default 10000.
	IdempotencyEntries int `yaml:"idempotencyEntries"`
	// LogSize is the number of commands the command log keeps for the API
	// and the dashboard (every command is also logged); default 1000.
	LogSize int `yaml:"logSize"`
	// Rate is every caller's rate limit unless a rule gives one; default
	// 10 per second, bursts of 20.
	Rate CommandRate `yaml:"rate"`
	// Rules grant callers targets. A request is allowed when a rule whose
	// callers match lists its target.
	Rules []CommandRule `yaml:"rules"`
}

// CommandRule grants its callers writes, calls and reads.
type CommandRule struct {
	Name string `yaml:"name"` // for logs and the API; default rule<position>
	// Callers are patterns "<transport>[/<sink>]:<id>": transport mqtt,
	// nats, websocket, api or sparkplug; sink a sink's name; id the MQTT
	// topic level or NATS subject token naming the caller, the API key's
	// name for websocket and api. '*' matches any run of characters
	// ("mqtt:hmi-*", "*:*").
	Callers []string        `yaml:"callers"`
	Write   []CommandTarget `yaml:"write"`
	Call    []CommandMethod `yaml:"call"`
	Read    []CommandTarget `yaml:"read"`
	// Rate limits each caller this rule matches (the first matching rule
	// with a rate decides); default commands.rate.
	Rate *CommandRate `yaml:"rate"`
}

// CommandTarget is a field of the configuration (group, writer, field) or
// a node of an endpoint; '*' in a value matches any run of characters.
type CommandTarget struct {
	Group  string `yaml:"group"`  // with group: writer and field default to "*"
	Writer string `yaml:"writer"` //
	Field  string `yaml:"field"`  //
	// Endpoint and Node name raw node ids (ns=…, nsu=…): a request may then
	// name the node itself.
	Endpoint string `yaml:"endpoint"`
	Node     string `yaml:"node"`
}

// CommandMethod is a method that may be called on an object.
type CommandMethod struct {
	Endpoint string `yaml:"endpoint"`
	Object   string `yaml:"object"` // node id (glob)
	Method   string `yaml:"method"` // node id (glob)
}

// CommandRate is a token bucket: PerSecond requests a second, Burst at once.
type CommandRate struct {
	PerSecond float64 `yaml:"perSecond"`
	Burst     int     `yaml:"burst"`
}

// Defaults of Commands.
const (
	DefaultCommandTopic        = "opcua/json/command/{PublisherId}"
	DefaultCommandSubject      = "opcua.json.command.{PublisherId}"
	DefaultCommandQueue        = 64
	DefaultCommandWorkers      = 4
	DefaultCommandMaxPayload   = 64 << 10
	DefaultCommandWindow       = 10 * 60 * 1e9 // 10m, as a time.Duration
	DefaultCommandEntries      = 10000
	DefaultCommandLog          = 1000
	DefaultCommandRatePerSec   = 10
	DefaultCommandRateBurst    = 20
	MaxCommandPayload          = 16 << 20
	MaxCommandQueue            = 1 << 16
	MaxCommandWorkers          = 256
	MaxCommandEntries          = 1 << 20
	MaxCommandLog              = 1 << 16
	commandTransports          = "mqtt, nats, websocket, api, sparkplug or *"
	commandCallerPatternFormat = `"<transport>[/<sink>]:<id>", e.g. "mqtt:hmi-*" or "nats/plant:alice"`
)

// On reports whether the command transports run (after ApplyDefaults).
func (c *Commands) On() bool { return c.Enabled != nil && *c.Enabled }

// WebSocketOn reports whether the WebSocket stream takes commands.
func (c *Commands) WebSocketOn() bool { return c.On() && (c.WebSocket == nil || *c.WebSocket) }

// CarriedBy reports whether the sink named name carries commands.
func (c *Commands) CarriedBy(name string) bool {
	if !c.On() {
		return false
	}
	if len(c.Sinks) == 0 {
		return true
	}
	for _, s := range c.Sinks {
		if s == name {
			return true
		}
	}
	return false
}

func (c *Commands) applyDefaults() {
	setBool(&c.Enabled, len(c.Rules) > 0)
	setString(&c.Topic, DefaultCommandTopic)
	setString(&c.Subject, DefaultCommandSubject)
	setInt(&c.QueueSize, DefaultCommandQueue)
	setInt(&c.Workers, DefaultCommandWorkers)
	setInt(&c.MaxPayload, DefaultCommandMaxPayload)
	setDuration(&c.IdempotencyWindow, DefaultCommandWindow)
	setInt(&c.IdempotencyEntries, DefaultCommandEntries)
	setInt(&c.LogSize, DefaultCommandLog)
	if c.Rate.PerSecond == 0 && c.Rate.Burst == 0 {
		c.Rate = CommandRate{PerSecond: DefaultCommandRatePerSec, Burst: DefaultCommandRateBurst}
	}
	for i := range c.Rules {
		r := &c.Rules[i]
		setString(&r.Name, "rule"+strconv.Itoa(i+1))
		for _, list := range [][]CommandTarget{r.Write, r.Read} {
			for j := range list {
				if t := &list[j]; t.Group != "" {
					setString(&t.Writer, "*")
					setString(&t.Field, "*")
				}
			}
		}
	}
}

// ParseCallerPattern splits "<transport>[/<sink>]:<id>" into its parts.
func ParseCallerPattern(s string) (transport, sink, id string, ok bool) {
	head, id, found := strings.Cut(s, ":")
	if !found || head == "" || id == "" {
		return "", "", "", false
	}
	transport, sink, _ = strings.Cut(head, "/")
	switch transport {
	case "mqtt", "nats", "websocket", "api", "sparkplug", "*":
	default:
		return "", "", "", false
	}
	return transport, sink, id, true
}

func (c *Config) validateCommands(v *validator) {
	cm := &c.Commands
	const p = "commands"
	for _, r := range []struct {
		path    string
		val, lo int
		hi      int
	}{
		{".queueSize", cm.QueueSize, 1, MaxCommandQueue},
		{".workers", cm.Workers, 1, MaxCommandWorkers},
		{".maxPayload", cm.MaxPayload, 256, MaxCommandPayload},
		{".idempotencyEntries", cm.IdempotencyEntries, 1, MaxCommandEntries},
		{".logSize", cm.LogSize, 1, MaxCommandLog},
	} {
		if r.val < r.lo || r.val > r.hi {
			v.errorf(p+r.path, "%d: want %d to %d", r.val, r.lo, r.hi)
		}
	}
	if cm.IdempotencyWindow <= 0 {
		v.errorf(p+".idempotencyWindow", "%s: must be positive", cm.IdempotencyWindow.D())
	}
	cm.Rate.validate(v, p+".rate")
	checkCommandTopic(v, p+".topic", cm.Topic, "/")
	checkCommandTopic(v, p+".subject", cm.Subject, ".")
	sinks := map[string]string{}
	for _, m := range c.Sinks.MQTT {
		sinks[m.Name] = "mqtt"
	}
	for _, n := range c.Sinks.NATS {
		sinks[n.Name] = "nats"
	}
	for i, s := range cm.Sinks {
		if _, ok := sinks[s]; !ok {
			v.errorf(p+".sinks["+strconv.Itoa(i)+"]", "no MQTT or NATS sink is named %q", s)
		}
	}
	if cm.On() && cm.WebSocket != nil && *cm.WebSocket && c.Sinks.WebSocket == nil {
		v.errorf(p+".websocket", "true, but sinks.websocket is not configured")
	}
	groups := map[string]bool{}
	for _, g := range c.WriterGroups {
		groups[g.Name] = true
	}
	endpoints := map[string]bool{}
	for _, e := range c.Endpoints {
		endpoints[e.Name] = true
	}
	names := map[string]bool{}
	for i := range cm.Rules {
		rp := p + ".rules[" + strconv.Itoa(i) + "]"
		r := &cm.Rules[i]
		if names[r.Name] {
			v.errorf(rp+".name", "rule %q is defined twice", r.Name)
		}
		names[r.Name] = true
		if len(r.Callers) == 0 {
			v.errorf(rp+".callers", "missing: name who the rule is for (%s)", commandCallerPatternFormat)
		}
		for j, cp := range r.Callers {
			if _, _, _, ok := ParseCallerPattern(cp); !ok {
				v.errorf(rp+".callers["+strconv.Itoa(j)+"]", "%q: want %s; transport %s", cp, commandCallerPatternFormat, commandTransports)
			}
		}
		if len(r.Write)+len(r.Call)+len(r.Read) == 0 {
			v.errorf(rp, "grants nothing: list write, call or read targets")
		}
		for _, list := range []struct {
			key string
			ts  []CommandTarget
		}{{"write", r.Write}, {"read", r.Read}} {
			for j, t := range list.ts {
				t.validate(v, rp+"."+list.key+"["+strconv.Itoa(j)+"]", groups, endpoints)
			}
		}
		for j, m := range r.Call {
			mp := rp + ".call[" + strconv.Itoa(j) + "]"
			checkEndpointRef(v, mp+".endpoint", m.Endpoint, endpoints)
			checkNodePattern(v, mp+".object", m.Object)
			checkNodePattern(v, mp+".method", m.Method)
		}
		if r.Rate != nil {
			r.Rate.validate(v, rp+".rate")
		}
	}
}

func (r CommandRate) validate(v *validator, p string) {
	if r.PerSecond <= 0 {
		v.errorf(p+".perSecond", "%g: must be positive", r.PerSecond)
	}
	if r.Burst < 1 {
		v.errorf(p+".burst", "%d: must be at least 1", r.Burst)
	}
}

func (t CommandTarget) validate(v *validator, p string, groups, endpoints map[string]bool) {
	switch {
	case t.Group != "" && (t.Endpoint != "" || t.Node != ""):
		v.errorf(p, "either group (with writer and field) or endpoint and node, not both")
	case t.Group != "":
		if !strings.Contains(t.Group, "*") && !groups[t.Group] {
			v.errorf(p+".group", "no writer group is named %q", t.Group)
		}
	case t.Endpoint != "" || t.Node != "":
		checkEndpointRef(v, p+".endpoint", t.Endpoint, endpoints)
		checkNodePattern(v, p+".node", t.Node)
	default:
		v.errorf(p, "empty: name a group (with writer and field) or an endpoint and node")
	}
	if t.Group == "" && (t.Writer != "" || t.Field != "") {
		v.errorf(p+".group", "missing: writer and field belong to a writer group")
	}
}

func checkEndpointRef(v *validator, p, name string, endpoints map[string]bool) {
	switch {
	case name == "":
		v.errorf(p, "missing: name the endpoint")
	case !strings.Contains(name, "*") && !endpoints[name]:
		v.errorf(p, "no endpoint is named %q", name)
	}
}

// checkNodePattern checks a node id, or a pattern with '*'.
func checkNodePattern(v *validator, p, s string) {
	if s == "" {
		v.errorf(p, "missing: a node id (ns=2;s=Tag, nsu=…) or a pattern with *")
		return
	}
	if strings.Contains(s, "*") {
		return
	}
	if _, err := ua.ParseExpandedNodeID(s); err != nil {
		v.errorf(p, "%q is not a node id: %v", s, err)
	}
}

func checkCommandTopic(v *validator, p, s, sep string) {
	switch {
	case s == "":
		v.errorf(p, "empty")
	case strings.ContainsAny(s, "+#*> \t"):
		v.errorf(p, "%q: no wildcards or white space (the caller level is added)", s)
	case strings.HasPrefix(s, sep) || strings.HasSuffix(s, sep):
		v.errorf(p, "%q: must not start or end with %q", s, sep)
	case strings.HasPrefix(s, "$"):
		v.errorf(p, "%q: topics starting with $ belong to the broker", s)
	}
	if rest := strings.ReplaceAll(s, "{PublisherId}", ""); strings.ContainsAny(rest, "{}") {
		v.errorf(p, "%q: only {PublisherId} may be used", s)
	}
}
