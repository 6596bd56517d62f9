package mqtt5sink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/mqttsink"
	"github.com/uagate/gateway/uastack/ua"
)

// Config is the MQTT sink's configuration, shared with package mqttsink;
// ProtocolVersion 0 means 5 here.
type Config = mqttsink.Config

// DefaultWindow bounds the publishes in flight on one connection, below
// the broker's Receive Maximum.
const DefaultWindow = 1024

// Errors of the sink.
var (
	// ErrAckTimeout: the broker did not confirm a publish within AckTimeout.
	ErrAckTimeout = errors.New("mqtt5sink: no acknowledgement from the broker in time")
	// ErrTooLarge: a message larger than the broker's Maximum Packet Size
	// (from its CONNACK); it is refused without being sent.
	ErrTooLarge = errors.New("mqtt5sink: message larger than the broker takes")
)

// Sink is an MQTT 5 output. See the package comment.
type Sink struct {
	cfg     Config
	qos     byte
	topics  *sink.Topics
	log     *slog.Logger
	status  string // status topic; "" without PublisherID
	statusA sink.Addr
	willMsg []byte
	expiry  uint32 // Message Expiry Interval of data messages, seconds

	mu     sync.Mutex
	conn   *connection
	closed bool

	enc encoder // Publish's, reused (one Output goroutine calls Publish)
}

// encoder holds the buffers a publish is encoded into.
type encoder struct {
	props []byte
	head  []byte
	arr   [2][]byte
	bufs  net.Buffers
}

// New validates c and returns a sink; nothing connects before Connect.
func New(c Config) (*Sink, error) {
	if c.ProtocolVersion == 0 {
		c.ProtocolVersion = config.MQTTv5
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("mqtt5sink: %w", err)
	}
	if c.ProtocolVersion != config.MQTTv5 {
		return nil, fmt.Errorf("mqtt5sink %s: protocolVersion %d is package mqttsink's", c.Name, c.ProtocolVersion)
	}
	topics, err := sink.NewTopics(c.Topics, '/', mqttsink.Sanitize, c.TopicCacheSize)
	if err != nil {
		return nil, fmt.Errorf("mqtt5sink %s: %w", c.Name, err)
	}
	s := &Sink{cfg: c, qos: byte(c.QoS), topics: topics, log: c.Logger.With("sink", c.Name),
		expiry: uint32((c.MessageExpiry + time.Second - 1) / time.Second)}
	if c.PublisherID != "" {
		s.statusA = sink.Addr{Publisher: c.PublisherID}
		s.status = topics.Render(sink.KindStatus, &s.statusA)
		s.willMsg = mqttsink.StatusPayload(c.ClientID, c.PublisherID, ua.PubSubStateError)
	}
	return s, nil
}

// Name implements sink.Sink.
func (s *Sink) Name() string { return s.cfg.Name }

// Guarantee implements sink.Sink: at-least-once for QoS 1 and 2.
func (s *Sink) Guarantee() config.Guarantee {
	if s.qos > 0 {
		return config.AtLeastOnce
	}
	return config.AtMostOnce
}

// Connected implements sink.ConnState.
func (s *Sink) Connected() bool {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	return c != nil && !c.lost.Is()
}

// StatusTopic is the topic of the status and the will ("" without a
// PublisherID).
func (s *Sink) StatusTopic() string { return s.status }

// Connect dials the broker, connects a new paho client (ending the previous
// connection), and publishes the Operational status.
func (s *Sink) Connect(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("mqtt5sink %s: closed", s.cfg.Name)
	}
	old := s.conn
	s.conn = nil
	s.mu.Unlock()
	if old != nil {
		old.end(fmt.Errorf("mqtt5sink %s: reconnecting: %w", s.cfg.Name, sink.ErrNotConnected))
	}
	c, err := s.connect(ctx)
	if err != nil {
		return err
	}
	if s.status != "" {
		if err := s.sendStatus(ctx, c, ua.PubSubStateOperational); err != nil {
			c.end(err)
			return fmt.Errorf("mqtt5sink %s: status: %w", s.cfg.Name, err)
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.end(fmt.Errorf("mqtt5sink %s: closed: %w", s.cfg.Name, sink.ErrNotConnected))
		return fmt.Errorf("mqtt5sink %s: closed", s.cfg.Name)
	}
	s.conn = c
	s.mu.Unlock()
	return nil
}

// connect makes one connection: dial, CONNECT (with the will), CONNACK,
// and the broker's limits taken from it.
func (s *Sink) connect(ctx context.Context) (*connection, error) {
	var tc *tls.Config
	if s.cfg.TLS != nil {
		var err error
		if tc, err = s.cfg.TLS.Config(); err != nil {
			return nil, fmt.Errorf("mqtt5sink %s: %w", s.cfg.Name, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ConnectTimeout)
	defer cancel()
	raw, err := dial(ctx, s.cfg.URL, tc)
	if err != nil {
		return nil, fmt.Errorf("mqtt5sink %s: connect %s: %w", s.cfg.Name, s.cfg.URL, sink.ExplainTLS(err, s.cfg.TLS))
	}
	c := newConnection(s, raw)
	cl := paho.NewClient(paho.ClientConfig{
		ClientID:      s.cfg.ClientID,
		Conn:          c.lc,
		Session:       c,
		PacketTimeout: s.cfg.ConnectTimeout,
		OnClientError: func(err error) { c.kill(c.lostErr(err)) },
		// The reason of a DISCONNECT reaches ConnectionLost first.
		OnServerDisconnect: func(*paho.Disconnect) {},
	})
	ca, err := cl.Connect(ctx, s.connectPacket())
	if err != nil {
		_ = raw.Close()
		if ca != nil {
			err = fmt.Errorf("refused: %s (reason code %#x)", (&packets.Connack{ReasonCode: ca.ReasonCode}).Reason(), ca.ReasonCode)
			if ca.Properties != nil && ca.Properties.ReasonString != "" {
				err = fmt.Errorf("%w: %s", err, ca.Properties.ReasonString)
			}
			if ca.ReasonCode == 0x86 || ca.ReasonCode == 0x87 || ca.ReasonCode == 0x8c {
				err = fmt.Errorf("%w: %w", sink.ErrUnauthorized, err)
			}
			return nil, fmt.Errorf("mqtt5sink %s: connect %s as %q: %w", s.cfg.Name, s.cfg.URL, s.cfg.Username, err)
		}
		return nil, fmt.Errorf("mqtt5sink %s: connect %s: %w", s.cfg.Name, s.cfg.URL, sink.ExplainTLS(err, s.cfg.TLS))
	}
	window := DefaultWindow
	var refuse string
	if p := ca.Properties; p != nil {
		if p.ReceiveMaximum != nil {
			window = min(window, int(*p.ReceiveMaximum))
		}
		if p.MaximumPacketSize != nil {
			c.maxPacket = *p.MaximumPacketSize
		}
		switch {
		case p.MaximumQoS != nil && *p.MaximumQoS < s.qos:
			refuse = fmt.Sprintf("the broker takes qos %d at most, the sink is configured for %d", *p.MaximumQoS, s.qos)
		case !p.RetainAvailable:
			refuse = "the broker has no retained messages, which metadata and status need"
		}
	}
	c.mu.Lock()
	c.ring = make([]entry, max(window, 1))
	c.mu.Unlock()
	c.client = cl
	go c.watchdog()
	if refuse != "" {
		c.end(errors.New(refuse))
		return nil, fmt.Errorf("mqtt5sink %s: connect %s: %s", s.cfg.Name, s.cfg.URL, refuse)
	}
	return c, nil
}

// connectPacket is the CONNECT: clean start or a session that does not
// expire (cleanSession false), the credentials, and the retained ua-status
// Error as the will.
func (s *Sink) connectPacket() *paho.Connect {
	expiry := uint32(0)
	if !s.cfg.CleanSession {
		expiry = 0xFFFFFFFF
	}
	cp := &paho.Connect{
		ClientID:   s.cfg.ClientID,
		CleanStart: s.cfg.CleanSession,
		KeepAlive:  uint16(min(s.cfg.KeepAlive/time.Second, 65535)),
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry, RequestProblemInfo: true},
	}
	if s.cfg.Username != "" {
		cp.Username, cp.UsernameFlag = s.cfg.Username, true
		cp.Password, cp.PasswordFlag = []byte(s.cfg.Password), s.cfg.Password != ""
	}
	if s.status != "" {
		utf8 := byte(1)
		cp.WillMessage = &paho.WillMessage{Retain: true, QoS: s.qos, Topic: s.status, Payload: s.willMsg}
		cp.WillProperties = &paho.WillProperties{PayloadFormat: &utf8, ContentType: ContentType,
			User: paho.UserProperties{{Key: "UAMessageType", Value: "ua-status"}, {Key: "PublisherId", Value: s.cfg.PublisherID}}}
	}
	return cp
}

// end kills c and waits until paho's goroutines and the watchdog ended.
func (c *connection) end(why error) {
	c.kill(why)
	if c.client != nil {
		<-c.client.Done()
		<-c.wdone
	}
}

// Publish writes m to the broker; the broker's acknowledgement confirms it
// (QoS 1, 2), or the write does (QoS 0).
func (s *Sink) Publish(m *sink.Message, ack sink.Acker) error {
	s.mu.Lock()
	c, closed := s.conn, s.closed
	s.mu.Unlock()
	if closed || c == nil || c.lost.Is() {
		return sink.ErrNotConnected
	}
	topic := s.topics.Topic(m.Kind, &m.Addr)
	if topic == "" {
		return fmt.Errorf("mqtt5sink %s: no topic for %v messages", s.cfg.Name, m.Kind)
	}
	retained := m.Retained || m.Kind == sink.KindMetaData || m.Kind == sink.KindStatus
	return s.send(c, &s.enc, m, ack, topic, retained, m.Kind, &m.Addr, m.Samples, m.Payload())
}

// send writes one PUBLISH on c. With QoS 1 or 2 the entry (m, ack) is in
// the window once send returns nil; with QoS 0 ack is confirmed before.
// A non-nil error means nothing was taken.
func (s *Sink) send(c *connection, e *encoder, m *sink.Message, ack sink.Acker, topic string, retained bool, k sink.Kind, a *sink.Addr, samples bool, payload []byte) error {
	var epoch uint64
	if m != nil {
		epoch = m.Fence.Epoch()
	}
	e.props = appendProperties(e.props[:0], k, a, samples, s.expiry, epoch)
	size, err := publishSize(len(topic), s.qos, len(e.props), len(payload))
	if err != nil {
		return fmt.Errorf("mqtt5sink %s: %s: %w", s.cfg.Name, topic, err)
	}
	if c.maxPacket > 0 && size > int(c.maxPacket) {
		return fmt.Errorf("%w: %d bytes on %s, the broker's maximum packet size is %d", ErrTooLarge, size, topic, c.maxPacket)
	}
	if s.qos > 0 && !c.reserve() {
		return sink.ErrNotConnected
	}
	c.lc.Lock()
	var id uint16
	if s.qos > 0 {
		var ok bool
		if id, ok = c.push(m, ack, time.Now().UnixNano()); !ok {
			c.lc.Unlock()
			return sink.ErrNotConnected
		}
	}
	e.head = appendPublishHeader(e.head[:0], topic, s.qos, retained, id, e.props, len(payload))
	e.arr = [2][]byte{e.head, payload}
	e.bufs = e.arr[:]
	err = c.write(&e.bufs)
	e.arr[1] = nil
	c.lc.Unlock()
	if err != nil {
		// With QoS 1 and 2 kill fails the entry: it was taken.
		c.kill(c.lostErr(err))
		if s.qos == 0 {
			return sink.ErrNotConnected
		}
		return nil
	}
	if s.qos == 0 {
		ack.Confirmed(m, nil)
	}
	return nil
}

// ackChan is an Acker for the sink's own status messages.
type ackChan chan error

func (a ackChan) Confirmed(_ *sink.Message, err error) { a <- err }

// sendStatus publishes the retained ua-status state and waits for its
// acknowledgement.
func (s *Sink) sendStatus(ctx context.Context, c *connection, state ua.PubSubState) error {
	done := make(ackChan, 1)
	var e encoder
	if err := s.send(c, &e, nil, done, s.status, true, sink.KindStatus, &s.statusA, false, mqttsink.StatusPayload(s.cfg.ClientID, s.cfg.PublisherID, state)); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close waits (until ctx ends) for the publishes in flight, publishes the
// Disabled status, disconnects gracefully (the broker discards the will)
// and fails whatever is left.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for c.pending() > 0 && ctx.Err() == nil && !c.lost.Is() {
		select {
		case <-tick.C:
		case <-ctx.Done():
		case <-c.lost.C():
		}
	}
	var err error
	if !c.lost.Is() && ctx.Err() == nil {
		if s.status != "" {
			if serr := s.sendStatus(ctx, c, ua.PubSubStateDisabled); serr != nil {
				err = fmt.Errorf("mqtt5sink %s: status at close: %w", s.cfg.Name, serr)
			}
		}
		_ = c.client.Disconnect(&paho.Disconnect{ReasonCode: 0})
	}
	c.end(fmt.Errorf("mqtt5sink %s: closed: %w", s.cfg.Name, sink.ErrNotConnected))
	return err
}
