package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// startServer starts a server on a loopback port with the test certificate,
// a user, and a small simulation; mod adjusts the configuration.
func startServer(t testing.TB, mod func(*Config)) *Server {
	t.Helper()
	testCerts(t)
	cfg := &Config{
		Address:     "127.0.0.1:0",
		Certificate: serverPair.der,
		Key:         serverPair.key,
		Users:       map[string]string{"user1": "password1"},
		Policies:    AllPolicies(),
		Sim:         SimConfig{Folders: 2, Variables: 20, Rates: []time.Duration{100 * time.Millisecond}, AlarmInterval: -1},
	}
	cfg.Logger = testutil.Logger(t)
	if mod != nil {
		mod(cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustSession(t testing.TB, ctx context.Context, s *Server, o dialOpts) *testSession {
	t.Helper()
	ts, err := dialSession(ctx, s.URL(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.close(context.Background()) })
	return ts
}

func isStatus(err error, st ua.StatusCode) bool { return errors.Is(err, st) }

func TestEndpointsAndIdentities(t *testing.T) {
	s := startServer(t, nil)
	ctx := testContext(t, time.Minute)
	eps, err := uasc.GetEndpoints(ctx, s.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != len(AllPolicies()) {
		t.Fatalf("%d endpoints, want %d", len(eps), len(AllPolicies()))
	}
	for _, ep := range eps {
		if ep.EndpointURL != s.URL() || ep.TransportProfileURI != TransportProfileBinary || len(ep.ServerCertificate) == 0 {
			t.Errorf("endpoint %+v", ep)
		}
		if len(ep.UserIdentityTokens) != 3 {
			t.Errorf("%s %s: %d token policies", ep.SecurityPolicyURI, ep.SecurityMode, len(ep.UserIdentityTokens))
		}
	}
	type tc struct {
		name   string
		policy string
		mode   ua.MessageSecurityMode
		id     identity
		want   ua.StatusCode
	}
	var cases []tc
	for _, sec := range []struct {
		p string
		m ua.MessageSecurityMode
	}{
		{uasc.SecurityPolicyNone, ua.MessageSecurityModeNone},
		{uasc.SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt},
		{uasc.SecurityPolicyAes256Sha256RsaPss, ua.MessageSecurityModeSign},
	} {
		name := strings.TrimPrefix(sec.p, "http://opcfoundation.org/UA/SecurityPolicy#") + "_" + sec.m.String()
		cases = append(cases,
			tc{name + "/anonymous", sec.p, sec.m, identity{}, ua.StatusGood},
			tc{name + "/user", sec.p, sec.m, identity{user: "user1", password: "password1"}, ua.StatusGood},
			tc{name + "/badpassword", sec.p, sec.m, identity{user: "user1", password: "nope"}, ua.StatusBadUserAccessDenied},
			tc{name + "/unknownuser", sec.p, sec.m, identity{user: "mallory", password: "password1"}, ua.StatusBadUserAccessDenied},
			tc{name + "/x509", sec.p, sec.m, identity{cert: &user}, ua.StatusGood},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts, err := dialSession(ctx, s.URL(), dialOpts{policy: c.policy, mode: c.mode, id: c.id, endpoints: eps})
			if c.want != ua.StatusGood {
				if !isStatus(err, c.want) {
					t.Fatalf("err = %v, want %v", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ts.close(ctx)
			res, err := ts.read(ctx, "i=2259") // ServerStatus.State
			if err != nil || res[0].Status != ua.StatusGood || res[0].Value.Int32() != int32(ua.ServerStateRunning) {
				t.Fatalf("read State: %v %+v", err, res)
			}
		})
	}
}
