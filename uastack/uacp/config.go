package uacp

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/uagate/gateway/pooling"
)

// Defaults of Config.
const (
	// DefaultBufferSize is the default ReceiveBufferSize and SendBufferSize:
	// 65535 as most stacks ask for, which the pool serves from its 64 KiB class.
	DefaultBufferSize = 65535
	// DefaultMaxMessageSize is the default limit of a received message, as in
	// ua.DefaultLimits.
	DefaultMaxMessageSize = 16 << 20
	// DefaultMaxChunkCount is the default limit of chunks in a received message:
	// enough for DefaultMaxMessageSize in chunks of MinBufferSize.
	DefaultMaxChunkCount = 4096
	// DefaultHandshakeTimeout bounds HEL→ACK and RHE→HEL→ACK.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultChunkTimeout bounds how long the rest of a chunk may take once its
	// first byte arrived.
	DefaultChunkTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds one write to the peer.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultMaxPendingHandshakes bounds the handshakes a Listener runs at once.
	DefaultMaxPendingHandshakes = 64
)

// Config holds this side's connection protocol settings. A nil *Config, and every
// zero field, means the default. The limits this side advertises are the ones it
// enforces on what it receives; "no limit" cannot be configured, because every size
// read from the wire must be bounded.
type Config struct {
	// ReceiveBufferSize is the largest chunk this side accepts, and the size of
	// its receive buffers. At least MinBufferSize.
	ReceiveBufferSize uint32
	// SendBufferSize is the largest chunk this side sends. At least MinBufferSize.
	SendBufferSize uint32
	// MaxMessageSize is the largest message (all chunk bodies together) this side
	// accepts.
	MaxMessageSize uint32
	// MaxChunkCount is the largest number of chunks in a message this side
	// accepts.
	MaxChunkCount uint32

	// HandshakeTimeout bounds the handshake (HEL→ACK; with reverse connect
	// RHE→HEL→ACK); a context deadline, when sooner, wins.
	HandshakeTimeout time.Duration
	// ChunkTimeout bounds how long the rest of a chunk may take to arrive once its
	// first byte did, so a peer that sends half a header and stops is cut off
	// (slowloris). Negative disables it.
	ChunkTimeout time.Duration
	// WriteTimeout bounds each write; negative disables it.
	WriteTimeout time.Duration

	// Buffers supplies receive and message buffers; nil means pooling.Buffers.
	Buffers *pooling.BufferPool
	// DialContext opens the TCP connection for Dial and DialReverse; nil means a
	// net.Dialer with a 30 s keep-alive.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)

	// CheckEndpointURL, on the server side, vets the EndpointUrl of a Hello; an
	// error is sent to the client as Bad_TcpEndpointUrlInvalid. Nil accepts any.
	CheckEndpointURL func(endpointURL string) error
	// CheckReverseHello, on the client side of reverse connect, vets the server
	// that connected; an error refuses it (Bad_TcpEndpointUrlInvalid unless the
	// error carries another ua.StatusCode). Nil accepts any.
	CheckReverseHello func(serverURI, endpointURL string) error

	// MaxPendingHandshakes bounds the handshakes a Listener runs at once; further
	// connections are refused with Bad_TcpServerTooBusy.
	MaxPendingHandshakes int
	// OnHandshakeError, when set, is told about every connection a Listener
	// dropped during its handshake (for logs and metrics).
	OnHandshakeError func(remote net.Addr, err error)
}

// Validate reports the first setting that cannot work, naming the field.
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	if c.ReceiveBufferSize != 0 && c.ReceiveBufferSize < MinBufferSize {
		return fmt.Errorf("uacp: Config.ReceiveBufferSize %d is below the minimum of %d bytes", c.ReceiveBufferSize, MinBufferSize)
	}
	if c.SendBufferSize != 0 && c.SendBufferSize < MinBufferSize {
		return fmt.Errorf("uacp: Config.SendBufferSize %d is below the minimum of %d bytes", c.SendBufferSize, MinBufferSize)
	}
	bp := c.Buffers
	if bp == nil {
		bp = pooling.Buffers
	}
	if rb := c.ReceiveBufferSize; rb != 0 && int64(rb) > int64(bp.MaxSize()) {
		return fmt.Errorf("uacp: Config.ReceiveBufferSize %d exceeds the largest pooled buffer (%d bytes)", rb, bp.MaxSize())
	}
	if c.MaxMessageSize != 0 && int64(c.MaxMessageSize) > int64(bp.MaxSize()) {
		return fmt.Errorf("uacp: Config.MaxMessageSize %d exceeds the largest pooled buffer (%d bytes)", c.MaxMessageSize, bp.MaxSize())
	}
	if c.HandshakeTimeout < 0 {
		return fmt.Errorf("uacp: Config.HandshakeTimeout %v is negative", c.HandshakeTimeout)
	}
	if c.MaxPendingHandshakes < 0 {
		return fmt.Errorf("uacp: Config.MaxPendingHandshakes %d is negative", c.MaxPendingHandshakes)
	}
	return nil
}

// withDefaults returns a copy of c (nil: all defaults) with zero fields filled.
func (c *Config) withDefaults() (Config, error) {
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	var cfg Config
	if c != nil {
		cfg = *c
	}
	if cfg.ReceiveBufferSize == 0 {
		cfg.ReceiveBufferSize = DefaultBufferSize
	}
	if cfg.SendBufferSize == 0 {
		cfg.SendBufferSize = DefaultBufferSize
	}
	if cfg.MaxMessageSize == 0 {
		cfg.MaxMessageSize = DefaultMaxMessageSize
	}
	if cfg.MaxChunkCount == 0 {
		cfg.MaxChunkCount = DefaultMaxChunkCount
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.ChunkTimeout == 0 {
		cfg.ChunkTimeout = DefaultChunkTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.Buffers == nil {
		cfg.Buffers = pooling.Buffers
	}
	if cfg.DialContext == nil {
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		cfg.DialContext = d.DialContext
	}
	if cfg.MaxPendingHandshakes == 0 {
		cfg.MaxPendingHandshakes = DefaultMaxPendingHandshakes
	}
	return cfg, nil
}

// hello returns the Hello a client with this configuration sends.
func (c *Config) hello(endpointURL string) Hello {
	return Hello{
		ProtocolVersion:   ProtocolVersion,
		ReceiveBufferSize: c.ReceiveBufferSize,
		SendBufferSize:    c.SendBufferSize,
		MaxMessageSize:    c.MaxMessageSize,
		MaxChunkCount:     c.MaxChunkCount,
		EndpointURL:       endpointURL,
	}
}

// Limits are the settings a connection negotiated, seen from one side.
type Limits struct {
	ProtocolVersion uint32
	// ReceiveBufferSize is the largest chunk this side accepts; a larger one is a
	// protocol violation (Bad_TcpMessageTooLarge).
	ReceiveBufferSize uint32
	// SendBufferSize is the largest chunk this side may send.
	SendBufferSize uint32
	// MaxRecvMessageSize and MaxRecvChunkCount bound the messages this side
	// receives: its own limits, as advertised. Never 0.
	MaxRecvMessageSize uint32
	MaxRecvChunkCount  uint32
	// MaxSendMessageSize and MaxSendChunkCount bound the messages this side sends:
	// the peer's limits. 0 means the peer set none.
	MaxSendMessageSize uint32
	MaxSendChunkCount  uint32
}

// NegotiateServer answers a client's Hello (Part 6 §7.1.2.4): the server receives
// chunks no larger than the client sends and sends chunks no larger than the client
// receives. It fails, with the status code to send in an Error message, when the
// client's buffers are below MinBufferSize. The protocol version is always 0, the
// only one there is, which every version a client may ask for includes.
func NegotiateServer(cfg *Config, hel *Hello) (Acknowledge, Limits, error) {
	if hel.ReceiveBufferSize < MinBufferSize || hel.SendBufferSize < MinBufferSize {
		return Acknowledge{}, Limits{}, fmt.Errorf("uacp: Hello ReceiveBufferSize %d, SendBufferSize %d: %w",
			hel.ReceiveBufferSize, hel.SendBufferSize, ErrBufferTooSmall)
	}
	ack := Acknowledge{
		ProtocolVersion:   ProtocolVersion,
		ReceiveBufferSize: min(cfg.ReceiveBufferSize, hel.SendBufferSize),
		SendBufferSize:    min(cfg.SendBufferSize, hel.ReceiveBufferSize),
		MaxMessageSize:    cfg.MaxMessageSize,
		MaxChunkCount:     cfg.MaxChunkCount,
	}
	return ack, Limits{
		ProtocolVersion:    ProtocolVersion,
		ReceiveBufferSize:  ack.ReceiveBufferSize,
		SendBufferSize:     ack.SendBufferSize,
		MaxRecvMessageSize: cfg.MaxMessageSize,
		MaxRecvChunkCount:  cfg.MaxChunkCount,
		MaxSendMessageSize: hel.MaxMessageSize,
		MaxSendChunkCount:  hel.MaxChunkCount,
	}, nil
}

// NegotiateClient checks a server's Acknowledge against the client's Hello and
// returns the client's limits. A server that offers less than MinBufferSize, or a
// protocol version above the one asked for, is refused. A server that claims more
// than the client asked for is held to what the client asked: the client never
// sends larger chunks than the server takes, nor accepts larger ones than it
// offered, so a sloppy server still interoperates and a hostile one gains nothing.
func NegotiateClient(hel *Hello, ack *Acknowledge) (Limits, error) {
	if ack.ProtocolVersion > hel.ProtocolVersion {
		return Limits{}, fmt.Errorf("uacp: server protocol version %d, asked for %d: %w",
			ack.ProtocolVersion, hel.ProtocolVersion, ErrProtocolVersion)
	}
	if ack.ReceiveBufferSize < MinBufferSize || ack.SendBufferSize < MinBufferSize {
		return Limits{}, fmt.Errorf("uacp: Acknowledge ReceiveBufferSize %d, SendBufferSize %d: %w",
			ack.ReceiveBufferSize, ack.SendBufferSize, ErrBufferTooSmall)
	}
	return Limits{
		ProtocolVersion:    ack.ProtocolVersion,
		ReceiveBufferSize:  min(hel.ReceiveBufferSize, ack.SendBufferSize),
		SendBufferSize:     min(hel.SendBufferSize, ack.ReceiveBufferSize),
		MaxRecvMessageSize: hel.MaxMessageSize,
		MaxRecvChunkCount:  hel.MaxChunkCount,
		MaxSendMessageSize: ack.MaxMessageSize,
		MaxSendChunkCount:  ack.MaxChunkCount,
	}, nil
}
