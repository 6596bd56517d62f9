package server

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
	"github.com/uagate/gateway/uastack/uasc"
)

// This file is a lean session driver over a raw uasc client channel:
// CreateSession, ActivateSession and the services, with a Publish loop. It
// keeps the server's tests independent of package client.

// testCerts are made once per test binary: RSA key generation is slow,
// especially under the race detector.
type certPair struct {
	der []byte
	key *rsa.PrivateKey
}

var (
	certsOnce                    sync.Once
	serverPair, clientPair, user certPair
	certsErr                     error
)

func testCerts(t testing.TB) {
	t.Helper()
	certsOnce.Do(func() {
		mk := func(uri, cn string) certPair {
			der, key, err := pki.CreateCertificate(pki.CertRequest{ApplicationURI: uri, CommonName: cn, Hosts: []string{"localhost", "127.0.0.1"}}, nil, nil)
			if err != nil {
				certsErr = err
			}
			return certPair{der, key}
		}
		serverPair = mk(DefaultApplicationURI, "sim test server")
		clientPair = mk("urn:uagate:test:client", "sim test client")
		user = mk("urn:uagate:test:user", "user x509")
	})
	if certsErr != nil {
		t.Fatal(certsErr)
	}
}

// identity is the user a test session activates with.
type identity struct {
	user, password string
	cert           *certPair
}

// dialOpts configure a test session.
type dialOpts struct {
	policy    string
	mode      ua.MessageSecurityMode
	id        identity
	timeout   time.Duration // session timeout; 0: 60 s
	transport *uacp.Config
	endpoints []ua.EndpointDescription // cached; fetched when nil
	noVerify  bool                     // skip the CreateSession signature check (load tests)
}

// testSession is a session on its own channel.
type testSession struct {
	ch          *uasc.Channel
	token       ua.NodeID
	id          ua.NodeID
	serverNonce []byte
	serverCert  []byte
	policy      *uasc.Policy
	ep          *ua.EndpointDescription
}

func findEndpoint(eps []ua.EndpointDescription, policy string, mode ua.MessageSecurityMode) *ua.EndpointDescription {
	for i := range eps {
		if eps[i].SecurityPolicyURI == policy && eps[i].SecurityMode == mode {
			return &eps[i]
		}
	}
	return nil
}

// dialSession opens a channel and a session on it.
func dialSession(ctx context.Context, url string, o dialOpts) (*testSession, error) {
	if o.policy == "" {
		o.policy, o.mode = uasc.SecurityPolicyNone, ua.MessageSecurityModeNone
	}
	eps := o.endpoints
	if eps == nil {
		var err error
		if eps, err = uasc.GetEndpoints(ctx, url, o.transport); err != nil {
			return nil, fmt.Errorf("GetEndpoints: %w", err)
		}
	}
	ep := findEndpoint(eps, o.policy, o.mode)
	if ep == nil {
		return nil, fmt.Errorf("no endpoint %s %s", o.policy, o.mode)
	}
	p, err := uasc.PolicyByURI(o.policy)
	if err != nil {
		return nil, err
	}
	cfg := &uasc.Config{SecurityPolicyURI: o.policy, SecurityMode: o.mode, Transport: o.transport, RequestTimeout: 30 * time.Second, AllowDeprecated: true}
	if !p.IsNone() {
		cfg.LocalCertificate, cfg.LocalKey, cfg.RemoteCertificate = clientPair.der, clientPair.key, ep.ServerCertificate
	}
	ch, err := uasc.Dial(ctx, url, cfg)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	ts := &testSession{ch: ch, policy: p, ep: ep}
	if err := ts.open(ctx, url, o); err != nil {
		ch.Close()
		return nil, err
	}
	return ts, nil
}

func (ts *testSession) open(ctx context.Context, url string, o dialOpts) error {
	nonce := make([]byte, 32)
	_, _ = rand.Read(nonce)
	timeout := o.timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	req := &ua.CreateSessionRequest{
		ClientDescription:       ua.ApplicationDescription{ApplicationURI: "urn:uagate:test:client", ApplicationType: ua.ApplicationTypeClient},
		EndpointURL:             url,
		SessionName:             "test",
		ClientNonce:             nonce,
		RequestedSessionTimeout: float64(timeout / time.Millisecond),
	}
	if !ts.policy.IsNone() {
		req.ClientCertificate = clientPair.der
	}
	var cs ua.CreateSessionResponse
	if _, err := ts.ch.SendRequest(ctx, req, &cs); err != nil {
		return fmt.Errorf("CreateSession: %w", err)
	}
	ts.token, ts.id, ts.serverNonce, ts.serverCert = cs.AuthenticationToken, cs.SessionID, cs.ServerNonce, cs.ServerCertificate
	if !ts.policy.IsNone() && !o.noVerify {
		if err := verifyWith(ts.policy, cs.ServerCertificate, cs.ServerSignature, append(append([]byte(nil), clientPair.der...), nonce...)); err != nil {
			return fmt.Errorf("CreateSession signature: %w", err)
		}
	}
	return ts.activate(ctx, o.id)
}

func verifyWith(p *uasc.Policy, cert []byte, sig ua.SignatureData, data []byte) error {
	if sig.Algorithm != p.AsymSignatureURI {
		return fmt.Errorf("algorithm %q", sig.Algorithm)
	}
	pub, err := leafKey(cert)
	if err != nil {
		return err
	}
	return p.AsymVerify(pub, data, sig.Signature)
}

func leafKey(chain []byte) (*rsa.PublicKey, error) {
	certs, err := pki.ParseChain(chain)
	if err != nil {
		return nil, err
	}
	pub, ok := certs[0].PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, errors.New("not RSA")
	}
	return pub, nil
}

// activate runs ActivateSession for id.
func (ts *testSession) activate(ctx context.Context, id identity) error {
	req := &ua.ActivateSessionRequest{}
	req.RequestHeader.AuthenticationToken = ts.token
	signed := append(append([]byte(nil), ts.serverCert...), ts.serverNonce...)
	if !ts.policy.IsNone() {
		sig, err := ts.policy.AsymSign(clientPair.key, signed)
		if err != nil {
			return err
		}
		req.ClientSignature = ua.SignatureData{Algorithm: ts.policy.AsymSignatureURI, Signature: sig}
	}
	// The token policy: the endpoint's for the token type.
	tokPol := ts.policy
	var tokType ua.UserTokenType
	switch {
	case id.cert != nil:
		tokType = ua.UserTokenTypeCertificate
	case id.user != "":
		tokType = ua.UserTokenTypeUserName
	}
	policyID := ""
	for _, tp := range ts.ep.UserIdentityTokens {
		if tp.TokenType == tokType {
			policyID = tp.PolicyID
			if tp.SecurityPolicyURI != "" {
				tokPol, _ = uasc.PolicyByURI(tp.SecurityPolicyURI)
			}
		}
	}
	switch tokType {
	case ua.UserTokenTypeAnonymous:
		req.UserIdentityToken = ua.NewExtensionObject(&ua.AnonymousIdentityToken{PolicyID: policyID})
	case ua.UserTokenTypeUserName:
		tok := &ua.UserNameIdentityToken{PolicyID: policyID, UserName: id.user}
		if tokPol.IsNone() {
			tok.Password = []byte(id.password)
		} else {
			pub, err := leafKey(ts.serverCert)
			if err != nil {
				return err
			}
			plain := binary.LittleEndian.AppendUint32(nil, uint32(len(id.password)+len(ts.serverNonce)))
			plain = append(append(plain, id.password...), ts.serverNonce...)
			if tok.Password, err = tokPol.AsymEncrypt(pub, plain); err != nil {
				return err
			}
			tok.EncryptionAlgorithm = tokPol.AsymEncryptionURI
		}
		req.UserIdentityToken = ua.NewExtensionObject(tok)
	case ua.UserTokenTypeCertificate:
		sig, err := tokPol.AsymSign(id.cert.key, signed)
		if err != nil {
			return err
		}
		req.UserIdentityToken = ua.NewExtensionObject(&ua.X509IdentityToken{PolicyID: policyID, CertificateData: id.cert.der})
		req.UserTokenSignature = ua.SignatureData{Algorithm: tokPol.AsymSignatureURI, Signature: sig}
	}
	var as ua.ActivateSessionResponse
	if _, err := ts.ch.SendRequest(ctx, req, &as); err != nil {
		return fmt.Errorf("ActivateSession: %w", err)
	}
	ts.serverNonce = as.ServerNonce
	return nil
}

// send sends a service request on the session.
func (ts *testSession) send(ctx context.Context, req, resp ua.Structure) (ua.Structure, error) {
	requestHeader(req).AuthenticationToken = ts.token
	return ts.ch.SendRequest(ctx, req, resp)
}

func (ts *testSession) close(ctx context.Context) {
	_, _ = ts.send(ctx, &ua.CloseSessionRequest{DeleteSubscriptions: true}, nil)
	ts.ch.Close()
}

func (ts *testSession) read(ctx context.Context, ids ...string) ([]ua.DataValue, error) {
	req := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnBoth}
	for _, id := range ids {
		req.NodesToRead = append(req.NodesToRead, ua.ReadValueID{NodeID: ua.MustParseNodeID(id), AttributeID: attrValue})
	}
	var resp ua.ReadResponse
	if _, err := ts.send(ctx, req, &resp); err != nil {
		return nil, err
	}
	return resp.Results, nil
}

func (ts *testSession) writeValue(ctx context.Context, id string, v ua.Variant) (ua.StatusCode, error) {
	var resp ua.WriteResponse
	_, err := ts.send(ctx, &ua.WriteRequest{NodesToWrite: []ua.WriteValue{{
		NodeID: ua.MustParseNodeID(id), AttributeID: attrValue, Value: ua.DataValue{Value: v},
	}}}, &resp)
	if err != nil {
		return 0, err
	}
	return resp.Results[0], nil
}

func (ts *testSession) createSubscription(ctx context.Context, interval time.Duration) (*ua.CreateSubscriptionResponse, error) {
	var resp ua.CreateSubscriptionResponse
	_, err := ts.send(ctx, &ua.CreateSubscriptionRequest{
		RequestedPublishingInterval: float64(interval / time.Millisecond),
		RequestedLifetimeCount:      600, RequestedMaxKeepAliveCount: 20, PublishingEnabled: true,
	}, &resp)
	return &resp, err
}

// monitor creates Value items on ids with client handles 1, 2, … and the given
// sampling interval (ms) and queue size.
func (ts *testSession) monitor(ctx context.Context, subID uint32, sampling float64, queue uint32, filter ua.Encodable, ids ...string) ([]ua.MonitoredItemCreateResult, error) {
	req := &ua.CreateMonitoredItemsRequest{SubscriptionID: subID, TimestampsToReturn: ua.TimestampsToReturnBoth}
	for i, id := range ids {
		p := ua.MonitoringParameters{ClientHandle: uint32(i + 1), SamplingInterval: sampling, QueueSize: queue, DiscardOldest: true}
		if filter != nil {
			p.Filter = ua.NewExtensionObject(filter)
		}
		req.ItemsToCreate = append(req.ItemsToCreate, ua.MonitoredItemCreateRequest{
			ItemToMonitor:       ua.ReadValueID{NodeID: ua.MustParseNodeID(id), AttributeID: attrValue},
			MonitoringMode:      ua.MonitoringModeReporting,
			RequestedParameters: p,
		})
	}
	var resp ua.CreateMonitoredItemsResponse
	if _, err := ts.send(ctx, req, &resp); err != nil {
		return nil, err
	}
	return resp.Results, nil
}

// publishOnce sends one Publish with the given acknowledgements and waits.
func (ts *testSession) publishOnce(ctx context.Context, acks ...ua.SubscriptionAcknowledgement) (*ua.PublishResponse, error) {
	var resp ua.PublishResponse
	_, err := ts.send(ctx, &ua.PublishRequest{SubscriptionAcknowledgements: acks}, &resp)
	return &resp, err
}

// publisher keeps n Publish requests in flight and hands every response to
// handle, on the channel's reader goroutine; handle must not block. The
// response's notifications are valid only during handle. Messages are
// acknowledged with the next request.
type publisher struct {
	ts     *testSession
	handle func(*ua.PublishResponse)
	mu     sync.Mutex
	acks   []ua.SubscriptionAcknowledgement
	stop   bool
	errs   int
	lastEr error
	wg     sync.WaitGroup
	resps  chan *ua.PublishResponse // idle response objects, decoded into again
}

func (ts *testSession) startPublishing(n int, handle func(*ua.PublishResponse)) *publisher {
	p := &publisher{ts: ts, handle: handle, resps: make(chan *ua.PublishResponse, n)}
	for i := 0; i < n; i++ {
		p.resps <- &ua.PublishResponse{}
	}
	for i := 0; i < n; i++ {
		p.next()
	}
	return p
}

func (p *publisher) next() {
	p.mu.Lock()
	if p.stop {
		p.mu.Unlock()
		return
	}
	req := &ua.PublishRequest{SubscriptionAcknowledgements: p.acks}
	p.acks = nil
	p.wg.Add(1)
	p.mu.Unlock()
	req.RequestHeader.AuthenticationToken = p.ts.token
	req.RequestHeader.TimeoutHint = 60000
	resp := <-p.resps
	err := p.ts.ch.SendRequestAsync(req, resp, time.Minute, func(out ua.Structure, err error) {
		defer p.wg.Done()
		if err != nil {
			p.mu.Lock()
			p.errs++
			p.lastEr = err
			stop := p.stop
			p.mu.Unlock()
			p.resps <- resp
			var sf *uasc.ServiceFaultError
			switch {
			case stop || !errors.As(err, &sf):
			case sf.Status == ua.StatusBadTooManyPublishRequests || sf.Status == ua.StatusBadTimeout:
				p.next()
			case sf.Status == ua.StatusBadTcpServerTooBusy:
				// Back off, as a client should, then try again.
				time.AfterFunc(100*time.Millisecond, p.next)
			}
			return
		}
		r := out.(*ua.PublishResponse)
		if len(r.NotificationMessage.NotificationData) > 0 {
			p.mu.Lock()
			p.acks = append(p.acks, ua.SubscriptionAcknowledgement{SubscriptionID: r.SubscriptionID, SequenceNumber: r.NotificationMessage.SequenceNumber})
			p.mu.Unlock()
		}
		p.handle(r)
		if r != resp {
			r.Release()
		}
		p.resps <- resp
		p.next()
	})
	if err != nil {
		p.wg.Done()
		p.resps <- resp
		p.mu.Lock()
		p.errs++
		p.lastEr = err
		p.mu.Unlock()
	}
}

// halt stops sending Publish requests; those in flight end with the channel.
func (p *publisher) halt() {
	p.mu.Lock()
	p.stop = true
	p.mu.Unlock()
}

// dataChanges returns the data change notifications of a response.
func dataChanges(r *ua.PublishResponse) []ua.MonitoredItemNotification {
	var out []ua.MonitoredItemNotification
	for _, eo := range r.NotificationMessage.NotificationData {
		if dcn, ok := eo.Value.(*ua.DataChangeNotification); ok {
			out = append(out, dcn.MonitoredItems...)
		}
	}
	return out
}

func events(r *ua.PublishResponse) []ua.EventFieldList {
	var out []ua.EventFieldList
	for _, eo := range r.NotificationMessage.NotificationData {
		if enl, ok := eo.Value.(*ua.EventNotificationList); ok {
			out = append(out, enl.Events...)
		}
	}
	return out
}

func statusChange(r *ua.PublishResponse) (ua.StatusCode, bool) {
	for _, eo := range r.NotificationMessage.NotificationData {
		if sc, ok := eo.Value.(*ua.StatusChangeNotification); ok {
			return sc.Status, true
		}
	}
	return 0, false
}
