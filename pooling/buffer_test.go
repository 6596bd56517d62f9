package pooling_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/uagate/gateway/pooling"
)

func TestClassSize(t *testing.T) {
	for _, tc := range []struct {
		n, want int
	}{
		{-1, 0},
		{0, 512},
		{1, 512},
		{511, 512},
		{512, 512},
		{513, 1024},
		{8192, 8192},
		{8193, 16384},
		{65535, 65536}, // the usual negotiated ReceiveBufferSize
		{65536, 65536},
		{65537, 131072},
		{pooling.MaxBufferSize - 1, pooling.MaxBufferSize},
		{pooling.MaxBufferSize, pooling.MaxBufferSize},
		{pooling.MaxBufferSize + 1, 0},
		{1 << 40, 0},
	} {
		if got := pooling.ClassSize(tc.n); got != tc.want {
			t.Errorf("ClassSize(%d) = %d, want %d", tc.n, got, tc.want)
		}
		if got := pooling.Buffers.ClassSize(tc.n); got != tc.want {
			t.Errorf("Buffers.ClassSize(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestBufferPoolConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     pooling.BufferPoolConfig
		maxSize int
		classes int
	}{
		{"default", pooling.BufferPoolConfig{}, pooling.MaxBufferSize, 16},
		{"1 MiB", pooling.BufferPoolConfig{MaxSize: 1 << 20}, 1 << 20, 12},
		{"rounded up", pooling.BufferPoolConfig{MaxSize: 70000}, 131072, 9},
		{"below min", pooling.BufferPoolConfig{MaxSize: 100}, 512, 1},
		{"above limit", pooling.BufferPoolConfig{MaxSize: 1 << 40}, 1 << 30, 22},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bp := pooling.NewBufferPool(tc.cfg)
			if got := bp.MaxSize(); got != tc.maxSize {
				t.Errorf("MaxSize = %d, want %d", got, tc.maxSize)
			}
			cls := bp.Stats().Classes
			if len(cls) != tc.classes {
				t.Fatalf("%d classes, want %d", len(cls), tc.classes)
			}
			if cls[0].Size != pooling.MinBufferSize || cls[len(cls)-1].Size != tc.maxSize {
				t.Errorf("classes span %d..%d, want %d..%d", cls[0].Size, cls[len(cls)-1].Size, pooling.MinBufferSize, tc.maxSize)
			}
		})
	}
}

func TestBufferPoolClassCapacity(t *testing.T) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{ClassBytes: 1 << 20, MaxPerClass: 100})
	for _, c := range bp.Stats().Classes {
		want := max(1, min(100, (1<<20)/c.Size))
		if c.Capacity != want {
			t.Errorf("class %d keeps %d buffers, want %d", c.Size, c.Capacity, want)
		}
		if c.Capacity*c.Size > 1<<20 && c.Capacity > 1 {
			t.Errorf("class %d may keep %d bytes, over its budget", c.Size, c.Capacity*c.Size)
		}
	}
}

func TestBufferGetPut(t *testing.T) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{})
	for _, n := range []int{0, 1, 512, 513, 65535, 65536, 65537, pooling.MaxBufferSize} {
		b := bp.Get(n)
		if len(b.B) != n || cap(b.B) != pooling.ClassSize(n) {
			t.Fatalf("Get(%d): len %d cap %d, want len %d cap %d", n, len(b.B), cap(b.B), n, pooling.ClassSize(n))
		}
		arr := &b.B[:1][0]
		bp.Put(b)
		// A different size of the same class reuses the same array.
		m := max(0, pooling.ClassSize(n)-1)
		c := bp.Get(m)
		if c != b || &c.B[:1][0] != arr {
			t.Fatalf("Get(%d) after Put of a Get(%d) buffer did not reuse it", m, n)
		}
		if len(c.B) != m {
			t.Fatalf("reused buffer has len %d, want %d", len(c.B), m)
		}
		bp.Put(c)
	}
	for _, c := range bp.Stats().Classes {
		if c.DoublePuts != 0 || c.Drops != 0 || c.Hits != c.Puts-uint64(c.Idle) {
			t.Errorf("class %d: %+v", c.Size, c.PoolStats)
		}
	}
}

func TestBufferPutKeepsBytesPutClearZeroes(t *testing.T) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{})
	b := bp.Get(600)
	fill(b.B[:cap(b.B)], 0xAB)
	bp.Put(b)
	b = bp.Get(1000) // same class, 1024
	if b.B[:cap(b.B)][1000] != 0xAB {
		t.Fatal("Put cleared the buffer; it is meant to keep it as it was")
	}
	bp.PutClear(b)
	b = bp.Get(1024)
	for i, v := range b.B[:cap(b.B)] {
		if v != 0 {
			t.Fatalf("byte %d = %#x after PutClear, want 0", i, v)
		}
	}
}

func TestBufferPutClearWhenDropped(t *testing.T) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{MaxPerClass: 1})
	a, b := bp.Get(512), bp.Get(512)
	fill(a.B, 1)
	fill(b.B, 2)
	raw := b.B
	bp.PutClear(a)
	bp.PutClear(b) // the class is full: b is dropped, but cleared first
	for i, v := range raw {
		if v != 0 {
			t.Fatalf("dropped buffer byte %d = %#x, want 0", i, v)
		}
	}
	if c := bp.Stats().Classes[0]; c.Puts != 1 || c.Drops != 1 {
		t.Fatalf("class stats %+v, want 1 put and 1 drop", c.PoolStats)
	}

	// The same for a buffer that fits no class.
	f := &pooling.Buffer{B: make([]byte, 1000)}
	fill(f.B, 3)
	bp.PutClear(f)
	for i, v := range f.B {
		if v != 0 {
			t.Fatalf("foreign buffer byte %d = %#x, want 0", i, v)
		}
	}
}

func TestBufferForeignAndOversize(t *testing.T) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{MaxSize: 1 << 20})

	big := bp.Get(1<<20 + 1)
	if len(big.B) != 1<<20+1 {
		t.Fatalf("oversize Get: len %d", len(big.B))
	}
	bp.Put(big)

	grown := bp.Get(512)
	grown.B = append(grown.B, make([]byte, 100)...) // append grows past the class
	bp.Put(grown)

	front := bp.Get(1024)
	front.B = front.B[1:] // capacity 1023
	bp.Put(front)

	bp.Put(&pooling.Buffer{B: make([]byte, 4096)}) // made elsewhere, but exactly a class size
	bp.Put(&pooling.Buffer{})                      // nil slice
	bp.Put(nil)

	s := bp.Stats()
	if s.Oversize != 1 {
		t.Errorf("oversize = %d, want 1", s.Oversize)
	}
	if s.Foreign != 4 {
		t.Errorf("foreign = %d, want 4 (oversize, grown, front-resliced, nil)", s.Foreign)
	}
	for _, c := range s.Classes {
		want := 0
		if c.Size == 4096 {
			want = 1
		}
		if c.Idle != want {
			t.Errorf("class %d holds %d buffers, want %d", c.Size, c.Idle, want)
		}
	}
}

func TestBufferDoublePut(t *testing.T) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{})
	b := bp.Get(100)
	bp.Put(b)
	bp.PutClear(b)
	x, y := bp.Get(100), bp.Get(100)
	if x == y || &x.B[:1][0] == &y.B[:1][0] {
		t.Fatal("double Put let one buffer out twice")
	}
	if s := bp.Stats().Classes[0]; s.DoublePuts != 1 {
		t.Fatalf("double puts = %d, want 1", s.DoublePuts)
	}
}

// TestBufferConcurrent stamps each buffer with its holder under -race: a
// buffer handed to two goroutines shows up as a changed stamp or a data race.
func TestBufferConcurrent(t *testing.T) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{MaxPerClass: 4})
	sizes := []int{100, 600, 1500, 5000}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			stamp := byte(w + 1)
			for i := range 2000 {
				b := bp.Get(sizes[(i+w)%len(sizes)])
				fill(b.B, stamp)
				runtime.Gosched()
				for _, v := range b.B {
					if v != stamp {
						t.Errorf("buffer changed under its holder: %d != %d", v, stamp)
						return
					}
				}
				if i%3 == 0 {
					bp.PutClear(b)
				} else {
					bp.Put(b)
				}
			}
		})
	}
	wg.Wait()
	for _, c := range bp.Stats().Classes {
		if c.DoublePuts != 0 || c.Hits != c.Puts-uint64(c.Idle) {
			t.Errorf("class %d: %+v", c.Size, c.PoolStats)
		}
	}
}

func TestBufferNegativeSizePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Get(-1) did not panic")
		}
	}()
	pooling.NewBufferPool(pooling.BufferPoolConfig{}).Get(-1)
}

func TestBufferZeroAllocs(t *testing.T) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{})
	for _, n := range []int{100, 65535, 1 << 20} {
		bp.Put(bp.Get(n))
		allocs := testing.AllocsPerRun(1000, func() {
			b := bp.Get(n)
			b.B[0] = 1
			bp.Put(b)
		})
		if allocs != 0 {
			t.Errorf("Get(%d)+Put allocates %.1f times per run, want 0", n, allocs)
		}
		allocs = testing.AllocsPerRun(100, func() {
			bp.PutClear(bp.Get(n))
		})
		if allocs != 0 {
			t.Errorf("Get(%d)+PutClear allocates %.1f times per run, want 0", n, allocs)
		}
	}
}

func fill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}

// TestBufferPoolDrain: Drain empties every class and reports the bytes it let go.
func TestBufferPoolDrain(t *testing.T) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{})
	a, b, c := bp.Get(100), bp.Get(4000), bp.Get(5000)
	bp.Put(a)
	bp.Put(b)
	bp.Put(c)
	if n, want := bp.Drain(), pooling.MinBufferSize+4096+8192; n != want {
		t.Fatalf("Drain = %d bytes, want %d", n, want)
	}
	for _, cl := range bp.Stats().Classes {
		if cl.Idle != 0 {
			t.Errorf("class %d keeps %d after Drain", cl.Size, cl.Idle)
		}
	}
	if bp.Drain() != 0 {
		t.Error("a second Drain found buffers")
	}
}
