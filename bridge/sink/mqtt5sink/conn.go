package mqtt5sink

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	paholog "github.com/eclipse/paho.golang/paho/log"
	"github.com/eclipse/paho.golang/paho/session"

	"github.com/uagate/gateway/bridge/sink"
)

// lockedConn is the connection as paho sees it: a sync.Locker, which paho's
// packet writer holds for the whole of each packet it writes (CONNECT,
// PINGREQ, DISCONNECT); the sink holds the same lock while it writes a
// PUBLISH or PUBREL to raw itself, so packets never interleave.
//
// Reads go through a buffer: paho reads a packet's header byte by byte, and
// acknowledgements come in bursts (one goroutine reads at a time: paho's
// CONNACK reader, then its reader loop).
type lockedConn struct {
	net.Conn
	sync.Mutex
	r       *bufio.Reader
	readErr atomic.Pointer[error] // the first error of a Read: why the connection ended
}

func newLockedConn(raw net.Conn) *lockedConn {
	return &lockedConn{Conn: raw, r: bufio.NewReaderSize(raw, 4096)}
}

// Read reads from the buffer, keeping the first error.
func (l *lockedConn) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if err != nil {
		e := err
		l.readErr.CompareAndSwap(nil, &e)
	}
	return n, err
}

// Entry states.
const (
	stateSent    uint8 = iota // written, waiting for PUBACK / PUBCOMP
	stateSettled              // the broker answered (err tells how), or the connection failed it
)

// entry is a QoS 1 or 2 publish in flight.
type entry struct {
	m     *sink.Message // nil for the sink's own status messages
	ack   sink.Acker
	at    int64 // UnixNano of the write, for AckTimeout
	err   error
	id    uint16
	state uint8
}

// connection is one MQTT 5 connection: the socket, the paho client that
// connected it and reads from it, and the window of publishes in flight.
// It is also the paho client's session.SessionManager: paho hands it the
// acknowledgements, and nothing is stored for a later connection (the
// Output resends).
type connection struct {
	s      *Sink
	raw    net.Conn
	lc     *lockedConn
	client *paho.Client
	lost   *sink.Lost
	// From the CONNACK: the largest packet the broker takes (0: no limit).
	maxPacket uint32

	mu     sync.Mutex
	room   sync.Cond // Publish waiting for a free slot in the window
	ring   []entry   // the window: publishes in flight in publish order
	head   int
	n      int
	nextID uint16
	dead   bool // no more publishes: the connection is lost or closing

	cmu   sync.Mutex    // held while popping and confirming: confirmations in order
	wdone chan struct{} // closed when the watchdog ended
}

// newConnection wraps raw; the window (ring) is sized once the CONNACK
// told the broker's Receive Maximum.
func newConnection(s *Sink, raw net.Conn) *connection {
	c := &connection{s: s, raw: raw, lc: newLockedConn(raw), lost: sink.NewLost(),
		nextID: 1, wdone: make(chan struct{})}
	c.room.L = &c.mu
	return c
}

// reserve waits for a free slot in the window; false when the connection
// died meanwhile.
func (c *connection) reserve() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.dead && c.n == len(c.ring) {
		c.room.Wait()
	}
	return !c.dead
}

// push adds a publish to the window and returns its packet id; false when
// the connection is dead. c.lc is held (so the write that follows ends
// before kill fails the entry) and a slot was reserved.
func (c *connection) push(m *sink.Message, ack sink.Acker, now int64) (uint16, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return 0, false
	}
	id := c.nextID
	c.nextID = c.nextID%65535 + 1
	c.ring[(c.head+c.n)%len(c.ring)] = entry{m: m, ack: ack, at: now, id: id, state: stateSent}
	c.n++
	return id, true
}

// find returns the ring index of the entry in flight with packet id id, or
// -1. Packet ids are given in order and the window is settled from its
// head, so the ids in flight are consecutive from the head's. c.mu held.
func (c *connection) find(id uint16) int {
	if c.n == 0 {
		return -1
	}
	off := (int(id) - int(c.ring[c.head].id) + 65535) % 65535
	if off >= c.n {
		return -1
	}
	i := (c.head + off) % len(c.ring)
	if c.ring[i].id != id || c.ring[i].state != stateSent {
		return -1
	}
	return i
}

// answered settles the entry of id with the broker's reason code and
// confirms what is settled at the head of the window.
func (c *connection) answered(id uint16, code byte, reason interface{ Reason() string }) {
	c.mu.Lock()
	i := c.find(id)
	if i >= 0 {
		e := &c.ring[i]
		e.state = stateSettled
		if code >= 0x80 {
			e.err = fmt.Errorf("mqtt5sink %s: the broker refused the message: %s (reason code %#x)", c.s.cfg.Name, reason.Reason(), code)
			if refusedForGood(code) {
				e.err = fmt.Errorf("%w: %w", sink.ErrRefused, e.err)
			}
		}
	}
	c.mu.Unlock()
	if i >= 0 {
		c.confirmReady()
	}
}

// confirmReady pops and confirms the settled entries at the head of the
// window, in order.
func (c *connection) confirmReady() {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	for {
		c.mu.Lock()
		if c.n == 0 || c.ring[c.head].state == stateSent {
			c.mu.Unlock()
			return
		}
		e := c.ring[c.head]
		c.ring[c.head] = entry{}
		c.head = (c.head + 1) % len(c.ring)
		c.n--
		c.room.Signal()
		c.mu.Unlock()
		e.ack.Confirmed(e.m, e.err)
	}
}

// pending is the number of publishes in flight.
func (c *connection) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// kill ends the connection without a DISCONNECT (so the broker publishes
// the will) and fails what is in flight with the reason; the first reason
// stays. It waits for a write in progress, so that no payload of a failed
// entry is read once it returns. Any goroutine but one holding c.lc may
// call it, any number of times.
func (c *connection) kill(why error) {
	c.lost.Mark(why)
	c.mu.Lock()
	c.dead = true
	c.room.Broadcast()
	c.mu.Unlock()
	_ = c.raw.Close()
	c.lc.Lock()
	//lint:ignore SA2001 the empty critical section waits for a write in progress
	c.lc.Unlock()
	err := c.lost.Err()
	c.mu.Lock()
	for k := 0; k < c.n; k++ {
		if e := &c.ring[(c.head+k)%len(c.ring)]; e.state == stateSent {
			e.state, e.err = stateSettled, err
		}
	}
	c.mu.Unlock()
	c.confirmReady()
}

// watchdog ends the connection when the oldest publish in flight waited
// longer than AckTimeout for its acknowledgement: a broker that does not
// answer is broken, and the payloads must be released.
func (c *connection) watchdog() {
	defer close(c.wdone)
	tick := min(max(c.s.cfg.AckTimeout/8, 10*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-c.lost.C():
			return
		case now := <-t.C:
			c.mu.Lock()
			stale := c.n > 0 && now.UnixNano()-c.ring[c.head].at > int64(c.s.cfg.AckTimeout)
			c.mu.Unlock()
			if stale {
				c.s.log.Warn("mqtt publish not acknowledged in time, dropping the connection", "ackTimeout", c.s.cfg.AckTimeout)
				c.kill(fmt.Errorf("mqtt5sink %s: %w: %w", c.s.cfg.Name, sink.ErrNotConnected, ErrAckTimeout))
			}
		}
	}
}

// write writes the packet bufs (and nothing else meanwhile) within the
// write timeout; c.lc held.
func (c *connection) write(bufs *net.Buffers) error {
	if err := c.raw.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout)); err != nil {
		return err
	}
	_, err := bufs.WriteTo(c.raw)
	return err
}

// lostErr wraps why a connection ended with sink.ErrNotConnected.
func (c *connection) lostErr(why error) error {
	return fmt.Errorf("mqtt5sink %s: connection lost: %w: %w", c.s.cfg.Name, sink.ErrNotConnected, why)
}

// The session.SessionManager of the paho client.

// ConAckReceived implements session.SessionManager.
func (c *connection) ConAckReceived(io.Writer, *packets.Connect, *packets.Connack) error { return nil }

// ConnectionLost implements session.SessionManager: paho calls it when the
// broker sent a DISCONNECT and when its client shut down (the connection
// failed, or was closed).
// The reason is the broker's DISCONNECT or the read error that ended
// paho's reader; other ends (a ping timeout) come to the client's
// OnClientError, and the sink's own to kill.
func (c *connection) ConnectionLost(dp *packets.Disconnect) error {
	switch {
	case dp != nil:
		why := fmt.Errorf("the broker disconnected: %s (reason code %#x)", dp.Reason(), dp.ReasonCode)
		if dp.Properties != nil && dp.Properties.ReasonString != "" {
			why = fmt.Errorf("%w: %s", why, dp.Properties.ReasonString)
		}
		c.s.log.Warn("mqtt broker disconnected", "err", why)
		c.kill(c.lostErr(why))
	case c.lc.readErr.Load() != nil:
		c.kill(c.lostErr(*c.lc.readErr.Load()))
	}
	return nil
}

// errNoRequests: the sink's session carries publishes only.
var errNoRequests = errors.New("mqtt5sink: the sink's connection takes no subscriptions")

// AddToSession implements session.SessionManager: the sink makes no
// requests through paho.
func (c *connection) AddToSession(context.Context, session.Packet, chan<- packets.ControlPacket) error {
	return errNoRequests
}

// PacketReceived implements session.SessionManager: the acknowledgements
// of the sink's publishes.
func (c *connection) PacketReceived(p *packets.ControlPacket, _ chan<- *packets.Publish) error {
	switch a := p.Content.(type) {
	case *packets.Puback:
		c.answered(a.PacketID, a.ReasonCode, a)
	case *packets.Pubcomp:
		c.answered(a.PacketID, a.ReasonCode, a)
	case *packets.Pubrec:
		if a.ReasonCode >= 0x80 {
			c.answered(a.PacketID, a.ReasonCode, a)
			return nil
		}
		// QoS 2: release it; PUBCOMP confirms.
		rel := [4]byte{0x62, 2, byte(a.PacketID >> 8), byte(a.PacketID)}
		c.lc.Lock()
		err := c.raw.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
		if err == nil {
			_, err = c.raw.Write(rel[:])
		}
		c.lc.Unlock()
		if err != nil {
			c.kill(c.lostErr(err))
		}
	}
	return nil
}

// Ack implements session.SessionManager (the sink receives no publishes).
func (c *connection) Ack(*packets.Publish) error { return nil }

// Close implements session.SessionManager.
func (c *connection) Close() error { return nil }

// SetErrorLogger implements session.SessionManager.
func (c *connection) SetErrorLogger(paholog.Logger) {}

// SetDebugLogger implements session.SessionManager.
func (c *connection) SetDebugLogger(paholog.Logger) {}

// refusedForGood reports whether a PUBACK or PUBREC reason code refuses
// the message itself, so that sending it again would be refused again
// (MQTT 5.0 §3.4.2.1): Not authorized (0x87), Topic Name invalid (0x90),
// Packet too large (0x95), Payload format invalid (0x99). The others
// (Unspecified error, Implementation specific error, Packet Identifier in
// use, Quota exceeded) may pass another time: the message is resent.
func refusedForGood(code byte) bool {
	switch code {
	case 0x87, 0x90, 0x95, 0x99:
		return true
	}
	return false
}
