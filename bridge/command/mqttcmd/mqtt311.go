package mqttcmd

import (
	"fmt"
	"log/slog"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/uagate/gateway/bridge/command"
)

// Transport311 is an MQTT 3.1.1 connection carrying commands.
type Transport311 struct {
	cfg Config
	e   *command.Engine
	cl  mqtt.Client
	log *slog.Logger
}

// Start311 connects (retrying in the background while the broker is away)
// and subscribes on every connection.
func Start311(e *command.Engine, cfg Config, log *slog.Logger) (*Transport311, error) {
	t := &Transport311{cfg: cfg, e: e, log: log.With("commands", "mqtt", "sink", cfg.SinkName)}
	o := mqtt.NewClientOptions().AddBroker(cfg.URL).SetClientID(cfg.ClientID + "-commands").
		SetCleanSession(true).SetAutoReconnect(true).SetConnectRetry(true).
		SetConnectRetryInterval(time.Second).SetMaxReconnectInterval(30 * time.Second).
		SetOrderMatters(false).SetKeepAlive(30 * time.Second)
	if cfg.Username != "" {
		o.SetUsername(cfg.Username).SetPassword(cfg.Password)
	}
	if cfg.TLS != nil {
		tc, err := cfg.TLS.Config()
		if err != nil {
			return nil, fmt.Errorf("mqttcmd %s: %w", cfg.SinkName, err)
		}
		o.SetTLSConfig(tc)
	}
	o.SetOnConnectHandler(func(cl mqtt.Client) {
		tok := cl.Subscribe(cfg.filter(), 1, t.handle)
		go func() {
			if tok.WaitTimeout(30*time.Second) && tok.Error() != nil {
				t.log.Error("command subscription refused", "filter", cfg.filter(), "err", tok.Error())
			}
		}()
	})
	o.SetConnectionLostHandler(func(_ mqtt.Client, err error) { t.log.Warn("command connection lost", "err", err) })
	t.cl = mqtt.NewClient(o)
	t.cl.Connect() // with ConnectRetry it keeps trying in the background
	return t, nil
}

// handle runs on a goroutine of paho's per message (OrderMatters false).
func (t *Transport311) handle(_ mqtt.Client, m mqtt.Message) {
	topic, payload := m.Topic(), m.Payload()
	caller := t.cfg.caller(topic)
	t.e.SubmitPayload(caller, payload, func(r *command.Response) {
		to, refused := t.cfg.replyTopic(topic, payload)
		if refused != nil {
			t.log.Warn("command replyTo refused; answering on the default topic", "err", refused)
		}
		t.cl.Publish(to, 1, false, r.Marshal())
	})
}

// Close disconnects.
func (t *Transport311) Close() { t.cl.Disconnect(250) }
