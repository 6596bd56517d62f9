package server

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/subtle"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// session is an OPC UA session.
type session struct {
	srv     *Server
	id      ua.NodeID
	token   ua.NodeID // AuthenticationToken
	name    string
	timeout int64 // ns
	// maxResponse is the MaxResponseMessageSize the client asked for; 0: none.
	maxResponse int
	clientCert  []byte // leaf, DER; nil on None channels
	appURI      string // the client's ApplicationUri (CreateSession)

	ch        atomic.Pointer[channel] // the channel the session is bound to
	activated atomic.Bool
	closed    atomic.Bool
	lastSeen  atomic.Int64 // Server.now of the last request
	nextDue   atomic.Int64 // the sweep skips the session before this Server.now

	mu          sync.Mutex // guards what follows
	identity    string     // "anonymous", "user:<name>", "x509:<thumbprint>"
	serverNonce []byte
	subs        []*subscription
	publishQ    []parkedPublish // oldest first
	statusQ     []statusMessage // notifications for subscriptions that left the session
	cps         map[string]*continuation
	hcps        map[string]*histCont // HistoryRead's (history.go)
	lastCP      uint64
	rr          int // round-robin start among ready subscriptions
}

// parkedPublish is a Publish request waiting for something to send.
type parkedPublish struct {
	ch       *channel
	r        *uasc.Request
	results  []ua.StatusCode // of its acknowledgements, returned with its response
	deadline int64           // Server.now; 0: none
}

// statusMessage is a StatusChangeNotification for a subscription that expired
// or was transferred away, sent with the session's next Publish response.
type statusMessage struct {
	subID  uint32
	seq    uint32
	status ua.StatusCode
}

func (s *Server) newNonce() []byte {
	b := make([]byte, defaultNonceLength)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return b
}

func (s *Server) createSession(ch *channel, r *uasc.Request, m *ua.CreateSessionRequest) {
	p := ch.SecurityPolicy()
	var leaf []byte
	if !p.IsNone() {
		got, err := pki.LeafDER(m.ClientCertificate)
		if err != nil || len(got) == 0 {
			s.fault(ch, r, ua.StatusBadCertificateInvalid)
			return
		}
		chLeaf, err := pki.LeafDER(ch.ClientCertificate())
		if err != nil || !bytes.Equal(got, chLeaf) {
			s.fault(ch, r, ua.StatusBadSecurityChecksFailed)
			return
		}
		if len(m.ClientNonce) < defaultNonceLength {
			s.fault(ch, r, ua.StatusBadNonceInvalid)
			return
		}
		leaf = bytes.Clone(got)
	}
	timeout := time.Duration(0)
	if m.RequestedSessionTimeout > 0 && !math.IsNaN(m.RequestedSessionTimeout) && m.RequestedSessionTimeout < float64(math.MaxInt64/int64(time.Millisecond)) {
		timeout = time.Duration(m.RequestedSessionTimeout * float64(time.Millisecond))
	}
	timeout = min(max(timeout, s.cfg.MinSessionTimeout), s.cfg.MaxSessionTimeout)

	eps := s.Endpoints()
	if f := s.cfg.SessionEndpoints; f != nil {
		eps = f(slices.Clone(eps))
	}
	resp := &ua.CreateSessionResponse{
		RevisedSessionTimeout: float64(timeout) / float64(time.Millisecond),
		ServerNonce:           s.newNonce(),
		ServerCertificate:     s.cert,
		ServerEndpoints:       eps,
		MaxRequestMessageSize: s.cfg.Transport.MaxMessageSize,
	}
	if !p.IsNone() {
		data := make([]byte, 0, len(m.ClientCertificate)+len(m.ClientNonce))
		data = append(append(data, m.ClientCertificate...), m.ClientNonce...)
		sig, err := p.AsymSign(s.key, data)
		if err != nil {
			s.fault(ch, r, ua.StatusBadInternalError)
			return
		}
		resp.ServerSignature = ua.SignatureData{Algorithm: p.AsymSignatureURI, Signature: sig}
	}

	sess := &session{
		srv: s, name: m.SessionName, timeout: int64(timeout), clientCert: leaf,
		serverNonce: resp.ServerNonce, maxResponse: int(m.MaxResponseMessageSize),
		appURI: m.ClientDescription.ApplicationURI,
	}
	sess.token = ua.NewOpaqueNodeID(0, s.newNonce())
	sess.ch.Store(ch)
	sess.lastSeen.Store(s.now())

	s.sessMu.Lock()
	if len(s.sessions) >= s.cfg.MaxSessionCount || s.state.Load() != int32(ua.ServerStateRunning) {
		s.sessMu.Unlock()
		s.fault(ch, r, ua.StatusBadTooManySessions)
		return
	}
	sess.id = ua.NewNumericNodeID(1, s.lastSession.Add(1))
	s.sessions[sess.token] = sess
	s.sessionCount.Add(1)
	s.sessMu.Unlock()
	ch.mu.Lock()
	if ch.sessions == nil {
		ch.sessions = map[*session]struct{}{}
	}
	ch.sessions[sess] = struct{}{}
	ch.mu.Unlock()
	s.stats.sessionsCreated.Add(1)

	resp.SessionID, resp.AuthenticationToken = sess.id, sess.token
	s.respond(ch, r, resp)
}

func (s *Server) activateSession(ch *channel, r *uasc.Request, m *ua.ActivateSessionRequest) {
	s.sessMu.RLock()
	sess := s.sessions[m.RequestHeader.AuthenticationToken]
	s.sessMu.RUnlock()
	if sess == nil || sess.closed.Load() {
		s.fault(ch, r, ua.StatusBadSessionIdInvalid)
		return
	}
	old := sess.ch.Load()
	if !sess.activated.Load() && old != ch {
		s.fault(ch, r, ua.StatusBadSecureChannelIdInvalid)
		return
	}
	p := ch.SecurityPolicy()
	sess.mu.Lock()
	nonce := sess.serverNonce
	sess.mu.Unlock()
	if !p.IsNone() {
		leaf, err := pki.LeafDER(ch.ClientCertificate())
		if err != nil || (sess.clientCert != nil && !bytes.Equal(leaf, sess.clientCert)) {
			s.fault(ch, r, ua.StatusBadSecurityChecksFailed)
			return
		}
		if err := s.verifySignature(p, leaf, m.ClientSignature, nonce); err != nil {
			s.fault(ch, r, ua.StatusBadApplicationSignatureInvalid)
			return
		}
	} else if sess.clientCert != nil {
		// A session made on a secure channel cannot move to an insecure one.
		s.fault(ch, r, ua.StatusBadSecurityModeInsufficient)
		return
	}
	identity, st := s.checkIdentity(ch, m, nonce)
	if st != ua.StatusGood {
		s.fault(ch, r, st)
		return
	}
	if old != ch && sess.activated.Load() {
		// Part 4 §5.6.3: a session moves to another channel only for the
		// user it was activated for.
		sess.mu.Lock()
		same := sess.identity == identity
		sess.mu.Unlock()
		if !same {
			s.fault(ch, r, ua.StatusBadIdentityChangeNotSupported)
			return
		}
	}
	newNonce := s.newNonce()
	var dropped []parkedPublish
	sess.mu.Lock()
	if sess.closed.Load() {
		sess.mu.Unlock()
		s.fault(ch, r, ua.StatusBadSessionIdInvalid)
		return
	}
	sess.identity = identity
	sess.serverNonce = newNonce
	if old != ch {
		// Publish requests parked on the old channel can no longer be answered
		// there.
		kept := sess.publishQ[:0]
		for _, pp := range sess.publishQ {
			if pp.ch == ch {
				kept = append(kept, pp)
			} else {
				dropped = append(dropped, pp)
			}
		}
		clear(sess.publishQ[len(kept):])
		sess.publishQ = kept
		sess.ch.Store(ch)
	}
	sess.activated.Store(true)
	sess.mu.Unlock()
	sess.lastSeen.Store(s.now())
	s.sweepSoon(sess)
	if old != ch {
		if old != nil {
			old.mu.Lock()
			delete(old.sessions, sess)
			old.mu.Unlock()
		}
		ch.mu.Lock()
		if ch.sessions == nil {
			ch.sessions = map[*session]struct{}{}
		}
		ch.sessions[sess] = struct{}{}
		ch.mu.Unlock()
		for _, pp := range dropped {
			s.fault(pp.ch, pp.r, ua.StatusBadSecureChannelIdInvalid)
		}
	}
	s.respond(ch, r, &ua.ActivateSessionResponse{ServerNonce: newNonce})
}

// verifySignature checks a signature over our certificate ‖ nonce made with
// the key of signer (a leaf certificate). Clients sign the certificate as we
// sent it (possibly a chain) or its leaf; both are accepted.
func (s *Server) verifySignature(p *uasc.Policy, signer []byte, sig ua.SignatureData, nonce []byte) error {
	if sig.Algorithm != p.AsymSignatureURI {
		return fmt.Errorf("signature algorithm %q, %s needs %q", sig.Algorithm, p.Name, p.AsymSignatureURI)
	}
	c, err := x509.ParseCertificate(signer)
	if err != nil {
		return err
	}
	pub, ok := c.PublicKey.(*rsa.PublicKey)
	if !ok {
		return errors.New("not an RSA key")
	}
	for _, cert := range [][]byte{s.cert, s.leaf} {
		data := make([]byte, 0, len(cert)+len(nonce))
		data = append(append(data, cert...), nonce...)
		if err = p.AsymVerify(pub, data, sig.Signature); err == nil {
			return nil
		}
		if len(s.cert) == len(s.leaf) {
			break
		}
	}
	return err
}

// checkIdentity checks the user identity token of an ActivateSession and
// returns the identity it proves.
func (s *Server) checkIdentity(ch *channel, m *ua.ActivateSessionRequest, nonce []byte) (string, ua.StatusCode) {
	p := ch.SecurityPolicy()
	tokPol := s.tokenSecurityPolicy(p)
	switch tok := m.UserIdentityToken.Value.(type) {
	case nil:
		if m.UserIdentityToken.Body != nil {
			return "", ua.StatusBadIdentityTokenInvalid
		}
		if s.cfg.DisableAnonymous {
			return "", ua.StatusBadIdentityTokenRejected
		}
		return "anonymous", ua.StatusGood
	case *ua.AnonymousIdentityToken:
		if s.cfg.DisableAnonymous || (tok.PolicyID != "" && tok.PolicyID != policyAnonymous) {
			return "", ua.StatusBadIdentityTokenRejected
		}
		return "anonymous", ua.StatusGood
	case *ua.UserNameIdentityToken:
		if len(s.cfg.Users) == 0 || (tok.PolicyID != "" && tok.PolicyID != policyUserName) {
			return "", ua.StatusBadIdentityTokenRejected
		}
		var password []byte
		switch {
		case tok.EncryptionAlgorithm == "":
			// Plain text: only where nobody can read it on the way.
			if ch.SecurityMode() != ua.MessageSecurityModeSignAndEncrypt && !tokPol.IsNone() {
				return "", ua.StatusBadIdentityTokenInvalid
			}
			password = tok.Password
		case tokPol.IsNone() || tok.EncryptionAlgorithm != tokPol.AsymEncryptionURI:
			return "", ua.StatusBadIdentityTokenInvalid
		default:
			plain, err := tokPol.AsymDecrypt(s.key, tok.Password)
			if err != nil {
				return "", ua.StatusBadIdentityTokenInvalid
			}
			defer clear(plain)
			if len(plain) < 4 {
				return "", ua.StatusBadIdentityTokenInvalid
			}
			n := int(binary.LittleEndian.Uint32(plain))
			if n != len(plain)-4 || n < len(nonce) || !bytes.Equal(plain[len(plain)-len(nonce):], nonce) {
				return "", ua.StatusBadIdentityTokenInvalid
			}
			password = plain[4 : len(plain)-len(nonce)]
		}
		want, ok := s.cfg.Users[tok.UserName]
		if !ok || subtle.ConstantTimeCompare([]byte(want), password) != 1 {
			return "", ua.StatusBadUserAccessDenied
		}
		return "user:" + tok.UserName, ua.StatusGood
	case *ua.X509IdentityToken:
		if s.cfg.DisableX509Users || s.cert == nil || (tok.PolicyID != "" && tok.PolicyID != policyX509) {
			return "", ua.StatusBadIdentityTokenRejected
		}
		if tokPol.IsNone() {
			return "", ua.StatusBadIdentityTokenInvalid
		}
		leaf, err := pki.LeafDER(tok.CertificateData)
		if err != nil || len(leaf) == 0 {
			return "", ua.StatusBadIdentityTokenInvalid
		}
		if err := s.verifySignature(tokPol, leaf, m.UserTokenSignature, nonce); err != nil {
			return "", ua.StatusBadIdentityTokenInvalid
		}
		if v := s.cfg.ValidateUserCert; v != nil {
			c, err := x509.ParseCertificate(leaf)
			if err != nil {
				return "", ua.StatusBadIdentityTokenInvalid
			}
			if err := v(c); err != nil {
				return "", ua.StatusBadIdentityTokenRejected
			}
		}
		return "x509:" + pki.ThumbprintHex(leaf), ua.StatusGood
	}
	return "", ua.StatusBadIdentityTokenInvalid
}

// sessionFor finds the activated session of a request on ch.
func (s *Server) sessionFor(ch *channel, token ua.NodeID) (*session, ua.StatusCode) {
	s.sessMu.RLock()
	sess := s.sessions[token]
	s.sessMu.RUnlock()
	switch {
	case sess == nil || sess.closed.Load():
		return nil, ua.StatusBadSessionIdInvalid
	case !sess.activated.Load():
		return nil, ua.StatusBadSessionNotActivated
	case sess.ch.Load() != ch:
		return nil, ua.StatusBadSecureChannelIdInvalid
	}
	sess.lastSeen.Store(s.now())
	return sess, ua.StatusGood
}

// sessionToClose is sessionFor for CloseSession, which a session that was
// created but not activated accepts too (on the channel it was created on).
func (s *Server) sessionToClose(ch *channel, token ua.NodeID) (*session, ua.StatusCode) {
	s.sessMu.RLock()
	sess := s.sessions[token]
	s.sessMu.RUnlock()
	switch {
	case sess == nil || sess.closed.Load():
		return nil, ua.StatusBadSessionIdInvalid
	case sess.ch.Load() != ch:
		return nil, ua.StatusBadSecureChannelIdInvalid
	}
	return sess, ua.StatusGood
}

func (s *Server) closeSessionService(sess *session, ch *channel, r *uasc.Request, m *ua.CloseSessionRequest) {
	s.stats.sessionsClosed.Add(1)
	s.closeSession(sess, m.DeleteSubscriptions, ua.StatusBadSessionClosed)
	s.respond(ch, r, &ua.CloseSessionResponse{})
}

// closeSession ends a session: its parked Publish requests are answered with
// reason, its subscriptions deleted or, without deleteSubs, left to live until
// their lifetime expires (so that another session can transfer them).
func (s *Server) closeSession(sess *session, deleteSubs bool, reason ua.StatusCode) {
	if !sess.closed.CompareAndSwap(false, true) {
		return
	}
	s.sessMu.Lock()
	if s.sessions[sess.token] == sess {
		delete(s.sessions, sess.token)
		s.sessionCount.Add(-1)
	}
	s.sessMu.Unlock()
	sess.mu.Lock()
	parked := sess.publishQ
	subs := sess.subs
	sess.publishQ, sess.subs, sess.cps, sess.hcps, sess.statusQ = nil, nil, nil, nil, nil
	sess.mu.Unlock()
	if ch := sess.ch.Load(); ch != nil {
		ch.mu.Lock()
		delete(ch.sessions, sess)
		ch.mu.Unlock()
	}
	for _, pp := range parked {
		if !pp.ch.closed.Load() {
			s.fault(pp.ch, pp.r, reason)
		}
	}
	for _, sub := range subs {
		if deleteSubs {
			s.deleteSubscription(sub)
		} else {
			s.orphan(sub)
		}
	}
}

// detachChannel runs when a channel closed: its sessions lose their parked
// Publish requests and wait, until they time out, for a client to activate
// them on a new channel.
func (s *Server) detachChannel(ch *channel) {
	ch.mu.Lock()
	sessions := make([]*session, 0, len(ch.sessions))
	for sess := range ch.sessions {
		sessions = append(sessions, sess)
	}
	ch.mu.Unlock()
	for _, sess := range sessions {
		sess.mu.Lock()
		kept := sess.publishQ[:0]
		for _, pp := range sess.publishQ {
			if pp.ch != ch {
				kept = append(kept, pp)
			}
		}
		clear(sess.publishQ[len(kept):])
		sess.publishQ = kept
		sess.mu.Unlock()
	}
}
