// Package mqttsink is the MQTT output (eclipse/paho.mqtt.golang, MQTT
// 3.1.1): the Part 14 topic tree by default, QoS 0, 1 or 2, clean or
// persistent sessions, TLS, username/password, the publisher's ua-status as
// retained status and last will.
//
// # Topics
//
// Topics come from templates (sink.TopicTemplates) with the placeholders
// {PublisherId} {WriterGroup} {DataSetWriter} {Field}; by default
//
//	data      opcua/json/data/{PublisherId}/{WriterGroup}/{DataSetWriter}   (batched: without the last level)
//	metadata  opcua/json/metadata/{PublisherId}/{WriterGroup}/{DataSetWriter}   retained
//	status    opcua/json/status/{PublisherId}   retained, and the last will
//	field     {PublisherId}/{WriterGroup}/{DataSetWriter}/{Field}   retained per Message.Retained
//
// '+', '#', NUL and other control characters in names become '_' (they
// are not allowed in a topic name, or a broker may refuse them); '/' is
// kept, so names may add levels. Rendered topics are cached
// (sink.Topics): the steady state renders nothing.
//
// # Status and last will
//
// With a PublisherID, every connection registers a retained ua-status will
// (IsCyclic false, Status Error, Part 14 §7.3.4.7.7), publishes a retained
// ua-status Operational once connected, and Close publishes Disabled before
// disconnecting gracefully (a graceful disconnect discards the will). The
// broker publishes the will when the connection dies without a DISCONNECT.
//
// # Delivery and reconnection
//
// QoS 0 is at-most-once (confirmed once written to the socket); QoS 1 and 2
// are at-least-once, confirmed on PUBACK / PUBCOMP. The sink does not use
// paho's auto-reconnect: reconnection is the sink.Output's, with its backoff
// and its queue policy while the broker is away. Every Connect builds a new
// paho client with an empty in-memory store, so paho never resends on its
// own: when a connection drops, every unconfirmed publish is failed with
// sink.ErrNotConnected and the at-least-once Output resends them in order
// after reconnecting. A message the broker received but whose PUBACK was
// lost with the connection is therefore delivered twice: at-least-once, not
// exactly-once, also at QoS 2. (Letting paho resend from its store as well
// would send those twice more, and keeping our payload buffer alive for a
// paho resend we no longer wait for is unsafe.) For the same reason QoS 2
// needs a clean session: a persistent session's broker still holds the QoS 2
// packet ids of the dropped connection and may take a fresh message with a
// reused id for a duplicate, and drop it.
//
// A publish not confirmed within AckTimeout ends the connection (a broker
// that does not acknowledge is broken, and the connection must end before
// the payload can be released) and fails like a dropped connection.
//
// Refused credentials (CONNACK 4 or 5) make Connect fail with an error that
// wraps sink.ErrUnauthorized; the Output retries with backoff and shows it.
//
// # Concurrency and ownership
//
// Publish is called by one Output goroutine. Confirmations come from one
// confirmer goroutine per sink, which waits for the tokens in publish order
// (MQTT brokers acknowledge in order) and calls Acker.Confirmed; it is
// started by New and ended by Close, which confirms everything pending
// before returning. The payload is handed to paho without a copy; it stays
// valid until the message is confirmed, after paho's writers for that
// connection have stopped when the connection failed. paho allocates per
// publish (packet, token); this package adds nothing per message.
package mqttsink
