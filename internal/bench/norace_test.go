//go:build !race

package bench

import "testing"

func TestScanAllocs(t *testing.T) {
	m := scanMessage(t)
	c := newCounter(1000, 1000)
	if n := testing.AllocsPerRun(100, func() { c.message(m, 0) }); n != 0 {
		t.Errorf("%v allocations per message, want 0", n)
	}
}
