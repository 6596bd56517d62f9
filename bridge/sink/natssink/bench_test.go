package natssink

import (
	"log/slog"
	"testing"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink/sinktest"
	"github.com/uagate/gateway/internal/brokertest"
)

// BenchmarkOutputNATS: Output → natssink → nats-server on loopback, core
// (at-most-once) and JetStream (at-least-once, file storage).
func BenchmarkOutputNATS(b *testing.B) {
	br := brokertest.StartNATS(b, brokertest.NATSOptions{JetStream: true})
	b.Run("Core", func(b *testing.B) {
		s, err := New(Config{URL: br.URL(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		sinktest.BenchOutput(b, s, config.AtMostOnce)
	})
	b.Run("JetStream", func(b *testing.B) {
		s, err := New(Config{URL: br.URL(), Logger: slog.New(slog.DiscardHandler),
			JetStream: &JetStream{Stream: "BENCH", Create: true, MaxBytes: 256 << 20}})
		if err != nil {
			b.Fatal(err)
		}
		sinktest.BenchOutput(b, s, config.AtLeastOnce)
	})
}
