package sparkplug

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	pb "github.com/uagate/gateway/bridge/sink/sparkplug/sparkplugpb"
	"github.com/uagate/gateway/bridge/storelog"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/ua"
)

func openTestLog(t *testing.T, dir string, opts storelog.Options) *storelog.Log {
	t.Helper()
	opts.Dir = dir
	opts.Logger = testutil.Logger(t)
	l, err := storelog.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newTestLogStore(t *testing.T, l *storelog.Log) *LogStore {
	t.Helper()
	ls, err := NewLogStore(l, "scada")
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// record i of the tests: named, for device "d<i%3>", made at i.
func testRecord(i int, size int) Record {
	p := fmt.Appendf(nil, "payload %d ", i)
	for len(p) < size {
		p = append(p, '.')
	}
	return Record{Device: fmt.Sprintf("d%d", i%3), Named: true, Created: int64(i), Payload: p}
}

// drain drains s, taking records while take says so, and returns the
// numbers of those it took; it checks each record against testRecord.
func drain(t *testing.T, s Store, take func(i int) bool) []int {
	t.Helper()
	var got []int
	s.Drain(func(r Record) bool {
		i := int(r.Created)
		if want := testRecord(i, 0); r.Device != want.Device || !r.Named || string(r.Payload[:len(want.Payload)]) != string(want.Payload) {
			t.Errorf("record %d: %+v", i, r)
		}
		if !take(i) {
			return false
		}
		got = append(got, i)
		return true
	})
	return got
}

func seq(from, to int) string {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return fmt.Sprint(out)
}

// TestLogStore: records in order, a drain that stops keeps the rest, a
// Drain right after Put sees what was put (it waits for the commit), the
// records outlive the log's process (reopened), and alias-form records
// are refused.
func TestLogStore(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, storelog.Options{})
	s := newTestLogStore(t, l)
	if !s.Durable() {
		t.Fatal("a LogStore is not durable")
	}
	for i := range 20 {
		if !s.Put(testRecord(i, 100)) {
			t.Fatalf("put %d refused", i)
		}
	}
	if st := s.Stats(); st.Messages != 20 || st.Stream != "sparkplug/scada" {
		t.Fatalf("stats %+v", st)
	}
	if got := drain(t, s, func(i int) bool { return i < 6 }); fmt.Sprint(got) != seq(0, 6) {
		t.Fatalf("first drain %v", got)
	}
	if st := s.Stats(); st.Messages != 14 || st.Bytes == 0 || st.Dropped != 0 {
		t.Fatalf("stats after a partial drain %+v", st)
	}
	if s.Put(Record{Device: "d", Payload: []byte("aliases")}) || s.Stats().Dropped != 1 {
		t.Fatal("an alias-form record was taken")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openTestLog(t, dir, storelog.Options{})
	defer l.Close()
	s = newTestLogStore(t, l)
	if st := s.Stats(); st.Messages != 14 {
		t.Fatalf("reopened: %+v", st)
	}
	for i := 20; i < 25; i++ {
		s.Put(testRecord(i, 100))
	}
	if got := drain(t, s, func(int) bool { return true }); fmt.Sprint(got) != seq(6, 25) {
		t.Fatalf("after the reopen %v", got)
	}
	if got := drain(t, s, func(int) bool { return true }); len(got) != 0 {
		t.Fatalf("drained again %v", got)
	}
	testutil.WaitFor(t, 10*time.Second, "sent records deleted", func() bool {
		st := s.Stats()
		return st.Messages == 0 && st.Bytes == 0
	})
}

// TestLogStoreBounds: the log's maxBytes bounds what is held whatever its
// policy (block here: the held data gives way), the oldest dropped and
// counted in the store's and the log's stats, and a drain gets the newest
// in order; maxAge expires what is held, counted.
func TestLogStoreBounds(t *testing.T) {
	const maxBytes = 64 << 10
	l := openTestLog(t, t.TempDir(), storelog.Options{MaxBytes: maxBytes, Policy: config.Block})
	defer l.Close()
	s := newTestLogStore(t, l)
	const n = 300
	for i := range n {
		s.Put(testRecord(i, 1024))
	}
	var ss storelog.StreamStats
	testutil.WaitFor(t, 10*time.Second, "committed", func() bool {
		ss = l.Stats().Streams[0]
		return ss.Pending == 0 && s.Stats().Messages == int(ss.Records)
	})
	st := s.Stats()
	if st.Dropped == 0 || st.Dropped != ss.Dropped || ss.Bytes > maxBytes || st.Messages+int(st.Dropped) != n || ss.Waits != 0 {
		t.Fatalf("store %+v, stream %+v: want drops counted in both, at most %d bytes, no waits", st, ss, maxBytes)
	}
	if got := drain(t, s, func(int) bool { return true }); fmt.Sprint(got) != seq(n-st.Messages, n) {
		t.Fatalf("drained %v", got)
	}

	aged := openTestLog(t, t.TempDir(), storelog.Options{MaxAge: 100 * time.Millisecond})
	defer aged.Close()
	s = newTestLogStore(t, aged)
	for i := range 10 {
		s.Put(testRecord(i, 100))
	}
	testutil.WaitFor(t, 10*time.Second, "expired", func() bool { st := s.Stats(); return st.Dropped == 10 && st.Messages == 0 })
	if got := drain(t, s, func(int) bool { return true }); len(got) != 0 {
		t.Fatalf("drained %v after maxAge", got)
	}
}

// TestMemStoreRecords: a MemStore gives back the records as put, alias
// form or named.
func TestMemStoreRecords(t *testing.T) {
	s := NewMemStore(1 << 20)
	if s.Durable() {
		t.Fatal("a MemStore is durable")
	}
	for i := range 10 {
		s.Put(testRecord(i, 10))
	}
	if got := drain(t, s, func(i int) bool { return i < 4 }); fmt.Sprint(got) != seq(0, 4) {
		t.Fatalf("first drain %v", got)
	}
	if got := drain(t, s, func(int) bool { return true }); fmt.Sprint(got) != seq(4, 10) {
		t.Fatalf("second drain %v", got)
	}
}

// testMetrics are a device's metrics with the given names, datatypes and
// aliases.
func testMetrics(defs ...metricDef) *devMetrics {
	dm := &devMetrics{defs: defs}
	dm.index()
	return dm
}

// TestNamedRecords: a DDATA body held named (appendNamed) carries each
// metric's name and datatype instead of its alias, its value, timestamp
// and properties unchanged; a later process (other aliases, a metric gone,
// one of another datatype) gives it its own aliases by name, leaves out
// what no longer means the same, and marks historical what is not newer
// than its birth's values.
func TestNamedRecords(t *testing.T) {
	before := testMetrics(
		metricDef{name: "Counter", alias: 1, dtype: Double},
		metricDef{name: "Mode", alias: 2, dtype: Int32},
		metricDef{name: "Sine", alias: 3, dtype: Double},
		metricDef{name: "Gone", alias: 4, dtype: Double},
		metricDef{name: "Event", alias: 5, event: true},
	)
	var e encoder
	b := beginPayload(nil, 1000)
	put := func(alias, ts uint64, dv ua.DataValue, dt DataType) {
		var err error
		b, err = e.appendMetric(b, &metric{alias: alias, hasAlias: true, ts: ts}, &dv, dt)
		if err != nil {
			t.Fatal(err)
		}
	}
	put(1, 100, ua.DataValue{Value: ua.NewDoubleVariant(41)}, Double)
	put(2, 101, ua.DataValue{Value: ua.NewInt32Variant(-7)}, Int32)
	put(3, 300, ua.DataValue{Value: ua.NewDoubleVariant(0.5), Status: ua.StatusUncertainLastUsableValue}, Double)
	put(4, 102, ua.DataValue{Value: ua.NewDoubleVariant(1)}, Double)
	put(99, 103, ua.DataValue{Value: ua.NewDoubleVariant(2)}, Double) // an alias the device does not have
	named, k, err := appendNamed(nil, body(b), before)
	if err != nil || k != 4 {
		t.Fatalf("appendNamed: %d metrics, %v", k, err)
	}
	var p pb.Payload
	if err := proto.Unmarshal(named, &p); err != nil {
		t.Fatal(err)
	}
	if p.GetTimestamp() != 1000 || p.Seq != nil || len(p.Metrics) != 4 {
		t.Fatalf("named payload %v", &p)
	}
	for i, want := range []struct {
		name string
		dt   DataType
		ts   uint64
	}{{"Counter", Double, 100}, {"Mode", Int32, 101}, {"Sine", Double, 300}, {"Gone", Double, 102}} {
		m := p.Metrics[i]
		if m.GetName() != want.name || DataType(m.GetDatatype()) != want.dt || m.Alias != nil || m.GetTimestamp() != want.ts || m.GetIsHistorical() {
			t.Errorf("named metric %d: %v, want %s (%v) at %d without alias", i, m, want.name, want.dt, want.ts)
		}
	}
	if p.Metrics[1].GetIntValue() != uint32(0xfffffff9) || spProps(p.Metrics[2])[PropQuality] != "192" {
		t.Errorf("values or properties changed: %v", p.Metrics)
	}

	after := testMetrics(
		metricDef{name: "Sine", alias: 7, dtype: Double, uaType: ua.TypeDouble},
		metricDef{name: "Counter", alias: 8, dtype: Double, uaType: ua.TypeDouble},
		metricDef{name: "Mode", alias: 9, dtype: UInt32, uaType: ua.TypeUInt32},
	)
	out, a, err := appendAliased(nil, named, after, map[uint64]uint64{7: 200, 8: 500, 9: 500})
	if err != nil || a.kept != 2 || a.left != 2 || !a.hist || a.unknown != 0 {
		t.Fatalf("appendAliased: %+v, %v", a, err)
	}
	p.Reset()
	if err := proto.Unmarshal(withSeq(out, 4), &p); err != nil {
		t.Fatal(err)
	}
	if p.GetSeq() != 4 || len(p.Metrics) != 2 {
		t.Fatalf("aliased payload %v", &p)
	}
	// A metric whose type the device does not know yet (no value since
	// its start) is told apart: the record waits for its next DBIRTH.
	early := testMetrics(
		metricDef{name: "Counter", alias: 8, dtype: DataTypeOf(ua.TypeNull, false)},
		metricDef{name: "Sine", alias: 7, dtype: Double, uaType: ua.TypeDouble},
	)
	if _, a, _ := appendAliased(nil, named, early, nil); a.unknown != 1 || a.kept != 1 {
		t.Errorf("a metric of no known type: %+v", a)
	}
	c, s := p.Metrics[0], p.Metrics[1]
	if c.GetAlias() != 8 || c.Name != nil || c.Datatype != nil || c.GetDoubleValue() != 41 || !c.GetIsHistorical() {
		t.Errorf("Counter: %v, want alias 8, historical (100 ≤ 500)", c)
	}
	if s.GetAlias() != 7 || s.GetDoubleValue() != 0.5 || s.GetIsHistorical() || spProps(s)[PropQuality] != "192" {
		t.Errorf("Sine: %v, want alias 7, not historical (300 > 200), Quality 192", s)
	}
}

// spProps returns a metric's properties as text.
func spProps(m *pb.Payload_Metric) map[string]string {
	out := map[string]string{}
	ps := m.GetProperties()
	for i, k := range ps.GetKeys() {
		if i < len(ps.GetValues()) {
			out[k] = fmt.Sprint(ps.GetValues()[i].GetIntValue())
		}
	}
	return out
}

// nodeQueue hands the feed's messages to the node, as its Output does.
type nodeQueue struct{ n *Node }

func (q nodeQueue) Name() string                { return "node" }
func (q nodeQueue) Guarantee() config.Guarantee { return config.AtMostOnce }
func (q nodeQueue) Enqueue(m *sink.Message)     { _ = q.n.Publish(m, doneAcker{}) }

type doneAcker struct{}

func (doneAcker) Confirmed(m *sink.Message, _ error) { m.Done(true) }

// TestNodeHoldsNamed: a node that is not online holds its feed's DDATA in
// a durable store named: metric names and datatypes, no aliases.
func TestNodeHoldsNamed(t *testing.T) {
	l := openTestLog(t, t.TempDir(), storelog.Options{})
	defer l.Close()
	s := newTestLogStore(t, l)
	node, _, b, _ := feedFixture(t, 10)
	node.cfg.Store, node.durable = s, true
	f := node.Feed(nodeQueue{node})
	f.Values(b)
	f.Values(b)
	var got []*pb.Payload
	s.Drain(func(r Record) bool {
		var p pb.Payload
		if r.Device != "g.w" || !r.Named || proto.Unmarshal(r.Payload, &p) != nil {
			t.Fatalf("record %+v", r)
		}
		got = append(got, &p)
		return true
	})
	if len(got) != 2 || len(got[0].Metrics) != 10 {
		t.Fatalf("held %d records: %v", len(got), got)
	}
	for i, m := range got[1].Metrics {
		if m.GetName() != fmt.Sprintf("Field%05d", i) || DataType(m.GetDatatype()) != Double || m.Alias != nil {
			t.Errorf("held metric %d: %v", i, m)
		}
	}
}

// TestHeldWaitsForDevice: after the node's birth, held data of a device
// whose session is not up waits for its DBIRTH, and the data after it
// joins it, in order; past DeviceWait it is left out, counted as stale,
// and the store is empty.
func TestHeldWaitsForDevice(t *testing.T) {
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	seen := watch(t, mosq.URL())
	node, _, b, _ := feedFixture(t, 10) // its writer group has no session: never up
	node.cfg.URL, node.cfg.DeviceWait, node.cfg.CheckInterval = mosq.URL(), 2*time.Second, 50*time.Millisecond
	f := node.Feed(nodeQueue{node})
	f.Values(b)
	f.Values(b)
	if st := node.Stats(); st.Store.Messages != 2 {
		t.Fatalf("held %+v before the birth", st.Store)
	}
	if err := node.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer node.Close(t.Context())
	testutil.WaitFor(t, 10*time.Second, "NBIRTH", func() bool { return contains(seen(), "NBIRTH") })
	f.Values(b) // joins what waits
	if st := node.Stats(); st.Store.Messages != 3 || st.Stale != 0 || st.DataMessages != 0 {
		t.Fatalf("right after the birth: %+v", st)
	}
	testutil.WaitFor(t, 10*time.Second, "the held data left out after DeviceWait", func() bool {
		st := node.Stats()
		return st.Stale == 3 && st.Store.Messages == 0
	})
	if contains(seen(), "DDATA") || contains(seen(), "DBIRTH") {
		t.Errorf("sent for a device that never came up: %v", seen())
	}
}

// TestHeldWhileBrokerDownAtStart: a node whose broker is away from the
// start makes its devices all the same, so that what its feeds encode is
// held, not left unmapped.
func TestHeldWhileBrokerDownAtStart(t *testing.T) {
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	url := mosq.URL()
	mosq.Kill()
	node, _, b, _ := feedFixture(t, 10)
	n, err := New(Config{URL: url, GroupID: "G", EdgeNodeID: "E", Logger: testutil.Logger(t), Source: node.cfg.Source})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer n.Close(t.Context())
	testutil.WaitFor(t, 10*time.Second, "a failed connection attempt and the device made", func() bool {
		st := n.Stats()
		return st.ConnectFailures > 0 && st.Devices == 1
	})
	// The fixture's group has no session: its fields' datatypes are
	// declared as the fixture does.
	n.pubMu.Lock()
	d := n.devs[0]
	dm := *d.metrics.Load()
	dm.defs = slices.Clone(node.devs[0].metrics.Load().defs)
	d.metrics.Store(&dm)
	n.pubMu.Unlock()
	n.Feed(nodeQueue{n}).Values(b)
	if st := n.Stats(); st.Store.Messages != 1 || st.Unmapped != 0 {
		t.Fatalf("stats %+v: want the DDATA held", st)
	}
}

// TestHeldWaitsForTypes: a held record whose metrics the device, born
// before its first values came, has no type for yet waits for the DBIRTH
// that will have them, up to DeviceWait after the node's birth; then the
// metrics that do not match are left out (counted) and the record with
// them.
func TestHeldWaitsForTypes(t *testing.T) {
	node, _, _, _ := feedFixture(t, 10)
	s := NewMemStore(1 << 20)
	node.cfg.Store = s
	node.pubMu.Lock()
	d := node.devs[0]
	dm := d.metrics.Load()
	node.named, _, _ = appendNamed(nil, body(encodeDDATA(&encoder{}, nil, 5, mustValues(10))), dm)
	s.Put(Record{Device: d.id, Named: true, Created: 1, Payload: node.named})
	// Born with metrics of no known type (no value yet).
	early := &devMetrics{version: dm.version + 1, parts: dm.parts, offsets: dm.offsets, defs: slices.Clone(dm.defs)}
	for i := range early.defs {
		early.defs[i].uaType, early.defs[i].dtype = ua.TypeNull, DataTypeOf(ua.TypeNull, false)
	}
	early.index()
	d.metrics.Store(early)
	d.born, node.live, node.liveAt, node.backlog = true, true, time.Now(), true
	node.flushStoreLocked()
	st := node.Stats()
	if st.Store.Messages != 1 || st.Stale != 0 || !node.backlog {
		t.Fatalf("within DeviceWait: %+v, backlog %v", st, node.backlog)
	}
	node.liveAt = time.Now().Add(-node.cfg.DeviceWait - time.Second)
	node.flushStoreLocked()
	st = node.Stats()
	node.pubMu.Unlock()
	if st.Store.Messages != 0 || st.Stale != 1 || st.StaleMetrics != 10 || node.backlog {
		t.Fatalf("past DeviceWait: %+v", st)
	}
}

func mustValues(n int) []ua.DataValue {
	_, dvs := benchValues(n)
	return dvs
}
