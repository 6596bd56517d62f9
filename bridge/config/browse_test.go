package config

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

func dialSim(t *testing.T) (*client.Client, *server.Server) {
	t.Helper()
	srv := startSim(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, srv.URL(), &client.Config{SecurityPolicy: "None"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, srv
}

func names(fields []Field) string {
	var s []string
	for _, f := range fields {
		s = append(s, f.Name)
	}
	return strings.Join(s, " ")
}

func TestExpandBrowse(t *testing.T) {
	c, _ := dialSim(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nsu := "nsu=" + c.Namespaces()[1] + ";s="

	t.Run("DirectChildren", func(t *testing.T) {
		fields, err := ExpandBrowse(ctx, c, BrowseSelect{Root: server.NodeDemo, Depth: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The variables directly in Demo, in name order; no EURange properties,
		// no folders, no methods.
		if got := names(fields); got != "Counter Random Setpoint Sine Step" {
			t.Errorf("names %q", got)
		}
		if fields[0].Node != nsu+"Demo.Counter" {
			t.Errorf("node %q, want the nsu= form %q", fields[0].Node, nsu+"Demo.Counter")
		}
		// The node ids resolve back to the server's nodes.
		for _, f := range fields {
			x, err := ua.ParseExpandedNodeID(f.Node)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := x.Resolve(c.Namespaces()); err != nil {
				t.Errorf("%s: %v", f.Node, err)
			}
		}
	})

	t.Run("DataTypeAndUniqueNames", func(t *testing.T) {
		var calls, lastFound, lastVisited int
		fields, err := ExpandBrowse(ctx, c, BrowseSelect{Root: server.NodeDemo, Depth: 2, DataTypes: []string{"Int32"}},
			func(found, visited int) { calls++; lastFound, lastVisited = found, visited })
		if err != nil {
			t.Fatal(err)
		}
		// Arrays/Int32Array, Arrays/Int32Matrix, Dynamic/Int32, Static/Int32,
		// Static/Int32Array, Step: the names of Static's made unique.
		if got := names(fields); got != "Int32Array Int32Matrix Int32 Int32_2 Int32Array_2 Step" {
			t.Errorf("names %q", got)
		}
		if fields[3].Node != nsu+"Demo.Static.Int32" || fields[1].Node != nsu+"Demo.Arrays.Int32Matrix" {
			t.Errorf("nodes %+v", fields)
		}
		if calls == 0 || lastFound != len(fields) || lastVisited < 50 {
			t.Errorf("progress: %d calls, last %d found %d visited", calls, lastFound, lastVisited)
		}
		// Stable: the same again.
		again, err := ExpandBrowse(ctx, c, BrowseSelect{Root: server.NodeDemo, Depth: 2, DataTypes: []string{"i=6"}}, nil)
		if err != nil || names(again) != names(fields) {
			t.Errorf("again (data type by node id): %q %v", names(again), err)
		}
	})

	t.Run("NameGlob", func(t *testing.T) {
		fields, err := ExpandBrowse(ctx, c, BrowseSelect{Root: "i=85", Name: "*Matrix"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(fields); got != "DoubleMatrix Int32Matrix" {
			t.Errorf("names %q", got)
		}
	})

	t.Run("MaxNodes", func(t *testing.T) {
		fields, err := ExpandBrowse(ctx, c, BrowseSelect{Root: server.NodeDemo, Depth: 3, MaxNodes: 7}, nil)
		if err != nil || len(fields) != 7 {
			t.Fatalf("%d fields, %v", len(fields), err)
		}
		// The first level's five variables come first (breadth first), then sorted.
		all, _ := ExpandBrowse(ctx, c, BrowseSelect{Root: server.NodeDemo, Depth: 3}, nil)
		if len(all) <= 7 {
			t.Fatalf("only %d fields below Demo", len(all))
		}
		for _, want := range []string{"Counter", "Sine", "Step"} {
			if !strings.Contains(" "+names(fields)+" ", " "+want+" ") {
				t.Errorf("%s missing from the first 7: %s", want, names(fields))
			}
		}
	})

	t.Run("Errors", func(t *testing.T) {
		for _, tc := range []struct {
			sel  BrowseSelect
			want string
		}{
			{BrowseSelect{Root: "ns=x"}, `config: browse ns=x: root: "ns=x" is not a node id`},
			{BrowseSelect{Root: "i=85", Depth: 40}, "config: browse i=85: depth: 40: want 1 to 32"},
			{BrowseSelect{Root: "i=85", Name: "[x"}, `config: browse i=85: name: "[x" is not a valid pattern`},
			{BrowseSelect{Root: "nsu=urn:nowhere;s=X"}, `config: browse root nsu=urn:nowhere;s=X:`},
			{BrowseSelect{Root: "i=85", DataTypes: []string{"nsu=urn:nowhere;i=1"}}, "config: browse data type nsu=urn:nowhere;i=1:"},
		} {
			_, err := ExpandBrowse(ctx, c, tc.sel, nil)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("%+v: %v, want %q…", tc.sel, err, tc.want)
			}
		}
		// A root that does not exist has nothing below it.
		fields, err := ExpandBrowse(ctx, c, BrowseSelect{Root: "ns=1;s=Nope"}, nil)
		if err != nil || len(fields) != 0 {
			t.Errorf("unknown root: %v %v", fields, err)
		}
		cctx, ccancel := context.WithCancel(ctx)
		ccancel()
		if _, err := ExpandBrowse(cctx, c, BrowseSelect{Root: "i=85"}, nil); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled: %v", err)
		}
	})
}

func TestExpandBrowseVisitLimit(t *testing.T) {
	// A server with more nodes below the root than ExpandBrowse remembers for
	// maxNodes 1: it stops with ErrBrowseLimit instead of growing.
	srv, err := server.New(&server.Config{Address: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler), Sim: server.SimConfig{Folders: 1, Variables: maxVisited(1) + 100, AlarmSources: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, srv.URL(), &client.Config{SecurityPolicy: "None"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fields, err := ExpandBrowse(ctx, c, BrowseSelect{Root: "ns=1;s=Load", Name: "nothing-matches", MaxNodes: 1}, nil)
	if !errors.Is(err, ErrBrowseLimit) || len(fields) != 0 {
		t.Fatalf("%d fields, err %v; want ErrBrowseLimit", len(fields), err)
	}
	// With a match the bound is MaxNodes, without an error.
	fields, err = ExpandBrowse(ctx, c, BrowseSelect{Root: "ns=1;s=Load", MaxNodes: 3}, nil)
	if err != nil || len(fields) != 3 {
		t.Fatalf("%d fields, err %v", len(fields), err)
	}
}

// TestExpandWriterGroup: a group's browse selections become fields after
// the listed ones, a listed field keeps its name against a found one, the
// fields found take the group's node defaults as listed ones do, the
// selections are gone from the result, and the input is left as it was; a
// selection that fails names its group, writer and root.
func TestExpandWriterGroup(t *testing.T) {
	c, _ := dialSim(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	wg := WriterGroup{
		Name: "g", PublishingInterval: Duration(500 * time.Millisecond),
		Nodes: NodeDefaults{QueueSize: 7, Heartbeat: Duration(time.Minute), Trigger: TriggerStatusValueTimestamp},
		Writers: []DataSetWriter{
			{Name: "w", Fields: []Field{{Name: "Sine", Node: "ns=1;s=Other"}}, Browse: []BrowseSelect{{Root: server.NodeDemo, Depth: 1}}},
			{Name: "plain", Fields: []Field{{Name: "x", Node: "i=2258"}}},
		},
	}
	wg.ApplyDefaults()
	before := (&Config{WriterGroups: []WriterGroup{wg}}).Clone()
	out, err := ExpandWriterGroup(ctx, c, &wg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	w := out.Writers[0]
	if got := names(w.Fields); got != "Sine Counter Random Setpoint Step" {
		t.Errorf("fields %q", got)
	}
	if w.Fields[0].Node != "ns=1;s=Other" || len(w.Browse) != 0 {
		t.Errorf("listed field %+v, browse %+v", w.Fields[0], w.Browse)
	}
	for _, f := range w.Fields[1:] {
		if f.SamplingInterval == nil || f.SamplingInterval.D() != 50*time.Millisecond || f.QueueSize != 7 ||
			f.DiscardOldest == nil || !*f.DiscardOldest || f.Trigger != TriggerStatusValueTimestamp ||
			f.Heartbeat.D() != time.Minute || f.Deadband.Type != DeadbandNone {
			t.Errorf("found field %s without the node defaults: %+v", f.Name, f)
		}
	}
	if names(out.Writers[1].Fields) != "x" || out.Writers[1].ID != writerHome("g", "plain") {
		t.Errorf("writer without browse changed: %+v", out.Writers[1])
	}
	if !reflect.DeepEqual(before.WriterGroups[0], wg) {
		t.Errorf("the input changed:\n%+v\nwas\n%+v", wg, before.WriterGroups[0])
	}

	wg.Writers[0].Browse[0].Root = "nsu=urn:nowhere;s=X"
	if _, err := ExpandWriterGroup(ctx, c, &wg, quiet); err == nil || !strings.Contains(err.Error(), "writer g/w: browse nsu=urn:nowhere;s=X") {
		t.Errorf("unknown namespace: %v", err)
	}
}
