package config

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/server"
)

// validBase is a configuration that uses every part, valid as it is.
const validBase = `
endpoints:
  - name: plc
    url: opc.tcp://plc:4840
    identity: {username: op, password: {env: PW}}
  - name: sim
    url: embedded:sim
writerGroups:
  - name: g
    endpoint: plc
    writers:
      - name: w
        fields:
          - {name: a, node: ns=2;s=A}
          - {name: b, node: "nsu=urn:x;i=5", deadband: {type: percent, value: 10}}
          - {name: ev, node: i=2253, events: {ofType: i=2041}}
        browse:
          - {root: i=85}
sinks:
  mqtt:
    - {url: tcp://broker:1883, perField: {}}
  nats:
    - {url: "nats://a:4222,nats://b:4222", jetStream: {stream: S}}
  websocket: {}
  file:
    - {path: "-"}
`

func validConfig(t *testing.T) *Config {
	t.Helper()
	c, _, err := parseWith(t, validBase, map[string]string{"PW": "x"})
	if err != nil {
		t.Fatalf("the base configuration is not valid:\n%v", err)
	}
	return c
}

func intp(i int) *int { return &i }

func TestValidateRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(c *Config)
		want   string // path: message of the one issue
	}{
		{"publisher id empty", func(c *Config) { c.Gateway.PublisherID = "" }, "gateway.publisherId: missing"},
		{"publisher id wildcard", func(c *Config) { c.Gateway.PublisherID = "a/b" }, `gateway.publisherId: "a/b": "/" is not allowed in a name (it is a topic level: no / + # * > or white space)`},
		{"state dir", func(c *Config) { c.Gateway.StateDir = "" }, "gateway.stateDir: missing"},
		{"shutdown timeout", func(c *Config) { c.Gateway.ShutdownTimeout = -1 }, "gateway.shutdownTimeout: -1ns: must be positive"},
		{"http listen", func(c *Config) { c.HTTP.Listen = "8080" }, `http.listen: "8080": want host:port (e.g. 127.0.0.1:8080, :8080)`},
		{"http port", func(c *Config) { c.HTTP.Listen = ":99999" }, `http.listen: ":99999": port "99999" is not a number from 0 to 65535`},
		{"embedded listen", func(c *Config) { c.Embedded.Sim.Listen = "x" }, `embedded.sim.listen: "x": want host:port (e.g. 127.0.0.1:8080, :8080)`},
		{"websocket without http", func(c *Config) { c.HTTP.Disabled = true }, "sinks.websocket: the WebSocket stream needs the HTTP listener, which http.disabled switches off"},
		{"sim switched off", func(c *Config) { f := false; c.Embedded.Sim.Enabled = &f }, "endpoints[1].url: embedded:sim needs the embedded simulation server, which embedded.sim.enabled switches off"},

		{"endpoint name", func(c *Config) { c.Endpoints[1].Name = "" }, "endpoints[1].name: missing"},
		{"endpoint twice", func(c *Config) { c.Endpoints[1].Name = "plc" }, `endpoints[1].name: endpoint "plc" is defined twice`},
		{"endpoint url", func(c *Config) { c.Endpoints[0].URL = "plc:4840" }, `endpoints[0].url: "plc:4840": want opc.tcp://host:port[/path] or embedded:sim`},
		{"endpoint url missing", func(c *Config) { c.Endpoints[0].URL = "" }, `endpoints[0].url: missing`},
		{"policy", func(c *Config) { c.Endpoints[0].SecurityPolicy = "Basic512" }, `endpoints[0].securityPolicy: "Basic512" is not a security policy (want best, or one of ` + policyNames() + `, or a policy URI)`},
		{"deprecated policy", func(c *Config) { c.Endpoints[0].SecurityPolicy = "Basic256" }, "endpoints[0].securityPolicy: Basic256 is deprecated; set allowDeprecated: true to use it"},
		{"mode", func(c *Config) { c.Endpoints[0].SecurityMode = "Encrypt" }, `endpoints[0].securityMode: "Encrypt" is not a security mode (want best, None, Sign or SignAndEncrypt)`},
		{"mode with None", func(c *Config) { c.Endpoints[1].SecurityMode = "Sign" }, "endpoints[1].securityMode: Sign does not go with securityPolicy None"},
		{"None with policy", func(c *Config) {
			c.Endpoints[0].SecurityPolicy, c.Endpoints[0].SecurityMode = "Basic256Sha256", "None"
		}, "endpoints[0].securityMode: None does not go with securityPolicy Basic256Sha256"},
		{"identity type", func(c *Config) { c.Endpoints[0].Identity.Type = "kerberos" }, `endpoints[0].identity.type: "kerberos" is not an identity type (want anonymous, username or x509)`},
		{"anonymous with user", func(c *Config) { c.Endpoints[0].Identity.Type = "anonymous" }, "endpoints[0].identity.type: anonymous takes no username, password, certFile or keyFile"},
		{"username missing", func(c *Config) { c.Endpoints[0].Identity.Username = "" }, "endpoints[0].identity.username: missing: type username needs a username"},
		{"username with cert", func(c *Config) { c.Endpoints[0].Identity.CertFile = "c.pem" }, "endpoints[0].identity.type: username takes no certFile or keyFile (they are for type x509)"},
		{"x509 without key", func(c *Config) {
			c.Endpoints[1].Identity = Identity{Type: "x509", CertFile: "c.pem"}
		}, "endpoints[1].identity: type x509 needs certFile and keyFile"},
		{"x509 with user", func(c *Config) {
			c.Endpoints[1].Identity = Identity{Type: "x509", CertFile: "c.pem", KeyFile: "k.pem", Username: "u"}
		}, "endpoints[1].identity.type: x509 takes no username or password"},
		{"pki", func(c *Config) { c.Endpoints[0].PKI = "" }, "endpoints[0].pki: missing"},
		{"request timeout", func(c *Config) { c.Endpoints[0].RequestTimeout = -5 }, "endpoints[0].requestTimeout: -5ns: must be positive"},
		{"session timeout", func(c *Config) { c.Endpoints[0].SessionTimeout = -5 }, "endpoints[0].sessionTimeout: -5ns: must not be negative"},
		{"endpoint message size", func(c *Config) { c.Endpoints[0].MaxMessageSize = 100 }, "endpoints[0].maxMessageSize: 100: want 0 (the default) or 8192 to 1073741824 bytes"},
		{"endpoint sessions", func(c *Config) { c.Endpoints[0].Sessions = -1 }, "endpoints[0].sessions: -1: want 1 to 64"},
		{"endpoint sessions above the bound", func(c *Config) { c.Endpoints[0].Sessions = 65 }, "endpoints[0].sessions: 65: want 1 to 64"},

		{"group name", func(c *Config) { c.WriterGroups[0].Name = "" }, "writerGroups[0].name: missing"},
		{"group name space", func(c *Config) { c.WriterGroups[0].Name = "line 1" }, `writerGroups[0].name: "line 1": " " is not allowed in a name (it is a topic level: no / + # * > or white space)`},
		{"group twice", func(c *Config) { c.WriterGroups = append(c.WriterGroups, c.WriterGroups[0]) }, `writerGroups[1].name: writer group "g" is defined twice`},
		{"group endpoint", func(c *Config) { c.WriterGroups[0].Endpoint = "nope" }, `writerGroups[0].endpoint: no endpoint is named "nope"`},
		{"group endpoint missing", func(c *Config) { c.WriterGroups[0].Endpoint = "" }, `writerGroups[0].endpoint: missing: name the endpoint the group subscribes to`},
		{"publishing interval", func(c *Config) { c.WriterGroups[0].PublishingInterval = 0 }, "writerGroups[0].publishingInterval: 0s: must be at least 1ms"},
		{"key frame count", func(c *Config) { c.WriterGroups[0].KeyFrameCount = -1 }, "writerGroups[0].keyFrameCount: -1: must not be negative (1: every message is a key frame)"},
		{"group message size", func(c *Config) { c.WriterGroups[0].MaxMessageSize = 10 }, "writerGroups[0].maxMessageSize: 10: want 1024 to 67108864 bytes"},
		{"shape", func(c *Config) { c.WriterGroups[0].MessageShape = "flat" }, `writerGroups[0].messageShape: "flat": want single or batched`},
		{"field encoding", func(c *Config) { c.WriterGroups[0].FieldEncoding = "x" }, `writerGroups[0].fieldEncoding: "x": want variant, dataValue or raw`},
		{"field content without dataValue", func(c *Config) { c.WriterGroups[0].FieldContent = []string{"sourceTimestamp"} }, `writerGroups[0].fieldContent: applies to fieldEncoding dataValue, not variant`},
		{"field content with samples", func(c *Config) {
			c.WriterGroups[0].FieldEncoding, c.WriterGroups[0].Format, c.WriterGroups[0].FieldContent = FieldDataValue, FormatSamples, []string{"sourceTimestamp"}
		}, `writerGroups[0].fieldContent: applies to format part14: samples messages carry OPC Publisher's fixed members`},
		{"field content name", func(c *Config) {
			c.WriterGroups[0].FieldEncoding, c.WriterGroups[0].FieldContent = FieldDataValue, []string{"sourceTimestamp", "sourceTime"}
		}, `writerGroups[0].fieldContent[1]: "sourceTime": want statusCode, sourceTimestamp, serverTimestamp, sourcePicoSeconds or serverPicoSeconds`},
		{"field content twice", func(c *Config) {
			c.WriterGroups[0].FieldEncoding, c.WriterGroups[0].FieldContent = FieldDataValue, []string{"sourceTimestamp", "statusCode", "sourceTimestamp"}
		}, `writerGroups[0].fieldContent[2]: sourceTimestamp named twice`},
		{"encoding", func(c *Config) { c.WriterGroups[0].Encoding = "x" }, `writerGroups[0].encoding: "x": want compact or verbose`},
		{"format", func(c *Config) { c.WriterGroups[0].Format = "x" }, `writerGroups[0].format: "x": want part14 or samples`},
		{"max unacked", func(c *Config) { c.WriterGroups[0].MaxUnacked = 0 }, "writerGroups[0].maxUnacked: 0: want 1 to 65536"},
		{"max notifications per publish", func(c *Config) { c.WriterGroups[0].MaxNotificationsPerPublish = 2000000 }, "writerGroups[0].maxNotificationsPerPublish: 2000000: want 1 to 1048576, or negative for the server's own bound"},
		{"node defaults queue", func(c *Config) { c.WriterGroups[0].Nodes.QueueSize = 20000 }, "writerGroups[0].nodes.queueSize: 20000: at most 10000"},
		{"no writers", func(c *Config) { c.WriterGroups[0].Writers = nil }, "writerGroups[0].writers: none: a writer group needs at least one writer"},
		{"writer id 0", func(c *Config) { c.WriterGroups[0].Writers[0].ID = 0 }, "writerGroups[0].writers[0].id: 0 is the null DataSetWriterId; want 1 to 65535"},
		{"writer id twice", func(c *Config) {
			w := c.WriterGroups[0].Writers[0]
			w.Name = "w2"
			c.WriterGroups[0].Writers = append(c.WriterGroups[0].Writers, w)
		}, "writerGroups[0].writers[1].id: " + strconv.Itoa(int(writerHome("g", "w"))) + " is also the id of writers[0]"},
		{"writer id twice in the configuration", func(c *Config) {
			g := c.WriterGroups[0]
			g.Name = "h"
			g.Writers = []DataSetWriter{c.WriterGroups[0].Writers[0]}
			g.Writers[0].Name = "other"
			c.WriterGroups = append(c.WriterGroups, g)
		}, "writerGroups[1].writers[0].id: " + strconv.Itoa(int(writerHome("g", "w"))) +
			` is also the DataSetWriterId of writerGroups[0].writers[0] (writer "w" of group "g"): DataSetWriterIds are unique per PublisherId`},
		{"writer name twice", func(c *Config) {
			w := c.WriterGroups[0].Writers[0]
			w.ID = 2
			c.WriterGroups[0].Writers = append(c.WriterGroups[0].Writers, w)
		}, `writerGroups[0].writers[1].name: writer "w" is defined twice in the group`},
		{"writer empty", func(c *Config) { c.WriterGroups[0].Writers[0].Fields, c.WriterGroups[0].Writers[0].Browse = nil, nil }, "writerGroups[0].writers[0]: no fields and no browse: a writer needs at least one"},

		{"field name twice", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[1].Name = "a" }, `writerGroups[0].writers[0].fields[1].name: "a" is also the name of fields[0]`},
		{"field name missing", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[1].Name = "" }, `writerGroups[0].writers[0].fields[1].name: missing`},
		{"node id", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[0].Node = "ns=2;x=A" }, `writerGroups[0].writers[0].fields[0].node: "ns=2;x=A" is not a node id (want e.g. ns=1;s=Demo.Counter, i=2258 or nsu=<uri>;s=Name)`},
		{"node id missing", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[0].Node = "" }, `writerGroups[0].writers[0].fields[0].node: missing: a node id such as ns=1;s=Demo.Counter`},
		{"node on other server", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[0].Node = "svr=1;i=5" }, `writerGroups[0].writers[0].fields[0].node: "svr=1;i=5" is on another server (svr=): not supported`},
		{"sampling negative", func(c *Config) { d := Duration(-1); c.WriterGroups[0].Writers[0].Fields[0].SamplingInterval = &d }, "writerGroups[0].writers[0].fields[0].samplingInterval: -1ns: must not be negative (0: the server's fastest)"},
		{"queue size", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[0].QueueSize = 10001 }, "writerGroups[0].writers[0].fields[0].queueSize: 10001: at most 10000"},
		{"deadband percent", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[1].Deadband.Value = 100.5 }, "writerGroups[0].writers[0].fields[1].deadband.value: 100.5: a percentage from 0 to 100"},
		{"deadband absolute", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[1].Deadband = Deadband{"absolute", -1} }, "writerGroups[0].writers[0].fields[1].deadband.value: -1: must not be negative"},
		{"deadband type", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[1].Deadband.Type = "relative" }, `writerGroups[0].writers[0].fields[1].deadband.type: "relative": want none, absolute or percent`},
		{"deadband value without type", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[0].Deadband.Value = 2 }, "writerGroups[0].writers[0].fields[0].deadband.value: 2 without a deadband type: set type absolute or percent"},
		{"trigger", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[0].Trigger = "value" }, `writerGroups[0].writers[0].fields[0].trigger: "value": want status, statusValue or statusValueTimestamp`},
		{"heartbeat", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[0].Heartbeat = -1 }, "writerGroups[0].writers[0].fields[0].heartbeat: -1ns: must not be negative (0: no heartbeat)"},
		{"event select empty", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[2].Events.Select = []string{} }, "writerGroups[0].writers[0].fields[2].events.select: empty: select at least one event field (e.g. Message)"},
		{"event select path", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[2].Events.Select[1] = "a//b" }, `writerGroups[0].writers[0].fields[2].events.select[1]: "a//b": want a browse path such as Message or 2:Cycle/2:Step`},
		{"event type", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[2].Events.OfType = "BaseEventType" }, `writerGroups[0].writers[0].fields[2].events.ofType: "BaseEventType" is not a node id (want e.g. ns=1;s=Demo.Counter, i=2258 or nsu=<uri>;s=Name)`},
		{"event deadband", func(c *Config) { c.WriterGroups[0].Writers[0].Fields[2].Deadband = Deadband{"absolute", 1} }, "writerGroups[0].writers[0].fields[2].deadband: an event field has no deadband"},

		{"browse root", func(c *Config) { c.WriterGroups[0].Writers[0].Browse[0].Root = "" }, "writerGroups[0].writers[0].browse[0].root: missing: the node to browse from"},
		{"browse depth 0", func(c *Config) { c.WriterGroups[0].Writers[0].Browse[0].Depth = 0 }, "writerGroups[0].writers[0].browse[0].depth: 0: want 1 to 32"},
		{"browse depth max", func(c *Config) { c.WriterGroups[0].Writers[0].Browse[0].Depth = 33 }, "writerGroups[0].writers[0].browse[0].depth: 33: want 1 to 32"},
		{"browse glob", func(c *Config) { c.WriterGroups[0].Writers[0].Browse[0].Name = "[a" }, `writerGroups[0].writers[0].browse[0].name: "[a" is not a valid pattern (path.Match syntax: * ? [a-z] \)`},
		{"browse data type", func(c *Config) { c.WriterGroups[0].Writers[0].Browse[0].DataTypes = []string{"Double", "Real"} }, `writerGroups[0].writers[0].browse[0].dataTypes[1]: "Real" is neither a built-in type name (Double, Int32, String …) nor a node id`},
		{"browse max nodes", func(c *Config) { c.WriterGroups[0].Writers[0].Browse[0].MaxNodes = 2000000 }, "writerGroups[0].writers[0].browse[0].maxNodes: 2000000: want 1 to 1000000"},

		{"sink names", func(c *Config) { c.Sinks.NATS[0].Name = "mqtt" }, `sinks.nats[0].name: "mqtt" is also the name of sinks.mqtt[0]`},
		{"mqtt url", func(c *Config) { c.Sinks.MQTT[0].URL = "http://broker" }, `sinks.mqtt[0].url: "http://broker": want a URL with scheme tcp:// mqtt:// ssl:// tls:// mqtts:// ws:// wss:// (host:port), or embedded:mqtt`},
		{"mqtt qos", func(c *Config) { c.Sinks.MQTT[0].QoS = intp(-1) }, "sinks.mqtt[0].qos: -1: want 0, 1 or 2"},
		{"mqtt at-least-once qos 0", func(c *Config) {
			c.Sinks.MQTT[0].QoS = intp(0)
			c.Sinks.MQTT[0].Delivery.Guarantee = "at-least-once"
		}, "sinks.mqtt[0].qos: 0 has no acknowledgement: at-least-once needs qos 1 or 2"},
		{"mqtt protocol version", func(c *Config) { c.Sinks.MQTT[0].ProtocolVersion = 3 }, "sinks.mqtt[0].protocolVersion: 3: want 4 (MQTT 3.1.1) or 5 (MQTT 5.0)"},
		{"mqtt expiry on 3.1.1", func(c *Config) { c.Sinks.MQTT[0].MessageExpiry = Duration(time.Minute) }, "sinks.mqtt[0].messageExpiry: needs protocolVersion 5 (MQTT 3.1.1 has no message expiry)"},
		{"mqtt expiry negative", func(c *Config) {
			c.Sinks.MQTT[0].ProtocolVersion = MQTTv5
			c.Sinks.MQTT[0].MessageExpiry = Duration(-time.Second)
		}, "sinks.mqtt[0].messageExpiry: -1s: want 0 (none) up to 4294967295 seconds"},
		{"guarantee", func(c *Config) { c.Sinks.MQTT[0].Delivery.Guarantee = "exactly-once" }, `sinks.mqtt[0].delivery.guarantee: "exactly-once": want at-most-once or at-least-once`},
		{"policy", func(c *Config) { c.Sinks.File[0].Delivery.Policy = "drop-newest" }, `sinks.file[0].delivery.policy: "drop-newest": want block or drop-oldest`},
		{"sink queue", func(c *Config) { c.Sinks.File[0].Delivery.QueueSize = 0 }, "sinks.file[0].delivery.queueSize: 0: want 1 to 1048576 messages"},
		{"sink queue bytes", func(c *Config) { c.Sinks.NATS[0].Delivery.QueueBytes = 100 }, "sinks.nats[0].delivery.queueBytes: 100: want 1024 to 1073741824 bytes"},
		{"mqtt password without user", func(c *Config) { c.Sinks.MQTT[0].Password = Secret{Env: "X"} }, "sinks.mqtt[0].password: a password needs a username"},
		{"topic placeholder", func(c *Config) { c.Sinks.MQTT[0].DataTopic = "t/{Writer}" }, `sinks.mqtt[0].dataTopic: "t/{Writer}": unknown placeholder {Writer} (want {PublisherId}, {WriterGroup}, {DataSetWriter})`},
		{"topic field", func(c *Config) { c.Sinks.MQTT[0].StatusTopic = "t/{Field}" }, `sinks.mqtt[0].statusTopic: "t/{Field}": {Field} is only known in perField.topic`},
		{"topic brace", func(c *Config) { c.Sinks.MQTT[0].MetaDataTopic = "t/{PublisherId" }, `sinks.mqtt[0].metaDataTopic: "t/{PublisherId": unclosed or stray brace`},
		{"topic wildcard", func(c *Config) { c.Sinks.MQTT[0].DataTopic = "t/#" }, `sinks.mqtt[0].dataTopic: "t/#": a wildcard (# + * >) cannot be published to`},
		{"per-field placeholder", func(c *Config) { c.Sinks.MQTT[0].PerField.Topic = "{Field}/{Node}" }, `sinks.mqtt[0].perField.topic: "{Field}/{Node}": unknown placeholder {Node} (want {PublisherId}, {WriterGroup}, {DataSetWriter} or {Field})`},
		{"per-field payload", func(c *Config) { c.Sinks.MQTT[0].PerField.Payload = "json" }, `sinks.mqtt[0].perField.payload: "json": want value or dataValue`},
		{"tls pair", func(c *Config) { c.Sinks.MQTT[0].TLS = &TLS{CertFile: "c"} }, "sinks.mqtt[0].tls: certFile and keyFile go together"},
		{"embedded mqtt off", func(c *Config) {
			c.Sinks.MQTT[0].URL = EmbeddedMQTTURL
			f := false
			c.Embedded.MQTT.Enabled = &f
		}, "sinks.mqtt[0].url: embedded:mqtt needs the embedded MQTT broker, which embedded.mqtt.enabled switches off"},
		{"nats url", func(c *Config) { c.Sinks.NATS[0].URL = "nats://a:4222,b" }, `sinks.nats[0].url: "b": want a URL with scheme nats:// tls:// ws:// wss:// (host:port), or embedded:nats`},
		{"nats at-least-once", func(c *Config) {
			c.Sinks.NATS[0].JetStream = nil
			c.Sinks.NATS[0].Delivery.Guarantee = "at-least-once"
		}, "sinks.nats[0].delivery.guarantee: at-least-once needs jetStream: core NATS does not acknowledge"},
		{"nats auth", func(c *Config) { c.Sinks.NATS[0].Token = Secret{Env: "T"}; c.Sinks.NATS[0].CredsFile = "c" }, "sinks.nats[0]: give one of username/password, token, credsFile, nkeyFile"},
		{"nats subject", func(c *Config) { c.Sinks.NATS[0].DataSubject = "a.>" }, `sinks.nats[0].dataSubject: "a.>": a wildcard (# + * >) cannot be published to`},
		{"jetstream stream", func(c *Config) { c.Sinks.NATS[0].JetStream.Stream = "" }, "sinks.nats[0].jetStream.stream: missing: the stream to publish to"},
		{"jetstream limits", func(c *Config) { c.Sinks.NATS[0].JetStream.MaxBytes = -1 }, "sinks.nats[0].jetStream: maxAge and maxBytes must not be negative"},
		{"websocket path", func(c *Config) { c.Sinks.WebSocket.Path = "ws" }, `sinks.websocket.path: "ws": must start with /`},
		{"websocket queue", func(c *Config) { c.Sinks.WebSocket.ClientQueue = 0 }, "sinks.websocket.clientQueue: 0: want 1 to 65536"},
		{"file path", func(c *Config) { c.Sinks.File[0].Path = "" }, "sinks.file[0].path: missing: a file name, or - for stdout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig(t)
			tc.mutate(c)
			errs, _ := c.validate()
			var got []string
			for _, is := range errs {
				got = append(got, is.String())
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			if err := c.Validate(); err == nil || err.Error() != strings.Join(got, "\n") {
				t.Errorf("Validate() = %v", err)
			}
		})
	}
}

func TestValidateWarnings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(c *Config)
		want   string
	}{
		{"auto accept", func(c *Config) { c.Endpoints[0].AutoAccept = true }, "endpoints[0].autoAccept: trusts any server certificate: for development only"},
		{"at-least-once drop-oldest", func(c *Config) {
			c.Sinks.MQTT[0].Delivery.Guarantee, c.Sinks.MQTT[0].Delivery.Policy = "at-least-once", "drop-oldest"
		}, "sinks.mqtt[0].delivery.policy: drop-oldest with at-least-once: a message dropped from a full queue is acknowledged upstream all the same, so at-least-once holds only while the queue has room"},
		{"insecure tls", func(c *Config) { c.Sinks.NATS[0].TLS = &TLS{InsecureSkipVerify: true} }, "sinks.nats[0].tls.insecureSkipVerify: the broker's certificate is not verified: for development only"},
	} {
		c := validConfig(t)
		tc.mutate(c)
		errs, warns := c.validate()
		if len(errs) != 0 || len(warns) != 1 || warns[0].String() != tc.want {
			t.Errorf("%s: errors %v, warnings %v; want only %q", tc.name, errs, warns, tc.want)
		}
	}
	if _, warns := validConfig(t).validate(); len(warns) != 0 {
		t.Errorf("the base configuration has warnings: %v", warns)
	}
}

func TestValidationErrorsHaveLines(t *testing.T) {
	_, _, err := parseWith(t, `
endpoints:
  - name: plc
    url: opc.tcp://plc:4840
writerGroups:
  - name: g
    writers:
      - name: w
        fields:
          - node: ns=2;s=A
          - node: ns=2;s=B
          - node: ns=2;s=C
          - name: B
            node: ns=2;s=D
            deadband: {type: percent, value: 101}
`, nil)
	want := []string{
		`test.yaml:13:13: writerGroups[0].writers[0].fields[3].name: "B" is also the name of fields[1]`,
		"test.yaml:15:39: writerGroups[0].writers[0].fields[3].deadband.value: 101: a percentage from 0 to 100",
	}
	if got := issueLines(t, err); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A defaulted setting is reported at the nearest line the file has.
	_, _, err = parseWith(t, "endpoints:\n  - name: plc\n    url: opc.tcp://plc:4840\nwriterGroups:\n  - name: g\n    endpoint: plc\n", nil)
	if got := issueLines(t, err); len(got) != 1 || got[0] != "test.yaml:5:5: writerGroups[0].writers: none: a writer group needs at least one writer" {
		t.Errorf("got %q", got)
	}
}

func TestDefault(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("the default configuration is not valid:\n%v", err)
	}
	if len(c.Endpoints) != 1 || c.Endpoints[0].URL != EmbeddedSimURL || c.Endpoints[0].SecurityPolicy != "None" || !c.Endpoints[0].AutoAccept {
		t.Errorf("endpoints %+v", c.Endpoints)
	}
	want := []struct{ name, node string }{
		{"Counter", server.NodeCounter}, {"Sine", server.NodeSine}, {"Random", server.NodeRandom}, {"Step", server.NodeStep},
	}
	fields := c.WriterGroups[0].Writers[0].Fields
	if len(fields) != len(want) {
		t.Fatalf("fields %+v", fields)
	}
	for i, w := range want {
		if fields[i].Name != w.name || fields[i].Node != w.node {
			t.Errorf("field %d: %s %s, want %s %s (the server's constant)", i, fields[i].Name, fields[i].Node, w.name, w.node)
		}
	}
	if !c.Embedded.Sim.On() || !c.Embedded.MQTT.On() || !c.Embedded.NATS.On() || c.Sinks.WebSocket == nil ||
		len(c.Sinks.MQTT) != 1 || c.Sinks.MQTT[0].URL != EmbeddedMQTTURL || len(c.Sinks.NATS) != 1 {
		t.Errorf("embedded parts and sinks: %+v %+v", c.Embedded, c.Sinks)
	}
	// ApplyDefaults is idempotent.
	before := c.String()
	c.ApplyDefaults()
	if after := c.String(); after != before {
		t.Errorf("a second ApplyDefaults changed the configuration:\n%s\n----\n%s", before, after)
	}
}

func TestDefaultsDerived(t *testing.T) {
	c, _ := mustParse(t, `
endpoints: [{name: plc, url: "opc.tcp://plc:4840"}]
writerGroups:
  - name: g
    publishingInterval: 2s
    writers:
      - {id: 1, name: a, fields: [{node: i=2258}]}
      - {fields: [{node: ns=2;s=X, samplingInterval: 0}]}
      - {id: 2, fields: [{node: ns=2;s=Y}]}
sinks:
  file: [{path: out.jsonl}, {path: more.jsonl}]
`)
	wg := c.WriterGroups[0]
	if wg.KeepAlive.D().String() != "20s" || wg.Nodes.SamplingInterval.D().String() != "200ms" || wg.Nodes.QueueSize != 20 {
		t.Errorf("group: keepAlive %v sampling %v queue %d", wg.KeepAlive, wg.Nodes.SamplingInterval, wg.Nodes.QueueSize)
	}
	// The second writer's id follows from its group and its position (it has
	// no name), unless taken.
	home := writerHome("g", "#1")
	if ids := [3]uint16{wg.Writers[0].ID, wg.Writers[1].ID, wg.Writers[2].ID}; ids != [3]uint16{1, home, 2} {
		t.Errorf("writer ids %v, want [1 %d 2]", ids, home)
	}
	if wg.Writers[1].Name != "writer"+strconv.Itoa(int(home)) || wg.Writers[0].Fields[0].Name != "i=2258" || wg.Writers[1].Fields[0].SamplingInterval.D() != 0 {
		t.Errorf("writers %+v", wg.Writers)
	}
	if c.Sinks.File[1].Name != "file2" || c.Sinks.WebSocket != nil || len(c.Sinks.MQTT) != 0 || c.Embedded.MQTT.On() {
		t.Errorf("sinks %+v, embedded mqtt %v", c.Sinks, c.Embedded.MQTT.On())
	}
}

// TestUndefaulted: a writer group ApplyDefaults filled in names nothing
// unset, and one that did not get its defaults names the first setting.
func TestUndefaulted(t *testing.T) {
	wg := WriterGroup{Name: "g", Endpoint: "e", Writers: []DataSetWriter{{Fields: []Field{{Node: "i=85"}, {Node: "i=2253", Events: &EventSelect{}}}}}}
	if unset := wg.Undefaulted(); unset != "publishingInterval" {
		t.Errorf("before ApplyDefaults: %q, want publishingInterval", unset)
	}
	wg.ApplyDefaults()
	if unset := wg.Undefaulted(); unset != "" {
		t.Errorf("after ApplyDefaults: %q unset", unset)
	}
}

// TestValidateSparkplug: the rules of an MQTT sink's Sparkplug B mode.
func TestValidateSparkplug(t *testing.T) {
	sparkplug := func(c *Config) *Sparkplug {
		m := &c.Sinks.MQTT[0]
		m.PerField = nil
		m.Sparkplug = &Sparkplug{GroupID: "plant", EdgeNodeID: "gw1", Devices: SparkplugDevicesWriter, StoreBytes: 1 << 20}
		return m.Sparkplug
	}
	c := validConfig(t)
	sparkplug(c)
	if err := c.Validate(); err != nil {
		t.Fatalf("a valid sparkplug sink: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(c *Config)
		want   string
	}{
		{"group id", func(c *Config) { sparkplug(c).GroupID = "" }, "sinks.mqtt[0].sparkplug.groupId: missing"},
		{"group id wildcard", func(c *Config) { sparkplug(c).GroupID = "a/b" }, `sinks.mqtt[0].sparkplug.groupId: "a/b": + / and # are not allowed`},
		{"edge node id", func(c *Config) { sparkplug(c).EdgeNodeID = "n+1" }, `sinks.mqtt[0].sparkplug.edgeNodeId: "n+1": + / and # are not allowed`},
		{"primary host id", func(c *Config) { sparkplug(c).PrimaryHostID = "h#" }, `sinks.mqtt[0].sparkplug.primaryHostId: "h#": + / and # are not allowed`},
		{"devices", func(c *Config) { sparkplug(c).Devices = "group" }, `sinks.mqtt[0].sparkplug.devices: "group": want writer or endpoint`},
		{"store bytes", func(c *Config) { sparkplug(c).StoreBytes = 10 }, "sinks.mqtt[0].sparkplug.storeBytes: 10: want 1024 to 1073741824"},
		{"at-least-once", func(c *Config) { sparkplug(c); c.Sinks.MQTT[0].Delivery.Guarantee = AtLeastOnce },
			"sinks.mqtt[0].delivery.guarantee: Sparkplug B publishes its data with QoS 0: at-most-once (what the node cannot send is held in its store and sent after the next birth)"},
		{"clean session", func(c *Config) { sparkplug(c); f := false; c.Sinks.MQTT[0].CleanSession = &f },
			"sinks.mqtt[0].cleanSession: Sparkplug B needs a clean session (3.0 §5.2)"},
		{"per field", func(c *Config) {
			sparkplug(c)
			c.Sinks.MQTT[0].PerField = &PerField{Topic: DefaultPerFieldTopic, Payload: PayloadValue}
		},
			"sinks.mqtt[0].perField: not with sparkplug: the metrics are the fields"},
		{"mqtt 5", func(c *Config) { sparkplug(c); c.Sinks.MQTT[0].ProtocolVersion = 5 },
			"sinks.mqtt[0].protocolVersion: 5: the Sparkplug B node speaks MQTT 3.1.1 (protocolVersion 4)"},
		{"scale-out", func(c *Config) {
			sparkplug(c)
			c.ScaleOut = ScaleOut{Enabled: true, NATSURL: "nats://n:4222", Bucket: "b", LeaseTTL: Duration(10 * time.Second), ReplicaID: "r"}
		},
			"sinks.mqtt[0].sparkplug: not with scaleOut: the replicas would share one edge node id"},
		{"device ids meet", func(c *Config) {
			sparkplug(c)
			g := c.WriterGroups[0]
			g.Name, g.Writers = "g.w", nil
			g.Writers = append(g.Writers, c.WriterGroups[0].Writers[0])
			g.Writers[0].Name, g.Writers[0].ID = "x", 1
			c.WriterGroups = append(c.WriterGroups, g)
			c.WriterGroups[0].Writers[0].Name = "w.x"
		}, `sinks.mqtt[0].sparkplug.devices: writer x of group g.w and writer w.x of group g make the same device id "g.w.x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig(t)
			tc.mutate(c)
			errs, _ := c.validate()
			var got []string
			for _, is := range errs {
				got = append(got, is.String())
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	// Defaults: the edge node id is the publisher id, devices are writers.
	d, _, err := parseWith(t, "sinks:\n  mqtt:\n    - {url: tcp://b:1883, sparkplug: {groupId: plant}}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sp := d.Sinks.MQTT[0].Sparkplug; sp.EdgeNodeID != d.Gateway.PublisherID || sp.Devices != SparkplugDevicesWriter || sp.StoreBytes != DefaultSparkplugStoreBytes {
		t.Errorf("defaults: %+v", sp)
	}
}

// TestStoreAndForwardScaleOut: the log is on by default, off by default
// under scale-out, and switched on by hand under scale-out it is an error
// that says why.
func TestStoreAndForwardScaleOut(t *testing.T) {
	c := validConfig(t)
	if !c.StoreOn() {
		t.Fatal("the log is off by default")
	}
	scaled := func(enabled *bool) *Config {
		c := validConfig(t)
		c.StoreAndForward = StoreAndForward{Enabled: enabled}
		c.ScaleOut = ScaleOut{Enabled: true, NATSURL: "nats://n:4222", ReplicaID: "r"}
		c.ApplyDefaults()
		return c
	}
	if c := scaled(nil); c.StoreOn() {
		t.Error("the log is on by default under scale-out")
	} else if err := c.Validate(); err != nil {
		t.Errorf("scale-out without the log: %v", err)
	}
	on := true
	err := scaled(&on).Validate()
	if err == nil || !strings.Contains(err.Error(), "storeAndForward.enabled: not with scaleOut") {
		t.Errorf("the log switched on under scale-out: %v", err)
	}
}

// TestGroupStoreBounds: a writer group's own bounds in the log are checked
// against the gateway's, and refused when the log is off.
func TestGroupStoreBounds(t *testing.T) {
	with := func(gs GroupStore, off bool) error {
		c := validConfig(t)
		if off {
			no := false
			c.StoreAndForward.Enabled = &no
		}
		c.WriterGroups[0].StoreAndForward = gs
		c.ApplyDefaults()
		return c.Validate()
	}
	if err := with(GroupStore{MaxBytes: 1 << 20, MaxAge: Duration(time.Hour)}, false); err != nil {
		t.Errorf("valid bounds: %v", err)
	}
	for _, tc := range []struct {
		gs   GroupStore
		off  bool
		want string
	}{
		{GroupStore{MaxBytes: 1000}, false, "writerGroups[0].storeAndForward.maxBytes: 1000: want 65536 (64 KiB) to storeAndForward.maxBytes"},
		{GroupStore{MaxBytes: 2 << 30}, false, "writerGroups[0].storeAndForward.maxBytes: 2147483648: want 65536"},
		{GroupStore{MaxAge: Duration(-time.Second)}, false, "writerGroups[0].storeAndForward.maxAge: -1s: must not be negative"},
		{GroupStore{MaxBytes: 1 << 20}, true, "writerGroups[0].storeAndForward: the store-and-forward log is off"},
	} {
		if err := with(tc.gs, tc.off); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v (log off %v): %v, want %q", tc.gs, tc.off, err, tc.want)
		}
	}
}

// TestWriterIDsAcrossGroups: default DataSetWriterIds are unique across the
// whole configuration (one PublisherId, Part 14 §6.2.4.1), follow from the
// group's and the writer's name, and stay what they are when writers or
// groups are added, removed or reordered; an id given by hand keeps its
// number and pushes a default off it.
func TestWriterIDsAcrossGroups(t *testing.T) {
	group := func(name string, writers ...string) WriterGroup {
		wg := WriterGroup{Name: name, Endpoint: "e"}
		for _, w := range writers {
			wg.Writers = append(wg.Writers, DataSetWriter{Name: w, Fields: []Field{{Node: "i=2258"}}})
		}
		return wg
	}
	ids := func(c *Config) map[string]uint16 {
		c.ApplyDefaults()
		out := map[string]uint16{}
		seen := map[uint16]string{}
		for _, g := range c.WriterGroups {
			for _, w := range g.Writers {
				k := g.Name + "/" + w.Name
				if o, dup := seen[w.ID]; dup {
					t.Fatalf("%s and %s share DataSetWriterId %d", o, k, w.ID)
				}
				seen[w.ID], out[k] = k, w.ID
			}
		}
		return out
	}
	a := ids(&Config{Endpoints: []Endpoint{{Name: "e", URL: "opc.tcp://e:4840"}},
		WriterGroups: []WriterGroup{group("line1", "w", "x"), group("line2", "w", "x")}})
	// More groups and writers, in another order: the first ones keep theirs.
	var many []WriterGroup
	for i := range 40 {
		many = append(many, group("more"+strconv.Itoa(i), "w", "x", "y"))
	}
	b := ids(&Config{Endpoints: []Endpoint{{Name: "e", URL: "opc.tcp://e:4840"}},
		WriterGroups: append(many, group("line2", "x", "w", "z"), group("line1", "x", "w"))})
	for k, id := range a {
		if b[k] != id {
			t.Errorf("%s: DataSetWriterId %d, then %d after the configuration grew", k, id, b[k])
		}
	}
	// A writer given line1/w's id by hand keeps it; line1/w gets another.
	g := group("hand", "h")
	g.Writers[0].ID = a["line1/w"]
	c := ids(&Config{Endpoints: []Endpoint{{Name: "e", URL: "opc.tcp://e:4840"}},
		WriterGroups: []WriterGroup{group("line1", "w", "x"), g}})
	if c["hand/h"] != a["line1/w"] || c["line1/w"] == a["line1/w"] || c["line1/x"] != a["line1/x"] {
		t.Errorf("with an id given by hand: %v (before %v)", c, a)
	}
}
