package client

import (
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultProxy is a TCP proxy on loopback between a client and a server that a
// test can sever (Cut), make refuse connections (Refuse), turn into a server
// that keeps the connection open but stops answering (Stall: MSG chunks from
// the server are dropped, the rest passes; StallOnRead: from the next Read
// request on), or put at a distance (Delay: what the server sends arrives that
// much later).
type faultProxy struct {
	t      testing.TB
	ln     net.Listener
	target string // host:port
	path   string

	mu     sync.Mutex
	conns  map[*proxyConn]struct{}
	refuse atomic.Bool
	// dropPublish drops PublishResponses on every connection (security None
	// only: the body must be readable).
	dropPublish atomic.Bool
	wg          sync.WaitGroup
	dialed      atomic.Int32
	// stallOnRead stalls the connection the next ReadRequest goes through
	// (security None only), at the moment it does; stalledAt is when.
	stallOnRead atomic.Bool
	stalledAt   atomic.Int64
	delay       atomic.Int64 // added to the way from the server to the client, ns
}

type proxyConn struct {
	client, server net.Conn
	stall          atomic.Bool
	once           sync.Once
	out            chan delayedChunk // from serverToClient to the writer
}

// delayedChunk is a chunk from the server and when it may go to the client.
type delayedChunk struct {
	b  []byte
	at time.Time
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		c.client.Close()
		c.server.Close()
	})
}

func newFaultProxy(t testing.TB, serverURL string) *faultProxy {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{t: t, ln: ln, target: u.Host, path: u.Path, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is the endpoint URL through the proxy.
func (p *faultProxy) URL() string { return "opc.tcp://" + p.ln.Addr().String() + p.path }

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			cc.Close()
			continue
		}
		sc, err := net.Dial("tcp", p.target)
		if err != nil {
			cc.Close()
			continue
		}
		p.dialed.Add(1)
		pc := &proxyConn{client: cc, server: sc, out: make(chan delayedChunk, 4096)}
		p.mu.Lock()
		p.conns[pc] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(3)
		go func() {
			defer p.wg.Done()
			p.clientToServer(pc)
			p.drop(pc)
		}()
		go func() {
			defer p.wg.Done()
			defer close(pc.out)
			p.serverToClient(pc)
			p.drop(pc)
		}()
		go func() {
			defer p.wg.Done()
			p.writeToClient(pc)
		}()
	}
}

// readChunk reads one opc.tcp chunk into buf.
func readChunk(r io.Reader, buf []byte) ([]byte, error) {
	buf = append(buf[:0], make([]byte, 8)...)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint32(buf[4:])
	if size < 8 || size > 16<<20 {
		return nil, io.ErrUnexpectedEOF
	}
	buf = append(buf, make([]byte, size-8)...)
	if _, err := io.ReadFull(r, buf[8:]); err != nil {
		return nil, err
	}
	return buf, nil
}

// clientToServer forwards whole chunks and stalls the connection when a
// ReadRequest (i=631, four-byte node id 01 00 77 02) passes while
// stallOnRead is armed.
func (p *faultProxy) clientToServer(pc *proxyConn) {
	buf := make([]byte, 0, 64<<10)
	for {
		var err error
		if buf, err = readChunk(pc.client, buf); err != nil {
			return
		}
		if string(buf[:3]) == "MSG" && len(buf) >= 28 && buf[24] == 0x01 && buf[25] == 0 &&
			binary.LittleEndian.Uint16(buf[26:]) == 631 && p.stallOnRead.CompareAndSwap(true, false) {
			pc.stall.Store(true)
			p.stalledAt.Store(time.Now().UnixNano())
		}
		if _, err := pc.server.Write(buf); err != nil {
			return
		}
	}
}

// writeToClient writes what serverToClient passes on, each chunk not before
// its time.
func (p *faultProxy) writeToClient(pc *proxyConn) {
	var t *time.Timer
	for c := range pc.out {
		if d := time.Until(c.at); d > 0 {
			if t == nil {
				t = time.NewTimer(d)
			} else {
				t.Reset(d)
			}
			<-t.C
		}
		if _, err := pc.client.Write(c.b); err != nil {
			p.drop(pc)
		}
	}
}

// serverToClient forwards whole opc.tcp chunks, dropping MSG chunks once the
// connection is stalled.
func (p *faultProxy) serverToClient(pc *proxyConn) {
	hdr := make([]byte, 8)
	buf := make([]byte, 0, 64<<10)
	dropping := map[uint32]bool{} // request ids of PublishResponses being dropped
	var dropped uint32            // MSG chunks dropped: later sequence numbers are lowered by as many
	for {
		if _, err := io.ReadFull(pc.server, hdr); err != nil {
			return
		}
		size := binary.LittleEndian.Uint32(hdr[4:])
		if size < 8 || size > 16<<20 {
			return
		}
		buf = append(buf[:0], hdr...)
		buf = append(buf, make([]byte, size-8)...)
		if _, err := io.ReadFull(pc.server, buf[8:]); err != nil {
			return
		}
		if pc.stall.Load() && string(hdr[:3]) == "MSG" {
			continue
		}
		// MSG: header 8, channel id 4, token id 4, sequence number 4, request
		// id 4, then the body, which starts with the type's encoding id
		// (PublishResponse: i=829, four-byte node id 01 00 3D 03).
		if string(hdr[:3]) == "MSG" && len(buf) >= 28 {
			reqID := binary.LittleEndian.Uint32(buf[20:])
			drop := dropping[reqID]
			if !drop && p.dropPublish.Load() && buf[24] == 0x01 && buf[25] == 0 && binary.LittleEndian.Uint16(buf[26:]) == 829 {
				drop = true
			}
			if drop {
				dropping[reqID] = hdr[3] == 'C'
				if hdr[3] != 'C' {
					delete(dropping, reqID)
				}
				dropped++
				continue
			}
			// Without signatures (security None) the sequence number can be
			// mended, so the client sees no gap.
			seq := binary.LittleEndian.Uint32(buf[16:])
			binary.LittleEndian.PutUint32(buf[16:], seq-dropped)
		}
		pc.out <- delayedChunk{b: append([]byte(nil), buf...), at: time.Now().Add(time.Duration(p.delay.Load()))}
	}
}

func (p *faultProxy) drop(pc *proxyConn) {
	pc.close()
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
}

// Cut closes every connection through the proxy, as a broken network would.
func (p *faultProxy) Cut() {
	p.mu.Lock()
	all := make([]*proxyConn, 0, len(p.conns))
	for pc := range p.conns {
		all = append(all, pc)
	}
	p.mu.Unlock()
	for _, pc := range all {
		p.drop(pc)
	}
}

// Stall makes the current connections drop every message the server sends,
// keeping them open; new connections are not affected.
func (p *faultProxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pc := range p.conns {
		pc.stall.Store(true)
	}
}

// DropPublish makes every connection, now and later, drop the server's
// PublishResponses (on) while everything else passes, or pass them again.
func (p *faultProxy) DropPublish(on bool) { p.dropPublish.Store(on) }

// StallOnRead makes the connection the next ReadRequest goes through stall
// from that request on (its response is dropped too); StalledAt says when.
func (p *faultProxy) StallOnRead() { p.stallOnRead.Store(true) }

// StalledAt is when StallOnRead stalled a connection, zero before.
func (p *faultProxy) StalledAt() time.Time {
	if ns := p.stalledAt.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Delay makes every chunk from the server reach the client d later.
func (p *faultProxy) Delay(d time.Duration) { p.delay.Store(int64(d)) }

// Refuse makes the proxy close new connections at once (on) or pass them
// again (off).
func (p *faultProxy) Refuse(on bool) { p.refuse.Store(on) }

func (p *faultProxy) close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
