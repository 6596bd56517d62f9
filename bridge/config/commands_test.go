package config

import (
	"strings"
	"testing"
)

// TestCommandsExample: the example of the README and `make run-commands`
// loads, and its rules are on.
func TestCommandsExample(t *testing.T) {
	cfg, _, err := Load("../../examples/commands.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Commands.On() || len(cfg.Commands.Rules) != 1 || cfg.Commands.Topic != DefaultCommandTopic ||
		cfg.Commands.Rules[0].Read[0].Writer != "*" || cfg.Commands.Rate.Burst != DefaultCommandRateBurst {
		t.Fatalf("commands %+v", cfg.Commands)
	}
}

// TestMQTT5Example: the MQTT 5 example of the README loads as it says.
func TestMQTT5Example(t *testing.T) {
	cfg, _, err := Load("../../examples/mqtt5.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Sinks.MQTT; len(m) != 1 || m[0].ProtocolVersion != MQTTv5 || m[0].MessageExpiry.D().Seconds() != 60 || !cfg.Commands.On() {
		t.Fatalf("sinks %+v, commands on %v", cfg.Sinks.MQTT, cfg.Commands.On())
	}
}

// TestSparkplugExample: the Sparkplug B example of the README and `make
// run-sparkplug` loads as it says.
func TestSparkplugExample(t *testing.T) {
	cfg, _, err := Load("../../examples/sparkplug.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Sinks.MQTT
	if len(m) != 1 || m[0].Sparkplug == nil || m[0].Sparkplug.GroupID != "plant1" || m[0].Sparkplug.EdgeNodeID != "gw1" ||
		len(cfg.Commands.Rules) != 1 || len(cfg.Commands.Rules[0].Write) != 1 {
		t.Fatalf("sinks %+v, commands %+v", m, cfg.Commands)
	}
}

// TestCommandsValidate: every mistake is named by its path.
func TestCommandsValidate(t *testing.T) {
	for _, c := range []struct {
		yaml, path, msg string
	}{
		{`commands: {rules: [{callers: ["mqtt-hmi"], read: [{group: demo}]}]}`, "commands.rules[0].callers[0]", "want"},
		{`commands: {rules: [{callers: ["ftp:x"], read: [{group: demo}]}]}`, "commands.rules[0].callers[0]", "transport"},
		{`commands: {rules: [{callers: ["mqtt:x"]}]}`, "commands.rules[0]", "grants nothing"},
		{`commands: {rules: [{callers: ["mqtt:x"], write: [{group: nope}]}]}`, "commands.rules[0].write[0].group", "no writer group"},
		{`commands: {rules: [{callers: ["mqtt:x"], write: [{group: demo, endpoint: sim, node: "i=1"}]}]}`, "commands.rules[0].write[0]", "not both"},
		{`commands: {rules: [{callers: ["mqtt:x"], write: [{endpoint: sim, node: "ns=1;q=1"}]}]}`, "commands.rules[0].write[0].node", "not a node id"},
		{`commands: {rules: [{callers: ["mqtt:x"], call: [{endpoint: nope, object: "i=1", method: "i=2"}]}]}`, "commands.rules[0].call[0].endpoint", "no endpoint"},
		{`commands: {topic: "a/+/b", rules: [{callers: ["mqtt:x"], read: [{group: demo}]}]}`, "commands.topic", "wildcards"},
		{`commands: {sinks: [nope], rules: [{callers: ["mqtt:x"], read: [{group: demo}]}]}`, "commands.sinks[0]", "no MQTT or NATS sink"},
		{`commands: {rate: {perSecond: -1, burst: 0}}`, "commands.rate.perSecond", "positive"},
		{`commands: {maxPayload: 10}`, "commands.maxPayload", "want 256"},
	} {
		_, _, err := Parse([]byte(c.yaml), "gateway.yaml")
		if err == nil {
			t.Errorf("%s: no error", c.yaml)
			continue
		}
		found := false
		for _, is := range Issues(err) {
			if is.Path == c.path && strings.Contains(is.Message, c.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: want %s: …%s…, got %v", c.yaml, c.path, c.msg, err)
		}
	}
}
