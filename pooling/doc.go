// Package pooling holds the memory recycling the hot path relies on to reach
// zero allocations per notification in steady state: bounded typed object
// pools for decoded notification objects, size-class byte buffers for chunks
// and encoded messages, and reference-counted shared buffers for fanning one
// message out to several sinks.
//
// # What lives here
//
//   - Pool[T, P]: a bounded, lock-free pool of *T for types that embed
//     Header, modelled on the .NET stack's per-type pools: a fast slot and an
//     array of slots taken and filled with compare-and-swap. An empty pool
//     allocates, a full pool drops, nothing ever blocks.
//   - BufferPool and the default Buffers: power-of-two size classes from
//     MinBufferSize (512 B) to MaxBufferSize (16 MiB, configurable), each a
//     bounded Pool of *Buffer, with a per-class byte budget so that large
//     classes keep few buffers. ClassSize maps a requested or negotiated size
//     to its class (65,535 and 65,536 both to 65,536).
//   - Shared: a pooled buffer with a reference count, returned to its pools
//     by the last Release.
//   - PoolStats, BufferPoolStats: counters for metrics. A steady stream of
//     misses or drops says a capacity does not fit the load.
//   - Register, RegisterBuffers: the pools a package keeps for the life of
//     the process, by name, so that Registered and RegisteredBuffers give
//     the metrics every one of them.
//
// Unlike sync.Pool, these pools are not emptied by the GC: what they retain
// is bounded by their capacities and budgets rather than by the last GC cycle,
// and every hit, miss, drop and misuse is counted.
//
// # Ownership
//
// A pooled object has exactly one owner at a time.
//
//   - Get hands ownership to the caller. Nobody else holds a reference.
//   - Put (PutClear, Release) hands it back. From that moment the caller must
//     not read or write the object, its slices or anything sliced from them,
//     and must not keep references to them: the next Get may give them to
//     another goroutine. Release with defer right after Get.
//   - Whoever passes a pooled object on documents whether ownership moves
//     with it. A subscription handler, for instance, borrows its batch only
//     until it returns and copies what it keeps.
//   - A second Put of an object still in the pool, and a Release beyond the
//     last reference, are ignored and counted, so a defer plus an early
//     release on the same path does no harm. Use after the pool has handed the
//     object to someone else cannot be detected; it is a bug like any other
//     use after free, which the race detector tends to catch in tests.
//   - Reset functions zero every field before an object goes back, so pooled
//     objects never keep other objects alive and never leak data between
//     owners. Byte buffers are the exception, for speed: their bytes are left
//     as they were unless they are returned with PutClear, which every buffer
//     that held keys, passwords or decrypted data must use.
//   - Forgetting to Put is not a leak, only a miss: the GC collects the
//     object and the pool allocates a new one next time.
package pooling
