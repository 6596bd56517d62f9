package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
)

// A session outlives its secure channel, and its process: the server keeps
// it, with its subscriptions, until its timeout runs out after the last
// request (Part 4 §5.6.1). A process that kept the session's SessionState
// activates it again on a new secure channel (Part 4 §5.6.3: a session may
// be moved to another channel, by a client with the same application
// certificate and the same user), and its subscriptions continue where they
// were: no TransferSubscriptions, which a server may refuse (node-opcua does
// for anonymous users on an unsecured channel, as Part 4 §5.13.7 has it),
// and what the server queued meanwhile is delivered. ResumeSession does it;
// ManagedConfig.Session makes a managed session try it first.
//
// A SessionState holds the session's authentication token and the server's
// last nonce: whoever has them can use the session as its user. Keep it
// where only the gateway can read it (the gateway writes it with mode 0600).

// SessionState is what another process needs to activate a session on a
// new secure channel: which endpoint and user it was made for, the
// session's ids, the server's last nonce and its certificate.
type SessionState struct {
	EndpointURL       string                 `json:"endpointUrl"`
	SecurityPolicyURI string                 `json:"securityPolicyUri"`
	SecurityMode      ua.MessageSecurityMode `json:"securityMode"`
	// Identity names the user (no secret): the session is activated again
	// only for the same one.
	Identity string `json:"identity"`
	// ClientCertificate is the thumbprint of our application certificate
	// ("" without one): the server accepts the session only on a channel
	// made with the same certificate.
	ClientCertificate string `json:"clientCertificate,omitempty"`
	SessionID         string `json:"sessionId"`
	// AuthenticationToken is a secret.
	AuthenticationToken string `json:"authenticationToken"`
	ServerNonce         []byte `json:"serverNonce,omitempty"`
	ServerCertificate   []byte `json:"serverCertificate,omitempty"`
	// Timeout is the session timeout the server granted.
	Timeout time.Duration `json:"timeout"`
}

// ErrSessionNotResumed is wrapped by ResumeSession's errors when the saved
// session cannot be used (another endpoint, user or certificate, or the
// server no longer has it): create a new session instead.
var ErrSessionNotResumed = errors.New("client: the saved session cannot be activated")

// SessionState returns what another process needs to activate c's session
// again (ResumeSession). It changes with every activation (the server's
// nonce).
func (c *Client) SessionState() SessionState {
	s := c.session
	st := SessionState{
		EndpointURL:         c.url,
		SecurityPolicyURI:   c.endpoint.SecurityPolicyURI,
		SecurityMode:        c.endpoint.SecurityMode,
		Identity:            c.cfg.Identity.poolKey(),
		SessionID:           s.sessionID.String(),
		AuthenticationToken: s.authToken.String(),
		ServerNonce:         bytes.Clone(s.serverNonce),
		ServerCertificate:   bytes.Clone(s.serverCert),
		Timeout:             s.revisedTimeout,
	}
	if leaf, err := pki.LeafDER(c.cert); err == nil && len(c.cert) > 0 {
		st.ClientCertificate = pki.ThumbprintHex(leaf)
	}
	return st
}

// ResumeSession connects to endpointURL as Dial does (endpoints, the server
// certificate validated, the secure channel) but, instead of creating a
// session, activates the one st describes on the new channel, then reads
// the server's OperationLimits and namespace array. The subscriptions of the
// session are then the caller's to take up (SubscriptionConfig.Resume).
//
// An error wrapping ErrSessionNotResumed means the session cannot be used
// (st is for another endpoint, user or application certificate, or the
// server refused it: it timed out, or the server restarted): create one
// with Dial. Other errors are the connection's: a later attempt may
// succeed.
func ResumeSession(ctx context.Context, endpointURL string, cfg *Config, st *SessionState) (*Client, error) {
	cfg, err := discover(ctx, endpointURL, cfg)
	if err != nil {
		return nil, err
	}
	c, err := prepare(ctx, endpointURL, cfg)
	if err != nil {
		return nil, err
	}
	s, err := c.savedSession(st)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSessionNotResumed, err)
	}
	ch, err := c.openChannel(ctx)
	if err != nil {
		return nil, err
	}
	c.conn = ch
	if err := c.activateSession(ctx, s); err != nil {
		ch.Close()
		if isConnectionError(err) && !isSessionGone(err) {
			return nil, fmt.Errorf("client: ActivateSession of the saved session at %s: %w", c.url, err)
		}
		return nil, fmt.Errorf("%w: ActivateSession at %s: %w", ErrSessionNotResumed, c.url, err)
	}
	c.session = s
	c.resumed = true
	if err := c.readServerInfo(ctx); err != nil {
		ch.Close()
		return nil, err
	}
	c.log.Debug("client: saved session activated", "policy", c.policy.Name, "mode", modeName(c.endpoint.SecurityMode),
		"identity", c.cfg.Identity.String(), "session", s.sessionID.String())
	return c, nil
}

// savedSession checks that st fits the endpoint, user and certificate c
// is about to connect with, and returns its session.
func (c *Client) savedSession(st *SessionState) (*sessionState, error) {
	switch {
	case st == nil:
		return nil, errors.New("none")
	case st.EndpointURL != c.url:
		return nil, fmt.Errorf("made at %s", st.EndpointURL)
	case st.SecurityPolicyURI != c.endpoint.SecurityPolicyURI || st.SecurityMode != c.endpoint.SecurityMode:
		return nil, fmt.Errorf("made with %s/%s", st.SecurityPolicyURI, modeName(st.SecurityMode))
	case st.Identity != c.cfg.Identity.poolKey():
		return nil, fmt.Errorf("made for another user")
	}
	own := ""
	if len(c.cert) > 0 {
		if leaf, err := pki.LeafDER(c.cert); err == nil {
			own = pki.ThumbprintHex(leaf)
		}
	}
	if own != st.ClientCertificate {
		return nil, errors.New("made with another application certificate")
	}
	if len(st.ServerCertificate) > 0 && len(c.endpoint.ServerCertificate) > 0 {
		if err := sameCertificate(st.ServerCertificate, c.endpoint.ServerCertificate); err != nil {
			return nil, fmt.Errorf("the server's certificate changed: %w", err)
		}
	}
	id, err := ua.ParseNodeID(st.SessionID)
	if err != nil {
		return nil, fmt.Errorf("session id: %w", err)
	}
	tok, err := ua.ParseNodeID(st.AuthenticationToken)
	if err != nil {
		return nil, errors.New("authentication token: not a node id")
	}
	if !c.policy.IsNone() && len(st.ServerNonce) < sessionNonceLength {
		return nil, fmt.Errorf("server nonce of %d bytes", len(st.ServerNonce))
	}
	s := &sessionState{
		sessionID:      id,
		authToken:      tok,
		serverNonce:    bytes.Clone(st.ServerNonce),
		serverCert:     bytes.Clone(st.ServerCertificate),
		revisedTimeout: st.Timeout,
	}
	if len(s.serverCert) == 0 {
		s.serverCert = c.endpoint.ServerCertificate
	}
	return s, nil
}
