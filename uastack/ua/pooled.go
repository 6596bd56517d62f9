package ua

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/uagate/gateway/pooling"
)

// Ownership of decoded notifications.
//
// DataChangeNotification, MonitoredItemNotification, EventFieldList and
// EventNotificationList come from bounded pools (pooled_gen.go). When a
// PublishResponse (or RepublishResponse) is decoded, every DataChangeNotification and
// EventNotificationList in NotificationMessage.NotificationData is taken from its pool
// by the ExtensionObject decoder, or decoded into the one the same ExtensionObject
// already holds when the response object is reused.
//
// The response owns those objects. Whoever owns the response releases them all with
// PublishResponse.Release once done with them (typically in a defer after the
// handlers have returned); afterwards neither the notifications nor their slices
// may be used, and the response may be decoded again. Values copied out of them
// before (DataValues, Variants with their strings and arrays) stay valid: see
// Borrowed notifications in the package documentation. Do not Release a notification that is still held by the response's
// ExtensionObject: the next decode into the response would write into an object the
// pool may already have handed to someone else. To keep one notification beyond the
// response's Release, detach it first,
//
//	dcn := eo.Value.(*ua.DataChangeNotification)
//	eo.Value = nil // the response no longer owns dcn
//
// and Release it separately when done.

// Release gives back to their pools the notifications decoded into the message,
// clearing their ExtensionObjects. The NotificationData slice keeps its capacity
// (its spare capacity is always zero: see Grow).
// A NotificationData slice retaining more than MaxPooledBytes is dropped, so that a
// response object reused for every message does not keep the largest one's memory.
func (m *NotificationMessage) Release() {
	for i := range m.NotificationData {
		m.NotificationData[i].Release()
	}
	m.NotificationData = trimRetained(m.NotificationData[:0])
}

// Release gives the pooled notifications of r back (see NotificationMessage.Release)
// so that r can be decoded into again. The caller must not use them afterwards. Its
// other slices (Results, AvailableSequenceNumbers, DiagnosticInfos) keep their
// capacity for the next decode unless it exceeds MaxPooledBytes.
func (r *PublishResponse) Release() {
	r.NotificationMessage.Release()
	r.AvailableSequenceNumbers = trimRetained(r.AvailableSequenceNumbers)
	r.Results = trimRetained(r.Results)
	r.DiagnosticInfos = trimRetained(r.DiagnosticInfos)
}

// Release gives the pooled notifications of r back (see NotificationMessage.Release)
// so that r can be decoded into again. The caller must not use them afterwards.
func (r *RepublishResponse) Release() { r.NotificationMessage.Release() }

// trimRetained drops s when its backing array is larger than MaxPooledBytes.
func trimRetained[T any](s []T) []T {
	var zero T
	if cap(s)*int(unsafe.Sizeof(zero)) > MaxPooledBytes {
		return nil
	}
	return s
}

// MaxPooledBytes bounds the slice capacity a pooled notification keeps when it
// goes back to its pool (its slices' backing arrays, and those of its pooled
// elements, together). A notification that grew past it, decoded from one huge
// message, goes back without its slices, which the GC then takes: otherwise the
// pool would keep that memory for the life of the process. 1 MiB holds 13,000
// MonitoredItemNotifications, more than a PublishResponse of a well configured
// subscription carries.
const MaxPooledBytes = 1 << 20

// DefaultMaxIdlePooledBytes is MaxIdlePooledBytes unless SetMaxIdlePooledBytes
// changed it.
const DefaultMaxIdlePooledBytes = 64 << 20

// The capacity of idle pooled notifications.
//
// A pool keeps up to 1024 objects of each type, and with MaxPooledBytes each
// they could together keep a gigabyte that a burst of large messages (100
// subscriptions of 10,000 items: 880 KB per DataChangeNotification) left
// behind. Capacity is what makes a steady stream of messages decode without
// allocating, so it is kept, but within one byte budget for all pooled types
// together (MaxIdlePooledBytes), and apart from the objects: the pools hold
// bare objects, and the slices of those put back go to a stack per type
// (idleStack), from which New* gives the most recently used to the next
// object taken. So whatever capacity is idle goes to the next decode (a pool
// of objects with and without capacity would hand out the bare ones on top
// first, and every message would allocate while the capacity of a past
// burst lay idle underneath), and the budget is exact: the stack alone holds
// what it counts, whether or not the pool had room for the object.
//
// The budget is a ceiling, not the working size: a budget below what the
// process has decoded at once turns every recurring burst into allocations,
// so it is generous (64 MiB) and TrimIdlePooled, called periodically, lets go
// of what no decode took for a whole period. What stays idle is then the
// recurring peak, what a burst that does not recur left is given back.

// idlePooled is the byte budget of the idle stacks, all types together.
var idlePooled idleBudget

func init() { idlePooled.max.Store(DefaultMaxIdlePooledBytes) }

// idleBudget counts the bytes the idle stacks hold.
type idleBudget struct {
	bytes     atomic.Int64
	max       atomic.Int64
	refused   atomic.Uint64 // slices let go because the budget was full
	refusedBy atomic.Uint64 // their bytes
}

// reserve takes n bytes of the budget; false when they do not fit.
func (b *idleBudget) reserve(n int) bool {
	limit := b.max.Load()
	for {
		cur := b.bytes.Load()
		if cur+int64(n) > limit {
			b.refused.Add(1)
			b.refusedBy.Add(uint64(n))
			return false
		}
		if b.bytes.CompareAndSwap(cur, cur+int64(n)) {
			return true
		}
	}
}

func (b *idleBudget) free(n int) { b.bytes.Add(-int64(n)) }

// maxIdleEntries bounds an idle stack's entries, like a pool's objects.
const maxIdleEntries = 1024

// idleStack holds the slices of idle pooled objects of type T: each entry
// is a T with nothing but the slices a reset kept (its Header zero), and the
// bytes it counts against idlePooled (the slices' and its own).
type idleStack[T any, P interface {
	*T
	pooling.Pooled
}] struct {
	mu      sync.Mutex
	entries []idleEntry[T]
	// low is the fewest entries left after a get since the last trim: the
	// oldest low entries sat unused all that time (TrimIdlePooled).
	low  int
	once sync.Once
}

// idleStacks are the stacks that ever held an entry, for TrimIdlePooled.
var idleStacks struct {
	mu   sync.Mutex
	list []interface{ trim() int }
}

// trim lets go of the entries no get took since the last trim (the oldest,
// at the bottom) and returns their bytes.
func (st *idleStack[T, P]) trim() int {
	st.mu.Lock()
	n := min(st.low, len(st.entries))
	freed := 0
	for i := range n {
		freed += st.entries[i].n
	}
	k := copy(st.entries, st.entries[n:])
	clear(st.entries[k:]) // the spare capacity must not keep the slices
	st.entries = st.entries[:k]
	st.low = k
	st.mu.Unlock()
	idlePooled.free(freed)
	return freed
}

// TrimIdlePooled lets go of the idle capacity of pooled notifications that
// no decode took since the previous call (the low-water mark of each type's
// stack over the period) and returns its bytes. Called periodically, the
// idle capacity follows what the process decodes at once: a burst that
// recurs (every subscription's full message at the same second) keeps what
// it needs, one that does not (a setup, a backlog after an outage) is let
// go after one period.
func TrimIdlePooled() int {
	idleStacks.mu.Lock()
	list := idleStacks.list
	idleStacks.mu.Unlock()
	n := 0
	for _, st := range list {
		n += st.trim()
	}
	return n
}

type idleEntry[T any] struct {
	v T
	n int
}

// put moves the slices of s (reset already, retaining n bytes) onto the
// stack when the budget has room, and leaves s bare: zero, as the pool wants
// it (the pool sets its Header again after the reset).
func (st *idleStack[T, P]) put(s P, n int) {
	var zero T
	if n == 0 {
		*s = zero
		return
	}
	n += int(unsafe.Sizeof(idleEntry[T]{}))
	if !idlePooled.reserve(n) {
		*s = zero
		return
	}
	st.once.Do(func() {
		idleStacks.mu.Lock()
		idleStacks.list = append(idleStacks.list, st)
		idleStacks.mu.Unlock()
	})
	st.mu.Lock()
	if len(st.entries) == maxIdleEntries {
		st.mu.Unlock()
		idlePooled.free(n)
		*s = zero
		return
	}
	st.entries = append(st.entries, idleEntry[T]{v: *s, n: n})
	e := &st.entries[len(st.entries)-1]
	*P(&e.v).PoolHeader() = pooling.Header{}
	st.mu.Unlock()
	*s = zero
}

// get gives s, just taken from the pool (bare), the slices of the most
// recently put entry, if there is one.
func (st *idleStack[T, P]) get(s P) {
	st.mu.Lock()
	k := len(st.entries) - 1
	if k < 0 {
		st.mu.Unlock()
		return
	}
	e := &st.entries[k]
	v, n := e.v, e.n
	*e = idleEntry[T]{} // the stack's spare capacity must not keep the slices
	st.entries = st.entries[:k]
	st.low = min(st.low, k)
	st.mu.Unlock()
	idlePooled.free(n)
	h := *P(s).PoolHeader()
	*s = v
	*P(s).PoolHeader() = h
}

// MaxIdlePooledBytes is the most the slices of idle pooled notifications keep,
// all types together (DefaultMaxIdlePooledBytes unless set).
func MaxIdlePooledBytes() int { return int(idlePooled.max.Load()) }

// SetMaxIdlePooledBytes sets MaxIdlePooledBytes and returns the previous value;
// n < 0 means DefaultMaxIdlePooledBytes. A smaller budget applies as objects
// come back (what is idle stays until taken). A process decoding many large
// messages at once trades memory for allocations here: a decode that finds
// no idle capacity allocates its slices (IdlePooledRefused says how often
// capacity was let go).
func SetMaxIdlePooledBytes(n int) int {
	if n < 0 {
		n = DefaultMaxIdlePooledBytes
	}
	return int(idlePooled.max.Swap(int64(n)))
}

// IdlePooledBytes is what the slices of idle pooled notifications keep now.
func IdlePooledBytes() int { return int(idlePooled.bytes.Load()) }

// IdlePooledRefused counts the slices of pooled notifications let go because
// MaxIdlePooledBytes was reached, and their bytes: each is an allocation
// when a decode needs that capacity again, so a count that keeps growing with
// the messages says the budget is smaller than what the process decodes at
// once.
func IdlePooledRefused() (slices, bytes uint64) {
	return idlePooled.refused.Load(), idlePooled.refusedBy.Load()
}
