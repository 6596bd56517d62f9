//go:build !race

package gateway

import "testing"

// TestMemoryReadAllocs: the trim's reads of the heap (every trimInterval,
// at rest too) allocate nothing.
func TestMemoryReadAllocs(t *testing.T) {
	heapPages()
	liveHeap()
	if n := testing.AllocsPerRun(20, func() { heapPages(); liveHeap() }); n != 0 {
		t.Errorf("heapPages and liveHeap allocate %.1f times, want 0", n)
	}
}
