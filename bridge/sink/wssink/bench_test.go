package wssink

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
)

// rawReaders connects n subscribed clients whose sockets are drained without
// parsing frames, so that the measurement holds the hub's costs only.
func rawReaders(tb testing.TB, url string, n int) {
	tb.Helper()
	for range n {
		c := dial(tb, url, nil)
		nc := c.NetConn()
		go func() {
			buf := make([]byte, 64<<10)
			for {
				if _, err := nc.Read(buf); err != nil {
					return
				}
			}
		}()
	}
}

// pace waits until the hub wrote want messages, so that a producer faster
// than the sockets does not make its clients slow consumers.
func pace(h *Hub, want uint64) bool {
	deadline := time.Now().Add(10 * time.Second)
	for h.sent.Load() < want {
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
	return true
}

// BenchmarkEnqueue10Clients: one message to ten clients, written to their
// sockets; every 128 messages it waits until every client caught up, so that
// none falls further behind than its queue. Above WriteBufferSize (16 KiB)
// gorilla writes the payload with net.Buffers, 2 allocations per client.
func BenchmarkEnqueue10Clients(b *testing.B) {
	for _, size := range []int{200, 4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			const clients = 10
			h, url := serve(b, Options{}, nil)
			rawReaders(b, url+"?kind=data", clients)
			if !testutil.Eventually(5*time.Second, func() bool { return h.Stats().Clients == clients }) {
				b.Fatal("clients did not connect")
			}
			payload := []byte(strings.Repeat("x", size))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			var sent uint64
			for i := range b.N {
				m := sink.NewMessage(size)
				m.SetPayload(payload)
				h.Enqueue(m)
				sent += clients
				if i%128 == 127 && !pace(h, sent) {
					b.Fatalf("hub wrote %d of %d (stats %+v)", h.sent.Load(), sent, h.Stats())
				}
			}
			if !pace(h, sent) {
				b.Fatalf("hub wrote %d of %d (stats %+v)", h.sent.Load(), sent, h.Stats())
			}
			b.StopTimer()
			if s := h.Stats(); s.SlowClosed != 0 {
				b.Fatalf("%d slow clients", s.SlowClosed)
			}
		})
	}
}
