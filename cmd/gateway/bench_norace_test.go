//go:build !race

package main

import "testing"

const benchRaceEnabled = false

func TestBenchScanAllocs(t *testing.T) {
	m := benchScanMessage(t)
	c := newBenchCounter(1000, 1000)
	if n := testing.AllocsPerRun(100, func() { c.message(m, 0) }); n != 0 {
		t.Errorf("%v allocations per message, want 0", n)
	}
}
