package server

import "errors"

// Sentinel errors of the server's Go API. Errors a client sees are OPC UA status
// codes (ua.StatusCode) in the responses, not these.
var (
	// ErrClosed is returned by Start after Close, and by methods of a closed Server.
	ErrClosed = errors.New("server: closed")
)
