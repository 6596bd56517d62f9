package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/gateway"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// BenchmarkCommandRoundTrip: one write at a time, from an MQTT client of
// the benchmark through the embedded broker, the gateway's command engine
// and its command session to the simulation server and back to the client
// as the response (mqtt-write); the baseline in the same run is the same
// Write sent by an OPC UA client of the benchmark straight to the server
// (opcua-write). p50 and p99 are of the round trips of the run.
func BenchmarkCommandRoundTrip(b *testing.B) {
	srv, err := server.New(&server.Config{Address: "127.0.0.1:0", Logger: testutil.Logger(b),
		Policies: []uasc.EndpointSecurity{{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}},
		Sim:      server.SimConfig{Folders: -1, Variables: -1, AlarmSources: -1}})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	node := server.StaticNode(ua.TypeInt32, false)

	b.Run("opcua-write", func(b *testing.B) {
		ctx := context.Background()
		c, err := client.Dial(ctx, srv.URL(), &client.Config{SecurityPolicy: uasc.SecurityPolicyNone, Logger: testutil.Logger(b)})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		id := ua.MustParseNodeID(node)
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			start := time.Now()
			if err := c.WriteValue(ctx, id, ua.NewInt32Variant(int32(i))); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		reportPercentiles(b, lat)
	})

	b.Run("mqtt-write", func(b *testing.B) {
		off := config.EmbeddedPart{Enabled: ptr(false)}
		cfg := &config.Config{
			Gateway:   config.Gateway{PublisherID: "bench", StateDir: b.TempDir()},
			Embedded:  config.Embedded{Sim: off, NATS: off, MQTT: config.EmbeddedPart{Listen: testutil.FreeAddr(b)}},
			HTTP:      config.HTTP{Disabled: true},
			Endpoints: []config.Endpoint{{Name: "sim", URL: srv.URL(), SecurityPolicy: "None", SecurityMode: "None", AutoAccept: true}},
			WriterGroups: []config.WriterGroup{{Name: "line", Endpoint: "sim",
				Writers: []config.DataSetWriter{writer("w", field("Value", node))}}},
			Sinks: config.Sinks{MQTT: []config.MQTTSink{{URL: config.EmbeddedMQTTURL}}},
			Commands: config.Commands{Rules: []config.CommandRule{{Callers: []string{"mqtt:bench"},
				Write: []config.CommandTarget{{Group: "line"}}, Rate: &config.CommandRate{PerSecond: 1e9, Burst: 1 << 30}}}},
		}
		cfg.ApplyDefaults()
		if err := cfg.Validate(); err != nil {
			b.Fatal(err)
		}
		gw, err := gateway.New(cfg, gateway.Options{Logger: testutil.Logger(b)})
		if err != nil {
			b.Fatal(err)
		}
		if err := gw.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = gw.Stop(ctx)
		}()

		const topic = "opcua/json/command/bench/bench"
		var mu sync.Mutex
		waiting := map[string]chan []byte{}
		o := mqtt.NewClientOptions().AddBroker(gw.Addrs().MQTT).SetClientID("bench-caller").SetOrderMatters(false)
		cl := mqtt.NewClient(o)
		if tok := cl.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			b.Fatal(tok.Error())
		}
		defer cl.Disconnect(100)
		if tok := cl.Subscribe(topic+"/reply", 1, func(_ mqtt.Client, m mqtt.Message) {
			var r struct {
				RequestID string `json:"requestId"`
			}
			_ = json.Unmarshal(m.Payload(), &r)
			mu.Lock()
			ch := waiting[r.RequestID]
			mu.Unlock()
			if ch != nil {
				ch <- m.Payload()
			}
		}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			b.Fatal(tok.Error())
		}
		send := func(i int) []byte {
			id := strconv.Itoa(i)
			ch := make(chan []byte, 1)
			mu.Lock()
			waiting[id] = ch
			mu.Unlock()
			cl.Publish(topic, 1, false, fmt.Sprintf(`{"requestId":%q,"op":"write","group":"line","writer":"w","field":"Value","value":%d}`, id, i))
			select {
			case p := <-ch:
				mu.Lock()
				delete(waiting, id)
				mu.Unlock()
				return p
			case <-time.After(30 * time.Second):
				b.Fatalf("no response to request %d", i)
				return nil
			}
		}
		// The transport subscribed and the command session connected.
		if !testutil.Eventually(20*time.Second, func() bool {
			mu.Lock()
			waiting["warm"] = make(chan []byte, 1)
			ch := waiting["warm"]
			mu.Unlock()
			cl.Publish(topic, 1, false, `{"requestId":"warm","op":"read","group":"line","writer":"w","field":"Value"}`)
			select {
			case <-ch:
				return true
			case <-time.After(500 * time.Millisecond):
				return false
			}
		}) {
			b.Fatal("the command transport does not answer")
		}
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			start := time.Now()
			var r struct {
				Status struct{ Code uint32 } `json:"status"`
			}
			if err := json.Unmarshal(send(i), &r); err != nil || r.Status.Code != 0 {
				b.Fatalf("request %d: %v %+v", i, err, r)
			}
			lat = append(lat, time.Since(start))
		}
		reportPercentiles(b, lat)
	})
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
