package sparkplug

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/uagate/gateway/bridge/sink/sparkplug/sparkplugpb"
	"github.com/uagate/gateway/uastack/ua"
)

// TestFeed: a batch becomes DDATA with the device's aliases in field order,
// split at MaxMessageSize; a value of another type is left out and asks
// for a rebirth; a writer the node has no device for is counted.
func TestFeed(t *testing.T) {
	node, f, b, q := feedFixture(t, 100)
	q.keep = true
	f.Values(b)
	if q.messages != 1 {
		t.Fatalf("%d messages, want 1", q.messages)
	}
	var p pb.Payload
	if err := proto.Unmarshal(withSeq(q.last, 9), &p); err != nil {
		t.Fatal(err)
	}
	dm := node.devs[0].metrics.Load()
	if len(p.Metrics) != 100 || p.GetSeq() != 9 {
		t.Fatalf("%d metrics, seq %d", len(p.Metrics), p.GetSeq())
	}
	for i, m := range p.Metrics {
		if m.GetAlias() != dm.defs[i].alias || m.Name != nil || m.Datatype != nil {
			t.Fatalf("metric %d: %v, want alias %d only", i, m, dm.defs[i].alias)
		}
	}

	node.cfg.MaxMessageSize = 1000
	q.messages = 0
	f.Values(b)
	if q.messages < 3 {
		t.Errorf("%d messages at MaxMessageSize 1000", q.messages)
	}

	b.Values[5].Value.SetInt32(5)
	defer b.Values[5].Value.SetDouble(5)
	q.messages = 0
	node.cfg.MaxMessageSize = DefaultMaxMessageSize
	f.Values(b)
	if err := proto.Unmarshal(withSeq(q.last, 0), &p); err != nil || len(p.Metrics) != 99 {
		t.Fatalf("%v, %d metrics, want 99", err, len(p.Metrics))
	}
	if !node.devs[0].retype.Load() || node.st.typeMismatches.Load() != 1 {
		t.Errorf("a mismatch did not ask for a rebirth")
	}

	b.WriterIndex = 7
	f.Values(b)
	if node.st.unmapped.Load() != uint64(len(b.Values)) {
		t.Errorf("unmapped %d", node.st.unmapped.Load())
	}
}

// TestMemStore: bounded by bytes, the oldest dropped and counted, Drain in
// order, stopping where its function says.
func TestMemStore(t *testing.T) {
	s := NewMemStore(4096)
	payload := make([]byte, 700)
	for i := range 10 {
		payload[0] = byte(i)
		if !s.Put(Record{Device: "d", Token: uint64(i), Created: int64(i), Payload: payload}) {
			t.Fatalf("put %d refused", i)
		}
	}
	st := s.Stats()
	if st.Messages != 4 || st.Bytes != 4*700 || st.Dropped != 6 {
		t.Fatalf("stats %+v, want 4 held (1 KiB buffers in 4 KiB), 6 dropped", st)
	}
	if s.Put(Record{Token: 99, Payload: make([]byte, 5000)}) || s.Stats().Dropped != 7 {
		t.Error("a payload larger than the store was taken")
	}
	var got []uint64
	s.Drain(func(r Record) bool {
		if int64(r.Token) != r.Created || r.Payload[0] != byte(r.Token) || r.Device != "d" || r.Named {
			t.Errorf("record %+v", r)
		}
		got = append(got, r.Token)
		return r.Token != 7
	})
	if len(got) != 2 || got[0] != 6 || got[1] != 7 || s.Stats().Messages != 3 {
		t.Fatalf("drained %v, %d left; want 6, 7 (7 kept), 3 left", got, s.Stats().Messages)
	}
	got = got[:0]
	s.Drain(func(r Record) bool { got = append(got, r.Token); return true })
	if len(got) != 3 || got[0] != 7 || s.Stats().Messages != 0 || s.Stats().Bytes != 0 {
		t.Fatalf("drained %v, stats %+v", got, s.Stats())
	}
}

// FuzzInbound: what the node takes from the broker or its store does not
// panic it: a DCMD payload converted for metrics of every type, and a held
// payload rewritten for a rebirth, named for a durable store and given
// aliases again (each of which decodes when the input did).
func FuzzInbound(f *testing.F) {
	var e encoder
	p := beginPayload(nil, 5)
	p, _ = e.appendMetric(p, &metric{alias: 1, hasAlias: true, ts: 4}, &ua.DataValue{Value: ua.NewDoubleVariant(1)}, Double)
	f.Add(body(p))
	np, _, _ := appendNamed(nil, body(p), testMetrics(metricDef{name: "Double", alias: 1, dtype: Double}))
	f.Add(np)
	cmd, _ := proto.Marshal(&pb.Payload{Metrics: []*pb.Payload_Metric{{Alias: proto.Uint64(1), Value: &pb.Payload_Metric_IntValue{IntValue: 7}}}})
	f.Add(cmd)
	var defs []metricDef
	for t := ua.TypeBoolean; t <= ua.TypeDiagnosticInfo; t++ {
		defs = append(defs, metricDef{name: t.String(), alias: 1, uaType: t, dtype: DataTypeOf(t, false)})
	}
	// Metrics with aliases 1… for the held records' names.
	named := &devMetrics{}
	for i, d := range defs {
		d.alias = uint64(i + 1)
		named.defs = append(named.defs, d)
	}
	named.index()
	f.Fuzz(func(t *testing.T, in []byte) {
		var p pb.Payload
		valid := proto.Unmarshal(in, &p) == nil
		if valid {
			for _, m := range p.Metrics {
				for i := range defs {
					_, _ = variantOf(m, &defs[i])
				}
			}
		}
		// The rewritten payloads decode when the input did (the rewriting
		// reads the metrics' own fields, not what they nest).
		out, _, err := appendRebirthed(nil, in, func(alias, ts uint64) bool { return alias%2 == 0 })
		if err == nil && valid {
			var q pb.Payload
			if err := proto.Unmarshal(withSeq(out, 1), &q); err != nil {
				t.Fatalf("rewritten payload does not decode: %v", err)
			}
		}
		// Held named and given aliases again (a store's payload after a
		// restart).
		if b, _, err := appendNamed(nil, in, named); err == nil && valid {
			var q pb.Payload
			if err := proto.Unmarshal(b, &q); err != nil {
				t.Fatalf("named payload does not decode: %v", err)
			}
		}
		if out, _, err := appendAliased(nil, in, named, nil); err == nil && valid {
			var q pb.Payload
			if err := proto.Unmarshal(withSeq(out, 1), &q); err != nil {
				t.Fatalf("aliased payload does not decode: %v", err)
			}
		}
	})
}
