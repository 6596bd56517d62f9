package server

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// recorder stands in for a secure channel: it encodes every response (as the
// channel would) and keeps the last one.
type recorder struct {
	mu       sync.Mutex
	n        int
	faults   map[ua.StatusCode]int
	last     ua.Structure
	internal int // Bad_InternalError faults: a handler panicked
	enc      ua.Encoder
}

func newRecorder() *recorder { return &recorder{faults: map[ua.StatusCode]int{}} }

func (r *recorder) Respond(req *uasc.Request, resp ua.Structure) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.enc.Reset(nil)
	r.enc.WriteStructure(resp)
	if err := r.enc.Err(); err != nil {
		return err
	}
	r.n++
	r.last = resp
	return nil
}

func (r *recorder) RespondFault(req *uasc.Request, st ua.StatusCode) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.faults[st]++
	if st == ua.StatusBadInternalError {
		r.internal++
	}
	r.last = &ua.ServiceFault{ResponseHeader: ua.ResponseHeader{ServiceResult: st}}
	return nil
}

func (r *recorder) ChannelID() uint32 { return 1 }
func (r *recorder) SecurityPolicy() *uasc.Policy {
	p, _ := uasc.PolicyByURI(uasc.SecurityPolicyNone)
	return p
}
func (r *recorder) SecurityMode() ua.MessageSecurityMode { return ua.MessageSecurityModeNone }
func (r *recorder) ClientCertificate() []byte            { return nil }

func (r *recorder) lastResponse() ua.Structure {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// fuzzServer is a server without a listener, driven through handle.
type fuzzServer struct {
	s     *Server
	rec   *recorder
	ch    *channel
	token ua.NodeID
}

func newFuzzServer(t testing.TB) *fuzzServer {
	testCerts(t)
	s, err := New(&Config{
		Certificate: serverPair.der, Key: serverPair.key, Users: map[string]string{"u": "p"},
		Policies:                   []uasc.EndpointSecurity{{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}},
		MaxSubscriptionsPerSession: 4, MaxMonitoredItemsPerSubscription: 64, MaxMonitoredItemsPerCall: 64,
		MaxNodesPerRead: 64, MaxNodesPerWrite: 64, MaxNodesPerBrowse: 64, MaxNodesPerMethodCall: 64,
		MaxNodesPerTranslateBrowsePathsToNodeIDs: 64, MaxNodesPerRegisterNodes: 64, MaxQueueSize: 64,
		MaxPublishRequestsPerSession: 4, MinSamplingInterval: 100 * time.Millisecond,
		Sim: SimConfig{Folders: 1, Variables: 10, AlarmInterval: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	f := &fuzzServer{s: s, rec: newRecorder()}
	f.ch = &channel{respChannel: f.rec, sendChunk: 65535, done: make(chan struct{})}
	f.session(t)
	return f
}

// session creates and activates a session on the fake channel.
func (f *fuzzServer) session(t testing.TB) {
	f.s.handle(f.ch, &uasc.Request{Message: &ua.CreateSessionRequest{RequestedSessionTimeout: 60000}})
	cs, ok := f.rec.lastResponse().(*ua.CreateSessionResponse)
	if !ok {
		t.Fatalf("CreateSession: %+v", f.rec.lastResponse())
	}
	f.token = cs.AuthenticationToken
	act := &ua.ActivateSessionRequest{UserIdentityToken: ua.NewExtensionObject(&ua.AnonymousIdentityToken{PolicyID: policyAnonymous})}
	act.RequestHeader.AuthenticationToken = f.token
	f.s.handle(f.ch, &uasc.Request{Message: act})
	if _, ok := f.rec.lastResponse().(*ua.ActivateSessionResponse); !ok {
		t.Fatalf("ActivateSession: %+v", f.rec.lastResponse())
	}
}

// seedRequests are valid requests of every service, the fuzzer's start.
func seedRequests() []ua.Structure {
	rv := func(id string, attr uint32) ua.ReadValueID {
		return ua.ReadValueID{NodeID: ua.MustParseNodeID(id), AttributeID: attr}
	}
	evf := &ua.EventFilter{SelectClauses: []ua.SimpleAttributeOperand{selectClause("Severity")},
		WhereClause: ua.ContentFilter{Elements: []ua.ContentFilterElement{{FilterOperator: ua.FilterOperatorGreaterThan, FilterOperands: []ua.ExtensionObject{
			ua.NewExtensionObject(&ua.SimpleAttributeOperand{BrowsePath: []ua.QualifiedName{ua.NewQualifiedName(0, "Severity")}, AttributeID: attrValue}),
			ua.NewExtensionObject(&ua.LiteralOperand{Value: ua.MustVariant(uint16(1))})}}}}}
	return []ua.Structure{
		&ua.ReadRequest{NodesToRead: []ua.ReadValueID{rv(NodeCounter, attrValue), rv("i=2256", attrValue), rv(StaticNode(ua.TypeInt32, true), attrValue)}},
		&ua.WriteRequest{NodesToWrite: []ua.WriteValue{{NodeID: ua.MustParseNodeID(NodeSetpoint), AttributeID: attrValue, Value: ua.DataValue{Value: ua.NewDoubleVariant(1)}}}},
		&ua.BrowseRequest{RequestedMaxReferencesPerNode: 2, NodesToBrowse: []ua.BrowseDescription{{NodeID: ua.NewNumericNodeID(0, 85), ResultMask: 63, IncludeSubtypes: true}}},
		&ua.BrowseNextRequest{ContinuationPoints: [][]byte{{0, 0, 0, 0, 0, 0, 0, 1}}},
		&ua.TranslateBrowsePathsToNodeIDsRequest{BrowsePaths: []ua.BrowsePath{{StartingNode: ua.NewNumericNodeID(0, 85),
			RelativePath: ua.RelativePath{Elements: []ua.RelativePathElement{{TargetName: ua.NewQualifiedName(1, "Demo"), IncludeSubtypes: true}}}}}},
		&ua.CallRequest{MethodsToCall: []ua.CallMethodRequest{{ObjectID: ua.MustParseNodeID(NodeMethods), MethodID: ua.MustParseNodeID(NodeAdd),
			InputArguments: []ua.Variant{ua.NewDoubleVariant(1), ua.NewDoubleVariant(2)}}}},
		&ua.CreateSubscriptionRequest{RequestedPublishingInterval: 100, RequestedLifetimeCount: 30, RequestedMaxKeepAliveCount: 10, PublishingEnabled: true},
		&ua.CreateMonitoredItemsRequest{SubscriptionID: 1, ItemsToCreate: []ua.MonitoredItemCreateRequest{
			{ItemToMonitor: rv(NodeSetpoint, attrValue), MonitoringMode: ua.MonitoringModeReporting, RequestedParameters: ua.MonitoringParameters{
				SamplingInterval: 100, QueueSize: 5, Filter: ua.NewExtensionObject(&ua.DataChangeFilter{Trigger: 1, DeadbandType: 2, DeadbandValue: 1})}},
			{ItemToMonitor: rv("i=2253", attrEventNotifier), MonitoringMode: ua.MonitoringModeReporting, RequestedParameters: ua.MonitoringParameters{
				Filter: ua.NewExtensionObject(evf)}},
		}},
		&ua.ModifyMonitoredItemsRequest{SubscriptionID: 1, ItemsToModify: []ua.MonitoredItemModifyRequest{{MonitoredItemID: 1, RequestedParameters: ua.MonitoringParameters{QueueSize: 2}}}},
		&ua.SetMonitoringModeRequest{SubscriptionID: 1, MonitoringMode: ua.MonitoringModeSampling, MonitoredItemIDs: []uint32{1, 2}},
		&ua.SetPublishingModeRequest{SubscriptionIDs: []uint32{1}},
		&ua.PublishRequest{SubscriptionAcknowledgements: []ua.SubscriptionAcknowledgement{{SubscriptionID: 1, SequenceNumber: 1}}},
		&ua.RepublishRequest{SubscriptionID: 1, RetransmitSequenceNumber: 1},
		&ua.ModifySubscriptionRequest{SubscriptionID: 1, RequestedPublishingInterval: 200},
		&ua.TransferSubscriptionsRequest{SubscriptionIDs: []uint32{1}, SendInitialValues: true},
		&ua.DeleteMonitoredItemsRequest{SubscriptionID: 1, MonitoredItemIDs: []uint32{1}},
		&ua.DeleteSubscriptionsRequest{SubscriptionIDs: []uint32{1}},
		&ua.RegisterNodesRequest{NodesToRegister: []ua.NodeID{ua.MustParseNodeID(NodeCounter)}},
		&ua.UnregisterNodesRequest{NodesToUnregister: []ua.NodeID{ua.MustParseNodeID(NodeCounter)}},
		&ua.GetEndpointsRequest{EndpointURL: "opc.tcp://localhost:4840"},
		&ua.FindServersRequest{},
		&ua.CancelRequest{RequestHandle: 1},
		&ua.CreateSessionRequest{RequestedSessionTimeout: 1000},
		&ua.ActivateSessionRequest{UserIdentityToken: ua.NewExtensionObject(&ua.UserNameIdentityToken{UserName: "u", Password: []byte("p")})},
		&ua.CloseSessionRequest{DeleteSubscriptions: true},
		&ua.HistoryReadRequest{},
	}
}

// FuzzServerRequest feeds decoded requests of any shape to the server's
// handlers with a valid session: each gets a response or a ServiceFault (or is
// parked, for Publish), and none makes a handler panic.
func FuzzServerRequest(f *testing.F) {
	for _, req := range seedRequests() {
		e := ua.NewEncoder(nil)
		e.WriteStructure(req)
		b := e.Bytes()
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	fs := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		limits := ua.DefaultLimits
		limits.MaxArrayLength, limits.MaxStringLength, limits.MaxByteStringLength, limits.MaxMessageSize = 1024, 4096, 4096, 1<<16
		msg, err := ua.NewDecoder(b, &limits).ReadStructure(nil)
		if err != nil {
			return // the secure channel answers these with a ServiceFault
		}
		if h := requestHeader(msg); h != nil {
			if _, isCreate := msg.(*ua.CreateSessionRequest); !isCreate {
				h.AuthenticationToken = fs.token
			}
		}
		fs.s.handle(fs.ch, &uasc.Request{Message: msg})
		fs.rec.mu.Lock()
		internal := fs.rec.internal
		fs.rec.mu.Unlock()
		if internal > 0 {
			t.Fatalf("a handler panicked on %T %+v", msg, msg)
		}
		if _, closed := msg.(*ua.CloseSessionRequest); closed || fs.s.Stats().Sessions == 0 {
			fs.session(t)
		}
	})
}

// rawRequest is a request body sent as is after the type id of typ, so that
// malformed requests reach the server through a real channel.
type rawRequest struct {
	typ  uint32
	body []byte
}

func (r *rawRequest) Encode(e *ua.Encoder)     { e.WriteRaw(r.body) }
func (r *rawRequest) Decode(d *ua.Decoder)     {}
func (r *rawRequest) BinaryEncodingID() uint32 { return r.typ }
func (r *rawRequest) DataTypeID() uint32       { return r.typ }

// TestMalformedRequests sends malformed bodies over a real channel: every one
// gets a ServiceFault (the channel stays open) or closes the channel, and the
// server goes on serving.
func TestMalformedRequests(t *testing.T) {
	s := startServer(t, nil)
	ctx := testContext(t, time.Minute)
	ts := mustSession(t, ctx, s, dialOpts{})
	var bodies []*rawRequest
	for _, req := range seedRequests() {
		requestHeader(req).AuthenticationToken = ts.token
		e := ua.NewEncoder(nil)
		req.Encode(e)
		b := e.Bytes()
		id := req.BinaryEncodingID()
		bodies = append(bodies,
			&rawRequest{id, b[:len(b)*2/3]},
			&rawRequest{id, append(append([]byte(nil), b...), 0xff, 0xff, 0xff, 0x7f)},
			&rawRequest{id, corrupt(b)},
		)
	}
	bodies = append(bodies, &rawRequest{ua.ID_ReadResponse_Encoding_DefaultBinary, nil}, &rawRequest{12345, []byte{1, 2, 3}})
	faults := 0
	for _, raw := range bodies {
		_, err := ts.ch.SendRequest(ctx, raw, nil)
		var sf *uasc.ServiceFaultError
		switch {
		case err == nil:
		case errors.As(err, &sf):
			faults++
		case errors.Is(err, uasc.ErrChannelClosed):
			t.Logf("channel closed on %d bytes of type %d", len(raw.body), raw.typ)
			ts = mustSession(t, ctx, s, dialOpts{})
		default:
			t.Fatalf("type %d: %v", raw.typ, err)
		}
	}
	if faults == 0 {
		t.Fatal("no ServiceFault at all")
	}
	// (One of the bodies is a valid CloseSession with trailing bytes.)
	if _, err := mustSession(t, ctx, s, dialOpts{}).read(ctx, NodeCounter); err != nil {
		t.Fatalf("server after malformed requests: %v", err)
	}
	t.Logf("%d malformed requests, %d faults", len(bodies), faults)
}

// corrupt sets the array lengths of a body to huge values: every 4-byte
// window after the header that reads as a small length is bumped.
func corrupt(b []byte) []byte {
	out := append([]byte(nil), b...)
	for i := len(out) - 4; i > len(out)/2; i -= 7 {
		out[i], out[i+1], out[i+2], out[i+3] = 0xff, 0xff, 0xff, 0x0f
	}
	return out
}

func TestRequestQueueFull(t *testing.T) {
	testCerts(t)
	s, err := New(&Config{Certificate: serverPair.der, Key: serverPair.key, MaxQueuedRequests: 2, MinWorkers: 1, MaxWorkers: 1,
		Sim: SimConfig{Folders: -1, AlarmInterval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.workers.Store(1) // as if the one worker were busy: nothing drains the queue
	rec := newRecorder()
	ch := &channel{respChannel: rec, sendChunk: 65535, done: make(chan struct{})}
	for i := 0; i < 3; i++ {
		s.enqueue(ch, &uasc.Request{Message: &ua.ReadRequest{}})
	}
	if rec.faults[ua.StatusBadTcpServerTooBusy] != 1 || s.Stats().TooBusy != 1 || s.Stats().QueuedRequests != 2 {
		t.Fatalf("faults %v, stats %+v", rec.faults, s.Stats())
	}
}
