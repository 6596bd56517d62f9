package gateway_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// statusValue reads a StatusCode in the Variant encoding ({"UaType":19,
// "Value":{"Code":2150891520}}, or a bare code as Value); ok is false for
// anything else.
func statusValue(raw json.RawMessage) (ua.StatusCode, bool) {
	var v struct {
		UaType int
		Value  json.RawMessage
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.UaType != int(ua.TypeStatusCode) {
		return 0, false
	}
	var code struct{ Code uint32 }
	if err := json.Unmarshal(v.Value, &code); err == nil {
		return ua.StatusCode(code.Code), true
	}
	var n uint32
	if err := json.Unmarshal(v.Value, &n); err == nil {
		return ua.StatusCode(n), true
	}
	return 0, false
}

// TestE2EUnknownNodeIDs configures two fields whose nodes the server does not
// have (an unknown identifier, an unknown namespace URI) beside the Counter:
// each is reported in the log and the stats, carries BadNodeIdUnknown in
// every key frame and is absent from delta frames, and the Counter flows
// without a gap.
func TestE2EUnknownNodeIDs(t *testing.T) {
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		WriterGroups: []config.WriterGroup{{
			Name: "g", PublishingInterval: dur(100 * time.Millisecond), KeyFrameCount: 3,
			Nodes: config.NodeDefaults{SamplingInterval: ptr(dur(10 * time.Millisecond))},
			Writers: []config.DataSetWriter{writer("w",
				field("Counter", server.NodeCounter),
				field("Missing", "ns=1;s=Demo.NoSuchNode"),
				field("NoNamespace", "nsu=urn:nobody;s=X"),
			)},
		}},
		Sinks: embeddedMQTT(),
	}))
	sub := subscribeMQTT(t, g.gw.Addrs().MQTT, "", "", "", "opcua/json/#")
	g.waitLog("monitored item refused", "field=Missing", "BadNodeIdUnknown")
	g.waitLog("monitored item refused", "field=NoNamespace", "BadNodeIdUnknown")
	sub.waitCount(t, g, "g", "w", 10)

	msgs := sub.all(t)
	r := checkStream(t, msgs, streamCheck{publisher: "uagate", group: "g", writer: "w", field: "Counter"})
	keys := 0
	for _, m := range msgs {
		for _, d := range m.dsms {
			for _, name := range []string{"Missing", "NoNamespace"} {
				raw, ok := d.Payload[name]
				switch {
				case d.MessageType == "ua-keyframe":
					if st, isStatus := statusValue(raw); !ok || !isStatus || st != ua.StatusBadNodeIdUnknown {
						t.Fatalf("key frame %d: %s = %s, want the StatusCode BadNodeIdUnknown", d.SequenceNumber, name, raw)
					}
				case ok:
					t.Fatalf("delta frame %d carries %s = %s", d.SequenceNumber, name, raw)
				}
			}
			if d.MessageType == "ua-keyframe" {
				keys++
			}
		}
	}
	if keys < 2 {
		t.Errorf("%d key frames in %d DataSetMessages, want several", keys, r.dsms)
	}
	st := g.groupStats("g")
	if st.RefusedItems < 2 {
		t.Errorf("RefusedItems %d, want 2", st.RefusedItems)
	}
	vals, _, err := g.gw.LastValues("g", bridge.ValueFilter{Writer: "w"}, 0, 1000)
	if err != nil || len(vals) == 0 {
		t.Fatalf("last values of writer g/w: %d, %v", len(vals), err)
	}
	for _, fv := range vals {
		want := ua.StatusBadNodeIdUnknown
		if fv.Field == "Counter" {
			want = ua.StatusGood
		}
		if got := fv.Status; got != want {
			t.Errorf("field %s: status %v, want %v", fv.Field, got, want)
		}
	}
}

// TestE2EBrokerCredentialsRefused runs an MQTT sink with a password the
// broker does not accept: the log says so clearly (without the password),
// the sink retries, and once the broker's password file accepts it (SIGHUP)
// the data flows.
func TestE2EBrokerCredentialsRefused(t *testing.T) {
	const password = "pw-e2e-7f3a9c"
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{Users: map[string]string{"gw": "another", "sub": "sub-pw"}})
	t.Setenv("E2E_MQTT_PASSWORD", password)
	sub := subscribeMQTT(t, mosq.URL(), "", "sub", "sub-pw", "opcua/json/#")
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		WriterGroups: []config.WriterGroup{counterGroup("g")},
		Sinks: config.Sinks{MQTT: []config.MQTTSink{{
			Name: "mosquitto", URL: mosq.URL(), Username: "gw", Password: config.Secret{Env: "E2E_MQTT_PASSWORD"},
			Delivery: config.Delivery{Guarantee: config.AtLeastOnce},
		}}},
	}))
	line := g.waitLog("sink connect failed", "sink=mosquitto", "refused the credentials")
	if !strings.Contains(line, `as \"gw\"`) || !strings.Contains(line, "retryIn=") {
		t.Errorf("the refusal names neither the user nor the retry: %s", line)
	}
	// It retries (backoff from 1 s), refused each time.
	waitUntil(t, g, e2eWait, "a second refused attempt", func() bool { return g.outputStats("mosquitto").ConnectFailures >= 2 })
	if sub.count("g", "counter") != 0 {
		t.Fatal("data arrived with refused credentials")
	}
	mosq.SetUsers(t, map[string]string{"gw": password, "sub": "sub-pw"})
	sub.waitCount(t, g, "g", "counter", 10)
	r := checkStream(t, sub.all(t), streamCheck{publisher: "uagate", group: "g", writer: "counter", field: "Counter"})
	// At-least-once: what was produced while the broker refused is delivered
	// after, from the first DataSetMessage on.
	if r.first != 1 {
		t.Errorf("stream starts at SequenceNumber %d, want 1", r.first)
	}
	if st := g.outputStats("mosquitto"); st.ConnectFailures < 1 || !st.Connected {
		t.Errorf("sink stats %+v: want connect failures, then connected", st)
	}
	if strings.Contains(g.log.String(), password) {
		t.Error("the password appears in the log")
	}
}

// TestE2EOversizedMessagesSplit sets maxMessageSize to 1 KiB for key frames
// of 22 fields (the sim's Dynamic counters of every type and an array): every
// ua-data payload on MQTT stays within it, the pieces of a DataSetMessage
// share its SequenceNumber, and together they carry every field.
func TestE2EOversizedMessagesSplit(t *testing.T) {
	const limit = 1024
	var fields []config.Field
	var names []string
	for _, typ := range server.ScalarTypes {
		names = append(names, typ.String())
		fields = append(fields, field(typ.String(), server.DynamicNode(typ)))
	}
	names = append(names, "DoubleArray")
	fields = append(fields, field("DoubleArray", server.ArrayNode(ua.TypeDouble)))
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		WriterGroups: []config.WriterGroup{{
			Name: "g", PublishingInterval: dur(200 * time.Millisecond), KeyFrameCount: 1, MaxMessageSize: limit,
			Writers: []config.DataSetWriter{writer("w", fields...)},
		}},
		Sinks: embeddedMQTT(),
	}))
	sub := subscribeMQTT(t, g.gw.Addrs().MQTT, "", "", "", "opcua/json/#")
	sub.waitCount(t, g, "g", "w", 30)

	// Every part of a split DataSetMessage has its own SequenceNumber (one
	// after the other); a DataSetMessage is the run of parts up to the one
	// before a field comes again.
	type dataSet struct {
		fields map[string]bool
		parts  int
	}
	var sets []*dataSet
	var lastSeq uint32
	for _, m := range sub.all(t) {
		if m.MessageType == "ua-metadata" {
			if m.size > limit {
				// A DataSetMetaData cannot be split; the gateway sends it and
				// says so.
				g.waitLog("maxMessageSize", "writer=w")
			}
			continue
		}
		if m.MessageType != "ua-data" {
			continue
		}
		if m.size > limit {
			t.Fatalf("a ua-data payload of %d bytes, above maxMessageSize %d", m.size, limit)
		}
		for _, d := range m.dsms {
			if d.DataSetWriterName != "w" || d.MessageType == "ua-keepalive" {
				continue
			}
			if lastSeq != 0 && d.SequenceNumber != lastSeq+1 {
				t.Fatalf("SequenceNumber %d after %d", d.SequenceNumber, lastSeq)
			}
			lastSeq = d.SequenceNumber
			cur := (*dataSet)(nil)
			if len(sets) > 0 {
				cur = sets[len(sets)-1]
			}
			for name := range d.Payload {
				if cur != nil && cur.fields[name] {
					cur = nil // a field again: the next DataSetMessage begins
					break
				}
			}
			if cur == nil {
				cur = &dataSet{fields: map[string]bool{}}
				sets = append(sets, cur)
			}
			for name := range d.Payload {
				cur.fields[name] = true
			}
			cur.parts++
		}
	}
	// The first and the last may be partial: the subscriber came late, the
	// snapshot was taken in the middle of one.
	complete := 0
	for i, ds := range sets {
		if i == 0 || i == len(sets)-1 {
			continue
		}
		for _, name := range names {
			if !ds.fields[name] {
				t.Fatalf("DataSetMessage %d: field %s in none of its %d parts", i, name, ds.parts)
			}
		}
		if ds.parts < 2 {
			t.Fatalf("DataSetMessage %d in %d part(s): the limit split nothing", i, ds.parts)
		}
		complete++
	}
	if complete < 3 {
		t.Fatalf("%d complete DataSetMessages", complete)
	}
}

// TestE2EPublishedNodesJSON runs OPC Publisher's published nodes file, in
// the forms of its documentation (the minimal entry; a PubSub entry with
// writer group, writer id, key frames and the {uri}#{id} and nsu= forms),
// against our simulation server: the data arrives on the embedded MQTT
// broker the defaults start.
func TestE2EPublishedNodesJSON(t *testing.T) {
	sim := startSim(t, 100*time.Millisecond)
	g := startGateway(t, "publishednodes.json", fmt.Sprintf(`// OPC Publisher's publishednodes.json, node ids adapted to the simulation server
[
  {
    "EndpointUrl": %[1]q,
    "UseSecurity": false,
    "OpcNodes": [
      { "Id": "ns=1;s=Demo.Counter", "OpcSamplingInterval": 10, "OpcPublishingInterval": 100, "DisplayName": "Counter" }
    ]
  },
  {
    "EndpointUrl": %[1]q,
    "UseSecurity": false,
    "DataSetWriterGroup": "Line1",
    "DataSetWriterId": "Press",
    "DataSetPublishingInterval": 200,
    "DataSetKeyFrameCount": 3,
    "MessagingMode": "PubSub",
    "OpcNodes": [
      { "Id": "%[2]s#s=Demo.Step", "DataSetFieldId": "Step", "OpcSamplingInterval": 20 },
      { "ExpandedNodeId": "nsu=%[2]s;s=Demo.Sine", "DisplayName": "Sine", "OpcSamplingInterval": 20 }
    ]
  }
]
`, sim.url(), server.DefaultNamespaceURI))
	if g.gw.Addrs().MQTT == "" {
		t.Fatal("no embedded MQTT broker: the defaults did not apply")
	}
	sub := subscribeMQTT(t, g.gw.Addrs().MQTT, "", "", "", "opcua/json/#")
	var counterGroup, counterWriter string
	for _, wg := range g.gw.Config().WriterGroups {
		if wg.Name != "Line1" {
			counterGroup, counterWriter = wg.Name, wg.Writers[0].Name
		}
	}
	if counterGroup == "" {
		t.Fatalf("writer groups %+v: want Line1 and the endpoint's", g.gw.Config().WriterGroups)
	}
	sub.waitCount(t, g, counterGroup, counterWriter, 10)
	sub.waitCount(t, g, "Line1", "Press", 6)
	msgs := sub.all(t)
	checkStream(t, msgs, streamCheck{publisher: "uagate", group: counterGroup, writer: counterWriter, field: "Counter"})
	r := checkStream(t, msgs, streamCheck{publisher: "uagate", group: "Line1", writer: "Press"})
	if r.keyFrames < 2 {
		t.Errorf("Line1/Press: %d key frames in %d DataSetMessages with DataSetKeyFrameCount 3", r.keyFrames, r.dsms)
	}
	for _, m := range msgs {
		for _, d := range m.dsms {
			if d.DataSetWriterName == "Press" && d.MessageType == "ua-keyframe" {
				if _, ok := d.Payload["Step"]; !ok {
					t.Fatalf("Line1/Press key frame without Step: %v", d.Payload)
				}
				if _, ok := d.Payload["Sine"]; !ok {
					t.Fatalf("Line1/Press key frame without Sine: %v", d.Payload)
				}
			}
		}
	}
}

// TestE2EOverflowCounted samples the Counter ten times as fast as it changes
// into a queue of 2 (discardOldest) read every 500 ms: the server sets the
// Overflow bit on what it keeps, and the gateway counts, logs and forwards
// it (the values' status says so in the dataValue encoding).
//
// Not queue size 1: Part 4 §5.12.1.5 sets the Overflow bit only on queues
// larger than one, and the simulation server does as it says.
func TestE2EOverflowCounted(t *testing.T) {
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		WriterGroups: []config.WriterGroup{{
			Name: "g", PublishingInterval: dur(500 * time.Millisecond), FieldEncoding: config.FieldDataValue,
			Nodes: config.NodeDefaults{
				SamplingInterval: ptr(dur(10 * time.Millisecond)), QueueSize: 2, DiscardOldest: ptr(true),
			},
			Writers: []config.DataSetWriter{counterWriter("counter")},
		}},
		Sinks: embeddedMQTT(),
	}))
	sub := subscribeMQTT(t, g.gw.Addrs().MQTT, "", "", "", "opcua/json/#")
	waitUntil(t, g, e2eWait, "2 overflows counted", func() bool { return g.groupStats("g").Overflows >= 2 })
	g.waitLog("queues overflowed", "group=g", "overflowsTotal=")
	sub.waitCount(t, g, "g", "counter", 6)
	checkStream(t, sub.all(t), streamCheck{publisher: "uagate", group: "g", writer: "counter"})
	flagged := 0
	for _, m := range sub.all(t) {
		for _, d := range m.dsms {
			var f struct{ Status struct{ Code uint32 } }
			if raw, ok := d.Payload["Counter"]; ok && json.Unmarshal(raw, &f) == nil && f.Status.Code&0x0480 == 0x0480 {
				flagged++
			}
		}
	}
	if flagged == 0 {
		t.Error("no Counter value on MQTT carries the Overflow bit")
	}
}
