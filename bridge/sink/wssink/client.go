package wssink

import (
	"bytes"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/uagate/gateway/bridge/sink"
)

// client is one connected consumer: a bounded send queue filled by Enqueue,
// drained by its writer goroutine; its reader runs on the handler's
// goroutine (ServeHTTP).
type client struct {
	hub    *Hub
	conn   *websocket.Conn
	remote string
	caller string                    // who sends commands (Options.CallerOf)
	sel    atomic.Pointer[selection] // nil: not subscribed yet
	// commanded: the client sent a command; a command client needs no
	// subscription to count as in use (Options.SubscribeTimeout).
	commanded atomic.Bool

	// mu orders offers with the client's end: once closed is set, nothing is
	// queued any more, so release can settle everything that was.
	mu     sync.Mutex
	closed bool
	replay []*sink.Message // cached metadata to write before the queue; one reference each
	send   chan *sink.Message

	hasReplay atomic.Bool   // replay != nil, read by the writer without mu
	wake      chan struct{} // cap 1: a replay is waiting

	stopOnce   sync.Once
	kill       chan struct{} // closed by stop
	code       int           // close code written by the writer; 0: none. Set before kill is closed.
	reason     string
	readerDone chan struct{}
	writerDone chan struct{}
}

func newClient(h *Hub, conn *websocket.Conn) *client {
	return &client{
		hub:        h,
		conn:       conn,
		remote:     conn.RemoteAddr().String(),
		send:       make(chan *sink.Message, h.opts.ClientQueue),
		wake:       make(chan struct{}, 1),
		kill:       make(chan struct{}),
		readerDone: make(chan struct{}),
		writerDone: make(chan struct{}),
	}
}

// offer queues m for the client, taking a reference, or closes the client as
// a slow consumer when its queue is full. It never waits.
func (c *client) offer(m *sink.Message) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	m.Retain(1)
	select {
	case c.send <- m:
		c.mu.Unlock()
		return
	default:
	}
	c.mu.Unlock()
	m.Done(true)
	if c.stop(CloseSlowConsumer, ReasonSlowConsumer) {
		c.hub.slow.Add(1)
		c.hub.log.Info("websocket client closed: slow consumer", "remote", c.remote, "queue", cap(c.send))
	}
	// Free the queued messages now rather than when the writer gets to them,
	// which may take a write timeout.
	c.release()
}

// setReplay replaces the messages to replay before the queue.
func (c *client) setReplay(replay []*sink.Message) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		done(replay)
		return
	}
	old := c.replay
	c.replay = replay
	c.hasReplay.Store(replay != nil)
	c.mu.Unlock()
	done(old)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *client) takeReplay() []*sink.Message {
	c.mu.Lock()
	r := c.replay
	c.replay = nil
	c.hasReplay.Store(false)
	c.mu.Unlock()
	return r
}

// stop asks the writer to end the connection, with a close frame when code
// is not 0. Only the first call counts; it reports whether it was the first.
func (c *client) stop(code int, reason string) bool {
	first := false
	c.stopOnce.Do(func() {
		c.code, c.reason = code, reason
		close(c.kill)
		first = true
	})
	return first
}

// release ends queueing and settles whatever is still queued. It may run
// concurrently with the writer taking messages: each is taken by one of them.
func (c *client) release() {
	c.mu.Lock()
	c.closed = true
	replay := c.replay
	c.replay = nil
	c.hasReplay.Store(false)
	c.mu.Unlock()
	done(replay)
	for {
		select {
		case m := <-c.send:
			m.Done(true)
		default:
			return
		}
	}
}

func done(ms []*sink.Message) {
	for _, m := range ms {
		m.Done(true)
	}
}

// writeLoop is the client's only writer of data and pings (gorilla allows one
// concurrent writer; close frames go through WriteControl).
func (c *client) writeLoop() {
	defer close(c.writerDone)
	ping := time.NewTicker(c.hub.opts.PingInterval)
	defer ping.Stop()
	for c.writeNext(ping.C) {
	}
	c.shutdown()
}

// writeNext writes the next message, replay or ping; false once the client
// is stopped or a write failed.
func (c *client) writeNext(ping <-chan time.Time) bool {
	select {
	case <-c.kill:
		return false
	default:
	}
	if c.hasReplay.Load() {
		return c.writeReplay()
	}
	select {
	case <-c.kill:
		return false
	case <-c.wake:
		return true
	case m := <-c.send:
		err := c.write(m)
		m.Done(true)
		return c.ok(err)
	case <-ping:
		_ = c.conn.SetWriteDeadline(time.Now().Add(c.hub.opts.WriteTimeout))
		return c.ok(c.conn.WriteMessage(websocket.PingMessage, nil))
	}
}

func (c *client) writeReplay() bool {
	replay := c.takeReplay()
	for i, m := range replay {
		select {
		case <-c.kill:
			done(replay[i:])
			return false
		default:
		}
		err := c.write(m)
		m.Done(true)
		if !c.ok(err) {
			done(replay[i+1:])
			return false
		}
	}
	return true
}

// write writes the message's shared payload as one text message.
func (c *client) write(m *sink.Message) error {
	_ = c.conn.SetWriteDeadline(time.Now().Add(c.hub.opts.WriteTimeout))
	if err := c.conn.WriteMessage(websocket.TextMessage, m.Payload()); err != nil {
		return err
	}
	c.hub.sent.Add(1)
	c.hub.bytes.Add(uint64(m.Len()))
	return nil
}

func (c *client) ok(err error) bool {
	if err == nil {
		return true
	}
	c.hub.log.Debug("websocket write failed", "remote", c.remote, "error", err)
	c.stop(0, "")
	return false
}

// shutdown ends the connection once the client is stopped: the close frame
// (when stop asked for one), a short wait for the peer's reply so that
// closing the socket does not reset a connection whose peer has not read the
// frame yet, the socket, and what is still queued.
func (c *client) shutdown() {
	if c.code != 0 {
		msg := websocket.FormatCloseMessage(c.code, c.reason)
		if err := c.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(closeGrace)); err == nil {
			t := time.NewTimer(closeGrace)
			select {
			case <-c.readerDone:
			case <-t.C:
			}
			t.Stop()
		}
	}
	_ = c.conn.Close()
	c.release()
}

// readLoop reads until the connection fails: pongs and messages keep the
// read deadline moving (a vanished client is dropped within two ping
// intervals), text messages are subscriptions. After a protocol error it
// keeps reading, so that the peer's close reply is consumed.
func (c *client) readLoop() {
	wait := 2 * c.hub.opts.PingInterval
	c.conn.SetReadLimit(c.hub.opts.ReadLimit)
	_ = c.conn.SetReadDeadline(time.Now().Add(wait))
	c.conn.SetPongHandler(func(string) error {
		return c.conn.SetReadDeadline(time.Now().Add(wait))
	})
	for {
		mt, p, err := c.conn.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) {
				c.hub.log.Debug("websocket read ended", "remote", c.remote, "error", err)
			}
			return
		}
		_ = c.conn.SetReadDeadline(time.Now().Add(wait))
		select {
		case <-c.kill:
			continue // closing: only the peer's reply matters now
		default:
		}
		if mt != websocket.TextMessage {
			c.stop(websocket.CloseUnsupportedData, "binary messages are not supported")
			continue
		}
		if cmd, ok := commandOf(p); ok && c.hub.opts.Commands != nil {
			c.commanded.Store(true)
			c.hub.opts.Commands(c.caller, cmd, c.reply)
			continue
		}
		sel, err := selectionFromMessage(p)
		if err != nil {
			c.stop(websocket.ClosePolicyViolation, truncate("bad subscribe message: "+err.Error(), 120))
			continue
		}
		c.hub.subscribe(c, sel)
	}
}

// truncate keeps a close reason within a control frame (125 bytes with the
// code), on a UTF-8 boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// commandOf returns the request of a message {"command": {…}}.
func commandOf(p []byte) (json.RawMessage, bool) {
	var msg struct {
		Command json.RawMessage `json:"command"`
	}
	if !bytes.Contains(p, []byte(`"command"`)) || json.Unmarshal(p, &msg) != nil || len(msg.Command) == 0 {
		return nil, false
	}
	return msg.Command, true
}

// reply queues a command response for the client's writer.
func (c *client) reply(resp []byte) {
	const head, tail = `{"commandResponse":`, `}`
	m := sink.NewMessage(len(head) + len(resp) + len(tail))
	b := append(append(append(make([]byte, 0, len(head)+len(resp)+len(tail)), head...), resp...), tail...)
	m.SetPayload(b)
	m.Kind = sink.KindStatus
	c.offer(m)
	m.Done(true)
}
