package mqttsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/ua"
)

// Default topic templates (Part 14 §7.3.4.7): the configuration's.
const (
	DefaultDataTopic     = config.DefaultMQTTDataTopic
	DefaultMetaDataTopic = config.DefaultMQTTMetaDataTopic
	DefaultStatusTopic   = config.DefaultMQTTStatusTopic
	DefaultFieldTopic    = config.DefaultPerFieldTopic
)

// Defaults of Config.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultKeepAlive      = 30 * time.Second
	DefaultWriteTimeout   = 10 * time.Second
	DefaultAckTimeout     = 30 * time.Second
	// pendingCap bounds the publishes waiting for their confirmation in the
	// sink; the Output's MaxInFlight is normally lower.
	pendingCap = 4096
)

// ErrAckTimeout: the broker did not confirm a publish within AckTimeout.
var ErrAckTimeout = errors.New("mqttsink: no acknowledgement from the broker in time")

// Config of an MQTT sink. Zero fields take the defaults.
type Config struct {
	Name     string // default "mqtt"
	URL      string // tcp://host:1883, ssl://host:8883, ws://, wss://
	ClientID string // default "uagate-<PublisherID>" ("uagate" without one)
	// QoS 0 (at-most-once), 1 or 2 (at-least-once). The configuration
	// model's default of 1 is applied by package config.
	QoS          int
	CleanSession bool
	// ProtocolVersion is 4 (MQTT 3.1.1, also for 0) or 5; a sink of this
	// package speaks 3.1.1, package mqtt5sink takes the same Config for 5.
	ProtocolVersion int
	// MessageExpiry is the MQTT 5 Message Expiry Interval of data
	// messages (whole seconds, rounded up); 0: none.
	MessageExpiry time.Duration
	Username      string
	Password      string
	TLS           *sink.TLSOptions
	// Topics are the templates; empty ones take the Default*Topic.
	Topics sink.TopicTemplates
	// PublisherID fills the status topic for the will and the status this
	// sink publishes itself; empty: no will, no status of its own.
	PublisherID    string
	ConnectTimeout time.Duration
	KeepAlive      time.Duration
	WriteTimeout   time.Duration // bound on handing one publish to paho's writer
	AckTimeout     time.Duration // bound on waiting for PUBACK / PUBCOMP
	TopicCacheSize int           // default sink.DefaultTopicCacheSize
	Logger         *slog.Logger  // default slog.Default()
}

// FromConfig maps the configuration model's MQTT sink; the password is
// passed resolved (config.Secret is resolved by package config).
func FromConfig(c config.MQTTSink, publisherID, password string) Config {
	out := Config{
		Name: c.Name, URL: c.URL, ClientID: c.ClientID, QoS: config.DefaultMQTTQoS,
		CleanSession:    c.CleanSession == nil || *c.CleanSession,
		ProtocolVersion: c.ProtocolVersion, MessageExpiry: c.MessageExpiry.D(),
		Username: c.Username, Password: password, PublisherID: publisherID,
		Topics: sink.TopicTemplates{Data: c.DataTopic, MetaData: c.MetaDataTopic, Status: c.StatusTopic},
		TLS:    sink.TLSFromConfig(c.TLS),
	}
	if c.QoS != nil {
		out.QoS = *c.QoS
	}
	if c.PerField != nil {
		out.Topics.Field = c.PerField.Topic
	}
	return out
}

// SetDefaults fills the zero fields with the defaults.
func (c *Config) SetDefaults() {
	if c.Name == "" {
		c.Name = "mqtt"
	}
	if c.ClientID == "" {
		c.ClientID = "uagate"
		if c.PublisherID != "" {
			c.ClientID += "-" + c.PublisherID
		}
	}
	for _, d := range []struct {
		p *string
		v string
	}{{&c.Topics.Data, DefaultDataTopic}, {&c.Topics.MetaData, DefaultMetaDataTopic}, {&c.Topics.Status, DefaultStatusTopic}, {&c.Topics.Field, DefaultFieldTopic}} {
		if *d.p == "" {
			*d.p = d.v
		}
	}
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{{&c.ConnectTimeout, DefaultConnectTimeout}, {&c.KeepAlive, DefaultKeepAlive}, {&c.WriteTimeout, DefaultWriteTimeout}, {&c.AckTimeout, DefaultAckTimeout}} {
		if *d.p <= 0 {
			*d.p = d.v
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ProtocolVersion == 0 {
		c.ProtocolVersion = config.MQTTv311
	}
}

// Validate names the first setting that cannot work (after SetDefaults).
func (c *Config) Validate() error {
	switch {
	case c.URL == "":
		return fmt.Errorf("mqttsink %s: url is empty", c.Name)
	case c.QoS < 0 || c.QoS > 2:
		return fmt.Errorf("mqttsink %s: qos %d: want 0, 1 or 2", c.Name, c.QoS)
	case c.QoS == 2 && !c.CleanSession:
		return fmt.Errorf("mqttsink %s: qos 2 needs cleanSession: the sink resends unconfirmed messages itself after a reconnect, and a persistent session could take a reused packet id for a duplicate and drop the message", c.Name)
	case c.ProtocolVersion != config.MQTTv311 && c.ProtocolVersion != config.MQTTv5:
		return fmt.Errorf("mqttsink %s: protocolVersion %d: want 4 (MQTT 3.1.1) or 5", c.Name, c.ProtocolVersion)
	case c.MessageExpiry < 0 || c.MessageExpiry > math.MaxUint32*time.Second:
		return fmt.Errorf("mqttsink %s: messageExpiry %s out of range", c.Name, c.MessageExpiry)
	case c.MessageExpiry != 0 && c.ProtocolVersion != config.MQTTv5:
		return fmt.Errorf("mqttsink %s: messageExpiry needs protocolVersion 5", c.Name)
	}
	if c.TLS != nil {
		if _, err := c.TLS.Config(); err != nil {
			return fmt.Errorf("mqttsink %s: %w", c.Name, err)
		}
	}
	return nil
}

// Sanitize maps the bytes a topic name must not contain ('+', '#', NUL)
// and the control characters a broker may refuse (mosquitto ends the
// connection) to '_'.
func Sanitize(b byte) byte {
	if b == '+' || b == '#' || b < 0x20 || b == 0x7f {
		return '_'
	}
	return b
}

// Sink is an MQTT output. See the package comment.
type Sink struct {
	cfg     Config
	qos     byte
	topics  *sink.Topics
	log     *slog.Logger
	status  string // status topic; "" without PublisherID
	willMsg []byte

	pending chan entry
	quit    chan struct{} // closed by Close after pending was drained or failed
	cdone   chan struct{} // closed when the confirmer ended

	outstanding atomic.Int64 // publishes not yet confirmed

	mu     sync.Mutex
	conn   *connection
	closed bool
}

// connection is one paho client; lost is closed once it is unusable.
type connection struct {
	client mqtt.Client
	lost   *sink.Lost // closed once it is unusable, with why
}

type entry struct {
	m    *sink.Message
	ack  sink.Acker
	tok  mqtt.Token
	conn *connection
	at   time.Time
}

// New validates c and starts the sink's confirmer; nothing connects before
// Connect.
func New(c Config) (*Sink, error) {
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.ProtocolVersion != config.MQTTv311 {
		return nil, fmt.Errorf("mqttsink %s: protocolVersion %d is package mqtt5sink's", c.Name, c.ProtocolVersion)
	}
	topics, err := sink.NewTopics(c.Topics, '/', Sanitize, c.TopicCacheSize)
	if err != nil {
		return nil, fmt.Errorf("mqttsink %s: %w", c.Name, err)
	}
	s := &Sink{
		cfg: c, qos: byte(c.QoS), topics: topics, log: c.Logger.With("sink", c.Name),
		pending: make(chan entry, pendingCap),
		quit:    make(chan struct{}),
		cdone:   make(chan struct{}),
	}
	if c.PublisherID != "" {
		s.status = topics.Render(sink.KindStatus, &sink.Addr{Publisher: c.PublisherID})
		s.willMsg = s.statusPayload(ua.PubSubStateError)
	}
	go s.confirmer()
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
	if c == nil {
		return false
	}
	select {
	case <-c.lost.C():
		return false
	default:
		return true
	}
}

// StatusTopic is the topic of the status and the will ("" without a
// PublisherID).
func (s *Sink) StatusTopic() string { return s.status }

// statusPayload encodes a ua-status message of the publisher.
func (s *Sink) statusPayload(state ua.PubSubState) []byte {
	return StatusPayload(s.cfg.ClientID, s.cfg.PublisherID, state)
}

// StatusPayload encodes a ua-status message of publisherID (IsCyclic
// false), with a MessageId made of clientID and the time.
func StatusPayload(clientID, publisherID string, state ua.PubSubState) []byte {
	e := jsonenc.NewEncoder(nil, jsonenc.Options{})
	defer e.Release()
	jsonenc.EncodeStatusMessage(e, &jsonenc.StatusMessage{
		MessageID:   fmt.Sprintf("%s-status-%d", clientID, time.Now().UnixNano()),
		PublisherID: publisherID,
		Status:      state,
	})
	return append([]byte(nil), e.Bytes()...)
}

// Connect builds a new paho client (ending the previous one) and connects
// it, then publishes the Operational status.
func (s *Sink) Connect(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("mqttsink %s: closed", s.cfg.Name)
	}
	old := s.conn
	s.conn = nil
	s.mu.Unlock()
	if old != nil {
		s.drop(old, sink.ErrNotConnected)
	}

	o := mqtt.NewClientOptions().
		AddBroker(s.cfg.URL).
		SetClientID(s.cfg.ClientID).
		SetCleanSession(s.cfg.CleanSession).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(s.cfg.ConnectTimeout).
		SetKeepAlive(s.cfg.KeepAlive).
		SetWriteTimeout(s.cfg.WriteTimeout).
		SetStore(mqtt.NewMemoryStore()).
		SetOrderMatters(false)
	if s.cfg.Username != "" {
		o.SetUsername(s.cfg.Username).SetPassword(s.cfg.Password)
	}
	if s.cfg.TLS != nil {
		tc, err := s.cfg.TLS.Config()
		if err != nil {
			return fmt.Errorf("mqttsink %s: %w", s.cfg.Name, err)
		}
		o.SetTLSConfig(tc)
	}
	if s.status != "" {
		o.SetBinaryWill(s.status, s.willMsg, s.qos, true)
	}
	c := &connection{lost: sink.NewLost()}
	o.SetConnectionLostHandler(func(_ mqtt.Client, err error) {
		// paho calls this after its writers stopped: the payloads of the
		// failed publishes are no longer read.
		s.log.Warn("mqtt connection lost", "err", err)
		c.lost.Mark(fmt.Errorf("mqttsink %s: connection lost: %w: %w", s.cfg.Name, sink.ErrNotConnected, err))
	})
	c.client = mqtt.NewClient(o)
	tok := c.client.Connect()
	select {
	case <-tok.Done():
	case <-ctx.Done():
		c.client.Disconnect(0)
		return fmt.Errorf("mqttsink %s: connect %s: %w", s.cfg.Name, s.cfg.URL, ctx.Err())
	}
	if err := tok.Error(); err != nil {
		c.client.Disconnect(0)
		if errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword) || errors.Is(err, packets.ErrorRefusedNotAuthorised) {
			return fmt.Errorf("mqttsink %s: connect %s as %q: %w: %w", s.cfg.Name, s.cfg.URL, s.cfg.Username, sink.ErrUnauthorized, err)
		}
		return fmt.Errorf("mqttsink %s: connect %s: %w", s.cfg.Name, s.cfg.URL, sink.ExplainTLS(err, s.cfg.TLS))
	}
	if s.status != "" {
		if err := s.publishWait(ctx, c, s.statusPayload(ua.PubSubStateOperational)); err != nil {
			s.drop(c, err)
			return fmt.Errorf("mqttsink %s: status: %w", s.cfg.Name, err)
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.drop(c, sink.ErrNotConnected)
		return fmt.Errorf("mqttsink %s: closed", s.cfg.Name)
	}
	s.conn = c
	s.mu.Unlock()
	return nil
}

// publishWait publishes a retained status and waits for its token.
func (s *Sink) publishWait(ctx context.Context, c *connection, payload []byte) error {
	tok := c.client.Publish(s.status, s.qos, true, payload)
	select {
	case <-tok.Done():
		return tok.Error()
	case <-c.lost.C():
		return c.lost.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drop ends a connection without a DISCONNECT (the will fires) and marks it
// lost once paho's writers have stopped.
func (s *Sink) drop(c *connection, why error) {
	c.client.Disconnect(0)
	c.lost.Mark(why)
}

// Publish hands m to paho; the confirmer confirms it.
func (s *Sink) Publish(m *sink.Message, ack sink.Acker) error {
	s.mu.Lock()
	c, closed := s.conn, s.closed
	s.mu.Unlock()
	if closed || c == nil {
		return sink.ErrNotConnected
	}
	if c.lost.Is() {
		return sink.ErrNotConnected
	}
	topic := s.topics.Topic(m.Kind, &m.Addr)
	if topic == "" {
		return fmt.Errorf("mqttsink %s: no topic for %v messages", s.cfg.Name, m.Kind)
	}
	retained := m.Retained || m.Kind == sink.KindMetaData || m.Kind == sink.KindStatus
	tok := c.client.Publish(topic, s.qos, retained, m.Payload())
	s.outstanding.Add(1)
	s.pending <- entry{m: m, ack: ack, tok: tok, conn: c, at: time.Now()}
	return nil
}

// confirmer waits for the tokens in publish order and confirms them.
func (s *Sink) confirmer() {
	defer close(s.cdone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		var e entry
		select {
		case e = <-s.pending:
		case <-s.quit:
			// Close fails every connection before quit: drain what is left.
			for {
				select {
				case e = <-s.pending:
					s.confirm(e, timer)
				default:
					return
				}
			}
		}
		s.confirm(e, timer)
	}
}

func (s *Sink) confirm(e entry, timer *time.Timer) {
	timer.Reset(time.Until(e.at.Add(s.cfg.AckTimeout)))
	var err error
	select {
	case <-e.tok.Done():
		if err = e.tok.Error(); err != nil {
			if errors.Is(err, mqtt.ErrNotConnected) {
				err = fmt.Errorf("mqttsink %s: %w: %w", s.cfg.Name, sink.ErrNotConnected, err)
			} else {
				err = fmt.Errorf("mqttsink %s: publish: %w", s.cfg.Name, err)
			}
		}
	case <-e.conn.lost.C():
		err = e.conn.lost.Err()
		select {
		case <-e.tok.Done():
			if e.tok.Error() == nil {
				err = nil // the PUBACK made it before the connection died
			}
		default:
		}
	case <-timer.C:
		// The payload may still sit in paho's queue: end the connection
		// before the Output may free it.
		s.log.Warn("mqtt publish not acknowledged in time, dropping the connection", "ackTimeout", s.cfg.AckTimeout)
		s.drop(e.conn, fmt.Errorf("mqttsink %s: %w: %w", s.cfg.Name, sink.ErrNotConnected, ErrAckTimeout))
		err = e.conn.lost.Err()
	}
	timer.Stop()
	s.outstanding.Add(-1)
	e.ack.Confirmed(e.m, err)
}

// Close waits (until ctx ends) for the pending confirmations, publishes the
// Disabled status, disconnects gracefully and fails whatever is left.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.cdone
		return nil
	}
	s.closed = true
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	// Publish is no longer called (the Output closes its sink after its
	// last Publish), so outstanding only shrinks.
	for s.outstanding.Load() > 0 && ctx.Err() == nil && c != nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
		case <-c.lost.C():
			c = nil // nothing more will be confirmed through it
		}
	}
	var err error
	if c != nil {
		if s.status != "" && ctx.Err() == nil {
			if serr := s.publishWait(ctx, c, s.statusPayload(ua.PubSubStateDisabled)); serr != nil {
				err = fmt.Errorf("mqttsink %s: status at close: %w", s.cfg.Name, serr)
			}
		}
		c.client.Disconnect(250)
		c.lost.Mark(fmt.Errorf("mqttsink %s: closed: %w", s.cfg.Name, sink.ErrNotConnected))
	}
	close(s.quit)
	<-s.cdone
	return err
}
