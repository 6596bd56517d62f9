package client

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

func TestParseSecurityPolicy(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"None", uasc.SecurityPolicyNone},
		{"basic256sha256", uasc.SecurityPolicyBasic256Sha256},
		{"Aes128_Sha256_RsaOaep", uasc.SecurityPolicyAes128Sha256RsaOaep},
		{"Aes256_Sha256_RsaPss", uasc.SecurityPolicyAes256Sha256RsaPss},
		{"Basic128Rsa15", uasc.SecurityPolicyBasic128Rsa15},
		{"Basic256", uasc.SecurityPolicyBasic256},
		{uasc.SecurityPolicyBasic256Sha256, uasc.SecurityPolicyBasic256Sha256},
	} {
		got, err := ParseSecurityPolicy(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSecurityPolicy(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := ParseSecurityPolicy("Basic512"); !errors.Is(err, uasc.ErrUnknownPolicy) || !strings.Contains(err.Error(), "Basic256Sha256") {
		t.Errorf("unknown policy: %v", err)
	}
	for in, want := range map[string]ua.MessageSecurityMode{
		"": ua.MessageSecurityModeInvalid, "none": ua.MessageSecurityModeNone, "Sign": ua.MessageSecurityModeSign,
		"SignAndEncrypt": ua.MessageSecurityModeSignAndEncrypt,
	} {
		if got, err := ParseSecurityMode(in); err != nil || got != want {
			t.Errorf("ParseSecurityMode(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseSecurityMode("Encrypt"); err == nil {
		t.Error("ParseSecurityMode(Encrypt) did not fail")
	}
}

func TestConfigValidate(t *testing.T) {
	testCerts(t)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // substring of the error; "" = valid
	}{
		{"zero", Config{}, ""},
		{"none policy needs no store", Config{SecurityPolicy: "None"}, ""},
		{"secure policy needs store", Config{SecurityPolicy: "Basic256Sha256"}, "Config.Store"},
		{"unknown policy", Config{SecurityPolicy: "Foo"}, "Config.SecurityPolicy"},
		{"deprecated", Config{SecurityPolicy: "Basic128Rsa15"}, "AllowDeprecated"},
		{"mode with none", Config{SecurityPolicy: "None", SecurityMode: ua.MessageSecurityModeSign}, "SecurityMode"},
		{"bad mode", Config{SecurityMode: 7}, "SecurityMode"},
		{"cert without key", Config{Certificate: clientCert.der}, "go together"},
		{"wrong key", Config{Certificate: clientCert.der, PrivateKey: serverCert.key}, "does not belong"},
		{"uri mismatch", Config{Certificate: clientCert.der, PrivateKey: clientCert.key, ApplicationURI: "urn:x"}, "ApplicationURI"},
		{"empty user", Config{Identity: UserName("", "x")}, "Identity"},
		{"x509 wrong key", Config{Identity: X509(userCrt.der, clientCert.key)}, "Identity"},
		{"negative timeout", Config{RequestTimeout: -1}, "RequestTimeout"},
	} {
		err := tc.cfg.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}

func TestSelectEndpoint(t *testing.T) {
	tok := func(types ...ua.UserTokenType) []ua.UserTokenPolicy {
		var out []ua.UserTokenPolicy
		for _, t := range types {
			out = append(out, ua.UserTokenPolicy{TokenType: t})
		}
		return out
	}
	anon, user := ua.UserTokenTypeAnonymous, ua.UserTokenTypeUserName
	ep := func(pol string, mode ua.MessageSecurityMode, level byte, tokens ...ua.UserTokenType) ua.EndpointDescription {
		return ua.EndpointDescription{SecurityPolicyURI: pol, SecurityMode: mode, SecurityLevel: level, UserIdentityTokens: tok(tokens...), TransportProfileURI: TransportProfileBinary}
	}
	eps := []ua.EndpointDescription{
		ep(uasc.SecurityPolicyNone, ua.MessageSecurityModeNone, 1, anon, user),
		ep(uasc.SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSign, 106, anon, user),
		ep(uasc.SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt, 206, anon, user),
		ep(uasc.SecurityPolicyAes256Sha256RsaPss, ua.MessageSecurityModeSignAndEncrypt, 207, user),
		ep(uasc.SecurityPolicyBasic128Rsa15, ua.MessageSecurityModeSignAndEncrypt, 250, anon),
		ep("http://example.com/UnknownPolicy", ua.MessageSecurityModeSignAndEncrypt, 255, anon),
		{SecurityPolicyURI: uasc.SecurityPolicyAes128Sha256RsaOaep, SecurityMode: ua.MessageSecurityModeSignAndEncrypt, SecurityLevel: 255,
			UserIdentityTokens: tok(anon), TransportProfileURI: "http://opcfoundation.org/UA-Profile/Transport/https-uabinary"},
	}
	for _, tc := range []struct {
		name     string
		crit     EndpointCriteria
		wantPol  string
		wantMode ua.MessageSecurityMode
	}{
		{"best for user", EndpointCriteria{TokenType: user}, uasc.SecurityPolicyAes256Sha256RsaPss, ua.MessageSecurityModeSignAndEncrypt},
		{"best for anonymous skips deprecated and unknown", EndpointCriteria{TokenType: anon}, uasc.SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt},
		{"policy given", EndpointCriteria{SecurityPolicy: uasc.SecurityPolicyBasic256Sha256, TokenType: user}, uasc.SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt},
		{"policy and mode", EndpointCriteria{SecurityPolicy: uasc.SecurityPolicyBasic256Sha256, SecurityMode: ua.MessageSecurityModeSign}, uasc.SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSign},
		{"mode None", EndpointCriteria{SecurityMode: ua.MessageSecurityModeNone}, uasc.SecurityPolicyNone, ua.MessageSecurityModeNone},
		{"deprecated allowed when named", EndpointCriteria{SecurityPolicy: uasc.SecurityPolicyBasic128Rsa15, AllowDeprecated: true}, uasc.SecurityPolicyBasic128Rsa15, ua.MessageSecurityModeSignAndEncrypt},
	} {
		got, err := SelectEndpoint(eps, tc.crit)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got.SecurityPolicyURI != tc.wantPol || got.SecurityMode != tc.wantMode {
			t.Errorf("%s: got %s/%v, want %s/%v", tc.name, got.SecurityPolicyURI, got.SecurityMode, tc.wantPol, tc.wantMode)
		}
	}
	for _, tc := range []struct {
		name string
		crit EndpointCriteria
		want string
	}{
		{"deprecated not allowed", EndpointCriteria{SecurityPolicy: uasc.SecurityPolicyBasic128Rsa15}, "policy Basic128Rsa15"},
		{"no x509", EndpointCriteria{TokenType: ua.UserTokenTypeCertificate}, "X509 token"},
		{"mode not offered", EndpointCriteria{SecurityPolicy: uasc.SecurityPolicyAes256Sha256RsaPss, SecurityMode: ua.MessageSecurityModeSign, TokenType: user}, "mode Sign"},
	} {
		_, err := SelectEndpoint(eps, tc.crit)
		if !errors.Is(err, ErrNoEndpoint) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Basic256Sha256/SignAndEncrypt") {
			t.Errorf("%s: got %v, want ErrNoEndpoint naming %q and the offered endpoints", tc.name, err, tc.want)
		}
	}
}

// TestEncryptSecret checks the legacy encrypted secret layout against a
// hand-built plaintext, for every policy's asymmetric encryption.
func TestEncryptSecret(t *testing.T) {
	testCerts(t)
	nonce := bytes.Repeat([]byte{0xAB}, 32)
	password := []byte("pässwörd")
	for _, p := range uasc.Policies() {
		if p.IsNone() {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			ct, err := encryptSecret(p, &serverCert.key.PublicKey, password, nonce)
			if err != nil {
				t.Fatal(err)
			}
			if len(ct)%serverCert.key.Size() != 0 {
				t.Fatalf("ciphertext %d bytes is not whole RSA blocks", len(ct))
			}
			plain, err := p.AsymDecrypt(serverCert.key, ct)
			if err != nil {
				t.Fatal(err)
			}
			if want := legacySecret(password, nonce); !bytes.Equal(plain, want) {
				t.Fatalf("plaintext\n got %x\nwant %x", plain, want)
			}
			got, err := decryptSecret(p, serverCert.key, ct, nonce)
			if err != nil || !bytes.Equal(got, password) {
				t.Fatalf("decryptSecret = %q, %v", got, err)
			}
		})
	}
}

// TestSignData checks the client signature is over certificate ‖ nonce with the
// policy's algorithm, and that verifySignature rejects the wrong algorithm and a
// flipped bit.
func TestSignData(t *testing.T) {
	testCerts(t)
	nonce := bytes.Repeat([]byte{1}, 32)
	for _, p := range uasc.Policies() {
		if p.IsNone() {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			sig, err := signData(p, clientCert.key, serverCert.der, nonce)
			if err != nil {
				t.Fatal(err)
			}
			if sig.Algorithm != p.AsymSignatureURI {
				t.Fatalf("algorithm %q, want %q", sig.Algorithm, p.AsymSignatureURI)
			}
			data := append(append([]byte{}, serverCert.der...), nonce...)
			if err := p.AsymVerify(&clientCert.key.PublicKey, data, sig.Signature); err != nil {
				t.Fatalf("signature is not over cert‖nonce: %v", err)
			}
			if err := verifySignature(p, &clientCert.key.PublicKey, sig, serverCert.der, nonce); err != nil {
				t.Fatal(err)
			}
			bad := sig
			bad.Algorithm = "urn:other"
			if err := verifySignature(p, &clientCert.key.PublicKey, bad, serverCert.der, nonce); err == nil {
				t.Fatal("wrong algorithm accepted")
			}
			bad = ua.SignatureData{Algorithm: sig.Algorithm, Signature: bytes.Clone(sig.Signature)}
			bad.Signature[10] ^= 0x40
			if err := verifySignature(p, &clientCert.key.PublicKey, bad, serverCert.der, nonce); !errors.Is(err, uasc.ErrSignature) {
				t.Fatalf("flipped bit: %v", err)
			}
		})
	}
}

// TestSessionFake activates sessions with every policy and token against the
// fake server, which verifies signatures and decrypts the password.
func TestSessionFake(t *testing.T) {
	testCerts(t)
	identities := map[string]Identity{
		"Anonymous": Anonymous(),
		"UserName":  UserName("user1", "password1"),
		"X509":      X509(userCrt.der, userCrt.key),
	}
	for _, p := range uasc.Policies() {
		modes := []ua.MessageSecurityMode{ua.MessageSecurityModeSign, ua.MessageSecurityModeSignAndEncrypt}
		if p.IsNone() {
			modes = []ua.MessageSecurityMode{ua.MessageSecurityModeNone}
		}
		for _, mode := range modes {
			for _, tokName := range []string{"Anonymous", "UserName", "X509"} {
				t.Run(p.Name+"_"+modeName(mode)+"_"+tokName, func(t *testing.T) {
					f := newFakeServer(t, p.URI, mode)
					c, err := f.connect(t, Config{Identity: identities[tokName], SecurityPolicy: p.URI, AllowDeprecated: true})
					if err != nil {
						t.Fatal(err)
					}
					if !f.activated || f.user == "" {
						t.Fatal("session not activated")
					}
					if got := c.Namespaces(); len(got) != 2 || got[1] != "urn:fake" {
						t.Errorf("namespaces %v", got)
					}
					if err := c.Close(); err != nil {
						t.Fatal(err)
					}
					if !f.closedSession {
						t.Error("Close did not close the session")
					}
					if _, err := c.Read(context.Background(), &ua.ReadRequest{NodesToRead: []ua.ReadValueID{{NodeID: ua.NewNumericNodeID(1, 1)}}}); !errors.Is(err, ErrClosed) {
						t.Errorf("Read after Close: %v", err)
					}
				})
			}
		}
	}
}

func TestSessionFakeRefusals(t *testing.T) {
	testCerts(t)
	for _, tc := range []struct {
		name   string
		tamper func(*fakeServer)
		cfg    Config
		want   error
	}{
		{"server signature", func(f *fakeServer) { f.badSignature = true }, Config{}, ErrServerSignature},
		{"short nonce", func(f *fakeServer) { f.shortNonce = true }, Config{}, ErrServerNonce},
		{"other certificate", func(f *fakeServer) { f.otherCert = true }, Config{}, ErrServerCertificate},
		{"wrong password", func(*fakeServer) {}, Config{Identity: UserName("user1", "nope")}, ua.StatusBadUserAccessDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, uasc.SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt)
			tc.tamper(f)
			_, err := f.connect(t, tc.cfg)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if f.activated {
				t.Error("session left activated")
			}
		})
	}
	t.Run("untrusted", func(t *testing.T) {
		f := newFakeServer(t, uasc.SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt)
		f.endpoint.ServerCertificate = userCrt.der // a certificate the store does not trust
		_, err := f.connect(t, Config{})
		if err == nil || !strings.Contains(err.Error(), "rejected") {
			t.Fatalf("got %v, want the store's refusal", err)
		}
	})
	t.Run("plaintext password refused", func(t *testing.T) {
		f := newFakeServer(t, uasc.SecurityPolicyNone, ua.MessageSecurityModeNone)
		f.endpoint.UserIdentityTokens[1].SecurityPolicyURI = uasc.SecurityPolicyNone
		_, err := f.connect(t, Config{Identity: UserName("user1", "password1")})
		if !errors.Is(err, ua.StatusBadSecurityPolicyRejected) || !strings.Contains(err.Error(), "AllowInsecurePassword") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("x509 needs a signing policy", func(t *testing.T) {
		f := newFakeServer(t, uasc.SecurityPolicyNone, ua.MessageSecurityModeNone)
		f.endpoint.UserIdentityTokens[2].SecurityPolicyURI = ""
		_, err := f.connect(t, Config{Identity: X509(userCrt.der, userCrt.key)})
		if !errors.Is(err, ua.StatusBadSecurityPolicyRejected) {
			t.Fatalf("got %v", err)
		}
	})
}

// secureSim starts a simulation server with every default policy whose
// CreateSession endpoint list goes through *alter (nil: unchanged), and a store
// that trusts its certificate.
func secureSim(t *testing.T, alter *atomic.Pointer[func([]ua.EndpointDescription) []ua.EndpointDescription], mod func(*server.Config)) (*server.Server, *pki.Store) {
	t.Helper()
	cfg := &server.Config{
		Address:  "127.0.0.1:0",
		Policies: server.DefaultPolicies(),
		Sim:      server.SimConfig{Folders: -1, Variables: -1},
	}
	if alter != nil {
		cfg.SessionEndpoints = func(eps []ua.EndpointDescription) []ua.EndpointDescription {
			if f := alter.Load(); f != nil {
				return (*f)(eps)
			}
			return eps
		}
	}
	if mod != nil {
		mod(cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	store, err := pki.Open(t.TempDir(), pki.Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Trust(srv.Certificate()); err != nil {
		t.Fatal(err)
	}
	return srv, store
}

func dialSim(t *testing.T, srv *server.Server, cfg Config) (*Client, error) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLog
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return Dial(ctx, srv.URL(), &cfg)
}

// TestSessionEndpointsChecked: the client refuses a session whose CreateSession
// endpoint list differs from what GetEndpoints returned (Part 4 §5.6.2), naming
// the difference; order alone is no difference, and on a None channel, where
// the comparison proves nothing, there is none.
func TestSessionEndpointsChecked(t *testing.T) {
	var alter atomic.Pointer[func([]ua.EndpointDescription) []ua.EndpointDescription]
	srv, store := secureSim(t, &alter, nil)
	set := func(f func([]ua.EndpointDescription) []ua.EndpointDescription) { alter.Store(&f) }
	secure := Config{Store: store, SecurityPolicy: "Basic256Sha256", SecurityMode: ua.MessageSecurityModeSignAndEncrypt}

	// Unchanged, and reordered: accepted.
	for _, name := range []string{"unchanged", "reordered"} {
		if name == "reordered" {
			set(func(eps []ua.EndpointDescription) []ua.EndpointDescription { slices.Reverse(eps); return eps })
		}
		c, err := dialSim(t, srv, secure)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c.Close()
	}

	signOnly := func(eps []ua.EndpointDescription) (n int) {
		for _, ep := range eps {
			if ep.SecurityMode == ua.MessageSecurityModeSign {
				n++
			}
		}
		return n
	}
	nSign := signOnly(srv.Endpoints())
	cases := []struct {
		name  string
		alter func([]ua.EndpointDescription) []ua.EndpointDescription
		check func(t *testing.T, e *EndpointMismatchError)
		want  []string // in the message
	}{
		{"stripped", func(eps []ua.EndpointDescription) []ua.EndpointDescription {
			return slices.DeleteFunc(eps, func(ep ua.EndpointDescription) bool { return ep.SecurityMode == ua.MessageSecurityModeSign })
		}, func(t *testing.T, e *EndpointMismatchError) {
			if len(e.Missing) != nSign || signOnly(e.Missing) != nSign || len(e.Extra) != 0 || len(e.Changed) != 0 {
				t.Fatalf("missing %d (want the %d Sign endpoints), extra %d, changed %d", len(e.Missing), nSign, len(e.Extra), len(e.Changed))
			}
		}, []string{"missing from CreateSession: Basic256Sha256/Sign"}},
		{"security level", func(eps []ua.EndpointDescription) []ua.EndpointDescription {
			for i := range eps {
				if eps[i].SecurityMode == ua.MessageSecurityModeNone {
					eps[i].SecurityLevel = 200
				}
			}
			return eps
		}, func(t *testing.T, e *EndpointMismatchError) {
			if len(e.Changed) != 1 || !slices.Equal(e.Changed[0].Fields, []string{"SecurityLevel"}) || e.Changed[0].Session.SecurityLevel != 200 {
				t.Fatalf("changed %+v", e.Changed)
			}
		}, []string{"None/None differs in SecurityLevel", "SecurityLevel 200"}},
		{"user tokens", func(eps []ua.EndpointDescription) []ua.EndpointDescription {
			for i := range eps {
				eps[i].UserIdentityTokens = []ua.UserTokenPolicy{{PolicyID: "anonymous", TokenType: ua.UserTokenTypeAnonymous}}
			}
			return eps
		}, func(t *testing.T, e *EndpointMismatchError) {
			if len(e.Changed) != len(srv.Endpoints()) || !slices.Equal(e.Changed[0].Fields, []string{"UserIdentityTokens"}) {
				t.Fatalf("changed %+v", e.Changed)
			}
		}, []string{"differs in UserIdentityTokens"}},
		{"added", func(eps []ua.EndpointDescription) []ua.EndpointDescription {
			extra := eps[0]
			extra.EndpointURL = "opc.tcp://elsewhere:4840"
			return append(eps, extra)
		}, func(t *testing.T, e *EndpointMismatchError) {
			if len(e.Extra) != 1 || e.Extra[0].EndpointURL != "opc.tcp://elsewhere:4840" || len(e.Missing) != 0 {
				t.Fatalf("extra %+v, missing %d", e.Extra, len(e.Missing))
			}
		}, []string{"missing from GetEndpoints", "opc.tcp://elsewhere:4840"}},
		{"empty", func([]ua.EndpointDescription) []ua.EndpointDescription { return nil },
			func(t *testing.T, e *EndpointMismatchError) {
				if len(e.Missing) != len(srv.Endpoints()) {
					t.Fatalf("missing %d of %d", len(e.Missing), len(srv.Endpoints()))
				}
			}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set(tc.alter)
			sessions := srv.Stats().SessionsClosed
			c, err := dialSim(t, srv, secure)
			if err == nil {
				c.Close()
				t.Fatal("altered endpoint list accepted")
			}
			var e *EndpointMismatchError
			if !errors.As(err, &e) || !errors.Is(err, ErrServerEndpoints) || !errors.Is(err, ua.StatusBadSecurityChecksFailed) {
				t.Fatalf("got %v, want an *EndpointMismatchError", err)
			}
			tc.check(t, e)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not say %q", err, w)
				}
			}
			// The refused session does not linger on the server.
			if st := srv.Stats(); st.SessionsClosed != sessions+1 {
				t.Errorf("server closed %d sessions, want 1", st.SessionsClosed-sessions)
			}

			// Over None, both lists travel unprotected: nothing to compare.
			c, err = dialSim(t, srv, Config{SecurityPolicy: "None"})
			if err != nil {
				t.Fatalf("None: %v", err)
			}
			c.Close()
		})
	}

	// Endpoints the application cached (Config.Endpoints) are the reference too.
	set(cases[0].alter)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eps, err := GetEndpoints(ctx, srv.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cached := secure
	cached.Endpoints = eps
	if _, err := dialSim(t, srv, cached); !errors.Is(err, ErrServerEndpoints) {
		t.Fatalf("with Config.Endpoints: %v, want ErrServerEndpoints", err)
	}
}

// TestHostnameChecked: by default the server certificate must name the host of
// the endpoint URL; SkipHostnameCheck turns that off.
func TestHostnameChecked(t *testing.T) {
	der, key, err := pki.CreateCertificate(pki.CertRequest{
		ApplicationURI: server.DefaultApplicationURI, CommonName: "elsewhere", Hosts: []string{"plc.example", "10.9.8.7"},
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, store := secureSim(t, nil, func(c *server.Config) { c.Certificate, c.Key = der, key })
	_, err = dialSim(t, srv, Config{Store: store, SecurityPolicy: "Basic256Sha256"})
	var ce *pki.CertError
	if !errors.Is(err, pki.ErrHostnameMismatch) || !errors.As(err, &ce) || ce.Thumbprint != pki.ThumbprintHex(der) {
		t.Fatalf("got %v, want pki.ErrHostnameMismatch", err)
	}
	for _, w := range []string{"127.0.0.1", "plc.example", "SkipHostnameCheck"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message %q does not say %q", err, w)
		}
	}
	// A user name token encrypted for the certificate on a None channel needs
	// the same check.
	if _, err := dialSim(t, srv, Config{Store: store, SecurityPolicy: "None", Identity: UserName("u", "p")}); !errors.Is(err, pki.ErrHostnameMismatch) && !errors.Is(err, ErrNoEndpoint) {
		t.Fatalf("None with a user token: %v", err)
	}

	c, err := dialSim(t, srv, Config{Store: store, SecurityPolicy: "Basic256Sha256", SkipHostnameCheck: true})
	if err != nil {
		t.Fatalf("SkipHostnameCheck: %v", err)
	}
	c.Close()

	// The sim server's own certificate names 127.0.0.1: accepted with the check.
	srv2, store2 := secureSim(t, nil, nil)
	c, err = dialSim(t, srv2, Config{Store: store2, SecurityPolicy: "Basic256Sha256"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	if err := (&Config{CheckHostname: true, SkipHostnameCheck: true}).Validate(); err == nil {
		t.Fatal("CheckHostname with SkipHostnameCheck accepted")
	}
}
