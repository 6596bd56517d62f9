package wssink

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sinktest"
	"github.com/uagate/gateway/internal/testutil"
)

// settled reports whether tr settled token.
func settled(tr *sinktest.Tracker, token uint64) bool {
	d, u := tr.Outcome(token)
	return d+u > 0
}

// msg builds a message with one reference, as the pipeline hands it over.
func msg(tr *sinktest.Tracker, token uint64, kind sink.Kind, group, writer, payload string) *sink.Message {
	m := sink.NewMessage(len(payload))
	m.Kind = kind
	m.Addr = sink.Addr{Publisher: "uagate", Group: group, Writer: writer}
	m.SetPayload([]byte(payload))
	if tr != nil {
		m.Tracker, m.Token = tr, token
	}
	return m
}

// serve starts a hub on a real loopback listener; both are closed when the
// test ends (the hub first, with a deadline).
func serve(t testing.TB, opts Options, wrap func(net.Listener) net.Listener) (*Hub, string) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testutil.Logger(t)
	}
	h := New(opts)
	ts := httptest.NewUnstartedServer(h)
	if wrap != nil {
		ts.Listener = wrap(ts.Listener)
	}
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("hub close: %v", err)
		}
	})
	return h, "ws" + strings.TrimPrefix(ts.URL, "http") + "/ws"
}

// dial connects a gorilla client; the connection is closed when the test ends.
func dial(t testing.TB, url string, hdr http.Header) *websocket.Conn {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(url, hdr)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (HTTP %d)", url, err, status)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// dialStatus dials expecting a refused handshake and returns its HTTP status.
func dialStatus(t *testing.T, url string, hdr http.Header) (int, http.Header) {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(url, hdr)
	if err == nil {
		_ = c.Close()
		return http.StatusSwitchingProtocols, nil
	}
	if resp == nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	return resp.StatusCode, resp.Header
}

// readN reads n text messages.
func readN(t *testing.T, c *websocket.Conn, n int) []string {
	t.Helper()
	out := make([]string, 0, n)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for range n {
		mt, p, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("after %d of %d messages: %v", len(out), n, err)
		}
		if mt != websocket.TextMessage {
			t.Fatalf("message type %d, want text", mt)
		}
		out = append(out, string(p))
	}
	return out
}

// waitClients waits until the hub has n clients, all subscribed when sub is
// set.
func waitClients(t *testing.T, h *Hub, n int, sub bool) {
	t.Helper()
	ok := testutil.Eventually(5*time.Second, func() bool {
		cs := *h.clients.Load()
		if len(cs) != n {
			return false
		}
		for _, c := range cs {
			if sub && c.sel.Load() == nil {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("hub has %d clients, want %d (subscribed: %v)", len(*h.clients.Load()), n, sub)
	}
}

// smallBuffers makes the server's sockets buffer little, so that a client
// that does not read fills them after a few messages.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetWriteBuffer(4096); err != nil {
			return nil, fmt.Errorf("set write buffer: %w", err)
		}
	}
	return c, err
}
