package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// Limits of the embedded MQTT broker, so that a client cannot make it hold
// more than it declares reasonable.
const (
	mqttMaxPacket        = 16 << 20 // bytes; the gateway's messages are far smaller
	mqttSessionExpiry    = 24 * 60 * 60
	mqttSysTopicInterval = 10 // seconds between $SYS updates
)

// MQTT is an embedded MQTT broker (mochi-mqtt, MQTT 3.1, 3.1.1 and 5) on one
// TCP listener. It lets every client in and keeps its state (retained
// messages, sessions) in memory.
type MQTT struct {
	srv       *mqtt.Server
	ln        *mqttListener
	addr      string
	closeOnce sync.Once
}

// StartMQTT starts the broker on listen (host:port; DefaultMQTTListen when
// empty, port 0 for one the system chooses). A listen address beyond
// loopback is logged as a warning: the broker authenticates nobody. ctx
// bounds the start only; Close stops the broker.
func StartMQTT(ctx context.Context, listen string, logger *slog.Logger) (*MQTT, error) {
	if logger == nil {
		logger = slog.Default()
	}
	addr, host, _, err := splitListen("mqtt", listen, DefaultMQTTListen)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("embedded mqtt: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &ListenError{Part: "mqtt", Addr: addr, Err: err}
	}
	log := logger.With("component", "embedded-mqtt")
	if !isLoopback(host) {
		log.Warn("embedded MQTT broker listens beyond loopback and authenticates nobody: anyone who reaches it may publish and subscribe",
			"listen", addr)
	}

	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumPacketSize = mqttMaxPacket
	caps.MaximumSessionExpiryInterval = mqttSessionExpiry
	// No expiry of its own: mochi's default (a day) would also delete the
	// retained metadata and status a day after they were published, for
	// every protocol version. A message's own expiry (MQTT 5) still holds.
	caps.MaximumMessageExpiryInterval = 0
	srv := mqtt.New(&mqtt.Options{
		Capabilities:           caps,
		Logger:                 warnOnly(log),
		SysTopicResendInterval: mqttSysTopicInterval,
	})
	l := &mqttListener{id: "tcp", ln: ln, served: make(chan struct{}), stop: make(chan struct{}), open: map[net.Conn]struct{}{}}
	m := &MQTT{srv: srv, ln: l, addr: clientAddr(ln.Addr())}
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("embedded mqtt: %w", err)
	}
	if err := srv.AddListener(l); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("embedded mqtt: %w", err)
	}
	if err := srv.Serve(); err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("embedded mqtt: %w", err)
	}
	l.serving = true // Serve spawned the accept loop
	log.Info("embedded MQTT broker listening", "url", m.URL())
	return m, nil
}

// Addr is the host:port clients dial (loopback when listening on every
// interface).
func (m *MQTT) Addr() string { return m.addr }

// URL is the broker's URL for an MQTT client: tcp://host:port.
func (m *MQTT) URL() string { return "tcp://" + m.addr }

// Close disconnects every client, stops the broker and waits for its
// listener's goroutines. It may be called more than once.
func (m *MQTT) Close() {
	m.closeOnce.Do(func() {
		_ = m.srv.Close() // closes the listener and the clients, waits for the clients
		m.ln.wait()
	})
}

// mqttListener is a listeners.Listener on a socket opened beforehand, so
// that a busy address is reported by StartMQTT itself and every goroutine
// it starts can be waited for.
type mqttListener struct {
	id      string
	ln      net.Listener
	log     *slog.Logger
	conns   sync.WaitGroup
	serving bool          // the broker spawned Serve; set before anyone calls wait
	served  chan struct{} // closed when Serve returns
	stop    chan struct{} // closed by Close
	closing atomic.Bool

	mu   sync.Mutex
	open map[net.Conn]struct{} // accepted and not yet ended
}

var _ listeners.Listener = (*mqttListener)(nil)

func (l *mqttListener) Init(log *slog.Logger) error { l.log = log; return nil }
func (l *mqttListener) ID() string                  { return l.id }
func (l *mqttListener) Address() string             { return l.ln.Addr().String() }
func (l *mqttListener) Protocol() string            { return "tcp" }

// Serve accepts until Close, handing each connection to the broker on a
// goroutine of its own that ends with the client.
func (l *mqttListener) Serve(establish listeners.EstablishFn) {
	defer close(l.served)
	backoff := time.Duration(0)
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			if l.closing.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: wait and retry rather than
			// leave a broker that accepts nobody.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.log.Warn("accept failed", "error", err, "retry", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-l.stop:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		l.mu.Lock()
		if l.closing.Load() {
			l.mu.Unlock()
			_ = conn.Close()
			return
		}
		sc := &startedConn{Conn: conn, reading: make(chan struct{})}
		l.open[sc] = struct{}{}
		l.conns.Add(1)
		l.mu.Unlock()
		conn = net.Conn(sc)
		go func() {
			defer l.conns.Done()
			if err := establish(l.id, conn); err != nil && !l.closing.Load() {
				l.log.Debug("client ended", "remote", conn.RemoteAddr().String(), "error", err)
			}
			l.mu.Lock()
			delete(l.open, conn)
			l.mu.Unlock()
		}()
	}
}

// Close is called by the broker's Close: it stops accepting, disconnects
// the clients, and closes the connections the broker does not know as
// clients yet (still in their CONNECT): the broker's Close waits for every
// connection, and one that a reconnecting client opened while the others
// were being disconnected would otherwise hold it for good.
func (l *mqttListener) Close(closeClients listeners.CloseFn) {
	l.mu.Lock()
	already := l.closing.Swap(true)
	l.mu.Unlock()
	if already {
		return
	}
	close(l.stop)
	_ = l.ln.Close()
	// The broker counts a connection (its ClientsWg.Add) when its
	// EstablishConnection begins, and its Close then waits on that count:
	// an Add beside the Wait is a race in the broker. A connection the
	// broker has read from was counted; wait (briefly) for those accepted
	// just before to get there.
	l.mu.Lock()
	var starting []chan struct{}
	for c := range l.open {
		if sc, ok := c.(*startedConn); ok {
			starting = append(starting, sc.reading)
		}
	}
	l.mu.Unlock()
	deadline := time.NewTimer(2 * time.Second)
	defer deadline.Stop()
	for _, ch := range starting {
		select {
		case <-ch:
		case <-deadline.C:
		}
	}
	closeClients(l.id)
	l.mu.Lock()
	for c := range l.open {
		_ = c.Close()
	}
	l.mu.Unlock()
}

// startedConn is an accepted connection that tells (reading) when the
// broker first reads from it: by then the broker has counted it.
type startedConn struct {
	net.Conn
	once    sync.Once
	reading chan struct{}
}

func (c *startedConn) Read(p []byte) (int, error) {
	c.once.Do(func() { close(c.reading) })
	return c.Conn.Read(p)
}

// wait waits for the accept loop and the connections' goroutines.
func (l *mqttListener) wait() {
	if l.serving {
		<-l.served
	}
	l.conns.Wait()
}
