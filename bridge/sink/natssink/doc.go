// Package natssink is the NATS output (nats-io/nats.go): core NATS
// publishing (at-most-once) or JetStream publishing with acknowledgements
// (at-least-once), on subjects mirroring the Part 14 topic tree with '.':
//
//	data      opcua.json.data.{PublisherId}.{WriterGroup}.{DataSetWriter}   (batched: without the last token)
//	metadata  opcua.json.metadata.{PublisherId}.{WriterGroup}.{DataSetWriter}
//	status    opcua.json.status.{PublisherId}
//	field     opcua.json.field.{PublisherId}.{WriterGroup}.{DataSetWriter}.{Field}
//
// '.', ' ', '*', '>' and control characters in names become '_', so a name
// is always one subject token. With JetStream a stream can be created (or
// updated) at connect, capturing opcua.json.> by default, on file storage.
//
// # Delivery and reconnection
//
// The sink switches nats.go's own reconnection off: a dropped connection is
// closed, Publish returns sink.ErrNotConnected, and the sink.Output
// reconnects with its backoff while its bounded queue and policy hold the
// messages (instead of nats.go's reconnect buffer, which would hide the
// outage from the queue policy and the metrics). Every Connect makes a new
// connection. Core publishes are confirmed when nats.go took them (copied
// into its write buffer). JetStream publishes go out with PublishAsync and
// are confirmed by the stream's ack; an ack that does not come within
// AckTimeout, or a connection lost first, fails the publish and the
// at-least-once Output resends it in order: a message whose ack was lost is
// stored twice (the stream's duplicate window would need a Nats-Msg-Id
// header, a map per message; not done).
//
// Credentials: user and password, token, a creds file (JWT + seed) or an
// nkey seed file; a refusal makes Connect fail with an error wrapping
// sink.ErrUnauthorized.
//
// # Concurrency and ownership
//
// Publish is called by one Output goroutine. JetStream confirmations come
// from one confirmer goroutine per sink, which waits for the ack futures in
// publish order (started by New, ended by Close, which confirms everything
// pending first). nats.go copies the payload into its write buffer during
// Publish; a JetStream future may publish it again (no-responders retry)
// until it resolves, and the message is confirmed only after that or after
// the connection was closed. nats.go allocates per JetStream publish; core
// publishing allocates nothing in this package.
package natssink
