package publishednodes

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/uastack/client"
)

// Issue is a problem with an entry: the member it is about, as a path below
// the entry ("OpcNodes[2].QueueSize"; "" for the entry as a whole), and
// why. As an error it wraps ErrNotFound when the entry names something that
// is not configured.
type Issue struct {
	Path    string
	Message string
	// AtKey: the issue is about the member's name (an ignored member, an
	// inline password) rather than its value.
	AtKey bool
	Err   error
	// at is where in a file to report it when that is not Path's value (an
	// element of Path).
	at string
}

func (i *Issue) Error() string {
	if i.Path == "" {
		return i.Message
	}
	return i.Path + ": " + i.Message
}

func (i *Issue) Unwrap() error { return i.Err }

// ErrNotFound: an entry names an endpoint, writer group or node that is not
// configured.
var ErrNotFound = errors.New("publishednodes: not configured")

type issues struct{ errs, warns []Issue }

func (is *issues) errorf(path, format string, args ...any) {
	is.errs = append(is.errs, Issue{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (is *issues) warnf(path string, atKey bool, format string, args ...any) {
	is.warns = append(is.warns, Issue{Path: path, AtKey: atKey, Message: fmt.Sprintf(format, args...)})
}

// Resolved is an entry mapped onto the configuration model, before it is
// placed in a configuration (Publish).
type Resolved struct {
	// Endpoint is the connection (URL, security, identity), without a name.
	Endpoint config.Endpoint
	// Group is DataSetWriterGroup ("": the endpoint's name) and Writer
	// DataSetWriterId ("": named after the publishing interval), with the
	// characters a topic level cannot hold replaced.
	Group, Writer string
	// Interval is the entry's DataSetPublishingInterval; 0 when not given.
	Interval time.Duration
	// KeyFrameCount and Format are settings of a writer group the entry
	// creates; 0 and "" when not given.
	KeyFrameCount int
	Format        string
	Nodes         []Node
}

// Node is one of an entry's nodes.
type Node struct {
	Field config.Field
	// Interval is the node's OpcPublishingInterval, else the entry's; 0
	// when neither is given.
	Interval time.Duration
	// Path names the node in the entry: OpcNodes[2] (NodeId for the one
	// node of a 2.5 entry).
	Path string
}

// Resolve maps an entry onto the model: every value checked and converted
// by the rules of the package documentation. errs, when not empty, say why
// the entry cannot be used; warns are what was ignored or adjusted.
func Resolve(e *Entry) (r *Resolved, errs, warns []Issue) {
	var is issues
	r = &Resolved{}
	r.Endpoint = is.endpoint(e)
	r.Group = is.name("DataSetWriterGroup", e.DataSetWriterGroup)
	r.Writer = is.name("DataSetWriterId", e.DataSetWriterID)
	r.Interval, _ = is.interval("DataSetPublishingInterval", e.DataSetPublishingInterval, e.DataSetPublishingIntervalTimespan, time.Millisecond)
	if k := e.DataSetKeyFrameCount; k != nil {
		if *k < 0 || *k != math.Trunc(*k) || *k > math.MaxInt32 {
			is.errorf("DataSetKeyFrameCount", "%v: want a whole number, 0 or more", *k)
		} else {
			r.KeyFrameCount = int(*k)
		}
	}
	switch mode := strings.TrimSpace(e.MessagingMode); strings.ToLower(mode) {
	case "":
	case "samples", "fullsamples":
		r.Format = config.FormatSamples
	case "pubsub", "fullnetworkmessages", "networkmessages":
		r.Format = config.FormatPart14
	default:
		is.warnf("MessagingMode", true, "%q is not supported (Samples or PubSub); ignored", mode)
	}
	if enc := strings.TrimSpace(e.MessageEncoding); enc != "" && !strings.EqualFold(enc, "Json") {
		is.warnf("MessageEncoding", true, "%q is not supported (only Json); ignored", enc)
	}

	// What the entry gives its nodes unless they say otherwise.
	var defaults Node
	if si, ok := is.interval("DataSetSamplingInterval", e.DataSetSamplingInterval, e.DataSetSamplingIntervalTimespan, time.Millisecond); ok {
		d := config.Duration(si)
		defaults.Field.SamplingInterval = &d
	}
	if hb, ok := is.interval("DefaultHeartbeatInterval", e.DefaultHeartbeatInterval, e.DefaultHeartbeatIntervalTimespan, time.Millisecond); ok {
		defaults.Field.Heartbeat = config.Duration(hb)
	}
	defaults.Interval = r.Interval

	nodes, prefix := e.OpcNodes, "OpcNodes"
	if e.NodeID != nil {
		if len(nodes) == 0 {
			nodes, prefix = []OpcNode{*e.NodeID}, "NodeId"
		} else {
			is.warnf("NodeId", true, "NodeId (OPC Publisher 2.5's one node) is ignored beside OpcNodes")
		}
	}
	for j := range nodes {
		p := prefix
		if prefix == "OpcNodes" {
			p = fmt.Sprintf("OpcNodes[%d]", j)
		}
		if n, ok := is.node(&nodes[j], p, defaults); ok {
			r.Nodes = append(r.Nodes, n)
		}
	}
	return r, is.errs, is.warns
}

func (is *issues) endpoint(e *Entry) config.Endpoint {
	var ep config.Endpoint
	ep.URL = strings.TrimSpace(e.EndpointURL)
	if u, err := url.Parse(ep.URL); ep.URL == "" {
		is.errorf("EndpointUrl", "missing")
	} else if err != nil || u.Scheme != "opc.tcp" || u.Host == "" {
		is.errorf("EndpointUrl", "%q: want opc.tcp://host:port[/path]", ep.URL)
	}
	ep.SecurityMode, ep.SecurityPolicy = "None", "None"
	if e.UseSecurity != nil && *e.UseSecurity {
		ep.SecurityMode, ep.SecurityPolicy = "SignAndEncrypt", config.SecurityBest
	}
	secure := func(mode string) {
		ep.SecurityMode = mode
		if ep.SecurityPolicy == "None" {
			ep.SecurityPolicy = config.SecurityBest
		}
	}
	switch m := strings.TrimSpace(e.EndpointSecurityMode); strings.ToLower(m) {
	case "":
	case "none":
		ep.SecurityMode, ep.SecurityPolicy = "None", "None"
	case "sign":
		secure("Sign")
	case "signandencrypt", "notnone":
		secure("SignAndEncrypt")
	case "best":
		secure(config.SecurityBest)
	default:
		is.errorf("EndpointSecurityMode", "%q: want None, Sign, SignAndEncrypt, NotNone or Best", m)
	}
	if p := strings.TrimSpace(e.EndpointSecurityPolicy); p != "" {
		ep.SecurityPolicy = p
		if ep.SecurityMode == "None" && !strings.EqualFold(p, "None") && !strings.HasSuffix(p, "#None") {
			ep.SecurityMode = config.SecurityBest
		}
	}
	switch mode := strings.TrimSpace(e.OpcAuthenticationMode); strings.ToLower(mode) {
	case "", "anonymous":
		ep.Identity.Type = config.IdentityAnonymous
	case "usernamepassword":
		ep.Identity = config.Identity{Type: config.IdentityUsername, Username: e.OpcAuthenticationUsername,
			Password: config.Secret{Value: e.OpcAuthenticationPassword}}
		if e.OpcAuthenticationUsername == "" {
			is.errorf("OpcAuthenticationUsername", "missing: UsernamePassword needs a user name")
		}
		if e.OpcAuthenticationPassword != "" {
			is.warnf("OpcAuthenticationPassword", true, "inline password; in a YAML configuration it can come from a file or the environment ({file: …}, {env: …})")
		}
	case "certificate":
		is.errorf("OpcAuthenticationMode", "Certificate names a certificate in OPC Publisher's user store, which this gateway does not have: give the endpoint an identity of type x509 with certFile and keyFile (in YAML, or through /api/v1/endpoints)")
	default:
		is.errorf("OpcAuthenticationMode", "%q: want Anonymous, UsernamePassword or Certificate", mode)
	}
	return ep
}

// name reads a name that becomes a topic level, replacing what a topic
// level cannot hold.
func (is *issues) name(path, s string) string {
	clean := strings.Map(func(r rune) rune {
		if !config.NameRune(r) {
			return '_'
		}
		return r
	}, s)
	if clean != s {
		is.warnf(path, false, "%q holds characters a topic level cannot: %q is used", s, clean)
	}
	return clean
}

// interval reads a member counted in unit and its …Timespan twin, which wins
// as in OPC Publisher; ok reports whether either is given (and valid).
func (is *issues) interval(path string, n *float64, span string, unit time.Duration) (d time.Duration, ok bool) {
	if span = strings.TrimSpace(span); span != "" {
		v, err := timeSpan(span)
		if err != nil {
			is.errorf(path+"Timespan", "%v", err)
			return 0, false
		}
		return v, true
	}
	if n == nil {
		return 0, false
	}
	if *n < 0 || *n != *n || *n > float64(1<<62)/float64(unit) {
		is.errorf(path, "%v is out of range", *n)
		return 0, false
	}
	return time.Duration(*n * float64(unit)), true
}

// timeSpan parses a .NET TimeSpan, "[d.]hh:mm:ss[.fffffff]", with the
// configuration's parser; an interval is never negative.
func timeSpan(s string) (time.Duration, error) {
	if !strings.Contains(s, ":") || strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%q is not a TimeSpan (want [d.]hh:mm:ss[.fff])", s)
	}
	d, err := config.ParseDuration(s)
	return d.D(), err
}

func (is *issues) node(n *OpcNode, p string, defaults Node) (Node, bool) {
	out := Node{Path: p, Interval: defaults.Interval}
	f := &out.Field
	id, member := strings.TrimSpace(n.ID), "Id"
	if id == "" {
		id, member = strings.TrimSpace(n.ExpandedNodeID), "ExpandedNodeId"
	}
	if id == "" {
		id, member = strings.TrimSpace(n.Identifier), "Identifier" // 2.5: "NodeId": {"Identifier": …}
	}
	if id == "" {
		is.errorf(p+".Id", "missing: Id or ExpandedNodeId")
		return out, false
	}
	f.Node = iiotNodeID(id)
	if err := config.CheckNodeID(f.Node); err != nil {
		is.errorf(p+"."+member, "%v", err)
		return out, false
	}
	f.Name = n.DataSetFieldID
	if f.Name == "" {
		f.Name = n.DisplayName
	}
	if f.Name == "" {
		f.Name = f.Node
	}
	f.SamplingInterval = defaults.Field.SamplingInterval
	if si, ok := is.interval(p+".OpcSamplingInterval", n.OpcSamplingInterval, n.OpcSamplingIntervalTimespan, time.Millisecond); ok {
		d := config.Duration(si)
		f.SamplingInterval = &d
	}
	if pi, ok := is.interval(p+".OpcPublishingInterval", n.OpcPublishingInterval, n.OpcPublishingIntervalTimespan, time.Millisecond); ok {
		out.Interval = pi
	}
	f.Heartbeat = defaults.Field.Heartbeat
	if hb, ok := is.interval(p+".HeartbeatInterval", n.HeartbeatInterval, n.HeartbeatIntervalTimespan, time.Second); ok {
		f.Heartbeat = config.Duration(hb)
	}
	if q := n.QueueSize; q != nil {
		if *q < 0 || *q > config.MaxQueueSize || *q != math.Trunc(*q) {
			is.errorf(p+".QueueSize", "%v: want 0 to %d", *q, config.MaxQueueSize)
		} else {
			f.QueueSize = uint32(*q)
		}
	}
	if n.DiscardNew != nil {
		oldest := !*n.DiscardNew
		f.DiscardOldest = &oldest
	}
	if t := strings.TrimSpace(n.DataChangeTrigger); t != "" {
		i := slices.IndexFunc(triggers[:], func(x [2]string) bool { return strings.EqualFold(x[0], t) })
		if i < 0 {
			is.errorf(p+".DataChangeTrigger", "%q: want Status, StatusValue or StatusValueTimestamp", t)
		} else {
			f.Trigger = triggers[i][1]
		}
	}
	is.deadband(n, p, f)
	if n.EventFilter != nil {
		f.Events = is.events(n.EventFilter, p+".EventFilter")
		f.SamplingInterval, f.QueueSize, f.Deadband, f.Trigger, f.Heartbeat = nil, 0, config.Deadband{}, "", 0
	}
	return out, true
}

// triggers are OPC Publisher's DataChangeTrigger names and ours.
var triggers = [...][2]string{{"Status", config.TriggerStatus}, {"StatusValue", config.TriggerStatusValue},
	{"StatusValueTimestamp", config.TriggerStatusValueTimestamp}}

func (is *issues) deadband(n *OpcNode, p string, f *config.Field) {
	t := strings.TrimSpace(n.DeadbandType)
	if t == "" {
		if n.DeadbandValue != nil {
			is.warnf(p+".DeadbandValue", true, "ignored without a DeadbandType, as in OPC Publisher")
		}
		return
	}
	var v float64
	if n.DeadbandValue != nil {
		v = *n.DeadbandValue
	}
	switch strings.ToLower(t) {
	case "absolute":
		if v < 0 {
			is.warnf(p+".DeadbandValue", false, "%v is negative: taken as 0, as OPC Publisher does", v)
			v = 0
		}
		f.Deadband = config.Deadband{Type: config.DeadbandAbsolute, Value: v}
	case "percent":
		if v < 0 || v > 100 {
			c := min(max(v, 0), 100)
			is.warnf(p+".DeadbandValue", false, "%v is not from 0 to 100: clamped to %v, as OPC Publisher does", v, c)
			v = c
		}
		f.Deadband = config.Deadband{Type: config.DeadbandPercent, Value: v}
	case "none":
	default:
		is.errorf(p+".DeadbandType", "%q: want Absolute or Percent", t)
	}
}

// iiotNodeID converts the "{namespace URI}#{identifier}" form of OPC Publisher
// to nsu=<uri>;<identifier>; other forms are returned as they are.
func iiotNodeID(s string) string {
	for _, p := range []string{"ns=", "nsu=", "i=", "s=", "g=", "b=", "svr="} {
		if strings.HasPrefix(s, p) {
			return s
		}
	}
	i := strings.LastIndexByte(s, '#')
	if i <= 0 || i == len(s)-1 {
		return s
	}
	uri := strings.ReplaceAll(strings.ReplaceAll(s[:i], "%", "%25"), ";", "%3B")
	return "nsu=" + uri + ";" + s[i+1:]
}

const baseEventType = "i=2041"

func (is *issues) events(ef *EventFilter, p string) *config.EventSelect {
	ev := &config.EventSelect{OfType: strings.TrimSpace(ef.TypeDefinitionID)}
	if ef.SelectClauses != nil {
		ev.Select = []string{}
		for j := range ef.SelectClauses {
			if s, ok := is.selectClause(&ef.SelectClauses[j], fmt.Sprintf("%s.SelectClauses[%d]", p, j)); ok {
				ev.Select = append(ev.Select, s)
			}
		}
		if len(ev.Select) == 0 {
			is.warnf(p+".SelectClauses", false, "no select clause could be mapped: the default event fields are selected")
			ev.Select = nil
		}
	}
	if ef.WhereClause != nil {
		if t, ok := ofType(ef.WhereClause); ok {
			if ev.OfType != "" && ev.OfType != t {
				is.warnf(p+".WhereClause", true, "OfType %s and TypeDefinitionId %s differ: %s is used", t, ev.OfType, t)
			}
			ev.OfType = t
		} else {
			is.warnf(p+".WhereClause", true, "only a WhereClause of a single OfType element is mapped; this one is ignored, so events are not filtered by it")
		}
	}
	return ev
}

func (is *issues) selectClause(sc *SelectClause, p string) (string, bool) {
	if t := strings.TrimSpace(sc.TypeDefinitionID); t != "" && t != baseEventType && !strings.HasSuffix(t, ";i=2041") {
		is.warnf(p+".TypeDefinitionId", true, "%s: select clauses are taken relative to BaseEventType", t)
	}
	if len(sc.BrowsePath) == 0 {
		is.warnf(p, false, "no BrowsePath; ignored")
		return "", false
	}
	parts := make([]string, 0, len(sc.BrowsePath))
	for k, s := range sc.BrowsePath {
		s = strings.TrimPrefix(s, "/")
		at := fmt.Sprintf("%s.BrowsePath[%d]", p, k)
		switch {
		case s == "":
			is.warns = append(is.warns, Issue{Path: p + ".BrowsePath", at: at, Message: "want browse names; this clause is ignored"})
			return "", false
		case strings.Contains(s, "#") || strings.Contains(s, "://"):
			is.warns = append(is.warns, Issue{Path: p + ".BrowsePath", at: at,
				Message: fmt.Sprintf("%q names its namespace by URI, which select clauses here cannot: use <index>:<name>; this clause is ignored", s)})
			return "", false
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "/"), true
}

// ofType recognises a where clause (a ContentFilter as decoded JSON) of one
// OfType element and returns its type node id.
func ofType(w any) (string, bool) {
	get := func(v any, key string) any {
		m, _ := v.(map[string]any)
		for k, x := range m {
			if strings.EqualFold(strings.TrimSpace(k), key) {
				return x
			}
		}
		return nil
	}
	elems, _ := get(w, "Elements").([]any)
	if len(elems) != 1 {
		return "", false
	}
	op, _ := get(elems[0], "FilterOperator").(string)
	operands, _ := get(elems[0], "FilterOperands").([]any)
	if !strings.EqualFold(op, "OfType") || len(operands) != 1 {
		return "", false
	}
	if s, ok := get(operands[0], "Value").(string); ok && s != "" {
		return s, true
	}
	return "", false
}

// canonPolicy makes security policies comparable: names and URIs of one
// policy are equal.
func canonPolicy(s string) string {
	if strings.EqualFold(s, config.SecurityBest) || s == "" {
		return config.SecurityBest
	}
	if uri, err := client.ParseSecurityPolicy(s); err == nil {
		return uri
	}
	return strings.ToLower(s)
}

// connectsAs reports whether a configured endpoint is the connection of an
// entry: the same URL (case and a trailing / aside), security and user. The
// password is not compared: it is the user's, and the API does not send it
// back.
func connectsAs(have *config.Endpoint, want *config.Endpoint) bool {
	norm := func(s string) string { return strings.TrimRight(strings.ToLower(strings.TrimSpace(s)), "/") }
	idType := func(t string) string {
		if t == "" {
			return config.IdentityAnonymous
		}
		return strings.ToLower(t)
	}
	mode := func(m string) string {
		if m == "" {
			return config.SecurityBest
		}
		return strings.ToLower(m)
	}
	return norm(have.URL) == norm(want.URL) && mode(have.SecurityMode) == mode(want.SecurityMode) &&
		canonPolicy(have.SecurityPolicy) == canonPolicy(want.SecurityPolicy) &&
		idType(have.Identity.Type) == idType(want.Identity.Type) && have.Identity.Username == want.Identity.Username
}

// endpointName names an endpoint after the host and port of its URL.
func endpointName(raw string) string {
	host := raw
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		host = u.Host
	}
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			return r
		}
		return '_'
	}, host)
	if name == "" {
		name = "endpoint"
	}
	return name
}

// inFamily reports whether a writer group's name is base or was made from
// it by Publish: base_2 (another endpoint), base_4s (another interval),
// base_2_4s, base_4s_2 …
func inFamily(name, base string) bool {
	if name == base {
		return true
	}
	rest, ok := strings.CutPrefix(name, base+"_")
	if !ok || rest == "" {
		return false
	}
	for _, part := range strings.Split(rest, "_") {
		if !isDigits(part) {
			if d, err := time.ParseDuration(part); err != nil || d <= 0 {
				return false
			}
		}
	}
	return true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
