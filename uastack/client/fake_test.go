package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// Unit tests run the session logic against fakeServer, an in-memory stand-in for
// the secure channel and the server behind it that does the real cryptography of
// CreateSession and ActivateSession. The interop tests run against node-opcua.

type testCert struct {
	der []byte
	key *rsa.PrivateKey
}

var (
	certsOnce                       sync.Once
	serverCert, clientCert, userCrt testCert
)

const fakeServerURI = "urn:test:fake-server"

func testCerts(t testing.TB) {
	t.Helper()
	certsOnce.Do(func() {
		mk := func(uri, cn string) testCert {
			der, key, err := pki.CreateCertificate(pki.CertRequest{ApplicationURI: uri, CommonName: cn, Hosts: []string{"localhost", "fake"}}, nil, nil)
			if err != nil {
				panic(err)
			}
			return testCert{der, key}
		}
		serverCert = mk(fakeServerURI, "fake server")
		clientCert = mk("urn:test:client", "test client")
		userCrt = mk("urn:test:user", "test user")
	})
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeServer implements channel. Its session services check what the client
// sends the way a server must; its other services serve a made-up address
// space and enforce MaxPerCall (hidden, BadTooManyOperations) independently of the
// limits it publishes.
type fakeServer struct {
	t        testing.TB
	policy   *uasc.Policy
	endpoint ua.EndpointDescription

	mu sync.Mutex
	// session
	clientCert, clientNonce, serverNonce []byte
	authToken                            ua.NodeID
	activated                            bool
	closedSession                        bool
	user                                 string // who activated
	// tampering
	badSignature, shortNonce, otherCert bool

	published  map[uint32]uint32 // OperationLimits node id -> value
	maxPerCall int               // enforced, 0: none
	maxRefs    int               // references per Browse/BrowseNext result
	cps        map[string]cpState
	cpSeq      int
	failNextAt int // fail the BrowseNext call number failNextAt (1-based) with BadInternalError
	nextCalls  int

	calls map[string]int // service name -> requests
	sizes []int          // operations per request, in order
	done  chan struct{}
}

type cpState struct {
	node ua.NodeID
	next int
}

func newFakeServer(t testing.TB, policyURI string, mode ua.MessageSecurityMode) *fakeServer {
	testCerts(t)
	pol, err := uasc.PolicyByURI(policyURI)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{
		t: t, policy: pol,
		published: map[uint32]uint32{},
		cps:       map[string]cpState{},
		calls:     map[string]int{},
		done:      make(chan struct{}),
		authToken: ua.NewOpaqueNodeID(0, []byte("token-123")),
	}
	f.endpoint = ua.EndpointDescription{
		EndpointURL:       "opc.tcp://fake:4840",
		Server:            ua.ApplicationDescription{ApplicationURI: fakeServerURI, ApplicationType: ua.ApplicationTypeServer},
		ServerCertificate: serverCert.der,
		SecurityMode:      mode,
		SecurityPolicyURI: policyURI,
		UserIdentityTokens: []ua.UserTokenPolicy{
			{PolicyID: "anon", TokenType: ua.UserTokenTypeAnonymous},
			{PolicyID: "user", TokenType: ua.UserTokenTypeUserName, SecurityPolicyURI: uasc.SecurityPolicyBasic256Sha256},
			{PolicyID: "x509", TokenType: ua.UserTokenTypeCertificate, SecurityPolicyURI: uasc.SecurityPolicyBasic256Sha256},
		},
		TransportProfileURI: TransportProfileBinary,
		SecurityLevel:       1,
	}
	return f
}

// connect makes a Client on f the way Dial does, without the network.
func (f *fakeServer) connect(t testing.TB, cfg Config) (*Client, error) {
	t.Helper()
	store, err := pki.Open(t.TempDir(), pki.Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Trust(serverCert.der); err != nil {
		t.Fatal(err)
	}
	cfg.Store = store
	cfg.Certificate, cfg.PrivateKey = clientCert.der, clientCert.key
	cfg.Endpoints = []ua.EndpointDescription{f.endpoint}
	if cfg.Logger == nil {
		cfg.Logger = quietLog
	}
	c, err := prepare(context.Background(), "opc.tcp://fake:4840", &cfg)
	if err != nil {
		return nil, err
	}
	c.conn = f
	if err := c.start(context.Background()); err != nil {
		return nil, err
	}
	return c, nil
}

func (f *fakeServer) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.done:
	default:
		close(f.done)
	}
	return nil
}
func (f *fakeServer) Done() <-chan struct{} { return f.done }
func (f *fakeServer) Err() error            { return nil }

func (f *fakeServer) SendRequestAsync(req, resp ua.Structure, timeout time.Duration, done func(ua.Structure, error)) error {
	go func() { done(f.SendRequest(context.Background(), req, resp)) }()
	return nil
}

// SendRequest round-trips req through the binary codec (as the wire would), then
// serves it.
func (f *fakeServer) SendRequest(ctx context.Context, req, resp ua.Structure) (ua.Structure, error) {
	select {
	case <-f.done:
		return nil, uasc.ErrChannelClosed
	default:
	}
	e := ua.NewEncoder(nil)
	e.WriteStructure(req)
	if e.Err() != nil {
		return nil, e.Err()
	}
	got, err := ua.NewDecoder(e.Bytes(), nil).ReadStructure(nil)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	out, err := f.serve(got)
	f.mu.Unlock()
	if err != nil {
		var sc ua.StatusCode
		if errors.As(err, &sc) {
			return nil, &uasc.ServiceFaultError{Status: sc}
		}
		return nil, err
	}
	e.Reset(nil)
	e.WriteStructure(out)
	return ua.NewDecoder(e.Bytes(), nil).ReadStructure(resp)
}

func (f *fakeServer) checkToken(h *ua.RequestHeader) error {
	if !f.activated || h.AuthenticationToken != f.authToken {
		return ua.StatusBadSessionIdInvalid
	}
	return nil
}

func (f *fakeServer) limit(n int) error {
	f.sizes = append(f.sizes, n)
	if f.maxPerCall > 0 && n > f.maxPerCall {
		return ua.StatusBadTooManyOperations
	}
	if n == 0 {
		return ua.StatusBadNothingToDo
	}
	return nil
}

func (f *fakeServer) serve(req ua.Structure) (ua.Structure, error) {
	f.calls[serviceName(req)]++
	switch r := req.(type) {
	case *ua.CreateSessionRequest:
		return f.createSession(r)
	case *ua.ActivateSessionRequest:
		return f.activateSession(r)
	case *ua.CloseSessionRequest:
		if err := f.checkToken(&r.RequestHeader); err != nil {
			return nil, err
		}
		f.closedSession, f.activated = true, false
		return &ua.CloseSessionResponse{}, nil
	}
	if err := f.checkToken(requestHeader(req)); err != nil {
		return nil, err
	}
	switch r := req.(type) {
	case *ua.ReadRequest:
		if err := f.limit(len(r.NodesToRead)); err != nil {
			return nil, err
		}
		resp := &ua.ReadResponse{Results: make([]ua.DataValue, len(r.NodesToRead))}
		for i, rv := range r.NodesToRead {
			resp.Results[i] = f.value(rv.NodeID)
		}
		return resp, nil
	case *ua.WriteRequest:
		if err := f.limit(len(r.NodesToWrite)); err != nil {
			return nil, err
		}
		resp := &ua.WriteResponse{Results: make([]ua.StatusCode, len(r.NodesToWrite))}
		for i, w := range r.NodesToWrite {
			// The status tells the position back: Good for even values, Bad for odd.
			if w.Value.Value.Int32()%2 != 0 {
				resp.Results[i] = ua.StatusBadTypeMismatch
			}
		}
		return resp, nil
	case *ua.CallRequest:
		if err := f.limit(len(r.MethodsToCall)); err != nil {
			return nil, err
		}
		resp := &ua.CallResponse{Results: make([]ua.CallMethodResult, len(r.MethodsToCall))}
		for i, m := range r.MethodsToCall {
			var sum float64
			for _, a := range m.InputArguments {
				v, _ := a.AsFloat64()
				sum += v
			}
			resp.Results[i].OutputArguments = []ua.Variant{ua.NewDoubleVariant(sum)}
		}
		return resp, nil
	case *ua.TranslateBrowsePathsToNodeIDsRequest:
		if err := f.limit(len(r.BrowsePaths)); err != nil {
			return nil, err
		}
		resp := &ua.TranslateBrowsePathsToNodeIDsResponse{Results: make([]ua.BrowsePathResult, len(r.BrowsePaths))}
		for i, p := range r.BrowsePaths {
			resp.Results[i].Targets = []ua.BrowsePathTarget{{TargetID: ua.NewExpandedNodeID(p.StartingNode), RemainingPathIndex: 0xffffffff}}
		}
		return resp, nil
	case *ua.RegisterNodesRequest:
		if err := f.limit(len(r.NodesToRegister)); err != nil {
			return nil, err
		}
		return &ua.RegisterNodesResponse{RegisteredNodeIDs: r.NodesToRegister}, nil
	case *ua.UnregisterNodesRequest:
		if err := f.limit(len(r.NodesToUnregister)); err != nil {
			return nil, err
		}
		return &ua.UnregisterNodesResponse{}, nil
	case *ua.BrowseRequest:
		if err := f.limit(len(r.NodesToBrowse)); err != nil {
			return nil, err
		}
		resp := &ua.BrowseResponse{Results: make([]ua.BrowseResult, len(r.NodesToBrowse))}
		for i, d := range r.NodesToBrowse {
			resp.Results[i] = f.browse(d.NodeID, 0)
		}
		return resp, nil
	case *ua.BrowseNextRequest:
		if err := f.limit(len(r.ContinuationPoints)); err != nil {
			return nil, err
		}
		resp := &ua.BrowseNextResponse{Results: make([]ua.BrowseResult, len(r.ContinuationPoints))}
		if !r.ReleaseContinuationPoints {
			f.nextCalls++
			if f.nextCalls == f.failNextAt {
				// The failing call consumes nothing: the client must release.
				return nil, ua.StatusBadInternalError
			}
		}
		for i, cp := range r.ContinuationPoints {
			st, ok := f.cps[string(cp)]
			if !ok {
				resp.Results[i].StatusCode = ua.StatusBadContinuationPointInvalid
				continue
			}
			delete(f.cps, string(cp))
			if !r.ReleaseContinuationPoints {
				resp.Results[i] = f.browse(st.node, st.next)
			}
		}
		return resp, nil
	}
	return nil, ua.StatusBadServiceUnsupported
}

// value of a node: the limits it publishes, else the numeric id as Int32.
func (f *fakeServer) value(n ua.NodeID) ua.DataValue {
	if n.Namespace == 0 {
		if v, ok := f.published[n.Numeric]; ok {
			return ua.DataValue{Value: ua.NewUInt32Variant(v)}
		}
		if n.Numeric == ua.ID_Server_NamespaceArray {
			v, _ := ua.NewVariant([]string{"http://opcfoundation.org/UA/", "urn:fake"})
			return ua.DataValue{Value: v}
		}
		return ua.DataValue{Status: ua.StatusBadNodeIdUnknown}
	}
	return ua.DataValue{Value: ua.NewInt32Variant(int32(n.Numeric))}
}

// browse returns the references of node ns=1;i=N from index from: N children
// ns=2;i=N*1000+k, maxRefs at a time.
func (f *fakeServer) browse(n ua.NodeID, from int) ua.BrowseResult {
	total := int(n.Numeric)
	var r ua.BrowseResult
	end := total
	if f.maxRefs > 0 && end-from > f.maxRefs {
		end = from + f.maxRefs
	}
	for k := from; k < end; k++ {
		r.References = append(r.References, ua.ReferenceDescription{
			NodeID:     ua.NewExpandedNodeID(ua.NewNumericNodeID(2, n.Numeric*1000+uint32(k))),
			BrowseName: ua.NewQualifiedName(2, fmt.Sprint(k)),
			IsForward:  true,
		})
	}
	if end < total {
		f.cpSeq++
		cp := []byte(fmt.Sprintf("cp%d", f.cpSeq))
		f.cps[string(cp)] = cpState{node: n, next: end}
		r.ContinuationPoint = cp
	}
	return r
}

func (f *fakeServer) createSession(r *ua.CreateSessionRequest) (ua.Structure, error) {
	f.clientCert = r.ClientCertificate
	f.clientNonce = r.ClientNonce
	if len(r.ClientNonce) < 32 {
		return nil, ua.StatusBadNonceInvalid
	}
	f.serverNonce = make([]byte, 32)
	rand.Read(f.serverNonce)
	resp := &ua.CreateSessionResponse{
		SessionID:             ua.NewNumericNodeID(1, 42),
		AuthenticationToken:   f.authToken,
		RevisedSessionTimeout: r.RequestedSessionTimeout,
		ServerNonce:           f.serverNonce,
		ServerCertificate:     serverCert.der,
		ServerEndpoints:       []ua.EndpointDescription{f.endpoint},
	}
	if f.shortNonce {
		resp.ServerNonce = resp.ServerNonce[:16]
	}
	if f.otherCert {
		resp.ServerCertificate = clientCert.der
	}
	if !f.policy.IsNone() {
		sig, err := signData(f.policy, serverCert.key, r.ClientCertificate, r.ClientNonce)
		if err != nil {
			return nil, err
		}
		if f.badSignature {
			sig.Signature[0] ^= 1
		}
		resp.ServerSignature = sig
	}
	return resp, nil
}

func (f *fakeServer) activateSession(r *ua.ActivateSessionRequest) (ua.Structure, error) {
	if r.RequestHeader.AuthenticationToken != f.authToken {
		return nil, ua.StatusBadSessionIdInvalid
	}
	if !f.policy.IsNone() {
		if err := verifySignature(f.policy, mustKey(f.t, f.clientCert), r.ClientSignature, serverCert.der, f.serverNonce); err != nil {
			f.t.Logf("fake server: client signature: %v", err)
			return nil, ua.StatusBadApplicationSignatureInvalid
		}
	}
	tokenPolicy := func(id string) *uasc.Policy {
		for _, tp := range f.endpoint.UserIdentityTokens {
			if tp.PolicyID == id {
				p, err := effectiveTokenPolicy(&tp, f.policy)
				if err != nil {
					f.t.Fatal(err)
				}
				return p
			}
		}
		return nil
	}
	switch tok := r.UserIdentityToken.Value.(type) {
	case *ua.AnonymousIdentityToken:
		if tok.PolicyID != "anon" {
			return nil, ua.StatusBadIdentityTokenInvalid
		}
		f.user = "anonymous"
	case *ua.UserNameIdentityToken:
		pol := tokenPolicy(tok.PolicyID)
		if pol == nil || tok.EncryptionAlgorithm != pol.AsymEncryptionURI {
			return nil, ua.StatusBadIdentityTokenInvalid
		}
		pw, err := decryptSecret(pol, serverCert.key, tok.Password, f.serverNonce)
		if err != nil {
			f.t.Logf("fake server: password: %v", err)
			return nil, ua.StatusBadIdentityTokenInvalid
		}
		if tok.UserName != "user1" || string(pw) != "password1" {
			return nil, ua.StatusBadUserAccessDenied
		}
		f.user = tok.UserName
	case *ua.X509IdentityToken:
		pol := tokenPolicy(tok.PolicyID)
		if pol == nil {
			return nil, ua.StatusBadIdentityTokenInvalid
		}
		if err := verifySignature(pol, mustKey(f.t, tok.CertificateData), r.UserTokenSignature, serverCert.der, f.serverNonce); err != nil {
			f.t.Logf("fake server: user token signature: %v", err)
			return nil, ua.StatusBadIdentityTokenRejected
		}
		f.user = "x509:" + pki.ThumbprintHex(tok.CertificateData)
	default:
		return nil, ua.StatusBadIdentityTokenInvalid
	}
	f.activated = true
	f.serverNonce = make([]byte, 32)
	rand.Read(f.serverNonce)
	return &ua.ActivateSessionResponse{ServerNonce: f.serverNonce}, nil
}

// legacySecret is the plaintext layout of an encrypted password, built by hand to
// cross-check encryptSecret.
func legacySecret(password, nonce []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(password)+len(nonce)))
	return append(append(b, password...), nonce...)
}

var _ = bytes.Equal

func mustKey(t testing.TB, cert []byte) *rsa.PublicKey {
	pub, err := publicKey(cert)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}
