package sink_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/filesink"
)

// chanTracker hands every settled token to a channel: the tests wait on it.
type chanTracker chan bool

func (c chanTracker) Settled(_ uint64, delivered bool) { c <- delivered }

func startDiscardOutput(tb testing.TB) *sink.Output {
	o, err := sink.NewOutput(filesink.NewWriter("discard", io.Discard), sink.OutputOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	o.Start()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := o.Close(ctx); err != nil {
			tb.Error(err)
		}
	})
	return o
}

// BenchmarkOutput streams messages through an Output into a file sink on
// io.Discard, keeping up to 256 unsettled.
func BenchmarkOutput(b *testing.B) {
	o := startDiscardOutput(b)
	tr := make(chanTracker, 1024)
	payload := fmt.Appendf(nil, `{"MessageId":"1","MessageType":"ua-data","Messages":[{"counter":%0200d}]}`, 1)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	out := 0
	for b.Loop() {
		m := sink.NewMessage(len(payload))
		m.SetPayload(payload)
		m.Tracker = tr
		o.Enqueue(m)
		out++
		for out > 256 {
			<-tr
			out--
		}
	}
	for ; out > 0; out-- {
		<-tr
	}
}
