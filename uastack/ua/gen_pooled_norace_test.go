//go:build !race

package ua

import "testing"

// Allocation tests: the race detector allocates on its own account, so they
// are built without it only (scripts/test.sh runs them in a step of their own).

// TestGenPooledNoAllocs: decoding a PublishResponse of numeric data changes and
// events into a reused response, and releasing it, allocates nothing.
func TestGenPooledNoAllocs(t *testing.T) {
	b := genEncode(t, genNumericPublishResponse())
	var r PublishResponse
	d := NewDecoder(nil, nil)
	allocs := testing.AllocsPerRun(200, func() {
		d.Reset(b, nil)
		if _, err := d.ReadStructure(&r); err != nil {
			t.Fatal(err)
		}
		r.Release()
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per decode+release, want 0", allocs)
	}
	// Decoding without releasing in between reuses the objects in place.
	allocs = testing.AllocsPerRun(200, func() {
		d.Reset(b, nil)
		if _, err := d.ReadStructure(&r); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per decode into a reused response, want 0", allocs)
	}
	r.Release()
}
