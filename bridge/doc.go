// Package bridge is the gateway's pipeline: OPC UA notifications in,
// Part 14 JSON messages out to the sinks' queues.
//
// # What lives here
//
//   - WriterGroup (group.go): one config.WriterGroup — one subscription on
//     its endpoint's client.ManagedSession, its dataset writers and their
//     fields (one monitored item each), the last-value cache, the
//     acknowledgement tracker — and its lifecycle: NewWriterGroup builds
//     it, Start subscribes, Stop ends it; AddWriter, RemoveWriter and
//     ReplaceWriter apply a reload without disturbing the other writers.
//   - The plan (plan.go): what the group runs with — intervals, key frame
//     count, keep-alive, message size, shape, encodings, acknowledgement
//     bound, the per-field monitoring options — derived once by
//     NewWriterGroup from a configuration that bridge/config has defaulted
//     and validated. Config is the one place of the defaults and the
//     checks; the plan refuses a configuration without its defaults
//     (ErrNotDefaulted) and checks nothing config checks.
//   - The field table (fields.go): the slots, one per field in writer and
//     field order, so that client handle h is slot h − base; each writer a
//     contiguous range of them, its fields' names one string with an offset
//     per field; the cached values in the slots (cache.go) and a side table
//     for the values that do not fit.
//   - The hot path (hotpath.go), the metadata (metadata.go), the tracker
//     (tracker.go), the resume state (resume.go), the JSON writers the
//     groups share, borrowed per cycle (writerpool.go); Stats, LastValue and
//     LastValues (a page of the cache from a slot cursor) serve the API
//     (stats.go, values.go).
//   - ValueSinks (valuesink.go): outputs that take a writer's changed
//     values themselves, once per DataSetMessage's worth, after the cache
//     took them, and write a format of their own (the Sparkplug B node of
//     bridge/sink/sparkplug); WriterInfos, Endpoint and Connected tell them
//     the writers and the session's state. They are at-most-once: the
//     acknowledgement never waits for them.
//   - The sink contract and the outputs live in bridge/sink and below; the
//     configuration model, its defaults, validation and the expansion of
//     browse selections in bridge/config.
//
// # Data flow
//
// The subscription's OnDataChange handler gets one notification message
// (sequence number seq) as borrowed, pooled MonitoredItemNotifications. For
// each it finds the field by client handle: fields are created in writer
// and field order in one batched CreateMonitoredItems, so the field of
// handle h is fields[h − FirstHandle] (no map), and handle order is emission
// order. Per writer, the message becomes one DataSetMessage with the fields
// it carries, in field order; when it carries several values of one field
// (queue size > 1: sampling faster than publishing), the k-th value goes
// into the writer's k-th DataSetMessage of this message — never coalesced.
// Before each DataSetMessage the values it carries are copied into the
// cache; a delta frame is written from those notifications, and every
// KeyFrameCount-th data DataSetMessage of a writer is a key frame with all
// its fields from the cache. The cache is compact (cache.go: a slot holds
// an inline scalar's payload and its status and timestamps; strings,
// arrays and the like go in a side table only their fields use), and a
// field's name is an offset into one string per writer. The JSON goes into
// the group's
// NetworkMessageWriter (single shape: one NetworkMessage per
// DataSetMessage, Addr.Writer set; batched: one NetworkMessage per
// notification message, Addr.Writer ""), which splits at MaxMessageSize;
// each emitted piece becomes one pooled sink.Message (Token = seq, Tracker =
// the group's tracker when one is needed), retained once per extra queue
// and enqueued on every queue. Per-field messages (Options.FieldQueues) are
// one small message per value, Kind KindField, Addr.Field set.
//
// Nothing on this path allocates for numeric values in steady state
// (TestWriterGroupHotPathAllocs; BenchmarkWriterGroupHotPath).
//
// # Message content and choices
//
//   - DataSetMessages carry DataSetWriterId, DataSetWriterName,
//     SequenceNumber, MetaDataVersion, Timestamp, Status and MessageType; the
//     NetworkMessage header carries MessageId, PublisherId and
//     WriterGroupName. In the single shape Messages is an object (Part 14
//     SingleDataSetMessage), in the batched shape an array.
//   - SequenceNumber counts a writer's DataSetMessages from 1 and, with
//     marks (Options.MarksDir), goes on across restarts and takeovers,
//     never used twice; a ua-keepalive carries the next expected number
//     without taking it (Part 14 §7.2.4.5.6). Pieces of a split
//     DataSetMessage share its number (a key frame continues as
//     ua-deltaframe, see jsonenc).
//   - A key frame carries every data field. A field without a value yet is
//     written with StatusCode BadWaitingForInitialData, or with the server's
//     refusal of its monitored item (BadNodeIdUnknown …) when there was one
//     (in the Variant encoding a Bad status is the field's value, Part 14
//     §7.2.5.4), rather than omitted: a key frame is then complete, and the
//     status says why the value is missing. Delta frames omit such a field.
//   - Values the server sent with the Overflow info bit (its monitored
//     item's queue discarded values) are counted (GroupStats.Overflows) and
//     logged, at most every 10 s. With backfill: history (backfill.go) the
//     values lost upstream — an overflow, lost notification messages, a
//     subscription created anew, also after a restart (resume.Times keeps
//     each field's last delivered source timestamp) — are read from the
//     server's history for the Historizing fields and published after the
//     live ones, ordered by source timestamp, in NetworkMessages whose
//     MessageId starts with BackfillPrefix, each DataSetMessage's Timestamp
//     the values' source timestamp. FinishBackfill lets the reads under
//     way end before a stop detaches the session.
//   - The first DataSetMessage of a writer, and the first after the client
//     reported lost messages (OnGap), is a key frame. The samples format has
//     no frames: every value is a sample.
//   - Keep-alives: a writer that wrote nothing for KeepAlive gets a
//     ua-keepalive (a timer goroutine per group checks every publishing
//     interval). They carry no data and are not tracked.
//   - Field encodings: variant (the Variant; Compact keeps UaType, Verbose
//     collapses it unless the field's DataType is abstract), dataValue
//     (status and both timestamps), raw (VerboseEncoding with RawData: bare
//     values).
//   - ua-metadata (Kind KindMetaData, retained) is sent for every writer at
//     Start before any data, and again when it changes: a field's built-in
//     type learnt from its first value (MinorVersion bumped), a writer
//     replaced with other fields (MajorVersion bumped). Built-in types come
//     from the DataType attribute, read once at Start, where the gateway can
//     name it, otherwise from the first value. DataSetFieldIds are
//     name-based UUIDs, stable across restarts.
//   - The monitored items' defaults are config's (WriterGroup.ApplyDefaults):
//     they deliver every change the server reports, sampling at a tenth of
//     the publishing interval with a queue of two publishing intervals of
//     samples.
//   - Heartbeats (config Heartbeat, OPC Publisher's HeartbeatInterval): a
//     field that did not change for its interval is sent again, as a
//     ua-deltaframe of its writer with the last known value and its own
//     timestamps; a change is told by the cached value's timestamps, so the
//     hot path does nothing for it. It carries no server notification, so
//     nothing waits for its acknowledgement.
//   - Browse selections (config BrowseSelect) are expanded into fields
//     before NewWriterGroup, once the session is up, by
//     config.ExpandWriterGroup (bridge/gateway calls it); a WriterGroup
//     only takes listed fields.
//
// # Fencing
//
// Under scale-out a group has its lease's fence (Options.Fence,
// bridge/fence): beginCycle loads it once per publish cycle, and a cycle
// past it hands nothing to the queues (GroupStats.Fenced; a tracked
// sequence number is settled undelivered, so the next holder gets it from
// the server). The messages carry the fence for the queues' own check, and
// every MessageId the holding's epoch (EpochPrefix).
//
// # Delivery and acknowledgement
//
// The gateway (bridge/gateway) gives a group, besides the WebSocket hub,
// one queue by default: its stream of the store-and-forward log
// (bridge/storelog), an at-least-once queue that settles a message once it
// is committed; the sinks read the log. What follows holds for any queues.
//
// With at least one AtLeastOnce queue (of Queues and FieldQueues) the
// subscription runs in client.AckManual with MaxUnacked; otherwise it
// acknowledges on return and messages carry no Tracker. The tracker counts,
// per sequence number, the messages not yet settled; it acknowledges seq
// upstream (Subscription.Ack) when the count is 0, the client said every
// handler call for seq returned (OnMessageDone), and every message was
// delivered. A message settled undelivered leaves seq unacknowledged: the
// server keeps it for a restart's recovery to republish, and it counts
// toward MaxUnacked.
//
// The handler never blocks on a broker, except through a Block queue that
// is full: Enqueue then waits, and the handler, the session's dispatch
// goroutine and with them every subscription of the session wait too.
// MaxUnacked is meant to stop Publish requests before that happens: keep it
// (times the messages per notification message) below the queues' sizes, so
// that backpressure reaches the server as withheld acknowledgements rather
// than as a blocked dispatch.
//
// # Restart without loss (resume.go)
//
// With Options.Resume (a resume.Store: bridge/resume's state files, or the
// leases of bridge/lease under scale-out) a group keeps its subscription's
// client.ResumeState and a fingerprint of its items, saved after Start and
// every ResumeInterval when it changed (never per notification). The next Start with the same items
// resumes: the client transfers the subscription and republishes what was
// not acknowledged. Those messages are counted (GroupStats.Redelivered) and
// their NetworkMessages carry a MessageId starting with RedeliveredPrefix
// (possible duplicates). A subscription that is gone (or a server that
// restarted, told by its StartTime) is created anew and the gap reported
// (OnGap; the next DataSetMessages are key frames).
//
// The marks (resume.Marks, a file mapped into memory: a few stores per
// notification message, no system call) say exactly where the last run
// stopped: each writer's next SequenceNumber, the last notification
// message handed to the queues, and where each writer's DataSetMessages of
// the recent messages began. What the server republishes up to that
// message is a replay: it goes to the at-least-once queues only (the
// at-most-once sinks had it), marked redelivered, with the SequenceNumbers
// it had the first time; what comes after it goes to every queue. A shared
// Store (scale-out) carries, per writer, a SequenceNumber beyond any the
// holder can still use, for a takeover by another replica.
//
// # Threading, ownership and lock order
//
//   - The handlers (OnDataChange, OnEvent, OnGap) run on the session's
//     dispatch goroutine and hold g.mu for a whole notification message; the
//     keep-alive goroutine and reconfiguration take g.mu too. g.mu guards the
//     writers, the JSON writer and the emission state.
//   - g.vmu guards the fields (cache, statuses) against LastValue readers;
//     the handler takes it only while copying values in; the node index of
//     LastValues is built a chunk of slots per hold of its read lock
//     (idxMu → vmu). Stats reads atomics
//     and a snapshot of the writers, so the API never waits for a blocked
//     sink.
//   - Lock order: opMu (Start, AddWriter, RemoveWriter, Stop) → mu → vmu;
//     the tracker's lock is a leaf, and Subscription.Ack is called outside
//     it.
//   - Notifications are borrowed: the cache copies what it keeps (numeric
//     scalars by value, strings cloned, other values deep-copied); a cached
//     value is replaced, never modified, so a DataValue copied out by
//     LastValue stays valid. The side table (g.ext) may be reallocated by the
//     handler, under g.vmu: readers index it under g.vmu too.
//   - A sink.Message is the queues' once enqueued (see bridge/sink); the
//     group keeps nothing of it.
//   - Stop waits for the keep-alive goroutine, deletes the subscription and
//     releases the JSON writer; handlers that run after it return at once.
package bridge
