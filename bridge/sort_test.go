package bridge

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

func cmpSlot(a, b entry) int { return cmp.Compare(a.slot, b.slot) }

// TestSortEntries: sortEntries orders as a stable sort by slot does, for
// short and long lists, slots of one byte to four, sorted, reversed and
// rounds of the same slots (a server sending every queued value of each
// item in turn), reusing its spare buffer.
func TestSortEntries(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var spare []entry
	for _, n := range []int{0, 1, 2, 31, 32, 33, 100, 1000, 5000} {
		for _, maxSlot := range []int32{1, 200, 70000, 1 << 30} {
			for shape := range 4 {
				ents := make([]entry, n)
				for i := range ents {
					var s int32
					switch shape {
					case 0:
						s = r.Int32N(maxSlot)
					case 1:
						s = int32(i) % maxSlot
					case 2:
						s = int32(n-i) % maxSlot
					case 3:
						s = int32(i%100) * (maxSlot / 100)
					}
					ents[i] = entry{slot: s, item: int32(i)}
				}
				want := slices.Clone(ents)
				slices.SortStableFunc(want, cmpSlot)
				var got []entry
				got, spare = sortEntries(ents, spare)
				if !slices.Equal(got, want) {
					t.Fatalf("n %d max %d shape %d: not the stable order", n, maxSlot, shape)
				}
			}
		}
	}
}

// BenchmarkSortEntries: 1,000 entries as a server sends ten queued values
// of 100 items in one message (the items in turn, ten times); the baseline
// is slices.SortStableFunc, what the hot path used.
func BenchmarkSortEntries(b *testing.B) {
	src := make([]entry, 1000)
	for i := range src {
		src[i] = entry{slot: int32(i % 100), item: int32(i)}
	}
	ents := make([]entry, len(src))
	b.Run("radix", func(b *testing.B) {
		b.ReportAllocs()
		buf, spare := ents, []entry(nil)
		for b.Loop() {
			buf = append(buf[:0], src...)
			buf, spare = sortEntries(buf, spare)
		}
	})
	b.Run("SortStableFunc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			copy(ents, src)
			slices.SortStableFunc(ents, cmpSlot)
		}
	})
}
