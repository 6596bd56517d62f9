package gateway_test

// The Sparkplug B 3.0 tests: the gateway as an Edge Node through mosquitto,
// the simulation server upstream (and node-opcua in TestSparkplugNodeOPCUA:
// births with its known values, a DCMD write, its device's death and
// rebirth), a host of the test's own (spHost,
// decoding with the code generated from sparkplug_b.proto) on the other
// side. The Eclipse Sparkplug TCK is a HiveMQ broker extension driven from
// a browser, which the package registries do not serve; these tests check
// the specification's normative statements for an Edge Node instead (the
// tck-id of each, Sparkplug 3.0.0, and the test that checks it; the
// payload encoding itself, per datatype, is TestTypeTable's and
// TestStatusAndNull's in bridge/sink/sparkplug):
//
// Topics (§4):
//   - topic-structure, -namespace-a, -device-id-associated-message-types,
//     -device-id-non-associated-message-types: every message checkSparkplug
//     sees parses as spBv1.0/<group>/<type>/<node>[/<device>], a device id
//     exactly on DBIRTH, DDATA, DDEATH (all tests).
//   - topic-structure-namespace-valid-group-id, -valid-edge-node-id,
//     -valid-device-id, -unique-device-id: TestValidateSparkplug (config).
//   - topics-nbirth-topic, -mqtt (QoS 0, no retain), -seq-num (0),
//     -timestamp, -bdseq-included, -rebirth-metric: checkSparkplug.
//   - topics-nbirth-bdseq-increment (0 first, one more per CONNECT),
//     -bdseq-matching (NBIRTH and will): TestSparkplugReconnect,
//     TestSparkplugKill9, TestSparkplugPrimaryHost.
//   - topics-nbirth-metrics, topics-dbirth-metrics, -metric-reqs (name,
//     datatype, current value): TestSparkplugBirthDataSeq.
//   - topics-dbirth-topic, -mqtt, -seq, -timestamp; topics-ddata-topic,
//     -mqtt, -seq-num, -timestamp, -payload (changed metrics only: DDATA
//     carries a publish's changes); topics-ddeath-topic, -mqtt, -seq-num:
//     checkSparkplug, TestSparkplugDeviceDeath.
//   - topics-ndeath-topic, -payload (bdSeq alone), -seq (none):
//     checkSparkplug, TestSparkplugReconnect, TestSparkplugKill9.
//
// Operational behaviour (§5):
//   - message-flow-edge-node-ncmd-subscribe, message-flow-device-dcmd-subscribe
//     (QoS 1, before NBIRTH; DCMD by a wildcard over the devices):
//     TestSparkplugBirthDataSeq (NCMD honoured), TestSparkplugDCMD.
//   - message-flow-edge-node-birth-publish-connect, -will-message,
//     -will-message-topic, -will-message-payload, -will-message-payload-bdSeq,
//     -will-message-qos (1), -will-message-will-retained (false):
//     TestSparkplugReconnect (cut connection), TestSparkplugKill9 (kill -9).
//   - message-flow-edge-node-birth-publish-nbirth-topic, -nbirth-payload,
//     -nbirth-payload-bdSeq, -nbirth-qos, -nbirth-retained,
//     -nbirth-payload-seq: checkSparkplug.
//   - message-flow-edge-node-birth-publish-phid-wait, -phid-wait-id,
//     -phid-wait-online, -phid-wait-timestamp, -phid-offline;
//     operational-behavior-edge-node-birth-sequence-wait,
//     -edge-node-termination-host-offline, -host-offline-reconnect,
//     -host-offline-timestamp (an older offline STATE ignored):
//     TestSparkplugPrimaryHost.
//   - message-flow-device-birth-publish-nbirth-wait, -dbirth-topic,
//     -dbirth-match-edge-node-topic, -dbirth-payload, -dbirth-qos,
//     -dbirth-retained, -dbirth-payload-seq: checkSparkplug.
//   - operational-behavior-device-ddeath: TestSparkplugDeviceDeath.
//   - operational-behavior-edge-node-intentional-disconnect-ndeath,
//     payloads-ndeath-will-message-publisher-disconnect-mqtt311 (NDEATH
//     published before a DISCONNECT): TestSparkplugPrimaryHost (leaving for
//     an offline host), TestSparkplugDeviceDeath (a clean stop).
//   - operational-behavior-data-publish-nbirth, -dbirth, -nbirth-values,
//     -dbirth-values (current value, or is_null without one):
//     TestSparkplugBirthDataSeq (Bad: is_null).
//   - operational-behavior-data-publish-dbirth-order (values of a metric in
//     chronological order, historical ones in order before live ones):
//     TestSparkplugReconnect, TestSparkplugPrimaryHost (checkCounterHistory);
//     across a kill -9 and a stop of the gateway, the held data in the
//     store-and-forward log and sent by the next process with its own
//     aliases: TestSparkplugHeldKill9, TestSparkplugHeldAcrossStop
//     (sparkplug_restart_test.go).
//   - operational-behavior-data-commands-rebirth-name, -name-aliases (no
//     alias), -datatype (Boolean), -value (false), -rebirth-action-1, -2,
//     -3 (births again, same bdSeq): checkSparkplug, TestSparkplugBirthDataSeq.
//   - operational-behavior-data-commands-dcmd-metric-name, -dcmd-metric-value
//     (by alias or name; a value of another type refused):
//     TestSparkplugDCMD.
//
// Payloads (§6):
//   - payloads-sequence-num-always-included, -zero-nbirth, -incrementing
//     (0 after 255): checkSparkplug, TestSparkplugBirthDataSeq (wraps).
//   - payloads-nbirth-seq, -timestamp, -bdseq, -bdseq-repeat, -rebirth-req,
//     -qos, -retain; payloads-dbirth-seq, -seq-inc, -timestamp, -qos,
//     -retain; payloads-ddata-seq, -seq-inc, -timestamp, -qos, -retain;
//     payloads-ddeath-seq, -seq-inc, -timestamp; payloads-ndeath-seq,
//     -bdseq, -will-message, -will-message-qos, -will-message-retain:
//     checkSparkplug.
//   - payloads-name-requirement, -alias-uniqueness (across the node),
//     -alias-birth-requirement, -alias-data-cmd-requirement (DDATA: alias,
//     no name), -name-birth-data-requirement (a timestamp on every metric),
//     -metric-datatype-req, -metric-datatype-not-req, -metric-datatype-value:
//     checkSparkplug.
//   - payloads-propertyset-keys-array-size, -values-array-size,
//     -quality-value-type (Int32), -quality-value-value (0 for Bad, 192),
//     -metric-propertyvalue-type-type, -type-value, -type-req:
//     TestSparkplugBirthDataSeq, TestStatusAndNull.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/gateway"
	"github.com/uagate/gateway/bridge/sink/sparkplug"
	pb "github.com/uagate/gateway/bridge/sink/sparkplug/sparkplugpb"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// sparkplugSink is an MQTT sink "scada" in Sparkplug mode, group plant,
// edge node gw1.
func sparkplugSink(url string, sp config.Sparkplug) config.Sinks {
	if sp.GroupID == "" {
		sp.GroupID = "plant"
	}
	if sp.EdgeNodeID == "" {
		sp.EdgeNodeID = "gw1"
	}
	return config.Sinks{MQTT: []config.MQTTSink{{Name: "scada", URL: url, Sparkplug: &sp}}}
}

// TestSparkplugBirthDataSeq: the gateway as an Edge Node through mosquitto
// with the simulation server upstream. NBIRTH, then a DBIRTH per writer
// whose metrics are the configured fields with the datatypes of their
// values, then DDATA with aliases only, every message with the next seq,
// wrapping from 255 to 0. A rebirth request (NCMD) brings NBIRTH with the
// same bdSeq and seq 0, and DBIRTHs with the same aliases carrying the
// current values: a Bad one is_null with Quality 0, an Uncertain one with
// its value and Quality 192.
func TestSparkplugBirthDataSeq(t *testing.T) {
	sim := startSim(t, 10*time.Millisecond)
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	host := startSpHost(t, mosq.URL(), "plant")
	var types []config.Field
	want := map[string]sparkplug.DataType{}
	for _, ty := range server.ScalarTypes {
		types = append(types, field(ty.String(), server.DynamicNode(ty)))
		want[ty.String()] = sparkplug.DataTypeOf(ty, false)
	}
	types = append(types, field("DoubleArray", server.ArrayNode(ua.TypeDouble)), field("Int32Matrix", server.NodeInt32Matrix))
	want["DoubleArray"], want["Int32Matrix"] = sparkplug.DoubleArray, sparkplug.Int32Array
	demo := []config.Field{field("Counter", server.NodeCounter), field("Step", server.NodeStep),
		field("Bad", server.NodeBad), field("Uncertain", server.NodeUncertain)}
	want["Counter"], want["Step"], want["Bad"], want["Uncertain"] = sparkplug.Double, sparkplug.Int32, sparkplug.Double, sparkplug.Double
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		Gateway:   config.Gateway{PublisherID: "e2e"},
		Endpoints: []config.Endpoint{simEndpoint("sim", sim.url())},
		WriterGroups: []config.WriterGroup{{
			Name: "line", Endpoint: "sim", PublishingInterval: dur(20 * time.Millisecond),
			Writers: []config.DataSetWriter{writer("demo", demo...), writer("types", types...)},
		}},
		Sinks: sparkplugSink(mosq.URL(), config.Sparkplug{}),
	}))
	// 300 messages: seq wraps.
	host.waitFor(g, "300 messages of the edge node", 0, 300, func(m spMsg) bool { return m.node == "gw1" })
	nb := host.find(kind("NBIRTH", ""))
	if bd := metricByName(nb[0].p, sparkplug.MetricBdSeq); bd.GetLongValue() != 0 {
		t.Errorf("first NBIRTH's bdSeq %d, want 0", bd.GetLongValue())
	}
	before := checkSparkplug(t, host.all(), "gw1")

	mark := len(host.all())
	host.ncmdRebirth("gw1")
	host.waitFor(g, "NBIRTH and two DBIRTHs after the rebirth request", mark, 3, func(m spMsg) bool { return m.kind == "NBIRTH" || m.kind == "DBIRTH" })
	host.waitFor(g, "DDATA after the rebirth", mark, 20, kind("DDATA", ""))
	msgs := host.all()
	s := checkSparkplug(t, msgs, "gw1")
	if s.births != 2 || !s.wrapped || s.data < 250 {
		t.Errorf("%d NBIRTHs, seq wrapped %v, %d DDATA", s.births, s.wrapped, s.data)
	}
	nb = host.find(kind("NBIRTH", ""))
	if bd := metricByName(nb[1].p, sparkplug.MetricBdSeq); bd.GetLongValue() != 0 {
		t.Errorf("NBIRTH after the rebirth request: bdSeq %d, want 0 (the same MQTT session)", bd.GetLongValue())
	}
	for dev, names := range before.aliases {
		for name, a := range names {
			if s.aliases[dev][name] != a {
				t.Errorf("%s/%s: alias %d before the rebirth, %d after", dev, name, a, s.aliases[dev][name])
			}
		}
	}
	// The births after the rebirth carry every configured field, with the
	// datatype of its built-in type, and its current value.
	for _, w := range []struct {
		device string
		fields []config.Field
	}{{"line.demo", demo}, {"line.types", types}} {
		var db *spMsg
		for _, m := range msgs[mark:] {
			if m.kind == "DBIRTH" && m.device == w.device {
				db = &m
				break
			}
		}
		if db == nil {
			t.Fatalf("no DBIRTH of %s after the rebirth request", w.device)
		}
		if len(db.p.Metrics) != len(w.fields) {
			t.Errorf("DBIRTH of %s: %d metrics, want %d", w.device, len(db.p.Metrics), len(w.fields))
		}
		for _, f := range w.fields {
			mt := metricByName(db.p, f.Name)
			if mt == nil {
				t.Errorf("DBIRTH of %s: no metric %s", w.device, f.Name)
				continue
			}
			if got := sparkplug.DataType(mt.GetDatatype()); got != want[f.Name] {
				t.Errorf("DBIRTH of %s: %s has datatype %v, want %v", w.device, f.Name, got, want[f.Name])
			}
			props := spProps(mt)
			switch f.Name {
			case "Bad":
				if !mt.GetIsNull() || mt.Value != nil || props[sparkplug.PropQuality] != "0" || props[sparkplug.PropStatusCode] != strconv.Itoa(int(ua.StatusBadSensorFailure)) {
					t.Errorf("Bad: is_null %v, value %v, properties %v", mt.GetIsNull(), mt.Value, props)
				}
			case "Uncertain":
				if mt.GetIsNull() || mt.Value == nil || props[sparkplug.PropQuality] != "192" {
					t.Errorf("Uncertain: is_null %v, value %v, properties %v", mt.GetIsNull(), mt.Value, props)
				}
			default:
				if mt.GetIsNull() || props[sparkplug.PropQuality] != "" || props[sparkplug.PropNodeID] != f.Node {
					t.Errorf("%s: is_null %v, properties %v", f.Name, mt.GetIsNull(), props)
				}
			}
		}
	}
	// The counter goes up by one per DDATA of the demo device; a DBIRTH
	// (the rebirth) carries its current value, which may be the last DDATA's
	// again or be ahead of it: the DDATA queued across the rebirth (as many
	// as a busy machine left waiting) come after it, their values not newer
	// than the DBIRTH's marked historical.
	alias := s.aliases["line.demo"]["Counter"]
	last, n := -1.0, 0
	births := kind("DBIRTH", "line.demo")
	for _, m := range host.find(func(m spMsg) bool { return births(m) || kind("DDATA", "line.demo")(m) }) {
		birth := births(m)
		for _, mt := range m.p.Metrics {
			if birth && (mt.GetName() != "Counter" || mt.GetIsNull() || last < 0) || !birth && mt.GetAlias() != alias || mt.GetIsHistorical() {
				continue // the first DBIRTH comes before the values
			}
			v := mt.GetDoubleValue()
			if last >= 0 && v != last+1 && !(birth && v >= last) {
				t.Errorf("Counter %v after %v (in a %s)", v, last, m.kind)
			}
			last = v
			if !birth {
				n++
			}
		}
	}
	if n < 50 {
		t.Errorf("%d Counter values in DDATA", n)
	}
	st := g.gw.Stats().Sparkplug
	if len(st) != 1 || st[0].State != sparkplug.StateOnline || st[0].Devices != 2 || st[0].DevicesOnline != 2 ||
		st[0].NodeBirths != 2 || st[0].Rebirths != 1 || st[0].DataMessages < 250 || st[0].BdSeq != 0 {
		t.Errorf("stats %+v", st)
	}
}

// counterValues returns the Counter values (alias) of a device's DDATA in
// the order received, the historical ones marked.
func counterValues(msgs []spMsg, device string, alias uint64) (vals []float64, hist []bool) {
	for _, m := range msgs {
		if m.kind != "DDATA" || m.device != device {
			continue
		}
		for _, mt := range m.p.Metrics {
			if mt.GetAlias() == alias {
				vals = append(vals, mt.GetDoubleValue())
				hist = append(hist, mt.GetIsHistorical())
			}
		}
	}
	return vals, hist
}

// checkCounterHistory checks a counter's values from the first historical
// one on (the values held while the node was not online, then the live
// ones): in order and none missing. Before it, the values written to the
// broker's socket as the connection broke may be lost (QoS 0: 3.0 §6.4
// makes data at-most-once); at most maxLost of them.
func checkCounterHistory(t *testing.T, vals []float64, hist []bool, maxLost int) {
	t.Helper()
	first := slices.Index(hist, true)
	if first < 0 {
		t.Fatalf("no historical Counter value in %d", len(vals))
	}
	if first > 0 && vals[first]-vals[first-1]-1 > float64(maxLost) {
		t.Errorf("Counter: %v values lost between %v (live) and %v (the first held)", vals[first]-vals[first-1]-1, vals[first-1], vals[first])
	}
	nh := 0
	for i := first; i < len(vals); i++ {
		if hist[i] {
			nh++
		}
		if i > first && vals[i] != vals[i-1]+1 {
			t.Errorf("Counter %v after %v (historical %v, %v)", vals[i], vals[i-1], hist[i-1], hist[i])
		}
	}
	t.Logf("Counter %v..%v: %d historical, then %d live", vals[first], vals[len(vals)-1], nh, len(vals)-first-nh)
}

// TestSparkplugReconnect: a connection cut by the network makes the broker
// publish the will, NDEATH with the connection's bdSeq (QoS 1); the node
// connects again with the next bdSeq, and its births have the aliases of
// before. While the broker is away the data is held and sent after the
// next birth, older than the births' values marked historical: the Counter
// misses no value.
func TestSparkplugReconnect(t *testing.T) {
	sim := startSim(t, 20*time.Millisecond)
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	proxy := brokertest.StartProxy(t, mosq.Addr())
	host := startSpHost(t, mosq.URL(), "plant")
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		Gateway:   config.Gateway{PublisherID: "e2e"},
		Endpoints: []config.Endpoint{simEndpoint("sim", sim.url())},
		WriterGroups: []config.WriterGroup{{
			Name: "line", Endpoint: "sim", PublishingInterval: dur(20 * time.Millisecond),
			Writers: []config.DataSetWriter{writer("demo", field("Counter", server.NodeCounter), field("Sine", server.NodeSine))},
		}},
		Sinks: sparkplugSink("tcp://"+proxy.Addr(), config.Sparkplug{}),
	}))
	host.waitFor(g, "DDATA", 0, 10, kind("DDATA", "line.demo"))

	mark := len(host.all())
	proxy.Cut()
	death := host.waitFor(g, "the will NDEATH", mark, 1, kind("NDEATH", ""))[0]
	if bd := metricByName(death.p, sparkplug.MetricBdSeq); death.qos != 1 || death.retained || bd.GetLongValue() != 0 {
		t.Errorf("will NDEATH: qos %d retained %v bdSeq %d, want 1, false, 0", death.qos, death.retained, bd.GetLongValue())
	}
	nb := host.waitFor(g, "NBIRTH after the reconnect", mark, 1, kind("NBIRTH", ""))[0]
	if bd := metricByName(nb.p, sparkplug.MetricBdSeq); bd.GetLongValue() != 1 {
		t.Errorf("NBIRTH after the reconnect: bdSeq %d, want 1", bd.GetLongValue())
	}

	// A longer absence: the broker stopped until the node failed to connect.
	host.waitFor(g, "DDATA after the reconnect", mark, 10, kind("DDATA", "line.demo"))
	mark = len(host.all())
	failures := g.gw.Stats().Sparkplug[0].ConnectFailures
	mosq.Stop()
	waitUntil(t, g, e2eWait, "a failed connection attempt", func() bool {
		return g.gw.Stats().Sparkplug[0].ConnectFailures > failures && g.gw.Stats().Sparkplug[0].Store.Messages > 5
	})
	mosq.Start()
	host.waitFor(g, "NBIRTH after the broker came back", mark, 1, kind("NBIRTH", ""))
	host.waitFor(g, "live DDATA after the held data", mark, 10, func(m spMsg) bool {
		return m.kind == "DDATA" && len(m.p.Metrics) > 0 && !m.p.Metrics[0].GetIsHistorical()
	})
	msgs := host.all()
	s := checkSparkplug(t, msgs, "gw1")
	if s.births != 3 {
		t.Errorf("%d NBIRTHs, want 3", s.births)
	}
	alias := s.aliases["line.demo"]["Counter"]
	firstAlias := uint64(0)
	for _, m := range msgs {
		if m.kind == "DBIRTH" && m.device == "line.demo" {
			if a := metricByName(m.p, "Counter").GetAlias(); firstAlias == 0 {
				firstAlias = a
			} else if a != firstAlias {
				t.Errorf("Counter's alias %d after a reconnect, %d before", a, firstAlias)
			}
		}
	}
	vals, hist := counterValues(msgs[mark:], "line.demo", alias)
	checkCounterHistory(t, vals, hist, 25)
	if st := g.gw.Stats().Sparkplug[0]; st.BdSeq < 2 || st.Historical == 0 || st.Store.Messages != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestSparkplugDeviceDeath: devices are endpoints here; when an endpoint's
// session is lost its device dies (DDEATH), the other lives on; when the
// server is back the device is born again.
func TestSparkplugDeviceDeath(t *testing.T) {
	sim1 := startSim(t, 20*time.Millisecond)
	sim2 := startSim(t, 20*time.Millisecond)
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	host := startSpHost(t, mosq.URL(), "plant")
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		Gateway:   config.Gateway{PublisherID: "e2e"},
		Endpoints: []config.Endpoint{simEndpoint("plc1", sim1.url()), simEndpoint("plc2", sim2.url())},
		WriterGroups: []config.WriterGroup{{
			Name: "a", Endpoint: "plc1", PublishingInterval: dur(20 * time.Millisecond),
			Writers: []config.DataSetWriter{writer("w", field("Counter", server.NodeCounter))},
		}, {
			Name: "b", Endpoint: "plc2", PublishingInterval: dur(20 * time.Millisecond),
			Writers: []config.DataSetWriter{writer("w", field("Counter", server.NodeCounter)), writer("v", field("Step", server.NodeStep))},
		}},
		Sinks: sparkplugSink(mosq.URL(), config.Sparkplug{Devices: config.SparkplugDevicesEndpoint}),
	}))
	for _, d := range []string{"plc1", "plc2"} {
		host.waitFor(g, "DDATA of "+d, 0, 5, kind("DDATA", d))
	}
	db := host.find(kind("DBIRTH", "plc2"))
	if len(db) == 0 || metricByName(db[len(db)-1].p, "b/w/Counter") == nil || metricByName(db[len(db)-1].p, "b/v/Step") == nil {
		t.Fatalf("DBIRTH of plc2: %v", db)
	}
	mark := len(host.all())
	sim2.stop()
	host.waitFor(g, "DDEATH of plc2", mark, 1, kind("DDEATH", "plc2"))
	after := len(host.all())
	host.waitFor(g, "DDATA of plc1 after plc2's death", after, 5, kind("DDATA", "plc1"))
	if n := len(host.find(kind("DDEATH", "plc1"))); n != 0 {
		t.Errorf("plc1 died %d times", n)
	}
	// The counter goes up once the DDEATH was written, which may be after
	// the host got it.
	waitUntil(t, g, e2eWait, "the stats with plc2 down", func() bool {
		st := g.gw.Stats().Sparkplug[0]
		return st.Devices == 2 && st.DevicesOnline == 1 && st.DeviceDeaths == 1
	})
	sim2.start()
	host.waitFor(g, "DBIRTH of plc2 again", after, 1, kind("DBIRTH", "plc2"))
	host.waitFor(g, "DDATA of plc2 again", after, 5, kind("DDATA", "plc2"))

	// A clean stop publishes NDEATH before its DISCONNECT (which keeps the
	// broker from publishing the will).
	mark = len(host.all())
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	if err := g.gw.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	death := host.waitFor(nil, "NDEATH at the stop", mark, 1, kind("NDEATH", ""))[0]
	if bd := metricByName(death.p, sparkplug.MetricBdSeq); bd.GetLongValue() != 0 || death.retained {
		t.Errorf("NDEATH at the stop: bdSeq %d, retained %v", bd.GetLongValue(), death.retained)
	}
	checkSparkplug(t, host.all(), "gw1")
}

// TestSparkplugPrimaryHost: with primaryHostId the node waits for the
// host's STATE to be online before its births, holding the data; it sends
// what it held after the births as history, in order. An offline STATE
// older than the last online one is ignored; a current one makes the node
// send NDEATH, leave the broker and wait again (3.0 §5.5).
func TestSparkplugPrimaryHost(t *testing.T) {
	sim := startSim(t, 20*time.Millisecond)
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	host := startSpHost(t, mosq.URL(), "plant")
	g := startGateway(t, "gateway.yaml", marshalConfig(t, &config.Config{
		Gateway:   config.Gateway{PublisherID: "e2e"},
		Endpoints: []config.Endpoint{simEndpoint("sim", sim.url())},
		WriterGroups: []config.WriterGroup{{
			Name: "line", Endpoint: "sim", PublishingInterval: dur(20 * time.Millisecond),
			Writers: []config.DataSetWriter{writer("demo", field("Counter", server.NodeCounter))},
		}},
		Sinks: sparkplugSink(mosq.URL(), config.Sparkplug{PrimaryHostID: "scada"}),
	}))
	node := func() sparkplug.Stats { return g.gw.Stats().Sparkplug[0] }
	waitUntil(t, g, e2eWait, "the node connected and holding data for the host", func() bool {
		st := node()
		return st.State == sparkplug.StateWaiting && st.Store.Messages >= 10
	})
	if n := len(host.find(func(m spMsg) bool { return m.node == "gw1" })); n != 0 {
		t.Fatalf("%d messages before the host was online", n)
	}
	// With the store-and-forward log on (a state directory), the node holds
	// its data in the log, in a stream of its own.
	if st := node(); st.Store.Stream != sparkplug.StreamName("scada") {
		t.Errorf("held data in %q, want the log's stream %s", st.Store.Stream, sparkplug.StreamName("scada"))
	}
	t1 := time.Now().UnixMilli()
	host.state("scada", true, t1)
	host.waitFor(g, "live DDATA after the held data", 0, 10, func(m spMsg) bool {
		return m.kind == "DDATA" && len(m.p.Metrics) > 0 && !m.p.Metrics[0].GetIsHistorical()
	})
	msgs := host.all()
	s := checkSparkplug(t, msgs, "gw1")
	alias := s.aliases["line.demo"]["Counter"]
	vals, hist := counterValues(msgs, "line.demo", alias)
	checkCounterHistory(t, vals, hist, 0)
	if st := node(); st.State != sparkplug.StateOnline || !st.HostOnline || st.HostTimestamp.UnixMilli() != t1 || st.Store.Messages != 0 {
		t.Errorf("online: %+v", st)
	}

	// An old offline STATE (a late will of an earlier host session) is
	// ignored.
	mark := len(host.all())
	host.state("scada", false, t1-1)
	host.waitFor(g, "DDATA after an old offline STATE", mark, 20, kind("DDATA", "line.demo"))
	if n := len(host.find(kind("NDEATH", ""))); n != 0 || node().State != sparkplug.StateOnline {
		t.Fatalf("an old offline STATE took the node offline (%d NDEATHs)", n)
	}
	// A current one: NDEATH (published by the node before it disconnects),
	// and a new connection that waits.
	host.state("scada", false, t1+1)
	death := host.waitFor(g, "NDEATH", mark, 1, kind("NDEATH", ""))[0]
	if bd := metricByName(death.p, sparkplug.MetricBdSeq); bd.GetLongValue() != 0 {
		t.Errorf("NDEATH bdSeq %d, want 0", bd.GetLongValue())
	}
	waitUntil(t, g, e2eWait, "the node waiting for the host again", func() bool {
		st := node()
		return st.State == sparkplug.StateWaiting && st.BdSeq == 1 && st.Store.Messages >= 5 && !st.HostOnline
	})
	mark = len(host.all())
	host.state("scada", true, time.Now().UnixMilli())
	nb := host.waitFor(g, "NBIRTH once the host is back", mark, 1, kind("NBIRTH", ""))[0]
	if bd := metricByName(nb.p, sparkplug.MetricBdSeq); bd.GetLongValue() != 1 {
		t.Errorf("NBIRTH bdSeq %d, want 1", bd.GetLongValue())
	}
	host.waitFor(g, "live DDATA after the held data", mark, 10, func(m spMsg) bool {
		return m.kind == "DDATA" && len(m.p.Metrics) > 0 && !m.p.Metrics[0].GetIsHistorical()
	})
	msgs = host.all()
	checkSparkplug(t, msgs, "gw1")
	vals, hist = counterValues(msgs[mark:], "line.demo", alias)
	checkCounterHistory(t, vals, hist, 0)
}

// testCommander allows writes of the fields it lists and writes them with
// OPC UA Write through the gateway's session of the endpoint.
type testCommander struct {
	gw       func() *gateway.Gateway
	endpoint string
	allowed  map[string]bool // field names
}

func (c *testCommander) WriteMetrics(ctx context.Context, req sparkplug.WriteRequest) []error {
	out := make([]error, len(req.Writes))
	for i, w := range req.Writes {
		if !c.allowed[w.Field] || req.Caller != "sparkplug:scada" {
			out[i] = fmt.Errorf("%w: %s may not write %s/%s/%s", sparkplug.ErrDenied, req.Caller, w.Group, w.Writer, w.Field)
			continue
		}
		cl, err := c.gw().Session(ctx, c.endpoint)
		if err == nil {
			var id ua.NodeID
			if id, err = ua.ParseNodeID(w.Node); err == nil {
				err = cl.WriteValue(ctx, id, w.Value)
			}
		}
		out[i] = err
	}
	return out
}

// readSetpoint reads the simulation server's Setpoint through the gateway.
func readSetpoint(t *testing.T, g *e2eGateway) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	cl, err := g.gw.Session(ctx, "sim")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cl.Read(ctx, &ua.ReadRequest{NodesToRead: []ua.ReadValueID{{NodeID: ua.MustParseNodeID(server.NodeSetpoint), AttributeID: client.AttributeValue}}})
	if err != nil || len(resp.Results) != 1 {
		t.Fatalf("read Setpoint: %v", err)
	}
	return resp.Results[0].Value.Double()
}

// TestSparkplugDCMD: a DCMD's metrics are writes to the fields behind them,
// through the command engine, whose rules decide (caller
// sparkplug/<sink>:host). Without a rule every write is refused (default
// deny) and nothing is written; with one an allowed write takes effect (the
// next DDATA carries it, the command log has it), a field it does not
// allow, a value of the wrong type and an unknown alias are refused.
func TestSparkplugDCMD(t *testing.T) {
	sim := startSim(t, 50*time.Millisecond)
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	host := startSpHost(t, mosq.URL(), "plant")
	cfg := func(node string, rules ...config.CommandRule) string {
		return marshalConfig(t, &config.Config{
			Gateway:   config.Gateway{PublisherID: node},
			Endpoints: []config.Endpoint{simEndpoint("sim", sim.url())},
			WriterGroups: []config.WriterGroup{{
				Name: "line", Endpoint: "sim", PublishingInterval: dur(50 * time.Millisecond),
				Writers: []config.DataSetWriter{writer("demo", field("Setpoint", server.NodeSetpoint), field("Counter", server.NodeCounter))},
			}},
			// The rules without the JSON command transports.
			Commands: config.Commands{Enabled: ptr(false), Rules: rules},
			Sinks:    sparkplugSink(mosq.URL(), config.Sparkplug{EdgeNodeID: node}),
		})
	}
	double := func(alias uint64, v float64) *pb.Payload_Metric {
		return &pb.Payload_Metric{Alias: proto.Uint64(alias), Value: &pb.Payload_Metric_DoubleValue{DoubleValue: v}}
	}

	// Default deny: no rule.
	deny := startGateway(t, "deny.yaml", cfg("gw2"))
	db := host.waitFor(deny, "DBIRTH of gw2", 0, 1, func(m spMsg) bool { return m.kind == "DBIRTH" && m.node == "gw2" })[0]
	host.dcmd("gw2", "line.demo", double(metricByName(db.p, "Setpoint").GetAlias(), 42.5))
	waitUntil(t, deny, e2eWait, "the DCMD refused", func() bool { return deny.gw.Stats().Sparkplug[0].CommandsDenied == 1 })
	if v := readSetpoint(t, deny); v != 0 {
		t.Fatalf("Setpoint %v after a refused DCMD", v)
	}

	g := startGateway(t, "allow.yaml", cfg("gw1", config.CommandRule{Name: "scada", Callers: []string{"sparkplug/scada:host"},
		Write: []config.CommandTarget{{Group: "line", Writer: "demo", Field: "Setpoint"}}}))
	db = host.waitFor(g, "DBIRTH of gw1", 0, 1, func(m spMsg) bool { return m.kind == "DBIRTH" && m.node == "gw1" })[0]
	setpoint, counter := metricByName(db.p, "Setpoint").GetAlias(), metricByName(db.p, "Counter").GetAlias()
	mark := len(host.all())
	host.dcmd("gw1", "line.demo",
		double(setpoint, 42.5),
		double(counter, 7), // no rule allows it
		&pb.Payload_Metric{Alias: proto.Uint64(setpoint), Value: &pb.Payload_Metric_StringValue{StringValue: "x"}}, // wrong type
		double(999999, 1), // unknown alias
	)
	host.waitFor(g, "DDATA with Setpoint 42.5", mark, 1, func(m spMsg) bool {
		if m.kind != "DDATA" || m.node != "gw1" {
			return false
		}
		for _, mt := range m.p.Metrics {
			if mt.GetAlias() == setpoint && mt.GetDoubleValue() == 42.5 {
				return true
			}
		}
		return false
	})
	waitUntil(t, g, e2eWait, "the DCMD counted", func() bool {
		st := g.gw.Stats().Sparkplug[0]
		return st.Commands == 4 && st.CommandsDenied == 3 && st.CommandsFailed == 0
	})
	if v := readSetpoint(t, g); v != 42.5 {
		t.Errorf("Setpoint %v, want 42.5", v)
	}
	// The command engine logged the write, and the refusal of Counter.
	log := g.gw.Commands().Log(100)
	var written, denied bool
	for _, e := range log {
		written = written || (e.Caller == "sparkplug/scada:host" && strings.Contains(e.Target, server.NodeSetpoint) && e.Error == "")
		denied = denied || (e.Caller == "sparkplug/scada:host" && strings.Contains(e.Error, "denied"))
	}
	if !written || !denied {
		t.Errorf("command log (written %v, denied %v): %+v", written, denied, log)
	}
	// A host that knows only names may write by name.
	host.dcmd("gw1", "line.demo", &pb.Payload_Metric{Name: proto.String("Setpoint"), Value: &pb.Payload_Metric_DoubleValue{DoubleValue: 7.25}})
	waitUntil(t, g, e2eWait, "Setpoint 7.25", func() bool { return readSetpoint(t, g) == 7.25 })
	checkSparkplug(t, host.all(), "gw1")
}

// TestSparkplugKill9: a gateway process killed with SIGKILL says no
// goodbye; the broker publishes its will: NDEATH with the bdSeq of the
// NBIRTH it sent, QoS 1, not retained.
func TestSparkplugKill9(t *testing.T) {
	sim := startSim(t, 50*time.Millisecond)
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	host := startSpHost(t, mosq.URL(), "plant")
	isolate(t)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	c := &config.Config{
		Gateway:   config.Gateway{PublisherID: "e2e"},
		HTTP:      config.HTTP{Disabled: true},
		Endpoints: []config.Endpoint{simEndpoint("sim", sim.url())},
		WriterGroups: []config.WriterGroup{{
			Name: "line", Endpoint: "sim", PublishingInterval: dur(50 * time.Millisecond),
			Writers: []config.DataSetWriter{writer("demo", field("Counter", server.NodeCounter))},
		}},
		Sinks: sparkplugSink(mosq.URL(), config.Sparkplug{}),
	}
	if err := os.WriteFile(path, []byte(marshalConfig(t, c)), 0o600); err != nil {
		t.Fatal(err)
	}
	child := startGatewayChild(t, path)
	nb := host.waitFor(nil, "NBIRTH of the gateway process", 0, 1, kind("NBIRTH", ""))[0]
	host.waitFor(nil, "DDATA of the gateway process", 0, 3, kind("DDATA", "line.demo"))
	child.kill()
	death := host.waitFor(nil, "the will NDEATH", 0, 1, kind("NDEATH", ""))[0]
	bd := metricByName(death.p, sparkplug.MetricBdSeq)
	if death.qos != 1 || death.retained || bd == nil || bd.GetLongValue() != metricByName(nb.p, sparkplug.MetricBdSeq).GetLongValue() || death.p.Seq != nil {
		t.Errorf("will NDEATH: qos %d retained %v bdSeq %v seq %v; NBIRTH's bdSeq %d", death.qos, death.retained, bd, death.p.Seq,
			metricByName(nb.p, sparkplug.MetricBdSeq).GetLongValue())
	}
	checkSparkplug(t, host.all(), "gw1")
	if t.Failed() {
		t.Logf("gateway process:\n%s", child.stderr.String())
	}
}

// TestSparkplugNodeOPCUA: the same promises with node-opcua upstream, an
// independent server whose values are known: the births carry its String,
// Boolean and Double array as they are; a DCMD writes its Setpoint; when it
// stops its device dies, and when it is back the device is born again.
func TestSparkplugNodeOPCUA(t *testing.T) {
	peer := nodeopcua.Start(t, nodeopcua.Options{LargeCount: -1})
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	host := startSpHost(t, mosq.URL(), "plant")
	var g *e2eGateway
	cmd := &testCommander{gw: func() *gateway.Gateway { return g.gw }, endpoint: "peer", allowed: map[string]bool{"Setpoint": true}}
	g = startGatewayWith(t, "gateway.yaml", marshalConfig(t, &config.Config{
		Gateway:   config.Gateway{PublisherID: "e2e"},
		Endpoints: []config.Endpoint{simEndpoint("peer", peer.URL)},
		WriterGroups: []config.WriterGroup{{
			Name: "line", Endpoint: "peer", PublishingInterval: dur(100 * time.Millisecond),
			Writers: []config.DataSetWriter{writer("peer",
				field("Counter", nodeopcua.NodeCounter), field("String", nodeopcua.NodeString), field("Boolean", nodeopcua.NodeBoolean),
				field("DoubleArray", nodeopcua.NodeDoubleArray), field("Setpoint", nodeopcua.NodeSetpoint))},
		}},
		Sinks: sparkplugSink(mosq.URL(), config.Sparkplug{}),
	}), func(o *gateway.Options) { o.SparkplugCommands = cmd })
	host.waitFor(g, "DDATA of the peer's device", 0, 3, kind("DDATA", "line.peer"))
	mark := len(host.all())
	host.ncmdRebirth("gw1")
	db := host.waitFor(g, "DBIRTH after the rebirth request", mark, 1, kind("DBIRTH", "line.peer"))[0]
	for _, c := range []struct {
		name string
		dt   sparkplug.DataType
		want any
	}{
		{"String", sparkplug.String, "Hello, gateway"},
		{"Boolean", sparkplug.Boolean, true},
		{"DoubleArray", sparkplug.DoubleArray, string(le64(1.5, 2.5, 3.5, 4.5))},
		{"Setpoint", sparkplug.Double, 0.0},
		{"Counter", sparkplug.Double, nil},
	} {
		mt := metricByName(db.p, c.name)
		if mt == nil || sparkplug.DataType(mt.GetDatatype()) != c.dt || mt.GetIsNull() {
			t.Errorf("DBIRTH: %s %v, want datatype %v with a value", c.name, mt, c.dt)
			continue
		}
		var got any
		switch c.dt {
		case sparkplug.String:
			got = mt.GetStringValue()
		case sparkplug.Boolean:
			got = mt.GetBooleanValue()
		case sparkplug.DoubleArray:
			got = string(mt.GetBytesValue())
		default:
			got = mt.GetDoubleValue()
		}
		if c.want != nil && got != c.want {
			t.Errorf("DBIRTH: %s = %v, want %v", c.name, got, c.want)
		}
	}
	setpoint := metricByName(db.p, "Setpoint").GetAlias()
	mark = len(host.all())
	host.dcmd("gw1", "line.peer", &pb.Payload_Metric{Alias: proto.Uint64(setpoint), Value: &pb.Payload_Metric_DoubleValue{DoubleValue: 3.5}})
	host.waitFor(g, "DDATA with Setpoint 3.5", mark, 1, func(m spMsg) bool {
		for _, mt := range m.p.GetMetrics() {
			if m.kind == "DDATA" && mt.GetAlias() == setpoint && mt.GetDoubleValue() == 3.5 {
				return true
			}
		}
		return false
	})

	mark = len(host.all())
	peer.Stop()
	host.waitFor(g, "DDEATH of the peer's device", mark, 1, kind("DDEATH", "line.peer"))
	peer.Restart()
	host.waitFor(g, "DBIRTH of the peer's device again", mark, 1, kind("DBIRTH", "line.peer"))
	host.waitFor(g, "DDATA of the peer's device again", mark, 3, kind("DDATA", "line.peer"))
	checkSparkplug(t, host.all(), "gw1")
}

// le64 packs float64s little-endian, as DoubleArray is.
func le64(vs ...float64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}
