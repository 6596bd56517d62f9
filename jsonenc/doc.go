// Package jsonenc writes and reads OPC UA JSON: the built-in types of Part 6
// §5.4 and the PubSub messages of Part 14 §7.2.5, on the hot path without
// reflection, maps, boxing or allocation.
//
// # What lives here
//
//   - Encoder: a streaming writer into a pooled buffer (bytebufferpool). Low
//     level StartObject/EndObject/StartArray/EndArray/FieldName, typed value
//     writers (WriteDouble, WriteDateTime, WriteNodeID, WriteVariant,
//     WriteDataValue, WriteExtensionObject, …) and Field* helpers that apply
//     the NULL/default rules of the mode. Four modes: Compact and Verbose
//     (1.05), and the deprecated Reversible104 and NonReversible104 (Annex H)
//     that existing consumers still expect. NodeIds, ExpandedNodeIds and
//     QualifiedNames are written in the nsu=/svu= forms through the namespace
//     and server tables of Options.
//   - NetworkMessageWriter: Part 14 ua-data NetworkMessages field by field
//     from caller-owned ua.DataValues: both content masks (header layouts,
//     single and batched DataSetMessages, ua-keyframe/-deltaframe/-event/
//     -keepalive, Variant or DataValue fields, the four field encodings),
//     splitting at MaxMessageSize, optional gzip, and the legacy OPC
//     Publisher "samples" format; ua-metadata and ua-status messages.
//   - Decoder: reads the same JSON back (all of Compact, Verbose and
//     Reversible104; NonReversible104 and collapsed PubSub fields when the
//     type is given), for tests, subscribers and REST bodies. It builds a
//     small tree and allocates; it is not for the hot path. It never panics
//     on bad input (FuzzDecode) and checks nesting, array and object length,
//     string length, the number of values and the input size while parsing,
//     before the tree they would grow is built (DecoderOptions;
//     ErrTooDeep, ErrLimitExceeded).
//
// # Streaming and flushing
//
// An Encoder with an io.Writer flushes its pending bytes once at least
// FlushThreshold (16 KiB) are pending, at the next StartObject or StartArray,
// as the .NET stack does, and also at the next array element or other value,
// and between 2 KiB pieces of a String or ByteString longer than the
// threshold: the output is byte-identical to an in-memory encode and the
// buffer stays near the threshold however large the message or one value in it
// (TestStream10MB streams 10 MB of fields, TestStream10MBValue one 10 MB array,
// String or ByteString, each through at most 32 KiB of buffer).
//
// A NetworkMessageWriter streams when it has a Writer and neither
// MaxMessageSize nor Gzip; otherwise it keeps one message in memory (at most
// MaxMessageSize) and hands it to Sink when it is complete.
//
// # Splitting
//
// With MaxMessageSize, before a field would make the current NetworkMessage
// (closed) exceed the limit, the writer closes it, emits it and opens a new
// one with the same header (MessageId + "-<n>" when the caller set one, a new
// id otherwise). A DataSetMessage cut this way continues in the next message
// with the same header except for two members:
//
//   - SequenceNumber: every part is a DataSetMessage of its own and has its own
//     number, consecutive from the header's SequenceNumber (the first part has
//     it, the next part that plus one, and so on), so a subscriber sees no
//     duplicate numbers and can tell a lost part from a gap. The writer reports
//     the number after the last part with NextSequenceNumber; a caller keeping
//     a counter per DataSetWriter continues from it. A keep-alive announces the
//     next number and uses none.
//   - MessageType: ua-keyframe always means a complete key frame, every field
//     of the DataSet. A key frame that has to be split is sent as ua-deltaframe
//     parts only, the first one included (its type is rewritten when the split
//     happens; the size budget keeps room for that). A subscriber that applies
//     the parts in order, as delta frames, ends with the full key frame; one
//     that needs a complete key frame waits for a ua-keyframe.
//
// A field that cannot fit even into an empty message is not
// dropped silently: AddField returns ErrFieldTooLarge naming it, nothing of it
// is written, and the writer can go on. With Gzip the limit applies to the
// compressed message; the JSON is budgeted so that even incompressible data
// fits.
//
// # Ownership
//
//   - NewEncoder takes an Encoder and a buffer from bounded pools; the caller
//     owns both until Release. Release scrubs the buffer (it may hold
//     credentials or process data) and returns it; afterwards neither the
//     Encoder nor any slice from Bytes may be used. When the buffer grows the
//     old backing array is scrubbed too.
//   - Slices from Bytes, and the msg passed to a Sink, are valid until the
//     next write (for Sink: until it returns). Copy, or retain them in your
//     own pooled buffer, to keep them.
//   - Values passed to the writers (DataValues, headers, strings) are read
//     during the call only; headers passed to Begin/BeginDataSetMessage are
//     copied, their strings referenced until End/EndDataSetMessage.
//   - Options.NamespaceURIs and ServerURIs are read, never modified; they must
//     not change while an Encoder uses them.
//   - A NetworkMessageWriter is owned by one goroutine at a time (one per
//     writer group, or taken from the caller's pool for a publishing cycle
//     and Reset for its options); Release returns its buffers.
//
// # Deviations and choices
//
//   - Go strings cannot be NULL: an empty String field is omitted in Compact
//     and written as "" in Verbose; a String Variant always carries Value.
//   - Picoseconds are written only with their timestamp (as the .NET stack);
//     the 1.04 modes spell them SourcePicoSeconds/ServerPicoSeconds (1.04
//     Table 31). The decoder accepts both spellings and StatusCode for Status.
//   - ExtensionObjects whose Value has a JSON mapping (StructWriter, or the
//     built-in ones for DataSetMetaDataType, FieldMetaData, KeyValuePair,
//     ConfigurationVersionDataType, EUInformation, Range) get a JSON body;
//     other structures a UA Binary body (UaEncoding 1), which the spec allows.
//   - ua has no constructor for a one-dimensional Byte[] Variant, so the
//     decoder returns such an array as a ByteString.
//   - An nsu= URI missing from the decoder's table gives a String NodeId in
//     namespace 0 holding the whole text (Part 6 §5.4.2.10); an
//     ExpandedNodeId keeps the URI instead (it can carry it).
package jsonenc
