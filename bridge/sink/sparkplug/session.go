package sparkplug

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/uastack/ua"
)

// The session: one MQTT connection after another, each a Sparkplug
// session. A connection registers NDEATH (with the connection's bdSeq) as
// its will, subscribes to NCMD, DCMD and, with a primary host, its STATE,
// then — once the host is online — publishes NBIRTH (seq 0), a DBIRTH per
// device whose sessions are up, and what the store held (as history).
// From then on the data goes out as it comes (Publish), each message with
// the next seq, and the loop births and kills devices as their sessions
// come and go, births again on a rebirth request, and leaves the broker
// (NDEATH, disconnect, connect again) when the primary host goes offline.

// Metric names of the node (3.0 §6.4.18).
const (
	MetricBdSeq   = "bdSeq"
	MetricRebirth = "Node Control/Rebirth"
)

// connection is one MQTT connection; lost is closed once it is unusable.
type connection struct {
	client mqtt.Client
	lost   *sink.Lost
}

// run is the session loop: connect, serve, reconnect with backoff.
func (n *Node) run() {
	defer close(n.done)
	bo := n.cfg.Backoff
	bo.MaxElapsed = 0
	for n.ctx.Err() == nil {
		// The devices exist before a connection does: what the feeds
		// encode while the broker is away is held, not unmapped.
		n.refreshDevices()
		c, err := n.dial()
		if err != nil {
			if n.ctx.Err() != nil {
				return
			}
			n.st.connectFailures.Add(1)
			n.setErr(err)
			d, _ := bo.Next(err)
			n.log.Warn("sparkplug: connect failed", "err", err, "retryIn", d.Round(time.Millisecond))
			if !n.waitRetry(d) {
				return
			}
			continue
		}
		bo.Reset()
		n.st.connects.Add(1)
		n.serve(c)
	}
}

// refreshDevices makes the devices what the writer groups say now.
func (n *Node) refreshDevices() {
	n.pubMu.Lock()
	n.refresh.Store(false)
	n.refreshLocked()
	n.pubMu.Unlock()
}

// waitRetry waits d before the next connection attempt, refreshing the
// devices when the writer groups change meanwhile; false when the node
// closes.
func (n *Node) waitRetry(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-n.wake:
			if n.refresh.Load() {
				n.refreshDevices()
			}
		case <-n.ctx.Done():
			return false
		}
	}
}

// dial makes a new MQTT connection with the next bdSeq in its will and
// subscribes to the node's commands (and the primary host's STATE).
func (n *Node) dial() (*connection, error) {
	n.pubMu.Lock()
	if n.dialed {
		n.bdSeq = (n.bdSeq + 1) % 256 // 3.0 §5.3: 0 first, then one more per CONNECT
	}
	n.dialed = true
	bd := n.bdSeq
	n.st.bdSeq.Store(bd)
	will := n.ndeath()
	n.pubMu.Unlock()

	o := mqtt.NewClientOptions().
		AddBroker(n.cfg.URL).
		SetClientID(n.cfg.ClientID).
		SetCleanSession(true). // 3.0 §5.2: every Sparkplug client
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(n.cfg.ConnectTimeout).
		SetKeepAlive(n.cfg.KeepAlive).
		SetWriteTimeout(n.cfg.WriteTimeout).
		SetStore(mqtt.NewMemoryStore()).
		SetOrderMatters(false).
		SetBinaryWill(n.topics.ndeath, will, 1, false)
	if n.cfg.Username != "" {
		o.SetUsername(n.cfg.Username).SetPassword(n.cfg.Password)
	}
	if n.cfg.TLS != nil {
		tc, err := n.cfg.TLS.Config()
		if err != nil {
			return nil, fmt.Errorf("sparkplug %s: %w", n.cfg.Name, err)
		}
		o.SetTLSConfig(tc)
	}
	c := &connection{lost: sink.NewLost()}
	o.SetConnectionLostHandler(func(_ mqtt.Client, err error) {
		n.log.Warn("sparkplug: connection lost", "err", err)
		c.lost.Mark(fmt.Errorf("sparkplug %s: connection lost: %w: %w", n.cfg.Name, sink.ErrNotConnected, err))
		n.poke()
	})
	c.client = mqtt.NewClient(o)
	if err := await(n.ctx, c, c.client.Connect(), n.cfg.ConnectTimeout); err != nil {
		c.client.Disconnect(0)
		if errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword) || errors.Is(err, packets.ErrorRefusedNotAuthorised) {
			return nil, fmt.Errorf("sparkplug %s: connect %s as %q: %w: %w", n.cfg.Name, n.cfg.URL, n.cfg.Username, sink.ErrUnauthorized, err)
		}
		return nil, fmt.Errorf("sparkplug %s: connect %s: %w", n.cfg.Name, n.cfg.URL, sink.ExplainTLS(err, n.cfg.TLS))
	}
	// 3.0 §5.3: NCMD (and DCMD) with QoS 1 before NBIRTH.
	subs := map[string]byte{n.topics.ncmd: 1, n.topics.dcmd + "+": 1}
	if n.topics.state != "" {
		subs[n.topics.state] = 1
	}
	if err := await(n.ctx, c, c.client.SubscribeMultiple(subs, n.onMessage), n.cfg.ConnectTimeout); err != nil {
		c.client.Disconnect(0)
		return nil, fmt.Errorf("sparkplug %s: subscribe: %w", n.cfg.Name, err)
	}
	n.pubMu.Lock()
	n.setConn(c)
	n.pubMu.Unlock()
	n.log.Info("sparkplug: connected", "bdSeq", bd)
	return c, nil
}

// await waits for tok until timeout, the connection's loss or ctx's end.
func await(ctx context.Context, c *connection, tok mqtt.Token, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-tok.Done():
		return tok.Error()
	case <-c.lost.C():
		return c.lost.Err()
	case <-t.C:
		return fmt.Errorf("no answer in %v", timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// serve runs one connection's Sparkplug session until the connection is
// lost, the primary host goes offline or the node closes.
func (n *Node) serve(c *connection) {
	tick := time.NewTicker(n.cfg.CheckInterval)
	defer tick.Stop()
	check := true
	for {
		n.pubMu.Lock()
		if n.conn != c { // lost while publishing
			n.pubMu.Unlock()
			return
		}
		if n.refresh.Swap(false) || check {
			n.refreshLocked()
		}
		if n.live && n.rebirth.Swap(false) {
			n.st.rebirths.Add(1)
			n.log.Info("sparkplug: rebirth requested")
			n.birthLocked()
		} else if !n.live && n.hostOnline() {
			n.rebirth.Store(false)
			n.birthLocked()
		}
		if n.live && check {
			n.checkDevicesLocked()
			n.flushStoreLocked() // what waits for a device's birth
		}
		if n.live && !n.hostOnline() {
			// 3.0 §5.5: the primary host went offline: NDEATH, disconnect,
			// and connect again to wait for it.
			n.log.Warn("sparkplug: the primary host is offline; leaving the broker", "host", n.cfg.PrimaryHostID)
			if err := n.publishWait(n.ctx, c, n.topics.ndeath, n.ndeath(), 1); err != nil {
				n.log.Debug("sparkplug: NDEATH", "err", err)
			}
			c.client.Disconnect(250)
			c.lost.Mark(fmt.Errorf("sparkplug %s: primary host offline: %w", n.cfg.Name, sink.ErrNotConnected))
			n.setConn(nil)
			n.pubMu.Unlock()
			return
		}
		n.pubMu.Unlock()
		check = false
		select {
		case <-n.ctx.Done():
			return // Close sends NDEATH and disconnects
		case <-c.lost.C():
			n.pubMu.Lock()
			if n.conn == c {
				n.setConn(nil)
			}
			n.pubMu.Unlock()
			n.setErr(c.lost.Err())
			return
		case <-n.wake:
			check = true
		case <-tick.C:
			check = true
		}
	}
}

// hostOnline reports whether the node may be born: no primary host, or its
// last STATE said online.
func (n *Node) hostOnline() bool {
	if n.cfg.PrimaryHostID == "" {
		return true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.host.online
}

// birthLocked publishes NBIRTH (seq 0), a DBIRTH per device whose sessions
// are up, then what the store held (pubMu held, connected).
func (n *Node) birthLocked() {
	for _, d := range n.devs {
		d.born = false
		d.online.Store(false)
	}
	n.live = true // publishLocked needs it; cleared again if anything fails
	n.seq = 0
	n.liveAt = time.Now()
	if err := n.publishLocked(n.topics.nbirth, withSeq(n.nbirth(), 0)); err != nil {
		return
	}
	n.st.nodeBirths.Add(1)
	n.checkDevicesLocked()
	n.flushStoreLocked()
	if n.live {
		n.st.online.Store(true)
		n.log.Info("sparkplug: online", "bdSeq", n.bdSeq, "devices", len(n.devs))
	}
}

// nbirth is the NBIRTH payload: bdSeq and Node Control/Rebirth (without
// aliases, 3.0 §6.4.18), seq room left for the caller.
func (n *Node) nbirth() []byte {
	now := uint64(time.Now().UnixMilli())
	var e encoder
	p := beginPayload(nil, now)
	bd := ua.DataValue{Value: ua.NewInt64Variant(int64(n.bdSeq))}
	p, _ = e.appendMetric(p, &metric{name: MetricBdSeq, dtype: Int64, ts: now}, &bd, 0)
	rb := ua.DataValue{Value: ua.NewBooleanVariant(false)}
	p, _ = e.appendMetric(p, &metric{name: MetricRebirth, dtype: Boolean, ts: now}, &rb, 0)
	return p
}

// ndeath is the NDEATH payload: bdSeq only, no seq (3.0 §6.4.7).
func (n *Node) ndeath() []byte {
	now := uint64(time.Now().UnixMilli())
	var e encoder
	p := beginPayload(nil, now)
	bd := ua.DataValue{Value: ua.NewInt64Variant(int64(n.bdSeq))}
	p, _ = e.appendMetric(p, &metric{name: MetricBdSeq, dtype: Int64, ts: now}, &bd, 0)
	return body(p)
}

// publishLocked publishes a payload (QoS 0, not retained: 3.0 §6.4) with
// the current seq and counts it (pubMu held, online). When the connection
// fails the node is no longer online and the loop sees it lost.
func (n *Node) publishLocked(topic string, payload []byte) error {
	c := n.conn
	if c == nil || !n.live {
		return sink.ErrNotConnected
	}
	tok := c.client.Publish(topic, 0, false, payload)
	n.tmr.Reset(n.cfg.WriteTimeout)
	var err error
	select {
	case <-tok.Done():
		err = tok.Error()
	case <-c.lost.C():
		err = c.lost.Err()
	case <-n.tmr.C:
		err = fmt.Errorf("sparkplug %s: not written in %v: %w", n.cfg.Name, n.cfg.WriteTimeout, sink.ErrNotConnected)
		c.client.Disconnect(0)
		c.lost.Mark(err)
	case <-n.ctx.Done():
		// Closing: Close, waiting for pubMu, is bounded by its context.
		err = fmt.Errorf("sparkplug %s: closed: %w", n.cfg.Name, sink.ErrNotConnected)
	}
	n.tmr.Stop()
	if err != nil {
		n.live = false
		n.st.online.Store(false)
		n.setErr(err)
		return err
	}
	n.st.seq.Store(uint64(n.seq))
	n.seq++ // wraps at 255 to 0 (3.0 §6.4.5)
	return nil
}

// publishWait publishes with qos and waits for the broker (the NDEATH
// before a disconnect), until ctx ends.
func (n *Node) publishWait(ctx context.Context, c *connection, topic string, payload []byte, qos byte) error {
	return await(ctx, c, c.client.Publish(topic, qos, false, payload), n.cfg.WriteTimeout)
}

// publishData sends a data message of a feed, or keeps it for the next
// birth (pubMu held). While the store holds data this session has not
// sent yet, new data joins it behind: the host gets every metric's values
// in order.
func (n *Node) publishData(m *sink.Message) {
	idx, version := untoken(m.Token)
	d := n.deviceOf(idx)
	if d == nil {
		n.st.unmapped.Add(1)
		return
	}
	if !n.live || n.backlog {
		n.hold(d, version, m.Created, body(m.Payload()))
		return
	}
	if d.removed.Load() || (!d.born && !d.up()) {
		// Values from before the device died: its next DBIRTH carries the
		// current ones.
		n.st.stale.Add(1)
		return
	}
	if !d.born {
		n.dbirthLocked(d)
		if !n.live {
			n.hold(d, version, m.Created, body(m.Payload()))
			return
		}
	}
	if !n.sendData(d, version, m.Created, body(m.Payload()), m.Payload()) {
		n.hold(d, version, m.Created, body(m.Payload()))
	}
}

// hold puts the body b of a data message made at created for device d's
// metrics of version into the store (pubMu held). A durable store gets it
// named (appendNamed): a later process gives the names its own aliases.
func (n *Node) hold(d *device, version uint32, created int64, b []byte) {
	n.backlog = true
	r := Record{Device: d.id, Token: uint64(d.index)<<32 | uint64(version), Created: created, Payload: b}
	if n.durable {
		dm := d.metrics.Load()
		if dm == nil || dm.version != version {
			// Its metrics changed since it was encoded: stale, as it would
			// be when the store is sent.
			n.st.stale.Add(1)
			return
		}
		var k int
		var err error
		n.named, k, err = appendNamed(n.named[:0], b, dm)
		if err != nil || k == 0 {
			n.log.Error("sparkplug: a data message does not decode", "device", d.id, "err", err)
			n.st.stale.Add(1)
			return
		}
		r.Payload, r.Named = n.named, true
	}
	n.cfg.Store.Put(r)
}

// sendData publishes the body b of a data message made at created for
// device d's metrics of version (pubMu held, online); p is the message with
// its seq room when it may go as it is (nil: it must be rewritten). A
// message older than the device's last DBIRTH goes with its metrics older
// than the values that birth carried marked historical. It returns false
// when the connection failed (the message was not sent; the caller keeps
// it), true when it was sent or left out.
func (n *Node) sendData(d *device, version uint32, created int64, b, p []byte) bool {
	dm := d.metrics.Load()
	if dm == nil || dm.version != version || !d.born {
		n.st.stale.Add(1)
		return true
	}
	hist := false
	if created < d.birthAt || p == nil {
		var err error
		n.hist, hist, err = appendRebirthed(n.hist, b, func(alias, ts uint64) bool {
			bt, ok := d.birthTS[alias]
			return !ok || ts <= bt
		})
		if err != nil {
			n.log.Error("sparkplug: a held message does not decode", "device", d.id, "err", err)
			n.st.stale.Add(1)
			return true
		}
		p = n.hist
	}
	return n.publishDDATA(d, p, hist)
}

// sendNamed publishes the named record b for device d (pubMu held, online,
// d born) with the aliases d's metrics have now, found by name; a metric
// not newer than the value the device's last DBIRTH carried is marked
// historical. Metrics whose name d no longer has, or whose datatype
// changed, are left out (counted): their values would not mean at the host
// what they meant. A record with metrics whose type the device does not
// know yet (no value since the start: its next DBIRTH will say) waits for
// it, up to DeviceWait after the node's birth. It returns false when the
// record waits or the connection failed.
func (n *Node) sendNamed(d *device, b []byte) bool {
	var a aliased
	var err error
	n.hist, a, err = appendAliased(n.hist, b, d.metrics.Load(), d.birthTS)
	if err == nil && a.unknown > 0 && time.Since(n.liveAt) < n.cfg.DeviceWait {
		return false
	}
	n.st.staleMetrics.Add(uint64(a.left))
	if err != nil || a.kept == 0 {
		if err != nil {
			n.log.Error("sparkplug: a held message does not decode", "device", d.id, "err", err)
		}
		n.st.stale.Add(1)
		return true
	}
	return n.publishDDATA(d, n.hist, a.hist)
}

// publishDDATA publishes payload p (with its seq room) as d's DDATA and
// counts it (pubMu held, online); false when the connection failed.
func (n *Node) publishDDATA(d *device, p []byte, hist bool) bool {
	if err := n.publishLocked(d.ddata, withSeq(p, n.seq)); err != nil {
		return false
	}
	n.st.dataMessages.Add(1)
	if hist {
		n.st.historical.Add(1)
	}
	return true
}

// heldDevice is the device of a held record (nil: none).
func (n *Node) heldDevice(r *Record) *device {
	if r.Named {
		return n.byID[r.Device]
	}
	idx, _ := untoken(r.Token)
	return n.deviceOf(idx)
}

// flushStoreLocked sends what the store held, in order (pubMu held, born).
// A record of a device the node does not know yet (its writer group still
// starting) or whose sessions are not up yet (the gateway just started)
// stops it, keeping the order, until the device is born or DeviceWait has
// passed since the node's birth: the session loop tries again at its
// checks. Records of devices that are gone, or that waited longer, are
// left out; so are those in alias form whose device's metrics changed
// since (their aliases or types may no longer be the host's). What the
// connection did not take stays, in order.
func (n *Node) flushStoreLocked() {
	if !n.backlog {
		return
	}
	if n.cfg.Store.Stats().Messages == 0 {
		n.backlog = false
		return
	}
	n.cfg.Store.Drain(func(r Record) bool {
		if !n.live {
			return false
		}
		d := n.heldDevice(&r)
		switch {
		case d != nil && d.removed.Load():
			n.st.stale.Add(1)
			return true
		case d != nil && !d.born && d.up():
			n.dbirthLocked(d)
			if !n.live {
				return false
			}
		case d == nil || !d.born:
			// Not known yet (its writer group starting) or its sessions
			// not up yet.
			if time.Since(n.liveAt) < n.cfg.DeviceWait {
				return false
			}
			n.st.stale.Add(1)
			return true
		}
		if r.Named {
			return n.sendNamed(d, r.Payload)
		}
		_, version := untoken(r.Token)
		return n.sendData(d, version, r.Created, r.Payload, nil)
	})
	n.backlog = n.cfg.Store.Stats().Messages > 0
}

// onMessage receives NCMD, DCMD and STATE (paho's goroutines).
func (n *Node) onMessage(_ mqtt.Client, msg mqtt.Message) {
	topic := msg.Topic()
	switch {
	case topic == n.topics.state && n.topics.state != "":
		n.onState(msg.Payload())
	case topic == n.topics.ncmd:
		n.onNCMD(msg.Payload())
	case strings.HasPrefix(topic, n.topics.dcmd):
		n.onDCMD(topic[len(n.topics.dcmd):], msg.Payload())
	}
}
