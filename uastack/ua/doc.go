// Package ua holds the OPC UA built-in types, the generated structured types and
// service messages, and the binary codec (OPC UA Part 6 §5.1–5.2).
//
// The types are Go value types shaped for a zero-allocation hot path: a Variant is a
// tagged union that stores numeric scalars inline, a DataValue holds its Variant by
// value, NodeID is comparable (usable as a map key).
//
// Decoding. A Decoder reads from a byte slice and keeps its first error; every length
// read from the wire is checked against Limits and against the bytes left before
// anything is allocated. Decode methods decode into their receiver and reuse the
// capacity of the slices they already hold, so a message decoded again and again into
// the same object allocates nothing in steady state.
//
// Ownership. DataChangeNotification, MonitoredItemNotification, EventFieldList and
// EventNotificationList come from bounded pools (package pooling) when the decoder
// meets them inside an ExtensionObject. The one who holds the decoded message owns
// them and gives them back with Release; after Release they must not be used.
// Strings and byte strings decoded from the wire are copies: they never alias the
// receive buffer, so a message may outlive the buffer it was decoded from.
package ua
