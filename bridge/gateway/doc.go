// Package gateway is the gateway as a library: one configuration
// (bridge/config) brought to life, with the lifecycle the gateway command
// runs and a program embedding it uses the same way.
//
//	cfg, _, err := config.Load("gateway.yaml") // defaults applied, validated
//	gw, err := gateway.New(cfg, gateway.Options{Logger: log})
//	err = gw.Start(ctx)           // embedded parts, sinks, HTTP, writer groups
//	err = gw.Watch(ctx, path)     // optional: apply the file's changes
//	rep, err := gw.Apply(ctx, next) // a reload by difference
//	err = gw.Stop(ctx)            // bounded by ctx, in every state
//
// # What lives here
//
//   - Gateway (gateway.go): the start order — embedded simulation server,
//     MQTT broker and NATS server; one sink.Output per sink and the
//     WebSocket hub; the HTTP listener (api.Server, with the Gateway as its
//     api.Backend, backend.go); the client pool; the writer groups.
//   - The store-and-forward log (store.go, bridge/storelog): each writer
//     group's stream is its at-least-once queue, every sink's Output is fed
//     by a reader per stream with the sink's cursor; streams outlive their
//     groups and drain. The dead-letter file takes what brokers refuse.
//   - The Sparkplug B nodes (MQTT sinks in sparkplug mode): each is the sink
//     of an Output like the others, but takes no Part 14 messages: every
//     writer group gets a feed of it (bridge.Options.ValueSinks), and the
//     node reads the running groups (runningGroups) for its devices and
//     births; its DCMD writes go through the command engine
//     (sparkplug.go), or Options.SparkplugCommands. With the log on, what
//     it holds for its primary host is in the log (sparkplug.LogStore, a
//     stream of its own), else in memory.
//   - The writer groups' lifecycle (groups.go) and the sessions they share
//     (sessions.go: an endpoint's groups share its sessions, reference
//     counted; under scale-out each group has its own). Each session keeps
//     its state in <stateDir>/sessions (mode 0600, written by the session's
//     worker at every activation): the next run activates the same session
//     again on a new channel, its subscriptions still there, before it
//     would create one and transfer them.
//   - Reload by difference (apply.go): Apply, Retry, Watch and the Report of
//     what was applied and what failed, all-or-nothing per writer group.
//   - Scale-out (scaleout.go): the lease.Handler that starts and detaches
//     the groups this replica holds, each with its holding's fence; Fatal
//     delivers the refusal of a duplicate replica id.
//   - The PKI seed (gateway.pkiSeed) imported into every endpoint's store at
//     Start.
//   - The read model (readmodel.go, backend.go): stats, status, last values.
//   - Memory policy (memory.go): the setup memory given back, the pools'
//     periodic trim, GOGC once the groups are set up, the container's memory
//     limit.
//   - Stop (stop.go): groups suspended (their sessions and subscriptions
//     kept at the server for a restart to activate again; under scale-out
//     detached: the session closed, the subscriptions kept for the replica
//     that takes them over) or stopped, the log's readers stopped while the
//     sinks drain, the log closed (its cursors saved), sessions closed.
//
// # Concurrency: the control plane never waits on the data plane
//
// gw.mu guards the running state (configuration, groups, sessions) and is
// held only for memory operations: never across an OPC UA round trip, a
// sink's queue, a file or another lock's wait. After every change the
// running state is published as a view (an atomic pointer to an immutable
// copy); readers — the API's reads, metrics, readiness, the lease handler —
// load it and take no lock a reload or the data plane can hold. Applies
// (the API's, the watcher's, Retry) queue on gw.applySem one at a time,
// within their context; a reload computes the difference, does the OPC UA
// work without gw.mu and swaps the result in. The lease loop (bridge/lease)
// calls Serve and Halt on goroutines of its own and renews on its own
// timer; Serve only registers the group, whose session and subscription
// start in the background.
//
// Lock order: gw.applySem, then gw.mu, then whatever bridge and client take.
//
// # Ownership
//
// The Gateway owns every part it starts and stops them in reverse order.
// The configuration given to New becomes its own (the caller must not change
// it); Apply works on a copy of its argument. Config returns the running
// configuration, which is replaced, never changed.
// Stop returns soon after its context ends: a part still waiting then (a
// handler blocked on a dead broker's full queue, a server that does not
// answer) is left to end on its own, and the error says so.
package gateway
