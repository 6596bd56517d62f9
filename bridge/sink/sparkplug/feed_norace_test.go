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
