// Package wssink is the WebSocket stream of the gateway: a Hub that browsers
// and tools connect to (mounted at /ws on the shared HTTP listener) and that
// the pipeline hands its messages to as a sink.Queue. Each message is sent
// as one text frame holding the message's JSON payload, unchanged.
//
// # Guarantee: at most once
//
// The hub is config.AtMostOnce. A message counts as delivered once the hub has
// offered it to the connected clients; it never holds an upstream
// acknowledgement back, and a client that connects later, or falls behind, or
// goes away, misses what it did not receive. Enqueue never waits for a client:
// a client whose bounded send queue (Options.ClientQueue) is full is closed
// with close code 1008 (policy violation) and the reason "slow consumer:
// queue full", and counted (Stats.SlowClosed). It may reconnect.
//
// # Choosing what to receive
//
// A client selects by dataset writer group, dataset writer, field and kind
// (data, metadata, status, field) either in the URL,
//
//	ws://host:8080/ws?group=line1&writer=press,oven&kind=data,metadata
//
// (each parameter repeatable and each a comma-separated list), or with a text
// message:
//
//	{"subscribe":{"groups":["line1"],"writers":["press","oven"],"fields":[],"kinds":["data"]}}
//
// Whichever comes first applies: a URL with any of group, writer, field or
// kind subscribes at once; a URL with none of them receives nothing until
// its first subscribe message. A later subscribe message replaces the
// selection. An empty list selects everything of that level; no kind means
// data, metadata and status (and field, when fields are named), so
// {"subscribe":{}} or ?kind=data,metadata,status receives everything but the
// per-field messages. A list restricts only the levels a message has: status
// messages have no group or writer, a batched writer-group message has no
// writer (it passes any writer list; select its group to narrow it), and only
// per-field messages have a field. A malformed URL selection is answered 400;
// a malformed subscribe message closes the client with 1008 and the reason.
//
// On every subscription the hub first sends the latest status message and
// the latest ua-metadata message of each selected writer, from a small cache
// (Options.MaxMetaData writers; each entry holds one reference of its
// message, given up when a newer one replaces it or the hub closes), then
// the live stream. A metadata message arriving meanwhile is sent once, after
// the replay.
//
// # Access
//
// Browsers' origins are checked: by default only the hub's own origin
// (gorilla's same-origin check), or the listed ones (Options.AllowedOrigins),
// or any with "*"; a refused origin gets 403. When Options.Token is set every
// client must present it, as "Authorization: Bearer <token>" or, for
// browsers, "?token=<token>" (which then appears in access logs of proxies:
// prefer the header where possible); it is compared in constant time, and a
// missing or wrong token gets 401. Options.MaxClients bounds the clients:
// 503 beyond it, or, when concurrent handshakes overtook the check, a close
// with 1013 (try again later) right after the upgrade.
//
// # Ownership and goroutines
//
// Enqueue takes over one reference of the message. For each client whose
// selection matches it Retains one reference and puts the message on the
// client's queue, then gives up its own with Done(true). The client's writer
// goroutine writes the shared payload (gorilla copies up to WriteBufferSize
// bytes of it into its frame buffer and writes the rest straight from the
// payload) and calls Done(true) after the write. Nothing is allocated per
// message in steady state (TestEnqueueAllocs), except by gorilla for a
// payload larger than WriteBufferSize: its vectored write costs 2
// allocations per client (BenchmarkEnqueue10Clients). Whatever is queued when a
// client ends is settled at once, so no reference outlives a client.
// Enqueue may be called from several goroutines; it takes no lock shared by
// all clients (the client list is copy-on-write), only each matching
// client's own mutex for the moment of the offer, and the cache lock for
// metadata and status messages.
//
// Each client has two goroutines: its reader, which is the HTTP handler's
// goroutine (ServeHTTP returns when the client is gone), and its writer,
// which it starts and waits for. The writer alone writes data and pings
// (every Options.PingInterval); the reader reads subscriptions and pongs and
// moves the read deadline to two ping intervals ahead, so a client that
// vanished without closing its socket is dropped within about two intervals.
// Close(ctx) closes every client with 1001 (going away) and waits for both
// goroutines of each; the hub's WaitGroup counts the handlers.
//
// Lock order: Hub.metaMu, then a client's mu; Hub.mu (client registration)
// is never held with either.
package wssink
