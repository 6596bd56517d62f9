package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uagate/gateway/bridge/config"
)

// The configuration API of OPC Publisher 2.9, for users migrating from it:
// its payloads (PublishedNodesEntryModel, OpcNodeModel) at the routes of
// its HTTP API (Azure/Industrial-IoT docs/opc-publisher/api.md):
//
//	GET   /v2/configuration                         GetConfiguredEndpoints (?IncludeNodes=true)
//	PATCH /v2/configuration                         AddOrUpdateEndpoints
//	POST  /v2/configuration/nodes                   PublishNodes
//	POST  /v2/configuration/nodes/unpublish         UnpublishNodes
//	POST  /v2/configuration/nodes/unpublish/all     UnpublishAllNodes
//	POST  /v2/configuration/endpoints/list/nodes    GetConfiguredNodesOnEndpoint
//	POST  /v2/configuration/diagnostics             GetDiagnosticInfo
//
// An entry maps to our model as: EndpointUrl (with its security and
// identity) → an endpoint (an existing one with the same URL, security and
// user, else a new one named after the host and port); DataSetWriterGroup
// (default: the endpoint's name) → a writer group on that endpoint, whose
// publishing interval is the entry's; DataSetWriterId (default: the
// publishing interval in ms, as OPC Publisher does) → a dataset writer;
// OpcNodes → fields (DataSetFieldId, else DisplayName, else the node id, is
// the field name). Members of OPC Publisher's model that have no meaning
// here (IoT Hub routing, batching, cyclic reads …) are accepted and ignored,
// so that existing payloads need no editing; what cannot be honoured
// (certificate user authentication by store subject, one entry's nodes with
// different publishing intervals, a group name already used for another
// endpoint) is refused with a problem naming it, before anything changes.

// PublishedNodesEntry is OPC Publisher's PublishedNodesEntryModel (the
// members we honour).
type PublishedNodesEntry struct {
	EndpointURL                       string    `json:"EndpointUrl"`
	UseSecurity                       *bool     `json:"UseSecurity,omitempty"`
	EndpointSecurityMode              string    `json:"EndpointSecurityMode,omitempty" doc:"None, Sign, SignAndEncrypt, NotNone or Best"`
	EndpointSecurityPolicy            string    `json:"EndpointSecurityPolicy,omitempty"`
	OpcAuthenticationMode             string    `json:"OpcAuthenticationMode,omitempty" doc:"Anonymous or UsernamePassword"`
	OpcAuthenticationUsername         string    `json:"OpcAuthenticationUsername,omitempty"`
	OpcAuthenticationPassword         string    `json:"OpcAuthenticationPassword,omitempty" doc:"write-only"`
	DataSetWriterGroup                string    `json:"DataSetWriterGroup,omitempty"`
	DataSetWriterID                   string    `json:"DataSetWriterId,omitempty"`
	DataSetPublishingInterval         *int      `json:"DataSetPublishingInterval,omitempty" doc:"milliseconds"`
	DataSetPublishingIntervalTimespan string    `json:"DataSetPublishingIntervalTimespan,omitempty" doc:"hh:mm:ss.fff"`
	DataSetSamplingInterval           *int      `json:"DataSetSamplingInterval,omitempty"`
	DataSetSamplingIntervalTimespan   string    `json:"DataSetSamplingIntervalTimespan,omitempty"`
	DataSetKeyFrameCount              *int      `json:"DataSetKeyFrameCount,omitempty"`
	OpcNodes                          []OpcNode `json:"OpcNodes,omitempty"`
}

// OpcNode is OPC Publisher's OpcNodeModel (the members we honour).
type OpcNode struct {
	ID                            string   `json:"Id,omitempty"`
	ExpandedNodeID                string   `json:"ExpandedNodeId,omitempty"`
	DisplayName                   string   `json:"DisplayName,omitempty"`
	DataSetFieldID                string   `json:"DataSetFieldId,omitempty"`
	OpcSamplingInterval           *int     `json:"OpcSamplingInterval,omitempty"`
	OpcSamplingIntervalTimespan   string   `json:"OpcSamplingIntervalTimespan,omitempty"`
	OpcPublishingInterval         *int     `json:"OpcPublishingInterval,omitempty"`
	OpcPublishingIntervalTimespan string   `json:"OpcPublishingIntervalTimespan,omitempty"`
	HeartbeatInterval             *int     `json:"HeartbeatInterval,omitempty"`
	HeartbeatIntervalTimespan     string   `json:"HeartbeatIntervalTimespan,omitempty"`
	QueueSize                     *uint32  `json:"QueueSize,omitempty"`
	DiscardNew                    *bool    `json:"DiscardNew,omitempty"`
	DataChangeTrigger             string   `json:"DataChangeTrigger,omitempty" doc:"Status, StatusValue or StatusValueTimestamp"`
	DeadbandType                  string   `json:"DeadbandType,omitempty" doc:"Absolute or Percent"`
	DeadbandValue                 *float64 `json:"DeadbandValue,omitempty"`
}

// PublishedNodesResponse is OPC Publisher's (empty) PublishedNodesResponseModel.
type PublishedNodesResponse struct{}

// ConfiguredEndpointsResponse is GetConfiguredEndpointsResponseModel.
type ConfiguredEndpointsResponse struct {
	Endpoints []PublishedNodesEntry `json:"endpoints"`
}

// ConfiguredNodesResponse is GetConfiguredNodesOnEndpointResponseModel.
type ConfiguredNodesResponse struct {
	OpcNodes []OpcNode `json:"opcNodes"`
}

// DiagnosticInfo is OPC Publisher's PublishDiagnosticInfoModel (the
// counters we have), one per writer group.
type DiagnosticInfo struct {
	Endpoints                       []PublishedNodesEntry `json:"endpoints"`
	OpcEndpointConnected            bool                  `json:"opcEndpointConnected"`
	ConnectionRetries               uint64                `json:"connectionRetries"`
	MonitoredOpcNodesSucceededCount int                   `json:"monitoredOpcNodesSucceededCount"`
	MonitoredOpcNodesFailedCount    int                   `json:"monitoredOpcNodesFailedCount"`
	IngressDataChanges              uint64                `json:"ingressDataChanges"`
	IngressEventNotifications       uint64                `json:"ingressEventNotifications"`
	EncoderNotificationsProcessed   uint64                `json:"encoderNotificationsProcessed"`
	EncoderNotificationsDropped     uint64                `json:"encoderNotificationsDropped"`
	EncoderIoTMessagesProcessed     uint64                `json:"encoderIoTMessagesProcessed"`
	OutgressIoTMessageCount         uint64                `json:"outgressIoTMessageCount"`
}

func (s *Server) publisherRoutes() []*route {
	body := []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType}
	nfc := append(append([]int(nil), body...), http.StatusNotFound, http.StatusConflict)
	const p = "/v2/configuration"
	return []*route{
		{method: "GET", path: p, id: "opcPublisherGetConfiguredEndpoints", tag: "OPC Publisher",
			summary: "GetConfiguredEndpoints (OPC Publisher 2.9)", role: RoleRead,
			query:    []param{{"IncludeNodes", "include the nodes of each entry", "boolean"}},
			response: ConfiguredEndpointsResponse{}, h: s.pubGetConfiguredEndpoints},
		{method: "PATCH", path: p, id: "opcPublisherAddOrUpdateEndpoints", tag: "OPC Publisher",
			summary: "AddOrUpdateEndpoints: replace the nodes of each entry's writer (no nodes: remove it)",
			role:    RoleAdmin, request: []PublishedNodesEntry{}, response: PublishedNodesResponse{}, problems: nfc, h: s.pubAddOrUpdate},
		{method: "POST", path: p + "/nodes", id: "opcPublisherPublishNodes", tag: "OPC Publisher",
			summary: "PublishNodes: add (or update) nodes", role: RoleAdmin, request: PublishedNodesEntry{},
			response: PublishedNodesResponse{}, problems: nfc, h: s.pubPublishNodes},
		{method: "POST", path: p + "/nodes/unpublish", id: "opcPublisherUnpublishNodes", tag: "OPC Publisher",
			summary: "UnpublishNodes: remove nodes", role: RoleAdmin, request: PublishedNodesEntry{},
			response: PublishedNodesResponse{}, problems: nfc, h: s.pubUnpublishNodes},
		{method: "POST", path: p + "/nodes/unpublish/all", id: "opcPublisherUnpublishAllNodes", tag: "OPC Publisher",
			summary: "UnpublishAllNodes: remove every node of an endpoint (of everything without EndpointUrl)",
			role:    RoleAdmin, request: PublishedNodesEntry{}, response: PublishedNodesResponse{}, problems: nfc, h: s.pubUnpublishAll},
		{method: "POST", path: p + "/endpoints/list/nodes", id: "opcPublisherGetConfiguredNodesOnEndpoint", tag: "OPC Publisher",
			summary: "GetConfiguredNodesOnEndpoint", role: RoleRead, request: PublishedNodesEntry{},
			response: ConfiguredNodesResponse{}, problems: append(body, http.StatusNotFound), h: s.pubGetNodes},
		{method: "POST", path: p + "/diagnostics", id: "opcPublisherGetDiagnosticInfo", tag: "OPC Publisher",
			summary: "GetDiagnosticInfo: counters per writer group", role: RoleRead,
			response: []DiagnosticInfo{}, h: s.pubDiagnostics},
	}
}

// parseTimeSpan parses a .NET TimeSpan ("[d.]hh:mm:ss[.fffffff]").
func parseTimeSpan(field, s string) (time.Duration, error) {
	bad := fieldProblemf(ErrInvalid, field, "TimeSpan %q: want [d.]hh:mm:ss[.fff]", s)
	var days int
	rest := s
	if i, j := strings.IndexByte(s, '.'), strings.IndexByte(s, ':'); i >= 0 && j > i {
		d, err := strconv.Atoi(s[:i])
		if err != nil || d < 0 {
			return 0, bad
		}
		days, rest = d, s[i+1:]
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 3 {
		return 0, bad
	}
	h, err1 := strconv.Atoi(parts[0])
	m, err2 := strconv.Atoi(parts[1])
	sec, err3 := strconv.ParseFloat(parts[2], 64)
	if err1 != nil || err2 != nil || err3 != nil || h < 0 || m < 0 || m > 59 || sec < 0 || sec >= 60 {
		return 0, bad
	}
	return time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute +
		time.Duration(sec*float64(time.Second)), nil
}

// interval reads an OPC Publisher interval: the TimeSpan form first, then
// milliseconds; 0 when neither is set.
func interval(field string, ms *int, span string) (time.Duration, error) {
	if span != "" {
		return parseTimeSpan(field+"Timespan", span)
	}
	if ms != nil {
		if *ms < 0 {
			return 0, fieldProblemf(ErrInvalid, field, "%d is negative", *ms)
		}
		return time.Duration(*ms) * time.Millisecond, nil
	}
	return 0, nil
}

// pubEntry is an entry resolved to our model.
type pubEntry struct {
	endpoint config.Endpoint
	group    string
	writer   string
	interval time.Duration // 0: not given
	sampling time.Duration
	keyFrame *int
	fields   []config.Field
}

func (e *PublishedNodesEntry) resolve(needURL bool) (*pubEntry, error) {
	out := &pubEntry{}
	if e.EndpointURL == "" {
		if needURL {
			return nil, fieldProblemf(ErrInvalid, "/EndpointUrl", "EndpointUrl is required")
		}
		return out, nil
	}
	u, err := url.Parse(e.EndpointURL)
	if err != nil || u.Scheme != "opc.tcp" || u.Host == "" {
		return nil, fieldProblemf(ErrInvalid, "/EndpointUrl", "EndpointUrl %q: want opc.tcp://host:port[/path]", e.EndpointURL)
	}
	ep := config.Endpoint{URL: e.EndpointURL}
	switch strings.ToLower(e.EndpointSecurityMode) {
	case "":
		if e.UseSecurity != nil && !*e.UseSecurity {
			ep.SecurityPolicy, ep.SecurityMode = "None", "None"
		} else if e.UseSecurity != nil {
			ep.SecurityMode = "SignAndEncrypt"
		}
	case "none":
		ep.SecurityPolicy, ep.SecurityMode = "None", "None"
	case "sign":
		ep.SecurityMode = "Sign"
	case "signandencrypt", "notnone":
		ep.SecurityMode = "SignAndEncrypt"
	case "best":
		ep.SecurityMode = "best"
	default:
		return nil, fieldProblemf(ErrInvalid, "/EndpointSecurityMode", "%q is not one of None, Sign, SignAndEncrypt, NotNone, Best", e.EndpointSecurityMode)
	}
	if e.EndpointSecurityPolicy != "" {
		ep.SecurityPolicy = e.EndpointSecurityPolicy
	}
	switch strings.ToLower(e.OpcAuthenticationMode) {
	case "", "anonymous":
	case "usernamepassword":
		if e.OpcAuthenticationUsername == "" {
			return nil, fieldProblemf(ErrInvalid, "/OpcAuthenticationUsername", "UsernamePassword needs OpcAuthenticationUsername")
		}
		ep.Identity = config.Identity{Type: "username", Username: e.OpcAuthenticationUsername,
			Password: config.Secret{Value: e.OpcAuthenticationPassword}}
	case "certificate":
		return nil, fieldProblemf(ErrInvalid, "/OpcAuthenticationMode", "Certificate authentication by a store subject is not supported; configure an x509 identity with certFile and keyFile on the endpoint (/api/v1/endpoints)")
	default:
		return nil, fieldProblemf(ErrInvalid, "/OpcAuthenticationMode", "%q is not one of Anonymous, UsernamePassword", e.OpcAuthenticationMode)
	}
	out.endpoint = ep
	if out.interval, err = interval("/DataSetPublishingInterval", e.DataSetPublishingInterval, e.DataSetPublishingIntervalTimespan); err != nil {
		return nil, err
	}
	if out.sampling, err = interval("/DataSetSamplingInterval", e.DataSetSamplingInterval, e.DataSetSamplingIntervalTimespan); err != nil {
		return nil, err
	}
	out.keyFrame = e.DataSetKeyFrameCount
	var nodeInterval time.Duration
	names := map[string]int{}
	for i := range e.OpcNodes {
		n := &e.OpcNodes[i]
		at := fmt.Sprintf("/OpcNodes/%d", i)
		id := n.ID
		if id == "" {
			id = n.ExpandedNodeID
		}
		if err := checkNodeID(at+"/Id", id); err != nil {
			return nil, err
		}
		pi, err := interval(at+"/OpcPublishingInterval", n.OpcPublishingInterval, n.OpcPublishingIntervalTimespan)
		if err != nil {
			return nil, err
		}
		if pi != 0 {
			if nodeInterval != 0 && pi != nodeInterval {
				return nil, fieldProblemf(ErrInvalid, at+"/OpcPublishingInterval", "the nodes of one entry must share a publishing interval here (%v and %v); put them in entries with different DataSetWriterId", nodeInterval, pi)
			}
			nodeInterval = pi
		}
		f := config.Field{Node: id, Name: n.DataSetFieldID, QueueSize: 0}
		if f.Name == "" {
			f.Name = n.DisplayName
		}
		if f.Name == "" {
			f.Name = id
		}
		if j, dup := names[f.Name]; dup {
			return nil, fieldProblemf(ErrInvalid, at+"/DataSetFieldId", "field %q is also OpcNodes[%d]", f.Name, j)
		}
		names[f.Name] = i
		si, err := interval(at+"/OpcSamplingInterval", n.OpcSamplingInterval, n.OpcSamplingIntervalTimespan)
		if err != nil {
			return nil, err
		}
		if n.OpcSamplingInterval != nil || n.OpcSamplingIntervalTimespan != "" {
			d := config.Duration(si)
			f.SamplingInterval = &d
		}
		hb, err := interval(at+"/HeartbeatInterval", n.HeartbeatInterval, n.HeartbeatIntervalTimespan)
		if err != nil {
			return nil, err
		}
		f.Heartbeat = config.Duration(hb)
		if n.QueueSize != nil {
			f.QueueSize = *n.QueueSize
		}
		if n.DiscardNew != nil {
			v := !*n.DiscardNew
			f.DiscardOldest = &v
		}
		switch strings.ToLower(n.DataChangeTrigger) {
		case "":
		case "status":
			f.Trigger = "status"
		case "statusvalue":
			f.Trigger = "statusValue"
		case "statusvaluetimestamp":
			f.Trigger = "statusValueTimestamp"
		default:
			return nil, fieldProblemf(ErrInvalid, at+"/DataChangeTrigger", "%q is not one of Status, StatusValue, StatusValueTimestamp", n.DataChangeTrigger)
		}
		if n.DeadbandType != "" || n.DeadbandValue != nil {
			t := strings.ToLower(n.DeadbandType)
			if t != "absolute" && t != "percent" {
				return nil, fieldProblemf(ErrInvalid, at+"/DeadbandType", "%q is not one of Absolute, Percent", n.DeadbandType)
			}
			f.Deadband = config.Deadband{Type: t}
			if n.DeadbandValue != nil {
				f.Deadband.Value = *n.DeadbandValue
			}
		}
		out.fields = append(out.fields, f)
	}
	if out.interval == 0 {
		out.interval = nodeInterval
	}
	out.group = e.DataSetWriterGroup
	out.writer = e.DataSetWriterID
	if out.writer == "" {
		// OPC Publisher's default: the publishing interval (ms) of the nodes.
		iv := out.interval
		if iv == 0 {
			iv = time.Second
		}
		out.writer = strconv.FormatInt(iv.Milliseconds(), 10)
	}
	if err := checkName("/DataSetWriterId", "dataset writer", out.writer); err != nil {
		return nil, err
	}
	if out.group != "" {
		if err := checkName("/DataSetWriterGroup", "writer group", out.group); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func sameEndpoint(a, b *config.Endpoint) bool {
	norm := func(s string) string { return strings.TrimRight(strings.ToLower(s), "/") }
	return norm(a.URL) == norm(b.URL) && strings.EqualFold(a.SecurityMode, b.SecurityMode) &&
		strings.EqualFold(a.SecurityPolicy, b.SecurityPolicy) && a.Identity.Username == b.Identity.Username
}

// endpointName names a new endpoint after its host and port.
func endpointName(c *config.Config, rawURL string) string {
	u, _ := url.Parse(rawURL)
	base := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, u.Host)
	name := base
	for i := 2; findEndpoint(c, name) >= 0; i++ {
		name = base + "-" + strconv.Itoa(i)
	}
	return name
}

// ensureEndpoint finds the endpoint of an entry, or adds it.
func ensureEndpoint(c *config.Config, e *pubEntry) string {
	for i := range c.Endpoints {
		if sameEndpoint(&c.Endpoints[i], &e.endpoint) {
			return c.Endpoints[i].Name
		}
	}
	ep := e.endpoint
	ep.Name = endpointName(c, ep.URL)
	c.Endpoints = append(c.Endpoints, ep)
	return ep.Name
}

// findEntryEndpoint finds the endpoint of an entry without adding it.
func findEntryEndpoint(c *config.Config, e *pubEntry) string {
	for i := range c.Endpoints {
		if sameEndpoint(&c.Endpoints[i], &e.endpoint) {
			return c.Endpoints[i].Name
		}
	}
	return ""
}

// ensureGroup finds (or adds) the entry's writer group on an endpoint.
func ensureGroup(c *config.Config, e *pubEntry, endpoint string) (*config.WriterGroup, error) {
	name := e.group
	if name == "" {
		name = endpoint
	}
	if i := findGroup(c, name); i >= 0 {
		g := &c.WriterGroups[i]
		if g.Endpoint != endpoint {
			return nil, fieldProblemf(ErrConflict, "/DataSetWriterGroup", "writer group %q subscribes to endpoint %q; here a group has one endpoint: name another DataSetWriterGroup", name, g.Endpoint)
		}
		if e.interval != 0 && g.PublishingInterval != 0 && g.PublishingInterval.D() != e.interval {
			return nil, fieldProblemf(ErrConflict, "/DataSetPublishingInterval", "writer group %q publishes every %v, the entry asks for %v; here the interval is the group's: name another DataSetWriterGroup", name, g.PublishingInterval.D(), e.interval)
		}
		return g, nil
	}
	g := config.WriterGroup{Name: name, Endpoint: endpoint, PublishingInterval: config.Duration(e.interval)}
	if e.sampling != 0 {
		d := config.Duration(e.sampling)
		g.Nodes.SamplingInterval = &d
	}
	if e.keyFrame != nil {
		g.KeyFrameCount = *e.keyFrame
	}
	c.WriterGroups = append(c.WriterGroups, g)
	return &c.WriterGroups[len(c.WriterGroups)-1], nil
}

// merge adds fields to a writer; a field of the same node is replaced.
func merge(w *config.DataSetWriter, fields []config.Field) error {
	for _, f := range fields {
		i := slices.IndexFunc(w.Fields, func(x config.Field) bool { return x.Node == f.Node })
		if i >= 0 {
			w.Fields[i] = f
			continue
		}
		if slices.ContainsFunc(w.Fields, func(x config.Field) bool { return cfgFieldKey(&x) == f.Name }) {
			return fieldProblemf(ErrConflict, "/OpcNodes", "dataset writer %q has another node named %q", w.Name, f.Name)
		}
		w.Fields = append(w.Fields, f)
	}
	return nil
}

// publish applies one entry: add (replace=false) or set (replace=true) the
// nodes of its writer.
func publish(c *config.Config, e *pubEntry, replace bool) error {
	epName := ensureEndpoint(c, e)
	g, err := ensureGroup(c, e, epName)
	if err != nil {
		return err
	}
	wi := findWriter(g, e.writer)
	if replace && len(e.fields) == 0 {
		if wi >= 0 {
			g.Writers = slices.Delete(g.Writers, wi, wi+1)
		}
		dropEmpty(c)
		return nil
	}
	if wi < 0 {
		g.Writers = append(g.Writers, config.DataSetWriter{Name: e.writer})
		wi = len(g.Writers) - 1
	}
	if replace {
		g.Writers[wi].Fields = nil
	}
	return merge(&g.Writers[wi], e.fields)
}

// dropEmpty removes writers without fields and groups without writers, as
// OPC Publisher forgets an entry whose last node is gone.
func dropEmpty(c *config.Config) {
	for gi := range c.WriterGroups {
		g := &c.WriterGroups[gi]
		g.Writers = slices.DeleteFunc(g.Writers, func(w config.DataSetWriter) bool { return len(w.Fields) == 0 && len(w.Browse) == 0 })
	}
	c.WriterGroups = slices.DeleteFunc(c.WriterGroups, func(g config.WriterGroup) bool { return len(g.Writers) == 0 })
}

func (s *Server) decodeEntry(r *http.Request, needURL bool) (*PublishedNodesEntry, *pubEntry, error) {
	body, err := readBody(r, s.opts.MaxBodyBytes)
	if err != nil {
		return nil, nil, err
	}
	var e PublishedNodesEntry
	if err := unmarshalLenient(body, &e); err != nil {
		return nil, nil, err
	}
	pe, err := e.resolve(needURL)
	return &e, pe, err
}

func (s *Server) pubPublishNodes(w http.ResponseWriter, r *http.Request) error {
	_, e, err := s.decodeEntry(r, true)
	if err != nil {
		return err
	}
	if len(e.fields) == 0 {
		return fieldProblemf(ErrInvalid, "/OpcNodes", "no OpcNodes to publish")
	}
	if err := s.b.ApplyConfig(r.Context(), func(c *config.Config) error { return publish(c, e, false) }); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, PublishedNodesResponse{})
}

// entryGroups returns the indexes of the groups an entry names: its group
// (or all groups of its endpoint when it names none).
func entryGroups(c *config.Config, e *pubEntry, explicitGroup bool) ([]int, error) {
	ep := findEntryEndpoint(c, e)
	if ep == "" {
		return nil, fieldProblemf(ErrNotFound, "/EndpointUrl", "no endpoint %s with this security and user is configured", e.endpoint.URL)
	}
	var out []int
	for i := range c.WriterGroups {
		g := &c.WriterGroups[i]
		if g.Endpoint == ep && (!explicitGroup || g.Name == e.group) {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return nil, fieldProblemf(ErrNotFound, "/DataSetWriterGroup", "endpoint %q has no writer group %q", ep, e.group)
	}
	return out, nil
}

func (s *Server) pubUnpublishNodes(w http.ResponseWriter, r *http.Request) error {
	raw, e, err := s.decodeEntry(r, true)
	if err != nil {
		return err
	}
	if len(e.fields) == 0 {
		return fieldProblemf(ErrInvalid, "/OpcNodes", "no OpcNodes to unpublish (UnpublishAllNodes removes all)")
	}
	err = s.b.ApplyConfig(r.Context(), func(c *config.Config) error {
		gs, err := entryGroups(c, e, raw.DataSetWriterGroup != "")
		if err != nil {
			return err
		}
		for _, f := range e.fields {
			found := false
			for _, gi := range gs {
				g := &c.WriterGroups[gi]
				for wi := range g.Writers {
					d := &g.Writers[wi]
					if raw.DataSetWriterID != "" && d.Name != e.writer {
						continue
					}
					if i := slices.IndexFunc(d.Fields, func(x config.Field) bool { return x.Node == f.Node }); i >= 0 {
						d.Fields = slices.Delete(d.Fields, i, i+1)
						found = true
					}
				}
			}
			if !found {
				return fieldProblemf(ErrNotFound, "/OpcNodes", "node %s is not published on %s", f.Node, e.endpoint.URL)
			}
		}
		dropEmpty(c)
		return nil
	})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, PublishedNodesResponse{})
}

func (s *Server) pubUnpublishAll(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r, s.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	var raw PublishedNodesEntry
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := unmarshalLenient(body, &raw); err != nil {
			return err
		}
	}
	if len(raw.OpcNodes) > 0 {
		return fieldProblemf(ErrInvalid, "/OpcNodes", "UnpublishAllNodes takes no OpcNodes (UnpublishNodes removes some)")
	}
	e, err := raw.resolve(false)
	if err != nil {
		return err
	}
	err = s.b.ApplyConfig(r.Context(), func(c *config.Config) error {
		if raw.EndpointURL == "" {
			c.WriterGroups = nil
			return nil
		}
		gs, err := entryGroups(c, e, raw.DataSetWriterGroup != "")
		if err != nil {
			return err
		}
		for _, gi := range gs {
			g := &c.WriterGroups[gi]
			if raw.DataSetWriterID != "" {
				g.Writers = slices.DeleteFunc(g.Writers, func(d config.DataSetWriter) bool { return d.Name == e.writer })
			} else {
				g.Writers = nil
			}
		}
		dropEmpty(c)
		return nil
	})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, PublishedNodesResponse{})
}

func (s *Server) pubAddOrUpdate(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r, s.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	var raws []PublishedNodesEntry
	if err := unmarshalLenient(body, &raws); err != nil {
		return err
	}
	entries := make([]*pubEntry, len(raws))
	for i := range raws {
		if entries[i], err = raws[i].resolve(true); err != nil {
			return &fieldError{field: fmt.Sprintf("/%d%s", i, fieldPath(err)), err: err}
		}
	}
	err = s.b.ApplyConfig(r.Context(), func(c *config.Config) error {
		for i, e := range entries {
			if err := publish(c, e, true); err != nil {
				return &fieldError{field: fmt.Sprintf("/%d%s", i, fieldPath(err)), err: err}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, PublishedNodesResponse{})
}

func fieldPath(err error) string {
	if fe, ok := err.(*fieldError); ok {
		return fe.field
	}
	return ""
}

// entriesOf describes the configuration as OPC Publisher entries, one per
// dataset writer.
func entriesOf(c *config.Config, nodes bool, only func(g *config.WriterGroup) bool) []PublishedNodesEntry {
	out := []PublishedNodesEntry{}
	for gi := range c.WriterGroups {
		g := &c.WriterGroups[gi]
		if only != nil && !only(g) {
			continue
		}
		ei := findEndpoint(c, g.Endpoint)
		for _, d := range g.Writers {
			e := PublishedNodesEntry{DataSetWriterGroup: g.Name, DataSetWriterID: d.Name}
			if ei >= 0 {
				ep := &c.Endpoints[ei]
				e.EndpointURL = ep.URL
				e.EndpointSecurityMode = ep.SecurityMode
				e.EndpointSecurityPolicy = ep.SecurityPolicy
				if ep.Identity.Type == "username" {
					e.OpcAuthenticationMode = "UsernamePassword"
					e.OpcAuthenticationUsername = ep.Identity.Username
				}
			}
			if g.PublishingInterval != 0 {
				ms := int(g.PublishingInterval.D().Milliseconds())
				e.DataSetPublishingInterval = &ms
			}
			if nodes {
				e.OpcNodes = opcNodesOf(&d)
			}
			out = append(out, e)
		}
	}
	return out
}

func opcNodesOf(d *config.DataSetWriter) []OpcNode {
	out := []OpcNode{}
	for _, f := range d.Fields {
		n := OpcNode{ID: f.Node, DataSetFieldID: f.Name}
		if f.SamplingInterval != nil {
			ms := int(f.SamplingInterval.D().Milliseconds())
			n.OpcSamplingInterval = &ms
		}
		if f.Heartbeat != 0 {
			ms := int(f.Heartbeat.D().Milliseconds())
			n.HeartbeatInterval = &ms
		}
		if f.QueueSize != 0 {
			q := f.QueueSize
			n.QueueSize = &q
		}
		out = append(out, n)
	}
	return out
}

func (s *Server) pubGetConfiguredEndpoints(w http.ResponseWriter, r *http.Request) error {
	nodes := false
	if v := r.URL.Query().Get("IncludeNodes"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fieldProblemf(ErrInvalid, "IncludeNodes", "IncludeNodes %q: want true or false", v)
		}
		nodes = b
	}
	return writeJSON(w, http.StatusOK, ConfiguredEndpointsResponse{Endpoints: entriesOf(s.b.Config(), nodes, nil)})
}

func (s *Server) pubGetNodes(w http.ResponseWriter, r *http.Request) error {
	raw, e, err := s.decodeEntry(r, true)
	if err != nil {
		return err
	}
	c := s.b.Config()
	gs, err := entryGroups(c, e, raw.DataSetWriterGroup != "")
	if err != nil {
		return err
	}
	out := ConfiguredNodesResponse{OpcNodes: []OpcNode{}}
	for _, gi := range gs {
		for _, d := range c.WriterGroups[gi].Writers {
			if raw.DataSetWriterID == "" || d.Name == e.writer {
				out.OpcNodes = append(out.OpcNodes, opcNodesOf(&d)...)
			}
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) pubDiagnostics(w http.ResponseWriter, r *http.Request) error {
	c := s.b.Config()
	stats := s.groupStats()
	eps := map[string]EndpointStatus{}
	for _, e := range s.b.Endpoints() {
		eps[e.Name] = e
	}
	out := []DiagnosticInfo{}
	for gi := range c.WriterGroups {
		g := &c.WriterGroups[gi]
		d := DiagnosticInfo{Endpoints: entriesOf(c, false, func(x *config.WriterGroup) bool { return x == g })}
		if ep, ok := eps[g.Endpoint]; ok {
			d.OpcEndpointConnected = ep.Connected
			d.ConnectionRetries = ep.Reconnects
			for _, sub := range ep.Subscriptions {
				d.MonitoredOpcNodesSucceededCount += sub.Items - sub.FailedItems
				d.MonitoredOpcNodesFailedCount += sub.FailedItems
				d.IngressEventNotifications += sub.Events
			}
		}
		if st := stats[g.Name]; st != nil {
			d.IngressDataChanges = st.NotificationsIn
			d.EncoderNotificationsProcessed = st.NotificationsOut
			d.EncoderNotificationsDropped = st.Errors
			d.EncoderIoTMessagesProcessed = st.Messages
			d.OutgressIoTMessageCount = st.Messages
		}
		out = append(out, d)
	}
	return writeJSON(w, http.StatusOK, out)
}
