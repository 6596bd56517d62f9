package mqttcmd

import (
	"strings"

	"github.com/uagate/gateway/bridge/command"
	"github.com/uagate/gateway/bridge/sink"
)

// Config of a transport (either protocol version).
type Config struct {
	// SinkName names the callers' sink.
	SinkName string
	URL      string
	ClientID string // the sink's; "-commands" is appended
	Username string
	Password string
	TLS      *sink.TLSOptions // the sink's; nil without
	// Topic is the request topic without the caller level (placeholders
	// filled in).
	Topic string
	// Share, when set, subscribes as a shared subscription of this group.
	Share string
}

// filter is the subscription's topic filter.
func (c *Config) filter() string {
	f := c.Topic + "/+"
	if c.Share != "" {
		f = "$share/" + c.Share + "/" + f
	}
	return f
}

// caller names the caller of a request on topic.
func (c *Config) caller(topic string) command.Caller {
	return command.Caller{Transport: command.TransportMQTT, Sink: c.SinkName, ID: strings.TrimPrefix(topic, c.Topic+"/")}
}

// replyTopic is where the response to a request on topic goes: the
// request's replyTo when it may be used, else <topic>/reply.
func (c *Config) replyTopic(topic string, payload []byte) (to string, refused error) {
	if rt := command.PeekReplyTo(payload); rt != "" {
		if err := command.CheckReplyTo(rt, '/', c.Topic); err != nil {
			return topic + "/reply", err
		}
		return rt, nil
	}
	return topic + "/reply", nil
}
