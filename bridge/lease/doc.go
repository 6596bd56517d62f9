// Package lease shares units of work (the gateway's writer groups) among
// replicas: each unit is leased by one replica at a time through a NATS
// JetStream key-value bucket (create / update by revision; JetStream's Raft
// is the only arbiter).
//
//   - core.go: the decisions, with no I/O — acquisition, renewal every
//     TTL/3, fencing (a holder unrenewed for 2/3 of the TTL stops serving,
//     by its last write + TTL, before anyone else may take the lease, which
//     needs TTL + TTL/5 of it unchanged), balance (ceil(units / live
//     replicas) each, one release per TTL/3) and duplicate replica ids. A
//     state machine fed with the observed bucket, its writes' answers and
//     the clock; tested under a fake clock.
//   - kv.go: KV, the JetStream I/O around the core (the loop, the watcher,
//     the fence timer) and the Handler calls. KV is also the resume.Store of
//     the units it holds: the resume record travels in the lease's value, so
//     a takeover resumes the upstream subscription exactly as a restart
//     does; with it, when the holder saved it (SaveSession), the state of
//     the unit's OPC UA session, which the next holder activates again. The
//     protocol is described at the top of kv.go. KV.Fence is the
//     publishing deadline of a holding (bridge/fence), which the core
//     opens at acquisition, moves with each renewal and closes when the
//     holding ends; a process whose replica id another live one had first
//     refuses to serve (KVConfig.OnRefused).
//   - bucket.go: opening the bucket, the nats-server versions refused, key
//     names.
//
// Ownership and threading: the core is called under KV.mu, a leaf lock.
// The Handler is called without it, from a goroutine per unit with calls
// pending, in order (a unit's Halt after its Serve), never from the loop
// that renews and fences: a Serve that waits delays that unit only. Serve's
// context is done once the holding ends; Halt must return by its context's
// deadline. A store keeps nothing of the records it is given that it could
// modify (resume.Store).
package lease
