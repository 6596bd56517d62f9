package bridge

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/ua"
)

// binaryOf is the OPC UA binary encoding of dv: two DataValues are the same
// value when their encodings are.
func binaryOf(t *testing.T, dv *ua.DataValue) []byte {
	t.Helper()
	e := ua.NewEncoder(nil)
	e.WriteDataValue(dv)
	if err := e.Err(); err != nil {
		t.Fatalf("encoding %v: %v", dv, err)
	}
	return bytes.Clone(e.Bytes())
}

func mustVariant(t *testing.T, v any) ua.Variant {
	t.Helper()
	x, err := ua.NewVariant(v)
	if err != nil {
		t.Fatalf("NewVariant(%T): %v", v, err)
	}
	return x
}

// cacheGroup is a group of two writers without a session (notifications are
// fed to its handler, as the client's dispatch would): writer "a" with the
// fields of names, writer "b" with two more. Verbose DataValue fields, so
// that the JSON carries every part of a value and its type.
func cacheGroup(t *testing.T, names []string) (*WriterGroup, *testQueue) {
	t.Helper()
	q := newTestQueue(t, "cache")
	fa := make([]config.Field, len(names))
	for i, n := range names {
		fa[i] = config.Field{Name: n, Node: fmt.Sprintf("ns=1;s=A%d", i)}
	}
	fb := []config.Field{{Name: "b0", Node: "ns=1;s=B0"}, {Name: "b1 — long name ✓", Node: "ns=1;s=B1"}}
	g, err := NewWriterGroup(defaulted(config.WriterGroup{
		Name:               "cache",
		PublishingInterval: config.Duration(time.Second),
		KeyFrameCount:      1000,
		Encoding:           "verbose",
		FieldEncoding:      config.FieldDataValue,
		Writers:            []config.DataSetWriter{{Name: "a", Fields: fa}, {Name: "b", Fields: fb}},
	}), Options{Queues: []sink.Queue{q}, PublisherID: "test-pub", Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	g.base = 1
	return g, q
}

// TestCacheValues: every kind of value survives the compact cache exactly
// (LastValue and the JSON of key and delta frames), strings and arrays in
// the side table, picoseconds too; a field whose value stops needing the
// side table gives its entry back and the next one reuses it; several
// values of one field in a message go into successive DataSetMessages in
// order, also when the server sends the handles out of order; a removed
// writer frees its entries.
func TestCacheValues(t *testing.T) {
	ts := ua.NewDateTime(time.Date(2026, 3, 4, 5, 6, 7, 123456700, time.UTC))
	values := []ua.Variant{
		ua.NewDoubleVariant(-1.5),
		ua.NewDoubleVariant(math.Inf(1)),
		ua.NewInt32Variant(-7),
		ua.NewBooleanVariant(true),
		ua.NewFloatVariant(3.25),
		mustVariant(t, int8(-3)),
		mustVariant(t, uint16(65535)),
		mustVariant(t, uint64(math.MaxUint64)),
		mustVariant(t, int64(math.MinInt64)),
		ua.NewDateTimeVariant(ts),
		mustVariant(t, ua.StatusBadOutOfRange),
		{},
		ua.NewStringVariant("hello, \"world\""),
		mustVariant(t, ua.XmlElement("<a/>")),
		mustVariant(t, []byte{1, 2, 3}),
		mustVariant(t, []int32{1, -2, 3}),
		mustVariant(t, []string{"x", "y"}),
		mustVariant(t, ua.LocalizedText{Locale: "en", Text: "text"}),
		mustVariant(t, ua.NewStringNodeID(1, "node")),
		mustVariant(t, ua.Guid{Data1: 1, Data2: 2, Data3: 3, Data4: [8]byte{4, 5, 6, 7, 8, 9, 10, 11}}),
		ua.NewDoubleVariant(2), // with picoseconds below
	}
	names := make([]string, len(values))
	for i := range names {
		names[i] = fmt.Sprintf("f%02d", i)
	}
	names[3] = "" // config names it by its node: the string id's text
	g, q := cacheGroup(t, names)
	if got := allValues(g, "a")[3].Field; got != "A3" {
		t.Fatalf("field 3 is named %q, want A3, from its node", got)
	}
	names[3] = "A3"
	q.types = jsonenc.FieldTypes{}
	for i, v := range values {
		q.types[names[i]] = v.Type()
	}
	q.types["b1 — long name ✓"] = ua.TypeString

	items := make([]ua.MonitoredItemNotification, len(values))
	want := make([]ua.DataValue, len(values))
	for i, v := range values {
		want[i] = ua.DataValue{Value: v, Status: ua.StatusCode(uint32(i) << 16 & 0x00FF0000), SourceTimestamp: ts + ua.DateTime(i), ServerTimestamp: ts + 1000}
		if i == len(values)-1 {
			want[i].SourcePicoseconds, want[i].ServerPicoseconds = 17, 9999
		}
		items[i] = ua.MonitoredItemNotification{ClientHandle: uint32(i + 1), Value: want[i]}
	}
	check := func(step string, dsm int) {
		t.Helper()
		for i := range want {
			fv, ok := g.LastValue("a", names[i])
			if !ok || !fv.HasValue {
				t.Fatalf("%s: LastValue(a, %s): %v %v", step, names[i], ok, fv.HasValue)
			}
			if !bytes.Equal(binaryOf(t, &fv.Value), binaryOf(t, &want[i])) {
				t.Errorf("%s: LastValue(a, %s) = %+v, want %+v", step, names[i], fv.Value, want[i])
			}
		}
		ms := dataSetMessages(q.all(), "a")
		if len(ms) <= dsm {
			t.Fatalf("%s: %d DataSetMessages, want DataSetMessage %d", step, len(ms), dsm)
		}
		for i := range want {
			got, ok := fieldValue(&ms[dsm].DataSetMessage, names[i])
			if !ok {
				t.Fatalf("%s: field %s missing from %+v", step, names[i], ms[dsm])
			}
			w := want[i]
			// PubSub DataValue fields carry no picoseconds (FieldContentMask).
			w.SourcePicoseconds, w.ServerPicoseconds = 0, 0
			if !bytes.Equal(binaryOf(t, &got), binaryOf(t, &w)) {
				t.Errorf("%s: JSON field %s = %+v, want %+v", step, names[i], got, want[i])
			}
		}
	}

	g.onDataChange(nil, 1, items)
	check("first values (key frame)", 0)
	ext := len(g.ext)
	if ext == 0 || ext >= len(values) {
		t.Fatalf("%d side-table entries for %d values", ext, len(values))
	}

	// The string field gets a Double, the Double field a string: the
	// entry given back is reused, the table does not grow.
	want[0].Value, want[12].Value = ua.NewStringVariant("now a string"), ua.NewDoubleVariant(12)
	items[0].Value, items[12].Value = want[0], want[12]
	q.types[names[0]], q.types[names[12]] = ua.TypeString, ua.TypeDouble // the decoder's metadata
	g.onDataChange(nil, 2, items)
	check("types swapped (delta frame with every field)", 1)
	// f00 takes an entry before f12 (a later slot) gives one back.
	if len(g.ext)-len(g.extFree) != ext || len(g.ext) > ext+1 {
		t.Errorf("side table: %d entries (%d free), want %d in use, at most one free", len(g.ext), len(g.extFree), ext)
	}
	size := len(g.ext)
	// The next values' backing arrays are the client's, reused: the cache
	// must hold its own copies.
	items[0].Value.Value = ua.NewStringVariant("overwritten by the client")

	// Three values of f01, one of f02, handles out of order: three
	// DataSetMessages, f01's values in order, f02 in the first only.
	v1, v2, v3 := ua.NewDoubleVariant(10), ua.NewDoubleVariant(11), ua.NewDoubleVariant(12)
	dup := []ua.MonitoredItemNotification{
		{ClientHandle: 3, Value: ua.DataValue{Value: ua.NewInt32Variant(99)}},
		{ClientHandle: 2, Value: ua.DataValue{Value: v1}},
		{ClientHandle: 2, Value: ua.DataValue{Value: v2}},
		{ClientHandle: uint32(len(values) + 2), Value: ua.DataValue{Value: ua.NewStringVariant("b1")}},
		{ClientHandle: 2, Value: ua.DataValue{Value: v3}},
	}
	before := len(dataSetMessages(q.all(), "a"))
	g.onDataChange(nil, 3, dup)
	ms := dataSetMessages(q.all(), "a")[before:]
	if len(ms) != 3 {
		t.Fatalf("%d DataSetMessages for three values of one field, want 3", len(ms))
	}
	for k, v := range []ua.Variant{v1, v2, v3} {
		got, ok := fieldValue(&ms[k].DataSetMessage, names[1])
		if !ok || got.Value.Double() != v.Double() {
			t.Errorf("DataSetMessage %d: %s = %+v (%v), want %v", k, names[1], got.Value, ok, v.Double())
		}
		_, has := fieldValue(&ms[k].DataSetMessage, names[2])
		if has != (k == 0) || len(ms[k].Fields) != map[bool]int{true: 2, false: 1}[k == 0] {
			t.Errorf("DataSetMessage %d carries %d fields (f02: %v)", k, len(ms[k].Fields), has)
		}
	}
	if len(g.ext) != size || len(g.extFree) != 0 {
		t.Errorf("side table: %d entries (%d free) after b1's string, want %d (the free one reused)", len(g.ext), len(g.extFree), size)
	}
	if fv, _ := g.LastValue("b", "b1 — long name ✓"); fv.Value.Value.Str() != "b1" {
		t.Errorf("b1 = %+v", fv.Value)
	}
	if fv, _ := g.LastValue("a", names[1]); fv.Value.Value.Double() != 12 {
		t.Errorf("f01 = %+v, want the last of its values", fv.Value)
	}
	if fv, _ := g.LastValue("a", names[0]); fv.Value.Value.Str() != "now a string" {
		t.Errorf("f00 = %+v: the cache shares the client's storage", fv.Value)
	}

	// Removing writer b frees its string's entry; its fields are gone.
	inUse := len(g.ext) - len(g.extFree)
	if err := g.RemoveWriter(ctxT(t), "b"); err != nil {
		t.Fatal(err)
	}
	if n := len(g.ext) - len(g.extFree); n != inUse-1 {
		t.Errorf("%d side-table entries in use after the removal, want %d", n, inUse-1)
	}
	if _, ok := g.LastValue("b", "b0"); ok {
		t.Error("a removed writer's field is still found")
	}
	if vs := allValues(g, ""); len(vs) != len(values) {
		t.Errorf("%d fields after the removal, want %d", len(vs), len(values))
	}
}

// TestCacheTimestamps: a field keeps its server timestamp as the distance
// from the source timestamp, in 32 bits; every pair of timestamps comes
// back exactly (LastValue and the JSON), those more than ±214 s apart or
// with one missing by way of the side table, the rest inline. The monitored
// items' statuses are kept for the items the server did not answer Good.
func TestCacheTimestamps(t *testing.T) {
	ts := ua.NewDateTime(time.Date(2026, 3, 4, 5, 6, 7, 123456700, time.UTC))
	cases := []struct {
		src, srv ua.DateTime
		inline   bool
	}{
		{ts, ts, true},
		{ts, ts + 10_000, true},
		{ts, ts - 3, true},
		{ts, ts + math.MaxInt32, true},
		{ts, ts + math.MinInt32, true},
		{ts, ts + math.MaxInt32 + 1, false},
		{ts, ts + math.MinInt32 - 1, false},
		{0, ts, false},
		{ts, 0, false},
		{0, 0, true},
		{ts, ts - 24*3600*10_000_000, false}, // a device clock a day ahead
	}
	names := make([]string, len(cases))
	for i := range names {
		names[i] = fmt.Sprintf("t%02d", i)
	}
	g, q := cacheGroup(t, names)
	q.types = jsonenc.FieldTypes{}
	for _, n := range names {
		q.types[n] = ua.TypeDouble
	}
	items := make([]ua.MonitoredItemNotification, len(cases))
	for i, c := range cases {
		items[i] = ua.MonitoredItemNotification{ClientHandle: uint32(i + 1), Value: ua.DataValue{Value: ua.NewDoubleVariant(float64(i)), SourceTimestamp: c.src, ServerTimestamp: c.srv}}
	}
	for round := range 2 {
		g.onDataChange(nil, uint32(round+1), items)
		ms := dataSetMessages(q.all(), "a")
		for i, c := range cases {
			want := items[i].Value
			fv, ok := g.LastValue("a", names[i])
			if !ok || !bytes.Equal(binaryOf(t, &fv.Value), binaryOf(t, &want)) {
				t.Errorf("round %d: LastValue(%s) = %+v, want %+v", round, names[i], fv.Value, want)
			}
			if inline := g.fields[i].flags&fieldExt == 0; inline != c.inline {
				t.Errorf("round %d: %s (source %d, server %d) inline %v, want %v", round, names[i], c.src, c.srv, inline, c.inline)
			}
			got, ok := fieldValue(&ms[len(ms)-1].DataSetMessage, names[i])
			if !ok || !bytes.Equal(binaryOf(t, &got), binaryOf(t, &want)) {
				t.Errorf("round %d: JSON %s = %+v, want %+v", round, names[i], got, want)
			}
		}
		// The next round swaps which fields need the side table.
		for i := range items {
			c := &cases[len(cases)-1-i]
			items[i].Value.SourceTimestamp, items[i].Value.ServerTimestamp = c.src, c.srv
		}
		slices.Reverse(cases)
	}

	g.onItemStatus(nil, 2, ua.StatusBadNodeIdUnknown)
	g.onItemStatus(nil, 3, ua.StatusGood)
	if fv, _ := g.LastValue("a", names[1]); fv.Status != ua.StatusBadNodeIdUnknown {
		t.Errorf("item status %v, want BadNodeIdUnknown", fv.Status)
	}
	if len(g.itemSt) != 1 {
		t.Errorf("%d item statuses kept, want 1 (Good is the absence of one)", len(g.itemSt))
	}
	g.onItemStatus(nil, 2, ua.StatusGood)
	if fv, _ := g.LastValue("a", names[1]); fv.Status != ua.StatusGood || len(g.itemSt) != 0 {
		t.Errorf("item status %v after Good, %d kept", fv.Status, len(g.itemSt))
	}
}

// TestCacheConcurrentReaders: LastValues, run while the handler stores
// values that move fields in and out of the side table (which grows and is
// reallocated meanwhile), always sees whole values: a field's string and
// double forms carry the same number. Run with -race.
func TestCacheConcurrentReaders(t *testing.T) {
	const n = 300
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("v%03d", i)
	}
	g, _ := cacheGroup(t, names)
	g.queues = nil // the values are what is checked here
	done := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for {
			select {
			case <-done:
				return
			default:
			}
			for _, fv := range allValues(g, "a") {
				if !fv.HasValue {
					continue
				}
				v := &fv.Value.Value
				var num float64
				switch v.Type() {
				case ua.TypeDouble:
					num = v.Double()
				case ua.TypeString:
					if _, err := fmt.Sscanf(v.Str(), "s%g", &num); err != nil {
						errs <- fmt.Errorf("%s: torn string %q", fv.Field, v.Str())
						return
					}
				default:
					errs <- fmt.Errorf("%s: value %+v", fv.Field, fv.Value)
					return
				}
				if float64(fv.Value.SourceTimestamp) != num {
					errs <- fmt.Errorf("%s: value %v with the timestamp of %d", fv.Field, num, fv.Value.SourceTimestamp)
					return
				}
			}
		}
	}()
	items := make([]ua.MonitoredItemNotification, n)
	for seq := uint32(1); seq <= 200; seq++ {
		for i := range items {
			x := float64(int(seq)*1000 + i)
			items[i] = ua.MonitoredItemNotification{ClientHandle: uint32(i + 1),
				Value: ua.DataValue{Value: ua.NewDoubleVariant(x), SourceTimestamp: ua.DateTime(x)}}
			if (i+int(seq))%3 == 0 {
				items[i].Value.Value = ua.NewStringVariant(fmt.Sprintf("s%g", x))
			}
		}
		g.onDataChange(nil, seq, items)
	}
	close(done)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// TestWriterPool: groups borrow their JSON writers per cycle: between
// cycles a group holds none, the writers go back to the shared pool and
// the next group's cycle reuses one (no writer is made), and the idle ones
// stay within max(minIdleWriters, live groups); stopped groups count out.
func TestWriterPool(t *testing.T) {
	var qs [3]*testQueue
	var gs [3]*WriterGroup
	var items [3][]ua.MonitoredItemNotification
	for i := range gs {
		qs[i] = newTestQueue(t, fmt.Sprint("q", i))
		gs[i], items[i] = hotPathGroup(t, 50, qs[i])
		gs[i].name = fmt.Sprint("bench", i)
		gs[i].configureWriter()
	}
	step(gs[0], items[0], 1) // one writer at least is idle now
	idleWriters.mu.Lock()
	idle := slices.Clone(idleWriters.ws)
	idleWriters.mu.Unlock()
	if len(idle) == 0 {
		t.Fatal("no idle writer after a cycle")
	}
	for s := uint32(1); s <= 5; s++ {
		for i, g := range gs {
			step(g, items[i], s+1)
			if g.w != nil {
				t.Fatalf("group %d holds a writer between cycles", i)
			}
		}
	}
	idleWriters.mu.Lock()
	after := slices.Clone(idleWriters.ws)
	idleWriters.mu.Unlock()
	if len(after) != len(idle) || len(after) > maxIdleWriters() {
		t.Errorf("%d idle writers after the cycles of three groups, %d before (bound %d): one is enough, reused", len(after), len(idle), maxIdleWriters())
	}
	// Each group's messages went to its own queue (the writer taken from
	// another group was Reset for this one's Sink), with its own name.
	for i, q := range qs {
		ms := dataSetMessages(q.all(), "")
		if want := map[bool]int{true: 6, false: 5}[i == 0]; len(ms) != want {
			t.Fatalf("group %d: %d DataSetMessages, want %d", i, len(ms), want)
		}
		for _, m := range ms {
			if len(m.Fields) != 50 || m.nm.WriterGroupName != gs[i].name {
				t.Fatalf("group %d: a DataSetMessage of %d fields in a message of group %q", i, len(m.Fields), m.nm.WriterGroupName)
			}
		}
	}
	live := liveGroups.Load()
	for _, g := range gs {
		if err := g.Stop(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	if got := liveGroups.Load(); got != live-3 {
		t.Errorf("live groups %d after three Stops, want %d", got, live-3)
	}
	idleWriters.mu.Lock()
	n := len(idleWriters.ws)
	idleWriters.mu.Unlock()
	if n > maxIdleWriters() {
		t.Errorf("%d idle writers kept, bound %d", n, maxIdleWriters())
	}
}
