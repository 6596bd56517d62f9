package mqttcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/autopaho/queue"
	"github.com/eclipse/paho.golang/autopaho/queue/memory"
	"github.com/eclipse/paho.golang/paho"

	"github.com/uagate/gateway/bridge/command"
)

// MaxPendingResponses bounds the responses of an MQTT 5 transport waiting
// to be sent (while the broker is away, say); beyond it a response is
// dropped and logged, and the caller, resending, gets the first answer
// from the engine's idempotency.
const MaxPendingResponses = 4096

// Transport5 is an MQTT 5 connection carrying commands (eclipse/paho.golang
// autopaho): it reconnects by itself and subscribes on every connection.
type Transport5 struct {
	cfg    Config
	e      *command.Engine
	cm     *autopaho.ConnectionManager
	cancel context.CancelFunc
	q      *boundedQueue
	log    *slog.Logger
}

// Start5 connects (retrying in the background while the broker is away)
// and subscribes on every connection.
func Start5(e *command.Engine, cfg Config, log *slog.Logger) (*Transport5, error) {
	t := &Transport5{cfg: cfg, e: e, log: log.With("commands", "mqtt5", "sink", cfg.SinkName),
		q: &boundedQueue{Queue: memory.New(), max: MaxPendingResponses}}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("mqttcmd %s: url: %w", cfg.SinkName, err)
	}
	ac := autopaho.ClientConfig{
		ServerUrls: []*url.URL{u}, KeepAlive: 30,
		// A clean session that ends with the connection: commands sent
		// while the gateway was away are not run when it comes back.
		CleanStartOnInitialConnection: true,
		ReconnectBackoff:              autopaho.NewExponentialBackoff(time.Second, 30*time.Second, 2*time.Second, 2),
		ConnectTimeout:                10 * time.Second,
		Queue:                         t.q,
		OnConnectionUp:                t.subscribe,
		OnConnectError:                func(err error) { t.log.Warn("command connection failed", "err", err) },
		ClientConfig: paho.ClientConfig{
			ClientID:          cfg.ClientID + "-commands",
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){t.handle},
			OnClientError:     func(err error) { t.log.Warn("command connection lost", "err", err) },
		},
	}
	if cfg.Username != "" {
		ac.ConnectUsername, ac.ConnectPassword = cfg.Username, []byte(cfg.Password)
	}
	if cfg.TLS != nil {
		if ac.TlsCfg, err = cfg.TLS.Config(); err != nil {
			return nil, fmt.Errorf("mqttcmd %s: %w", cfg.SinkName, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cm, err := autopaho.NewConnection(ctx, ac)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("mqttcmd %s: %w", cfg.SinkName, err)
	}
	t.cm, t.cancel = cm, cancel
	return t, nil
}

// subscribe runs on every connection (it must not block autopaho).
func (t *Transport5) subscribe(cm *autopaho.ConnectionManager, _ *paho.Connack) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: t.cfg.filter(), QoS: 1}}}); err != nil {
			t.log.Error("command subscription refused", "filter", t.cfg.filter(), "err", err)
		}
	}()
}

// handle runs on paho's goroutine, in order; the engine never waits.
func (t *Transport5) handle(pr paho.PublishReceived) (bool, error) {
	p := pr.Packet
	topic, payload := p.Topic, p.Payload
	var rt string
	var corr []byte
	if p.Properties != nil {
		rt, corr = p.Properties.ResponseTopic, p.Properties.CorrelationData
	}
	caller := t.cfg.caller(topic)
	t.e.SubmitPayload(caller, payload, func(r *command.Response) {
		to, refused := t.cfg.responseTopic(topic, rt, payload)
		if refused != nil {
			t.log.Warn("command response topic refused; answering on the default topic", "err", refused)
		}
		utf8 := byte(1)
		resp := &paho.Publish{QoS: 1, Topic: to, Payload: r.Marshal(), Properties: &paho.PublishProperties{
			ContentType: "application/json", PayloadFormat: &utf8, CorrelationData: corr}}
		if err := t.cm.PublishViaQueue(context.Background(), &autopaho.QueuePublish{Publish: resp}); err != nil {
			t.log.Warn("command response not sent", "topic", to, "requestId", r.RequestID, "err", err)
		}
	})
	return true, nil
}

// Close disconnects and waits for autopaho's goroutines.
func (t *Transport5) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = t.cm.Disconnect(ctx)
	t.cancel()
	<-t.cm.Done()
}

// errResponsesFull: MaxPendingResponses are waiting already.
var errResponsesFull = errors.New("too many responses waiting for the broker")

// boundedQueue is autopaho's memory queue with a bound on its entries.
type boundedQueue struct {
	*memory.Queue
	n   atomic.Int64
	max int64
}

func (q *boundedQueue) Enqueue(p io.Reader) error {
	if q.n.Add(1) > q.max {
		q.n.Add(-1)
		return errResponsesFull
	}
	if err := q.Queue.Enqueue(p); err != nil {
		q.n.Add(-1)
		return err
	}
	return nil
}

func (q *boundedQueue) Peek() (queue.Entry, error) {
	e, err := q.Queue.Peek()
	if err != nil {
		return nil, err
	}
	return boundedEntry{e, q}, nil
}

// boundedEntry counts an entry out of the queue.
type boundedEntry struct {
	queue.Entry
	q *boundedQueue
}

func (e boundedEntry) Remove() error {
	e.q.n.Add(-1)
	return e.Entry.Remove()
}

func (e boundedEntry) Quarantine() error {
	e.q.n.Add(-1)
	return e.Entry.Quarantine()
}
