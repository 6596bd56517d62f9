package server

import (
	"testing"
	"time"

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
