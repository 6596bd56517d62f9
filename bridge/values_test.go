package bridge

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// valuesGroup builds a group without a session of writers w000 … with the
// given node ids, fields named by their position, client handles 1 … n,
// and gives every field a value (its slot as a Double).
func valuesGroup(tb testing.TB, nodes [][]string) *WriterGroup {
	tb.Helper()
	var ws []config.DataSetWriter
	n := 0
	for i, ns := range nodes {
		fs := make([]config.Field, len(ns))
		for j, node := range ns {
			fs[j] = config.Field{Name: fmt.Sprintf("F%05d", j), Node: node}
		}
		ws = append(ws, config.DataSetWriter{Name: fmt.Sprintf("w%03d", i), Fields: fs})
		n += len(ns)
	}
	g, err := NewWriterGroup(defaulted(config.WriterGroup{Name: "values", PublishingInterval: config.Duration(time.Second), Writers: ws}),
		Options{Queues: []sink.Queue{&discardQueue{}}, PublisherID: "test-pub", Logger: quietLog})
	if err != nil {
		tb.Fatal(err)
	}
	g.base = 1
	items := make([]ua.MonitoredItemNotification, n)
	for i := range items {
		items[i] = ua.MonitoredItemNotification{ClientHandle: uint32(i + 1), Value: ua.DataValue{Value: ua.NewDoubleVariant(float64(i))}}
	}
	g.onDataChange(nil, 1, items)
	return g
}

// pages reads every page of f from slot 0 and returns the slots read, page
// by page, and the cursors that came back (the last one -1).
func pages(tb testing.TB, g *WriterGroup, f ValueFilter, limit int) (slots [][]int, cursors []int) {
	tb.Helper()
	for from := 0; from >= 0; {
		vs, next := g.LastValues(f, from, limit)
		if len(vs) > limit || (next >= 0 && len(vs) != limit) {
			tb.Fatalf("%+v from %d limit %d: %d values, next %d", f, from, limit, len(vs), next)
		}
		var page []int
		for _, v := range vs {
			s := int(v.Handle - g.base)
			if !v.HasValue || v.Value.Value.Double() != float64(s) || v.Field == "" || v.Node == "" {
				tb.Fatalf("slot %d: %+v", s, v)
			}
			page = append(page, s)
		}
		slots, cursors = append(slots, page), append(cursors, next)
		if next >= 0 && next <= from {
			tb.Fatalf("%+v: cursor %d after %d does not move on", f, next, from)
		}
		from = next
	}
	return slots, cursors
}

// TestLastValuesPages: a page is the matching fields from the cursor on in
// slot order, and its cursor the next match; by writer, by node (the same
// node in several writers), both; seeks with limit 0; cursors out of range;
// a removed writer's slots skipped, also by a cursor inside them.
func TestLastValuesPages(t *testing.T) {
	g := valuesGroup(t, [][]string{
		{"ns=1;s=N0", "ns=1;s=N1", "ns=1;s=N2", "ns=1;s=N3", "ns=1;s=N4"}, // slots 0-4
		{"ns=1;s=N1", "ns=1;s=X", "ns=1;s=N3"},                            // 5-7
		{"ns=1;s=C0", "ns=1;s=C1", "ns=1;s=C2", "ns=1;s=N1"},              // 8-11
	})
	check := func(f ValueFilter, limit int, wantSlots [][]int, wantCursors []int) {
		t.Helper()
		slots, cursors := pages(t, g, f, limit)
		if fmt.Sprint(slots) != fmt.Sprint(wantSlots) || !slices.Equal(cursors, wantCursors) {
			t.Errorf("%+v limit %d: pages %v cursors %v, want %v %v", f, limit, slots, cursors, wantSlots, wantCursors)
		}
	}
	check(ValueFilter{}, 5, [][]int{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11}}, []int{5, 10, -1})
	check(ValueFilter{}, 12, [][]int{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}, []int{-1})
	check(ValueFilter{Writer: "w001"}, 2, [][]int{{5, 6}, {7}}, []int{7, -1})
	check(ValueFilter{Writer: "w009"}, 2, [][]int{nil}, []int{-1})
	check(ValueFilter{Node: "ns=1;s=N1"}, 1, [][]int{{1}, {5}, {11}}, []int{5, 11, -1})
	check(ValueFilter{Node: "ns=1;s=N1"}, 100, [][]int{{1, 5, 11}}, []int{-1})
	check(ValueFilter{Node: "ns=1;s=N1", Writer: "w001"}, 100, [][]int{{5}}, []int{-1})
	check(ValueFilter{Node: "ns=1;s=N3"}, 1, [][]int{{3}, {7}}, []int{7, -1})
	check(ValueFilter{Node: "ns=1;s=Nope"}, 10, [][]int{nil}, []int{-1})

	seek := func(f ValueFilter, from, want int) {
		t.Helper()
		if vs, next := g.LastValues(f, from, 0); len(vs) != 0 || next != want {
			t.Errorf("seek %+v from %d: %d values, next %d, want %d", f, from, len(vs), next, want)
		}
	}
	seek(ValueFilter{}, 3, 3)
	seek(ValueFilter{}, -7, 0)
	seek(ValueFilter{}, 12, -1)
	seek(ValueFilter{}, 1<<40, -1)
	seek(ValueFilter{Node: "ns=1;s=N1"}, 2, 5)
	seek(ValueFilter{Node: "ns=1;s=N1"}, 12, -1)
	seek(ValueFilter{Writer: "w002"}, 0, 8)
	seek(ValueFilter{Writer: "w000"}, 5, -1)

	if err := g.RemoveWriter(t.Context(), "w001"); err != nil {
		t.Fatal(err)
	}
	check(ValueFilter{}, 5, [][]int{{0, 1, 2, 3, 4}, {8, 9, 10, 11}}, []int{8, -1})
	check(ValueFilter{Node: "ns=1;s=N1"}, 1, [][]int{{1}, {11}}, []int{11, -1})
	check(ValueFilter{Writer: "w001"}, 5, [][]int{nil}, []int{-1})
	if vs, next := g.LastValues(ValueFilter{}, 6, 2); len(vs) != 2 || vs[0].Handle != g.base+8 || next != 10 {
		t.Errorf("from inside a removed writer: %+v, next %d", vs, next)
	}
}

// TestLastValuesByNodeLive: with the monitored items created, the node
// filter finds fields by their node ids as the client's items give them, and
// writers added or removed later are in the index or out of it.
func TestLastValuesByNodeLive(t *testing.T) {
	srv := startSim(t, 50*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	cfg := config.WriterGroup{
		Name: "wg", PublishingInterval: config.Duration(100 * time.Millisecond),
		Writers: []config.DataSetWriter{{Name: "a", Fields: []config.Field{
			{Name: "Step", Node: server.NodeStep}, {Name: "Counter", Node: server.NodeCounter}}}},
	}
	g := startGroup(t, m, cfg, Options{Queues: []sink.Queue{newTestQueue(t, "q")}})
	byNode := func() []string {
		vs, next := g.LastValues(ValueFilter{Node: server.NodeCounter}, 0, 10)
		if next != -1 {
			t.Fatalf("next %d", next)
		}
		var out []string
		for _, v := range vs {
			if v.Node != server.NodeCounter {
				t.Fatalf("value of node %q", v.Node)
			}
			out = append(out, v.Writer+"/"+v.Field)
		}
		return out
	}
	testutil.WaitFor(t, 10*time.Second, "a value of the counter", func() bool {
		v, ok := g.LastValue("a", "Counter")
		return ok && v.HasValue
	})
	if got := byNode(); !slices.Equal(got, []string{"a/Counter"}) {
		t.Fatalf("by node: %v", got)
	}
	ctx := ctxT(t)
	if err := g.AddWriter(ctx, writerFor(cfg, config.DataSetWriter{Name: "b", Fields: []config.Field{{Name: "C", Node: server.NodeCounter}}})); err != nil {
		t.Fatal(err)
	}
	if got := byNode(); !slices.Equal(got, []string{"a/Counter", "b/C"}) {
		t.Fatalf("by node after AddWriter: %v", got)
	}
	if err := g.RemoveWriter(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := byNode(); !slices.Equal(got, []string{"b/C"}) {
		t.Fatalf("by node after RemoveWriter: %v", got)
	}
}

// TestLastValuesConcurrent: pages by node and in full are read while the
// values change and a writer is removed (the index rebuilt meanwhile); run
// with -race.
func TestLastValuesConcurrent(t *testing.T) {
	nodes := make([][]string, 3)
	for w := range nodes {
		for i := range 1000 {
			nodes[w] = append(nodes[w], fmt.Sprintf("ns=1;s=N%d", i%10))
		}
	}
	g := valuesGroup(t, nodes)
	items := make([]ua.MonitoredItemNotification, 3000)
	for i := range items {
		items[i] = ua.MonitoredItemNotification{ClientHandle: uint32(i + 1), Value: ua.DataValue{Value: ua.NewDoubleVariant(float64(i))}}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for seq := uint32(2); ; seq++ {
			select {
			case <-done:
				return
			default:
			}
			g.onDataChange(nil, seq, items)
		}
	}()
	for r := range 2 {
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				f := ValueFilter{Node: fmt.Sprintf("ns=1;s=N%d", r)}
				n := 0
				for from := 0; from >= 0; {
					var vs []FieldValue
					vs, from = g.LastValues(f, from, 7)
					for _, v := range vs {
						if v.Node != f.Node {
							t.Errorf("value of %s for %s", v.Node, f.Node)
							return
						}
					}
					n += len(vs)
				}
				// 300, 200 once a writer is removed, between when it was
				// removed during the walk.
				if n < 200 || n > 300 {
					t.Errorf("%d values of %s, want 200 to 300", n, f.Node)
					return
				}
			}
		}()
	}
	for range 20 {
		g.LastValues(ValueFilter{}, 0, 3000)
	}
	if err := g.RemoveWriter(t.Context(), "w001"); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if vs, _ := g.LastValues(ValueFilter{}, 0, 3000); len(vs) != 2000 {
			t.Fatalf("%d values after the removal", len(vs))
		}
	}
	close(done)
	wg.Wait()
}

// TestNodeIndexChunks: the index built a chunk at a time over several
// chunks finds what a scan finds, and is the index built at once.
func TestNodeIndexChunks(t *testing.T) {
	nodes := make([][]string, 4)
	for w := range nodes {
		for i := range 10_000 {
			nodes[w] = append(nodes[w], fmt.Sprintf("ns=1;s=W%d.V%d", w, i))
		}
		nodes[w][0] = "ns=1;s=Shared"
	}
	g := valuesGroup(t, nodes)
	if n := 4 * 10_000; n < 2*nodeIndexChunk {
		t.Fatalf("%d fields fit in fewer than 3 chunks of %d", n, nodeIndexChunk)
	}
	slots := func(node string) []uint32 {
		vs, next := g.LastValues(ValueFilter{Node: node}, 0, 100)
		if next != -1 {
			t.Fatalf("%s: next %d", node, next)
		}
		var out []uint32
		for _, v := range vs {
			out = append(out, v.Handle-g.base)
		}
		return out
	}
	if got := slots("ns=1;s=Shared"); !slices.Equal(got, []uint32{0, 10_000, 20_000, 30_000}) {
		t.Fatalf("shared node at %v", got)
	}
	for _, s := range []int{1, 16383, 16384, 16385, 33333, 39_999} {
		if got := slots(fmt.Sprintf("ns=1;s=W%d.V%d", s/10_000, s%10_000)); !slices.Equal(got, []uint32{uint32(s)}) {
			t.Errorf("node of slot %d at %v", s, got)
		}
	}
	chunked := g.nodeIdx.Load()
	g.vmu.RLock()
	keys, _ := g.appendNodeKeys(nil, nil, 0, int32(len(g.fields))) // the index built at once
	locked := sortedIndex(g.idxGen.Load(), keys)
	g.vmu.RUnlock()
	if chunked == nil || len(chunked.slots) != 40_000 || !slices.Equal(chunked.slots, locked.slots) || chunked.gen != locked.gen {
		t.Fatal("the index built in chunks is not the one built at once")
	}
}
