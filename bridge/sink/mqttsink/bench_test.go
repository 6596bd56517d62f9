package mqttsink

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/brokertest"
)

// chanTracker hands every outcome to a channel.
type chanTracker chan bool

func (c chanTracker) Settled(_ uint64, delivered bool) { c <- delivered }

// benchOutput streams b.N messages of ~200 bytes through an Output into s,
// keeping up to 1024 unsettled, and reports messages per second.
func benchOutput(b *testing.B, s sink.Sink, g config.Guarantee) {
	o, err := sink.NewOutput(s, sink.OutputOptions{Guarantee: g, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	o.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := o.Close(ctx); err != nil {
			b.Error(err)
		}
	}()
	payload := fmt.Appendf(nil, `{"MessageId":"1","MessageType":"ua-data","Messages":[{"counter":%0150d}]}`, 1)
	tr := make(chanTracker, 2048)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	out, failed := 0, 0
	start := time.Now()
	for b.Loop() {
		m := sink.NewMessage(len(payload))
		m.SetPayload(payload)
		m.Kind, m.Addr, m.Tracker = sink.KindData, addr, tr
		o.Enqueue(m)
		for out++; out > 1024; out-- {
			if !<-tr {
				failed++
			}
		}
	}
	for ; out > 0; out-- {
		if !<-tr {
			failed++
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	if failed > 0 {
		b.Fatalf("%d undelivered", failed)
	}
}

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
			benchOutput(b, s, c.g)
		})
	}
}
