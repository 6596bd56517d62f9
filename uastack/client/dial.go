package client

import (
	"context"
	"fmt"

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
func Dial(ctx context.Context, endpointURL string, cfg *Config) (*Client, error) {
	c, err := prepare(ctx, endpointURL, cfg)
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
