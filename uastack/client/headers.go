package client

import "github.com/uagate/gateway/uastack/ua"

// requestHeader returns a pointer to the RequestHeader of a service request, or nil
// when req is not one.
func requestHeader(req ua.Structure) *ua.RequestHeader {
	if r, ok := req.(ua.Request); ok {
		return r.GetRequestHeader()
	}
	return nil
}

// responseHeader returns a pointer to the ResponseHeader of a service response, or
// nil when resp is not one.
func responseHeader(resp ua.Structure) *ua.ResponseHeader {
	if r, ok := resp.(ua.Response); ok {
		return r.GetResponseHeader()
	}
	return nil
}
