package mqttcmd

import "testing"

// Where a response goes: MQTT 5's Response Topic when it may be used, else
// replyTo, else <topic>/reply; a refused one says why.
func TestResponseTopic(t *testing.T) {
	c := Config{Topic: "opcua/json/command/p"}
	req := "opcua/json/command/p/hmi"
	for _, x := range []struct {
		rt, payload, want string
		refused           bool
	}{
		{"", `{}`, req + "/reply", false},
		{"", `{"replyTo":"a/b"}`, "a/b", false},
		{"", `{"replyTo":"a/#"}`, req + "/reply", true},
		{"resp/hmi", `{"replyTo":"a/b"}`, "resp/hmi", false},
		{"resp/+", `{}`, req + "/reply", true},
		{"$SYS/x", `{"replyTo":"a/b"}`, "a/b", true},
		{"opcua/json/command/p/other", `{}`, req + "/reply", true},
	} {
		to, refused := c.responseTopic(req, x.rt, []byte(x.payload))
		if to != x.want || (refused != nil) != x.refused {
			t.Errorf("response topic %q, payload %s: %q (refused %v), want %q (refused %v)", x.rt, x.payload, to, refused, x.want, x.refused)
		}
	}
}
