package uasc

import (
	"context"
	"fmt"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
)

// GetEndpoints asks a server for its endpoints over a channel with security None
// (GetEndpoints needs no session), then closes the channel. ctx bounds the whole
// exchange.
func GetEndpoints(ctx context.Context, endpointURL string, cfg *uacp.Config) ([]ua.EndpointDescription, error) {
	ch, err := Dial(ctx, endpointURL, &Config{Transport: cfg})
	if err != nil {
		return nil, err
	}
	defer ch.Close()
	out, err := ch.SendRequest(ctx, &ua.GetEndpointsRequest{EndpointURL: endpointURL}, nil)
	if err != nil {
		return nil, fmt.Errorf("uasc: GetEndpoints: %w", err)
	}
	resp, ok := out.(*ua.GetEndpointsResponse)
	if !ok {
		return nil, fmt.Errorf("uasc: GetEndpoints answered with %T: %w", out, ua.StatusBadUnknownResponse)
	}
	if st := resp.ResponseHeader.ServiceResult; st.IsBad() {
		return nil, fmt.Errorf("uasc: GetEndpoints: %w", st)
	}
	return resp.Endpoints, nil
}
