package client

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// TestItemSize keeps the client's per-item memory small: an item entry and
// its last value stay within 48 bytes (the node id's text aside, which the
// table keeps in its arena without a string header), so that with the
// bridge's field a million items fit the gateway's 200 bytes each.
func TestItemSize(t *testing.T) {
	if sz := unsafe.Sizeof(item{}); sz > 32 {
		t.Errorf("item = %d bytes, want ≤ 32", sz)
	}
	if sz := unsafe.Sizeof(lastValue{}); sz > 16 {
		t.Errorf("lastValue = %d bytes, want ≤ 16", sz)
	}
	if sz := unsafe.Sizeof(item{}) + unsafe.Sizeof(lastValue{}); sz > 48 {
		t.Errorf("item + lastValue = %d bytes, want ≤ 48", sz)
	}
}

// TestItemTableNodes: every kind of node id goes into the table's side
// storage and comes back the same, also after deletions compacted it, and
// the strings handed out before stay as they were.
func TestItemTableNodes(t *testing.T) {
	long := strings.Repeat("L", maxArenaText+1)
	huge := strings.Repeat("H", 70_000) // above the uint16 length
	g := ua.Guid{Data1: 0x01020304, Data2: 5, Data3: 6, Data4: [8]byte{7, 8, 9, 10, 11, 12, 13, 14}}
	kinds := []ua.NodeID{
		ua.NewNumericNodeID(0, 2258),
		ua.NewNumericNodeID(7, 0xFFFFFFFF),
		ua.NewStringNodeID(1, "Load.F000.V00001"),
		ua.NewStringNodeID(2, ""),
		ua.NewStringNodeID(3, long),
		ua.NewStringNodeID(3, huge),
		ua.NewGuidNodeID(4, g),
		ua.NewOpaqueNodeID(5, []byte{0, 1, 2, 0xFF}),
	}
	var tb itemTable
	tm := newTemplate(&ItemOptions{})
	const n = 20_000
	want := make([]ua.NodeID, n)
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.reserve(n)
	for i := range n {
		nd := kinds[i%len(kinds)]
		if nd.Type == ua.IDString && nd.Text != "" && len(nd.Text) < 100 {
			nd.Text = fmt.Sprintf("%s.%d", nd.Text, i) // distinct texts
		}
		want[i] = nd
		it := item{tmpl: tb.tmplIndex(tm), attr: uint8(AttributeValue)}
		tb.holdTmpl(it.tmpl)
		it.setMode(Sampling)
		tb.setNode(&it, nd)
		if h := tb.push(it); h != uint32(i+1) {
			t.Fatalf("handle %d for item %d", h, i)
		}
	}
	check := func(stage string) {
		t.Helper()
		for i := range n {
			it := tb.at(uint32(i + 1))
			if it.deleted() {
				continue
			}
			if got := tb.node(it); got != want[i] {
				t.Fatalf("%s: item %d: node %v (%d bytes), want %v", stage, i+1, got, len(got.Text), want[i])
			}
			if it.mode() != Sampling {
				t.Fatalf("%s: item %d: mode %v", stage, i+1, it.mode())
			}
		}
	}
	check("created")
	if len(tb.guids) != n/len(kinds) || len(tb.long) != 2*n/len(kinds) {
		t.Errorf("%d guids, %d long texts, want %d and %d", len(tb.guids), len(tb.long), n/len(kinds), 2*n/len(kinds))
	}
	// Strings handed out share the arena and must outlive a compaction.
	kept := tb.node(tb.at(3)).Text
	keptWant := strings.Clone(kept)
	arenaBefore := tb.text.size()
	// Deleting all but every 16th item leaves more dead bytes than live: a
	// compaction.
	for i := range n {
		if i%16 != 2 {
			h := uint32(i + 1)
			tb.forget(h, tb.at(h))
		}
	}
	check("after the deletions")
	if tb.sideDead > arenaChunkMax && tb.sideDead > tb.sideLive {
		t.Errorf("not compacted: %d bytes dead, %d live", tb.sideDead, tb.sideLive)
	}
	if after := tb.text.size(); after >= arenaBefore/2 {
		t.Errorf("arena %d bytes after the deletions, %d before", after, arenaBefore)
	}
	if kept != keptWant {
		t.Errorf("a string handed out changed to %q, was %q", kept, keptWant)
	}
	if s := tb.tmpls[0]; s.tm != tm || s.refs != (n+15)/16 {
		t.Errorf("template slot %+v, want %d references", s, (n+15)/16)
	}
}

// TestItemTableTemplates: templates are counted by their items; a slot is
// reused once its last item left it.
func TestItemTableTemplates(t *testing.T) {
	var tb itemTable
	a, b, c := newTemplate(&ItemOptions{}), newTemplate(&ItemOptions{QueueSize: 5}), newTemplate(&ItemOptions{QueueSize: 9})
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for range 3 {
		it := item{tmpl: tb.tmplIndex(a)}
		tb.holdTmpl(it.tmpl)
		tb.push(it)
	}
	tb.setTmpl(tb.at(1), b)
	tb.setTmpl(tb.at(2), b)
	tb.setTmpl(tb.at(2), b) // again: no second reference
	if tb.tmplOf(tb.at(1)) != b || tb.tmplOf(tb.at(3)) != a {
		t.Fatal("templates not set")
	}
	if tb.tmpls[0].refs != 1 || tb.tmpls[1].refs != 2 {
		t.Fatalf("slots %+v", tb.tmpls)
	}
	tb.forget(3, tb.at(3)) // a's last item
	if len(tb.tmplFree) != 1 || tb.tmpls[0].tm != nil {
		t.Fatalf("a's slot not freed: %+v free %v", tb.tmpls, tb.tmplFree)
	}
	tb.setTmpl(tb.at(1), c) // takes the free slot
	if len(tb.tmpls) != 2 || tb.tmplOf(tb.at(1)) != c || tb.tmpls[1].refs != 1 {
		t.Fatalf("slots %+v", tb.tmpls)
	}
	tb.setTmpl(tb.at(3), a) // deleted: ignored
	if _, ok := tb.tmplIdx[a]; ok {
		t.Error("a deleted item took a template")
	}
}

// TestItemInfoKinds: what CreateMonitoredItems was given comes back from Item
// for every kind of node id, attribute, range and namespace URI, against the
// simulation server, and after some were deleted and others modified.
func TestItemInfoKinds(t *testing.T) {
	srv := startSim(t, simOptions{Folders: 1, Variables: 10})
	c := dialNone(t, srv.URL())
	ctx := ctxT(t)
	sub, err := c.CreateSubscription(ctx, &SubscriptionConfig{PublishingInterval: 50 * time.Millisecond, ItemRetryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	uri := c.Namespaces()[1]
	guid := ua.NewGuidNodeID(1, ua.Guid{Data1: 1, Data4: [8]byte{1}})
	reqs := []ItemRequest{
		{NodeID: mustNode(server.LoadNode(0, 1))},
		{NodeID: ua.NewNumericNodeID(0, ua.ID_Server_ServerStatus_CurrentTime)},
		{NodeID: ua.NewNumericNodeID(0, ua.ID_Server_ServerStatus_CurrentTime), AttributeID: 300}, // no such attribute
		{NodeID: guid}, // no such node
		{NodeID: ua.NewStringNodeID(1, strings.Repeat("x", 2000))},
		{Node: ua.ExpandedNodeID{NodeID: ua.NewStringNodeID(0, "Load.F000.V00002"), NamespaceURI: uri}},
		{NodeID: mustNode(server.LoadNode(0, 3)), IndexRange: "0:1", AttributeID: AttributeDisplayName, Options: &ItemOptions{Mode: Disabled}},
	}
	res, err := sub.CreateMonitoredItems(ctx, reqs, nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(stage string, skip map[uint32]bool) {
		t.Helper()
		for i, r := range reqs {
			h := res.FirstHandle + uint32(i)
			info, ok := sub.Item(h)
			if skip[h] {
				if ok {
					t.Errorf("%s: deleted item %d: %+v", stage, h, info)
				}
				continue
			}
			if !ok {
				t.Fatalf("%s: item %d missing", stage, h)
			}
			wantNode, wantURI := r.NodeID, ""
			if !r.Node.IsNull() {
				wantNode, wantURI = r.Node.NodeID, r.Node.NamespaceURI
				wantNode.Namespace = 1 // resolved
			}
			wantAttr := r.AttributeID
			if wantAttr == 0 {
				wantAttr = AttributeValue
			}
			wantMode := Reporting
			if r.Options != nil {
				wantMode = r.Options.Mode
			}
			if info.NodeID != wantNode || info.NamespaceURI != wantURI || info.AttributeID != wantAttr ||
				info.IndexRange != r.IndexRange || info.Mode != wantMode || info.Handle != h {
				t.Errorf("%s: item %d: %v %q attr %d range %q mode %v, want %v %q attr %d range %q mode %v", stage, h,
					info.NodeID, info.NamespaceURI, info.AttributeID, info.IndexRange, info.Mode,
					wantNode, wantURI, wantAttr, r.IndexRange, wantMode)
			}
			wantGood := i != 2 && i != 3 && i != 4
			if i < 6 && (info.Status.IsGood() != wantGood || (info.ID != 0) != wantGood) { // 6: up to the server
				t.Errorf("%s: item %d (%v): status %v id %d", stage, h, info.NodeID, info.Status, info.ID)
			}
		}
	}
	check("created", nil)
	if err := sub.DeleteMonitoredItems(ctx, []uint32{res.FirstHandle + 1, res.FirstHandle + 3}); err != nil {
		t.Fatal(err)
	}
	gone := map[uint32]bool{res.FirstHandle + 1: true, res.FirstHandle + 3: true}
	check("after the deletion", gone)
	sts, err := sub.ModifyMonitoredItems(ctx, []uint32{res.FirstHandle, res.FirstHandle + 5}, &ItemOptions{SamplingInterval: 200 * time.Millisecond, QueueSize: 3})
	if err != nil || sts[0].IsBad() || sts[1].IsBad() {
		t.Fatal(sts, err)
	}
	check("after the modification", gone)
	if _, err := sub.CreateMonitoredItems(ctx, []ItemRequest{{NodeID: ua.NodeID{Type: 7}}}, nil); !errors.Is(err, ua.ErrInvalidNodeID) {
		t.Errorf("identifier type 7: %v, want ua.ErrInvalidNodeID", err)
	}
	if info, _ := sub.Item(res.FirstHandle); info.QueueSize != 3 {
		t.Errorf("queue %d after the modification", info.QueueSize)
	}
}
