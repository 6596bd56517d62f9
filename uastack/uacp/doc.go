// Package uacp implements the OPC UA Connection Protocol, the opc.tcp transport of
// OPC UA Part 6 §7.1: the message header, the Hello / Acknowledge / Error /
// ReverseHello messages, buffer negotiation, and the framing of the secure
// conversation chunks (OPN, CLO, MSG) that it passes up to package uasc.
//
// # What lives here
//
//   - Header, MessageType, ChunkType and the four connection messages, each with
//     AppendBinary / UnmarshalBinary over whole messages (header included).
//   - NegotiateServer / NegotiateClient: the buffer negotiation rules, as pure
//     functions over Config, Hello and Acknowledge, giving each side its Limits.
//   - Dial (client), Listen + Listener.Accept (server), and reverse connect:
//     DialReverse (server side, sends RHE) and ListenReverse (client side, accepts
//     RHE and sends HEL). NewClientConn / NewServerConn run the handshakes on any
//     net.Conn.
//   - Conn: ReadChunk / WriteChunk of whole chunks within the negotiated limits.
//   - Assembler: reassembly of chunk bodies into a Message for the secure channel
//     layer, within MaxMessageSize and MaxChunkCount, with abort chunks.
//
// # Limits before allocation
//
// Every header is checked before anything is allocated or read beyond it: a
// MessageSize above the negotiated ReceiveBufferSize (or MaxHandshakeSize during
// the handshake), a message type that is unknown or out of place, or a MessageSize
// below the header size makes the receiving side send an Error message with the
// matching status code, close the connection, and return an error that wraps that
// code (errors.Is(err, ua.StatusBadTcpMessageTooLarge)). The Assembler checks
// chunk counts and message sizes before it grows a buffer. Deadlines bound the
// handshake (HandshakeTimeout), the rest of a chunk once its first byte arrived
// (ChunkTimeout, against peers that stall mid-header) and each write
// (WriteTimeout). No error path panics or leaves a goroutine behind.
//
// # Ownership
//
//   - A Chunk returned by Conn.ReadChunk belongs to the Conn: it is valid until
//     Chunk.Release or the next ReadChunk, whichever comes first. Its buffer comes
//     from the pool (size class of the negotiated ReceiveBufferSize) and is reused
//     from chunk to chunk, so reading allocates nothing in steady state; Release
//     returns it, cleared, so that an idle connection holds no buffer.
//   - A Message returned by the Assembler belongs to the caller until
//     Message.Release, which clears the buffer (it holds decrypted data) and
//     returns it and the Message to their pools. Assembler.AddChunk moves the
//     buffer of a single-chunk message from the Chunk to the Message instead of
//     copying it.
//   - Buffers passed to WriteChunk stay the caller's; the Conn does not keep them.
//
// # Concurrency
//
// One goroutine reads (ReadChunk, and the Assembler it feeds); any number may
// write (WriteChunk and WriteChunks hold a mutex so chunks never interleave). A
// Listener owns the goroutines of its handshakes and waits for them in Close.
// Conn.CloseWhenDone ties a connection to a context without a goroutine.
package uacp
