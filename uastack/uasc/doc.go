// Package uasc implements the OPC UA Secure Conversation of OPC UA Part 6 §6.7 on
// top of the opc.tcp connections of package uacp: secure channels, their security
// tokens, and the routing of requests and responses.
//
// # What lives here
//
//   - The security policies (Policy, PolicyByURI; policy*.go): asymmetric
//     signing and encryption block by block, key derivation, SymCipher for the
//     symmetric chunks, chunk padding.
//   - Channel, the client side: Dial (TCP, Hello, OpenSecureChannel) or
//     NewClientChannel over an existing connection (reverse connect);
//     SendRequest and SendRequestAsync; token renewal at 75% of the revised
//     lifetime; Close with CloseSecureChannel. GetEndpoints is the one-shot
//     discovery helper.
//   - ServerChannel, the server side: Accept answers the first
//     OpenSecureChannel; Serve reads requests and hands them to a handler;
//     Respond and RespondFault answer them from any goroutine, at any time, so a
//     Publish can be parked.
//   - The chunk layer both share (secure.go, wire.go): the asymmetric security
//     header of OPN, the symmetric header of MSG and CLO, sequence numbers
//     (strictly increasing per direction, wrapping after 4294966271 to below
//     1024), chunking to the negotiated SendBufferSize within the peer's
//     MaxMessageSize and MaxChunkCount, reassembly within ours, abort chunks.
//
// # Security
//
// OPN chunks are signed with the sender's key and encrypted for the receiver
// whenever the policy is not None, whatever the mode. MSG and CLO chunks are
// signed in mode Sign, padded, signed and encrypted in mode SignAndEncrypt, with
// the keys of the chunk's token. Received chunks are checked in this order:
// header and channel id, token, decryption, signature, padding (only after the
// signature verified, so it is no oracle), sequence number. Any failure ends the
// channel with an error that wraps the matching status code (ErrSecurityChecks:
// Bad_SecurityChecksFailed, ErrSequenceNumber: Bad_SequenceNumberInvalid …); the
// server side first sends an Error message naming it. Every pending request then
// fails with an error matching both ErrChannelClosed and the cause.
//
// After a renewal the client sends with the new token at once and accepts the old
// one until the server uses the new one; the server goes on sending with the old
// token until the client uses the new one, and refuses tokens past their lifetime
// plus 25%.
//
// # Concurrency
//
// A Channel has one reader goroutine, started by Dial and ended by Close or by the
// connection's end; it reads, verifies and decodes every response and completes
// its request. Requests may be sent from any number of goroutines: sending is
// serialised by a mutex (sequence numbers are assigned in the order chunks are
// written), so the chunks of a message are never interleaved with others.
// Pending requests are kept in a map by request id with their deadlines in a heap
// served by a single timer: no goroutine and no timer per request. Close waits for
// the reader goroutine, so a closed channel leaves no goroutine behind.
//
// A ServerChannel reads on the goroutine that calls Serve; the handler runs there
// and must hand slow work off.
//
// # Ownership
//
//   - Received chunks are verified and decrypted in place in the connection's
//     pooled receive buffer (see uacp.Chunk). A message of one chunk is decoded
//     straight from that buffer; a message of several is reassembled into a
//     pooled buffer (uacp.Assembler) that is cleared and returned once decoded.
//     Decoded values never alias these buffers (package ua copies strings and
//     byte strings), so nothing received outlives its buffer by reference.
//   - A response is decoded into the resp passed to SendRequest or
//     SendRequestAsync when it is of the response's type, reusing its slices;
//     the caller owns resp throughout and gets it back as the result. Once a
//     request has failed (timeout, cancellation, channel closed) its resp is never
//     touched again: a late response is dropped. Pooled notification objects in a
//     decoded PublishResponse belong to the caller (see package ua).
//   - Outgoing messages are encoded into pooled buffers; a message that fits one
//     chunk is signed and encrypted in place there. The buffers are cleared
//     before they go back, since requests may carry secrets.
//   - The request passed to SendRequest is only read. Its RequestHeader's
//     Timestamp and TimeoutHint, when zero, are filled in on the wire only.
//
// In steady state, receiving a response of one chunk allocates nothing
// (TestReceiveAllocs), and neither does sending a request.
package uasc
