package sparkplug

import (
	"sync"
	"sync/atomic"

	"github.com/uagate/gateway/pooling"
)

// Store holds the data messages of a node that is not online (the primary
// host offline, the broker away, the births not sent yet) until the next
// birth, which sends them as historical metrics in their order. A durable
// store-and-forward log can take MemStore's place behind this interface.
//
// The node calls Put and Drain with its session lock held, one at a time.
type Store interface {
	// Put keeps a copy of payload, a data message's body (without its seq
	// room) for the device and metric version tok, made at created
	// (UnixNano). To make room it drops the oldest records (counted); a
	// payload larger than the whole store is dropped itself (false).
	Put(tok uint64, created int64, payload []byte) bool
	// Drain calls f with the records, oldest first, forgetting each once f
	// returned true; when f returns false that record and the ones after it
	// stay. The payload is valid during the call only. f must not call the
	// store.
	Drain(f func(tok uint64, created int64, payload []byte) bool)
	// Stats counts what the store holds and dropped; it never waits for a
	// Put or a Drain.
	Stats() StoreStats
}

// StoreStats are a Store's counters.
type StoreStats struct {
	Messages int    `json:"messages"` // records held
	Bytes    int    `json:"bytes"`    // their payload bytes
	Dropped  uint64 `json:"dropped"`  // records dropped to make room, or too large
}

// storeBuffers hold the records of the nodes' MemStores: a record is
// copied into a buffer of its size class, given back when it leaves.
var storeBuffers = pooling.NewBufferPool(pooling.BufferPoolConfig{ClassBytes: 16 << 20})

func init() { pooling.RegisterBuffers("sparkplug.store", storeBuffers) }

// MemStore is a Store in memory, bounded by the bytes of its records'
// buffers. Records live in pooled buffers, so a node that keeps storing and
// dropping allocates nothing once its store is full.
type MemStore struct {
	max int

	mu      sync.Mutex
	recs    []record // ring: head, n
	head, n int
	bytes   int // sum of the records' buffer sizes

	// What Stats reads, written under mu.
	held, payload atomic.Int64
	dropped       atomic.Uint64
}

type record struct {
	tok     uint64
	created int64
	buf     *pooling.Buffer
}

// NewMemStore returns a store of at most maxBytes (counted as the records'
// pooled buffers, at least their payloads).
func NewMemStore(maxBytes int) *MemStore { return &MemStore{max: maxBytes} }

// Put implements Store.
func (s *MemStore) Put(tok uint64, created int64, payload []byte) bool {
	size := storeBuffers.ClassSize(max(len(payload), pooling.MinBufferSize))
	if size <= 0 {
		size = len(payload)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if size > s.max {
		s.dropped.Add(1)
		return false
	}
	for s.n > 0 && s.bytes+size > s.max {
		s.popLocked()
		s.dropped.Add(1)
	}
	if s.n == len(s.recs) {
		s.growLocked()
	}
	b := storeBuffers.Get(max(len(payload), pooling.MinBufferSize))
	b.B = append(b.B[:0], payload...)
	s.recs[(s.head+s.n)%len(s.recs)] = record{tok: tok, created: created, buf: b}
	s.n++
	s.bytes += cap(b.B)
	s.held.Add(1)
	s.payload.Add(int64(len(payload)))
	return true
}

// growLocked doubles the ring, keeping the order.
func (s *MemStore) growLocked() {
	recs := make([]record, max(16, 2*len(s.recs)))
	for i := range s.n {
		recs[i] = s.recs[(s.head+i)%len(s.recs)]
	}
	s.recs, s.head = recs, 0
}

// popLocked forgets the oldest record.
func (s *MemStore) popLocked() {
	r := &s.recs[s.head]
	s.bytes -= cap(r.buf.B)
	s.held.Add(-1)
	s.payload.Add(-int64(len(r.buf.B)))
	storeBuffers.Put(r.buf)
	*r = record{}
	s.head = (s.head + 1) % len(s.recs)
	s.n--
}

// Drain implements Store.
func (s *MemStore) Drain(f func(tok uint64, created int64, payload []byte) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.n > 0 {
		r := s.recs[s.head]
		if !f(r.tok, r.created, r.buf.B) {
			return
		}
		s.popLocked()
	}
}

// Stats implements Store.
func (s *MemStore) Stats() StoreStats {
	return StoreStats{Messages: int(s.held.Load()), Bytes: int(s.payload.Load()), Dropped: s.dropped.Load()}
}
