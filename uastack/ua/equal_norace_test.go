//go:build !race

package ua

import "testing"

// Allocation tests: the race detector allocates on its own account, so they
// are built without it only (scripts/test.sh runs them in a step of their own).

// TestEqualAllocs: Equal and ExceedsDeadband of scalars and numeric arrays do not
// allocate (checked by the non-race run of scripts/test.sh).
func TestEqualAllocs(t *testing.T) {
	a, b := NewDoubleVariant(1), NewDoubleVariant(2)
	s1, s2 := NewStringVariant("abc"), NewStringVariant("abc")
	x, y := MustVariant([]float64{1, 2}), MustVariant([]float64{1, 3})
	if n := testing.AllocsPerRun(100, func() { a.Equal(&b); s1.Equal(&s2); x.Equal(&y) }); n != 0 {
		t.Errorf("Equal: %v allocs", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		ExceedsDeadband(&a, &b, DeadbandTypeAbsolute, 1, 0, 0)
		ExceedsDeadband(&x, &y, DeadbandTypePercent, 1, 0, 10)
	}); n != 0 {
		t.Errorf("ExceedsDeadband: %v allocs", n)
	}
}
