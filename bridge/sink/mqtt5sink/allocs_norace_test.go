//go:build !race

package mqtt5sink

import (
	"context"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sinktest"
)

// nopAcker takes confirmations without a trace.
type nopAcker struct{}

func (nopAcker) Confirmed(*sink.Message, error) {}

// Publish (topic from the cache, properties, header, the write) allocates
// nothing, at QoS 0 and QoS 1, against a socket that reads and never
// acknowledges (an acknowledgement is paho's to decode, and allocates
// there). Built without the race detector, which allocates on its own.
func TestPublishAllocs(t *testing.T) {
	for _, qos := range []int{0, 1} {
		f := startFakeBroker(t, 0, nil, nil)
		s := newSink(t, Config{URL: f.url(), QoS: qos, CleanSession: true, MessageExpiry: time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		m := sinktest.PaddedMessage(nil, 1, sink.KindData, addr, 200)
		send := func() {
			if err := s.Publish(m, nopAcker{}); err != nil {
				t.Fatal(err)
			}
		}
		for range 10 {
			send()
		}
		if n := testing.AllocsPerRun(500, send); n != 0 {
			t.Errorf("qos %d: %v allocations per Publish", qos, n)
		}
		cancel()
		// Close waits for what is in flight until its context ends: the
		// socket never acknowledges.
		cctx, ccancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_ = s.Close(cctx)
		ccancel()
		m.Done(true)
	}
}
