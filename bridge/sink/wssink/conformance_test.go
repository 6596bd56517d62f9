package wssink

import (
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink/sinktest"
	"github.com/uagate/gateway/internal/testutil"
)

// receive dials the hub for its data messages and reads them until the test
// ends; it returns once the hub has the client subscribed.
func receive(t *testing.T, h *Hub, url string) sinktest.Receiver {
	t.Helper()
	c := dial(t, url+"?kind=data", nil)
	var r sinktest.Payloads
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, p, err := c.ReadMessage()
			if err != nil {
				return
			}
			r.Add(p)
		}
	}()
	t.Cleanup(func() {
		_ = c.Close()
		<-done
	})
	testutil.WaitFor(t, 5*time.Second, "the client subscribed", func() bool {
		for _, hc := range *h.clients.Load() {
			if hc.remote == c.LocalAddr().String() && hc.sel.Load() != nil {
				return true
			}
		}
		return false
	})
	return &r
}

// TestConformance: the hub is a queue of its own (at-most-once, no broker);
// a receiver is a WebSocket client selecting the data messages, with a
// queue that holds a whole case's messages.
func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Guarantee: config.AtMostOnce, OwnQueue: true,
		Start: func(t *testing.T, _ sinktest.Options) *sinktest.Env {
			h, url := serve(t, Options{ClientQueue: 1024}, nil)
			return &sinktest.Env{
				Queue:   func(*testing.T) sinktest.Queue { return h },
				Receive: func(t *testing.T) sinktest.Receiver { return receive(t, h, url) },
			}
		},
	})
}
