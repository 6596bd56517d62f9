package wssink

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/uagate/gateway/bridge/sink"
)

// eventually polls cond every few milliseconds until it holds or timeout passes.
func eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// checkGoroutines fails the test when goroutines it started outlive it.
// Register it first, so that it runs after the test's other cleanups.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		if eventually(10*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
			return
		}
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Errorf("goroutine leak: %d before the test, %d after\n%s", before, runtime.NumGoroutine(), buf[:n])
	})
}

// tracker records how messages settled, to prove that no reference is
// kept beyond its holder.
type tracker struct {
	mu      sync.Mutex
	settled map[uint64]int
	failed  int
}

func newTracker() *tracker { return &tracker{settled: map[uint64]int{}} }

func (tr *tracker) Settled(token uint64, delivered bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.settled[token]++
	if !delivered {
		tr.failed++
	}
}

func (tr *tracker) count() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.settled)
}

func (tr *tracker) isSettled(token uint64) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.settled[token] > 0
}

// check fails unless exactly n messages (tokens 1…n) settled, each once,
// all as delivered.
func (tr *tracker) check(t *testing.T, n int) {
	t.Helper()
	if !eventually(5*time.Second, func() bool { return tr.count() >= n }) {
		t.Fatalf("%d of %d messages settled", tr.count(), n)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for tok, k := range tr.settled {
		if k != 1 {
			t.Errorf("message %d settled %d times", tok, k)
		}
	}
	if len(tr.settled) != n || tr.failed != 0 {
		t.Errorf("%d messages settled (%d undelivered), want %d delivered", len(tr.settled), tr.failed, n)
	}
}

// msg builds a message with one reference, as the pipeline hands it over.
func msg(tr *tracker, token uint64, kind sink.Kind, group, writer, payload string) *sink.Message {
	m := sink.NewMessage(len(payload))
	m.Kind = kind
	m.Addr = sink.Addr{Publisher: "uagate", Group: group, Writer: writer}
	m.SetPayload([]byte(payload))
	if tr != nil {
		m.Tracker, m.Token = tr, token
	}
	return m
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{}

func (testWriter) Write(p []byte) (int, error) { return len(p), nil }

// serve starts a hub on a real loopback listener; both are closed when the
// test ends (the hub first, with a deadline).
func serve(t testing.TB, opts Options, wrap func(net.Listener) net.Listener) (*Hub, string) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
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
	ok := eventually(5*time.Second, func() bool {
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
