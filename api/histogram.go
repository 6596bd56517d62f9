package api

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Histogram is a latency histogram for the hot path: Observe is a few
// atomic adds, without locks or allocation; /metrics reads it at scrape
// time. The pipeline and the sinks hold one each (from Histograms) and
// need not import this package: *Histogram satisfies
// interface{ Observe(time.Duration) }.
type Histogram struct {
	bounds []time.Duration // upper bounds, ascending
	counts []atomic.Uint64 // per bucket (not cumulative); the last one is +Inf
	sum    atomic.Int64    // nanoseconds
}

// DefaultLatencyBuckets are the upper bounds of latency histograms: 100 µs
// to 10 s.
var DefaultLatencyBuckets = []time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// NewHistogram returns a histogram with the given upper bounds (sorted and
// deduplicated; nil: DefaultLatencyBuckets).
func NewHistogram(bounds []time.Duration) *Histogram {
	if bounds == nil {
		bounds = DefaultLatencyBuckets
	}
	b := append([]time.Duration(nil), bounds...)
	sort.Slice(b, func(i, j int) bool { return b[i] < b[j] })
	out := b[:0]
	for i, v := range b {
		if i == 0 || v != b[i-1] {
			out = append(out, v)
		}
	}
	return &Histogram{bounds: out, counts: make([]atomic.Uint64, len(out)+1)}
}

// Observe records one duration. Negative durations (clock steps) count as 0.
func (h *Histogram) Observe(d time.Duration) {
	if d < 0 {
		d = 0
	}
	// Binary search over a few bounds: no allocation, no lock.
	lo, hi := 0, len(h.bounds)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if h.bounds[m] < d {
			lo = m + 1
		} else {
			hi = m
		}
	}
	h.counts[lo].Add(1)
	h.sum.Add(int64(d))
}

// HistogramSnapshot is a histogram's state: cumulative counts per upper
// bound (seconds), the total count and the sum (seconds).
type HistogramSnapshot struct {
	Buckets map[float64]uint64
	Count   uint64
	Sum     float64
}

// Snapshot reads the histogram. Concurrent Observes may be half counted
// (a count without its sum); the next scrape sees them whole.
func (h *Histogram) Snapshot() HistogramSnapshot {
	s := HistogramSnapshot{Buckets: make(map[float64]uint64, len(h.bounds))}
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i].Load()
		s.Buckets[b.Seconds()] = cum
	}
	s.Count = cum + h.counts[len(h.bounds)].Load()
	s.Sum = time.Duration(h.sum.Load()).Seconds()
	return s
}

// Histograms are the latency histograms /metrics exports, by kind and label.
// Get them at setup (they are made on first use, under a lock); Observe on
// the hot path.
type Histograms struct {
	mu           sync.Mutex
	roundTrip    map[string]*Histogram
	sourceToSink map[string]*Histogram
}

// NewHistograms returns an empty set.
func NewHistograms() *Histograms {
	return &Histograms{roundTrip: map[string]*Histogram{}, sourceToSink: map[string]*Histogram{}}
}

// PublishRoundTrip is the histogram of an endpoint's Publish round trips
// (request sent to response received).
func (h *Histograms) PublishRoundTrip(endpoint string) *Histogram {
	return h.get(h.roundTrip, endpoint)
}

// SourceToSink is the histogram of a sink's source-to-sink latency (the
// value's source timestamp, or its arrival, to the sink's acceptance).
func (h *Histograms) SourceToSink(sink string) *Histogram {
	return h.get(h.sourceToSink, sink)
}

func (h *Histograms) get(m map[string]*Histogram, label string) *Histogram {
	h.mu.Lock()
	defer h.mu.Unlock()
	if x := m[label]; x != nil {
		return x
	}
	x := NewHistogram(nil)
	m[label] = x
	return x
}

// each calls f for every histogram of a map, in label order.
func (h *Histograms) each(m map[string]*Histogram, f func(label string, x *Histogram)) {
	h.mu.Lock()
	labels := make([]string, 0, len(m))
	for l := range m {
		labels = append(labels, l)
	}
	xs := make([]*Histogram, len(labels))
	sort.Strings(labels)
	for i, l := range labels {
		xs[i] = m[l]
	}
	h.mu.Unlock()
	for i, l := range labels {
		f(l, xs[i])
	}
}
