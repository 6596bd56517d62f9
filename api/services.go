package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/bridge/command"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/ua"
)

// On-demand services against an upstream server: Read, Write, Browse (with
// continuation), TranslateBrowsePathsToNodeIds and Call. They run on the
// endpoint's session (Backend.Session) and are split by the client to fit
// the server's OperationLimits. Values travel as OPC UA JSON (Part 6), node
// ids in their string form; nsu= forms are resolved with the server's
// namespace array.

// maxServiceOperations bounds the operations of one request (the client
// splits them further for the server).
const maxServiceOperations = 10000

// attributeIDs are the attribute names of Part 3 §5.9 (Table 1), by id.
var attributeIDs = [...]string{1: "NodeId", "NodeClass", "BrowseName", "DisplayName", "Description", "WriteMask",
	"UserWriteMask", "IsAbstract", "Symmetric", "InverseName", "ContainsNoLoops", "EventNotifier", "Value",
	"DataType", "ValueRank", "ArrayDimensions", "AccessLevel", "UserAccessLevel", "MinimumSamplingInterval",
	"Historizing", "Executable", "UserExecutable", "DataTypeDefinition", "RolePermissions",
	"UserRolePermissions", "AccessRestrictions", "AccessLevelEx"}

func parseAttribute(field, s string) (uint32, error) {
	if s == "" {
		return client.AttributeValue, nil
	}
	for i, n := range attributeIDs {
		if n != "" && strings.EqualFold(n, s) {
			return uint32(i), nil
		}
	}
	if v, err := strconv.ParseUint(s, 10, 32); err == nil && v >= 1 && int(v) < len(attributeIDs) {
		return uint32(v), nil
	}
	return 0, fieldProblemf(ErrInvalid, field, "attribute %q: want a Part 3 attribute name (Value, DisplayName, …) or id", s)
}

// call is one on-demand call: the endpoint's client, its namespace array, and
// a deadline.
type call struct {
	ctx    context.Context
	cancel context.CancelFunc
	c      *client.Client
	ns     []string
}

func (s *Server) session(r *http.Request) (*call, error) {
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
	name := r.PathValue("endpoint")
	c, err := s.b.Session(ctx, name)
	if err != nil {
		cancel()
		var k *problemKind
		if errors.As(err, &k) {
			return nil, err
		}
		return nil, fmt.Errorf("endpoint %q: %w%w", name, err, detailOnly{ErrUnavailable})
	}
	return &call{ctx: ctx, cancel: cancel, c: c, ns: c.Namespaces()}, nil
}

// node parses a node id of a request, resolving nsu= with the server's
// namespace array.
func (k *call) node(field, s string) (ua.NodeID, error) {
	if s == "" {
		return ua.NodeID{}, fieldProblemf(ErrInvalidNodeID, field, "a node id is required")
	}
	x, err := ua.ParseExpandedNodeID(s)
	if err != nil {
		return ua.NodeID{}, fieldProblemf(ErrInvalidNodeID, field, "node id %q is not valid (want \"ns=<index>;s=<name>\", \"nsu=<uri>;i=<n>\", \"i=<n>\", …)", s)
	}
	n, err := x.Resolve(k.ns)
	if err != nil {
		return ua.NodeID{}, fieldProblemf(ErrInvalidNodeID, field, "node id %q: %v", s, err)
	}
	return n, nil
}

// upstreamError maps the failure of a service call.
func upstreamError(service string, err error) error {
	var k *problemKind
	if errors.As(err, &k) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: the server did not answer in time%w", service, detailOnly{ErrUpstream})
	}
	return fmt.Errorf("%s: %v%w", service, err, detailOnly{ErrUpstream})
}

func (k *call) opts() jsonenc.Options { return jsonenc.Options{NamespaceURIs: k.ns} }

func (k *call) decoder() *jsonenc.Decoder {
	return jsonenc.NewDecoder(jsonenc.DecoderOptions{NamespaceURIs: k.ns, MaxArrayLength: 1 << 16})
}

// StatusCode is an OPC UA StatusCode: the number and its symbolic name.
type StatusCode struct {
	Code   uint32 `json:"code"`
	Symbol string `json:"symbol,omitempty"`
}

func statusOf(s ua.StatusCode) StatusCode { return StatusCode{Code: uint32(s), Symbol: s.Name()} }

func checkCount(field string, n int) error {
	if n == 0 {
		return fieldProblemf(ErrInvalid, field, "nothing to do: the list is empty")
	}
	if n > maxServiceOperations {
		return fieldProblemf(ErrInvalid, field, "%d operations: at most %d in one request", n, maxServiceOperations)
	}
	return nil
}

// ReadRequest reads attributes of nodes.
type ReadRequest struct {
	Nodes []ReadNode `json:"nodes"`
	// MaxAge of a cached value the server may return; default 0 (read now).
	MaxAge *Duration `json:"maxAge,omitempty"`
	// Timestamps: source, server, both (default) or neither.
	Timestamps string `json:"timestamps,omitempty"`
}

// ReadNode is one attribute to read.
type ReadNode struct {
	Node       string `json:"node"`
	Attribute  string `json:"attribute,omitempty" doc:"Value (default), DisplayName, BrowseName, DataType, … or the attribute id"`
	IndexRange string `json:"indexRange,omitempty"`
}

// ReadResponse has a DataValue per node, in request order.
type ReadResponse struct {
	Results []json.RawMessage `json:"results" doc:"OPC UA JSON DataValues"`
}

var timestamps = map[string]ua.TimestampsToReturn{
	"": ua.TimestampsToReturnBoth, "both": ua.TimestampsToReturnBoth, "source": ua.TimestampsToReturnSource,
	"server": ua.TimestampsToReturnServer, "neither": ua.TimestampsToReturnNeither,
}

func (s *Server) read(w http.ResponseWriter, r *http.Request) error {
	var req ReadRequest
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if err := checkCount("/nodes", len(req.Nodes)); err != nil {
		return err
	}
	ts, ok := timestamps[req.Timestamps]
	if !ok {
		return fieldProblemf(ErrInvalid, "/timestamps", "%q is not one of source, server, both, neither", req.Timestamps)
	}
	if err := checkDuration("/maxAge", req.MaxAge); err != nil {
		return err
	}
	k, err := s.session(r)
	if err != nil {
		return err
	}
	defer k.cancel()
	ur := &ua.ReadRequest{TimestampsToReturn: ts, NodesToRead: make([]ua.ReadValueID, len(req.Nodes))}
	if req.MaxAge != nil {
		ur.MaxAge = float64(*req.MaxAge) / 1e6
	}
	for i, n := range req.Nodes {
		at := fmt.Sprintf("/nodes/%d", i)
		id, err := k.node(at+"/node", n.Node)
		if err != nil {
			return err
		}
		attr, err := parseAttribute(at+"/attribute", n.Attribute)
		if err != nil {
			return err
		}
		ur.NodesToRead[i] = ua.ReadValueID{NodeID: id, AttributeID: attr, IndexRange: n.IndexRange}
	}
	resp, err := k.c.Read(k.ctx, ur)
	if err != nil {
		return upstreamError("Read", err)
	}
	out := ReadResponse{Results: make([]json.RawMessage, len(resp.Results))}
	for i := range resp.Results {
		js, err := jsonenc.AppendDataValue(nil, &resp.Results[i], k.opts())
		if err != nil {
			return fmt.Errorf("encoding result %d: %w", i, err)
		}
		if len(js) == 0 {
			js = []byte("{}")
		}
		out.Results[i] = js
	}
	return writeJSON(w, http.StatusOK, out)
}

// WriteRequest writes attributes of nodes.
type WriteRequest struct {
	Nodes []WriteNode `json:"nodes"`
}

// WriteNode is one value to write. Value is an OPC UA JSON Variant
// ({"UaType":11,"Value":1.5}); with Type it is the bare value of that
// built-in type (1.5 with "type":"Double").
type WriteNode struct {
	Node       string          `json:"node"`
	Attribute  string          `json:"attribute,omitempty" doc:"Value (default) or the attribute name or id"`
	IndexRange string          `json:"indexRange,omitempty"`
	Type       string          `json:"type,omitempty" doc:"built-in type name (Double, Int32, String, …) of a bare value"`
	Array      bool            `json:"array,omitempty" doc:"with type: the value is an array of it"`
	Value      json.RawMessage `json:"value" doc:"OPC UA JSON Variant, or a bare value of type" schema:"any"`
}

// WriteResponse has a StatusCode per node, in request order.
type WriteResponse struct {
	Results []StatusCode `json:"results"`
}

func typeByName(s string) (ua.TypeID, bool) {
	for t := ua.TypeBoolean; t <= ua.TypeDiagnosticInfo; t++ {
		if strings.EqualFold(t.String(), s) {
			return t, true
		}
	}
	return 0, false
}

// variant decodes the value of a request member.
func (k *call) variant(field string, raw json.RawMessage, typ string, array bool) (ua.Variant, error) {
	if len(raw) == 0 {
		return ua.Variant{}, fieldProblemf(ErrInvalid, field, "a value is required")
	}
	d := k.decoder()
	if typ != "" {
		t, ok := typeByName(typ)
		if !ok {
			return ua.Variant{}, fieldProblemf(ErrInvalid, field, "type %q is not a built-in type name (Boolean, Int32, Double, String, …)", typ)
		}
		v, err := d.DecodeValue(raw, t, array)
		if err != nil {
			return ua.Variant{}, fieldProblemf(ErrInvalid, field, "not a %s: %s", typ, strings.TrimPrefix(err.Error(), "jsonenc: "))
		}
		return v, nil
	}
	v, err := d.DecodeVariant(raw)
	if err != nil {
		return ua.Variant{}, fieldProblemf(ErrInvalid, field, "not an OPC UA JSON Variant ({\"UaType\":11,\"Value\":1.5}): %s", strings.TrimPrefix(err.Error(), "jsonenc: "))
	}
	return v, nil
}

func (s *Server) write(w http.ResponseWriter, r *http.Request) error {
	var req WriteRequest
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if err := checkCount("/nodes", len(req.Nodes)); err != nil {
		return err
	}
	gate, err := s.gate(r)
	if err != nil {
		return err
	}
	k, err := s.session(r)
	if err != nil {
		return err
	}
	defer k.cancel()
	uw := &ua.WriteRequest{NodesToWrite: make([]ua.WriteValue, len(req.Nodes))}
	for i, n := range req.Nodes {
		at := fmt.Sprintf("/nodes/%d", i)
		id, err := k.node(at+"/node", n.Node)
		if err != nil {
			return err
		}
		attr, err := parseAttribute(at+"/attribute", n.Attribute)
		if err != nil {
			return err
		}
		if attr != client.AttributeValue {
			return fieldProblemf(ErrForbidden, at+"/attribute", "only the Value attribute may be written (command rules grant values)")
		}
		if err := gate.check(at+"/node", command.OpWrite, id, ua.NodeID{}, k.ns); err != nil {
			return err
		}
		v, err := k.variant(at+"/value", n.Value, n.Type, n.Array)
		if err != nil {
			return err
		}
		uw.NodesToWrite[i] = ua.WriteValue{NodeID: id, AttributeID: attr, IndexRange: n.IndexRange, Value: ua.DataValue{Value: v}}
	}
	// The values before, for the command log (best effort).
	old := make([]json.RawMessage, len(uw.NodesToWrite))
	rr := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnNeither, NodesToRead: make([]ua.ReadValueID, len(uw.NodesToWrite))}
	for i := range uw.NodesToWrite {
		rr.NodesToRead[i] = ua.ReadValueID{NodeID: uw.NodesToWrite[i].NodeID, AttributeID: client.AttributeValue, IndexRange: uw.NodesToWrite[i].IndexRange}
	}
	if before, err := k.c.Read(k.ctx, rr); err == nil {
		for i := range before.Results {
			if before.Results[i].Status.IsGood() {
				old[i] = variantJSON(&before.Results[i].Value, k.ns)
			}
		}
	}
	resp, err := k.c.Write(k.ctx, uw)
	if err != nil {
		for i := range uw.NodesToWrite {
			wv := &uw.NodesToWrite[i]
			gate.e.Record(gate.caller, command.OpWrite, command.Target{Endpoint: gate.endpoint, Node: wv.NodeID.String()}, old[i],
				variantJSON(&wv.Value.Value, k.ns), ua.StatusGood, err, gate.start)
		}
		return upstreamError("Write", err)
	}
	out := WriteResponse{Results: make([]StatusCode, len(resp.Results))}
	for i, sc := range resp.Results {
		out.Results[i] = statusOf(sc)
		wv := &uw.NodesToWrite[i]
		gate.e.Record(gate.caller, command.OpWrite, command.Target{Endpoint: gate.endpoint, Node: wv.NodeID.String()}, old[i],
			variantJSON(&wv.Value.Value, k.ns), sc, nil, gate.start)
	}
	return writeJSON(w, http.StatusOK, out)
}

// BrowseRequest browses the references of one node, a page at a time.
type BrowseRequest struct {
	Node            string `json:"node" doc:"default the Objects folder (i=85)"`
	Direction       string `json:"direction,omitempty" doc:"forward (default), inverse or both"`
	ReferenceType   string `json:"referenceType,omitempty" doc:"node id; default HierarchicalReferences (i=33)"`
	IncludeSubtypes *bool  `json:"includeSubtypes,omitempty" doc:"default true"`
	NodeClassMask   uint32 `json:"nodeClassMask,omitempty" doc:"0: every class"`
	// MaxReferences per answer; more come with continuationPoint.
	MaxReferences uint32 `json:"maxReferences,omitempty" doc:"references per page; default 1000"`
}

// BrowseNextRequest continues (or releases) a browse.
type BrowseNextRequest struct {
	ContinuationPoint string `json:"continuationPoint"`
	Release           bool   `json:"release,omitempty" doc:"free the continuation point instead of continuing"`
}

// BrowseResponse is a page of references.
type BrowseResponse struct {
	StatusCode StatusCode  `json:"statusCode"`
	References []Reference `json:"references"`
	// ContinuationPoint continues the browse (POST …/browse/next); absent
	// when there is no more.
	ContinuationPoint string `json:"continuationPoint,omitempty"`
}

// Reference is a ReferenceDescription.
type Reference struct {
	ReferenceType  string `json:"referenceType"`
	IsForward      bool   `json:"isForward"`
	Node           string `json:"node"`
	BrowseName     string `json:"browseName"`
	DisplayName    string `json:"displayName"`
	NodeClass      string `json:"nodeClass"`
	TypeDefinition string `json:"typeDefinition,omitempty"`
}

const defaultBrowseReferences = 1000

var directions = map[string]ua.BrowseDirection{
	"": ua.BrowseDirectionForward, "forward": ua.BrowseDirectionForward,
	"inverse": ua.BrowseDirectionInverse, "both": ua.BrowseDirectionBoth,
}

func (k *call) references(refs []ua.ReferenceDescription) []Reference {
	out := make([]Reference, len(refs))
	for i := range refs {
		rd := &refs[i]
		out[i] = Reference{ReferenceType: rd.ReferenceTypeID.String(), IsForward: rd.IsForward, Node: rd.NodeID.String(),
			BrowseName: rd.BrowseName.String(), DisplayName: rd.DisplayName.Text, NodeClass: rd.NodeClass.String()}
		if !rd.TypeDefinition.IsNull() {
			out[i].TypeDefinition = rd.TypeDefinition.String()
		}
	}
	return out
}

func (s *Server) browse(w http.ResponseWriter, r *http.Request) error {
	var req BrowseRequest
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	dir, ok := directions[req.Direction]
	if !ok {
		return fieldProblemf(ErrInvalid, "/direction", "%q is not one of forward, inverse, both", req.Direction)
	}
	k, err := s.session(r)
	if err != nil {
		return err
	}
	defer k.cancel()
	node := ua.NewNumericNodeID(0, ua.ID_ObjectsFolder)
	if req.Node != "" {
		if node, err = k.node("/node", req.Node); err != nil {
			return err
		}
	}
	refType := ua.NewNumericNodeID(0, ua.ID_HierarchicalReferences)
	if req.ReferenceType != "" {
		if refType, err = k.node("/referenceType", req.ReferenceType); err != nil {
			return err
		}
	}
	max := req.MaxReferences
	if max == 0 {
		max = defaultBrowseReferences
	}
	sub := req.IncludeSubtypes == nil || *req.IncludeSubtypes
	breq := &ua.BrowseRequest{RequestedMaxReferencesPerNode: max, NodesToBrowse: []ua.BrowseDescription{{
		NodeID: node, BrowseDirection: dir, ReferenceTypeID: refType, IncludeSubtypes: sub,
		NodeClassMask: req.NodeClassMask, ResultMask: uint32(ua.BrowseResultMaskAll)}}}
	var resp ua.BrowseResponse
	// One node, a page of references: sent as it is, so the continuation
	// point comes back to the caller instead of being followed here.
	if _, err := k.c.Send(k.ctx, breq, &resp); err != nil {
		return upstreamError("Browse", err)
	}
	if len(resp.Results) != 1 {
		return fmt.Errorf("the Browse response has %d results for 1 node%w", len(resp.Results), detailOnly{ErrUpstream})
	}
	res := &resp.Results[0]
	return writeJSON(w, http.StatusOK, BrowseResponse{StatusCode: statusOf(res.StatusCode),
		References: k.references(res.References), ContinuationPoint: s.cps.add(k.ctx, r.PathValue("endpoint"), callerOf(r), k.c, res.ContinuationPoint)})
}

// callerOf names who sent a request (its key's name; "anonymous").
func callerOf(r *http.Request) string {
	if who, _ := r.Context().Value(ctxPrincipal).(*principal); who != nil && who.name != "" {
		return who.name
	}
	return "anonymous"
}

func (s *Server) browseNext(w http.ResponseWriter, r *http.Request) error {
	var req BrowseNextRequest
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if req.ContinuationPoint == "" {
		return fieldProblemf(ErrInvalid, "/continuationPoint", "a continuation point is required")
	}
	k, err := s.session(r)
	if err != nil {
		return err
	}
	defer k.cancel()
	cp, err := s.cps.take(r.PathValue("endpoint"), callerOf(r), k.c, req.ContinuationPoint)
	if err != nil {
		return err
	}
	resp, err := k.c.BrowseNext(k.ctx, &ua.BrowseNextRequest{ReleaseContinuationPoints: req.Release, ContinuationPoints: [][]byte{cp}})
	if err != nil {
		return upstreamError("BrowseNext", err)
	}
	if len(resp.Results) != 1 {
		return fmt.Errorf("the BrowseNext response has %d results for 1 continuation point%w", len(resp.Results), detailOnly{ErrUpstream})
	}
	res := &resp.Results[0]
	return writeJSON(w, http.StatusOK, BrowseResponse{StatusCode: statusOf(res.StatusCode),
		References: k.references(res.References), ContinuationPoint: s.cps.add(k.ctx, r.PathValue("endpoint"), callerOf(r), k.c, res.ContinuationPoint)})
}

// TranslateRequest translates browse paths to node ids.
type TranslateRequest struct {
	Paths []BrowsePathText `json:"paths"`
}

// BrowsePathText is a starting node and a relative path in the text form
// of Part 4 Annex A: "/1:Demo/1:Counter" follows hierarchical references,
// "." aggregates; '&' escapes a reserved character in a name.
type BrowsePathText struct {
	Start string `json:"start" doc:"default the Objects folder (i=85)"`
	Path  string `json:"path" doc:"e.g. /1:Demo/1:Counter"`
}

// TranslateResponse has a result per path, in request order.
type TranslateResponse struct {
	Results []BrowsePathResult `json:"results"`
}

// BrowsePathResult is the targets of one path.
type BrowsePathResult struct {
	StatusCode StatusCode `json:"statusCode"`
	Targets    []Target   `json:"targets"`
}

// Target is a node a path leads to.
type Target struct {
	Node string `json:"node"`
	// RemainingPathIndex is the first element not followed (when the path
	// leaves the server); absent when the whole path was followed.
	RemainingPathIndex *uint32 `json:"remainingPathIndex,omitempty"`
}

// parseRelativePath parses the text form of a relative path.
func parseRelativePath(field, s string) (ua.RelativePath, error) {
	var out ua.RelativePath
	if s == "" {
		return out, fieldProblemf(ErrInvalid, field, "a path is required")
	}
	i := 0
	for i < len(s) {
		var el ua.RelativePathElement
		switch s[i] {
		case '/':
			el = ua.RelativePathElement{ReferenceTypeID: ua.NewNumericNodeID(0, ua.ID_HierarchicalReferences), IncludeSubtypes: true}
		case '.':
			el = ua.RelativePathElement{ReferenceTypeID: ua.NewNumericNodeID(0, ua.ID_Aggregates), IncludeSubtypes: true}
		default:
			return out, fieldProblemf(ErrInvalid, field, "path %q: at byte %d: an element starts with '/' or '.'", s, i)
		}
		i++
		var name strings.Builder
		for i < len(s) && s[i] != '/' && s[i] != '.' {
			if s[i] == '<' || s[i] == '>' || s[i] == '!' || s[i] == '#' {
				return out, fieldProblemf(ErrInvalid, field, "path %q: reference type elements (<…>) are not supported; escape '%c' with '&'", s, s[i])
			}
			if s[i] == '&' && i+1 < len(s) {
				i++
			}
			name.WriteByte(s[i])
			i++
		}
		qn := name.String()
		if ns, n, ok := strings.Cut(qn, ":"); ok {
			if v, err := strconv.ParseUint(ns, 10, 16); err == nil {
				el.TargetName = ua.NewQualifiedName(uint16(v), n)
			} else {
				el.TargetName = ua.NewQualifiedName(0, qn)
			}
		} else {
			el.TargetName = ua.NewQualifiedName(0, qn)
		}
		if el.TargetName.Name == "" {
			return out, fieldProblemf(ErrInvalid, field, "path %q: an element has no name", s)
		}
		out.Elements = append(out.Elements, el)
	}
	return out, nil
}

func (s *Server) translate(w http.ResponseWriter, r *http.Request) error {
	var req TranslateRequest
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if err := checkCount("/paths", len(req.Paths)); err != nil {
		return err
	}
	paths := make([]ua.RelativePath, len(req.Paths))
	for i, p := range req.Paths {
		var err error
		if paths[i], err = parseRelativePath(fmt.Sprintf("/paths/%d/path", i), p.Path); err != nil {
			return err
		}
	}
	k, err := s.session(r)
	if err != nil {
		return err
	}
	defer k.cancel()
	tr := &ua.TranslateBrowsePathsToNodeIDsRequest{BrowsePaths: make([]ua.BrowsePath, len(req.Paths))}
	for i, p := range req.Paths {
		start := ua.NewNumericNodeID(0, ua.ID_ObjectsFolder)
		if p.Start != "" {
			if start, err = k.node(fmt.Sprintf("/paths/%d/start", i), p.Start); err != nil {
				return err
			}
		}
		tr.BrowsePaths[i] = ua.BrowsePath{StartingNode: start, RelativePath: paths[i]}
	}
	resp, err := k.c.TranslateBrowsePathsToNodeIDs(k.ctx, tr)
	if err != nil {
		return upstreamError("TranslateBrowsePathsToNodeIds", err)
	}
	out := TranslateResponse{Results: make([]BrowsePathResult, len(resp.Results))}
	for i, res := range resp.Results {
		br := BrowsePathResult{StatusCode: statusOf(res.StatusCode), Targets: make([]Target, len(res.Targets))}
		for j, t := range res.Targets {
			br.Targets[j] = Target{Node: t.TargetID.String()}
			if t.RemainingPathIndex != 0xFFFFFFFF {
				v := t.RemainingPathIndex
				br.Targets[j].RemainingPathIndex = &v
			}
		}
		out.Results[i] = br
	}
	return writeJSON(w, http.StatusOK, out)
}

// CallRequest calls methods.
type CallRequest struct {
	Calls []MethodCall `json:"calls"`
}

// MethodCall is one method call; Arguments are OPC UA JSON Variants.
type MethodCall struct {
	Object    string            `json:"object"`
	Method    string            `json:"method"`
	Arguments []json.RawMessage `json:"arguments,omitempty" doc:"OPC UA JSON Variants ({\"UaType\":11,\"Value\":1.5})"`
}

// CallResponse has a result per call, in request order.
type CallResponse struct {
	Results []CallResult `json:"results"`
}

// CallResult is the outcome of one call.
type CallResult struct {
	StatusCode           StatusCode        `json:"statusCode"`
	InputArgumentResults []StatusCode      `json:"inputArgumentResults,omitempty"`
	OutputArguments      []json.RawMessage `json:"outputArguments" doc:"OPC UA JSON Variants"`
}

func (s *Server) callMethods(w http.ResponseWriter, r *http.Request) error {
	var req CallRequest
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if err := checkCount("/calls", len(req.Calls)); err != nil {
		return err
	}
	gate, err := s.gate(r)
	if err != nil {
		return err
	}
	k, err := s.session(r)
	if err != nil {
		return err
	}
	defer k.cancel()
	cr := &ua.CallRequest{MethodsToCall: make([]ua.CallMethodRequest, len(req.Calls))}
	for i, c := range req.Calls {
		at := fmt.Sprintf("/calls/%d", i)
		obj, err := k.node(at+"/object", c.Object)
		if err != nil {
			return err
		}
		m, err := k.node(at+"/method", c.Method)
		if err != nil {
			return err
		}
		if err := gate.check(at+"/method", command.OpCall, obj, m, k.ns); err != nil {
			return err
		}
		args := make([]ua.Variant, len(c.Arguments))
		for j, a := range c.Arguments {
			if args[j], err = k.variant(fmt.Sprintf("%s/arguments/%d", at, j), a, "", false); err != nil {
				return err
			}
		}
		cr.MethodsToCall[i] = ua.CallMethodRequest{ObjectID: obj, MethodID: m, InputArguments: args}
	}
	resp, err := k.c.Call(k.ctx, cr)
	target := func(i int) command.Target {
		c := &cr.MethodsToCall[i]
		return command.Target{Endpoint: gate.endpoint, Object: c.ObjectID.String(), Method: c.MethodID.String()}
	}
	if err != nil {
		for i := range cr.MethodsToCall {
			gate.e.Record(gate.caller, command.OpCall, target(i), nil, nil, ua.StatusGood, err, gate.start)
		}
		return upstreamError("Call", err)
	}
	for i := range resp.Results {
		gate.e.Record(gate.caller, command.OpCall, target(i), nil, nil, resp.Results[i].StatusCode, nil, gate.start)
	}
	out := CallResponse{Results: make([]CallResult, len(resp.Results))}
	for i := range resp.Results {
		res := &resp.Results[i]
		cres := CallResult{StatusCode: statusOf(res.StatusCode), OutputArguments: make([]json.RawMessage, len(res.OutputArguments))}
		for _, sc := range res.InputArgumentResults {
			cres.InputArgumentResults = append(cres.InputArgumentResults, statusOf(sc))
		}
		for j := range res.OutputArguments {
			js, err := jsonenc.AppendVariant(nil, &res.OutputArguments[j], k.opts())
			if err != nil {
				return fmt.Errorf("encoding output %d of call %d: %w", j, i, err)
			}
			if len(js) == 0 {
				js = []byte("{}")
			}
			cres.OutputArguments[j] = js
		}
		out.Results[i] = cres
	}
	return writeJSON(w, http.StatusOK, out)
}
