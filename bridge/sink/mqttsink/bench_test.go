package mqttsink

import (
	"log/slog"
	"testing"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink/sinktest"
	"github.com/uagate/gateway/internal/brokertest"
)

// BenchmarkOutputMQTT: Output → mqttsink → mosquitto on loopback, QoS 0
// and QoS 1 (at-least-once, confirmed on PUBACK).
func BenchmarkOutputMQTT(b *testing.B) {
	br := brokertest.StartMosquitto(b, brokertest.MosquittoOptions{})
	for _, c := range []struct {
		name string
		qos  int
		g    config.Guarantee
	}{{"QoS0", 0, config.AtMostOnce}, {"QoS1", 1, config.AtLeastOnce}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := New(Config{URL: br.URL(), QoS: c.qos, CleanSession: true, ClientID: "bench-" + c.name, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			sinktest.BenchOutput(b, s, c.g)
		})
	}
}
