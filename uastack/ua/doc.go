// Package ua holds the OPC UA built-in types, the generated structured types and
// service messages, and the binary codec (OPC UA Part 6 §5.1–5.2).
//
// The types are Go value types shaped for a zero-allocation hot path: a Variant is a
// tagged union that stores numeric scalars inline, a DataValue holds its Variant by
// value, NodeID is comparable (usable as a map key).
//
// Decoding. A Decoder reads from a byte slice and keeps its first error; every length
// read from the wire is checked against Limits and against the bytes left before
// anything is allocated, and every allocation is charged first against the
// message's memory budget (Limits.MemoryPerByte × its length + Limits.MemoryAllowance;
// ErrMemoryBudgetExceeded), so that what a peer declares cannot make one message
// take more memory than that. Decode methods decode into their receiver and reuse the
// capacity of the slices they already hold, uncharged, so a message decoded again and
// again into the same object allocates nothing in steady state.
//
// Ownership. DataChangeNotification, MonitoredItemNotification, EventFieldList and
// EventNotificationList come from bounded pools (package pooling) when the decoder
// meets them inside an ExtensionObject. The one who holds the decoded message owns
// them and gives them back with Release; after Release they must not be used.
// The capacity of their slices stays for the next decode, within
// MaxIdlePooledBytes for all of them together while idle (pooled.go).
// Strings and byte strings decoded from the wire are copies: they never alias the
// receive buffer, so a message may outlive the buffer it was decoded from.
//
// # Borrowed notifications
//
// A subscription handler borrows its notifications: they are released (reset and
// given back to their pools) when it returns. The rule for what it may keep:
//
//   - Values copied out stay valid: a DataValue or Variant copied by value
//     (v := item.Value), and everything such a copy refers to: its strings, its
//     arrays (a Variant's []float64, []string, []Variant ... and matrix
//     dimensions), its ByteString, and the ExtensionObject, DataValue or
//     DiagnosticInfo it points to. The decoder allocates these afresh for every
//     value it decodes (ReadVariant never reuses an array's capacity, ReadString
//     copies), and neither a later decode nor Release writes them: Release zeroes
//     only the notification's own memory. No Clone is needed to keep them.
//   - Not kept: the notification objects themselves, their slices
//     (DataChangeNotification.MonitoredItems, EventNotificationList.Events,
//     EventFieldList.EventFields, DiagnosticInfos, NotificationMessage.
//     NotificationData) and pointers into those slices (&items[i],
//     &items[i].Value): Release zeroes them and the next decode overwrites them.
//   - A kept Variant array is shared with every other copy of the same Variant
//     (another handler, a last-value cache): treat it as read-only, and use
//     Variant.Clone (DataValue.Clone, ExtensionObject.Clone) for a copy to modify.
//   - Outside Variants, the []byte fields of generated structures and the slices
//     of any structure decoded into again reuse their capacity: a ByteString field
//     of a reused response (a BrowseResult's ContinuationPoint) is overwritten in
//     place by the next decode into it; copy it to keep it.
package ua
