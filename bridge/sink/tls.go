package sink

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/uagate/gateway/bridge/config"
)

// TLSOptions of a broker connection.
type TLSOptions struct {
	// CAFile holds the PEM certificates the broker's certificate must chain
	// to; empty: the system roots.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// brokers that authenticate clients by certificate; both or neither.
	CertFile string
	KeyFile  string
	// InsecureSkipVerify accepts any broker certificate: for development
	// only, since it lets anyone on the path read and change the stream.
	InsecureSkipVerify bool
	// ServerName overrides the name checked in the broker's certificate;
	// default the host of the URL.
	ServerName string
}

// TLSFromConfig maps a sink's tls settings in the configuration; nil for
// none.
func TLSFromConfig(t *config.TLS) *TLSOptions {
	if t == nil {
		return nil
	}
	return &TLSOptions{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, InsecureSkipVerify: t.InsecureSkipVerify}
}

// Config builds the tls.Config, with a clear error for files that cannot be
// read or parsed.
func (o *TLSOptions) Config() (*tls.Config, error) {
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: o.InsecureSkipVerify, //nolint:gosec // an explicit, documented opt-in
		ServerName:         o.ServerName,
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: CA file %s: no PEM certificate in it", o.CAFile)
		}
		c.RootCAs = pool
	}
	switch {
	case o.CertFile != "" && o.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	case o.CertFile != "" || o.KeyFile != "":
		return nil, errors.New("tls: certFile and keyFile go together")
	}
	return c, nil
}

// ErrTLSRefused marks a connection the broker ended during or right after
// the TLS handshake: with TLS 1.3 a broker that refuses the client's
// certificate (or wants one) closes the connection after the handshake, and
// the client sees only a reset or a TLS alert.
var ErrTLSRefused = errors.New("the broker ended the TLS session (does it require a client certificate — tls.certFile and tls.keyFile — from a CA it trusts?)")

// ExplainTLS wraps a connect error of a TLS connection with ErrTLSRefused
// when it has the marks of a broker that refused the client's certificate;
// other errors (an unknown CA, a wrong name) say what they are already.
func ExplainTLS(err error, o *TLSOptions) error {
	if err == nil || o == nil {
		return err
	}
	var alert tls.AlertError
	msg := err.Error()
	switch {
	case errors.As(err, &alert),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE),
		strings.Contains(msg, "remote error: tls:"),
		strings.Contains(msg, "closed by remote after TLS handshake"),
		strings.Contains(msg, "connection reset by peer"),
		strings.Contains(msg, "broken pipe"):
		return fmt.Errorf("%w: %w", ErrTLSRefused, err)
	}
	return err
}
