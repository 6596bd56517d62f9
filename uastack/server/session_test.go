package server

import (
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// TestCloseSessionBeforeActivation: a client that refuses the server's
// CreateSession answer closes the session it did not activate; the server must
// let it, instead of keeping the session until it times out.
func TestCloseSessionBeforeActivation(t *testing.T) {
	s := startServer(t, nil)
	ctx := testContext(t, time.Minute)
	ch, err := uasc.Dial(ctx, s.URL(), &uasc.Config{SecurityPolicyURI: uasc.SecurityPolicyNone, SecurityMode: ua.MessageSecurityModeNone})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var cs ua.CreateSessionResponse
	if _, err := ch.SendRequest(ctx, &ua.CreateSessionRequest{
		ClientDescription: ua.ApplicationDescription{ApplicationURI: "urn:test", ApplicationType: ua.ApplicationTypeClient},
		EndpointURL:       s.URL(), RequestedSessionTimeout: 60000,
	}, &cs); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Sessions != 1 {
		t.Fatalf("%d sessions after CreateSession", st.Sessions)
	}
	hdr := ua.RequestHeader{AuthenticationToken: cs.AuthenticationToken, TimeoutHint: 10000}
	// Other services still need activation.
	if _, err := ch.SendRequest(ctx, &ua.ReadRequest{RequestHeader: hdr, NodesToRead: []ua.ReadValueID{{
		NodeID: ua.MustParseNodeID(NodeCounter), AttributeID: 13}}}, nil); !isStatus(err, ua.StatusBadSessionNotActivated) {
		t.Fatalf("Read before activation: %v", err)
	}
	if _, err := ch.SendRequest(ctx, &ua.CloseSessionRequest{RequestHeader: hdr, DeleteSubscriptions: true}, &ua.CloseSessionResponse{}); err != nil {
		t.Fatalf("CloseSession before activation: %v", err)
	}
	if st := s.Stats(); st.Sessions != 0 || st.SessionsClosed != 1 {
		t.Fatalf("after CloseSession: %d sessions, %d closed", st.Sessions, st.SessionsClosed)
	}
	if _, err := ch.SendRequest(ctx, &ua.CloseSessionRequest{RequestHeader: hdr}, &ua.CloseSessionResponse{}); !isStatus(err, ua.StatusBadSessionIdInvalid) {
		t.Fatalf("second CloseSession: %v", err)
	}
}

// TestSessionEndpointsHook: SessionEndpoints changes what CreateSession lists,
// not what GetEndpoints does.
func TestSessionEndpointsHook(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.SessionEndpoints = func(eps []ua.EndpointDescription) []ua.EndpointDescription {
			eps[0].SecurityLevel = 99
			return eps[:1]
		}
	})
	ctx := testContext(t, time.Minute)
	eps, err := uasc.GetEndpoints(ctx, s.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != len(AllPolicies()) || eps[0].SecurityLevel == 99 || s.Endpoints()[0].SecurityLevel == 99 {
		t.Fatalf("GetEndpoints altered: %d endpoints, level %d", len(eps), eps[0].SecurityLevel)
	}
	ch, err := uasc.Dial(ctx, s.URL(), &uasc.Config{SecurityPolicyURI: uasc.SecurityPolicyNone, SecurityMode: ua.MessageSecurityModeNone})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var cs ua.CreateSessionResponse
	if _, err := ch.SendRequest(ctx, &ua.CreateSessionRequest{EndpointURL: s.URL(), RequestedSessionTimeout: 60000}, &cs); err != nil {
		t.Fatal(err)
	}
	if len(cs.ServerEndpoints) != 1 || cs.ServerEndpoints[0].SecurityLevel != 99 {
		t.Fatalf("CreateSession lists %d endpoints, level %d", len(cs.ServerEndpoints), cs.ServerEndpoints[0].SecurityLevel)
	}
}

// TestSessionMovesToNewChannel: a session whose channel died is activated
// again on a new channel (Part 4 §5.6.3) with its subscription and what it
// queued meanwhile: the restart path for a user whose subscriptions the
// server does not transfer (anonymous on an unsecured channel). Only the
// same user may move it.
func TestSessionMovesToNewChannel(t *testing.T) {
	s := startServer(t, nil)
	ctx := testContext(t, time.Minute)
	a := mustSession(t, ctx, s, dialOpts{})
	sub, err := a.createSubscription(ctx, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.monitor(ctx, sub.SubscriptionID, 10, 100, nil, NodeCounter); err != nil {
		t.Fatal(err)
	}
	first := collectValues(t, ctx, a, 1, 3)
	last := first[len(first)-1].Value.Double()
	a.ch.Close() // the process died
	// Away while the counter moves on: the server queues for the session.
	other := mustSession(t, ctx, s, dialOpts{})
	testutil.WaitFor(t, 10*time.Second, "the counter to move on", func() bool {
		v, err := other.read(ctx, NodeCounter)
		return err == nil && v[0].Value.Double() >= last+3
	})

	move := func(id identity) (*testSession, error) {
		ch, err := uasc.Dial(ctx, s.URL(), &uasc.Config{SecurityPolicyURI: uasc.SecurityPolicyNone, SecurityMode: ua.MessageSecurityModeNone})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ch.Close() })
		b := *a
		b.ch = ch
		return &b, b.activate(ctx, id)
	}
	if _, err := move(identity{user: "user1", password: "password1"}); !isStatus(err, ua.StatusBadIdentityChangeNotSupported) {
		t.Fatalf("another user took the session over: %v", err)
	}
	b, err := move(identity{})
	if err != nil {
		t.Fatalf("the session on a new channel: %v", err)
	}
	// The subscription is there, with the values queued while away.
	vals := collectValues(t, ctx, b, 1, 3)
	if got := vals[0].Value.Double(); got != last+1 {
		t.Fatalf("last value before %v, first after the move %v: want them to go on", last, got)
	}
}
