// Package command runs commands from the messaging side against the OPC UA
// servers: write a value, call a method, read now. The transports (MQTT,
// NATS, the WebSocket stream, the REST API, a Sparkplug DCMD handler) only
// carry requests and responses; everything a command means — who may do
// what, how a JSON value becomes the node's type, idempotency, rate limits,
// bounded queues, timeouts, the command log and the counters — is here, the
// same for every transport.
//
// # API
//
//	e, err := command.New(cfg, command.Options{Backend: b})
//	resp := e.Handle(ctx, caller, req)          // synchronous
//	e.Submit(caller, req, func(*Response) {…})  // the transports: never waits
//	e.SubmitPayload(caller, payload, done)      // the same from JSON bytes
//	e.SetConfig(next)                           // a reload: rules and limits
//	e.Close(ctx)
//
// A Caller is who sent the request as the transport knows it
// ({Transport, Sink, ID}: "mqtt/broker:hmi-1", "api:operator"); a Request
// names its operation, its target (a field by writer group, writer and
// field — the names consumers see — or a node of an endpoint; a call names
// object and method) and carries a request id. Every request gets exactly
// one Response: the status code (the server's, or that of a refusal), the
// refusal's kind and reason, the old and new value of a write, the input
// argument results and outputs of a call, the DataValue of a read, the
// server's diagnostics where it gave any. Decode and Response.Marshal are
// the wire form all transports share.
//
// A Sparkplug DCMD handler maps each metric write to a Request with the
// metric's writer group, writer and field (Op write, Value the metric's
// value as JSON) and the Caller {Transport: "sparkplug", Sink: <sink>, ID:
// <host id>}: the same rules then decide.
//
// # Order of checks
//
// Submit checks the request (malformed: KindInvalid), resolves its target
// in the configuration (KindUnknownTarget), authorises it (KindDenied),
// looks its request id up (a duplicate gets the first response, or waits
// for it while it runs), takes a token of the caller's bucket
// (KindRateLimited), and queues it on its endpoint's lane (a full queue:
// KindBusy). A refused request is not remembered for idempotency, so that
// sending it again later runs it. A worker then opens the endpoint's
// command session (Backend.Session), resolves nsu= node ids with the
// server's namespace array, and runs it within the endpoint's request
// timeout, counted from submission (KindTimeout).
//
// # Authorisation: explicit, default-deny
//
// commands.rules grant callers targets: write and read by field (globs on
// group, writer, field) or by node (endpoint and node id globs: only then
// may a request name a raw node id), call by endpoint, object and method.
// A request is allowed when a rule whose callers match lists its target;
// nothing is allowed otherwise, and the refusal says which rule list to
// extend. A field's write is also allowed by a node rule that matches the
// field's node. Node patterns match both the ns= and the nsu= form of the
// node; when only the server's namespace array can tell, the check is made
// again by the worker once the node is resolved. Rate limits are token
// buckets per caller: the first matching rule's rate, else commands.rate.
//
// # Values
//
// A write reads the node's Value, DataType and ValueRank first (the old
// value goes to the response and the log), decodes the request's JSON value
// as the DataType's built-in type (browsing up the supertypes of a
// non-standard DataType), refuses what does not fit (KindTypeMismatch:
// 3.5 for an Int16, 70000 for an Int16, "7" for a number, a Variant of
// another type), then writes. A call reads the method's InputArguments and
// decodes each argument the same way, refusing the call with per-argument
// results when one does not fit.
//
// # Bounds and concurrency
//
// Each endpoint has a lane: a queue of commands.queueSize and
// commands.workers goroutines, started with its first command; a slow
// server holds only its own lane. The idempotency table holds at most
// commands.idempotencyEntries request ids for commands.idempotencyWindow
// (the oldest answered ones go first when it is full); the rate limiter
// tracks at most 10000 callers (quiet ones are forgotten when room is
// needed). Submit takes e.mu (lanes, idempotency, buckets) only for memory
// operations; done callbacks run without it. The configuration in force is
// an atomic pointer (SetConfig); rules are compiled once per change.
//
// # Log and counters
//
// Every command is logged (slog: caller, request id, operation, target,
// old and new value, status, refusal) and kept in a ring of
// commands.logSize entries (Log) for the API and the dashboard; Stats
// counts requests and outcomes per transport for /metrics.
package command
