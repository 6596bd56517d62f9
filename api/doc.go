// Package api is the HTTP side of the gateway: the REST API under /api/v1,
// OPC Publisher's configuration API under /v2/configuration, Prometheus
// /metrics, /healthz and /readyz, the handlers mounted beside them (the
// WebSocket hub at /ws) and the dashboard's files at /, all on one
// listener.
//
// # What lives here
//
//   - Server (server.go): options, the listener (optionally TLS, with the
//     certificate read again when its files change), graceful Shutdown.
//   - The route table (api.go, publisher.go) from which both the mux and the
//     OpenAPI 3.1 document (openapi.go, served at /api/v1/openapi.json) are
//     made.
//   - Backend (backend.go): the interface the wiring implements over the
//     runtime; its Stats are the parts' own types (bridge.GroupStats,
//     sink.OutputStats, wssink.Stats, the registered pools' stats), which
//     /metrics and /api/v1/status expose counter by counter
//     (TestMetricsCoverStats); its last values are a group's pages
//     (bridge.WriterGroup.LastValues). NewEndpointStatus describes a
//     client.ManagedSession.
//   - Resources: endpoints (endpoints.go), writer groups, dataset writers and
//     fields (writers.go, model.go, validate.go), last values and metadata
//     (values.go), on-demand Read/Write/Browse/Translate/Call
//     (services.go), certificates (certs.go), status (status.go), health
//     (health.go), metrics (metrics.go, histogram.go).
//   - Auth (auth.go): API keys as bearer tokens (or X-API-Key) with read and
//     admin roles, from the options and a mounted secret file, compared in
//     constant time; a keys file that becomes unusable keeps the keys read
//     before (stale, reported in the log, metrics and readiness), never
//     none. Browser sessions (session.go): POST /api/v1/login sets an
//     HttpOnly, SameSite=Strict cookie naming the key by its digest.
//   - The browser defences (guard.go), on every request: the Host allow-list
//     (DNS rebinding), cross-site requests without an allowed Origin,
//     state-changing requests a browser would not preflight; the CSP,
//     X-Frame-Options and nosniff headers. Refusals are counted by reason.
//   - Bounds: ReadTimeout and MaxConnections on the listener (limit.go),
//     browse continuation points held per caller (browsecp.go), cursors and
//     bodies checked strictly (duplicate members refused, type errors named
//     by JSON pointer).
//   - cli/: the `gateway status` and `gateway nodes` commands, clients of a
//     running gateway's API.
//   - ServeDebug (debug.go): the Go profiler and the message buffer pools'
//     counters, opted into, on a loopback listener of their own.
//
// # Rules
//
// Errors are RFC 9457 problem details (problem.go): a type URI per kind
// (urn:uagate:problem:<slug>), the status, a detail naming what was wrong
// and, where there is one, the member at fault as a JSON pointer. Bodies are
// decoded strictly (unknown members, trailing data and bodies over
// Options.MaxBodyBytes are refused); OPC Publisher's payloads leniently, as
// they carry many settings without meaning here. A change goes through
// Backend.ApplyConfig with a function that checks and changes a copy, so a
// refused change changes nothing. Lists are paged (limit, cursor); the last
// values a page at a time inside each group, so a page costs its size.
//
// Without API keys the listener must be on loopback, unless
// Options.AllowUnauthenticated opens it (with a warning); New checks
// Options.Listen and Serve the listener it is given. Tokens are never
// logged or taken from a URL; the access log records the path without the
// query and the key's name. The read role sees no local file paths.
//
// Metrics are read from the Backend's snapshots at scrape time; the only
// thing the hot path touches is Histogram.Observe (atomic adds).
//
// Shutdown fails /readyz first, keeps serving for Options.ShutdownDelay,
// then stops accepting and drains requests until its context ends.
// Hijacked connections (WebSockets) are not waited for: their owner closes
// them.
//
// The dashboard at / is web/: plain HTML, CSS and JavaScript modules,
// embedded, with no build step and nothing fetched from elsewhere. It is a
// client of the routes above and of the WebSocket stream at /ws, nothing
// more; TestDashboard in cmd/gateway drives it in chromium against the whole
// gateway. web/js/statuscodes.js is generated from uastack/ua
// (TestDashboardStatusNames).
package api
