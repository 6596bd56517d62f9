package uacp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// Listener accepts opc.tcp connections and hands them out with their handshake
// done. Handshakes run concurrently, each bounded by HandshakeTimeout, so a client
// that connects and says nothing delays no one; at most MaxPendingHandshakes run at
// once, and connections beyond that are refused with Bad_TcpServerTooBusy.
//
// Made by Listen (server side: the peer sends a Hello) or ListenReverse (client
// side of reverse connect: the peer is a server that sends a ReverseHello, and the
// listener answers with a Hello). The Listener owns its goroutines: Close stops
// them and waits for them, and closes connections whose handshake is still in
// progress or which no Accept took.
type Listener struct {
	ln        net.Listener
	cfg       Config
	handshake func(ctx context.Context, nc net.Conn, cfg *Config) (*Conn, error)

	ctx    context.Context // cancelled by Close: aborts handshakes in progress
	cancel context.CancelFunc
	conns  chan *Conn
	sem    chan struct{}
	wg     sync.WaitGroup

	closeOnce sync.Once
	errMu     sync.Mutex
	err       error // why Accept fails: closed, or a fatal accept error

	failures atomic.Uint64
	busy     atomic.Uint64
}

// Listen listens on a TCP address ("host:port", or an opc.tcp URL whose host and
// port are used) for clients.
func Listen(address string, cfg *Config) (*Listener, error) {
	return listen(address, cfg, newServerConn)
}

// ListenReverse listens on a TCP address for servers that connect by reverse
// connect (Part 6 §7.1.3). Accept returns client-side connections whose ServerURI
// and EndpointURL come from the ReverseHello; cfg.CheckReverseHello may refuse
// servers.
func ListenReverse(address string, cfg *Config) (*Listener, error) {
	return listen(address, cfg, newReverseClientConn)
}

func listen(address string, cfg *Config, hs func(context.Context, net.Conn, *Config) (*Conn, error)) (*Listener, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	addr, err := tcpAddress(address)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("uacp: listen %s: %w", addr, err)
	}
	return newListener(ln, &c, hs), nil
}

// NewListener serves the server side of the handshake on connections from ln, which
// the Listener now owns.
func NewListener(ln net.Listener, cfg *Config) (*Listener, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return newListener(ln, &c, newServerConn), nil
}

func newListener(ln net.Listener, cfg *Config, hs func(context.Context, net.Conn, *Config) (*Conn, error)) *Listener {
	l := &Listener{
		ln:        ln,
		cfg:       *cfg,
		handshake: hs,
		conns:     make(chan *Conn),
		sem:       make(chan struct{}, cfg.MaxPendingHandshakes),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

// Addr returns the address the listener listens on.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// HandshakeFailures returns how many connections were dropped during their
// handshake, and how many were refused because too many handshakes were pending.
func (l *Listener) HandshakeFailures() (failed, busy uint64) {
	return l.failures.Load(), l.busy.Load()
}

// Accept returns the next connection whose handshake succeeded. It returns when ctx
// is done (ctx.Err()), or when the listener is closed or failed (an error matching
// ErrClosed, or the accept error).
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.ctx.Done():
		return nil, l.failure()
	}
}

// Close stops listening, aborts the handshakes in progress and waits for the
// listener's goroutines to end. Connections already returned by Accept are not
// affected.
func (l *Listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		l.setFailure(fmt.Errorf("uacp: listener: %w (%w)", ErrClosed, net.ErrClosed))
		l.cancel()
		err = l.ln.Close()
		l.wg.Wait()
	})
	return err
}

func (l *Listener) failure() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.err
}

func (l *Listener) setFailure(err error) {
	l.errMu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.errMu.Unlock()
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if l.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				// Out of file descriptors and the like: wait, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-l.ctx.Done():
					t.Stop()
					return
				}
				continue
			}
			l.setFailure(fmt.Errorf("uacp: accept: %w (%w)", ErrClosed, err))
			l.cancel()
			return
		}
		backoff = 0
		select {
		case l.sem <- struct{}{}:
		default:
			l.busy.Add(1)
			l.refuseBusy(nc)
			continue
		}
		l.wg.Add(1)
		go l.serve(nc)
	}
}

// serve runs one handshake and hands the connection to Accept.
func (l *Listener) serve(nc net.Conn) {
	defer l.wg.Done()
	c, err := l.handshake(l.ctx, nc, &l.cfg)
	<-l.sem
	if err != nil {
		l.failures.Add(1)
		if f := l.cfg.OnHandshakeError; f != nil && l.ctx.Err() == nil {
			f(nc.RemoteAddr(), err)
		}
		return
	}
	select {
	case l.conns <- c:
	case <-l.ctx.Done():
		c.Close()
	}
}

// refuseBusy tells a client the server is too busy, without waiting for it.
func (l *Listener) refuseBusy(nc net.Conn) {
	msg, _ := (&Error{Code: ua.StatusBadTcpServerTooBusy, Reason: "too many pending handshakes"}).AppendBinary(nil)
	_ = nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = nc.Write(msg)
	nc.Close()
	if f := l.cfg.OnHandshakeError; f != nil {
		f(nc.RemoteAddr(), ErrServerTooBusy)
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}
