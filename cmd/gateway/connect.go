package main

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
)

// passwordEnv is read when -user is given without -password, so the password need
// not show in the process list.
const passwordEnv = "UAGATE_PASSWORD"

// errUsage marks errors in the command line: the exit code is 2, not 1.
var errUsage = errors.New("usage")

// connFlags are the flags of every command that connects to an OPC UA server.
type connFlags struct {
	policy, mode      string
	user, password    string
	certFile, keyFile string
	pkiDir            string
	autoAccept        bool
	allowDeprecated   bool
	timeout           time.Duration
	verbose           bool
}

func (f *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.policy, "policy", "", "security `policy`: None, Basic256Sha256, Aes128_Sha256_RsaOaep, Aes256_Sha256_RsaPss,\nBasic128Rsa15, Basic256 (deprecated), or a full policy URI; default: the best the server offers")
	fs.StringVar(&f.mode, "mode", "", "security `mode`: None, Sign or SignAndEncrypt; default: the best for the policy")
	fs.StringVar(&f.user, "user", "", "user `name` for a UserName token (password from -password or $"+passwordEnv+")")
	fs.StringVar(&f.password, "password", "", "`password` for -user (visible in the process list: prefer $"+passwordEnv+")")
	fs.StringVar(&f.certFile, "cert", "", "X.509 user certificate `file` (DER or PEM), with -key")
	fs.StringVar(&f.keyFile, "key", "", "private key `file` (PEM, PKCS#1 or PKCS#8) of -cert")
	fs.StringVar(&f.pkiDir, "pki", "./pki", "certificate store `dir`ectory (own, trusted, rejected certificates)")
	fs.BoolVar(&f.autoAccept, "auto-accept", false, "trust unknown server certificates (development only)")
	fs.BoolVar(&f.allowDeprecated, "allow-deprecated", false, "allow the deprecated policies Basic128Rsa15 and Basic256")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "time limit for connecting and for each request")
	fs.BoolVar(&f.verbose, "v", false, "log the details of connecting")
}

// config builds the client configuration. Secrets stay out of the logs: only the
// identity's description is ever printed.
func (f *connFlags) config(stderr io.Writer) (*client.Config, error) {
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg := &client.Config{
		AllowDeprecated: f.allowDeprecated,
		AutoAccept:      f.autoAccept,
		RequestTimeout:  f.timeout,
		Logger:          logger,
	}
	if f.policy != "" {
		p, err := client.ParseSecurityPolicy(f.policy)
		if err != nil {
			return nil, fmt.Errorf("%w: -policy: %v", errUsage, err)
		}
		cfg.SecurityPolicy = p
	}
	m, err := client.ParseSecurityMode(f.mode)
	if err != nil {
		return nil, fmt.Errorf("%w: -mode: %v", errUsage, err)
	}
	cfg.SecurityMode = m
	if m == ua.MessageSecurityModeNone && cfg.SecurityPolicy == "" {
		cfg.SecurityPolicy, _ = client.ParseSecurityPolicy("None")
	}

	switch {
	case f.user != "" && f.certFile != "":
		return nil, fmt.Errorf("%w: -user and -cert exclude each other", errUsage)
	case f.user != "":
		pw := f.password
		if pw == "" {
			pw = os.Getenv(passwordEnv)
		}
		cfg.Identity = client.UserName(f.user, pw)
	case f.certFile != "" || f.keyFile != "":
		if f.certFile == "" || f.keyFile == "" {
			return nil, fmt.Errorf("%w: -cert and -key go together", errUsage)
		}
		cert, key, err := loadUserCertificate(f.certFile, f.keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Identity = client.X509(cert, key)
	case f.password != "":
		return nil, fmt.Errorf("%w: -password needs -user", errUsage)
	}

	store, err := pki.Open(f.pkiDir, pki.Options{Logger: logger})
	if err != nil {
		return nil, err
	}
	cfg.Store = store
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return cfg, nil
}

// dial connects with the flags' configuration within -timeout.
func (f *connFlags) dial(ctx context.Context, endpoint string, stderr io.Writer) (*client.Client, error) {
	cfg, err := f.config(stderr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	return client.Dial(ctx, endpoint, cfg)
}

// loadUserCertificate reads a certificate (DER or PEM) and its PEM private key.
func loadUserCertificate(certFile, keyFile string) ([]byte, *rsa.PrivateKey, error) {
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, err
	}
	if blk, _ := pem.Decode(cb); blk != nil {
		cb = blk.Bytes
	}
	if _, err := x509.ParseCertificate(cb); err != nil {
		return nil, nil, fmt.Errorf("-cert %s: %w", certFile, err)
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, err
	}
	blk, _ := pem.Decode(kb)
	if blk == nil {
		return nil, nil, fmt.Errorf("-key %s: no PEM block", keyFile)
	}
	if k, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err == nil {
		return cb, k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("-key %s: %w", keyFile, err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, nil, fmt.Errorf("-key %s: %T is not an RSA key", keyFile, k)
	}
	return cb, rk, nil
}

// parseInterspersed parses flags that may come before, between and after the
// positional arguments ("gateway read opc.tcp://… -json ns=1;s=X").
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// flag stops at "--": everything after it is positional.
		if i := len(args) - len(rest); i > 0 && args[i-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseNode parses a node id; "nsu=" URIs are resolved with the server's
// namespace array.
func parseNode(s string, c *client.Client) (ua.NodeID, error) {
	x, err := ua.ParseExpandedNodeID(s)
	if err != nil {
		return ua.NodeID{}, err
	}
	var ns []string
	if c != nil {
		ns = c.Namespaces()
	}
	return x.Resolve(ns)
}
