package sparkplug

import (
	"sync"
	"sync/atomic"

	"github.com/uagate/gateway/pooling"
)

// Store holds the data messages of a node that is not online (the primary
// host offline, the broker away, the births not sent yet) until the next
// birth, which sends them as historical metrics in their order. MemStore
// holds them in memory; LogStore in the store-and-forward log, where they
// outlive the process.
//
// The node calls Put and Drain with its session lock held, one at a time.
type Store interface {
	// Put keeps a copy of r (its payload is valid during the call only).
	// To make room it drops the oldest records (counted); it reports
	// false when it dropped r itself (larger than the whole store, or a
	// store that is closed).
	Put(r Record) bool
	// Drain calls f with the records, oldest first, forgetting each once f
	// returned true; when f returns false that record and the ones after it
	// stay. The record's payload is valid during the call only. f must not
	// call the store.
	Drain(f func(r Record) bool)
	// Stats counts what the store holds and dropped; it never waits for a
	// Put or a Drain.
	Stats() StoreStats
	// Durable reports whether the records outlive the process. The node
	// then puts them named (Record.Named), since the aliases and metric
	// versions of one process mean nothing to the next.
	Durable() bool
}

// Record is a data message a store holds: the body of a DDATA (without
// its seq room) for a device, in one of two forms.
type Record struct {
	// Device is the device's id.
	Device string
	// Named: the metrics carry their names and datatypes and no alias, a
	// form any later process can give its own aliases to (a durable
	// store's). Otherwise they carry the aliases of the device and metric
	// version Token says, valid in the node's process only.
	Named   bool
	Token   uint64
	Created int64 // UnixNano of the encoding
	Payload []byte
}

// StoreStats are a Store's counters.
type StoreStats struct {
	Messages int    `json:"messages"` // records held
	Bytes    int    `json:"bytes"`    // their bytes
	Dropped  uint64 `json:"dropped"`  // records dropped to make room, or too large
	// Stream is the store-and-forward log's stream that holds the records
	// (LogStore); "" when they are held in memory.
	Stream string `json:"stream,omitempty"`
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
	device  string
	named   bool
	tok     uint64
	created int64
	buf     *pooling.Buffer
}

// NewMemStore returns a store of at most maxBytes (counted as the records'
// pooled buffers, at least their payloads).
func NewMemStore(maxBytes int) *MemStore { return &MemStore{max: maxBytes} }

// Put implements Store.
func (s *MemStore) Put(r Record) bool {
	payload := r.Payload
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
	s.recs[(s.head+s.n)%len(s.recs)] = record{device: r.Device, named: r.Named, tok: r.Token, created: r.Created, buf: b}
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
func (s *MemStore) Drain(f func(r Record) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.n > 0 {
		r := &s.recs[s.head]
		if !f(Record{Device: r.device, Named: r.named, Token: r.tok, Created: r.created, Payload: r.buf.B}) {
			return
		}
		s.popLocked()
	}
}

// Stats implements Store.
func (s *MemStore) Stats() StoreStats {
	return StoreStats{Messages: int(s.held.Load()), Bytes: int(s.payload.Load()), Dropped: s.dropped.Load()}
}

// Durable implements Store: a MemStore's records end with the process.
func (s *MemStore) Durable() bool { return false }
