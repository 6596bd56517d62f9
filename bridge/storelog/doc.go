// Package storelog is the gateway's store-and-forward log: a local durable
// log between the writer groups and the sinks. A writer group appends its
// encoded messages to a stream of its own, and its OPC UA notifications are
// acknowledged upstream once their messages are in the log; each sink reads
// every stream at its own pace through a durable cursor of its own. The
// upstream server's queues are then needed only for the milliseconds before
// the append, a sink that is down or slow holds only itself, and a restart
// continues every sink where it stopped.
//
// # The engine: bbolt
//
// The log is kept in one bbolt file (go.etcd.io/bbolt, etcd's B+tree
// store: copy-on-write pages, one writer and concurrent readers, crash-safe
// commits), not in a file format of our own. Two engines were measured at
// the log's work (engine_test.go; BENCHMARKS.md has the figures): one
// message appended, read back once through a cursor, the cursor moved and
// the head removed, at 1, 16 and 128 KiB (the gateway's messages range from
// a few hundred bytes to maxMessageSize, 256 KiB; the end-to-end bench's
// are ~100 KiB), in commits of 16:
//
//   - the JetStream file store of the nats-server the gateway embeds. It is
//     not exported (newFileStore is internal to the server package): the
//     only way in is an in-process server and the client protocol over
//     nats.go's in-process connection, so every message is framed, parsed,
//     stored with its per-message hash, delivered to a pull consumer and
//     acknowledged. It costs 35 µs of CPU per 1 KiB message, 92 µs at
//     16 KiB and 380–500 µs at 128 KiB (3–4 µs per KiB), and it has no
//     fsync per batch: sync_always fsyncs every message (140–600 µs), the
//     default every two minutes.
//   - bbolt, with a commit (one fdatasync) per batch: 11–14 µs of CPU per
//     1 KiB message, 32–44 µs at 16 KiB, 150–163 µs at 128 KiB (~1.2 µs per
//     KiB), about a third of JetStream's cost while fsyncing every batch,
//     which JetStream cannot. Its writes are one page-aligned copy of the
//     value; a read is a copy out of its memory map.
//
// JetStream's retention limits and durable consumers are what this package
// adds on top of bbolt, in a few hundred lines: sequence-numbered records,
// cursors, byte and age bounds.
//
// bbolt allocates the pages of a value larger than a page at every commit:
// logging 100 KiB messages whole made 1.2–1.5 bytes of garbage per byte
// logged (BenchmarkLog), which the gateway's low GOGC turns into collector
// work. Records are therefore stored in parts of 7.5 KiB in pages of
// 32 KiB filled whole, which bbolt writes from its page pool: about 0.1
// byte of garbage per byte logged (what remains is per commit and per
// node), at about the CPU of whole values. Each page is written only as
// far as it is used (pagewrite.go): a commit writes 1.1–1.4 bytes to the
// file per byte logged.
//
// # Layout
//
// One file, <dir>/log.db. A bucket per stream holds its records keyed by
// their big-endian sequence number (from 1, never reused) and part number;
// a record is a small header (kind, flags, append time, the stream's
// cumulative payload bytes before it, its length, the writer and field
// names) and the message's payload. A bucket of cursors holds, per stream
// and consumer, the last sequence number settled (acked) and the last one
// claimed for handing to the sink (claimed ≥ acked); a bucket of stream
// states holds each stream's last sequence number and cumulative bytes,
// which outlive its records.
//
// # Append: group commit
//
// Stream implements sink.Queue: the writer group enqueues its messages as
// it would to an Output. One goroutine, the committer, takes what all the
// streams have pending and writes it in one transaction with the cursor
// moves (the new records claimed for their readers) and the head deletions
// since the last one, commits it (one fdatasync, or none with
// Options.NoSync), then settles each message as delivered: that is what
// lets the group acknowledge upstream. Commits start at least
// Options.CommitInterval apart, and while one runs the next batch gathers,
// so the commit rate adapts to the load. Woken by a first message, the
// committer waits (up to CommitInterval) until its producer handed the
// notification message over whole (sink.TokenWatcher), so that a publish
// response's messages are one commit, not the first alone and the rest one
// interval later. A commit that would only move cursors (records settled)
// or delete settled records is not made on its own: those ride on the next
// append or claim, or the idle save (1 s after the last commit), or are
// made at once when the log is over half full. The committer is woken by
// a stream's first pending message (not each), by Handed, by a claim, and
// by a settlement only when no idle save is armed; an idle log arms no
// timer at all (an age bound keeps a 1 s scan while records are held). At
// an ordinary rate (node-opcua's 10,000 changes/s, ~11 responses/s) that
// is one commit per
// response, where it was 2.6.
//
// A notification the OPC UA server republishes after a restart (its
// messages marked redelivered by bridge) is not appended again when the
// log holds it whole: the stream keeps the last token (sequence number)
// whose messages are all committed, told by sink.TokenWatcher. The pending messages are bounded (count and bytes); a full log or
// a full pending queue makes Enqueue wait (policy block), which reaches
// the OPC UA server as withheld acknowledgements, as a Block sink queue
// does; with drop-oldest the oldest records are removed instead, counted
// per stream and logged.
//
// # Keep-alives are not logged
//
// A message marked sink.Message.Live (a NetworkMessage of ua-keepalive
// DataSetMessages) says only that the publisher is alive now: delivered
// after an outage or a restart it says nothing true, and logging it would
// cost a commit and an fdatasync of its own every keep-alive period of an
// idle group. Enqueue hands it to the readers whose consumers have had
// every record before it (nothing pending or being committed, the reader
// has handed the last record) and drops it for the others, which get the
// records instead. The reader's goroutine hands it after the records it
// is handing, and drops it if a record came after it meanwhile.
//
// # Read: a cursor per consumer
//
// Reader feeds one sink.Queue (a sink's Output) from one stream: records
// appended since the committer last looked are taken from the stream's
// in-memory tail, older ones from the file. Each record becomes a message
// of its own (Token = its sequence number, Tracker = the Reader), so the
// Output's settlement moves this consumer's cursor only: an at-least-once
// Output settles on the broker's confirmation, an at-most-once one when it
// has written. The Reader waits in the Output's Enqueue when the sink's
// queue is full: only it waits.
//
// A Reader hands out records only up to its claim, which the committer has
// made durable first; it claims at most ClaimWindow records past what its
// queue settled, which also bounds what it has out. After a restart an
// at-least-once consumer resumes after its acked cursor and marks what it
// had claimed but not settled as redelivered (the NetworkMessage's
// MessageId gets RedeliveredPrefix, as bridge marks a republished
// notification); an at-most-once consumer resumes after its claim, so
// nothing reaches it twice (what it had been handed and not yet written at
// a crash, at most ClaimWindow messages, is not sent: counted as
// abandoned, logged). Exactly once across a crash is not to be had from a
// broker that cannot drop a copy: the claim chooses the side.
//
// The readers are made one by one after Open: for loadGrace (30 s) after
// it, the durable cursor of a consumer whose reader is not made yet keeps
// the records after it, though the others' readers passed them; a
// consumer that does not come back by then (a sink removed) holds
// nothing.
//
// A pull reader (NewPullReader) has no queue: its owner takes the records
// when it chooses, on its own goroutine (Pull), each moving the durable
// cursor once taken (at-least-once: a crash before the next commit hands
// the last ones out again). A Sparkplug node uses one to send what it held
// for its primary host after its next birth.
//
// Messages a sink refuses for good are the Output's (sink.DeadLetters):
// DeadLetterFile keeps them, and they settle delivered, moving the cursor.
//
// Records settled by every consumer of their stream are deleted by the
// committer. Bounds: MaxBytes over the whole log, MaxAge per record. A
// give-way stream (StreamOptions.GiveWay) yields when the log is full,
// whatever the policy: it never waits, the other streams count its records
// as room, and its oldest records are dropped (counted) to keep the log
// within MaxBytes.
//
// # Using it
//
//	l, err := storelog.Open(storelog.Options{Dir: dir, MaxBytes: 1 << 30})
//	s, err := l.Stream("line1")                 // a writer group's stream
//	s.Enqueue(m)                                 // append (sink.Queue)
//	r, err := s.NewReader("broker", q, storelog.ReaderOptions{})
//	r.Start()                                    // q gets the records in order
//	// q settles each message (m.Done): the reader's cursor moves
//	r.Close(ctx); l.Close()                      // the last commit saves the cursors
//
// Data that waits for a consumer of its own, and must never hold the
// writer groups up, goes to a give-way stream read by a pull reader:
//
//	s, err := l.OpenStream("sparkplug/scada", storelog.StreamOptions{GiveWay: true})
//	r, err := s.NewPullReader("scada")
//	s.Enqueue(m)                                 // never waits for room
//	n, err := r.Pull(func(m *sink.Message) bool { return send(m) })
//
// A consumer is any sink.Queue: while it does not settle what it was given
// (a Sparkplug host whose primary host is offline, a broker that is down),
// its reader waits and the log holds its backlog, within MaxBytes and
// MaxAge; the other readers go on. Stats gives the backlog per reader.
//
// # Ownership and threading
//
// Enqueue takes over one reference of the message, as sink.Queue says; the
// stream keeps it until its commit, then settles it (Done(true)) and keeps
// a pooled copy in its tail for the Readers. A Reader owns the messages it
// makes until it hands them to its queue. Lock order: Log.mu → stream.mu →
// Reader.mu; none is held across a commit's I/O, an Enqueue into a sink's
// queue or a Done.
package storelog
