package pooling_test

import (
	"testing"

	"github.com/uagate/gateway/pooling"
)

// cycle gets n objects from p and puts them all back.
func cycle(p *pooling.Pool[item, *item], n int) {
	out := make([]*item, n)
	for i := range out {
		out[i] = p.Get()
	}
	for _, x := range out {
		p.Put(x)
	}
}

// TestPoolTrimUnused: what a burst left idle and nothing took in a whole
// period is let go by the next Trim; the fast slot's one object stays.
func TestPoolTrimUnused(t *testing.T) {
	p := pooling.NewPool[item](64, resetItem)
	cycle(p, 40) // a burst: 40 out at once, then all idle
	if got := p.Stats().Idle; got != 40 {
		t.Fatalf("idle after the burst = %d, want 40", got)
	}
	// The burst's own Gets emptied the pool (misses): nothing sat unused
	// yet, so the first Trim keeps everything and starts the period.
	if n := p.Trim(); n != 0 {
		t.Fatalf("first Trim dropped %d, want 0 (the period had misses)", n)
	}
	if n := p.Trim(); n != 39 {
		t.Fatalf("Trim after an idle period dropped %d, want 39 (all but the fast slot)", n)
	}
	st := p.Stats()
	if st.Idle != 1 || st.Trimmed != 39 {
		t.Fatalf("after Trim: idle %d trimmed %d, want 1 and 39", st.Idle, st.Trimmed)
	}
}

// TestPoolTrimKeepsRecurringPeak: a pool that serves a peak of 10 every
// period keeps 10 through any number of Trims and never misses again,
// while what it held beyond the peak goes.
func TestPoolTrimKeepsRecurringPeak(t *testing.T) {
	p := pooling.NewPool[item](64, resetItem)
	cycle(p, 30) // the setup's burst
	p.Trim()
	for period := range 5 {
		cycle(p, 10)
		p.Trim()
		if idle := p.Stats().Idle; idle < 10 {
			t.Fatalf("period %d: %d idle after Trim, want ≥ 10 (the recurring peak)", period, idle)
		}
	}
	if idle := p.Stats().Idle; idle > 11 {
		t.Fatalf("%d idle after the periods, want ≤ 11: the burst's surplus was not let go", idle)
	}
	misses := p.Stats().Misses
	cycle(p, 10)
	if got := p.Stats().Misses; got != misses {
		t.Fatalf("the peak missed %d times after trimming, want 0", got-misses)
	}
}

// TestPoolDrainResetsLowWater: objects put after a Drain were needed by
// nothing yet; the next Trim must not count the drained period against them.
func TestPoolDrainResetsLowWater(t *testing.T) {
	p := pooling.NewPool[item](64, resetItem)
	cycle(p, 20)
	p.Trim()
	p.Trim() // low water is now the 19 slots
	cycle(p, 5)
	p.Drain()
	cycle(p, 8)
	if n := p.Trim(); n != 0 {
		t.Fatalf("Trim after Drain dropped %d, want 0", n)
	}
}

// TestBufferPoolTrim: BufferPool.Trim trims every class and returns bytes.
func TestBufferPoolTrim(t *testing.T) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{MaxSize: 64 << 10, ClassBytes: 8 << 20})
	var out []*pooling.Buffer
	for range 8 {
		out = append(out, bp.Get(40<<10), bp.Get(1000))
	}
	for _, b := range out {
		bp.Put(b)
	}
	bp.Trim()
	// 7 of each class go (the fast slot keeps one): 7×64 KiB + 7×1 KiB.
	if got, want := bp.Trim(), 7*(64<<10)+7*1024; got != want {
		t.Fatalf("Trim = %d bytes, want %d", got, want)
	}
}
