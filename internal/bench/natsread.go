package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// natsSub is the counting subscriber's NATS connection: the client protocol
// (CONNECT, SUB, PING/PONG, MSG and HMSG) over one TCP connection, no more.
// nats.go copies every payload into a new slice and hands it over through
// two goroutines; here the socket's reader copies each payload into a
// recycled buffer, stamps it when its last byte was read, and queues it for
// the parser: no allocation per message and one hand-off.
type natsSub struct {
	conn net.Conn
	br   *bufio.Reader
	wmu  sync.Mutex // writes: PONG from the reader, PING from flush

	rx    chan rxMessage
	free  chan []byte   // recycled payload buffers
	room  chan struct{} // signalled when queued bytes fall below the bound
	queue atomic.Int64  // bytes received and not yet parsed
	peak  atomic.Int64  // most messages waiting at once since the last window
	pongs chan struct{}
	done  chan struct{} // closed when the reader ends
	err   error         // why the reader ended, after done
}

// rxMessage is a message's payload and the instant it was received.
type rxMessage struct {
	b   []byte // the payload
	at  int64  // Unix ns
	buf []byte // the recycled buffer holding it
}

// Bounds of what was received and not yet parsed: at ~100 KB a message, a
// few seconds of a million notifications per second. At the bound the
// reader stops reading, the socket fills, and nats-server cuts the
// subscriber off as a slow consumer (the bench reports it).
const (
	rxQueue    = 1 << 14
	rxMaxBytes = 512 << 20
	freeBufs   = 256
)

// dialNATS connects to url (nats://host:port; user:password@ and token@
// are passed on) and subscribes to subject.
func dialNATS(rawURL, subject string) (*natsSub, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("nats url %q: want nats://host:port", rawURL)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "4222")
	}
	conn, err := net.DialTimeout("tcp", host, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	s := &natsSub{conn: conn, br: bufio.NewReaderSize(conn, 1<<20),
		rx: make(chan rxMessage, rxQueue), free: make(chan []byte, freeBufs),
		room: make(chan struct{}, 1), pongs: make(chan struct{}, 4), done: make(chan struct{})}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := s.br.ReadSlice('\n')
	if err != nil || !bytes.HasPrefix(line, []byte("INFO ")) {
		conn.Close()
		return nil, fmt.Errorf("nats: no INFO from %s: %q %v", host, line, err)
	}
	opts := map[string]any{"verbose": false, "pedantic": false, "name": "gateway-bench-subscriber", "lang": "go", "version": "bench", "protocol": 1}
	if pw, ok := u.User.Password(); ok {
		opts["user"], opts["pass"] = u.User.Username(), pw
	} else if u.User != nil {
		opts["auth_token"] = u.User.Username()
	}
	c, _ := json.Marshal(opts)
	if _, err := fmt.Fprintf(conn, "CONNECT %s\r\nSUB %s 1\r\nPING\r\n", c, subject); err != nil {
		conn.Close()
		return nil, fmt.Errorf("nats: %w", err)
	}
	// The PONG answers the PING after SUB: the subscription is in place.
	for {
		line, err := s.br.ReadSlice('\n')
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("nats: subscribing: %w", err)
		}
		if bytes.HasPrefix(line, []byte("-ERR")) {
			conn.Close()
			return nil, fmt.Errorf("nats: %s", bytes.TrimSpace(line))
		}
		if bytes.HasPrefix(line, []byte("PONG")) {
			break
		}
	}
	_ = conn.SetDeadline(time.Time{})
	go s.read()
	return s, nil
}

// read is the socket's reader: it answers the server's PINGs and queues
// every MSG's payload, stamped, for the parser. It ends with the
// connection (s.err says why) and closes rx.
func (s *natsSub) read() {
	defer close(s.done)
	defer close(s.rx)
	for {
		line, err := s.br.ReadSlice('\n')
		if err != nil {
			s.err = err
			return
		}
		switch {
		case bytes.HasPrefix(line, []byte("MSG ")), bytes.HasPrefix(line, []byte("HMSG ")):
			hdr, total, ok := msgSizes(line)
			if !ok {
				s.err = fmt.Errorf("nats: bad frame %q", bytes.TrimSpace(line))
				return
			}
			buf := s.buffer(total)
			if _, err := io.ReadFull(s.br, buf); err != nil {
				s.err = err
				return
			}
			at := time.Now().UnixNano()
			if _, err := s.br.Discard(2); err != nil { // CRLF
				s.err = err
				return
			}
			for s.queue.Load() > rxMaxBytes {
				<-s.room
			}
			s.queue.Add(int64(cap(buf)))
			s.rx <- rxMessage{b: buf[hdr:], at: at, buf: buf}
			if n := int64(len(s.rx)); n > s.peak.Load() {
				s.peak.Store(n)
			}
		case bytes.HasPrefix(line, []byte("PING")):
			s.wmu.Lock()
			_, err := io.WriteString(s.conn, "PONG\r\n")
			s.wmu.Unlock()
			if err != nil {
				s.err = err
				return
			}
		case bytes.HasPrefix(line, []byte("PONG")):
			select {
			case s.pongs <- struct{}{}:
			default:
			}
		case bytes.HasPrefix(line, []byte("-ERR")):
			s.err = fmt.Errorf("nats: %s", bytes.TrimSpace(line))
			return
		}
	}
}

// msgSizes returns the header length and the total length (headers and
// payload) of a MSG or HMSG line: the last one or two fields.
func msgSizes(line []byte) (hdr, total int, ok bool) {
	f := bytes.Fields(line)
	n := func(b []byte) int {
		v, err := strconv.Atoi(string(b))
		if err != nil || v < 0 || v > 64<<20 {
			return -1
		}
		return v
	}
	if bytes.Equal(f[0], []byte("HMSG")) {
		if len(f) < 5 {
			return 0, 0, false
		}
		hdr, total = n(f[len(f)-2]), n(f[len(f)-1])
		return hdr, total, hdr >= 0 && total >= hdr
	}
	if len(f) < 4 {
		return 0, 0, false
	}
	total = n(f[len(f)-1])
	return 0, total, total >= 0
}

// buffer returns a recycled buffer of length n.
func (s *natsSub) buffer(n int) []byte {
	for {
		select {
		case b := <-s.free:
			if cap(b) >= n {
				return b[:n]
			}
			continue // too small: let it go
		default:
		}
		return make([]byte, n, max(n, 64<<10))
	}
}

// release gives a parsed message's buffer back.
func (s *natsSub) release(m rxMessage) {
	b := m.buf
	if s.queue.Add(-int64(cap(b))) <= rxMaxBytes {
		select {
		case s.room <- struct{}{}:
		default:
		}
	}
	select {
	case s.free <- b[:0]:
	default:
	}
}

// backlogPeak returns the most messages that waited for the parser at
// once since the previous call with reset.
func (s *natsSub) backlogPeak(reset bool) int64 {
	if reset {
		return s.peak.Swap(int64(len(s.rx)))
	}
	return s.peak.Load()
}

// close ends the connection; the reader ends with it.
func (s *natsSub) close() {
	s.conn.Close()
	<-s.done
}

// ended returns why the reader ended, nil while it runs.
func (s *natsSub) ended() error {
	select {
	case <-s.done:
		if s.err == nil {
			return errors.New("connection closed")
		}
		return s.err
	default:
		return nil
	}
}
