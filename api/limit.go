package api

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// limitListener bounds the open connections: one past the bound is
// answered 503 (on plain HTTP; closed on TLS) and closed at once, so that
// a client opening connections without end exhausts neither file
// descriptors nor handler goroutines, and Accept never stalls.
type limitListener struct {
	net.Listener
	s      *Server
	max    int64
	answer bool // write a 503 before closing (plain HTTP)
	open   atomic.Int64
}

// busyAnswer is what a connection past the bound reads.
var busyAnswer = func() []byte {
	body := `{"type":"urn:uagate:problem:unavailable","title":"Unavailable","status":503,"detail":"too many open connections to this gateway; try again later"}`
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.s.refuse(refusedConnections)
		if l.answer {
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = c.Write(busyAnswer)
		}
		c.Close()
	}
}

// limitConn gives its slot back when closed (once).
type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
