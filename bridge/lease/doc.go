// Package lease keeps what a writer group needs to resume its subscription
// after a restart or on another replica (bridge.ResumeStore), and shares the
// writer groups among replicas.
//
//   - FileStore (file.go): one JSON file per writer group in the state
//     directory, written atomically (temporary file, fsync, rename).
//   - KV (kv.go): scale-out. Each writer group ("unit") is leased by one
//     replica at a time through a NATS JetStream key-value bucket (create /
//     update by revision; JetStream's Raft is the only arbiter), renewed
//     every TTL/3; a holder that cannot renew stops serving (Handler.Halt)
//     after 2/3 of the TTL, before anyone else may take the lease; the
//     replicas balance the units (ceil(units / live replicas) each, one
//     release per TTL/3). KV is also the ResumeStore of the units it holds:
//     the resume record travels in the lease's value, so a takeover resumes
//     the upstream subscription exactly as a restart does. The protocol is
//     described at the top of kv.go.
//
// Ownership: a store keeps nothing of the records it is given (it copies
// them). KV calls its Handler without holding its lock; the Handler must not
// block Serve, and Halt must return by its context's deadline.
package lease
