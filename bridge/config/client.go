package config

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"

	"fmt"
	"log/slog"
	"strings"

	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
)

// ClientConfig maps an endpoint's settings to the client configuration: the
// one path that command-line flags, the configuration file and check-config
// share. Unset settings take their defaults (the PKI directory
// <stateDir>/pki); the endpoint itself is not modified. A setting that cannot
// work is an *Error naming the field (paths without the endpoints[i]
// prefix: "securityPolicy"); a file that cannot be read (a certificate, a key,
// a secret) or a certificate store that cannot be opened is a plain error.
// Secrets not resolved yet are resolved here. Logs go to logger (default
// slog.Default()); secrets never do.
func ClientConfig(ep *Endpoint, stateDir string, logger *slog.Logger) (*client.Config, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if stateDir == "" {
		stateDir = DefaultStateDir
	}
	e := *ep
	e.applyDefaults(stateDir)
	v := &validator{}
	e.validateConnection(v, "")
	if len(v.errs) > 0 {
		for i := range v.errs {
			v.errs[i].Path = strings.TrimPrefix(v.errs[i].Path, ".")
		}
		return nil, &Error{Issues: v.errs}
	}

	cfg := &client.Config{
		AllowDeprecated:   e.AllowDeprecated,
		SkipHostnameCheck: e.SkipHostnameCheck,
		AutoAccept:        e.AutoAccept,
		RequestTimeout:    e.RequestTimeout.D(),
		SessionTimeout:    e.SessionTimeout.D(),
		Logger:            logger,
	}
	if e.MaxMessageSize > 0 {
		cfg.Transport = &uacp.Config{MaxMessageSize: uint32(e.MaxMessageSize)}
	}
	if !strings.EqualFold(e.SecurityPolicy, SecurityBest) {
		cfg.SecurityPolicy, _ = client.ParseSecurityPolicy(e.SecurityPolicy) // validated
	}
	if !strings.EqualFold(e.SecurityMode, SecurityBest) {
		cfg.SecurityMode, _ = client.ParseSecurityMode(e.SecurityMode)
	}
	if cfg.SecurityMode == ua.MessageSecurityModeNone && cfg.SecurityPolicy == "" {
		cfg.SecurityPolicy, _ = client.ParseSecurityPolicy("None")
	}

	id := &e.Identity
	switch id.Type {
	case IdentityUsername:
		pw := id.Password
		if !pw.ok && (pw.File != "" || pw.Env != "") {
			if err := pw.Resolve(nil); err != nil {
				return nil, fmt.Errorf("identity.password: %w", err)
			}
		}
		cfg.Identity = client.UserName(id.Username, pw.Reveal())
	case IdentityX509:
		cert, key, err := LoadUserCertificate(id.CertFile, id.KeyFile)
		if err != nil {
			return nil, err
		}
		cfg.Identity = client.X509(cert, key)
	}

	store, err := pki.Open(e.PKI, pki.Options{Logger: logger})
	if err != nil {
		return nil, err
	}
	cfg.Store = store
	if err := cfg.Validate(); err != nil {
		return nil, &Error{Issues: []Issue{{Message: err.Error(), Err: err}}}
	}
	return cfg, nil
}

// LoadUserCertificate reads an X.509 user certificate (DER or PEM) and its
// private key (PEM: PKCS#1 or PKCS#8, RSA).
func LoadUserCertificate(certFile, keyFile string) ([]byte, *rsa.PrivateKey, error) {
	cb, err := readLimited(certFile, 1<<20)
	if err != nil {
		return nil, nil, fmt.Errorf("identity.certFile: %w", err)
	}
	if blk, _ := pem.Decode(cb); blk != nil {
		cb = blk.Bytes
	}
	if _, err := x509.ParseCertificate(cb); err != nil {
		return nil, nil, fmt.Errorf("identity.certFile %s: %w", certFile, err)
	}
	kb, err := readLimited(keyFile, 1<<20)
	if err != nil {
		return nil, nil, fmt.Errorf("identity.keyFile: %w", err)
	}
	blk, _ := pem.Decode(kb)
	if blk == nil {
		return nil, nil, fmt.Errorf("identity.keyFile %s: no PEM block", keyFile)
	}
	if k, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err == nil {
		return cb, k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("identity.keyFile %s: %w", keyFile, err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, nil, fmt.Errorf("identity.keyFile %s: %T is not an RSA key", keyFile, k)
	}
	return cb, rk, nil
}
