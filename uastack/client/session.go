package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// sessionNonceLength is the length of the client nonce, and the minimum of the
// server nonce on a secure endpoint (Part 4 §5.6.2: at least 32 bytes).
const sessionNonceLength = 32

// sessionState is what CreateSession and ActivateSession established.
type sessionState struct {
	sessionID      ua.NodeID
	authToken      ua.NodeID
	serverNonce    []byte // the latest, from ActivateSession
	serverCert     []byte // as sent in CreateSession (DER, leaf first)
	revisedTimeout time.Duration
}

// createSession runs CreateSession and checks the server's answer: certificate,
// nonce, signature and endpoint list. clientNonce is kept for the checks.
func (c *Client) createSession(ctx context.Context) (*sessionState, error) {
	clientNonce := make([]byte, sessionNonceLength)
	if _, err := rand.Read(clientNonce); err != nil {
		return nil, err
	}
	req := &ua.CreateSessionRequest{
		ClientDescription: ua.ApplicationDescription{
			ApplicationURI:  c.cfg.ApplicationURI,
			ProductURI:      c.cfg.ProductURI,
			ApplicationName: ua.NewLocalizedText(c.cfg.ApplicationName),
			ApplicationType: ua.ApplicationTypeClient,
		},
		ServerURI:               c.endpoint.Server.ApplicationURI,
		EndpointURL:             c.url,
		SessionName:             c.cfg.SessionName,
		ClientNonce:             clientNonce,
		ClientCertificate:       c.cert,
		RequestedSessionTimeout: float64(c.cfg.SessionTimeout / time.Millisecond),
	}
	var resp ua.CreateSessionResponse
	if _, err := c.send(ctx, req, &resp, ua.NodeID{}); err != nil {
		return nil, err
	}
	s := &sessionState{
		sessionID:      resp.SessionID,
		authToken:      resp.AuthenticationToken,
		serverNonce:    resp.ServerNonce,
		serverCert:     resp.ServerCertificate,
		revisedTimeout: time.Duration(resp.RevisedSessionTimeout * float64(time.Millisecond)),
	}
	if err := c.checkCreateSession(&resp, clientNonce); err != nil {
		// The session exists on the server: close it so it does not linger until
		// its timeout.
		c.closeSessionQuietly(s)
		return nil, err
	}
	if len(s.serverCert) == 0 {
		s.serverCert = c.endpoint.ServerCertificate
	}
	return s, nil
}

// checkCreateSession verifies what a secure CreateSession must prove: the server
// holds the private key of the certificate we validated (its signature over our
// certificate and nonce), its nonce is long enough, and the endpoints it offers
// are those discovery showed us (nobody altered the GetEndpoints answer).
func (c *Client) checkCreateSession(resp *ua.CreateSessionResponse, clientNonce []byte) error {
	if c.policy.IsNone() {
		// Without channel security only a user token may use the server's
		// certificate; then it must be the one validated with the endpoint.
		if c.serverCertificateUse() != nil && len(resp.ServerCertificate) > 0 {
			return sameCertificate(resp.ServerCertificate, c.endpoint.ServerCertificate)
		}
		return nil
	}
	if len(resp.ServerNonce) < sessionNonceLength {
		return fmt.Errorf("%w: %d bytes, %s needs at least %d", ErrServerNonce, len(resp.ServerNonce), c.policy.Name, sessionNonceLength)
	}
	if err := sameCertificate(resp.ServerCertificate, c.endpoint.ServerCertificate); err != nil {
		return err
	}
	// The certificate is the one validated in Dial: use the key parsed then.
	if err := verifySignature(c.policy, c.serverKey, resp.ServerSignature, c.cert, clientNonce); err != nil {
		return fmt.Errorf("%w: %v", ErrServerSignature, err)
	}
	return c.checkSessionEndpoints(resp.ServerEndpoints)
}

// checkSessionEndpoints compares the endpoints of CreateSession, which came over
// the secure channel, with those of GetEndpoints, which did not (Part 4 §5.6.2).
// Only a secure channel makes the comparison mean anything, so it is done only
// there. Config.Endpoints, filled by Dial from GetEndpoints or given by the
// application from an earlier discovery, is the reference.
func (c *Client) checkSessionEndpoints(session []ua.EndpointDescription) error {
	discovered := c.cfg.Endpoints
	if len(discovered) == 0 {
		// Not from Dial (a Client made by hand in a test): the endpoint chosen
		// must at least be among the server's.
		for i := range session {
			ep := &session[i]
			if ep.SecurityPolicyURI == c.endpoint.SecurityPolicyURI && ep.SecurityMode == c.endpoint.SecurityMode {
				return nil
			}
		}
		return fmt.Errorf("%w: %s/%s", ErrServerEndpoints, c.policy.Name, modeName(c.endpoint.SecurityMode))
	}
	return compareEndpoints(discovered, session, c.endpoint.Server.ApplicationURI)
}

// sameCertificate compares the leaf certificates of two chains.
func sameCertificate(got, want []byte) error {
	if len(got) == 0 {
		return fmt.Errorf("%w: CreateSession carries no certificate", ErrServerCertificate)
	}
	g, err := pki.LeafDER(got)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrServerCertificate, err)
	}
	w, err := pki.LeafDER(want)
	if err != nil {
		return fmt.Errorf("%w: endpoint certificate: %v", ErrServerCertificate, err)
	}
	if !bytes.Equal(g, w) {
		return fmt.Errorf("%w: CreateSession has [%s], the endpoint [%s]", ErrServerCertificate, pki.ThumbprintHex(g), pki.ThumbprintHex(w))
	}
	return nil
}

// activateSession runs ActivateSession with our signature and the user identity
// token, and keeps the new server nonce.
func (c *Client) activateSession(ctx context.Context, s *sessionState) error {
	req := &ua.ActivateSessionRequest{LocaleIDs: c.cfg.Locales}
	if !c.policy.IsNone() {
		sig, err := signData(c.policy, c.key, s.serverCert, s.serverNonce)
		if err != nil {
			return fmt.Errorf("client: signing ActivateSession: %w", err)
		}
		req.ClientSignature = sig
	}
	tok, tokSig, err := c.identityToken(s.serverCert, s.serverNonce)
	if err != nil {
		return err
	}
	req.UserIdentityToken = tok
	req.UserTokenSignature = tokSig
	var resp ua.ActivateSessionResponse
	if _, err := c.send(ctx, req, &resp, s.authToken); err != nil {
		return err
	}
	if !c.policy.IsNone() && len(resp.ServerNonce) < sessionNonceLength {
		return fmt.Errorf("%w: ActivateSession returned %d bytes", ErrServerNonce, len(resp.ServerNonce))
	}
	if len(resp.ServerNonce) > 0 {
		s.serverNonce = resp.ServerNonce
	}
	return nil
}

// identityToken builds the user identity token of the configured identity for
// the endpoint's matching token policy, and its signature (X.509 only).
func (c *Client) identityToken(serverCert, serverNonce []byte) (ua.ExtensionObject, ua.SignatureData, error) {
	id := c.cfg.Identity
	tp := findTokenPolicy(&c.endpoint, id.TokenType())
	if tp == nil {
		return ua.ExtensionObject{}, ua.SignatureData{}, fmt.Errorf("%w: the endpoint accepts no %s token", ErrNoEndpoint, tokenName(id.TokenType()))
	}
	switch id := id.(type) {
	case anonymousIdentity:
		return ua.NewExtensionObject(&ua.AnonymousIdentityToken{PolicyID: tp.PolicyID}), ua.SignatureData{}, nil
	case *userNameIdentity:
		pol, err := c.tokenPolicy(tp)
		if err != nil {
			return ua.ExtensionObject{}, ua.SignatureData{}, err
		}
		tok := &ua.UserNameIdentityToken{PolicyID: tp.PolicyID, UserName: id.user}
		if pol.IsNone() {
			if c.endpoint.SecurityMode != ua.MessageSecurityModeSignAndEncrypt && !c.cfg.AllowInsecurePassword {
				return ua.ExtensionObject{}, ua.SignatureData{}, fmt.Errorf(
					"%w: the server wants the password of %s unencrypted on an unencrypted channel; use SignAndEncrypt or set AllowInsecurePassword",
					ua.StatusBadSecurityPolicyRejected, id)
			}
			tok.Password = bytes.Clone(id.password)
			return ua.NewExtensionObject(tok), ua.SignatureData{}, nil
		}
		pub := c.serverKey // validated in Dial, and the same as serverCert (checkCreateSession)
		if pub == nil {
			var err error
			if pub, err = publicKey(serverCert); err != nil {
				return ua.ExtensionObject{}, ua.SignatureData{}, err
			}
		}
		if len(serverNonce) == 0 {
			return ua.ExtensionObject{}, ua.SignatureData{}, fmt.Errorf("%w: no nonce to encrypt the password with", ErrServerNonce)
		}
		tok.Password, err = encryptSecret(pol, pub, id.password, serverNonce)
		if err != nil {
			return ua.ExtensionObject{}, ua.SignatureData{}, fmt.Errorf("client: encrypting the password: %w", err)
		}
		tok.EncryptionAlgorithm = pol.AsymEncryptionURI
		return ua.NewExtensionObject(tok), ua.SignatureData{}, nil
	case *x509Identity:
		pol, err := c.tokenPolicy(tp)
		if err != nil {
			return ua.ExtensionObject{}, ua.SignatureData{}, err
		}
		if pol.IsNone() {
			return ua.ExtensionObject{}, ua.SignatureData{}, fmt.Errorf(
				"%w: an X.509 user token must be signed, but its token policy and the channel use SecurityPolicy None",
				ua.StatusBadSecurityPolicyRejected)
		}
		sig, err := signData(pol, id.key, serverCert, serverNonce)
		if err != nil {
			return ua.ExtensionObject{}, ua.SignatureData{}, fmt.Errorf("client: signing the X.509 user token: %w", err)
		}
		return ua.NewExtensionObject(&ua.X509IdentityToken{PolicyID: tp.PolicyID, CertificateData: id.cert}), sig, nil
	}
	return ua.ExtensionObject{}, ua.SignatureData{}, fmt.Errorf("client: unsupported identity %T", id)
}

// tokenPolicy is the security policy a user token is protected with: the token
// policy's own, or the channel's when it names none (Part 4 §7.41).
func (c *Client) tokenPolicy(tp *ua.UserTokenPolicy) (*uasc.Policy, error) {
	return effectiveTokenPolicy(tp, c.policy)
}

func effectiveTokenPolicy(tp *ua.UserTokenPolicy, channel *uasc.Policy) (*uasc.Policy, error) {
	if tp.SecurityPolicyURI == "" {
		return channel, nil
	}
	p, err := uasc.PolicyByURI(tp.SecurityPolicyURI)
	if err != nil {
		return nil, fmt.Errorf("client: user token policy %q: %w", tp.PolicyID, err)
	}
	return p, nil
}

// signData signs cert ‖ nonce with the policy's asymmetric signature: the
// ClientSignature of ActivateSession (our key, the server's certificate and nonce)
// and the UserTokenSignature of an X.509 token (the user's key).
func signData(pol *uasc.Policy, key *rsa.PrivateKey, cert, nonce []byte) (ua.SignatureData, error) {
	data := make([]byte, 0, len(cert)+len(nonce))
	data = append(append(data, cert...), nonce...)
	sig, err := pol.AsymSign(key, data)
	if err != nil {
		return ua.SignatureData{}, err
	}
	return ua.SignatureData{Algorithm: pol.AsymSignatureURI, Signature: sig}, nil
}

// verifySignature checks a signature over data ‖ nonce made with the private key
// of pub: the ServerSignature of CreateSession.
func verifySignature(pol *uasc.Policy, pub *rsa.PublicKey, sig ua.SignatureData, data, nonce []byte) error {
	if sig.Algorithm != pol.AsymSignatureURI {
		return fmt.Errorf("algorithm %q, %s needs %q", sig.Algorithm, pol.Name, pol.AsymSignatureURI)
	}
	if pub == nil {
		return errors.New("no key to verify with")
	}
	signed := make([]byte, 0, len(data)+len(nonce))
	signed = append(append(signed, data...), nonce...)
	return pol.AsymVerify(pub, signed, sig.Signature)
}

// encryptSecret encrypts a password (or other secret) for the server in the
// legacy format of Part 4 §7.41.2.2: the length of secret ‖ nonce as a
// little-endian UInt32, the secret, the server nonce; asymmetrically encrypted
// for the server's key.
func encryptSecret(pol *uasc.Policy, pub *rsa.PublicKey, secret, nonce []byte) ([]byte, error) {
	plain := make([]byte, 4, 4+len(secret)+len(nonce))
	binary.LittleEndian.PutUint32(plain, uint32(len(secret)+len(nonce)))
	plain = append(append(plain, secret...), nonce...)
	out, err := pol.AsymEncrypt(pub, plain)
	clear(plain)
	return out, err
}

// decryptSecret is the server side of encryptSecret, for tests: it returns the
// secret after checking the length and the nonce.
func decryptSecret(pol *uasc.Policy, key *rsa.PrivateKey, ciphertext, nonce []byte) ([]byte, error) {
	plain, err := pol.AsymDecrypt(key, ciphertext)
	if err != nil {
		return nil, err
	}
	if len(plain) < 4 {
		return nil, errors.New("secret too short")
	}
	n := int(binary.LittleEndian.Uint32(plain))
	if n != len(plain)-4 || n < len(nonce) {
		return nil, fmt.Errorf("secret length %d does not match %d bytes", n, len(plain)-4)
	}
	if !bytes.Equal(plain[len(plain)-len(nonce):], nonce) {
		return nil, errors.New("secret does not end with the server nonce")
	}
	return plain[4 : len(plain)-len(nonce)], nil
}

// publicKey returns the RSA key of the leaf of a DER chain.
func publicKey(chain []byte) (*rsa.PublicKey, error) {
	leaf, err := pki.LeafDER(chain)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrServerCertificate, err)
	}
	cert, err := x509.ParseCertificate(leaf)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrServerCertificate, err)
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: key is %T, not RSA", ErrServerCertificate, cert.PublicKey)
	}
	return pub, nil
}

// closeSessionQuietly sends CloseSession with a short deadline of its own, for
// the error paths of Dial; its result does not matter.
func (c *Client) closeSessionQuietly(s *sessionState) {
	ctx, cancel := context.WithTimeout(context.Background(), min(c.cfg.RequestTimeout, 5*time.Second))
	defer cancel()
	_, _ = c.send(ctx, &ua.CloseSessionRequest{DeleteSubscriptions: true}, &ua.CloseSessionResponse{}, s.authToken)
}

// closeSessionFor closes the session if its channel is still open, keeping
// or deleting its subscriptions, with a short deadline; the result does not
// matter.
func (c *Client) closeSessionFor(deleteSubscriptions bool) {
	select {
	case <-c.conn.Done():
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(c.cfg.RequestTimeout, 2*time.Second))
	defer cancel()
	_, _ = c.send(ctx, &ua.CloseSessionRequest{DeleteSubscriptions: deleteSubscriptions}, &ua.CloseSessionResponse{}, c.session.authToken)
}

// abandon gives a Client up without closing its session: its channel is closed
// (if it is not yet) and nothing more is sent on it.
func (c *Client) abandon() {
	c.closed.Store(true)
	_ = c.conn.Close()
}

// reactivate opens a new secure channel and activates c's session on it
// (OPC UA Part 4 §5.6.3: a session outlives its channel). It returns a new
// Client for the session; c is not used afterwards. rejected says the server
// refused the session (it no longer has it), as opposed to being unreachable.
func (c *Client) reactivate(ctx context.Context) (nc *Client, rejected bool, err error) {
	nc = &Client{
		cfg: c.cfg, url: c.url, endpoint: c.endpoint, policy: c.policy, log: c.log,
		cert: c.cert, key: c.key, serverKey: c.serverKey, resumed: c.resumed,
	}
	for k := range c.limits {
		nc.limits[k].Store(c.limits[k].Load())
	}
	nc.handle.Store(c.handle.Load())
	c.infoMu.RLock()
	nc.namespaces = c.namespaces
	c.infoMu.RUnlock()
	ch, err := nc.openChannel(ctx)
	if err != nil {
		return nil, false, err
	}
	nc.conn = ch
	s := *c.session
	if err := nc.activateSession(ctx, &s); err != nil {
		ch.Close()
		return nil, !isConnectionError(err) || isSessionGone(err), fmt.Errorf("client: reactivating the session: %w", err)
	}
	nc.session = &s
	return nc, false, nil
}
