package client

import (
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
	"github.com/uagate/gateway/uastack/uasc"
)

// Defaults of Config.
const (
	DefaultRequestTimeout  = 10 * time.Second
	DefaultSessionTimeout  = 10 * time.Minute
	DefaultChannelLifetime = time.Hour
	DefaultSessionName     = "uagate gateway"
	DefaultApplicationName = "uagate gateway"
	DefaultProductURI      = "urn:uagate:gateway"
)

// Config configures a Client. A nil *Config, and every zero field, means the
// default; Validate names the first field that cannot work.
type Config struct {
	// SecurityPolicy is the URI or the short name ("Basic256Sha256", "None") of the
	// security policy to use; "" takes the best endpoint the server offers (highest
	// SecurityLevel among the policies this stack supports).
	SecurityPolicy string
	// SecurityMode is the message security mode to use; MessageSecurityModeInvalid
	// (the zero value) takes the best one the server offers for the policy.
	SecurityMode ua.MessageSecurityMode
	// AllowDeprecated permits Basic128Rsa15 and Basic256. They are used only when
	// named in SecurityPolicy, never picked as "best available".
	AllowDeprecated bool

	// Identity is the user the session is activated for; nil means Anonymous().
	Identity Identity

	// Store holds this application's instance certificate (created on first use)
	// and the trust lists the server certificate is validated against. It is
	// required for every policy but None, and whenever the server's certificate
	// is used (to encrypt a password, to sign an X.509 user token).
	Store *pki.Store
	// AutoAccept trusts a server certificate the Store does not know yet: once
	// it passed every other check (validity, host name, application URI, key
	// usage, revocation) it is written to trusted/ with a warning. For
	// development only.
	AutoAccept bool
	// SkipHostnameCheck accepts a server certificate that does not name the host
	// of the endpoint URL among its DNS names and IP addresses (SubjectAltName).
	// The check is on by default (Part 4 §6.1.3, Table 106): a trusted
	// certificate presented at another address may be a copy in the wrong
	// hands. Turn it off for servers reached through addresses their
	// certificate cannot know (NAT, port forwarding, containers); the trust list
	// and the ApplicationUri check still bind the identity. A refusal wraps
	// pki.ErrHostnameMismatch (a *pki.CertError).
	SkipHostnameCheck bool
	// CheckHostname is what SkipHostnameCheck was before it: the check is now on
	// unless SkipHostnameCheck is set, and withDefaults sets this field from it.
	// Setting it together with SkipHostnameCheck is an error.
	//
	// Deprecated: the hostname is checked by default; use SkipHostnameCheck to
	// turn the check off.
	CheckHostname bool
	// AllowInsecurePassword lets a password travel unencrypted when the server's
	// token policy asks for that on a channel that is not encrypted. Off by
	// default: anyone on the network path could read it.
	AllowInsecurePassword bool

	// Certificate and PrivateKey, when set, are used instead of the Store's
	// application instance certificate (DER, leaf first).
	Certificate []byte
	PrivateKey  *rsa.PrivateKey

	// ApplicationURI names this client; default urn:<hostname>:uagate:gateway. It
	// must match the certificate, which the Store creates for it.
	ApplicationURI  string
	ApplicationName string // default DefaultApplicationName
	ProductURI      string // default DefaultProductURI

	// Endpoints, when set, are used instead of asking the server with GetEndpoints
	// (an application that caches the discovery result connects faster).
	Endpoints []ua.EndpointDescription

	SessionName     string        // default DefaultSessionName
	SessionTimeout  time.Duration // requested session timeout; default DefaultSessionTimeout
	RequestTimeout  time.Duration // per service call without a context deadline; default DefaultRequestTimeout
	ChannelLifetime time.Duration // requested secure channel token lifetime; default DefaultChannelLifetime
	Locales         []string      // preferred locales, sent in ActivateSession

	// Transport configures the opc.tcp connection; nil means its defaults.
	Transport *uacp.Config
	// Logger receives the client's logs; default slog.Default().
	Logger *slog.Logger
}

// DefaultApplicationURI returns urn:<hostname>:uagate:gateway.
func DefaultApplicationURI() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "localhost"
	}
	return "urn:" + h + ":uagate:gateway"
}

// Validate reports the first setting that cannot work, naming the field.
func (c *Config) Validate() error {
	_, err := c.validate()
	return err
}

// validate is Validate that also returns the ApplicationUri of Certificate, so
// withDefaults need not parse it again.
func (c *Config) validate() (certURI string, err error) {
	if c == nil {
		return "", nil
	}
	if c.SecurityPolicy != "" {
		p, err := ParseSecurityPolicy(c.SecurityPolicy)
		if err != nil {
			return "", fmt.Errorf("client: Config.SecurityPolicy: %w", err)
		}
		pol, _ := uasc.PolicyByURI(p)
		if pol.Deprecated && !c.AllowDeprecated {
			return "", fmt.Errorf("client: Config.SecurityPolicy %s is deprecated; set AllowDeprecated to use it", pol.Name)
		}
		if !pol.IsNone() && c.Store == nil {
			return "", fmt.Errorf("client: Config.Store is required for SecurityPolicy %s (certificates and trust list)", pol.Name)
		}
		if pol.IsNone() && c.SecurityMode != ua.MessageSecurityModeInvalid && c.SecurityMode != ua.MessageSecurityModeNone {
			return "", fmt.Errorf("client: Config.SecurityMode %v does not go with SecurityPolicy None", c.SecurityMode)
		}
		if !pol.IsNone() && c.SecurityMode == ua.MessageSecurityModeNone {
			return "", fmt.Errorf("client: Config.SecurityMode None does not go with SecurityPolicy %s", pol.Name)
		}
	}
	switch c.SecurityMode {
	case ua.MessageSecurityModeInvalid, ua.MessageSecurityModeNone, ua.MessageSecurityModeSign, ua.MessageSecurityModeSignAndEncrypt:
	default:
		return "", fmt.Errorf("client: Config.SecurityMode %v is not a security mode", c.SecurityMode)
	}
	if c.CheckHostname && c.SkipHostnameCheck {
		return "", errors.New("client: Config.CheckHostname and Config.SkipHostnameCheck contradict each other")
	}
	if (c.Certificate == nil) != (c.PrivateKey == nil) {
		return "", errors.New("client: Config.Certificate and Config.PrivateKey go together")
	}
	if c.Certificate != nil {
		leaf, err := pki.LeafDER(c.Certificate)
		if err != nil {
			return "", fmt.Errorf("client: Config.Certificate: %w", err)
		}
		cert, err := x509.ParseCertificate(leaf)
		if err != nil {
			return "", fmt.Errorf("client: Config.Certificate: %w", err)
		}
		pub, ok := cert.PublicKey.(*rsa.PublicKey)
		if !ok || !pub.Equal(&c.PrivateKey.PublicKey) {
			return "", errors.New("client: Config.PrivateKey does not belong to Config.Certificate")
		}
		certURI = pki.ApplicationURI(cert)
		if c.ApplicationURI != "" && certURI != c.ApplicationURI {
			return "", fmt.Errorf("client: Config.ApplicationURI %q is not the URI of Config.Certificate (%q)", c.ApplicationURI, pki.ApplicationURI(cert))
		}
	}
	if c.Identity != nil {
		if err := c.Identity.validate(); err != nil {
			return "", fmt.Errorf("client: Config.Identity: %w", err)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"SessionTimeout", c.SessionTimeout},
		{"RequestTimeout", c.RequestTimeout},
		{"ChannelLifetime", c.ChannelLifetime},
	} {
		if d.v < 0 {
			return "", fmt.Errorf("client: Config.%s %v is negative", d.name, d.v)
		}
	}
	if err := c.Transport.Validate(); err != nil {
		return "", fmt.Errorf("client: Config.Transport: %w", err)
	}
	return certURI, nil
}

// withDefaults returns a validated copy of c with zero fields filled.
func (c *Config) withDefaults() (Config, error) {
	certURI, err := c.validate()
	if err != nil {
		return Config{}, err
	}
	var cfg Config
	if c != nil {
		cfg = *c
	}
	if cfg.SecurityPolicy != "" {
		cfg.SecurityPolicy, _ = ParseSecurityPolicy(cfg.SecurityPolicy)
	}
	if cfg.Identity == nil {
		cfg.Identity = Anonymous()
	}
	cfg.CheckHostname = !cfg.SkipHostnameCheck
	if cfg.ApplicationURI == "" {
		cfg.ApplicationURI = certURI
		if cfg.ApplicationURI == "" {
			cfg.ApplicationURI = DefaultApplicationURI()
		}
	}
	if cfg.ApplicationName == "" {
		cfg.ApplicationName = DefaultApplicationName
	}
	if cfg.ProductURI == "" {
		cfg.ProductURI = DefaultProductURI
	}
	if cfg.SessionName == "" {
		cfg.SessionName = DefaultSessionName
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.ChannelLifetime == 0 {
		cfg.ChannelLifetime = DefaultChannelLifetime
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}

// ParseSecurityPolicy returns the URI of a security policy given by URI or by its
// short name (case-insensitive: "None", "Basic256Sha256", "Aes128_Sha256_RsaOaep",
// "Aes256_Sha256_RsaPss", "Basic128Rsa15", "Basic256").
func ParseSecurityPolicy(s string) (string, error) {
	p, err := uasc.PolicyByName(s)
	if err != nil {
		return "", err
	}
	return p.URI, nil
}

// ParseSecurityMode parses "None", "Sign" or "SignAndEncrypt" (case-insensitive).
// "" gives MessageSecurityModeInvalid, which means "best available" in Config.
func ParseSecurityMode(s string) (ua.MessageSecurityMode, error) {
	switch strings.ToLower(s) {
	case "":
		return ua.MessageSecurityModeInvalid, nil
	case "none":
		return ua.MessageSecurityModeNone, nil
	case "sign":
		return ua.MessageSecurityModeSign, nil
	case "signandencrypt", "sign_and_encrypt", "sign-and-encrypt":
		return ua.MessageSecurityModeSignAndEncrypt, nil
	}
	return 0, fmt.Errorf("client: unknown security mode %q (want None, Sign or SignAndEncrypt)", s)
}

// modeName is the short name of a security mode, for logs and errors.
func modeName(m ua.MessageSecurityMode) string {
	switch m {
	case ua.MessageSecurityModeNone:
		return "None"
	case ua.MessageSecurityModeSign:
		return "Sign"
	case ua.MessageSecurityModeSignAndEncrypt:
		return "SignAndEncrypt"
	}
	return m.String()
}
