package gateway_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink/sparkplug"
	"github.com/uagate/gateway/internal/brokertest"
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
	// The counter goes up by one per DDATA of the demo device.
	alias := s.aliases["line.demo"]["Counter"]
	last, n := -1.0, 0
	for _, m := range host.find(kind("DDATA", "line.demo")) {
		for _, mt := range m.p.Metrics {
			if mt.GetAlias() != alias || mt.GetIsHistorical() {
				continue
			}
			if v := mt.GetDoubleValue(); last >= 0 && v != last+1 {
				t.Errorf("Counter %v after %v", v, last)
			}
			last = mt.GetDoubleValue()
			n++
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
