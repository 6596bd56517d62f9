package mqtt5sink

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/embedded"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sinktest"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/internal/testutil"
)

var addr = sinktest.Addr

// received is a message as an MQTT 5 subscriber of the test got it.
type received struct {
	topic    string
	payload  string
	retained bool
	props    *paho.PublishProperties
}

// user returns the value of the user property key ("" when absent).
func (r received) user(key string) string { return r.props.User.Get(key) }

// subscriber is an MQTT 5 client of the test (autopaho: it reconnects and
// subscribes again after a broker restart), recording what it receives in
// order; a sinktest.Receiver.
type subscriber struct {
	cm *autopaho.ConnectionManager

	mu   sync.Mutex
	msgs []received
}

// subOptions are a subscriber's credentials.
type subOptions struct {
	user, password string
	tls            *tls.Config
}

// subscribe connects an MQTT 5 subscriber to filter at QoS 1 (retain as
// published: a live message keeps its retain flag) and waits for its
// subscription; with clean false its session outlives a disconnection
// for an hour (and, with the broker's persistence, a restart).
func subscribe(t *testing.T, rawURL, clientID string, clean bool, filter string, o subOptions) *subscriber {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	s := &subscriber{}
	subscribed := make(chan error, 1)
	cfg := autopaho.ClientConfig{
		ServerUrls: []*url.URL{u}, TlsCfg: o.tls, KeepAlive: 30,
		CleanStartOnInitialConnection: clean,
		ReconnectBackoff:              func(int) time.Duration { return 100 * time.Millisecond },
		ConnectTimeout:                10 * time.Second,
		ConnectUsername:               o.user, ConnectPassword: []byte(o.password),
		OnConnectionUp: func(cm *autopaho.ConnectionManager, _ *paho.Connack) {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), sinktest.Timeout)
				defer cancel()
				_, err := cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1, RetainAsPublished: true}}})
				select {
				case subscribed <- err:
				default:
				}
			}()
		},
		ClientConfig: paho.ClientConfig{
			ClientID: clientID,
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(p paho.PublishReceived) (bool, error) {
				s.mu.Lock()
				s.msgs = append(s.msgs, received{p.Packet.Topic, string(p.Packet.Payload), p.Packet.Retain, p.Packet.Properties})
				s.mu.Unlock()
				return true, nil
			}},
		},
	}
	if !clean {
		cfg.SessionExpiryInterval = 3600
	}
	ctx, cancel := context.WithCancel(context.Background())
	cm, err := autopaho.NewConnection(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s.cm = cm
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer dcancel()
		_ = cm.Disconnect(dctx)
		cancel()
		<-cm.Done()
	})
	select {
	case err := <-subscribed:
		if err != nil {
			t.Fatalf("subscribe %s: %v", filter, err)
		}
	case <-time.After(sinktest.Timeout):
		t.Fatalf("subscriber %s: not subscribed in time", clientID)
	}
	return s
}

func (s *subscriber) snapshot() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.msgs...)
}

// Received implements sinktest.Receiver.
func (s *subscriber) Received() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(s.msgs))
	for i, m := range s.msgs {
		out[i] = []byte(m.payload)
	}
	return out
}

func (s *subscriber) waitTopic(t *testing.T, topic string, match func(received) bool) received {
	t.Helper()
	var got received
	testutil.WaitFor(t, 10*time.Second, "a message on "+topic, func() bool {
		for _, r := range s.snapshot() {
			if r.topic == topic && (match == nil || match(r)) {
				got = r
				return true
			}
		}
		return false
	})
	return got
}

// newSink is New with the test's logger.
func newSink(t *testing.T, c Config) *Sink {
	t.Helper()
	if c.Logger == nil {
		c.Logger = testutil.Logger(t)
	}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var clientIDs atomic.Int64

// clientID returns a client id no other client of the test binary uses.
func clientID(prefix string) string { return fmt.Sprintf("%s-%d", prefix, clientIDs.Add(1)) }

// maxPacket is the mosquitto harness's max_packet_size.
const maxPacket = 10000

// TestConformance: the sink at QoS 1 against Debian's mosquitto, which can
// persist, authenticate, require client certificates and limit the packet
// size; receivers are MQTT 5 subscribers at QoS 1, with a persistent
// session in a persistent broker.
func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Guarantee: config.AtLeastOnce, Restart: true, Persistent: true, Auth: true, TLS: true,
		// The broker announces its limit in the CONNACK: a message that
		// cannot fit is refused before it is sent.
		MaxPayload: maxPacket,
		Start: func(t *testing.T, o sinktest.Options) *sinktest.Env {
			b := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{
				Users: o.Users, Persistence: o.Persistent, TLS: o.TLS, RequireClientCert: o.TLS != nil, MaxPacketSize: maxPacket})
			var so subOptions
			if o.Users != nil {
				so.user, so.password = sinktest.ReceiverUser, sinktest.ReceiverPassword
			}
			if o.TLS != nil {
				tc, err := (&sink.TLSOptions{CAFile: o.TLS.CA, CertFile: o.TLS.ClientCert, KeyFile: o.TLS.ClientKey}).Config()
				if err != nil {
					t.Fatal(err)
				}
				so.tls = tc
			}
			return &sinktest.Env{
				Sink: func(t *testing.T, c sinktest.SinkOptions) sink.Sink {
					return newSink(t, Config{URL: b.URL(), QoS: 1, CleanSession: !o.Persistent, ClientID: clientID("gw"),
						Username: c.Username, Password: c.Password, TLS: c.TLS})
				},
				Receive: func(t *testing.T) sinktest.Receiver {
					return subscribe(t, b.URL(), clientID("sub"), !o.Persistent, "opcua/json/data/#", so)
				},
				Stop:     b.Stop,
				Start:    b.Start,
				SetUsers: func(t *testing.T, users map[string]string) { b.SetUsers(t, users) },
			}
		},
	})
}

// TestConformanceEmbedded: the sink against the embedded broker (mochi-mqtt,
// in memory), which the gateway runs when no broker is configured.
func TestConformanceEmbedded(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Guarantee: config.AtLeastOnce, Restart: true,
		Start: func(t *testing.T, _ sinktest.Options) *sinktest.Env {
			log := testutil.Logger(t)
			start := func(listen string) *embedded.MQTT {
				ctx, cancel := context.WithTimeout(context.Background(), sinktest.Timeout)
				defer cancel()
				b, err := embedded.StartMQTT(ctx, listen, log)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			b := start("127.0.0.1:0")
			t.Cleanup(func() { b.Close() })
			u := b.URL()
			return &sinktest.Env{
				Sink: func(t *testing.T, c sinktest.SinkOptions) sink.Sink {
					return newSink(t, Config{URL: u, QoS: 1, CleanSession: true, ClientID: clientID("gw")})
				},
				Receive: func(t *testing.T) sinktest.Receiver {
					return subscribe(t, u, clientID("sub"), true, "opcua/json/data/#", subOptions{})
				},
				Stop:  func() { b.Close() },
				Start: func() { b = start(b.Addr()) },
			}
		},
	})
}
