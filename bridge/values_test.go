package bridge

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
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
	g, err := NewWriterGroup(config.WriterGroup{Name: "values", PublishingInterval: config.Duration(time.Second), Writers: ws},
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
	g := startGroup(t, m, config.WriterGroup{
		Name: "wg", PublishingInterval: config.Duration(100 * time.Millisecond),
		Writers: []config.DataSetWriter{{Name: "a", Fields: []config.Field{
			{Name: "Step", Node: server.NodeStep}, {Name: "Counter", Node: server.NodeCounter}}}},
	}, Options{Queues: []sink.Queue{newTestQueue(t, "q")}})
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
	waitFor(t, 10*time.Second, "a value of the counter", func() bool {
		v, ok := g.LastValue("a", "Counter")
		return ok && v.HasValue
	})
	if got := byNode(); !slices.Equal(got, []string{"a/Counter"}) {
		t.Fatalf("by node: %v", got)
	}
	ctx := ctxT(t)
	if err := g.AddWriter(ctx, config.DataSetWriter{Name: "b", Fields: []config.Field{{Name: "C", Node: server.NodeCounter}}}); err != nil {
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
