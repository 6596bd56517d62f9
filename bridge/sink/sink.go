// Package sink is the contract between the bridge's pipeline and the outputs
// it fans messages out to (MQTT, NATS, WebSocket, files): the shared message,
// the Sink interface every output implements, and the bounded queue that
// sits in front of each sink (Output). The delivery vocabulary (guarantee,
// queue policy) is the configuration's: config.Guarantee and config.Policy.
// The brokers' implementations live in sub-packages (mqttsink, natssink,
// wssink, filesink), and sinktest holds the conformance suite each of them
// runs.
//
// # Ownership of a Message
//
// The pipeline gets a Message with NewMessage, fills Addr and the payload,
// sets the reference count to the number of outputs (Retain once per extra
// output) and hands one reference to each. Every holder calls Done exactly
// once when it is finished with the message, whatever happened to it. The
// payload must not be modified once it was handed on, and must not be read
// after the holder's own Done. The last Done tells the message's Tracker
// (when set) whether every holder that counts for acknowledgement delivered
// it, then returns the message and its buffer to their pools.
//
// # Who passes false to Done
//
// Only an at-least-once output that could not get a broker's confirmation
// (it is being closed with the message still unconfirmed, or the message can
// never be delivered), or that did not publish a message because its
// Fence had passed (its writer group's holding under scale-out ended). An at-most-once output, and a drop-oldest queue that
// drops a message, pass true: they never hold an upstream acknowledgement
// back.
//
// # Output
//
// Output is the Queue in front of one Sink: a bounded queue with its policy,
// a window of at most MaxInFlight messages published and not yet confirmed,
// and one worker goroutine that connects, reconnects with backoff after
// ErrNotConnected, publishes in order and, at-least-once, resends in order
// what the broker did not confirm. Close drains until its context ends, then
// closes the sink and settles the rest. Stats are its counters for metrics.
// The steady path allocates nothing; the broker clients may (see their
// packages).
//
// Topics renders an Addr through a sink's topic templates, cached; TLSOptions
// builds a sink's tls.Config.
package sink

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/fence"
	"github.com/uagate/gateway/pooling"
)

// Kind is what a message is, which decides its topic.
type Kind uint8

const (
	// KindData is a ua-data NetworkMessage of a writer group (batched: Addr.Writer
	// is empty) or of one dataset writer.
	KindData Kind = iota
	// KindMetaData is a ua-metadata message of one dataset writer; retained on MQTT.
	KindMetaData
	// KindStatus is a ua-status message of the publisher; retained on MQTT,
	// and the last will.
	KindStatus
	// KindField is the value of one field (node) for per-field topics (the
	// "unified namespace" layout): Addr.Field names it; retained on MQTT.
	KindField
)

func (k Kind) String() string {
	switch k {
	case KindData:
		return "data"
	case KindMetaData:
		return "metadata"
	case KindStatus:
		return "status"
	case KindField:
		return "field"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Addr names where a message belongs in the topic tree
// opcua/json/<kind>/<Publisher>/<Group>/<Writer> (Field for KindField); each
// sink maps it to its topic or subject with its own template. The strings are
// owned by the pipeline's configuration and live as long as it does: sinks
// may keep them.
type Addr struct {
	Publisher string
	Group     string // writer group name
	Writer    string // dataset writer name; "" for a batched writer-group message
	Field     string // KindField only
}

// Tracker learns the outcome of a message when its last holder is done:
// delivered is true when every holder passed true to Done. Token is the
// message's Token, the pipeline's own number for it (say, the OPC UA
// sequence number it carries). Settled runs on whichever goroutine called
// the last Done; it must not block.
type Tracker interface {
	Settled(token uint64, delivered bool)
}

// Message is one encoded message shared by every output it is sent to. See
// the package comment for ownership.
type Message struct {
	pooling.Header
	Kind     Kind
	Addr     Addr
	Retained bool // keep as the topic's retained message (metadata, status, per-field values)
	// Samples: the payload is OPC Publisher's legacy samples format, not
	// Part 14 (the MQTT 5 sink says which in the message's properties).
	Samples bool
	// Live: the message says something about now only (a NetworkMessage of
	// ua-keepalive DataSetMessages) and is worth nothing later. A durable
	// log does not keep it: it hands it to the consumers that have had
	// everything before it and drops it for the others.
	Live bool
	// Tracker and Token, when Tracker is set, are told the outcome once the
	// last holder is done.
	Tracker Tracker
	Token   uint64
	// Created is the UnixNano when the pipeline encoded the message, for the
	// source-to-sink latency.
	Created int64
	// Fence, when set, is the lease deadline of the writer group that made
	// the message (scale-out): an Output does not publish it once passed.
	Fence *fence.Fence

	buf    *pooling.Buffer
	refs   atomic.Int32
	failed atomic.Bool
}

var messages = pooling.NewPool[Message](4096, func(m *Message) { *m = Message{} })

// messageBuffers holds the payloads of messages. A message lives from its
// encoding until the last output published it, so a class must keep as many
// buffers idle as are in flight at a burst, or every burst allocates the
// difference anew and drops it again: garbage that the heap's growth room
// turns into resident memory. When every writer group publishes in the
// same second with large messages, an output holds its queue of
// DefaultQueueSize messages plus its window in flight, so a class must be
// able to keep that many. A class keeps up to MessageClassBytes (and
// DefaultCapacity buffers): what is kept idle never exceeds what was once
// in flight, which the outputs' queues bound, so the pool holds no more
// than the peak already needed. DrainMessageBuffers lets go of what a
// burst that does not recur (the setup) left idle.
var messageBuffers = pooling.NewBufferPool(pooling.BufferPoolConfig{ClassBytes: MessageClassBytes})

func init() {
	pooling.Register("sink.Message", messages)
	pooling.RegisterBuffers("sink.messages", messageBuffers)
}

// MessageClassBytes bounds the idle payload bytes each size class of the
// message buffer pool keeps.
const MessageClassBytes = 256 << 20

// MessageBufferStats is a snapshot of the message buffer pool's counters,
// for metrics.
func MessageBufferStats() pooling.BufferPoolStats { return messageBuffers.Stats() }

// DrainMessageBuffers lets go of the idle message buffers and returns their
// bytes: after a burst that is not the steady state (the first key frames of
// a large configuration), so that what the burst left idle is not kept for
// good. The pool fills again up to what the steady state has in flight.
func DrainMessageBuffers() int { return messageBuffers.Drain() }

// TrimMessageBuffers lets go of the idle message buffers that no message
// needed since the previous call (pooling.BufferPool.Trim) and returns their
// bytes; called periodically, the pool shrinks to what the steady state's
// peak has in flight after a burst that did not recur.
func TrimMessageBuffers() int { return messageBuffers.Trim() }

// NewMessage returns a message with one reference, owned by the caller, and
// an empty payload with room for at least n bytes from the message buffer pool.
func NewMessage(n int) *Message {
	m := messages.Get()
	m.buf = messageBuffers.Get(max(n, pooling.MinBufferSize))
	m.buf.B = m.buf.B[:0]
	m.refs.Store(1)
	return m
}

// Payload returns the encoded bytes. Valid until the caller's Done.
func (m *Message) Payload() []byte { return m.buf.B }

// SetPayload copies p into the message's buffer (growing it from the pool if
// needed). Only the sole holder may call it, before handing the message on.
func (m *Message) SetPayload(p []byte) {
	if cap(m.buf.B) < len(p) {
		messageBuffers.Put(m.buf)
		m.buf = messageBuffers.Get(len(p))
	}
	m.buf.B = append(m.buf.B[:0], p...)
}

// SetPayload2 sets the payload to a followed by b (copied once), as
// SetPayload does: a record of a header and a payload without building it
// elsewhere first.
func (m *Message) SetPayload2(a, b []byte) {
	n := len(a) + len(b)
	if cap(m.buf.B) < n {
		messageBuffers.Put(m.buf)
		m.buf = messageBuffers.Get(n)
	}
	m.buf.B = append(append(m.buf.B[:0], a...), b...)
}

// Len returns len(m.Payload()).
func (m *Message) Len() int { return len(m.buf.B) }

// Size returns the bytes m's payload buffer takes: its pooled buffer's size
// class, at least Len.
func (m *Message) Size() int { return cap(m.buf.B) }

// MessageSize is the Size of a message with a payload of n bytes.
func MessageSize(n int) int {
	if c := messageBuffers.ClassSize(max(n, pooling.MinBufferSize)); c > 0 {
		return c
	}
	return n
}

// Retain adds n references, one for each further holder the message is handed
// to. Only a holder may call it, before handing the message on.
func (m *Message) Retain(n int) { m.refs.Add(int32(n)) }

// Done gives up the caller's reference; delivered reports the outcome as the
// package comment says. The last Done settles the message and frees it: the
// caller must not touch the message afterwards.
func (m *Message) Done(delivered bool) {
	if !delivered {
		m.failed.Store(true)
	}
	switch r := m.refs.Add(-1); {
	case r > 0:
		return
	case r < 0:
		panic("sink: Message.Done called more often than the message was retained")
	}
	if m.Tracker != nil {
		m.Tracker.Settled(m.Token, !m.failed.Load())
	}
	messageBuffers.Put(m.buf)
	messages.Put(m)
}

// ErrNotConnected is returned by Sink.Publish while the sink has no broker
// connection; the Output then reconnects with backoff and sends the message
// again.
var ErrNotConnected = errors.New("sink: not connected")

// ErrRefused marks the error of a confirmation (Acker.Confirmed) by which
// the broker refused a message for good — one that would be refused again
// if sent again (MQTT 5: not authorized, topic name invalid, packet too
// large, payload format invalid). The Output settles such a message as a
// refusal (the dead-letter file, see DeadLetters) instead of resending it;
// other confirmation errors of an at-least-once Output are resent.
var ErrRefused = errors.New("refused by the broker")

// Sink is an output: a broker client or a hub of consumers. Its methods are
// called by one Output only (Publish from one goroutine at a time).
type Sink interface {
	// Name identifies the sink in logs and metrics ("mqtt", "nats:plant", …).
	Name() string
	// Guarantee is what the sink can promise; an Output configured
	// at-least-once over an AtMostOnce sink is refused.
	Guarantee() config.Guarantee
	// Connect establishes the connection; the Output calls it at start and
	// after ErrNotConnected, with backoff.
	Connect(ctx context.Context) error
	// Publish hands m to the broker without waiting for its confirmation. It
	// calls ack.Confirmed(m, err) exactly once, before Publish returns or
	// later from another goroutine, with nil when the broker confirmed the message (for
	// an at-most-once sink: when it was written) or the reason it was not. A
	// non-nil return means m was not taken (ack is not called): ErrNotConnected
	// to reconnect and retry, any other error to count and drop it. m stays
	// the Output's: Publish and the sink must not call m.Done.
	Publish(m *Message, ack Acker) error
	// Close flushes what it can until ctx ends and disconnects. Before it
	// returns it has called ack.Confirmed for every message it took (with an
	// error for those the broker did not confirm), so that the Output can
	// settle them. Connect after Close fails.
	Close(ctx context.Context) error
}

// ConnState is implemented by sinks that learn of a lost connection between
// publishes; Output.Stats reports it.
type ConnState interface {
	Connected() bool
}

// ErrUnauthorized is wrapped by the error of a sink's Connect when the broker
// refused its credentials (or its certificate). The Output retries with
// backoff, as for any connect error, and shows it in Stats.LastError: the
// fix is in the configuration or on the broker.
var ErrUnauthorized = errors.New("sink: broker refused the credentials")

// Acker is told by a Sink what became of a message it took. Implemented by
// Output; an interface rather than a func so that Publish allocates nothing.
type Acker interface {
	Confirmed(m *Message, err error)
}

// DeadLetters keeps the messages a sink refused for good (OutputOptions):
// DeadLetter records m, bound for sink, with the refusal err, and reports
// whether it kept it. It is called on the Output's worker (Publish
// refused m) or the sink's confirming goroutine (a confirmation with
// ErrRefused), with m still valid; it must not block for long nor call
// m.Done.
type DeadLetters interface {
	DeadLetter(sink string, m *Message, err error) bool
}

// TokenWatcher is a Queue told when every message carrying a token has
// been handed to it: the pipeline calls Handed(token) once no further
// message of that token (an OPC UA sequence number) can come, in token
// order. The store-and-forward log keeps it to know which notifications
// it holds completely.
type TokenWatcher interface {
	Handed(token uint64)
}

// RoomWaiter is a Queue that can make a producer wait for room before the
// message exists: with it, a writer group held back by a full Block queue
// waits holding its encoded JSON only, not a pooled message copy of it as
// well (at a million items, a hundred groups blocked at a burst each held
// a 256 KiB message on top of the queue's bytes). Enqueue still waits when
// the room was taken meanwhile.
type RoomWaiter interface {
	WaitRoom(n int)
}

// Queue is what the pipeline hands messages to: an Output (a bounded queue
// in front of one Sink) or a hub that fans out to consumers of its own (the
// WebSocket hub). Enqueue takes over one reference of m (the queue calls
// m.Done when it is finished with it). When the queue is full, a Block queue
// makes Enqueue wait until there is room or the queue is closed (then m is
// settled as undelivered); a DropOldest queue drops its oldest message
// (settled as delivered, counted) and never waits.
type Queue interface {
	Enqueue(m *Message)
	// Guarantee is the queue's delivery guarantee; the pipeline acknowledges
	// upstream only what every AtLeastOnce queue confirmed.
	Guarantee() config.Guarantee
	// Name identifies the queue in logs and metrics.
	Name() string
}
