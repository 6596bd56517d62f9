// Package server is the simulation OPC UA server of the gateway: the embedded
// upstream of the demo, the peer of interop tests and the load generator of
// benchmarks. It serves the binary opc.tcp protocol on the secure channels of
// package uasc, with every security policy and mode the client supports
// (DefaultPolicies; AllPolicies adds the deprecated ones).
//
//	srv, err := server.New(&server.Config{Address: "127.0.0.1:0", Users: map[string]string{"user1": "password1"}})
//	…
//	err = srv.Start()  // listening: srv.URL(), srv.Endpoints()
//	defer srv.Close()
//
// What lives here:
//
//   - config.go: Config and its defaults, Validate;
//   - errors.go: the package's sentinel errors;
//   - server.go: Server (New, Start, Close, Stats, SetValue), the accept loop,
//     the bounded request queue and its workers: a full queue answers
//     Bad_TcpServerTooBusy, the standard "too busy" status code;
//   - endpoints.go: endpoints and user token policies, GetEndpoints,
//     FindServers, the Server object's essentials (ServerStatus with State and
//     CurrentTime, NamespaceArray, ServerCapabilities with OperationLimits
//     (left out with HideOperationLimits, still enforced), GetMonitoredItems);
//   - session.go: CreateSession, ActivateSession (anonymous, user name, X.509;
//     on a new channel, which moves the session there with its subscriptions,
//     for the same client certificate and user only, Part 4 §5.6.3),
//     CloseSession, session timeouts and MaxSessionCount;
//   - services.go: Browse, BrowseNext, Read, Write,
//     TranslateBrowsePathsToNodeIds, RegisterNodes, Call and the simulated
//     methods; history.go: HistoryRead of the generated variables' raw
//     values (SimConfig.History: computed from the generators, nothing
//     stored; continuation points per session, bounded);
//   - subscription.go, publish.go: subscriptions, the retransmission queue,
//     Republish, TransferSubscriptions (to a session of the same user; an
//     anonymous user's only between sessions of one client application on
//     signed channels, Part 4 §5.13.7, as node-opcua has it), and the
//     publishing sweep: one goroutine
//     serves every session (fanned out over the cores from 256 sessions on),
//     waking when the next session falls due (at most every
//     PublishResolution, at least 1 ms apart) or when one changed;
//     a Publish request is handled on its channel's reader, without a worker,
//     and parks in its session until there is something to send; each
//     channel's Publish responses are written by a sender of its own, so that
//     neither the sweep nor a worker waits for a slow client (one that lets
//     256 responses pile up is cut off);
//   - monitor.go: the monitored item;
//     monitoreditems.go: CreateMonitoredItems, ModifyMonitoredItems,
//     SetMonitoringMode, DeleteMonitoredItems, GetMonitoredItems, and the
//     items' parameters and registration with the sampler;
//     sampling.go: the sampling sweep: one goroutine per sampling rate (on a
//     fixed ladder of rates), not one per item; a sweep of 8192 items or
//     more is split by subscription over GOMAXPROCS goroutines;
//     filter.go: DataChangeFilter (trigger, absolute and percent deadband);
//     queue.go: the items' queues with their discard policies;
//     notification.go: collecting queued notifications into a message within
//     the response size the client accepts (notification sizing);
//   - events.go: the simulated alarm source and EventFilter evaluation;
//   - nodes.go, sim.go: the address space: standard folders, types and
//     reference types, and the configurable simulation (SimConfig): Demo with
//     named nodes of every built-in type, arrays and matrices, bad, uncertain
//     and flapping qualities, methods; Alarms; Load with folders × variables
//     moved by counter, sine, random and step generators (every folder of a
//     rate ticking at the same instant, or staggered over the period).
//
// # Cheap sampling
//
// A generated value is a function of its tick, the number of generator
// periods since the server started. An item copies its node's generator, so a
// sample reads one object; an unchanged tick costs a division (shared by the
// items of a rate); and the queue of a generated item holds ticks (24 bytes),
// not DataValues: the value is made when the notification is sent, straight
// into the pooled ua.DataChangeNotification of the response. Written values
// are immutable DataValues compared by pointer.
//
// # Ownership
//
// A notification message that was sent stays in its subscription's
// retransmission queue until the client acknowledges it or it is evicted
// (MaxRetransmissionQueue); it holds pooled ua.DataChangeNotification and
// ua.EventNotificationList objects, released then. A message being sent is
// referenced by its sender as well (retained.refs), so that an
// acknowledgement arriving while it is written does not release it under the
// writer.
//
// Values in the address space are immutable once published: a write stores a
// new DataValue, and samples keep references to the arrays and strings of the
// values they copied.
//
// # Lock order
//
// session.mu → subscription.mu, session.mu → Server.subsMu,
// rateGroup.mu → subscription.mu and eventSource.mu → subscription.mu.
// Server.sessMu, Server.chMu and channel.mu are held alone. No code takes a
// lock on the left while holding one on its right. Responses are sent after
// the locks are released.
package server
