package pooling_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/uagate/gateway/pooling"
)

func TestRegistry(t *testing.T) {
	p := pooling.NewPool[item](4, resetItem)
	pooling.Register("test.item", p)
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{MaxSize: 4096})
	pooling.RegisterBuffers("test.buffers", bp)
	p.Put(p.Get())
	p.Get()
	bp.Put(bp.Get(1000))

	var got *pooling.NamedPoolStats
	pools := pooling.Registered()
	for i := range pools {
		if pools[i].Name == "test.item" {
			got = &pools[i]
		}
	}
	if got == nil || got.Hits != 1 || got.Misses != 1 || got.Puts != 1 || got.Capacity != 4 {
		t.Fatalf("registered pool: %+v in %+v", got, pools)
	}
	if !slices.IsSortedFunc(pools, func(a, b pooling.NamedPoolStats) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("not sorted by name: %+v", pools)
	}
	var names []string
	var puts uint64
	for _, b := range pooling.RegisteredBuffers() {
		names = append(names, b.Name)
		if b.Name == "test.buffers" {
			for _, c := range b.Classes {
				puts += c.Puts
			}
		}
	}
	// The process-wide pool registers itself.
	if !slices.Contains(names, "buffers") || !slices.Contains(names, "test.buffers") || puts != 1 {
		t.Fatalf("registered buffer pools %v, puts %d", names, puts)
	}

	for _, name := range []string{"test.item", "test.buffers", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("registering %q again did not panic", name)
				}
			}()
			pooling.Register(name, p)
		}()
	}
}
