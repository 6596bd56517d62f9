package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// Failures that must be visible, not retried blindly (permanent failures and
// their slow retries), a stalled connection detected with the default
// settings, and the publish engine adapting to the round trip and to the
// server's limits, against the simulation server.

func TestClassifyFailure(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want FailureReason
	}{
		{nil, FailureNone},
		{errors.New("connection refused"), FailureNone},
		{fmt.Errorf("uacp: dial: %w (%w)", ua.StatusBadCommunicationError, errors.New("connect: connection refused")), FailureNone},
		{ua.StatusBadTimeout, FailureNone},
		{fmt.Errorf("client: %w", ua.StatusBadTooManySessions), FailureNone},
		{fmt.Errorf("client: Read: %w", uasc.ErrChannelClosed), FailureNone},
		{context.DeadlineExceeded, FailureNone},
		{ErrClosed, FailureNone},
		{fmt.Errorf("client: ActivateSession: %w", ua.StatusBadUserAccessDenied), FailureIdentity},
		{ua.StatusBadIdentityTokenRejected, FailureIdentity},
		{ua.StatusBadIdentityTokenInvalid, FailureIdentity},
		{fmt.Errorf("x: %w", &pki.UntrustedError{Subject: "s"}), FailureUntrustedCertificate},
		{fmt.Errorf("x: %w", &pki.CertError{Err: pki.ErrExpired}), FailureCertificate},
		{fmt.Errorf("x: %w", &pki.CertError{Err: pki.ErrKeySize}), FailureCertificate},
		{ua.StatusBadCertificateUntrusted, FailureCertificate},
		{fmt.Errorf("uasc: OPN: %w", ua.StatusBadCertificateTimeInvalid), FailureCertificate},
		{ua.StatusBadCertificateRevoked, FailureCertificate},
		{ua.StatusBadSecurityChecksFailed, FailureCertificate},
		{ErrServerCertificate, FailureCertificate},
		{&EndpointMismatchError{}, FailureCertificate},
		{fmt.Errorf("client: %s: %w", "opc.tcp://x", ErrNoEndpoint), FailureNoEndpoint},
		{ua.StatusBadSecurityPolicyRejected, FailureNoEndpoint},
		{fmt.Errorf("%w: %q", ErrEndpointURL, "http://x"), FailureEndpointURL},
		{ua.StatusBadTcpEndpointUrlInvalid, FailureEndpointURL},
		{fmt.Errorf("uacp: dial: %w (%w)", ua.StatusBadCommunicationError, &net.DNSError{Err: "no such host", Name: "plc7", IsNotFound: true}), FailureEndpointURL},
		{&net.DNSError{Err: "i/o timeout", Name: "plc7", IsTimeout: true}, FailureNone},
	} {
		if got := ClassifyFailure(tc.err); got != tc.want {
			t.Errorf("ClassifyFailure(%v) = %v, want %v", tc.err, got, tc.want)
		}
		if IsPermanent(tc.err) != (tc.want != FailureNone) {
			t.Errorf("IsPermanent(%v) = %v", tc.err, IsPermanent(tc.err))
		}
	}
	if s := FailureIdentity.String(); s != "identity-rejected" {
		t.Errorf("FailureIdentity.String() = %q", s)
	}
	if s := StateFailed.String(); s != "Failed" {
		t.Errorf("StateFailed.String() = %q", s)
	}
}

// permanentConfig retries quickly after ordinary failures and slowly (300 ms,
// 600 ms, 1 s, no jitter) after permanent ones.
func permanentConfig(log *stateLog) *ManagedConfig {
	cfg := testManagedConfig(log)
	cfg.Backoff = Backoff{Initial: 20 * time.Millisecond, Max: 50 * time.Millisecond}
	cfg.PermanentBackoff = Backoff{Initial: 300 * time.Millisecond, Max: time.Second, Jitter: -1}
	return cfg
}

func newStore(t *testing.T) *pki.Store {
	t.Helper()
	store, err := pki.Open(t.TempDir(), pki.Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

func startManagedBare(t *testing.T, url string, cfg *ManagedConfig) *ManagedSession {
	t.Helper()
	m, err := NewManagedSession(url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	m.Start()
	return m
}

// waitFailed waits for StateFailed with the reason, then for two slow
// retries, and checks that they were slow and that the session stayed
// Failed meanwhile. It returns the session's error.
func waitFailed(t *testing.T, m *ManagedSession, log *stateLog, want FailureReason) error {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, "StateFailed", func() bool { return m.State() == StateFailed })
	if r := m.FailureReason(); r != want {
		t.Fatalf("FailureReason %v, want %v (err %v)", r, want, m.Err())
	}
	err := m.Err()
	if ClassifyFailure(err) != want {
		t.Fatalf("Err %v classified %v", err, ClassifyFailure(err))
	}
	testutil.WaitFor(t, 10*time.Second, "three failed attempts", func() bool { return log.seen(StateFailed) >= 3 })
	log.mu.Lock()
	defer log.mu.Unlock()
	var at []time.Time
	for i, st := range log.states {
		switch {
		case st == StateFailed:
			at = append(at, log.at[i])
		case len(at) > 0:
			t.Fatalf("state %v after Failed, before anything changed: %v", st, log.String())
		}
	}
	// PermanentBackoff: 300 ms, then 600 ms (the ordinary Backoff is 20 ms).
	if d := at[1].Sub(at[0]); d < 300*time.Millisecond {
		t.Errorf("second attempt %v after the first, want ≥ 300 ms (PermanentBackoff)", d)
	}
	if d := at[2].Sub(at[1]); d < 600*time.Millisecond {
		t.Errorf("third attempt %v after the second, want ≥ 600 ms", d)
	}
	return err
}

func TestManagedPermanentFailure(t *testing.T) {
	t.Run("WrongPassword", func(t *testing.T) {
		// The server refuses the password: Failed (identity-rejected), slow
		// retries; once the server's account has the password the client
		// uses, the next retry connects.
		users := func(pw string) simOptions {
			return simOptions{Configure: func(c *server.Config) {
				c.Users, c.DisableAnonymous = map[string]string{"operator": pw}, true
			}}
		}
		srv := startSim(t, users("secret"))
		var log stateLog
		cfg := permanentConfig(&log)
		cfg.Client.Store, cfg.Client.AutoAccept = newStore(t), true // the password is encrypted for the server
		cfg.Client.Identity = UserName("operator", "guess")
		m := startManagedBare(t, srv.URL(), cfg)
		err := waitFailed(t, m, &log, FailureIdentity)
		if !errors.Is(err, ua.StatusBadUserAccessDenied) {
			t.Errorf("err %v, want BadUserAccessDenied", err)
		}
		if c := m.Client(); c != nil {
			t.Error("Client() while Failed")
		}
		addr := srv.Addr().String()
		srv.Close()
		startSim(t, func() simOptions { o := users("guess"); o.Address = addr; return o }())
		if _, err := m.WaitConnected(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if r := m.FailureReason(); r != FailureNone || m.Err() != nil {
			t.Errorf("connected, reason %v, err %v", r, m.Err())
		}
	})

	t.Run("UntrustedServerCertificate", func(t *testing.T) {
		// The server's certificate is not trusted: Failed
		// (certificate-untrusted); the operator moves the rejected copy to
		// trusted/, and the next slow retry connects.
		srv := startSim(t, simOptions{AllPolicies: true})
		store := newStore(t)
		var log stateLog
		cfg := permanentConfig(&log)
		cfg.Client.Store, cfg.Client.SecurityPolicy = store, uasc.SecurityPolicyBasic256Sha256
		m := startManagedBare(t, srv.URL(), cfg)
		err := waitFailed(t, m, &log, FailureUntrustedCertificate)
		var ue *pki.UntrustedError
		if !errors.As(err, &ue) {
			t.Fatalf("err %v, want a *pki.UntrustedError", err)
		}
		if _, err := store.TrustRejected(ue.Thumbprint); err != nil {
			t.Fatal(err)
		}
		trusted := time.Now()
		if _, err := m.WaitConnected(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		// The next slow retry: at most PermanentBackoff.Max away.
		if d := time.Since(trusted); d > 3*time.Second {
			t.Errorf("connected %v after the certificate was trusted", d)
		}
		if m.State() != StateConnected || m.FailureReason() != FailureNone {
			t.Errorf("state %v, reason %v", m.State(), m.FailureReason())
		}
	})

	t.Run("RetryNow", func(t *testing.T) {
		// As UntrustedServerCertificate, with a slow retry an hour away:
		// RetryNow after the trust connects at once.
		srv := startSim(t, simOptions{AllPolicies: true})
		store := newStore(t)
		var log stateLog
		cfg := permanentConfig(&log)
		cfg.PermanentBackoff = Backoff{Initial: time.Hour, Max: time.Hour}
		cfg.Client.Store, cfg.Client.SecurityPolicy = store, uasc.SecurityPolicyBasic256Sha256
		m := startManagedBare(t, srv.URL(), cfg)
		testutil.WaitFor(t, 10*time.Second, "the session Failed", func() bool { return m.State() == StateFailed })
		var ue *pki.UntrustedError
		if err := m.Err(); !errors.As(err, &ue) {
			t.Fatalf("err %v, want a *pki.UntrustedError", err)
		}
		if _, err := store.TrustRejected(ue.Thumbprint); err != nil {
			t.Fatal(err)
		}
		m.RetryNow()
		m.RetryNow() // a second one while the first is pending: no harm
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := m.WaitConnected(ctx); err != nil {
			t.Fatalf("not connected after RetryNow: %v", err)
		}
	})

	t.Run("NoSuchPolicy", func(t *testing.T) {
		// The server offers None only; the configuration asks for
		// Basic256Sha256.
		srv := startSim(t, simOptions{})
		var log stateLog
		cfg := permanentConfig(&log)
		cfg.Client.Store, cfg.Client.SecurityPolicy = newStore(t), uasc.SecurityPolicyBasic256Sha256
		m := startManagedBare(t, srv.URL(), cfg)
		if err := waitFailed(t, m, &log, FailureNoEndpoint); !errors.Is(err, ErrNoEndpoint) {
			t.Errorf("err %v, want ErrNoEndpoint", err)
		}
	})

	t.Run("InvalidURL", func(t *testing.T) {
		var log stateLog
		m := startManagedBare(t, "opc.tcp:///no-host", permanentConfig(&log))
		if err := waitFailed(t, m, &log, FailureEndpointURL); !errors.Is(err, ErrEndpointURL) {
			t.Errorf("err %v, want ErrEndpointURL", err)
		}
	})

	t.Run("GiveUpWithMaxElapsed", func(t *testing.T) {
		// An application that would rather give up (Backoff.MaxElapsed)
		// does so after that long, permanent failure or not: the slow retry
		// does not wait past it.
		srv := startSim(t, simOptions{AllPolicies: true})
		var log stateLog
		cfg := testManagedConfig(&log)
		cfg.Backoff = Backoff{MaxElapsed: 200 * time.Millisecond}
		cfg.Client.Store, cfg.Client.SecurityPolicy = newStore(t), uasc.SecurityPolicyBasic256Sha256
		m := startManagedBare(t, srv.URL(), cfg)
		start := time.Now()
		_, err := m.WaitConnected(ctxT(t))
		var ue *pki.UntrustedError
		if !errors.Is(err, ErrGaveUp) || !errors.As(err, &ue) {
			t.Fatalf("WaitConnected: %v, want ErrGaveUp and the untrusted certificate", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("gave up after %v (MaxElapsed 200 ms)", d)
		}
		if m.State() != StateDisconnected || log.seen(StateFailed) == 0 {
			t.Errorf("state %v; %v", m.State(), log.String())
		}
	})

	t.Run("TransientAfterPermanent", func(t *testing.T) {
		// A server that goes away while the session is Failed is an ordinary
		// fault again: Connecting, quick retries.
		srv := startSim(t, simOptions{})
		var log stateLog
		cfg := permanentConfig(&log)
		cfg.Client.Store, cfg.Client.SecurityPolicy = newStore(t), uasc.SecurityPolicyBasic256Sha256
		m := startManagedBare(t, srv.URL(), cfg)
		testutil.WaitFor(t, 10*time.Second, "StateFailed", func() bool { return m.State() == StateFailed })
		srv.Close()
		testutil.WaitFor(t, 10*time.Second, "Connecting", func() bool { return m.State() == StateConnecting })
		if r := m.FailureReason(); r != FailureNone {
			t.Errorf("reason %v while Connecting", r)
		}
	})
}

// TestAutoAcceptValidatesFirst: Config.AutoAccept trusts an unknown server
// certificate only when it passes every other check: an expired one is
// refused and does not land in trusted/.
func TestAutoAcceptValidatesFirst(t *testing.T) {
	der, key, err := pki.CreateCertificate(pki.CertRequest{
		ApplicationURI: server.DefaultApplicationURI, CommonName: "expired sim", Hosts: []string{"127.0.0.1", "localhost"},
		NotBefore: time.Now().Add(-48 * time.Hour), Validity: 24 * time.Hour,
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := startSim(t, simOptions{AllPolicies: true, Configure: func(c *server.Config) { c.Certificate, c.Key = der, key }})
	store := newStore(t)
	_, err = Dial(ctxT(t), srv.URL(), &Config{Store: store, AutoAccept: true, SecurityPolicy: uasc.SecurityPolicyBasic256Sha256, Logger: quietLog})
	if !errors.Is(err, pki.ErrExpired) {
		t.Fatalf("got %v, want pki.ErrExpired", err)
	}
	if trusted, _ := store.List(pki.FolderTrusted); len(trusted) != 0 {
		t.Fatalf("the expired certificate was trusted: %v", trusted[0].Path)
	}

	// A valid one is accepted and trusted.
	srv2 := startSim(t, simOptions{AllPolicies: true})
	c, err := Dial(ctxT(t), srv2.URL(), &Config{Store: store, AutoAccept: true, SecurityPolicy: uasc.SecurityPolicyBasic256Sha256, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if trusted, _ := store.List(pki.FolderTrusted); len(trusted) != 1 {
		t.Fatalf("%d trusted certificates, want 1", len(trusted))
	}
}

// TestManagedStallDefaults: a connection that stays open but carries nothing
// more is detected within the subscription's keep-alive window plus
// KeepAliveGrace, with the default settings, even when the server status read
// (every DefaultKeepAliveInterval) is the request that gets no answer.
func TestManagedStallDefaults(t *testing.T) {
	srv := startSim(t, simOptions{})
	proxy := newFaultProxy(t, srv.URL())
	var log stateLog
	var clog counterLog
	cfg := &ManagedConfig{Client: Config{SecurityPolicy: "None", Logger: quietLog}, OnStateChange: log.on}
	m, sub := startManaged(t, proxy.URL(), cfg, &clog)
	proxy.StallOnRead()
	testutil.WaitFor(t, DefaultKeepAliveInterval+5*time.Second, "the status read stalling the connection", func() bool { return !proxy.StalledAt().IsZero() })
	stalled := proxy.StalledAt()
	testutil.WaitFor(t, 15*time.Second, "the stall detected", func() bool { return log.seen(StateReconnecting) > 0 })
	var detected time.Time
	log.mu.Lock()
	for i, st := range log.states {
		if st == StateReconnecting {
			detected = log.at[i]
			break
		}
	}
	log.mu.Unlock()
	took := detected.Sub(stalled)
	// The supervision ticks every 250 ms; allow as much again for a loaded
	// machine.
	bound := sub.keepAliveWindow() + DefaultKeepAliveGrace + 500*time.Millisecond
	t.Logf("stall detected after %v (bound %v)", took.Round(time.Millisecond), bound)
	if took > bound {
		t.Errorf("stall detected after %v, want within the keep-alive window %v + grace %v", took, sub.keepAliveWindow(), DefaultKeepAliveGrace)
	}
	before := clog.last()
	testutil.WaitFor(t, 15*time.Second, "values after the recovery", func() bool {
		return m.State() == StateConnected && clog.last() >= before+10
	})
}

// TestPublishRequestsFollowRTT: the number of outstanding Publish requests
// grows with the round trip, so that the server always has one to answer
// with while the others travel, and shrinks again with it.
func TestPublishRequestsFollowRTT(t *testing.T) {
	srv := startSim(t, simOptions{})
	proxy := newFaultProxy(t, srv.URL())
	m := startManagedBare(t, proxy.URL(), &ManagedConfig{
		Client: Config{SecurityPolicy: "None", Logger: quietLog, RequestTimeout: 5 * time.Second},
		// Round-trip samples come from the status read.
		KeepAliveInterval: 100 * time.Millisecond,
	})
	ctx := ctxT(t)
	var n atomic.Int64
	sub, err := m.CreateSubscription(ctx, &SubscriptionConfig{
		PublishingInterval: 50 * time.Millisecond,
		KeepAliveCount:     20,
		OnDataChange:       func(_ *Subscription, _ uint32, items []ua.MonitoredItemNotification) { n.Add(int64(len(items))) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.CreateMonitoredItems(ctx, []ItemRequest{{NodeID: mustNode(server.NodeCounter)}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "values", func() bool { return n.Load() > 10 })
	// Near: one per subscription, plus one for the response on its way; at
	// least minPublishRequests.
	testutil.WaitFor(t, 10*time.Second, "few requests on loopback", func() bool {
		r := m.Stats().PublishRequests
		return r >= minPublishRequests && r <= 3
	})
	near := m.Stats()
	// 300 ms away: a response is sent every 50 ms, six are on their way at
	// any time.
	proxy.Delay(300 * time.Millisecond)
	testutil.WaitFor(t, 20*time.Second, "more requests 300 ms away", func() bool { return m.Stats().PublishRequests >= 5 })
	far := m.Stats()
	got := n.Load()
	testutil.WaitFor(t, 10*time.Second, "values from afar", func() bool { return n.Load() > got+10 })
	proxy.Delay(0)
	testutil.WaitFor(t, 20*time.Second, "fewer requests near again", func() bool { return m.Stats().PublishRequests <= 3 })
	t.Logf("outstanding Publish requests: near %d, 300 ms away %d (limit %d)", near.PublishRequests, far.PublishRequests, far.PublishLimit)
	if st := m.Stats(); st.Faults != 0 {
		t.Errorf("faults %+v", st)
	}
}

// TestPublishLimitProbe: a server that allows one parked Publish request
// answers the second with BadTooManyPublishRequests; the client keeps to one,
// and probes for a second again later, which the server refuses again (its
// ServiceFaults count the probes).
func TestPublishLimitProbe(t *testing.T) {
	srv := startSim(t, simOptions{Configure: func(c *server.Config) { c.MaxPublishRequestsPerSession = 1 }})
	m, err := NewManagedSession(srv.URL(), &ManagedConfig{Client: Config{SecurityPolicy: "None", Logger: quietLog}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	m.pub.post(func() { m.pub.probe = 200 * time.Millisecond })
	m.Start()
	ctx := ctxT(t)
	var n atomic.Int64
	sub, err := m.CreateSubscription(ctx, &SubscriptionConfig{
		PublishingInterval: 100 * time.Millisecond,
		OnDataChange:       func(_ *Subscription, _ uint32, items []ua.MonitoredItemNotification) { n.Add(int64(len(items))) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.CreateMonitoredItems(ctx, []ItemRequest{{NodeID: mustNode(server.NodeCounter)}}, nil); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the limit lowered to the server's", func() bool {
		return m.Stats().PublishLimit == 1 && srv.Stats().Faults >= 1
	})
	f0 := srv.Stats().Faults
	got := n.Load()
	testutil.WaitFor(t, 10*time.Second, "probes refused by the server", func() bool { return srv.Stats().Faults >= f0+3 })
	testutil.WaitFor(t, 10*time.Second, "values meanwhile", func() bool { return n.Load() > got+10 })
	if st := m.Stats(); st.Faults != 0 || st.PublishLimit > 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestCreateItemsLearnsHiddenLimit: a server that enforces a limit on the
// items per CreateMonitoredItems it does not publish refuses the first
// batches with BadTooManyOperations; the client halves them until they fit,
// remembers the size, and later calls fit at once.
func TestCreateItemsLearnsHiddenLimit(t *testing.T) {
	const vars, limit = 1000, 100
	srv := startSim(t, simOptions{Folders: 1, Variables: vars, MaxItemsPerCall: limit,
		Configure: func(c *server.Config) { c.HideOperationLimits = true }})
	c := dialNone(t, srv.URL())
	if l := c.OperationLimits().MaxMonitoredItemsPerCall; l != 0 {
		t.Fatalf("MaxMonitoredItemsPerCall %d read from a server that hides it", l)
	}
	items := make([]ItemRequest, vars)
	for i := range items {
		items[i] = ItemRequest{NodeID: mustNode(server.LoadNode(0, i))}
	}
	sub, err := c.CreateSubscription(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	faults := srv.Stats().Faults
	res, err := sub.CreateMonitoredItems(ctxT(t), items, nil)
	if err != nil || res.Created != vars {
		t.Fatalf("%+v %v", res, err)
	}
	learned := c.OperationLimits().MaxMonitoredItemsPerCall
	refused := srv.Stats().Faults - faults
	t.Logf("learned limit %d after %d refused requests", learned, refused)
	if learned == 0 || learned > limit {
		t.Fatalf("learned limit %d, the server's is %d", learned, limit)
	}
	if refused == 0 {
		t.Error("no request was refused: the limit was not hidden")
	}
	// Later calls fit at once: no refusal, ceil(vars/learned) requests.
	sub2, err := c.CreateSubscription(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	faults = srv.Stats().Faults
	calls := 0
	res, err = sub2.CreateMonitoredItems(ctxT(t), items, &CreateItemsOptions{Progress: func(int, int) { calls++ }})
	if err != nil || res.Created != vars {
		t.Fatalf("%+v %v", res, err)
	}
	if f := srv.Stats().Faults - faults; f != 0 {
		t.Errorf("%d requests refused after the limit was learned", f)
	}
	if want := (vars + int(learned) - 1) / int(learned); calls != want {
		t.Errorf("%d requests, want %d of at most %d items", calls, want, learned)
	}
}
