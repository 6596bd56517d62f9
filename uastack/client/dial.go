package client

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// Dial connects to the server at endpointURL and activates a session: it fetches
// the endpoints (unless Config.Endpoints holds them), selects one, validates the
// server certificate against the Store, opens the secure channel, creates and
// activates the session, and reads the server's OperationLimits and namespace
// array. ctx bounds the whole of it.
//
// An untrusted server certificate fails with an error that wraps the Store's
// *pki.UntrustedError (errors.As), which names the copy in rejected/.
//
// The server certificate must name the host of endpointURL (unless
// Config.SkipHostnameCheck), and the endpoints the server lists in
// CreateSession must be those GetEndpoints (or Config.Endpoints) showed: a
// difference fails with an *EndpointMismatchError naming it.
func Dial(ctx context.Context, endpointURL string, cfg *Config) (*Client, error) {
	cfg, err := discover(ctx, endpointURL, cfg)
	if err != nil {
		return nil, err
	}
	c, err := prepare(ctx, endpointURL, cfg)
	if errors.Is(err, pki.ErrHostnameMismatch) {
		return nil, fmt.Errorf("%w (Config.SkipHostnameCheck turns this check off)", err)
	}
	if err != nil {
		return nil, err
	}
	ch, err := c.openChannel(ctx)
	if err != nil {
		return nil, err
	}
	c.conn = ch
	if err := c.start(ctx); err != nil {
		ch.Close()
		return nil, err
	}
	return c, nil
}

// discover returns cfg with Endpoints filled from GetEndpoints when it has none,
// so that the Client keeps the whole list the session's endpoints are checked
// against (checkSessionEndpoints).
func discover(ctx context.Context, endpointURL string, cfg *Config) (*Config, error) {
	if cfg != nil && len(cfg.Endpoints) > 0 {
		return cfg, nil
	}
	// The configuration and the URL are checked before anything is sent, as
	// prepare would.
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if u, err := url.Parse(endpointURL); err != nil || u.Scheme != "opc.tcp" || u.Host == "" {
		return nil, fmt.Errorf("%w: %q, want opc.tcp://host:port/path", ErrEndpointURL, endpointURL)
	}
	eps, err := GetEndpoints(ctx, endpointURL, cfg)
	if err != nil {
		return nil, err
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	c.Endpoints = eps
	return &c, nil
}

// GetEndpoints asks the server at endpointURL for its endpoints over an
// unsecured channel of its own (cfg may be nil). Put the result into
// Config.Endpoints to skip discovery on later connects.
func GetEndpoints(ctx context.Context, endpointURL string, cfg *Config) ([]ua.EndpointDescription, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	eps, err := uasc.GetEndpoints(ctx, endpointURL, c.Transport)
	if err != nil {
		return nil, fmt.Errorf("client: GetEndpoints %s: %w", endpointURL, err)
	}
	return eps, nil
}

// Channel returns the secure channel the session runs on.
func (c *Client) Channel() *uasc.Channel {
	ch, _ := c.conn.(*uasc.Channel)
	return ch
}

// openChannel opens a secure channel to the client's endpoint as Dial does.
func (c *Client) openChannel(ctx context.Context) (*uasc.Channel, error) {
	ch, err := uasc.Dial(ctx, c.url, &uasc.Config{
		SecurityPolicyURI: c.endpoint.SecurityPolicyURI,
		SecurityMode:      c.endpoint.SecurityMode,
		LocalCertificate:  c.cert,
		LocalKey:          c.key,
		RemoteCertificate: c.endpoint.ServerCertificate,
		Lifetime:          c.cfg.ChannelLifetime,
		RequestTimeout:    c.cfg.RequestTimeout,
		AllowDeprecated:   c.cfg.AllowDeprecated,
		Transport:         c.cfg.Transport,
		Logger:            c.log,
	})
	if err != nil {
		return nil, fmt.Errorf("client: opening a %s/%s channel to %s: %w", c.policy.Name, modeName(c.endpoint.SecurityMode), c.url, err)
	}
	return ch, nil
}
