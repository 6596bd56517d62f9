package mqtt5sink

import (
	"log/slog"
	"testing"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/mqttsink"
	"github.com/uagate/gateway/bridge/sink/sinktest"
	"github.com/uagate/gateway/internal/brokertest"
)

// BenchmarkOutputMQTT5: Output → sink → mosquitto on loopback, QoS 0 and
// QoS 1 (at-least-once, confirmed on PUBACK), the MQTT 5 sink beside the
// 3.1.1 sink (mqttsink, the baseline) in the same run and broker.
func BenchmarkOutputMQTT5(b *testing.B) {
	br := brokertest.StartMosquitto(b, brokertest.MosquittoOptions{})
	log := slog.New(slog.DiscardHandler)
	for _, v := range []struct {
		name string
		new  func(Config) (sink.Sink, error)
	}{
		{"v311", func(c Config) (sink.Sink, error) { return mqttsink.New(c) }},
		{"v5", func(c Config) (sink.Sink, error) { return New(c) }},
	} {
		for _, c := range []struct {
			name string
			qos  int
			g    config.Guarantee
		}{{"QoS0", 0, config.AtMostOnce}, {"QoS1", 1, config.AtLeastOnce}} {
			b.Run(v.name+"/"+c.name, func(b *testing.B) {
				s, err := v.new(Config{URL: br.URL(), QoS: c.qos, CleanSession: true, ClientID: "bench-" + v.name + c.name,
					PublisherID: "pub", Logger: log})
				if err != nil {
					b.Fatal(err)
				}
				sinktest.BenchOutput(b, s, c.g)
			})
		}
	}
}
