package uasc

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
)

// smallBuffers makes messages of a few tens of KiB span many chunks.
var smallBuffers = &uacp.Config{ReceiveBufferSize: 8192, SendBufferSize: 8192}

// TestChannelMatrix opens a channel with every policy and mode against our server
// and exchanges a small (one chunk) and a large (many chunks each way) ReadRequest.
func TestChannelMatrix(t *testing.T) {
	srv := startServer(t, serverOptions{})
	small := readRequest("small", 3, 20)
	large := readRequest("large", 40, 3000) // ~120 KiB each way: 15+ chunks of 8 KiB
	for _, ep := range allEndpoints() {
		p, _ := PolicyByURI(ep.PolicyURI)
		t.Run(p.Name+"_"+ep.Mode.String(), func(t *testing.T) {
			cfg := srv.clientConfig(t, ep)
			cfg.Transport = smallBuffers
			c := srv.dial(t, cfg)
			if c.SecurityPolicy() != p || c.SecurityMode() != ep.Mode {
				t.Fatalf("channel is %s/%s", c.SecurityPolicy(), c.SecurityMode())
			}
			if c.ChannelID() == 0 {
				t.Fatal("channel id 0")
			}
			if n := c.ServerNonce(); len(n) != p.NonceLength {
				t.Fatalf("server nonce of %d bytes", len(n))
			}
			sc := srv.nextChannel()
			if sc.ChannelID() != c.ChannelID() || sc.SecurityMode() != ep.Mode {
				t.Fatalf("server side: channel %d mode %s", sc.ChannelID(), sc.SecurityMode())
			}
			ctx := context.Background()
			out, err := c.SendRequest(ctx, small, nil)
			checkEcho(t, small, out, err)
			// Decoding into a given response reuses it.
			var resp ua.ReadResponse
			out, err = c.SendRequest(ctx, large, &resp)
			checkEcho(t, large, out, err)
			if out != &resp {
				t.Fatal("response not decoded into resp")
			}
			out, err = c.SendRequest(ctx, small, &resp)
			checkEcho(t, small, out, err)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if !errors.Is(c.Err(), ErrChannelClosed) {
				t.Fatalf("Err after Close: %v", c.Err())
			}
			if _, err := c.SendRequest(ctx, small, nil); !errors.Is(err, ErrChannelClosed) {
				t.Fatalf("request after Close: %v", err)
			}
			// The server saw the CloseSecureChannel: Serve returns nil.
			select {
			case err := <-srv.errs:
				if err != nil {
					t.Fatalf("Serve: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Serve did not return")
			}
		})
	}
}

// TestExtraPadding uses keys above 2048 bits, whose asymmetric chunks carry the
// ExtraPaddingSize byte, on both sides.
func TestExtraPadding(t *testing.T) {
	if testing.Short() {
		t.Skip("3072-bit keys")
	}
	sc := newTestCert(t, "server3072", 3072, 0)
	srv := startServer(t, serverOptions{cfg: ServerConfig{Certificate: sc.der, Key: sc.key, Policies: []EndpointSecurity{
		{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt},
		{SecurityPolicyAes256Sha256RsaPss, ua.MessageSecurityModeSignAndEncrypt},
	}}})
	cc := newTestCert(t, "client3072", 3072, 1)
	for _, uri := range []string{SecurityPolicyBasic256Sha256, SecurityPolicyAes256Sha256RsaPss} {
		c, err := Dial(context.Background(), srv.url, &Config{
			SecurityPolicyURI: uri, SecurityMode: ua.MessageSecurityModeSignAndEncrypt,
			LocalCertificate: cc.der, LocalKey: cc.key, RemoteCertificate: sc.der,
		})
		if err != nil {
			select {
			case serr := <-srv.errs:
				t.Fatalf("dial: %v (server: %v)", err, serr)
			case <-time.After(time.Second):
				t.Fatalf("dial: %v", err)
			}
		}
		req := readRequest("x", 5, 100)
		out, err := c.SendRequest(context.Background(), req, nil)
		checkEcho(t, req, out, err)
		c.Close()
	}
}

// TestTokenRenewal keeps requests going across several renewals of a short token.
func TestTokenRenewal(t *testing.T) {
	srv := startServer(t, serverOptions{cfg: ServerConfig{MinTokenLifetime: 100 * time.Millisecond}})
	for _, ep := range []EndpointSecurity{
		{SecurityPolicyNone, ua.MessageSecurityModeNone},
		{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt},
		{SecurityPolicyAes128Sha256RsaOaep, ua.MessageSecurityModeSign},
	} {
		t.Run(ep.PolicyURI[len("http://opcfoundation.org/UA/SecurityPolicy#"):], func(t *testing.T) {
			t.Parallel()
			cfg := srv.clientConfig(t, ep)
			cfg.Lifetime = time.Second // renewed every 750 ms
			c := srv.dial(t, cfg)
			first := c.sc.sendTok.Load().id
			nonce := c.ServerNonce()
			req := readRequest("renew", 2, 50)
			deadline := time.Now().Add(20 * time.Second)
			var n int
			for c.sc.sendTok.Load().id < first+3 {
				if time.Now().After(deadline) {
					t.Fatalf("token %d after %d requests, want %d", c.sc.sendTok.Load().id, n, first+3)
				}
				out, err := c.SendRequest(context.Background(), req, nil)
				checkEcho(t, req, out, err)
				n++
				time.Sleep(20 * time.Millisecond) // pace the requests, not a synchronisation
			}
			if ep.PolicyURI != SecurityPolicyNone && string(c.ServerNonce()) == string(nonce) {
				t.Fatal("server nonce unchanged after renewals")
			}
			// A few more after the last renewal, and the server has moved on too.
			for range 3 {
				out, err := c.SendRequest(context.Background(), req, nil)
				checkEcho(t, req, out, err)
			}
			// The server answers with the newest token by now, so the client
			// has dropped the previous one (checked on the reader goroutine).
			moved := make(chan bool, 1)
			if err := c.SendRequestAsync(req, nil, 0, func(_ ua.Structure, err error) {
				cur := c.sc.sendTok.Load()
				moved <- err == nil && (c.sc.recvToks[0] != cur || c.sc.recvToks[1] == nil)
			}); err != nil {
				t.Fatal(err)
			}
			if !<-moved {
				t.Fatal("the previous token is still in use after the renewal")
			}
			t.Logf("%d requests across %d renewals", n, c.sc.sendTok.Load().id-first)
		})
	}
}

// TestManyInFlight sends many requests at once, synchronous and asynchronous, and
// checks that each gets its own response.
func TestManyInFlight(t *testing.T) {
	srv := startServer(t, serverOptions{})
	// The server answers in reverse order of arrival, in batches, so responses
	// come back out of order.
	var mu sync.Mutex
	var parked []*Request
	srv.setHandler(func(s *ServerChannel, r *Request) {
		mu.Lock()
		parked = append(parked, r)
		batch := parked
		if len(batch) < 10 {
			mu.Unlock()
			return
		}
		parked = nil
		mu.Unlock()
		for i := len(batch) - 1; i >= 0; i-- {
			echoHandler(s, batch[i])
		}
	})
	c := srv.dial(t, srv.clientConfig(t, EndpointSecurity{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt}))

	const async, sync_ = 100, 50
	var wg sync.WaitGroup
	var failures atomic.Int32
	for i := range async {
		req := readRequest(fmt.Sprintf("async%d-", i), 1, 30)
		wg.Add(1)
		err := c.SendRequestAsync(req, nil, 0, func(out ua.Structure, err error) {
			defer wg.Done()
			r, ok := out.(*ua.ReadResponse)
			if err != nil || !ok || len(r.Results) != 1 || r.Results[0].Value.Str() != req.NodesToRead[0].NodeID.Text {
				failures.Add(1)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range sync_ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := readRequest(fmt.Sprintf("sync%d-", i), 2, 30)
			out, err := c.SendRequest(context.Background(), req, nil)
			if r, ok := out.(*ua.ReadResponse); err != nil || !ok || r.Results[1].Value.Str() != req.NodesToRead[1].NodeID.Text {
				failures.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Fatalf("%d requests got a wrong response", n)
	}
	c.mu.Lock()
	left := len(c.reg.m) + len(c.reg.h)
	c.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d entries left in the registry", left)
	}
}

// TestTimeout: a request the server does not answer times out, a late response is
// dropped, the channel stays usable, and a context deadline works the same way.
func TestTimeout(t *testing.T) {
	srv := startServer(t, serverOptions{})
	release := make(chan struct{})
	srv.setHandler(func(s *ServerChannel, r *Request) {
		if rr, ok := r.Message.(*ua.ReadRequest); ok && rr.NodesToRead[0].NodeID.Text == "slow" {
			go func() { // parked, answered late
				<-release
				echoHandler(s, r)
			}()
			return
		}
		echoHandler(s, r)
	})
	cfg := srv.clientConfig(t, EndpointSecurity{SecurityPolicyNone, ua.MessageSecurityModeNone})
	cfg.RequestTimeout = 200 * time.Millisecond
	c := srv.dial(t, cfg)
	slow := &ua.ReadRequest{NodesToRead: []ua.ReadValueID{{NodeID: ua.NewStringNodeID(1, "slow")}}}

	var resp ua.ReadResponse
	start := time.Now()
	_, err := c.SendRequest(context.Background(), slow, &resp)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, ua.StatusBadTimeout) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("timed out after %v", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = c.SendRequest(ctx, slow, &resp)
	cancel()
	if !errors.Is(err, ErrTimeout) { // from the timer or from ctx, whichever fires first
		t.Fatalf("got %v, want a timeout", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	before := registered(c)
	go func() {
		// Cancel once the request is in flight.
		testutil.Eventually(10*time.Second, func() bool { return registered(c) > before })
		cancel()
	}()
	if _, err = c.SendRequest(ctx, slow, &resp); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}

	done := make(chan error, 1)
	if err := c.SendRequestAsync(slow, nil, 100*time.Millisecond, func(_ ua.Structure, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrTimeout) {
		t.Fatalf("async: %v", err)
	}

	close(release) // the late responses arrive and are dropped
	req := readRequest("after", 2, 10)
	out, err := c.SendRequest(context.Background(), req, nil)
	checkEcho(t, req, out, err)
	if len(resp.Results) != 0 {
		t.Fatal("a late response was decoded into resp")
	}
}

// TestCloseFailsPending: Close fails every pending request with ErrChannelClosed,
// empties the registry and leaves no goroutine behind.
func TestCloseFailsPending(t *testing.T) {
	srv := startServer(t, serverOptions{handler: func(*ServerChannel, *Request) {}}) // never answers
	base := runtime.NumGoroutine()
	c, err := Dial(context.Background(), srv.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	errs := make(chan error, 2*n)
	for range n {
		if err := c.SendRequestAsync(readRequest("p", 1, 10), nil, time.Minute, func(_ ua.Structure, err error) { errs <- err }); err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := c.SendRequest(context.Background(), readRequest("q", 1, 10), nil)
			errs <- err
		}()
	}
	testutil.WaitFor(t, 10*time.Second, "every request registered", func() bool { return registered(c) == 2*n })
	c.Close()
	for range 2 * n {
		if err := <-errs; !errors.Is(err, ErrChannelClosed) || !errors.Is(err, ua.StatusBadSecureChannelClosed) {
			t.Fatalf("pending request: %v", err)
		}
	}
	if len(c.reg.m) != 0 || len(c.reg.h) != 0 {
		t.Fatal("registry not empty after Close")
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed")
	}
	testutil.WaitGoroutines(t, base)
}

// TestNoGoroutineLeak opens and closes channels, and lets some die by the
// server's hand, and checks the goroutine count returns to where it was.
func TestNoGoroutineLeak(t *testing.T) {
	srv := startServer(t, serverOptions{})
	req := readRequest("leak", 1, 10)
	base := runtime.NumGoroutine()
	for i := range 10 {
		c, err := Dial(context.Background(), srv.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		sc := srv.nextChannel()
		out, err := c.SendRequest(context.Background(), req, nil)
		checkEcho(t, req, out, err)
		if i%2 == 0 {
			c.Close()
		} else {
			sc.Close() // the server ends it
			waitErr(t, c)
			c.Close()
		}
	}
	testutil.WaitGoroutines(t, base)
}

// TestCallbackMayClose: a done callback may close the channel and send requests.
func TestCallbackMayClose(t *testing.T) {
	srv := startServer(t, serverOptions{})
	c := srv.dial(t, nil)
	done := make(chan error, 2)
	err := c.SendRequestAsync(readRequest("a", 1, 10), nil, 0, func(_ ua.Structure, err error) {
		err2 := c.SendRequestAsync(readRequest("b", 1, 10), nil, 0, func(_ ua.Structure, err error) { done <- err })
		if err2 != nil {
			done <- err2
		}
		c.Close()
		done <- err
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("callback did not complete")
		}
	}
}

// TestSizeLimits: a request larger than the server accepts fails before anything
// is sent, a response larger than the client accepts becomes a ServiceFault, and
// the channel stays usable after both.
func TestSizeLimits(t *testing.T) {
	srv := startServer(t, serverOptions{transport: &uacp.Config{MaxMessageSize: 64 << 10, MaxChunkCount: 64}})
	cfg := srv.clientConfig(t, EndpointSecurity{SecurityPolicyAes256Sha256RsaPss, ua.MessageSecurityModeSignAndEncrypt})
	cfg.Transport = &uacp.Config{MaxMessageSize: 100 << 10}
	c := srv.dial(t, cfg)
	ctx := context.Background()

	_, err := c.SendRequest(ctx, readRequest("big", 40, 2000), nil) // ~80 KiB > 64 KiB
	if !errors.Is(err, ErrRequestTooLarge) || !errors.Is(err, ua.StatusBadRequestTooLarge) {
		t.Fatalf("large request: %v", err)
	}
	// ~60 KiB request fits the server, its ~60 KiB response fits the client.
	req := readRequest("ok", 30, 2000)
	out, err := c.SendRequest(ctx, req, nil)
	checkEcho(t, req, out, err)

	// A small request whose response is too large for the client.
	srv.setHandler(func(s *ServerChannel, r *Request) {
		resp := &ua.ReadResponse{Results: make([]ua.DataValue, 60)}
		for i := range resp.Results {
			resp.Results[i].Value = ua.NewStringVariant(string(make([]byte, 2000)))
		}
		if err := s.Respond(r, resp); !errors.Is(err, ErrResponseTooLarge) {
			t.Errorf("Respond: %v", err)
		}
	})
	_, err = c.SendRequest(ctx, readRequest("x", 1, 10), nil)
	var sf *ServiceFaultError
	if !errors.As(err, &sf) || sf.Status != ua.StatusBadResponseTooLarge {
		t.Fatalf("large response: %v", err)
	}
	srv.setHandler(echoHandler)
	out, err = c.SendRequest(ctx, req, nil)
	checkEcho(t, req, out, err)
}

// TestServiceFault: a ServiceFault is returned as *ServiceFaultError and leaves
// resp alone.
func TestServiceFault(t *testing.T) {
	srv := startServer(t, serverOptions{})
	c := srv.dial(t, nil)
	var resp ua.BrowseResponse
	_, err := c.SendRequest(context.Background(), &ua.BrowseRequest{RequestHeader: ua.RequestHeader{RequestHandle: 77}}, &resp)
	var sf *ServiceFaultError
	if !errors.As(err, &sf) || !errors.Is(err, ua.StatusBadServiceUnsupported) || sf.RequestHandle != 77 {
		t.Fatalf("got %v", err)
	}
}

// TestRequestHeaderDefaults: a zero Timestamp and TimeoutHint are filled in on the
// wire, set ones are kept.
func TestRequestHeaderDefaults(t *testing.T) {
	srv := startServer(t, serverOptions{})
	got := make(chan *Request, 2)
	srv.setHandler(func(s *ServerChannel, r *Request) {
		got <- r
		echoHandler(s, r)
	})
	cfg := srv.clientConfig(t, EndpointSecurity{SecurityPolicyNone, ua.MessageSecurityModeNone})
	cfg.RequestTimeout = 7 * time.Second
	c := srv.dial(t, cfg)
	req := readRequest("h", 1, 10)
	req.RequestHeader.RequestHandle = 42
	req.RequestHeader.AuthenticationToken = ua.NewOpaqueNodeID(0, []byte("session-token"))
	req.RequestHeader.AuditEntryID = "audit"
	before := ua.Now()
	out, err := c.SendRequest(context.Background(), req, nil)
	checkEcho(t, req, out, err)
	r := <-got
	rr := r.Message.(*ua.ReadRequest)
	if r.Handle != 42 || rr.RequestHeader.RequestHandle != 42 || r.TimeoutHint != 7*time.Second || rr.RequestHeader.Timestamp < before {
		t.Fatalf("request header %+v, handle %d, hint %v", rr.RequestHeader, r.Handle, r.TimeoutHint)
	}
	if rr.RequestHeader.AuditEntryID != "audit" || rr.RequestHeader.AuthenticationToken.Text != "session-token" {
		t.Fatalf("request header %+v", rr.RequestHeader)
	}
	if req.RequestHeader.Timestamp != 0 {
		t.Fatal("the caller's request was modified")
	}
	// Response header: the handle was filled in by Respond.
	if h := out.(*ua.ReadResponse).ResponseHeader; h.RequestHandle != 42 || h.Timestamp == 0 {
		t.Fatalf("response header %+v", h)
	}
	req.RequestHeader.TimeoutHint = 1234
	req.RequestHeader.Timestamp = 99
	out, err = c.SendRequest(context.Background(), req, nil)
	checkEcho(t, req, out, err)
	r = <-got
	if rr := r.Message.(*ua.ReadRequest); rr.RequestHeader.TimeoutHint != 1234 || rr.RequestHeader.Timestamp != 99 {
		t.Fatalf("request header %+v", rr.RequestHeader)
	}
}

// TestConfigValidate checks the configuration errors name the field.
func TestConfigValidate(t *testing.T) {
	cert := newTestCert(t, "c", 2048, 1)
	other := newTestCert(t, "o", 2048, 0)
	cases := []struct {
		name string
		cfg  Config
		want error
	}{
		{"unknown policy", Config{SecurityPolicyURI: "urn:nope"}, ErrPolicyRejected},
		{"deprecated", Config{SecurityPolicyURI: SecurityPolicyBasic256, LocalCertificate: cert.der, LocalKey: cert.key, RemoteCertificate: other.der}, ErrPolicyRejected},
		{"mode none with policy", Config{SecurityPolicyURI: SecurityPolicyBasic256Sha256, SecurityMode: ua.MessageSecurityModeNone}, ErrModeRejected},
		{"sign with policy none", Config{SecurityMode: ua.MessageSecurityModeSign}, ErrModeRejected},
		{"no certificate", Config{SecurityPolicyURI: SecurityPolicyBasic256Sha256}, ErrCertificate},
		{"key mismatch", Config{SecurityPolicyURI: SecurityPolicyBasic256Sha256, LocalCertificate: cert.der, LocalKey: other.key, RemoteCertificate: other.der}, ErrCertificate},
		{"no remote", Config{SecurityPolicyURI: SecurityPolicyBasic256Sha256, LocalCertificate: cert.der, LocalKey: cert.key}, ErrCertificate},
		{"bad remote", Config{SecurityPolicyURI: SecurityPolicyBasic256Sha256, LocalCertificate: cert.der, LocalKey: cert.key, RemoteCertificate: []byte{1, 2, 3}}, ErrCertificate},
	}
	for _, tc := range cases {
		if err := tc.cfg.Validate(); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	ok := Config{SecurityPolicyURI: SecurityPolicyBasic256Sha256, LocalCertificate: cert.der, LocalKey: cert.key, RemoteCertificate: other.der}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	c, _, _ := ok.resolve()
	if c.SecurityMode != ua.MessageSecurityModeSignAndEncrypt || c.Lifetime != DefaultLifetime || c.RequestTimeout != DefaultRequestTimeout {
		t.Fatalf("defaults: %+v", c)
	}
}

// TestServerRefuses: the server refuses what it does not offer or cannot check,
// with an Error message whose status code the client's Dial returns.
func TestServerRefuses(t *testing.T) {
	srv := startServer(t, serverOptions{cfg: ServerConfig{
		Policies: []EndpointSecurity{
			{SecurityPolicyNone, ua.MessageSecurityModeNone},
			{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt},
		},
		ValidateClientCert: func(chain []byte) error {
			if string(chain) == "" {
				return errors.New("empty")
			}
			return nil
		},
	}})
	ctx := context.Background()
	// A mode the server does not offer.
	cfg := srv.clientConfig(t, EndpointSecurity{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSign})
	if _, err := Dial(ctx, srv.url, cfg); !errors.Is(err, ua.StatusBadSecurityModeRejected) {
		t.Fatalf("mode: %v", err)
	}
	// A policy the server does not offer.
	cfg = srv.clientConfig(t, EndpointSecurity{SecurityPolicyAes128Sha256RsaOaep, ua.MessageSecurityModeSignAndEncrypt})
	if _, err := Dial(ctx, srv.url, cfg); !errors.Is(err, ua.StatusBadSecurityPolicyRejected) {
		t.Fatalf("policy: %v", err)
	}
	// Encrypted for another certificate than the server's.
	other := newTestCert(t, "other", 2048, 2)
	cfg = srv.clientConfig(t, EndpointSecurity{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt})
	cfg.RemoteCertificate = other.der
	if _, err := Dial(ctx, srv.url, cfg); !errors.Is(err, ua.StatusBadCertificateInvalid) {
		t.Fatalf("thumbprint: %v", err)
	}
	// A certificate the server's validation refuses.
	srv2 := startServer(t, serverOptions{cfg: ServerConfig{
		ValidateClientCert: func([]byte) error { return fmt.Errorf("untrusted: %w", ua.StatusBadCertificateUntrusted) },
	}})
	cfg = srv2.clientConfig(t, EndpointSecurity{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSign})
	if _, err := Dial(ctx, srv2.url, cfg); !errors.Is(err, ua.StatusBadCertificateUntrusted) {
		t.Fatalf("untrusted: %v", err)
	}
}

// TestGetEndpoints uses the discovery helper against our server.
func TestGetEndpoints(t *testing.T) {
	srv := startServer(t, serverOptions{})
	eps, err := GetEndpoints(context.Background(), srv.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 1 || eps[0].EndpointURL != srv.url {
		t.Fatalf("endpoints %+v", eps)
	}
}

// TestSequenceWrap: sequence numbers wrap around after UInt32.MaxValue, in both
// directions, and the channel goes on.
func TestSequenceWrap(t *testing.T) {
	initialSendSeq = 0xFFFFFFFF - 3 // both sides start just before the wrap
	defer func() { initialSendSeq = 0 }()
	srv := startServer(t, serverOptions{})
	c := srv.dial(t, srv.clientConfig(t, EndpointSecurity{SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSign}))
	req := readRequest("wrap", 2, 4000) // two chunks each way per request
	for range 4 {
		out, err := c.SendRequest(context.Background(), req, nil)
		checkEcho(t, req, out, err)
	}
	c.sc.wmu.Lock()
	seq := c.sc.sendSeq
	c.sc.wmu.Unlock()
	if seq > 100 {
		t.Fatalf("client sequence number %d did not wrap", seq)
	}
	sc := srv.nextChannel()
	sc.sc.wmu.Lock()
	seq = sc.sc.sendSeq
	sc.sc.wmu.Unlock()
	if seq > 100 {
		t.Fatalf("server sequence number %d did not wrap", seq)
	}
}

// TestSeqCheck is a table of the receive rule.
func TestSeqCheck(t *testing.T) {
	cases := []struct {
		prev, next uint32
		ok         bool
	}{
		{1, 2, true},
		{1, 1, false},
		{1, 3, false},
		{5, 4, false},
		{seqWrapAfter - 1, seqWrapAfter, true},
		{seqWrapAfter - 1, 1, false},
		{seqWrapAfter, 1, true},
		{seqWrapAfter, 0, true},
		{seqWrapAfter + 5, 1023, true},
		{seqWrapAfter + 5, 1024, false},
		{0xFFFFFFFF, 0, true},
		{0xFFFFFFFF, 1, true},
	}
	for _, tc := range cases {
		var s secureConn
		s.checkSeq(tc.prev)
		err := s.checkSeq(tc.next)
		if (err == nil) != tc.ok {
			t.Errorf("%d after %d: %v", tc.next, tc.prev, err)
		}
		if err != nil && !errors.Is(err, ua.StatusBadSequenceNumberInvalid) {
			t.Errorf("error %v", err)
		}
	}
}

// TestDeadlineHeap checks the registry's heap against a sorted order under
// random insertions and removals.
func TestDeadlineHeap(t *testing.T) {
	var r registry
	r.m = map[uint32]*pending{}
	r.onTimer = func() {}
	var ps []*pending
	for i := range 200 {
		p := &pending{}
		r.add(p, time.Duration((i*7919)%1000)*time.Millisecond)
		ps = append(ps, p)
	}
	for i := 0; i < len(ps); i += 3 {
		if !r.remove(ps[i].id, ps[i]) {
			t.Fatal("remove failed")
		}
	}
	var last int64
	n := 0
	for len(r.h) > 0 {
		p := r.h[0]
		if p.deadline < last {
			t.Fatal("heap order broken")
		}
		last = p.deadline
		if r.take(p.id) != p {
			t.Fatal("take failed")
		}
		n++
	}
	if n != 200-67 || len(r.m) != 0 {
		t.Fatalf("%d taken, %d left in map", n, len(r.m))
	}
	r.timer.Stop()
}

// TestDialTimeout: a server that never answers OpenSecureChannel makes Dial fail
// when its context ends, and leaves no goroutine behind.
func TestDialTimeout(t *testing.T) {
	ln, err := uacp.Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	base := runtime.NumGoroutine()
	accepted := make(chan *uacp.Conn, 1)
	go func() {
		conn, err := ln.Accept(context.Background())
		if err == nil {
			accepted <- conn // handshake done, then silence
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Dial(ctx, "opc.tcp://"+ln.Addr().String(), nil)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ua.StatusBadTimeout) {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Dial took %v", d)
	}
	(<-accepted).Close()
	testutil.WaitGoroutines(t, base)
}

// TestReverseConnect: the server connects to the client (uacp reverse connect)
// and the client opens the channel over that connection with NewClientChannel.
func TestReverseConnect(t *testing.T) {
	rl, err := uacp.ListenReverse("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	cert := newTestCert(t, "server", 2048, 0)
	srvErr := make(chan error, 1)
	go func() {
		conn, err := uacp.DialReverse(context.Background(), rl.Addr().String(), "urn:test:server", "opc.tcp://127.0.0.1:4840/rev", nil)
		if err != nil {
			srvErr <- err
			return
		}
		s, err := Accept(conn, &ServerConfig{Policies: allEndpoints(), Certificate: cert.der, Key: cert.key})
		if err != nil {
			srvErr <- err
			return
		}
		srvErr <- s.Serve(context.Background(), func(r *Request) { echoHandler(s, r) })
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := rl.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv := &testServer{cert: cert}
	c, err := NewClientChannel(conn, srv.clientConfig(t, EndpointSecurity{SecurityPolicyAes128Sha256RsaOaep, ua.MessageSecurityModeSign}))
	if err != nil {
		t.Fatal(err)
	}
	if c.EndpointURL() != "opc.tcp://127.0.0.1:4840/rev" {
		t.Fatalf("endpoint URL %q", c.EndpointURL())
	}
	req := readRequest("rev", 2, 100)
	out, err := c.SendRequest(ctx, req, nil)
	checkEcho(t, req, out, err)
	c.Close()
	if err := <-srvErr; err != nil {
		t.Fatalf("server: %v", err)
	}
}

// registered returns the number of requests waiting for their response.
func registered(c *Channel) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.reg.m)
}
