package pooling_test

import (
	"sync"
	"testing"

	"github.com/uagate/gateway/pooling"
)

func TestSharedRefcount(t *testing.T) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{})
	s := bp.GetShared(1000)
	if s.Len() != 1000 || cap(s.Bytes()) != 1024 {
		t.Fatalf("GetShared(1000): len %d cap %d", s.Len(), cap(s.Bytes()))
	}
	arr := &s.Bytes()[0]
	s.Retain()
	s.Retain()

	for i := range 2 {
		s.Release()
		if s.Len() != 1000 {
			t.Fatalf("buffer gone after %d of 3 releases", i+1)
		}
		if c := bp.Stats().Classes[1]; c.Idle != 0 {
			t.Fatalf("buffer back in the pool after %d of 3 releases", i+1)
		}
	}
	s.Release()

	st := bp.Stats()
	if c := st.Classes[1]; c.Idle != 1 || c.Puts != 1 {
		t.Fatalf("last Release did not return the buffer: %+v", c.PoolStats)
	}
	if st.Shared.Idle != 1 || st.Shared.Puts != 1 {
		t.Fatalf("last Release did not return the Shared: %+v", st.Shared)
	}
	if s.Bytes() != nil {
		t.Fatalf("released Shared still exposes its bytes")
	}

	// Both come back on the next GetShared.
	s2 := bp.GetShared(1024)
	if s2 != s || &s2.Bytes()[0] != arr {
		t.Fatal("GetShared did not reuse the released Shared and buffer")
	}
	s2.Release()
}

func TestSharedOverRelease(t *testing.T) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{})
	s := bp.GetShared(10)
	s.Release()
	s.Release() // one too many
	s.Release() // two too many
	s.Retain()  // resurrecting a released Shared

	st := bp.Stats()
	if st.OverReleases != 2 || st.DeadRetains != 1 {
		t.Fatalf("over-releases %d, dead retains %d, want 2 and 1", st.OverReleases, st.DeadRetains)
	}
	if c := st.Classes[0]; c.Puts != 1 || c.DoublePuts != 0 || c.Idle != 1 {
		t.Fatalf("buffer class after over-release: %+v", c.PoolStats)
	}
	if st.Shared.Puts != 1 || st.Shared.DoublePuts != 0 || st.Shared.Idle != 1 {
		t.Fatalf("shared pool after over-release: %+v", st.Shared)
	}

	// The pool is intact: two Gets give two distinct Shareds and buffers.
	a, b := bp.GetShared(10), bp.GetShared(10)
	if a == b || &a.Bytes()[0] == &b.Bytes()[0] {
		t.Fatal("over-release let a Shared or buffer out twice")
	}
	a.Release()
	b.Release()
}

func TestNewSharedTakesOwnership(t *testing.T) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{})
	b := bp.Get(3000)
	copy(b.B, "message")
	s := bp.NewShared(b)
	if string(s.Bytes()[:7]) != "message" {
		t.Fatal("NewShared does not expose the wrapped buffer")
	}
	s.Release()
	if c := bp.Stats().Classes[3]; c.Size != 4096 || c.Idle != 1 {
		t.Fatalf("wrapped buffer not returned on the last Release: %+v", c)
	}
}

// TestSharedFanOut releases one message from many goroutines, the way sinks
// do, and checks that exactly one of them returns the buffer.
func TestSharedFanOut(t *testing.T) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{})
	const sinks, messages = 8, 200
	for range messages {
		s := bp.GetShared(700)
		copy(s.Bytes(), "payload")
		for range sinks - 1 {
			s.Retain()
		}
		var wg sync.WaitGroup
		for range sinks {
			wg.Go(func() {
				if string(s.Bytes()[:7]) != "payload" {
					t.Error("sink saw a changed message")
				}
				s.Release()
			})
		}
		wg.Wait()
	}
	st := bp.Stats()
	if c := st.Classes[1]; c.Puts != messages || c.DoublePuts != 0 || c.Idle != 1 {
		t.Fatalf("buffer class after fan-out: %+v", c.PoolStats)
	}
	if st.Shared.Puts != messages || st.OverReleases != 0 || st.Shared.Idle != 1 {
		t.Fatalf("shared pool after fan-out: %+v, over-releases %d", st.Shared, st.OverReleases)
	}
}

func TestSharedZeroAllocs(t *testing.T) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{})
	bp.GetShared(4096).Release()
	allocs := testing.AllocsPerRun(1000, func() {
		s := bp.GetShared(4096)
		s.Retain()
		s.Retain()
		s.Release()
		s.Release()
		s.Release()
	})
	if allocs != 0 {
		t.Fatalf("GetShared+Retain+Release allocates %.1f times per run, want 0", allocs)
	}
}
