//go:build !race

package ua

import (
	"math"
	"runtime"
	"testing"
)

// Built without the race detector only: it allocates on its own account, and
// this fuzz target measures allocations (the fuzz step runs without -race).
// FuzzDecodeBudget decodes arbitrary bytes as a service message, a Variant and a
// DataValue under a small memory budget and measures what the process allocated
// meanwhile: it must never exceed what the decoder charged (plus, on failure, the
// error), so the budget bounds the memory of every input.
func FuzzDecodeBudget(f *testing.F) {
	for _, c := range genMessages() {
		e := NewEncoder(nil)
		e.WriteStructure(c.msg)
		f.Add(e.Bytes())
	}
	for _, c := range builtinCases {
		e := NewEncoder(nil)
		encodeValue(e, c.value)
		f.Add(e.Bytes())
	}
	f.Add(hostileCallRequest(100))
	f.Add(hostileCallRequest(5000))
	f.Add(unhexBytes(f, "97 c8000000"+repeatHex("00", 200)))
	f.Add(unhexBytes(f, "99 c8000000"+repeatHex("00", 200)))
	f.Add(unhexBytes(f, "d8 02000000 0c 01000000 61 0c 01000000 62 02000000 01000000 02000000"))
	lim := DefaultLimits
	lim.MaxArrayLength = 1 << 16
	lim.MemoryPerByte, lim.MemoryAllowance = DefaultMemoryPerByte, 4096
	d := NewDecoder(nil, &lim)
	var (
		input    []byte
		ms0, ms1 runtime.MemStats
		v        Variant
		dv       DataValue
	)
	decoders := []struct {
		what   string
		decode func()
	}{
		{"message", func() { _, _ = d.ReadStructure(nil) }},
		{"Variant", func() { d.ReadVariant(&v) }},
		{"DataValue", func() { d.ReadDataValue(&dv) }},
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		input = b
		for _, dec := range decoders {
			// The fuzzing worker's own goroutines may allocate now and then while
			// a decode runs: the least of three runs is the decoder's.
			got := uint64(math.MaxUint64)
			for range 3 {
				d.Reset(input, &lim)
				runtime.ReadMemStats(&ms0)
				dec.decode()
				runtime.ReadMemStats(&ms1)
				got = min(got, ms1.TotalAlloc-ms0.TotalAlloc)
			}
			if got > uint64(d.MemoryCharged())+budgetSlack(d, len(b)) {
				t.Fatalf("%s of %d bytes: allocated %d bytes, charged %d (budget %d), err %v",
					dec.what, len(b), got, d.MemoryCharged(), d.MemoryBudget(), d.Err())
			}
		}
	})
}
