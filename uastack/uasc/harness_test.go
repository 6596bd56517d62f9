package uasc

import (
	"context"
	"crypto/rsa"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
)

// testCert is a certificate with its key, written to a test's temporary directory
// as a real application would keep it.
type testCert struct {
	der []byte
	key *rsa.PrivateKey
}

// newTestCert creates a self-signed application certificate around a cached key
// of the given size (keyIndex selects among cached keys of that size).
func newTestCert(t testing.TB, name string, bits, keyIndex int) testCert {
	t.Helper()
	key := testKey(t, bits, keyIndex)
	der, key, err := pki.CreateCertificate(pki.CertRequest{
		ApplicationURI: "urn:uagate:test:" + name,
		CommonName:     name,
		Hosts:          []string{"localhost", "127.0.0.1"},
		Key:            key,
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(t.TempDir(), name+".der"), der, 0o600); err != nil {
		t.Fatal(err)
	}
	return testCert{der: der, key: key}
}

// allEndpoints lists every policy × mode this package supports.
func allEndpoints() []EndpointSecurity {
	eps := []EndpointSecurity{{SecurityPolicyNone, ua.MessageSecurityModeNone}}
	for _, p := range Policies()[1:] {
		eps = append(eps,
			EndpointSecurity{p.URI, ua.MessageSecurityModeSign},
			EndpointSecurity{p.URI, ua.MessageSecurityModeSignAndEncrypt})
	}
	return eps
}

// recordingListener keeps the raw connections it accepts, so that a test can
// write bytes to the client that no well-behaved server would send.
type recordingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *recordingListener) last() net.Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns[len(l.conns)-1]
}

// testServer runs ServerChannels on a loopback port.
type testServer struct {
	t       testing.TB
	url     string
	cert    testCert
	raw     *recordingListener
	ln      *uacp.Listener
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	channel chan *ServerChannel // each accepted channel, for tests that poke at it
	errs    chan error          // Serve's results

	mu      sync.Mutex
	handler func(s *ServerChannel, r *Request)
}

type serverOptions struct {
	cfg       ServerConfig // Certificate, Key and Policies are filled in when empty
	transport *uacp.Config
	handler   func(s *ServerChannel, r *Request)
}

func startServer(t testing.TB, opts serverOptions) *testServer {
	t.Helper()
	cert := newTestCert(t, "server", 2048, 0)
	cfg := opts.cfg
	if cfg.Certificate == nil {
		cfg.Certificate, cfg.Key = cert.der, cert.key
	} else {
		cert = testCert{der: cfg.Certificate, key: cfg.Key}
	}
	if cfg.Policies == nil {
		cfg.Policies = allEndpoints()
	}
	cfg.Transport = opts.transport
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raw := &recordingListener{Listener: nl}
	ln, err := uacp.NewListener(raw, opts.transport)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &testServer{
		t:       t,
		url:     "opc.tcp://" + nl.Addr().String() + "/test",
		cert:    cert,
		raw:     raw,
		ln:      ln,
		cancel:  cancel,
		channel: make(chan *ServerChannel, 64),
		errs:    make(chan error, 64),
		handler: opts.handler,
	}
	if s.handler == nil {
		s.handler = echoHandler
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			conn, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				sc, err := Accept(conn, &cfg)
				if err != nil {
					s.errs <- err
					return
				}
				select {
				case s.channel <- sc:
				default:
				}
				err = sc.Serve(ctx, func(r *Request) {
					s.mu.Lock()
					h := s.handler
					s.mu.Unlock()
					h(sc, r)
				})
				select {
				case s.errs <- err:
				default:
				}
			}()
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *testServer) setHandler(h func(*ServerChannel, *Request)) {
	s.mu.Lock()
	s.handler = h
	s.mu.Unlock()
}

func (s *testServer) stop() {
	s.cancel()
	s.ln.Close()
	s.wg.Wait()
}

// nextChannel returns the next channel the server accepted.
func (s *testServer) nextChannel() *ServerChannel {
	s.t.Helper()
	select {
	case sc := <-s.channel:
		return sc
	case <-time.After(10 * time.Second):
		s.t.Fatal("no channel accepted")
		return nil
	}
}

// echoHandler answers a ReadRequest with one String value per node, the node's
// string id, so a large request gets an equally large response; GetEndpoints
// with one endpoint; anything else with Bad_ServiceUnsupported.
func echoHandler(s *ServerChannel, r *Request) {
	switch m := r.Message.(type) {
	case *ua.ReadRequest:
		resp := &ua.ReadResponse{Results: make([]ua.DataValue, len(m.NodesToRead))}
		for i, n := range m.NodesToRead {
			resp.Results[i] = ua.DataValue{Value: ua.NewStringVariant(n.NodeID.Text)}
		}
		_ = s.Respond(r, resp)
	case *ua.GetEndpointsRequest:
		_ = s.Respond(r, &ua.GetEndpointsResponse{Endpoints: []ua.EndpointDescription{{
			EndpointURL:       m.EndpointURL,
			SecurityPolicyURI: SecurityPolicyNone,
			SecurityMode:      ua.MessageSecurityModeNone,
		}}})
	default:
		_ = s.RespondFault(r, ua.StatusBadServiceUnsupported)
	}
}

// readRequest returns a ReadRequest of n nodes whose string ids have size bytes.
func readRequest(prefix string, n, size int) *ua.ReadRequest {
	req := &ua.ReadRequest{NodesToRead: make([]ua.ReadValueID, n)}
	pad := strings.Repeat("x", max(0, size-len(prefix)-6))
	for i := range req.NodesToRead {
		id := prefix + pad + string(rune('A'+i%26)) + string(rune('a'+i/26%26))
		req.NodesToRead[i] = ua.ReadValueID{NodeID: ua.NewStringNodeID(1, id), AttributeID: 13}
	}
	return req
}

// checkEcho checks that resp answers req as echoHandler does.
func checkEcho(t testing.TB, req *ua.ReadRequest, out ua.Structure, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	resp, ok := out.(*ua.ReadResponse)
	if !ok {
		t.Fatalf("response %T", out)
	}
	if len(resp.Results) != len(req.NodesToRead) {
		t.Fatalf("%d results for %d nodes", len(resp.Results), len(req.NodesToRead))
	}
	for i, dv := range resp.Results {
		s := dv.Value.Str()
		if s != req.NodesToRead[i].NodeID.Text {
			t.Fatalf("result %d: %.40q, want %.40q", i, s, req.NodesToRead[i].NodeID.Text)
		}
	}
}

// clientConfig returns a client configuration for an endpoint of s.
func (s *testServer) clientConfig(t testing.TB, ep EndpointSecurity) *Config {
	cfg := &Config{SecurityPolicyURI: ep.PolicyURI, SecurityMode: ep.Mode, AllowDeprecated: true}
	if ep.PolicyURI != SecurityPolicyNone {
		c := newTestCert(t, "client", 2048, 1)
		cfg.LocalCertificate, cfg.LocalKey = c.der, c.key
		cfg.RemoteCertificate = s.cert.der
	}
	return cfg
}

func (s *testServer) dial(t testing.TB, cfg *Config) *Channel {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, s.url, cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitErr waits for the channel to end and returns why.
func waitErr(t testing.TB, c *Channel) error {
	t.Helper()
	select {
	case <-c.Done():
		return c.Err()
	case <-time.After(10 * time.Second):
		t.Fatal("channel did not end")
		return nil
	}
}
