package pooling_test

import (
	"strconv"
	"sync"
	"testing"

	"github.com/uagate/gateway/pooling"
)

// notification is about the size of a decoded MonitoredItemNotification with
// a scalar value: what the decoder pools most.
type notification struct {
	pooling.Header
	ClientHandle    uint32
	Type            uint8
	Int             int64
	Float           float64
	Status          uint32
	SourceTime      int64
	ServerTime      int64
	SourcePicos     uint16
	ServerPicos     uint16
	DiagnosticFlags uint8
}

func resetNotification(n *notification) { *n = notification{} }

var sink *notification

// BenchmarkNew is the unpooled baseline: what the decoder would do without a pool.
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		n := new(notification)
		n.ClientHandle = 1
		sink = n
	}
}

func BenchmarkPoolGetPut(b *testing.B) {
	p := pooling.NewPool[notification](0, resetNotification)
	p.Put(p.Get())
	b.ReportAllocs()
	for b.Loop() {
		n := p.Get()
		n.ClientHandle = 1
		p.Put(n)
	}
}

// BenchmarkPoolGetPutBatch holds a batch of notifications at once, as a
// decoded PublishResponse does, so the slots are used and not only the fast slot.
func BenchmarkPoolGetPutBatch(b *testing.B) {
	const batch = 64
	p := pooling.NewPool[notification](0, resetNotification)
	held := make([]*notification, batch)
	b.ReportAllocs()
	for b.Loop() {
		for i := range held {
			held[i] = p.Get()
			held[i].ClientHandle = uint32(i)
		}
		for _, n := range held {
			p.Put(n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/object")
}

func BenchmarkPoolGetPutParallel(b *testing.B) {
	p := pooling.NewPool[notification](0, resetNotification)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := p.Get()
			n.ClientHandle = 1
			p.Put(n)
		}
	})
	s := p.Stats()
	b.ReportMetric(float64(s.Misses)/float64(s.Hits+s.Misses), "miss/op")
}

// BenchmarkSyncPoolGetPut is the baseline: sync.Pool is per-P and so faster
// under contention, but unbounded between GCs, emptied by them, and uncounted.
func BenchmarkSyncPoolGetPut(b *testing.B) {
	p := sync.Pool{New: func() any { return new(notification) }}
	p.Put(p.Get())
	b.ReportAllocs()
	for b.Loop() {
		n := p.Get().(*notification)
		n.ClientHandle = 1
		resetNotification(n)
		p.Put(n)
	}
}

func BenchmarkSyncPoolGetPutBatch(b *testing.B) {
	const batch = 64
	p := sync.Pool{New: func() any { return new(notification) }}
	held := make([]*notification, batch)
	b.ReportAllocs()
	for b.Loop() {
		for i := range held {
			held[i] = p.Get().(*notification)
			held[i].ClientHandle = uint32(i)
		}
		for _, n := range held {
			resetNotification(n)
			p.Put(n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/object")
}

func BenchmarkSyncPoolGetPutParallel(b *testing.B) {
	p := sync.Pool{New: func() any { return new(notification) }}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := p.Get().(*notification)
			n.ClientHandle = 1
			resetNotification(n)
			p.Put(n)
		}
	})
}

// BenchmarkBufferPool compares a pooled buffer with make and with a sync.Pool
// of *[]byte for the sizes the gateway uses: a small message, a 64 KiB chunk
// and a 1 MiB message.
func BenchmarkBufferPool(b *testing.B) {
	for _, size := range []int{1000, 65535, 1 << 20} {
		name := strconv.Itoa(size)
		b.Run("pool/"+name, func(b *testing.B) {
			bp := pooling.NewBufferPool(pooling.BufferPoolConfig{})
			bp.Put(bp.Get(size))
			b.ReportAllocs()
			for b.Loop() {
				buf := bp.Get(size)
				buf.B[0] = 1
				bp.Put(buf)
			}
		})
		b.Run("poolclear/"+name, func(b *testing.B) {
			bp := pooling.NewBufferPool(pooling.BufferPoolConfig{})
			bp.Put(bp.Get(size))
			b.ReportAllocs()
			b.SetBytes(int64(pooling.ClassSize(size)))
			for b.Loop() {
				buf := bp.Get(size)
				buf.B[0] = 1
				bp.PutClear(buf)
			}
		})
		b.Run("make/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf := make([]byte, size)
				buf[0] = 1
				byteSink = buf
			}
		})
		b.Run("syncpool/"+name, func(b *testing.B) {
			p := sync.Pool{New: func() any { s := make([]byte, size); return &s }}
			b.ReportAllocs()
			for b.Loop() {
				buf := p.Get().(*[]byte)
				(*buf)[0] = 1
				p.Put(buf)
			}
		})
	}
}

func BenchmarkBufferPoolParallel(b *testing.B) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			buf := bp.Get(65535)
			buf.B[0] = 1
			bp.Put(buf)
		}
	})
}

// BenchmarkSharedFanOut is one message handed to three sinks.
func BenchmarkSharedFanOut(b *testing.B) {
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{})
	bp.GetShared(4096).Release()
	b.ReportAllocs()
	for b.Loop() {
		s := bp.GetShared(4096)
		s.Retain()
		s.Retain()
		s.Release()
		s.Release()
		s.Release()
	}
}

var byteSink []byte
