package server

import "github.com/uagate/gateway/uastack/ua"

// requestHeader returns a pointer to the RequestHeader of a service request, or nil
// when msg is not one.
func requestHeader(msg ua.Structure) *ua.RequestHeader {
	if r, ok := msg.(ua.Request); ok {
		return r.GetRequestHeader()
	}
	return nil
}
