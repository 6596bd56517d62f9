package pooling

import "sync/atomic"

// DefaultCapacity is the number of idle objects a Pool keeps when NewPool is
// given no capacity: the bound the .NET stack uses per notification type,
// enough to cover a PublishResponse burst without retaining much memory.
const DefaultCapacity = 1024

// States of Header.state. The zero value means "in use" so that an object
// made with new(T) or a composite literal, outside any pool, can still be
// handed to Put.
const (
	stateInUse    uint32 = 0
	stateReturned uint32 = 1
)

// cacheLinePad keeps the hot words of one pool off the cache lines of its
// neighbours (the class pools of a BufferPool are allocated side by side).
type cacheLinePad struct{ _ [64]byte }

// Header is embedded in every pooled type. It records whether the object is
// out with an owner or back in a pool, which is what makes a second Put of
// the same object a harmless no-op. The pool manages it; types embedding it
// must not touch it, but a reset function may zero it along with the rest of
// the struct.
type Header struct {
	// A plain word used through sync/atomic functions rather than atomic.Uint32:
	// pooled values such as MonitoredItemNotification live by value in slices and
	// are copied, which atomic's noCopy marker would make go vet reject.
	state uint32
}

// PoolHeader returns h. Embedding Header gives a pointer to the embedding
// struct this method, so the pointer satisfies Pooled.
func (h *Header) PoolHeader() *Header { return h }

// release marks the object as returned. It fails when the object was already
// returned, which is how double Puts are caught.
func (h *Header) release() bool {
	return atomic.CompareAndSwapUint32(&h.state, stateInUse, stateReturned)
}

// Pooled is implemented by pointers to structs that embed Header.
type Pooled interface {
	PoolHeader() *Header
}

// PoolStats is a snapshot of a pool's counters. Counters are read one at a
// time while the pool is in use, so a snapshot may be off by the operations
// in flight; at rest Hits == Puts - Idle - Drained.
type PoolStats struct {
	Capacity   int    `json:"capacity"`   // most idle objects the pool keeps
	Idle       int    `json:"idle"`       // objects waiting in the pool now
	Hits       uint64 `json:"hits"`       // Gets served from the pool
	Misses     uint64 `json:"misses"`     // Gets that had to allocate
	Puts       uint64 `json:"puts"`       // objects taken back and kept
	Drops      uint64 `json:"drops"`      // objects given back while the pool was full, left to the GC
	DoublePuts uint64 `json:"doublePuts"` // Puts of an object that was already returned, ignored
	Drained    uint64 `json:"drained"`    // idle objects Drain let go
	Trimmed    uint64 `json:"trimmed"`    // idle objects Trim let go
}

// Pool is a bounded, lock-free pool of *T. Unlike sync.Pool it never empties
// on GC and never grows past its capacity, so the memory it retains is known
// and its counters say whether the capacity fits the load.
//
// The design follows the .NET stack's object pool: one fast slot plus an
// array of slots, each taken and filled with compare-and-swap. An idle count
// serves as a hint of where the occupied slots end, so that Get and Put touch
// one or two slots in the common case instead of scanning the array. Neither
// Get nor Put ever blocks or waits for another goroutine.
//
// Create pools with NewPool. A Pool must not be copied after first use.
type Pool[T any, P interface {
	*T
	Pooled
}] struct {
	_     cacheLinePad
	fast  atomic.Pointer[T]
	idle  atomic.Int64 // objects in slots, not counting fast
	slots []atomic.Pointer[T]
	reset func(P)

	hits       atomic.Uint64
	misses     atomic.Uint64
	puts       atomic.Uint64
	drops      atomic.Uint64
	doublePuts atomic.Uint64
	drained    atomic.Uint64
	trimmed    atomic.Uint64
	// lowWater is the fewest objects left idle in the slots after a Get since
	// the last Trim (0 after a miss): that many sat unused the whole time.
	lowWater atomic.Int64
	_        cacheLinePad
}

// NewPool returns a pool that keeps at most capacity idle objects; capacity
// <= 0 means DefaultCapacity. P is inferred, so NewPool[Msg](0, resetMsg)
// builds a pool of *Msg.
//
// reset, when not nil, runs on every accepted Put before the object can be
// seen by another goroutine, also when the pool turns out to be full, so it
// is the place to scrub secrets as well as to drop references the object
// would otherwise keep alive. It must leave the object as a fresh one would
// look: zero every field, though it may keep the capacity of slices (reslice
// to [:0]). Writing *p = T{} is fine, the pool restores its Header afterwards.
func NewPool[T any, P interface {
	*T
	Pooled
}](capacity int, reset func(P)) *Pool[T, P] {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	return &Pool[T, P]{
		slots: make([]atomic.Pointer[T], capacity-1), // the fast slot holds the last one
		reset: reset,
	}
}

// Get hands the caller an object that is now theirs alone: taken from the
// pool when one is idle, otherwise freshly allocated. A pooled object was
// reset on Put, so it looks like a new one apart from retained slice capacity.
// The caller owns it until it calls Put, and should call Put when done (a
// forgotten object is simply collected by the GC).
func (p *Pool[T, P]) Get() P {
	if x := p.fast.Load(); x != nil && p.fast.CompareAndSwap(x, nil) {
		p.lower(p.idle.Load())
		return p.hand(x)
	}
	if x := p.takeSlot(); x != nil {
		p.lower(p.idle.Load())
		return p.hand(x)
	}
	p.misses.Add(1)
	p.lower(0)
	return P(new(T))
}

// lower records that only idle objects were left after a Get.
func (p *Pool[T, P]) lower(idle int64) {
	for {
		lw := p.lowWater.Load()
		if idle >= lw || p.lowWater.CompareAndSwap(lw, idle) {
			return
		}
	}
}

func (p *Pool[T, P]) hand(x *T) P {
	// The slot CAS made us the only holder, so a store rather than a CAS
	// suffices.
	atomic.StoreUint32(&P(x).PoolHeader().state, stateInUse)
	p.hits.Add(1)
	return P(x)
}

// takeSlot empties one occupied slot. It looks first where the idle count
// says the last occupied slot is, so that the common case is one probe, then
// down to the bottom. Only when that finds nothing does it look above: a Put
// preempted between reading the count and filling a slot can leave an object
// well above the others, and it must not stay there unreachable.
func (p *Pool[T, P]) takeSlot() *T {
	n := int(p.idle.Load())
	if n <= 0 {
		return nil
	}
	n = min(n, len(p.slots))
	for i := n - 1; i >= 0; i-- {
		if x := p.take(i); x != nil {
			return x
		}
	}
	for i := n; i < len(p.slots); i++ {
		if x := p.take(i); x != nil {
			return x
		}
	}
	return nil
}

func (p *Pool[T, P]) take(i int) *T {
	s := &p.slots[i]
	if x := s.Load(); x != nil && s.CompareAndSwap(x, nil) {
		p.idle.Add(-1)
		return x
	}
	return nil
}

// Put gives x back. From the moment Put is called the pool owns x: the caller
// must not read or write it again, nor keep references to it or into its
// slices, because the next Get may hand it to another goroutine. Put resets x,
// keeps it if there is room, and otherwise drops it for the GC. Putting an
// object that is already back in the pool is a counted no-op, so a defer plus
// an explicit Put on the same path does no harm; putting an object after the
// pool handed it to someone else cannot be detected and is a bug. Put(nil)
// does nothing. Put never blocks.
func (p *Pool[T, P]) Put(x P) {
	p.put(x, p.reset)
}

// put is Put with a reset chosen by the caller; BufferPool uses it to clear
// buffers that may hold secrets only when asked to.
func (p *Pool[T, P]) put(x P, reset func(P)) {
	if x == nil {
		return
	}
	h := x.PoolHeader()
	if !h.release() {
		p.doublePuts.Add(1)
		return
	}
	if reset != nil {
		reset(x)
		// reset may have zeroed the Header with the rest of the struct. The
		// load avoids a second locked instruction when it did not.
		if atomic.LoadUint32(&h.state) != stateReturned {
			atomic.StoreUint32(&h.state, stateReturned)
		}
	}
	ptr := (*T)(x)
	if p.fast.Load() == nil && p.fast.CompareAndSwap(nil, ptr) {
		p.puts.Add(1)
		return
	}
	if p.storeSlot(ptr) {
		p.puts.Add(1)
		return
	}
	p.drops.Add(1)
}

// storeSlot fills one empty slot, starting where the idle count says the
// first empty one is and wrapping around once, because racing Gets can leave
// holes below that point.
func (p *Pool[T, P]) storeSlot(x *T) bool {
	n := int(p.idle.Load())
	if n >= len(p.slots) {
		return false
	}
	n = max(n, 0)
	for i := n; i < len(p.slots); i++ {
		if p.fill(i, x) {
			return true
		}
	}
	for i := 0; i < n; i++ {
		if p.fill(i, x) {
			return true
		}
	}
	return false
}

func (p *Pool[T, P]) fill(i int, x *T) bool {
	// Loading first keeps a scan past occupied slots from taking their cache
	// lines exclusively, as a failing CAS would.
	s := &p.slots[i]
	if s.Load() == nil && s.CompareAndSwap(nil, x) {
		p.idle.Add(1)
		return true
	}
	return false
}

// Drain empties the pool and returns how many idle objects it let go (to
// the GC). It is for giving back memory a burst left idle (a process that
// just finished a large setup), not for the steady path; Gets and Puts may
// run meanwhile.
func (p *Pool[T, P]) Drain() int {
	n := 0
	if x := p.fast.Load(); x != nil && p.fast.CompareAndSwap(x, nil) {
		n++
	}
	for i := range p.slots {
		if p.take(i) != nil {
			n++
		}
	}
	p.drained.Add(uint64(n))
	p.lowWater.Store(0)
	return n
}

// Trim lets go of the idle objects that no Get needed since the previous
// Trim (the fewest left idle after any Get in between, every idle one when
// nothing was taken) and returns how many. Called periodically, it lets a
// pool that a burst filled (a setup, a broker outage's backlog, a key frame
// storm that does not recur) shrink back to what the steady state takes,
// while a pool that serves a recurring peak keeps what the peak needs: the
// low-water mark of one period is what stayed unused through it. The one
// object of the fast slot is always kept. Gets and Puts may run meanwhile.
func (p *Pool[T, P]) Trim() int {
	n := int(min(p.lowWater.Load(), int64(len(p.slots))))
	dropped := 0
	for ; dropped < n; dropped++ {
		if p.takeSlot() == nil {
			break
		}
	}
	p.lowWater.Store(max(p.idle.Load(), 0))
	p.trimmed.Add(uint64(dropped))
	return dropped
}

// Stats returns a snapshot of the pool's counters.
func (p *Pool[T, P]) Stats() PoolStats {
	// The count trails the slots by a moment, so it can dip below zero
	// while a Get empties a slot that a Put has not yet counted.
	idle := min(max(int(p.idle.Load()), 0), len(p.slots))
	if p.fast.Load() != nil {
		idle++
	}
	return PoolStats{
		Capacity:   len(p.slots) + 1,
		Idle:       idle,
		Hits:       p.hits.Load(),
		Misses:     p.misses.Load(),
		Puts:       p.puts.Load(),
		Drops:      p.drops.Load(),
		DoublePuts: p.doublePuts.Load(),
		Drained:    p.drained.Load(),
		Trimmed:    p.trimmed.Load(),
	}
}
