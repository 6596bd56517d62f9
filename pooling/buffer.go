package pooling

import (
	"math/bits"
	"sync/atomic"
)

const (
	// MinBufferSize is the smallest size class. Smaller requests share it:
	// a class per few bytes would cost more in idle buffers than it saves.
	MinBufferSize = 512
	// MaxBufferSize is the largest size class of the default configuration,
	// the largest message size a gateway is expected to negotiate.
	MaxBufferSize = 16 << 20
	// DefaultClassBytes is how many idle bytes one class keeps by default.
	// It bounds what the large classes retain: 128 buffers of 64 KiB, one of
	// 16 MiB.
	DefaultClassBytes = 8 << 20

	minClassShift = 9 // log2(MinBufferSize)
	maxClassLimit = 1 << 30
)

// ClassSize returns the size of the default class that holds n bytes: the
// smallest power of two >= n, at least MinBufferSize. It returns 0 when n is
// negative or larger than MaxBufferSize, sizes no class holds.
func ClassSize(n int) int {
	return classSize(n, MaxBufferSize)
}

func classSize(n, maxSize int) int {
	if n < 0 || n > maxSize {
		return 0
	}
	if n <= MinBufferSize {
		return MinBufferSize
	}
	return 1 << bits.Len(uint(n-1))
}

// classIndex returns the class of a buffer with capacity c, or -1 when c is
// not exactly a class size, which is how buffers that were grown, resliced
// from the front or made elsewhere are kept out of the pool.
func classIndex(c, maxSize int) int {
	if c < MinBufferSize || c > maxSize || c&(c-1) != 0 {
		return -1
	}
	return bits.Len(uint(c)) - 1 - minClassShift
}

// Buffer is a pooled byte slice. The pool hands out and takes back *Buffer
// rather than []byte so that a Put does not allocate a slice header on the
// heap.
type Buffer struct {
	Header
	B []byte
}

func clearBuffer(b *Buffer) { clear(b.B[:cap(b.B)]) }

// BufferPoolConfig sizes a BufferPool. Zero fields take their defaults.
type BufferPoolConfig struct {
	// MaxSize is the largest class. It is rounded up to a power of two and
	// clamped to [MinBufferSize, 1 GiB]; 0 means MaxBufferSize.
	MaxSize int
	// ClassBytes bounds the idle bytes each class keeps; 0 means
	// DefaultClassBytes. Every class keeps at least one buffer.
	ClassBytes int
	// MaxPerClass bounds the idle buffers each class keeps; 0 means
	// DefaultCapacity.
	MaxPerClass int
}

// BufferStats is a snapshot of one size class.
type BufferStats struct {
	Size int `json:"size"` // class size, the capacity of its buffers
	PoolStats
}

// BufferPoolStats is a snapshot of a BufferPool's counters.
type BufferPoolStats struct {
	Classes      []BufferStats `json:"classes"`      // smallest class first
	Oversize     uint64        `json:"oversize"`     // Gets larger than the largest class, allocated and never pooled
	Foreign      uint64        `json:"foreign"`      // Puts of buffers whose capacity is not a class size, dropped
	Shared       PoolStats     `json:"shared"`       // the pool of Shared objects
	OverReleases uint64        `json:"overReleases"` // Shared.Release calls with no reference left, ignored
	DeadRetains  uint64        `json:"deadRetains"`  // Shared.Retain calls with no reference left, ignored
}

// BufferPool keeps byte buffers in power-of-two size classes from
// MinBufferSize to a configured maximum, each class a bounded Pool, so that
// reusing a buffer wastes at most half of it and the idle memory stays
// bounded by the configuration.
type BufferPool struct {
	maxSize int
	classes []*Pool[Buffer, *Buffer]
	shared  *Pool[Shared, *Shared]

	oversize     atomic.Uint64
	foreign      atomic.Uint64
	overReleases atomic.Uint64
	deadRetains  atomic.Uint64
}

// Buffers is the process-wide pool with the default configuration, for code
// that has no reason to size its own.
var Buffers = NewBufferPool(BufferPoolConfig{})

// NewBufferPool returns an empty pool sized by cfg.
func NewBufferPool(cfg BufferPoolConfig) *BufferPool {
	maxSize := cfg.MaxSize
	switch {
	case maxSize <= 0:
		maxSize = MaxBufferSize
	case maxSize > maxClassLimit:
		maxSize = maxClassLimit
	}
	maxSize = classSize(maxSize, maxClassLimit)
	classBytes := cfg.ClassBytes
	if classBytes <= 0 {
		classBytes = DefaultClassBytes
	}
	perClass := cfg.MaxPerClass
	if perClass <= 0 {
		perClass = DefaultCapacity
	}

	bp := &BufferPool{
		maxSize: maxSize,
		shared:  NewPool[Shared](DefaultCapacity, nil),
	}
	for size := MinBufferSize; size <= maxSize; size <<= 1 {
		n := max(1, min(perClass, classBytes/size))
		bp.classes = append(bp.classes, NewPool[Buffer](n, nil))
	}
	return bp
}

// MaxSize returns the largest class size; larger Gets are not pooled.
func (bp *BufferPool) MaxSize() int { return bp.maxSize }

// ClassSize returns the size of the class of this pool that holds n bytes,
// or 0 when n is negative or larger than MaxSize.
func (bp *BufferPool) ClassSize(n int) int { return classSize(n, bp.maxSize) }

// Get hands the caller a buffer with len(B) == n and cap(B) == ClassSize(n),
// now theirs alone until they Put it. The contents are whatever the previous
// owner left unless it used PutClear; a new buffer is zeroed. Sizes above
// MaxSize are allocated exactly and dropped again on Put, so limits belong to
// the caller, checked before Get. Get panics if n is negative, as make does.
func (bp *BufferPool) Get(n int) *Buffer {
	if n < 0 {
		panic("pooling: negative buffer size")
	}
	size := classSize(n, bp.maxSize)
	if size == 0 {
		bp.oversize.Add(1)
		return &Buffer{B: make([]byte, n)}
	}
	b := bp.classes[classIndex(size, bp.maxSize)].Get()
	if cap(b.B) != size {
		b.B = make([]byte, size)
	}
	b.B = b.B[:n]
	return b
}

// Put gives b back. From the moment Put is called the pool owns b and its
// array: the caller must not use b, b.B or any slice of it again. The bytes
// are kept as they are; use PutClear for buffers that held secrets. A buffer
// whose capacity is not exactly a class size (grown by append, resliced from
// the front, made elsewhere) is dropped. Putting a buffer that is already back
// is a counted no-op; Put(nil) does nothing. Put never blocks.
func (bp *BufferPool) Put(b *Buffer) { bp.put(b, false) }

// PutClear is Put for buffers that held key material, passwords or decrypted
// payloads: it zeroes the whole capacity first, also when the buffer is then
// dropped, so the secret outlives its use neither in the pool nor in garbage.
func (bp *BufferPool) PutClear(b *Buffer) { bp.put(b, true) }

func (bp *BufferPool) put(b *Buffer, scrub bool) {
	if b == nil {
		return
	}
	c := classIndex(cap(b.B), bp.maxSize)
	if c < 0 {
		if !b.release() {
			return // already put; counting it as foreign again would mislead
		}
		if scrub {
			clearBuffer(b)
		}
		bp.foreign.Add(1)
		return
	}
	if scrub {
		bp.classes[c].put(b, clearBuffer)
	} else {
		bp.classes[c].put(b, nil)
	}
}

// Drain empties every class and returns the bytes of the buffers it let go
// (see Pool.Drain).
func (bp *BufferPool) Drain() int {
	n := 0
	for i, p := range bp.classes {
		n += p.Drain() * (MinBufferSize << i)
	}
	return n
}

// Trim lets go of the idle buffers of every class that no Get needed since
// the previous Trim (see Pool.Trim) and returns their bytes.
func (bp *BufferPool) Trim() int {
	n := 0
	for i, p := range bp.classes {
		n += p.Trim() * (MinBufferSize << i)
	}
	return n
}

// Stats returns a snapshot of the counters of every class. It allocates and
// is meant for metrics, not for the hot path.
func (bp *BufferPool) Stats() BufferPoolStats {
	s := BufferPoolStats{
		Classes:      make([]BufferStats, len(bp.classes)),
		Oversize:     bp.oversize.Load(),
		Foreign:      bp.foreign.Load(),
		Shared:       bp.shared.Stats(),
		OverReleases: bp.overReleases.Load(),
		DeadRetains:  bp.deadRetains.Load(),
	}
	for i, p := range bp.classes {
		s.Classes[i] = BufferStats{Size: MinBufferSize << i, PoolStats: p.Stats()}
	}
	return s
}
