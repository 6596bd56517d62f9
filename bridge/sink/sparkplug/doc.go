// Package sparkplug is the Sparkplug B 3.0 mode of an MQTT sink: the gateway
// as a Sparkplug Edge Node whose Devices are its dataset writers (or its
// endpoints).
//
// # What lives here
//
//   - Node (node.go): the sink.Sink an Output feeds, and the Sparkplug
//     session it runs itself (session.go): an MQTT connection per bdSeq
//     with NDEATH as its will, the subscriptions to NCMD, DCMD and the
//     primary host's STATE, NBIRTH and the DBIRTHs, the data, NDEATH and
//     a clean disconnect at Close. Stats is its state for the read model.
//   - The devices (devices.go): made from the running writer groups
//     (Config.Source), before any connection too (what the feeds encode
//     while the broker is away is held), kept for the node's life, each with its metrics
//     (names, aliases, datatypes) made anew at its births from the groups'
//     last values.
//   - The feeds (feed.go): one bridge.ValueSink per writer group, which
//     writes each batch of a writer's changed values as DDATA into a pooled
//     sink.Message for the node's Output.
//   - The store (store.go, logstore.go): what the node holds while it is
//     not online, behind a Store interface: MemStore, in memory, bounded
//     by bytes (the oldest dropped and counted); LogStore, a stream of the
//     store-and-forward log (bridge/storelog), where it outlives the
//     process, bounded by the log's maxBytes and maxAge.
//   - Commands (command.go): NCMD's rebirth request; DCMD's metrics as
//     writes a Commander authorises and carries out (the gateway's: the
//     command engine of bridge/command; none: every write refused); the
//     primary host's STATE.
//   - The encoding (encode.go, datatype.go) and the generated code of
//     sparkplug_b.proto (sparkplugpb), which decodes the commands.
//
// # Encoding
//
// Payloads are Sparkplug B protobuf (sparkplug_b.proto of Eclipse Tahu, its
// generated code in sparkplugpb), written with protowire straight into
// reused buffers: no message structs, nothing allocated for the numeric,
// Boolean, String, DateTime, StatusCode and Guid values and their arrays
// (TestFeedAllocs; BenchmarkEncode beside the Part 14 encoder). OPC UA
// built-in types map to Sparkplug datatypes as datatype.go's table says; a
// Bad status makes a metric is_null with the Quality (0) and StatusCode
// properties, an Uncertain one keeps its value and adds them (Quality 192);
// a metric's timestamp is its value's source timestamp (else the server's).
// A payload leaves room in front for its seq: the feeds encode on the
// writer groups' dispatch paths, but seq counts the messages of the MQTT
// session in the order the node publishes them, so the node writes it into
// the room when it publishes. The message is the node's alone (its feeds
// enqueue only on its Output), which makes writing into its payload safe.
//
// # The session
//
// Every connection takes the next bdSeq (0 first, 255 followed by 0) for
// its will, NDEATH (QoS 1, not retained). Once subscribed, and — with a
// primary host — once the host's STATE says online, the node publishes
// NBIRTH (seq 0), a DBIRTH per device whose writers' sessions are up, then
// what the store held; from then on every message takes the next seq (0
// after 255). The loop then births and kills devices as their sessions come
// and go (DDEATH when a session is lost), births a device again when its
// writers or its values' types change, honours rebirth requests (NBIRTH
// and DBIRTHs, same bdSeq), and leaves the broker — NDEATH first — when
// the primary host goes offline, to connect again and wait. A connection
// lost ends the session; the loop connects again with backoff.
//
// Data is QoS 0 (3.0 §6.4): at-most-once. While the node is not online
// Publish puts the data into the store and confirms it; after the next
// births the store is sent in order, and until it is, new data joins it
// behind, so that the host gets every metric's values in order. A data
// message made before its device's latest DBIRTH (held, or queued across
// a rebirth) goes with the metrics that are not newer than the values
// that DBIRTH carried marked is_historical, so that old values never
// overwrite current ones at the host. Values for a device that died are
// left out (its next DBIRTH carries the current ones); so are held
// messages whose device's metrics changed meanwhile (counted as stale).
// Held data of a device the node does not know yet or whose sessions are
// not up yet at the birth (the gateway just started) waits for its DBIRTH
// — one that knows its metrics' types — up to Config.DeviceWait, then is
// left out (stale).
//
// # Held data across a restart
//
// Aliases, device indexes and metric versions belong to the node's
// process: the next one gives them out anew, in the order it meets the
// metrics, and its bdSeq starts at 0 again. A MemStore's records carry
// them (Record.Token) and end with the process. A durable store's records
// are named instead (appendNamed): the device by its id, each metric by
// its name and datatype, its timestamp, value and properties as encoded.
// The process that sends them (after its NBIRTH and the device's DBIRTH)
// gives each metric its own alias by name (appendAliased), since a DDATA
// of a node whose births carry aliases must use them (3.0
// payloads-alias-data-cmd-requirement), and marks historical what is not
// newer than the DBIRTH's values. A metric the device no longer has under
// that name and datatype (another configuration) is left out, counted as
// a stale metric: its value would not mean what it meant. Sending moves
// the LogStore's durable cursor past each record: a crash in the middle
// of a drain sends again, after the next birth, what went out since the
// log's last commit (historical values at the same timestamps).
//
// # Concurrency, ownership and lock order
//
// pubMu is the session lock: every publish, the births and deaths, and
// the device table's changes happen under it, so that seq follows the
// order of publishing. Publish (the Output's goroutine) and the session
// loop take it; paho's goroutines (commands, STATE, a lost connection) only
// set flags and wake the loop. Under pubMu the node reads the groups' last
// values (their cache lock) and their sessions' state, never a group's main
// lock: a group blocked on a full Block queue of the node holds that lock
// while it waits for Publish, which waits for pubMu. mu guards the primary
// host's state and the last error (pubMu → mu). The feeds read the devices
// and their metrics through atomic pointers (replaced, never changed) and
// keep what they found per writer, so that they take no lock; Stats reads
// atomics and the store's counters, and never waits for the session. A
// LogStore's Put hands the record to the log's committer without waiting
// for its commit (its stream gives way: it never waits for room, only, a
// commit's time, while the stream's pending messages are at their bound);
// its Drain, under pubMu, waits for the records put to be committed
// (bounded) and reads them on the session's goroutine.
//
// # Conformance
//
// The Eclipse Sparkplug TCK is a HiveMQ extension driven from a browser,
// not something the package registries serve; the tests check the
// specification's normative statements listed in
// bridge/gateway/sparkplug_e2e_test.go with a host of their own (decoding
// with sparkplugpb) through mosquitto, against the simulation server.
package sparkplug
