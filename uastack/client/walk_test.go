package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// TestWalk walks the simulation server's Load folders (named by namespace
// URI: ParseNodeID): level by level, each reference under its parent, within
// MaxDepth and MaxNodes, with progress and the nodes that cannot be browsed
// reported.
func TestWalk(t *testing.T) {
	srv := startSim(t, simOptions{Folders: 3, Variables: 250})
	c, err := dialSim(t, srv, Config{SecurityPolicy: "None"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	load, err := c.ParseNodeID("nsu=" + c.Namespaces()[1] + ";s=Load")
	if err != nil || load != ua.MustParseNodeID(server.NodeLoad) {
		t.Fatalf("ParseNodeID: %v %v", load, err)
	}
	for _, s := range []string{"nsu=urn:nobody;s=Load", "ns=x"} {
		if _, err := c.ParseNodeID(s); err == nil {
			t.Errorf("ParseNodeID(%q): no error", s)
		}
	}

	nodes, roots, err := c.Walk(ctx, load, WalkOptions{MaxDepth: 1})
	if err != nil || len(nodes) != 3 || len(roots) != 3 {
		t.Fatalf("depth 1: %d nodes, %d roots, %v", len(nodes), len(roots), err)
	}

	var calls, lastFound int
	nodes, roots, err = c.Walk(ctx, load, WalkOptions{CallTimeout: 10 * time.Second, Progress: func(found, depth, browsed, total int) {
		calls++
		if found < lastFound || browsed > total || depth < 1 {
			t.Errorf("progress found %d (before %d) depth %d browsed %d of %d", found, lastFound, depth, browsed, total)
		}
		lastFound = found
	}})
	if err != nil {
		t.Fatal(err)
	}
	// 750 variables at depth 2: browsed in batches of walkBatch.
	if calls < 1+750/walkBatch || lastFound != len(nodes) {
		t.Errorf("%d progress calls, last %d of %d nodes", calls, lastFound, len(nodes))
	}
	vars := 0
	for f, i := range roots {
		n := nodes[i]
		if n.Depth != 1 || n.Ref.BrowseName.Name != fmt.Sprintf("F%03d", f) {
			t.Fatalf("root %d: %+v", f, n.Ref.BrowseName)
		}
		for v, k := range n.Children {
			if nodes[k].Depth != 2 || nodes[k].Ref.NodeID.NodeID.String() != server.LoadNode(f, v) {
				t.Fatalf("folder %d child %d: %v at depth %d", f, v, nodes[k].Ref.NodeID, nodes[k].Depth)
			}
			vars++
		}
	}
	if vars != 750 {
		t.Errorf("%d variables below the folders, want 750", vars)
	}

	nodes, _, err = c.Walk(ctx, load, WalkOptions{MaxNodes: 100})
	if !errors.Is(err, ErrWalkLimit) || len(nodes) != 100 {
		t.Errorf("MaxNodes 100: %d nodes, %v", len(nodes), err)
	}

	var bad []ua.StatusCode
	nodes, _, err = c.Walk(ctx, ua.MustParseNodeID("ns=1;s=Nope"), WalkOptions{BadNode: func(_ ua.NodeID, sc ua.StatusCode) { bad = append(bad, sc) }})
	if err != nil || len(nodes) != 0 || len(bad) != 1 || bad[0].Code() != ua.StatusBadNodeIdUnknown {
		t.Errorf("unknown root: %d nodes, bad %v, %v", len(nodes), bad, err)
	}

	// The whole address space: every node expanded once, cycles or not.
	if nodes, _, err = c.Walk(ctx, ua.NewNumericNodeID(0, ua.ID_RootFolder), WalkOptions{}); err != nil || len(nodes) < 750 {
		t.Errorf("from the root: %d nodes, %v", len(nodes), err)
	}
}
