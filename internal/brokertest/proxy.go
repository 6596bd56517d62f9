package brokertest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy on loopback in front of a broker. Cut closes every
// connection through it at once, as a broken network would: the broker sees
// a client vanish without a goodbye (its last will fires), the client sees
// its connection drop.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	delay  atomic.Int64 // of what goes from the target to the client, in ns
	down   atomic.Bool  // connections refused (Down)
}

// Down makes the target unreachable through the proxy, as a broker that
// went away would be to its clients: the connections through it are cut
// and new ones closed at once, until Up. Clients connected to the target
// directly (a test's subscriber) stay connected.
func (p *Proxy) Down() {
	p.down.Store(true)
	p.Cut()
}

// Up lets connections through again.
func (p *Proxy) Up() { p.down.Store(false) }

// SetDelay holds everything the target sends for d before the client gets
// it (0: none), as a slow server or link would; what the client sends goes
// through at once.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// StartProxy listens on a loopback port and forwards to target (host:port).
// It is closed with the test.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("brokertest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.down.Load() {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // refused: a reset
			}
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Add(2)
		go p.pipeDelayed(c, s)
		go p.pipe(s, c)
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipeDelayed is pipe, each chunk held for the proxy's delay.
func (p *Proxy) pipeDelayed(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	p.pipeWith(dst, src, func() {
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if d := time.Duration(p.delay.Load()); d > 0 {
					time.Sleep(d) // the slow server this proxy plays
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
}

func (p *Proxy) pipe(dst, src net.Conn) {
	p.pipeWith(dst, src, func() { _, _ = io.Copy(dst, src) })
}

func (p *Proxy) pipeWith(dst, src net.Conn, copy func()) {
	defer p.wg.Done()
	copy()
	// One direction ended: end both, as a dead link does.
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut closes every connection through the proxy; new ones are accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, not an orderly close
		}
		c.Close()
	}
	p.mu.Unlock()
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
