package natssink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
)

// Default subject templates: the configuration's, and one for per-field
// subjects, which the configuration does not offer for NATS.
const (
	DefaultDataSubject     = config.DefaultNATSDataSubject
	DefaultMetaDataSubject = config.DefaultNATSMetaSubject
	DefaultStatusSubject   = config.DefaultNATSStatusSubject
	DefaultFieldSubject    = "opcua.json.field.{PublisherId}.{WriterGroup}.{DataSetWriter}.{Field}"
	// DefaultStreamSubjects is what a created stream captures.
	DefaultStreamSubjects = "opcua.json.>"
)

// Defaults of Config.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultAckTimeout     = 10 * time.Second
	DefaultMaxPending     = 4096
)

// Config of a NATS sink. Zero fields take the defaults.
type Config struct {
	Name string // default "nats"
	URL  string // nats://host:4222[,nats://…]; tls:// for TLS
	// Credentials: at most one of user/password, token, creds file, nkey
	// seed file.
	Username, Password string
	Token              string
	CredsFile          string
	NKeyFile           string
	TLS                *sink.TLSOptions
	// Subjects are the templates; empty ones take the Default*Subject.
	Subjects  sink.TopicTemplates
	JetStream *JetStream // nil: core NATS, at-most-once
	// ConnectTimeout bounds the connection to each server.
	ConnectTimeout time.Duration
	// ClientName is the connection's name at the server (nats.Name);
	// default "uagate <Name>".
	ClientName     string
	TopicCacheSize int          // default sink.DefaultTopicCacheSize
	Logger         *slog.Logger // default slog.Default()
}

// JetStream publishing.
type JetStream struct {
	// Stream is the stream's name; it must capture the subjects (checked
	// at connect when Create is off: a publish to no stream is refused).
	Stream string
	// Create creates or updates the stream at connect (file storage).
	Create bool
	// Subjects of a created stream; default DefaultStreamSubjects.
	Subjects []string
	MaxAge   time.Duration // of a created stream; 0: unlimited
	MaxBytes int64         // of a created stream; 0: unlimited
	// AckTimeout bounds the wait for a publish's ack; default 10 s.
	AckTimeout time.Duration
	// MaxPending bounds nats.go's unacknowledged async publishes; default
	// 4096, above any Output's MaxInFlight.
	MaxPending int
}

// FromConfig maps the configuration model's NATS sink; secrets are passed
// resolved (package config resolves config.Secret).
func FromConfig(c config.NATSSink, password, token string) Config {
	out := Config{
		Name: c.Name, URL: c.URL, Username: c.Username, Password: password, Token: token,
		CredsFile: c.CredsFile, NKeyFile: c.NKeyFile,
		Subjects: sink.TopicTemplates{Data: c.DataSubject, MetaData: c.MetaDataSubject, Status: c.StatusSubject},
		TLS:      sink.TLSFromConfig(c.TLS),
	}
	if j := c.JetStream; j != nil {
		out.JetStream = &JetStream{Stream: j.Stream, Create: j.Create, MaxAge: j.MaxAge.D(), MaxBytes: j.MaxBytes}
	}
	return out
}

func (c *Config) setDefaults() {
	if c.Name == "" {
		c.Name = "nats"
	}
	if c.ClientName == "" {
		c.ClientName = "uagate " + c.Name
	}
	for _, d := range []struct {
		p *string
		v string
	}{{&c.Subjects.Data, DefaultDataSubject}, {&c.Subjects.MetaData, DefaultMetaDataSubject}, {&c.Subjects.Status, DefaultStatusSubject}, {&c.Subjects.Field, DefaultFieldSubject}} {
		if *d.p == "" {
			*d.p = d.v
		}
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if j := c.JetStream; j != nil {
		if len(j.Subjects) == 0 {
			j.Subjects = []string{DefaultStreamSubjects}
		}
		if j.AckTimeout <= 0 {
			j.AckTimeout = DefaultAckTimeout
		}
		if j.MaxPending <= 0 {
			j.MaxPending = DefaultMaxPending
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// sanitize keeps a name one subject token.
func sanitize(b byte) byte {
	switch {
	case b == '.', b == ' ', b == '*', b == '>', b < 0x20, b == 0x7f:
		return '_'
	}
	return b
}

// Sink is a NATS output. See the package comment.
type Sink struct {
	cfg    Config
	js     *JetStream
	topics *sink.Topics
	log    *slog.Logger

	pending     chan entry // JetStream only
	quit        chan struct{}
	cdone       chan struct{}
	outstanding atomic.Int64

	mu     sync.Mutex
	conn   *connection
	closed bool
}

type connection struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	lost *sink.Lost // closed once it is unusable, with why
}

type entry struct {
	m    *sink.Message
	ack  sink.Acker
	f    jetstream.PubAckFuture
	conn *connection
}

// New validates c (and the JetStream confirmer starts); nothing connects
// before Connect.
func New(c Config) (*Sink, error) {
	c.setDefaults()
	if c.JetStream != nil {
		j := *c.JetStream
		c.JetStream = &j
	}
	n := 0
	for _, set := range []bool{c.Username != "", c.Token != "", c.CredsFile != "", c.NKeyFile != ""} {
		if set {
			n++
		}
	}
	switch {
	case c.URL == "":
		return nil, fmt.Errorf("natssink %s: url is empty", c.Name)
	case n > 1:
		return nil, fmt.Errorf("natssink %s: more than one of username, token, credsFile and nkeyFile", c.Name)
	case c.JetStream != nil && c.JetStream.Stream == "" && c.JetStream.Create:
		return nil, fmt.Errorf("natssink %s: jetStream.create without a stream name", c.Name)
	}
	if c.TLS != nil {
		if _, err := c.TLS.Config(); err != nil {
			return nil, fmt.Errorf("natssink %s: %w", c.Name, err)
		}
	}
	topics, err := sink.NewTopics(c.Subjects, '.', sanitize, c.TopicCacheSize)
	if err != nil {
		return nil, fmt.Errorf("natssink %s: %w", c.Name, err)
	}
	s := &Sink{cfg: c, js: c.JetStream, topics: topics, log: c.Logger.With("sink", c.Name),
		quit: make(chan struct{}), cdone: make(chan struct{})}
	if s.js != nil {
		s.pending = make(chan entry, s.js.MaxPending)
		go s.confirmer()
	} else {
		close(s.cdone)
	}
	return s, nil
}

// Name implements sink.Sink.
func (s *Sink) Name() string { return s.cfg.Name }

// Guarantee implements sink.Sink: at-least-once with JetStream.
func (s *Sink) Guarantee() config.Guarantee {
	if s.js != nil {
		return config.AtLeastOnce
	}
	return config.AtMostOnce
}

// Connected implements sink.ConnState.
func (s *Sink) Connected() bool {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	return c != nil && c.nc.IsConnected()
}

// MaxPayload is the largest payload the server takes (its max_payload, as
// it announced it), 0 while not connected.
func (s *Sink) MaxPayload() int64 {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	if c == nil || !c.nc.IsConnected() {
		return 0
	}
	return c.nc.MaxPayload()
}

// Connect makes a new connection (closing the previous one) and, with
// JetStream, checks or creates the stream.
func (s *Sink) Connect(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("natssink %s: closed", s.cfg.Name)
	}
	old := s.conn
	s.conn = nil
	s.mu.Unlock()
	if old != nil {
		s.drop(old, fmt.Errorf("natssink %s: reconnecting: %w", s.cfg.Name, sink.ErrNotConnected))
	}
	c := &connection{lost: sink.NewLost()}
	opts := []nats.Option{
		nats.Name(s.cfg.ClientName),
		nats.Timeout(s.cfg.ConnectTimeout),
		nats.NoReconnect(),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				s.log.Warn("nats connection lost", "err", err)
			}
			c.lost.Mark(fmt.Errorf("natssink %s: connection lost: %w: %v", s.cfg.Name, sink.ErrNotConnected, err))
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			c.lost.Mark(fmt.Errorf("natssink %s: connection closed: %w", s.cfg.Name, sink.ErrNotConnected))
		}),
	}
	auth, err := AuthOptions(&s.cfg)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(s.cfg.URL, append(opts, auth...)...)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) ||
			strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
			return fmt.Errorf("natssink %s: connect %s%s: %w: %w", s.cfg.Name, s.cfg.URL, s.who(), sink.ErrUnauthorized, err)
		}
		return fmt.Errorf("natssink %s: connect %s: %w", s.cfg.Name, s.cfg.URL, sink.ExplainTLS(err, s.cfg.TLS))
	}
	c.nc = nc
	if s.js != nil {
		if err := s.setupJetStream(ctx, c); err != nil {
			s.drop(c, err)
			return err
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.drop(c, sink.ErrNotConnected)
		return fmt.Errorf("natssink %s: closed", s.cfg.Name)
	}
	s.conn = c
	s.mu.Unlock()
	return nil
}

// AuthOptions are the nats.go options of c's credentials and TLS, for
// another connection to the sink's server (the command transport's).
func AuthOptions(c *Config) ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case c.Username != "":
		opts = append(opts, nats.UserInfo(c.Username, c.Password))
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token))
	case c.CredsFile != "":
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	case c.NKeyFile != "":
		o, err := nats.NkeyOptionFromSeed(c.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("natssink %s: nkey file: %w", c.Name, err)
		}
		opts = append(opts, o)
	}
	if c.TLS != nil {
		tc, err := c.TLS.Config()
		if err != nil {
			return nil, fmt.Errorf("natssink %s: %w", c.Name, err)
		}
		opts = append(opts, nats.Secure(tc))
	}
	return opts, nil
}

// who names the credentials for an error (never the secret).
func (s *Sink) who() string {
	switch {
	case s.cfg.Username != "":
		return fmt.Sprintf(" as %q", s.cfg.Username)
	case s.cfg.Token != "":
		return " with a token"
	case s.cfg.CredsFile != "":
		return " with creds " + s.cfg.CredsFile
	case s.cfg.NKeyFile != "":
		return " with nkey " + s.cfg.NKeyFile
	}
	return ""
}

func (s *Sink) setupJetStream(ctx context.Context, c *connection) error {
	js, err := jetstream.New(c.nc,
		jetstream.WithPublishAsyncMaxPending(s.js.MaxPending),
		jetstream.WithPublishAsyncTimeout(s.js.AckTimeout))
	if err != nil {
		return fmt.Errorf("natssink %s: jetstream: %w", s.cfg.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ConnectTimeout)
	defer cancel()
	switch {
	case s.js.Create:
		_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: s.js.Stream, Subjects: s.js.Subjects, Storage: jetstream.FileStorage,
			MaxAge: s.js.MaxAge, MaxBytes: max(s.js.MaxBytes, 0),
		})
		if err != nil {
			return fmt.Errorf("natssink %s: create stream %s: %w", s.cfg.Name, s.js.Stream, err)
		}
	case s.js.Stream != "":
		if _, err = js.Stream(ctx, s.js.Stream); err != nil {
			return fmt.Errorf("natssink %s: stream %s: %w", s.cfg.Name, s.js.Stream, err)
		}
	}
	c.js = js
	return nil
}

// drop closes a connection; nats.go does not touch payloads afterwards.
func (s *Sink) drop(c *connection, why error) {
	c.nc.Close()
	c.lost.Mark(why)
}

// Publish hands m to nats.go: core publishes are confirmed at once,
// JetStream ones by the confirmer.
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
	subject := s.topics.Topic(m.Kind, &m.Addr)
	if subject == "" {
		return fmt.Errorf("natssink %s: no subject for %v messages", s.cfg.Name, m.Kind)
	}
	if c.js == nil {
		if err := c.nc.Publish(subject, m.Payload()); err != nil {
			return s.publishErr(c, err)
		}
		ack.Confirmed(m, nil)
		return nil
	}
	var f jetstream.PubAckFuture
	var err error
	if id := msgID(m.Payload()); id != "" {
		// The stream drops a message whose id it had within its duplicate
		// window: a NetworkMessage sent again (after a restart, by the
		// store-and-forward log) is stored once.
		f, err = c.js.PublishMsgAsync(&nats.Msg{Subject: subject, Data: m.Payload(), Header: nats.Header{jetstream.MsgIDHeader: []string{id}}})
	} else {
		f, err = c.js.PublishAsync(subject, m.Payload())
	}
	if err != nil {
		return s.publishErr(c, err)
	}
	s.outstanding.Add(1)
	s.pending <- entry{m: m, ack: ack, f: f, conn: c}
	return nil
}

// messageIDStart is how a NetworkMessage begins; redeliveredPrefix marks
// one sent again (bridge.RedeliveredPrefix, storelog.RedeliveredPrefix).
const (
	messageIDStart    = `{"MessageId":"`
	redeliveredPrefix = "redelivered-"
)

// msgID is the NetworkMessage's MessageId without the redelivered mark,
// the message's Nats-Msg-Id; "" when the payload starts otherwise (the
// samples format, metadata of another shape).
func msgID(p []byte) string {
	if !bytes.HasPrefix(p, []byte(messageIDStart)) {
		return ""
	}
	p = p[len(messageIDStart):]
	p = bytes.TrimPrefix(p, []byte(redeliveredPrefix))
	end := bytes.IndexByte(p, '"')
	if end <= 0 || end > 128 {
		return ""
	}
	return string(p[:end])
}

// publishErr classifies a publish error of c: the connection's, whatever
// nats.go wrapped it in (its JetStream async publish reports a closed
// connection as "error creating async reply handler", not wrapped), is
// sink.ErrNotConnected, for the Output to send the message again after the
// reconnect; anything else is the message's.
func (s *Sink) publishErr(c *connection, err error) error {
	if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionDraining) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		!c.nc.IsConnected() {
		return sink.ErrNotConnected
	}
	return fmt.Errorf("natssink %s: publish: %w", s.cfg.Name, err)
}

// confirmer waits for the JetStream acks in publish order.
func (s *Sink) confirmer() {
	defer close(s.cdone)
	for {
		var e entry
		select {
		case e = <-s.pending:
		case <-s.quit:
			for {
				select {
				case e = <-s.pending:
					s.confirm(e)
				default:
					return
				}
			}
		}
		s.confirm(e)
	}
}

func (s *Sink) confirm(e entry) {
	var err error
	select {
	case <-e.f.Ok():
	case ferr := <-e.f.Err():
		if errors.Is(ferr, nats.ErrConnectionClosed) || errors.Is(ferr, nats.ErrDisconnected) {
			err = fmt.Errorf("natssink %s: %w: %w", s.cfg.Name, sink.ErrNotConnected, ferr)
		} else {
			err = fmt.Errorf("natssink %s: jetstream publish: %w", s.cfg.Name, ferr)
		}
	case <-e.conn.lost.C():
		// nc is closed (a lost connection closes, NoReconnect): the future
		// will not publish the payload again.
		err = e.conn.lost.Err()
		select {
		case <-e.f.Ok():
			err = nil
		default:
		}
	}
	s.outstanding.Add(-1)
	e.ack.Confirmed(e.m, err)
}

// Close waits (until ctx ends) for pending acks, flushes and closes the
// connection, and fails whatever is left.
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
	var err error
	if c != nil {
		tick := time.NewTicker(5 * time.Millisecond)
		for s.outstanding.Load() > 0 && ctx.Err() == nil {
			select {
			case <-tick.C:
			case <-ctx.Done():
			case <-c.lost.C():
			}
			if c.lost.Is() {
				break
			}
		}
		tick.Stop()
		if ctx.Err() == nil && !c.lost.Is() {
			var ferr error
			if _, ok := ctx.Deadline(); ok {
				ferr = c.nc.FlushWithContext(ctx)
			} else {
				ferr = c.nc.FlushTimeout(s.cfg.ConnectTimeout)
			}
			if ferr != nil {
				err = fmt.Errorf("natssink %s: flush at close: %w", s.cfg.Name, ferr)
			}
		}
		s.drop(c, fmt.Errorf("natssink %s: closed: %w", s.cfg.Name, sink.ErrNotConnected))
	}
	close(s.quit)
	<-s.cdone
	return err
}
