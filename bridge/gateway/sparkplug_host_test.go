package gateway_test

// A Sparkplug B host application for the tests: a paho client on the
// broker that records every message of a Sparkplug group, decoded with the
// generated code of sparkplug_b.proto, as Ignition or any Sparkplug host
// would decode it, and that publishes what a host publishes (NCMD, DCMD,
// its STATE).

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"google.golang.org/protobuf/proto"

	"github.com/uagate/gateway/bridge/sink/sparkplug"
	pb "github.com/uagate/gateway/bridge/sink/sparkplug/sparkplugpb"
)

// spMsg is one message the host received.
type spMsg struct {
	topic    string
	kind     string // NBIRTH, NDEATH, DBIRTH, DDEATH, NDATA, DDATA, NCMD, DCMD
	node     string
	device   string // "" for node messages
	qos      byte
	retained bool
	p        *pb.Payload
	err      error // the payload did not decode
}

// spHost is a Sparkplug host application watching spBv1.0/<group>/#.
type spHost struct {
	t     *testing.T
	c     mqtt.Client
	group string

	mu   sync.Mutex
	msgs []spMsg
}

// startSpHost connects a host to the broker at url and subscribes to the
// messages of Sparkplug group group (QoS 1, so that the broker keeps the
// QoS of what it delivers: 1 for the will NDEATH, 0 for the rest).
func startSpHost(t *testing.T, url, group string) *spHost {
	t.Helper()
	h := &spHost{t: t, group: group}
	o := mqtt.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprintf("sphost-%d", time.Now().UnixNano())).
		SetCleanSession(true).SetOrderMatters(true).
		// Back on a restarted broker well before the node (whose retries
		// start at 1 s): a host that missed the births would have to ask
		// for a rebirth, and the held data would have gone to nobody.
		SetAutoReconnect(true).SetMaxReconnectInterval(100 * time.Millisecond)
	o.SetOnConnectHandler(func(c mqtt.Client) {
		c.Subscribe(sparkplug.Namespace+"/"+group+"/#", 1, h.receive)
	})
	h.c = mqtt.NewClient(o)
	if tok := h.c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("host connect: %v", tok.Error())
	}
	h.waitSubscribed()
	t.Cleanup(func() { h.c.Disconnect(100) })
	return h
}

// waitSubscribed waits until the host's subscription is made (by the
// connect handler, also after a reconnection), by a message of its own.
func (h *spHost) waitSubscribed() {
	h.t.Helper()
	probe := fmt.Sprintf("%s/%s/NDATA/probe-%d", sparkplug.Namespace, h.group, time.Now().UnixNano())
	waitUntil(h.t, nil, e2eWait, "the host's subscription", func() bool {
		h.c.Publish(probe, 0, false, []byte{})
		return len(h.find(func(m spMsg) bool { return m.topic == probe })) > 0
	})
}

func (h *spHost) receive(_ mqtt.Client, msg mqtt.Message) {
	parts := strings.Split(msg.Topic(), "/")
	m := spMsg{topic: msg.Topic(), qos: msg.Qos(), retained: msg.Retained()}
	if len(parts) >= 4 {
		m.kind, m.node = parts[2], parts[3]
	}
	if len(parts) >= 5 {
		m.device = parts[4]
	}
	var p pb.Payload
	if err := proto.Unmarshal(msg.Payload(), &p); err != nil {
		m.err = err
	}
	m.p = &p
	h.mu.Lock()
	h.msgs = append(h.msgs, m)
	h.mu.Unlock()
}

// all returns the messages so far.
func (h *spHost) all() []spMsg {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]spMsg(nil), h.msgs...)
}

// find returns the messages that match.
func (h *spHost) find(match func(spMsg) bool) []spMsg {
	var out []spMsg
	for _, m := range h.all() {
		if match(m) {
			out = append(out, m)
		}
	}
	return out
}

// waitFor waits until at least n messages after from (an index into all)
// match, and returns those that do.
func (h *spHost) waitFor(g *e2eGateway, what string, from, n int, match func(spMsg) bool) []spMsg {
	h.t.Helper()
	var got []spMsg
	waitUntil(h.t, g, e2eWait, what, func() bool {
		got = nil
		for _, m := range h.all()[from:] {
			if match(m) {
				got = append(got, m)
			}
		}
		return len(got) >= n
	})
	return got
}

// kind matches the messages of a kind (of a device: device not "").
func kind(k, device string) func(spMsg) bool {
	return func(m spMsg) bool { return m.kind == k && (device == "" || m.device == device) }
}

// ncmdRebirth publishes a rebirth request to the edge node.
func (h *spHost) ncmdRebirth(node string) {
	h.t.Helper()
	name := sparkplug.MetricRebirth
	p := &pb.Payload{Timestamp: proto.Uint64(uint64(time.Now().UnixMilli())), Metrics: []*pb.Payload_Metric{{
		Name: &name, Datatype: proto.Uint32(uint32(sparkplug.Boolean)), Value: &pb.Payload_Metric_BooleanValue{BooleanValue: true},
	}}}
	h.publish(sparkplug.Namespace+"/"+h.group+"/NCMD/"+node, 0, false, p)
}

// dcmd publishes a DCMD to a device.
func (h *spHost) dcmd(node, device string, metrics ...*pb.Payload_Metric) {
	h.t.Helper()
	p := &pb.Payload{Timestamp: proto.Uint64(uint64(time.Now().UnixMilli())), Metrics: metrics}
	h.publish(sparkplug.Namespace+"/"+h.group+"/DCMD/"+node+"/"+device, 0, false, p)
}

func (h *spHost) publish(topic string, qos byte, retained bool, p *pb.Payload) {
	h.t.Helper()
	b, err := proto.Marshal(p)
	if err != nil {
		h.t.Fatal(err)
	}
	if tok := h.c.Publish(topic, qos, retained, b); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		h.t.Fatalf("publish %s: %v", topic, tok.Error())
	}
}

// state publishes the primary host id's STATE (3.0 JSON, retained, QoS 1).
func (h *spHost) state(id string, online bool, ts int64) {
	h.t.Helper()
	b, _ := json.Marshal(map[string]any{"online": online, "timestamp": ts})
	if tok := h.c.Publish(sparkplug.Namespace+"/STATE/"+id, 1, true, b); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		h.t.Fatalf("STATE: %v", tok.Error())
	}
}

// metricByName returns the metric of a payload named name (nil: none).
func metricByName(p *pb.Payload, name string) *pb.Payload_Metric {
	for _, m := range p.GetMetrics() {
		if m.GetName() == name {
			return m
		}
	}
	return nil
}

// spSession is what checkSparkplug learnt of the node's messages.
type spSession struct {
	births   int                          // NBIRTHs
	aliases  map[string]map[string]uint64 // device → metric name → alias, of the last DBIRTH
	types    map[uint64]uint32            // alias → datatype
	data     int                          // DDATA
	wrapped  bool                         // seq went from 255 to 0
	lastSeq  map[int]uint64               // per NBIRTH
	historic int                          // metrics marked is_historical
}

// checkSparkplug checks every message of edge node node against the rules
// of Sparkplug 3.0 that the node's side must keep (the statements listed in
// sparkplug_e2e_test.go):
//
//   - payloads decode; NBIRTH, DBIRTH, DDATA, DDEATH have QoS 0, no retain,
//     a payload timestamp and a seq; NDEATH no seq, and only the bdSeq of
//     the session's NBIRTH ends it;
//   - NBIRTH has seq 0, bdSeq (Int64) and Node Control/Rebirth (Boolean,
//     false, no alias); every later message of the session has the seq
//     after the one before, 255 followed by 0;
//   - DBIRTH metrics have name, alias, datatype and timestamp, aliases
//     unique across the node's session; DDATA metrics an alias of the device's last
//     DBIRTH, no name, no datatype, a timestamp, and a value in the proto
//     field of the metric's datatype (or is_null);
//   - no DDATA of a device before its DBIRTH in the session, none after
//     its DDEATH.
func checkSparkplug(t *testing.T, msgs []spMsg, node string) *spSession {
	t.Helper()
	s := &spSession{aliases: map[string]map[string]uint64{}, types: map[uint64]uint32{}, lastSeq: map[int]uint64{}}
	var seq, bdSeq uint64
	inSession := false
	born := map[string]bool{}
	errs := 0
	fail := func(format string, args ...any) {
		errs++
		if errs <= 20 {
			t.Errorf(format, args...)
		}
	}
	for i, m := range msgs {
		if m.node != node || m.kind == "NCMD" || m.kind == "DCMD" {
			continue
		}
		if m.err != nil {
			fail("message %d (%s): %v", i, m.topic, m.err)
			continue
		}
		p := m.p
		if m.kind == "NDEATH" {
			if p.Seq != nil {
				fail("NDEATH %d carries seq %d", i, p.GetSeq())
			}
			bd := metricByName(p, sparkplug.MetricBdSeq)
			if bd == nil || bd.GetDatatype() != uint32(sparkplug.Int64) || len(p.Metrics) != 1 {
				fail("NDEATH %d: metrics %v, want bdSeq alone (Int64)", i, p.Metrics)
			}
			// As a host does: a will of an earlier connection, delivered
			// after the next NBIRTH, does not end the session.
			if bd.GetLongValue() == bdSeq {
				inSession = false
			}
			continue
		}
		if m.qos != 0 || m.retained {
			fail("%s %d: qos %d retained %v, want 0 and false", m.kind, i, m.qos, m.retained)
		}
		if p.Timestamp == nil || p.Seq == nil {
			fail("%s %d: timestamp %v seq %v", m.kind, i, p.Timestamp, p.Seq)
			continue
		}
		if m.kind == "NBIRTH" {
			s.births++
			if p.GetSeq() != 0 {
				fail("NBIRTH %d: seq %d, want 0", i, p.GetSeq())
			}
			bd, rb := metricByName(p, sparkplug.MetricBdSeq), metricByName(p, sparkplug.MetricRebirth)
			if bd == nil || bd.GetDatatype() != uint32(sparkplug.Int64) || bd.Value == nil {
				fail("NBIRTH %d: bdSeq %v", i, bd)
			}
			if rb == nil || rb.GetDatatype() != uint32(sparkplug.Boolean) || rb.Alias != nil || rb.GetBooleanValue() || rb.Value == nil {
				fail("NBIRTH %d: %s %v, want Boolean false without alias", i, sparkplug.MetricRebirth, rb)
			}
			seq, inSession = 0, true
			bdSeq = bd.GetLongValue()
			clear(born)
			clear(s.types)
			continue
		}
		if !inSession {
			fail("%s %d (%s) outside a session (no NBIRTH before it)", m.kind, i, m.topic)
			continue
		}
		want := (seq + 1) % 256
		if p.GetSeq() != want {
			fail("%s %d (%s): seq %d after %d", m.kind, i, m.topic, p.GetSeq(), seq)
		}
		if want == 0 {
			s.wrapped = true
		}
		seq = p.GetSeq()
		s.lastSeq[s.births] = seq
		switch m.kind {
		case "DBIRTH":
			born[m.device] = true
			names := map[string]uint64{}
			for _, mt := range p.Metrics {
				if mt.Name == nil || mt.Alias == nil || mt.Datatype == nil || mt.Timestamp == nil {
					fail("DBIRTH %d of %s: metric %v lacks name, alias, datatype or timestamp", i, m.device, mt)
					continue
				}
				// Unique across the node's devices born in this session
				// (a new NBIRTH may give aliases out anew: a restarted
				// process does) and within this DBIRTH.
				for dev, other := range s.aliases {
					if dev == m.device || !born[dev] {
						continue
					}
					for name, a := range other {
						if a == mt.GetAlias() {
							fail("DBIRTH %d: alias %d of %s/%s is also %s/%s's", i, a, m.device, mt.GetName(), dev, name)
						}
					}
				}
				for name, a := range names {
					if a == mt.GetAlias() && name != mt.GetName() {
						fail("DBIRTH %d: alias %d of %s/%s is also %s's", i, a, m.device, mt.GetName(), name)
					}
				}
				names[mt.GetName()] = mt.GetAlias()
				s.types[mt.GetAlias()] = mt.GetDatatype()
				checkValueField(t, fail, mt, mt.GetDatatype(), fmt.Sprintf("DBIRTH %d %s/%s", i, m.device, mt.GetName()))
			}
			s.aliases[m.device] = names
		case "DDEATH":
			born[m.device] = false
			if len(p.Metrics) != 0 {
				fail("DDEATH %d carries metrics", i)
			}
		case "DDATA":
			s.data++
			if !born[m.device] {
				fail("DDATA %d of %s without its DBIRTH in the session", i, m.device)
			}
			known := map[uint64]bool{}
			for _, a := range s.aliases[m.device] {
				known[a] = true
			}
			for _, mt := range p.Metrics {
				if mt.Name != nil || mt.Datatype != nil || mt.Alias == nil || mt.Timestamp == nil || !known[mt.GetAlias()] {
					fail("DDATA %d of %s: metric %v: want an alias of its DBIRTH and a timestamp, no name, no datatype", i, m.device, mt)
					continue
				}
				if mt.GetIsHistorical() {
					s.historic++
				}
				checkValueField(t, fail, mt, s.types[mt.GetAlias()], fmt.Sprintf("DDATA %d %s alias %d", i, m.device, mt.GetAlias()))
			}
		}
	}
	return s
}

// checkValueField checks that a metric's value is in the proto field of
// datatype dt (3.0 §6.4.16), or absent with is_null.
func checkValueField(t *testing.T, fail func(string, ...any), mt *pb.Payload_Metric, dt uint32, what string) {
	t.Helper()
	if mt.GetIsNull() {
		if mt.Value != nil {
			fail("%s: is_null with a value", what)
		}
		return
	}
	ok := false
	switch sparkplug.DataType(dt) {
	case sparkplug.Int8, sparkplug.Int16, sparkplug.Int32, sparkplug.UInt8, sparkplug.UInt16, sparkplug.UInt32:
		_, ok = mt.Value.(*pb.Payload_Metric_IntValue)
	case sparkplug.Int64, sparkplug.UInt64, sparkplug.DateTime:
		_, ok = mt.Value.(*pb.Payload_Metric_LongValue)
	case sparkplug.Float:
		_, ok = mt.Value.(*pb.Payload_Metric_FloatValue)
	case sparkplug.Double:
		_, ok = mt.Value.(*pb.Payload_Metric_DoubleValue)
	case sparkplug.Boolean:
		_, ok = mt.Value.(*pb.Payload_Metric_BooleanValue)
	case sparkplug.String, sparkplug.Text, sparkplug.UUID:
		_, ok = mt.Value.(*pb.Payload_Metric_StringValue)
	default: // Bytes and the array types
		_, ok = mt.Value.(*pb.Payload_Metric_BytesValue)
	}
	if !ok {
		fail("%s: value %T for datatype %v", what, mt.Value, sparkplug.DataType(dt))
	}
}

// spProps returns a metric's properties as text.
func spProps(mt *pb.Payload_Metric) map[string]string {
	out := map[string]string{}
	ps := mt.GetProperties()
	for i, k := range ps.GetKeys() {
		if i >= len(ps.GetValues()) {
			break
		}
		switch v := ps.GetValues()[i].Value.(type) {
		case *pb.Payload_PropertyValue_IntValue:
			out[k] = fmt.Sprint(v.IntValue)
		case *pb.Payload_PropertyValue_LongValue:
			out[k] = fmt.Sprint(v.LongValue)
		case *pb.Payload_PropertyValue_StringValue:
			out[k] = v.StringValue
		default:
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}
