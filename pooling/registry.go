package pooling

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// The pools a process keeps for its whole life are registered by name
// (usually in an init function of the package that owns them), so that the
// metrics and the status report every one of them without knowing each:
// a pool nobody registered is a pool nobody sees.

// StatsReader is what Register needs of a pool: a *Pool[T, P] is one.
type StatsReader interface {
	Stats() PoolStats
}

// NamedPoolStats are a registered object pool's counters.
type NamedPoolStats struct {
	Name string `json:"name"`
	PoolStats
}

// NamedBufferPoolStats are a registered buffer pool's counters.
type NamedBufferPoolStats struct {
	Name string `json:"name"`
	BufferPoolStats
}

var registry struct {
	mu      sync.Mutex
	pools   map[string]StatsReader
	buffers map[string]*BufferPool
}

// Register names an object pool for Registered. Names are unique across
// object and buffer pools ("<package>.<Type>" by convention); registering a
// name twice is a programming error and panics, as expvar.Publish does.
func Register(name string, p StatsReader) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	checkName(name)
	if registry.pools == nil {
		registry.pools = map[string]StatsReader{}
	}
	registry.pools[name] = p
}

// RegisterBuffers names a buffer pool for RegisteredBuffers; see Register.
func RegisterBuffers(name string, bp *BufferPool) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	checkName(name)
	if registry.buffers == nil {
		registry.buffers = map[string]*BufferPool{}
	}
	registry.buffers[name] = bp
}

func checkName(name string) {
	_, p := registry.pools[name]
	_, b := registry.buffers[name]
	if name == "" || p || b {
		panic(fmt.Sprintf("pooling: pool name %q is empty or registered twice", name))
	}
}

// Registered returns a snapshot of every registered object pool, by name.
// It allocates and is meant for metrics, not for the hot path.
func Registered() []NamedPoolStats {
	return snapshot(registry.pools, func(name string, p StatsReader) NamedPoolStats {
		return NamedPoolStats{Name: name, PoolStats: p.Stats()}
	})
}

// RegisteredBuffers returns a snapshot of every registered buffer pool, by
// name.
func RegisteredBuffers() []NamedBufferPoolStats {
	return snapshot(registry.buffers, func(name string, bp *BufferPool) NamedBufferPoolStats {
		return NamedBufferPoolStats{Name: name, BufferPoolStats: bp.Stats()}
	})
}

// snapshot reads every pool of m in the order of their names.
func snapshot[P, S any](m map[string]P, read func(string, P) S) []S {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	names := slices.Sorted(maps.Keys(m))
	out := make([]S, len(names))
	for i, name := range names {
		out[i] = read(name, m[name])
	}
	return out
}

func init() { RegisterBuffers("buffers", Buffers) }
