package uacp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// DefaultPort is the port of an opc.tcp URL that names none.
const DefaultPort = "4840"

// EndpointAddress returns the TCP address ("host:port") of an opc.tcp endpoint URL
// such as opc.tcp://plc.example:4840/UA/Server; the port defaults to 4840. Errors
// match ErrEndpointURLInvalid.
func EndpointAddress(endpointURL string) (string, error) {
	if len(endpointURL) > MaxURLLength {
		return "", fmt.Errorf("uacp: endpoint URL of %d bytes: %w", len(endpointURL), ErrEndpointURLInvalid)
	}
	u, err := url.Parse(endpointURL)
	if err != nil {
		return "", fmt.Errorf("uacp: endpoint URL %q: %w (%w)", endpointURL, ErrEndpointURLInvalid, err)
	}
	if !strings.EqualFold(u.Scheme, "opc.tcp") {
		return "", fmt.Errorf("uacp: endpoint URL %q: scheme is not opc.tcp: %w", endpointURL, ErrEndpointURLInvalid)
	}
	host := u.Hostname()
	if host == "" {
		return "", fmt.Errorf("uacp: endpoint URL %q: no host: %w", endpointURL, ErrEndpointURLInvalid)
	}
	port := u.Port()
	if port == "" {
		if strings.HasSuffix(u.Host, ":") {
			return "", fmt.Errorf("uacp: endpoint URL %q: empty port: %w", endpointURL, ErrEndpointURLInvalid)
		}
		port = DefaultPort
	}
	return net.JoinHostPort(host, port), nil
}

// address accepts either an opc.tcp URL or a plain host:port.
func tcpAddress(s string) (string, error) {
	if len(s) > 10 && strings.EqualFold(s[:10], "opc.tcp://") {
		return EndpointAddress(s)
	}
	return s, nil
}

// Dial connects to an opc.tcp endpoint and performs the Hello/Acknowledge
// handshake. The whole of it, TCP connect included, is bounded by ctx and by
// cfg.HandshakeTimeout; ctx has no say over the connection once Dial returned (see
// Conn.CloseWhenDone). A server's Error message is returned as an *Error carrying
// its status code; a protocol violation by the server is answered with an Error
// message before the connection is closed.
func Dial(ctx context.Context, endpointURL string, cfg *Config) (*Conn, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	addr, err := EndpointAddress(endpointURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.HandshakeTimeout)
	defer cancel()
	nc, err := c.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("uacp: dial %s: %w (%w)", addr, ua.StatusBadCommunicationError, err)
	}
	return newClientConn(ctx, nc, endpointURL, &c)
}

// NewClientConn performs the client side of the handshake (HEL → ACK) on an
// established connection, such as a net.Pipe in tests. On failure nc is closed.
func NewClientConn(ctx context.Context, nc net.Conn, endpointURL string, cfg *Config) (*Conn, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		nc.Close()
		return nil, err
	}
	return newClientConn(ctx, nc, endpointURL, &c)
}

func newClientConn(ctx context.Context, nc net.Conn, endpointURL string, cfg *Config) (*Conn, error) {
	c := newConn(nc, cfg)
	g := guard(ctx, c)
	err := c.clientHandshake(endpointURL)
	return c.finish(g, "client handshake", err)
}

// NewServerConn performs the server side of the handshake (HEL → ACK, or ERR) on an
// accepted connection. On failure nc is closed.
func NewServerConn(ctx context.Context, nc net.Conn, cfg *Config) (*Conn, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		nc.Close()
		return nil, err
	}
	return newServerConn(ctx, nc, &c)
}

func newServerConn(ctx context.Context, nc net.Conn, cfg *Config) (*Conn, error) {
	c := newConn(nc, cfg)
	g := guard(ctx, c)
	err := c.serverHandshake()
	return c.finish(g, "server handshake", err)
}

// DialReverse is the server side of reverse connect (Part 6 §7.1.3): it connects to
// a client that listens (clientAddress: an opc.tcp URL or host:port), sends a
// ReverseHello naming serverURI (the server's ApplicationUri) and endpointURL, then
// waits for the client's Hello and answers it as a server does. The result is a
// server-side connection.
func DialReverse(ctx context.Context, clientAddress, serverURI, endpointURL string, cfg *Config) (*Conn, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rhe := ReverseHello{ServerURI: serverURI, EndpointURL: endpointURL}
	msg, err := rhe.AppendBinary(nil)
	if err != nil {
		return nil, err
	}
	addr, err := tcpAddress(clientAddress)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.HandshakeTimeout)
	defer cancel()
	nc, err := c.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("uacp: reverse dial %s: %w (%w)", addr, ua.StatusBadCommunicationError, err)
	}
	conn := newConn(nc, &c)
	g := guard(ctx, conn)
	if _, err = nc.Write(msg); err != nil {
		err = ioError("write ReverseHello", err)
	} else {
		err = conn.serverHandshake()
	}
	return conn.finish(g, "reverse server handshake", err)
}

// newReverseClientConn is the client side of reverse connect on an accepted
// connection: it waits for the ReverseHello, vets it, and performs the client
// handshake with the EndpointUrl it named.
func newReverseClientConn(ctx context.Context, nc net.Conn, cfg *Config) (*Conn, error) {
	c := newConn(nc, cfg)
	g := guard(ctx, c)
	err := c.reverseClientHandshake()
	return c.finish(g, "reverse client handshake", err)
}

func (c *Conn) clientHandshake(endpointURL string) error {
	hel := c.cfg.hello(endpointURL)
	msg, err := hel.AppendBinary(nil)
	if err != nil {
		return err
	}
	if _, err := c.nc.Write(msg); err != nil {
		return ioError("write Hello", err)
	}
	h, b, err := c.readHandshake("Acknowledge")
	if err != nil {
		return err
	}
	switch h.MessageType {
	case MessageTypeAcknowledge:
		var ack Acknowledge
		if err := ack.UnmarshalBinary(b); err != nil {
			return c.refuse(err)
		}
		lim, err := NegotiateClient(&hel, &ack)
		if err != nil {
			return c.refuse(err)
		}
		c.limits = lim
		c.endpointURL = endpointURL
		return nil
	case MessageTypeError:
		e := new(Error)
		if err := e.UnmarshalBinary(b); err != nil {
			return err
		}
		return e
	default:
		return c.refuse(fmt.Errorf("uacp: got %s, want ACK: %w", h.MessageType, ErrMessageTypeInvalid))
	}
}

func (c *Conn) serverHandshake() error {
	h, b, err := c.readHandshake("Hello")
	if err != nil {
		return err
	}
	switch h.MessageType {
	case MessageTypeHello:
	case MessageTypeError: // a client refusing a ReverseHello
		e := new(Error)
		if err := e.UnmarshalBinary(b); err != nil {
			return err
		}
		return e
	default:
		return c.refuse(fmt.Errorf("uacp: got %s, want HEL: %w", h.MessageType, ErrMessageTypeInvalid))
	}
	var hel Hello
	if err := hel.UnmarshalBinary(b); err != nil {
		return c.refuse(err)
	}
	if check := c.cfg.CheckEndpointURL; check != nil {
		if err := check(hel.EndpointURL); err != nil {
			return c.refuseAs(ua.StatusBadTcpEndpointUrlInvalid,
				fmt.Errorf("uacp: endpoint URL %q refused: %w (%w)", hel.EndpointURL, ErrEndpointURLInvalid, err))
		}
	}
	ack, lim, err := NegotiateServer(&c.cfg, &hel)
	if err != nil {
		return c.refuse(err)
	}
	msg, _ := ack.AppendBinary(nil)
	if _, err := c.nc.Write(msg); err != nil {
		return ioError("write Acknowledge", err)
	}
	c.limits = lim
	c.endpointURL = hel.EndpointURL
	return nil
}

func (c *Conn) reverseClientHandshake() error {
	h, b, err := c.readHandshake("ReverseHello")
	if err != nil {
		return err
	}
	switch h.MessageType {
	case MessageTypeReverseHello:
	case MessageTypeError:
		e := new(Error)
		if err := e.UnmarshalBinary(b); err != nil {
			return err
		}
		return e
	default:
		return c.refuse(fmt.Errorf("uacp: got %s, want RHE: %w", h.MessageType, ErrMessageTypeInvalid))
	}
	var rhe ReverseHello
	if err := rhe.UnmarshalBinary(b); err != nil {
		return c.refuse(err)
	}
	if check := c.cfg.CheckReverseHello; check != nil {
		if err := check(rhe.ServerURI, rhe.EndpointURL); err != nil {
			code := ua.StatusBadTcpEndpointUrlInvalid
			var sc ua.StatusCode
			if errors.As(err, &sc) && sc.IsBad() {
				code = sc
			}
			return c.refuseAs(code, fmt.Errorf("uacp: ReverseHello from %q (%q) refused: %w", rhe.ServerURI, rhe.EndpointURL, err))
		}
	}
	if _, err := EndpointAddress(rhe.EndpointURL); err != nil {
		return c.refuse(err)
	}
	c.serverURI = rhe.ServerURI
	return c.clientHandshake(rhe.EndpointURL)
}

// readHandshake reads one whole connection protocol message, bounded by
// MaxHandshakeSize, through the read-ahead buffer (so nothing the peer sends after
// it is lost to ReadChunk).
func (c *Conn) readHandshake(what string) (Header, []byte, error) {
	hb, err := c.br.Peek(HeaderSize)
	if err != nil {
		if len(hb) > 0 {
			err = unexpectedEOF(err)
		}
		return Header{}, nil, ioError("read "+what, err)
	}
	h, err := ParseHeader(hb)
	if err != nil {
		return h, nil, c.refuse(err)
	}
	if !h.MessageType.IsKnown() {
		return h, nil, c.refuse(fmt.Errorf("uacp: read %s: message type %s: %w", what, h.MessageType, ErrMessageTypeInvalid))
	}
	if h.MessageSize > MaxHandshakeSize {
		return h, nil, c.refuse(fmt.Errorf("uacp: read %s: %s of %d bytes, at most %d during the handshake: %w",
			what, h.MessageType, h.MessageSize, MaxHandshakeSize, ErrMessageTooLarge))
	}
	b := make([]byte, h.MessageSize)
	if _, err := io.ReadFull(c.br, b); err != nil {
		return h, nil, ioError("read "+what, unexpectedEOF(err))
	}
	return h, b, nil
}

// refuse answers a protocol violation with an Error message carrying the status
// code err wraps, closes the connection and returns err.
func (c *Conn) refuse(err error) error {
	return c.refuseAs(statusOf(err), err)
}

func (c *Conn) refuseAs(code ua.StatusCode, err error) error {
	c.abort(code, err.Error(), true)
	return err
}

// statusOf returns the status code err wraps, or Bad_TcpInternalError.
func statusOf(err error) ua.StatusCode {
	var sc ua.StatusCode
	if errors.As(err, &sc) && sc.IsBad() {
		return sc
	}
	return ua.StatusBadTcpInternalError
}

// handshakeGuard bounds a handshake by a deadline and aborts it when its context
// is done, without a goroutine: context.AfterFunc moves the deadline into the past.
type handshakeGuard struct {
	ctx      context.Context
	c        *Conn
	mu       sync.Mutex
	finished bool
	fired    bool
	stop     func() bool
}

func guard(ctx context.Context, c *Conn) *handshakeGuard {
	g := &handshakeGuard{ctx: ctx, c: c}
	d := time.Now().Add(c.cfg.HandshakeTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(d) {
		d = dl
	}
	_ = c.nc.SetDeadline(d)
	g.stop = context.AfterFunc(ctx, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.finished {
			g.fired = true
			_ = c.nc.SetDeadline(time.Unix(1, 0))
		}
	})
	return g
}

// finish ends the handshake: on success it clears the deadlines and returns c; on
// failure, or when the context ended the handshake, it closes the connection and
// returns the error, the context's cause first.
func (c *Conn) finish(g *handshakeGuard, op string, err error) (*Conn, error) {
	g.stop()
	g.mu.Lock()
	g.finished = true
	fired := g.fired
	g.mu.Unlock()
	if fired || (err != nil && g.ctx.Err() != nil) {
		c.Close()
		cause := context.Cause(g.ctx)
		if errors.Is(cause, context.DeadlineExceeded) {
			return nil, fmt.Errorf("uacp: %s: %w (%w)", op, ErrTimeout, cause)
		}
		return nil, fmt.Errorf("uacp: %s: %w (%w)", op, ErrClosed, cause)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	_ = c.nc.SetDeadline(time.Time{})
	return c, nil
}
