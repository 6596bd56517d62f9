// Package mqtt5sink is the MQTT 5.0 output (sinks.mqtt[].protocolVersion
// 5): the same configuration, topics, QoS, sessions, TLS, credentials,
// retained metadata and status, and last will as the MQTT 3.1.1 sink
// (package mqttsink, whose Config it takes), plus what MQTT 5 adds: every
// message says what it is in its properties, and the broker's limits are
// known before anything is sent.
//
// # Properties
//
// Every PUBLISH (and the will) carries
//
//	Payload Format Indicator  1 (UTF-8: the payload is JSON)
//	Content Type              application/json (Part 14 §7.3.5.9.2)
//	User Property UAMessageType  ua-data, ua-metadata or ua-status (Part 14 §7.3.5.8
//	                          Table 180); a samples-format data message has
//	                          MessageSchema application/x-monitored-item-json-v1
//	                          instead (OPC Publisher's name of that schema);
//	                          per-field values have neither
//	User Property PublisherId, WriterGroup, DataSetWriter, Field
//	                          the names of the topic's levels, where the message has them
//	Message Expiry Interval   data messages only, when MessageExpiry is set
//
// Property strings that MQTT forbids (invalid UTF-8, control characters)
// have those characters replaced by '_' (topics as the 3.1.1 sink's,
// mqttsink.Sanitize). The will carries the user properties only:
// paho.golang v0.23.0 packs will properties as CONNECT properties, which
// drops its content type and payload format indicator.
//
// # Connection and the broker's limits
//
// paho.golang's low-level client (paho.Client) dials nothing itself: the
// sink dials (tcp/mqtt, ssl/tls/mqtts, ws/wss), and the client sends
// CONNECT with the will, reads the CONNACK and every packet after it, and
// pings. The sink is the client's session.SessionManager: acknowledgements
// come to it, and nothing is kept for a later connection. From the CONNACK
// the sink takes the Receive Maximum (at most that many publishes in
// flight, DefaultWindow at most: Publish waits for a slot), the Maximum
// Packet Size (a larger message is refused with ErrTooLarge, counted by the
// Output, and the messages behind it go on) and the Maximum QoS and Retain
// Available (a broker that cannot take the sink's QoS or retained messages
// is refused at Connect with the reason). Refused credentials (CONNACK
// 0x86, 0x87, 0x8C) wrap sink.ErrUnauthorized.
//
// # Delivery and reconnection
//
// As the 3.1.1 sink: QoS 0 is confirmed once written; QoS 1 and 2 on PUBACK
// / PUBCOMP (PUBREL is sent on PUBREC), confirmed in publish order; a
// reason code of 0x80 or more fails the message with the broker's reason.
// Reconnection is the Output's: every Connect makes a new connection with a
// new paho client, and when a connection ends every publish in flight is
// failed with sink.ErrNotConnected, so that the at-least-once Output sends
// them again in order (duplicates possible, nothing lost). QoS 2 needs a
// clean session for the same reason as with 3.1.1. cleanSession false
// asks for a session that does not expire. A publish not acknowledged
// within AckTimeout ends the connection (a watchdog per connection).
//
// # Status and last will
//
// As the 3.1.1 sink: a retained ua-status Error as the will, Operational
// once connected, Disabled at Close before a DISCONNECT with reason 0 (the
// broker discards the will); a connection that ends otherwise leaves the
// will to the broker.
//
// # Concurrency and ownership
//
// Publish is called by one Output goroutine; it encodes the header and the
// properties into buffers of the sink and writes header and payload with
// one writev (two writes over TLS or WebSocket) under the connection's
// write lock (which paho's own writes
// take too), so the payload is not copied and not read once Publish
// returned. The window of a connection is a ring indexed by packet id
// (ids are given in order and settled from the head, so those in flight
// are consecutive). Acknowledgements arrive on paho's reader goroutine,
// which confirms; a connection that ends fails what is left after the
// write in progress finished. Publish allocates nothing in the steady
// state; paho's reader allocates for each acknowledgement it decodes.
package mqtt5sink
