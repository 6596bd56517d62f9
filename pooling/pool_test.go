package pooling_test

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/uagate/gateway/pooling"
)

// item stands in for a decoded notification: scalars, a slice whose capacity
// is worth keeping, and an owner word the tests use to catch an object held by
// two goroutines at once.
type item struct {
	pooling.Header
	Handle uint32
	Value  float64
	Names  []string
	owner  atomic.Int64
}

// resetItem zeroes the whole struct, Header included, the way a hurried
// reset would; the pool must cope with that.
func resetItem(it *item) {
	names := it.Names[:0]
	*it = item{}
	it.Names = names
}

func TestNewPoolDefaults(t *testing.T) {
	p := pooling.NewPool[item](0, nil) // P is inferred as *item
	if got := p.Stats().Capacity; got != pooling.DefaultCapacity {
		t.Fatalf("capacity = %d, want %d", got, pooling.DefaultCapacity)
	}
	if got := pooling.NewPool[item](-5, resetItem).Stats().Capacity; got != pooling.DefaultCapacity {
		t.Fatalf("capacity(-5) = %d, want %d", got, pooling.DefaultCapacity)
	}
	if got := pooling.NewPool[item](3, nil).Stats().Capacity; got != 3 {
		t.Fatalf("capacity(3) = %d, want 3", got)
	}
}

func TestPoolReuseAndReset(t *testing.T) {
	p := pooling.NewPool[item](4, resetItem)
	a := p.Get()
	a.Handle, a.Value = 7, 1.5
	a.Names = append(a.Names, "x", "y")
	p.Put(a)

	b := p.Get()
	if b != a {
		t.Fatalf("Get after Put returned a new object, want the pooled one")
	}
	if b.Handle != 0 || b.Value != 0 || len(b.Names) != 0 {
		t.Fatalf("pooled object not reset: %+v", b)
	}
	if cap(b.Names) < 2 {
		t.Fatalf("reset dropped slice capacity: cap = %d", cap(b.Names))
	}

	s := p.Stats()
	want := pooling.PoolStats{Capacity: 4, Idle: 0, Hits: 1, Misses: 1, Puts: 1}
	if s != want {
		t.Fatalf("stats = %+v, want %+v", s, want)
	}
}

func TestPoolPutNil(t *testing.T) {
	p := pooling.NewPool[item](4, resetItem)
	p.Put(nil)
	if s := p.Stats(); s.Puts != 0 || s.Drops != 0 || s.DoublePuts != 0 || s.Idle != 0 {
		t.Fatalf("Put(nil) changed stats: %+v", s)
	}
}

func TestPoolPutForeign(t *testing.T) {
	// Objects made outside the pool may be given to it.
	p := pooling.NewPool[item](4, nil)
	x := &item{Handle: 1}
	p.Put(x)
	if got := p.Get(); got != x {
		t.Fatalf("Get = %p, want the object put from outside %p", got, x)
	}
}

func TestPoolFullDrops(t *testing.T) {
	const capacity, extra = 4, 3
	p := pooling.NewPool[item](capacity, resetItem)
	var objs []*item
	for range capacity + extra {
		objs = append(objs, p.Get())
	}
	for _, o := range objs {
		p.Put(o)
	}
	s := p.Stats()
	if s.Puts != capacity || s.Drops != extra || s.Idle != capacity || s.Misses != capacity+extra {
		t.Fatalf("stats = %+v, want %d puts, %d drops, %d idle", s, capacity, extra, capacity)
	}

	// The pool gives back exactly what it kept, each object once, then allocates.
	kept := map[*item]bool{}
	for range capacity {
		o := p.Get()
		if kept[o] {
			t.Fatalf("object %p handed out twice", o)
		}
		kept[o] = true
	}
	if s := p.Stats(); s.Hits != capacity || s.Idle != 0 {
		t.Fatalf("after draining: %+v", s)
	}
	if o := p.Get(); kept[o] {
		t.Fatalf("empty pool returned an object already handed out")
	}
	if s := p.Stats(); s.Misses != capacity+extra+1 {
		t.Fatalf("empty pool did not allocate: %+v", s)
	}
}

func TestPoolCapacityOne(t *testing.T) {
	p := pooling.NewPool[item](1, nil)
	a, b := p.Get(), p.Get()
	p.Put(a)
	p.Put(b)
	if s := p.Stats(); s.Puts != 1 || s.Drops != 1 || s.Idle != 1 {
		t.Fatalf("stats = %+v", s)
	}
	if p.Get() != a || p.Get() == a {
		t.Fatalf("capacity 1 pool did not keep exactly the first object")
	}
}

func TestPoolDoublePut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reset func(*item)
		fill  int // objects already in the pool, so the double Put lands in a slot rather than the fast slot
	}{
		{"fast slot", resetItem, 0},
		{"slot", resetItem, 3},
		{"no reset", nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pooling.NewPool[item](16, tc.reset)
			var fill []*item
			for range tc.fill {
				fill = append(fill, p.Get())
			}
			x := p.Get()
			for _, o := range fill {
				p.Put(o)
			}
			p.Put(x)
			p.Put(x)
			s := p.Stats()
			if s.DoublePuts != 1 || s.Puts != uint64(tc.fill+1) || s.Idle != tc.fill+1 {
				t.Fatalf("stats = %+v, want 1 double put, %d puts and idle", s, tc.fill+1)
			}
			seen := map[*item]bool{}
			for range tc.fill + 2 {
				o := p.Get()
				if seen[o] {
					t.Fatalf("object %p handed out twice after a double Put", o)
				}
				seen[o] = true
			}
			if !seen[x] {
				t.Fatalf("double-put object never handed out again")
			}
		})
	}
}

func TestPoolPutAfterGetAgain(t *testing.T) {
	// An object that went back and was taken again is in use, so its owner can
	// Put it normally.
	p := pooling.NewPool[item](4, resetItem)
	x := p.Get()
	p.Put(x)
	if p.Get() != x {
		t.Fatal("pool did not return x")
	}
	p.Put(x)
	if s := p.Stats(); s.Puts != 2 || s.DoublePuts != 0 || s.Idle != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

// TestPoolConcurrent checks under -race that no object is held by two
// goroutines at once, that a holder's writes never race with the next
// holder's, and that the counters add up once the dust settles.
func TestPoolConcurrent(t *testing.T) {
	for _, capacity := range []int{2, 8, 64} {
		t.Run("cap"+strconv.Itoa(capacity), func(t *testing.T) {
			p := pooling.NewPool[item](capacity, resetItem)
			workers := 4 * runtime.GOMAXPROCS(0)
			iters := 4000
			if testing.Short() {
				iters = 500
			}
			var gets, puts atomic.Uint64
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					id := int64(w + 1)
					held := make([]*item, 0, 4)
					for i := range iters {
						n := 1 + (i+w)%4 // hold several to reach beyond the fast slot
						for range n {
							o := p.Get()
							gets.Add(1)
							if !o.owner.CompareAndSwap(0, id) {
								t.Errorf("object %p handed to worker %d while worker %d holds it", o, id, o.owner.Load())
								return
							}
							if o.Handle != 0 || o.Value != 0 || len(o.Names) != 0 {
								t.Errorf("object %p not reset: %+v", o, o)
								return
							}
							o.Handle, o.Value = uint32(id), float64(i)
							o.Names = append(o.Names, "n")
							held = append(held, o)
						}
						for _, o := range held {
							if o.Handle != uint32(id) {
								t.Errorf("object %p changed under its owner", o)
								return
							}
							o.owner.Store(0)
							p.Put(o)
							puts.Add(1)
						}
						held = held[:0]
					}
				})
			}
			wg.Wait()

			s := p.Stats()
			if s.Hits+s.Misses != gets.Load() {
				t.Errorf("hits %d + misses %d != gets %d", s.Hits, s.Misses, gets.Load())
			}
			if s.Puts+s.Drops != puts.Load() || s.DoublePuts != 0 {
				t.Errorf("puts %d + drops %d != %d puts (double %d)", s.Puts, s.Drops, puts.Load(), s.DoublePuts)
			}
			if s.Idle < 0 || s.Idle > capacity {
				t.Errorf("idle %d outside [0, %d]", s.Idle, capacity)
			}
			if s.Hits != s.Puts-uint64(s.Idle) {
				t.Errorf("hits %d != puts %d - idle %d: an object was lost or duplicated", s.Hits, s.Puts, s.Idle)
			}
			// Everything the pool says it holds comes out, once each.
			seen := map[*item]bool{}
			for range s.Idle {
				o := p.Get()
				if seen[o] {
					t.Fatalf("object %p handed out twice while draining", o)
				}
				seen[o] = true
			}
			if after := p.Stats(); after.Misses != s.Misses || after.Idle != 0 {
				t.Errorf("draining %d idle objects: %+v", s.Idle, after)
			}
		})
	}
}

func TestPoolZeroAllocs(t *testing.T) {
	p := pooling.NewPool[item](0, resetItem)
	// Warm up with several objects so the slots, not only the fast slot, are used.
	var warm [3]*item
	for i := range warm {
		warm[i] = p.Get()
	}
	for _, o := range warm {
		p.Put(o)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		a, b, c := p.Get(), p.Get(), p.Get()
		a.Handle, b.Handle, c.Handle = 1, 2, 3
		p.Put(c)
		p.Put(b)
		p.Put(a)
	})
	if allocs != 0 {
		t.Fatalf("Get+Put allocates %.1f times per run, want 0", allocs)
	}
}

// TestPoolDrain: Drain lets go of every idle object (counted), the next Get
// allocates, and a Put after it is kept again.
func TestPoolDrain(t *testing.T) {
	const capacity = 4
	p := pooling.NewPool[item](capacity, resetItem)
	var objs []*item
	for range capacity {
		objs = append(objs, p.Get())
	}
	for _, o := range objs {
		p.Put(o)
	}
	if n := p.Drain(); n != capacity {
		t.Fatalf("Drain = %d, want %d", n, capacity)
	}
	s := p.Stats()
	if s.Idle != 0 || s.Drained != capacity || s.Hits != s.Puts-uint64(s.Idle)-s.Drained {
		t.Fatalf("after Drain: %+v", s)
	}
	o := p.Get()
	for _, x := range objs {
		if o == x {
			t.Fatal("Get after Drain handed out a drained object")
		}
	}
	p.Put(o)
	if s := p.Stats(); s.Idle != 1 || p.Drain() != 1 {
		t.Fatalf("a Put after Drain was not kept: %+v", s)
	}
}
