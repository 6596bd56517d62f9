package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/config/publishednodes"
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
// An entry maps onto the configuration as a publishednodes.json file does:
// package bridge/config/publishednodes has the one mapping (and the
// operations on a configuration), this file only the HTTP. Members of OPC
// Publisher's model that have no meaning here (IoT Hub routing, batching,
// cyclic reads …) are accepted and ignored, so that existing payloads need
// no editing; what cannot be honoured (certificate user authentication by
// store subject) is refused with a problem naming the member, before
// anything changes.

// PublishedNodesEntry is OPC Publisher's PublishedNodesEntryModel (the
// members we honour).
type PublishedNodesEntry = publishednodes.Entry

// OpcNode is OPC Publisher's OpcNodeModel (the members we honour).
type OpcNode = publishednodes.OpcNode

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
			summary: "AddOrUpdateEndpoints: replace the nodes of the entries' writers (entries of one writer add up; no nodes: remove it)",
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

// entryProblem maps an issue of the mapping to a problem naming the member
// (a JSON pointer below prefix: "/1" for the second entry of a list).
func entryProblem(prefix string, err error) error {
	var is *publishednodes.Issue
	if !errors.As(err, &is) {
		return err
	}
	k := ErrInvalid
	if errors.Is(err, publishednodes.ErrNotFound) {
		k = ErrNotFound
	}
	return fieldProblemf(k, prefix+pointer(is.Path), "%s", is.Message)
}

// pointer turns a path of the mapping (OpcNodes[2].QueueSize) into a JSON
// pointer (/OpcNodes/2/QueueSize).
func pointer(path string) string {
	if path == "" {
		return ""
	}
	return "/" + strings.NewReplacer("[", "/", "].", "/", "]", "", ".", "/").Replace(path)
}

// resolve maps an entry, refusing it with its first error; names are held
// to the API's length as everywhere in it.
func resolve(prefix string, e *PublishedNodesEntry) (*publishednodes.Resolved, error) {
	r, errs, _ := publishednodes.Resolve(e)
	if len(errs) > 0 {
		return nil, entryProblem(prefix, &errs[0])
	}
	for _, n := range []struct{ field, what, name string }{{"/DataSetWriterGroup", "writer group", r.Group}, {"/DataSetWriterId", "dataset writer", r.Writer}} {
		if n.name == "" {
			continue
		}
		if err := checkName(prefix+n.field, n.what, n.name); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (s *Server) decodeEntry(r *http.Request) (*publishednodes.Resolved, error) {
	body, err := readBody(r, s.opts.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	var e PublishedNodesEntry
	if err := unmarshalLenient(body, &e); err != nil {
		return nil, err
	}
	return resolve("", &e)
}

// apply runs a change of the mapping on the configuration.
func (s *Server) apply(w http.ResponseWriter, r *http.Request, change func(c *config.Config) error) error {
	if err := s.b.ApplyConfig(r.Context(), change); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, PublishedNodesResponse{})
}

func (s *Server) pubPublishNodes(w http.ResponseWriter, r *http.Request) error {
	e, err := s.decodeEntry(r)
	if err != nil {
		return err
	}
	if len(e.Nodes) == 0 {
		return fieldProblemf(ErrInvalid, "/OpcNodes", "no OpcNodes to publish")
	}
	return s.apply(w, r, func(c *config.Config) error {
		publishednodes.Publish(c, e)
		return nil
	})
}

func (s *Server) pubUnpublishNodes(w http.ResponseWriter, r *http.Request) error {
	e, err := s.decodeEntry(r)
	if err != nil {
		return err
	}
	if len(e.Nodes) == 0 {
		return fieldProblemf(ErrInvalid, "/OpcNodes", "no OpcNodes to unpublish (UnpublishAllNodes removes all)")
	}
	return s.apply(w, r, func(c *config.Config) error { return entryProblem("", publishednodes.Unpublish(c, e)) })
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
	var e *publishednodes.Resolved // nil: no EndpointUrl, everything
	if raw.EndpointURL != "" {
		if e, err = resolve("", &raw); err != nil {
			return err
		}
	}
	return s.apply(w, r, func(c *config.Config) error { return entryProblem("", publishednodes.UnpublishAll(c, e)) })
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
	entries := make([]*publishednodes.Resolved, len(raws))
	for i := range raws {
		if entries[i], err = resolve("/"+strconv.Itoa(i), &raws[i]); err != nil {
			return err
		}
	}
	return s.apply(w, r, func(c *config.Config) error {
		publishednodes.Replace(c, entries...)
		return nil
	})
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
	return writeJSON(w, http.StatusOK, ConfiguredEndpointsResponse{Endpoints: publishednodes.Entries(s.b.Config(), nodes)})
}

func (s *Server) pubGetNodes(w http.ResponseWriter, r *http.Request) error {
	e, err := s.decodeEntry(r)
	if err != nil {
		return err
	}
	nodes, err := publishednodes.Nodes(s.b.Config(), e)
	if err != nil {
		return entryProblem("", err)
	}
	return writeJSON(w, http.StatusOK, ConfiguredNodesResponse{OpcNodes: nodes})
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
		d := DiagnosticInfo{Endpoints: publishednodes.GroupEntries(c, g, false)}
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
