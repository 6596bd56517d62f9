//go:build !race

package sparkplug

import "testing"

// TestFeedAllocs: in steady state a writer's batch of 1000 values becomes
// its DDATA message on the queue without an allocation per value (at most
// one per message).
func TestFeedAllocs(t *testing.T) {
	_, f, b, q := feedFixture(t, 1000)
	for range 10 {
		f.Values(b)
	}
	allocs := testing.AllocsPerRun(200, func() { f.Values(b) })
	if allocs > 1 {
		t.Errorf("%.2f allocations per batch of %d values, want ≤ 1", allocs, len(b.Values))
	}
	if q.messages < 200 {
		t.Fatalf("%d messages", q.messages)
	}
}

// TestHoldAllocs: a node that is not online holds a writer's DDATA of 1000
// values without an allocation: copied into its MemStore, or named for a
// durable store (appendNamed into its scratch).
func TestHoldAllocs(t *testing.T) {
	node, f, b, q := feedFixture(t, 1000)
	q.keep = true
	f.Values(b)
	d := node.devs[0]
	dm := d.metrics.Load()
	p := body(q.last)
	hold := func() {
		node.pubMu.Lock()
		node.hold(d, dm.version, b.Created, p)
		node.pubMu.Unlock()
	}
	for range 2000 { // the store full: it drops the oldest
		hold()
	}
	if allocs := testing.AllocsPerRun(200, hold); allocs > 0 {
		t.Errorf("%.2f allocations per held message, want 0", allocs)
	}
	named := func() {
		var k int
		node.named, k, _ = appendNamed(node.named[:0], p, dm)
		if k != 1000 {
			t.Fatalf("%d metrics named", k)
		}
	}
	named()
	if allocs := testing.AllocsPerRun(200, named); allocs > 0 {
		t.Errorf("%.2f allocations per message named, want 0", allocs)
	}
}
