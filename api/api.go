package api

import (
	"net/http"

	json "github.com/goccy/go-json"
)

const v1 = "/api/v1"

// apiRoutes is the route table: everything the API serves besides the
// mounts and the dashboard.
func (s *Server) apiRoutes() []*route {
	nf, bad, conflict, upstream, unavailable := http.StatusNotFound, http.StatusBadRequest, http.StatusConflict, http.StatusBadGateway, http.StatusServiceUnavailable
	body := []int{bad, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType}
	with := func(base []int, more ...int) []int { return append(append([]int(nil), base...), more...) }
	metricsRole := RoleRead
	if s.opts.PublicMetrics {
		metricsRole = RolePublic
	}
	coll := newCollector(s.b, s.opts.Histograms, s.opts.Version)
	coll.srv = s
	metrics, err := newMetricsHandler(coll)
	if err != nil { // a duplicate registration: a bug here, not a condition to handle
		panic(err)
	}
	var doc []byte
	rs := []*route{
		{method: "GET", path: "/healthz", id: "getHealth", tag: "health", summary: "Liveness: the process serves requests",
			role: RolePublic, response: Health{}, h: s.getHealthz},
		{method: "GET", path: "/readyz", id: "getReadiness", tag: "health",
			summary: "Readiness: the sessions and sinks are up (503 while not, and from the start of a shutdown)",
			role:    RolePublic, response: Readiness{}, problems: []int{unavailable}, h: s.getReadyz},
		{method: "GET", path: "/metrics", id: "getMetrics", tag: "health", summary: "Prometheus metrics",
			role: metricsRole, response: "", contentType: "text/plain",
			h: func(w http.ResponseWriter, r *http.Request) error { metrics.ServeHTTP(w, r); return nil }},
		{method: "GET", path: v1 + "/openapi.json", id: "getOpenAPI", tag: "meta", summary: "This document",
			role: RolePublic, response: map[string]any{},
			h: func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(doc)
				return nil
			}},
		{method: "POST", path: v1 + "/login", id: "login", tag: "meta",
			summary: "Sign a browser in with an API key: answers with a session cookie (HttpOnly, SameSite=Strict)",
			role:    RolePublic, request: LoginRequest{}, response: Login{}, problems: body, h: s.login},
		{method: "POST", path: v1 + "/logout", id: "logout", tag: "meta", summary: "End the browser's session",
			role: RolePublic, status: http.StatusNoContent, h: s.logout},
		{method: "GET", path: v1 + "/status", id: "getStatus", tag: "meta", summary: "Overview: version, readiness, endpoints, sinks",
			role: RoleRead, response: Status{}, h: s.getStatus},
		{method: "GET", path: v1 + "/config", id: "getConfig", tag: "meta",
			summary: "The running configuration (secrets redacted) and the outcome of the last change applied",
			role:    RoleAdmin, response: ConfigView{}, h: s.getConfig},
		{method: "POST", path: v1 + "/config/retry", id: "retryConfig", tag: "meta",
			summary: "Apply again what the last change could not (409 while a part still fails)",
			role:    RoleAdmin, response: ConfigView{}, problems: []int{conflict, unavailable}, h: s.retryConfig},

		{method: "GET", path: v1 + "/endpoints", id: "listEndpoints", tag: "endpoints",
			summary: "Endpoints with session and subscription state", role: RoleRead, query: []param{pLimit, pCursor},
			response: Page[Endpoint]{}, problems: []int{bad}, h: s.listEndpoints},
		{method: "POST", path: v1 + "/endpoints", id: "createEndpoint", tag: "endpoints", summary: "Add an endpoint",
			role: RoleAdmin, request: EndpointConfig{}, response: Endpoint{}, status: http.StatusCreated,
			problems: with(body, conflict), h: s.createEndpoint},
		{method: "GET", path: v1 + "/endpoints/{endpoint}", id: "getEndpoint", tag: "endpoints",
			summary: "An endpoint's state and configuration", role: RoleRead, response: Endpoint{}, problems: []int{nf}, h: s.getEndpoint},
		{method: "PUT", path: v1 + "/endpoints/{endpoint}", id: "putEndpoint", tag: "endpoints", summary: "Change an endpoint",
			role: RoleAdmin, request: EndpointConfig{}, response: Endpoint{}, problems: with(body, nf, conflict), h: s.putEndpoint},
		{method: "DELETE", path: v1 + "/endpoints/{endpoint}", id: "deleteEndpoint", tag: "endpoints",
			summary: "Remove an endpoint no writer group uses", role: RoleAdmin, status: http.StatusNoContent,
			problems: []int{nf, conflict}, h: s.deleteEndpoint},
		{method: "POST", path: v1 + "/endpoints/{endpoint}/read", id: "read", tag: "services", summary: "Read attributes",
			role: RoleRead, request: ReadRequest{}, response: ReadResponse{}, problems: with(body, nf, upstream, unavailable), h: s.read},
		{method: "POST", path: v1 + "/endpoints/{endpoint}/write", id: "write", tag: "services", summary: "Write attributes",
			role: RoleAdmin, request: WriteRequest{}, response: WriteResponse{}, problems: with(body, nf, upstream, unavailable, http.StatusTooManyRequests), h: s.write},
		{method: "POST", path: v1 + "/endpoints/{endpoint}/browse", id: "browse", tag: "services",
			summary: "Browse a node's references, a page at a time", role: RoleRead, request: BrowseRequest{},
			response: BrowseResponse{}, problems: with(body, nf, upstream, unavailable), h: s.browse},
		{method: "POST", path: v1 + "/endpoints/{endpoint}/browse/next", id: "browseNext", tag: "services",
			summary: "Continue a browse", role: RoleRead, request: BrowseNextRequest{}, response: BrowseResponse{},
			problems: with(body, nf, conflict, upstream, unavailable), h: s.browseNext},
		{method: "POST", path: v1 + "/endpoints/{endpoint}/translate", id: "translate", tag: "services",
			summary: "Translate browse paths to node ids", role: RoleRead, request: TranslateRequest{},
			response: TranslateResponse{}, problems: with(body, nf, upstream, unavailable), h: s.translate},
		{method: "POST", path: v1 + "/endpoints/{endpoint}/call", id: "call", tag: "services", summary: "Call methods",
			role: RoleAdmin, request: CallRequest{}, response: CallResponse{}, problems: with(body, nf, upstream, unavailable, http.StatusTooManyRequests), h: s.callMethods},

		{method: "GET", path: v1 + "/writer-groups", id: "listWriterGroups", tag: "writer groups", summary: "Writer groups",
			role: RoleRead, query: []param{pLimit, pCursor}, response: Page[WriterGroup]{}, problems: []int{bad}, h: s.listGroups},
		{method: "POST", path: v1 + "/writer-groups", id: "createWriterGroup", tag: "writer groups", summary: "Add a writer group",
			role: RoleAdmin, request: WriterGroup{}, response: WriterGroup{}, status: http.StatusCreated,
			problems: with(body, conflict), h: s.createGroup},
		{method: "GET", path: v1 + "/writer-groups/{group}", id: "getWriterGroup", tag: "writer groups", summary: "A writer group",
			role: RoleRead, response: WriterGroup{}, problems: []int{nf}, h: s.getGroup},
		{method: "PUT", path: v1 + "/writer-groups/{group}", id: "putWriterGroup", tag: "writer groups",
			summary: "Replace a writer group (its writers included)", role: RoleAdmin, request: WriterGroup{},
			response: WriterGroup{}, problems: with(body, nf, conflict), h: s.putGroup},
		{method: "DELETE", path: v1 + "/writer-groups/{group}", id: "deleteWriterGroup", tag: "writer groups",
			summary: "Remove a writer group", role: RoleAdmin, status: http.StatusNoContent, problems: []int{nf, conflict}, h: s.deleteGroup},
		{method: "GET", path: v1 + "/writer-groups/{group}/values", id: "getWriterGroupValues", tag: "values",
			summary: "Last values of a writer group", role: RoleRead, query: []param{pLimit, pCursor, pEncoding},
			response: Page[LastValue]{}, problems: []int{bad, nf}, h: s.getGroupValues},
		{method: "GET", path: v1 + "/writer-groups/{group}/writers", id: "listWriters", tag: "writer groups",
			summary: "Dataset writers of a group", role: RoleRead, query: []param{pLimit, pCursor},
			response: Page[DataSetWriter]{}, problems: []int{bad, nf}, h: s.listWriters},
		{method: "POST", path: v1 + "/writer-groups/{group}/writers", id: "createWriter", tag: "writer groups",
			summary: "Add a dataset writer", role: RoleAdmin, request: DataSetWriter{}, response: DataSetWriter{},
			status: http.StatusCreated, problems: with(body, nf, conflict), h: s.createWriter},
		{method: "GET", path: v1 + "/writer-groups/{group}/writers/{writer}", id: "getWriter", tag: "writer groups",
			summary: "A dataset writer", role: RoleRead, response: DataSetWriter{}, problems: []int{nf}, h: s.getWriter},
		{method: "PUT", path: v1 + "/writer-groups/{group}/writers/{writer}", id: "putWriter", tag: "writer groups",
			summary: "Replace a dataset writer", role: RoleAdmin, request: DataSetWriter{}, response: DataSetWriter{},
			problems: with(body, nf, conflict), h: s.putWriter},
		{method: "DELETE", path: v1 + "/writer-groups/{group}/writers/{writer}", id: "deleteWriter", tag: "writer groups",
			summary: "Remove a dataset writer", role: RoleAdmin, status: http.StatusNoContent, problems: []int{nf, conflict}, h: s.deleteWriter},
		{method: "GET", path: v1 + "/writer-groups/{group}/writers/{writer}/fields", id: "listFields", tag: "writer groups",
			summary: "Fields (nodes) of a dataset writer", role: RoleRead, query: []param{pLimit, pCursor},
			response: Page[Field]{}, problems: []int{bad, nf}, h: s.listFields},
		{method: "POST", path: v1 + "/writer-groups/{group}/writers/{writer}/fields", id: "addFields", tag: "writer groups",
			summary: "Add fields (all or none)", role: RoleAdmin, request: FieldsRequest{}, response: DataSetWriter{},
			problems: with(body, nf, conflict), h: s.addFields},
		{method: "PUT", path: v1 + "/writer-groups/{group}/writers/{writer}/fields/{field}", id: "putField", tag: "writer groups",
			summary: "Change a field (named by name, or by node id)", role: RoleAdmin, request: Field{}, response: DataSetWriter{},
			problems: with(body, nf, conflict), h: s.putField},
		{method: "DELETE", path: v1 + "/writer-groups/{group}/writers/{writer}/fields/{field}", id: "deleteField", tag: "writer groups",
			summary: "Remove a field (named by name, or by node id)", role: RoleAdmin, status: http.StatusNoContent,
			problems: []int{nf, conflict}, h: s.deleteField},
		{method: "GET", path: v1 + "/writer-groups/{group}/writers/{writer}/values", id: "getWriterValues", tag: "values",
			summary: "Last values of a dataset writer", role: RoleRead, query: []param{pLimit, pCursor, pEncoding},
			response: Page[LastValue]{}, problems: []int{bad, nf}, h: s.getWriterValues},
		{method: "GET", path: v1 + "/writer-groups/{group}/writers/{writer}/metadata", id: "getMetadata", tag: "values",
			summary: "DataSetMetaData of a dataset writer (OPC UA JSON)", role: RoleRead, query: []param{pEncoding},
			response: map[string]any{}, problems: []int{bad, nf, unavailable}, h: s.getMetadata},
		{method: "GET", path: v1 + "/values", id: "getValues", tag: "values",
			summary: "Last values, all or by group, writer or node", role: RoleRead,
			query: []param{{"group", "only this writer group", "string"}, {"writer", "only this dataset writer (with group)", "string"},
				{"node", "only fields of this node id", "string"}, pLimit, pCursor, pEncoding},
			response: Page[LastValue]{}, problems: []int{bad, nf}, h: s.getValues},

		{method: "GET", path: v1 + "/certificates", id: "getCertificates", tag: "certificates",
			summary: "Own, trusted, issuer and rejected certificates", role: RoleRead, query: []param{pEndpointStore},
			response: Certificates{}, problems: []int{nf}, h: s.getCertificates},
		{method: "GET", path: v1 + "/certificates/{folder}", id: "listCertificates", tag: "certificates",
			summary: "The certificates of one folder (own, trusted, issuers, rejected)", role: RoleRead,
			query: []param{pEndpointStore, pLimit, pCursor}, response: Page[Certificate]{}, problems: []int{bad, nf}, h: s.getCertificateFolder},
		{method: "POST", path: v1 + "/certificates/rejected/{thumbprint}/trust", id: "trustCertificate", tag: "certificates",
			summary: "Trust a rejected certificate (moved to trusted)", role: RoleAdmin, query: []param{pEndpointStore},
			response: Certificate{}, problems: []int{bad, nf}, h: s.trustRejected},
		{method: "DELETE", path: v1 + "/certificates/trusted/{thumbprint}", id: "removeTrustedCertificate", tag: "certificates",
			summary: "Remove a trusted certificate", role: RoleAdmin, query: []param{pEndpointStore}, status: http.StatusNoContent,
			problems: []int{bad, nf}, h: s.removeTrusted},
	}
	rs = append(rs, s.publisherRoutes()...)
	rs = append(rs, s.commandRoutes()...)
	s.routes = rs
	d, err := json.Marshal(s.openAPI())
	if err != nil {
		panic(err)
	}
	doc = d
	return rs
}
