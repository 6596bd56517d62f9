package mqtt5sink

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// dial opens the transport of rawURL: tcp:// and mqtt:// (port 1883 by
// default), ssl://, tls:// and mqtts:// (8883), ws:// and wss:// (MQTT over
// WebSocket, subprotocol "mqtt", path as given). tc is the TLS
// configuration; nil for the system's defaults.
func dial(ctx context.Context, rawURL string, tc *tls.Config) (net.Conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("url %q: %w", rawURL, err)
	}
	host := func(port string) string {
		if u.Port() != "" {
			return u.Host
		}
		return net.JoinHostPort(u.Hostname(), port)
	}
	var d net.Dialer
	switch u.Scheme {
	case "tcp", "mqtt":
		return d.DialContext(ctx, "tcp", host("1883"))
	case "ssl", "tls", "mqtts":
		if tc == nil {
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		td := tls.Dialer{NetDialer: &d, Config: tc}
		return td.DialContext(ctx, "tcp", host("8883"))
	case "ws", "wss":
		wd := websocket.Dialer{NetDialContext: d.DialContext, TLSClientConfig: tc, Subprotocols: []string{"mqtt"}}
		ws, resp, err := wd.DialContext(ctx, rawURL, nil)
		if err != nil {
			if resp != nil {
				err = fmt.Errorf("%w (HTTP %s)", err, resp.Status)
			}
			return nil, err
		}
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close()
		}
		return &wsConn{Conn: ws}, nil
	}
	return nil, fmt.Errorf("url %q: scheme %q: want tcp, mqtt, ssl, tls, mqtts, ws or wss", rawURL, u.Scheme)
}

// wsConn carries an MQTT byte stream over WebSocket binary messages: each
// Write is one message; Read reads on across message boundaries (MQTT 5.0
// §6: a packet may span messages and a message may hold several).
type wsConn struct {
	*websocket.Conn
	r      io.Reader // the message being read
	closed atomic.Bool
	rmu    sync.Mutex
}

func (c *wsConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		if c.r == nil {
			_, r, err := c.NextReader()
			if err != nil {
				return 0, err
			}
			c.r = r
		}
		n, err := c.r.Read(p)
		if err == io.EOF {
			c.r = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

func (c *wsConn) Write(p []byte) (int, error) {
	if err := c.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *wsConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

func (c *wsConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.Conn.Close()
}
