package ua

import (
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
const DefaultMaxIdlePooledBytes = 4 << 20

// idlePooled counts the bytes the slices of idle pooled notifications keep,
// all pooled types together: a pool keeps up to 1024 objects of each type,
// and with MaxPooledBytes each they could together keep a gigabyte that a
// burst of large messages (100 subscriptions of 10,000 items each: 880 KB per
// DataChangeNotification) left behind. Capacity is what makes a steady stream
// of messages decode without allocating, so the first ones back keep theirs;
// those beyond the budget go back to their pool bare.
var idlePooled = idleBudget{max: DefaultMaxIdlePooledBytes}

// idleBudget is a byte budget taken on Put (keep) and given back on Get (take).
type idleBudget struct {
	bytes     atomic.Int64
	max       int64 // read and written atomically
	refused   atomic.Uint64
	refusedBy atomic.Uint64
}

// poolFullMargin: a pool with fewer free slots than this may drop the object
// being put after its reset counted it, so the slices are not kept then (a
// burst that filled the pool is long over before the pool is that full again).
const poolFullMargin = 64

// keep takes n bytes of the budget for an object going back to a pool whose
// counters are st; false when they do not fit.
func (b *idleBudget) keep(n int, st pooling.PoolStats) bool {
	if st.Idle >= st.Capacity-poolFullMargin {
		return false
	}
	limit := atomic.LoadInt64(&b.max)
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

// take gives back the n bytes of an object leaving its pool.
func (b *idleBudget) take(n int) {
	if n > 0 {
		b.bytes.Add(-int64(n))
	}
}

// MaxIdlePooledBytes is the most the slices of idle pooled notifications keep,
// all types together (DefaultMaxIdlePooledBytes unless set).
func MaxIdlePooledBytes() int { return int(atomic.LoadInt64(&idlePooled.max)) }

// SetMaxIdlePooledBytes sets MaxIdlePooledBytes and returns the previous value;
// n < 0 means DefaultMaxIdlePooledBytes. A smaller budget applies as objects
// come back (those idle keep their slices until taken). A process decoding
// many large messages at once trades memory for allocations here: a decode
// that gets an object without capacity allocates its slices.
func SetMaxIdlePooledBytes(n int) int {
	if n < 0 {
		n = DefaultMaxIdlePooledBytes
	}
	return int(atomic.SwapInt64(&idlePooled.max, int64(n)))
}

// IdlePooledBytes is what the slices of idle pooled notifications keep now.
func IdlePooledBytes() int { return int(idlePooled.bytes.Load()) }

// IdlePooledRefused counts the notifications that went back to their pool
// without their slices because MaxIdlePooledBytes was reached, and the bytes
// those slices had: each is an allocation when a decode needs that capacity
// again, so a count that keeps growing with the messages says the budget is
// smaller than what the process decodes at once.
func IdlePooledRefused() (objects, bytes uint64) {
	return idlePooled.refused.Load(), idlePooled.refusedBy.Load()
}
