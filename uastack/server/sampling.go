package server

import (
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// bucket holds the items of one subscription sampled at one rate. Its
// presence in its group is guarded by rateGroup.mu, its items by sub.mu.
type bucket struct {
	sub   *subscription
	items []*monitoredItem
	gidx  int
}

// rateGroup samples every item of one sampling interval, in one sweep per
// interval on one goroutine.
type rateGroup struct {
	interval time.Duration
	mu       sync.RWMutex
	buckets  []*bucket
}

// sampler holds the rate groups.
type sampler struct {
	srv    *Server
	mu     sync.Mutex
	groups map[time.Duration]*rateGroup
}

func newSampler(s *Server) *sampler {
	return &sampler{srv: s, groups: map[time.Duration]*rateGroup{}}
}

// group returns the group of an interval, starting it if needed.
func (sp *sampler) group(d time.Duration) *rateGroup {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	g := sp.groups[d]
	if g == nil {
		g = &rateGroup{interval: d}
		sp.groups[d] = g
		s := sp.srv
		s.wg.Add(1)
		go g.run(s)
	}
	return g
}

func (g *rateGroup) run(s *Server) {
	defer s.wg.Done()
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			g.sweep(time.Now())
		}
	}
}

// parallelSampleItems is the size of a sweep from which its buckets are
// sampled on GOMAXPROCS goroutines: a sweep of 100,000 changed items takes
// milliseconds on one, and every value waits for it (its subscription
// cannot publish meanwhile, and the ServerTimestamp is the sweep's start).
const parallelSampleItems = 8192

// sweep samples every item of the group. A large sweep is split by buckets
// (subscriptions) over GOMAXPROCS goroutines that it waits for; each bucket
// is sampled under its subscription's lock, as on one goroutine.
func (g *rateGroup) sweep(now time.Time) {
	c := sampleClock{ns: now.UnixNano()}
	c.dt = unixToDateTime(c.ns)
	g.mu.RLock()
	defer g.mu.RUnlock()
	w := runtime.GOMAXPROCS(0)
	total := 0
	if w > 1 && len(g.buckets) > 1 {
		for _, b := range g.buckets {
			total += len(b.items)
		}
	}
	if total < parallelSampleItems {
		sampleBuckets(g.buckets, c)
		return
	}
	// Parts of about total/w items; the last runs here.
	per := (total + w - 1) / w
	var wg sync.WaitGroup
	start, n := 0, 0
	for i, b := range g.buckets {
		n += len(b.items)
		if i == len(g.buckets)-1 {
			sampleBuckets(g.buckets[start:], c)
			break
		}
		if n >= per {
			part := g.buckets[start : i+1]
			wg.Add(1)
			go func() {
				defer wg.Done()
				sampleBuckets(part, c)
			}()
			start, n = i+1, 0
		}
	}
	wg.Wait()
}

// sampleBuckets samples the items of buckets at c (a copy per goroutine: it
// caches the tick of the generators' period).
func sampleBuckets(buckets []*bucket, c sampleClock) {
	for _, b := range buckets {
		sub := b.sub
		sub.mu.Lock()
		if !sub.closed {
			for _, it := range b.items {
				it.sample(&c)
			}
		}
		sub.mu.Unlock()
	}
}

// sampleClock is the time of a sweep, with the tick of the last generator
// period seen: items of one rate mostly share their generators' period, which
// saves a division per item.
type sampleClock struct {
	ns            int64
	dt            ua.DateTime
	period, start int64
	tick          int64
}

func (c *sampleClock) tickOf(g *generator) int64 {
	if g.period != c.period || g.start != c.start {
		c.period, c.start, c.tick = g.period, g.start, g.tickAt(c.ns)
	}
	return c.tick
}

// add puts b into the group (mu held).
func (g *rateGroup) add(b *bucket) {
	b.gidx = len(g.buckets)
	g.buckets = append(g.buckets, b)
}

// remove takes b out of the group (mu held).
func (g *rateGroup) remove(b *bucket) {
	i := b.gidx
	if i < 0 || i >= len(g.buckets) || g.buckets[i] != b {
		return
	}
	last := g.buckets[len(g.buckets)-1]
	g.buckets[i], last.gidx = last, i
	g.buckets[len(g.buckets)-1] = nil
	g.buckets = g.buckets[:len(g.buckets)-1]
	b.gidx = -1
}

// samplingLadder are the sampling intervals the server supports; a requested
// interval is revised up to the next one, so that the number of rate groups
// (goroutines) stays small whatever clients ask for.
var samplingLadder = func() []time.Duration {
	ms := []int64{1, 2, 5, 10, 20, 25, 50, 100, 125, 200, 250, 500, 1000, 2000, 2500, 5000, 10000,
		15000, 20000, 30000, 60000, 120000, 300000, 600000, 1800000, 3600000, 21600000, 86400000}
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}()

// reviseSampling revises a requested sampling interval (ms): negative means the
// subscription's publishing interval, 0 the fastest rate.
func (s *Server) reviseSampling(ms float64, pub time.Duration) time.Duration {
	var d time.Duration
	switch {
	case math.IsNaN(ms) || ms < 0:
		d = pub
	case ms >= float64(maxSampleDuration/time.Millisecond):
		d = maxSampleDuration
	default:
		d = time.Duration(ms * float64(time.Millisecond))
	}
	d = max(d, s.cfg.MinSamplingInterval)
	for _, l := range samplingLadder {
		if l >= d {
			return l
		}
	}
	return samplingLadder[len(samplingLadder)-1]
}

// sample reads the node's value at Unix time ns and queues it when it changed
// as the filter wants (sub.mu held). Generated values are compared by tick and
// written ones by pointer, so an unchanged value costs a division or a load.
func (it *monitoredItem) sample(c *sampleClock) {
	if it.mode == ua.MonitoringModeDisabled || it.removed {
		return
	}
	dt := c.dt
	if it.isGen {
		tick := c.tickOf(&it.gen)
		if it.sampled && tick == it.lastTick {
			return
		}
		if it.sampled && tick > it.lastTick+1 && int64(it.interval) <= it.gen.period {
			// A late sweep (a loaded machine) passed over ticks. Each was a
			// change of the value, and an item sampled at least as fast as
			// the generator changes is owed every one: a sampling interval
			// of 0 asks for the exception-based model (Part 4 §5.12.1.2).
			// As many as the queue holds beside the current value.
			missed := min(tick-it.lastTick-1, int64(it.queueSize)-1)
			for n := tick - missed; n < tick; n++ {
				it.sampleTick(n, dt)
			}
		}
		it.sampleTick(tick, dt)
		return
	}
	var dv ua.DataValue
	n := it.node
	switch {
	case n.static != nil:
		p := n.static.load()
		if it.sampled && p == it.lastPtr {
			return
		}
		it.lastPtr = p
		dv = *p
	case n.dyn != nil:
		dv = n.dyn(dt)
	default:
		return
	}
	it.sampled = true
	dv.ServerTimestamp = dt
	it.offer(&dv)
}

// sampleTick queues the generated value of tick if it changed as the filter
// wants (sub.mu held).
func (it *monitoredItem) sampleTick(tick int64, dt ua.DateTime) {
	var dv ua.DataValue
	it.lastTick = tick
	it.sampled = true
	it.gen.sample(tick, &dv)
	dv.ServerTimestamp = dt
	if it.hasLast && !it.changed(&dv) {
		return
	}
	it.setLast(&dv)
	it.lastQTick = tick
	it.pushTick(tick, dt)
}

// offer queues dv if the filter lets it through (sub.mu held).
func (it *monitoredItem) offer(dv *ua.DataValue) {
	if it.hasLast && !it.changed(dv) {
		return
	}
	it.setLast(dv)
	it.stripTimestamps(dv)
	it.push(dv)
}

// isInline reports whether v is null or a scalar a Variant stores inline.
func isInline(v *ua.Variant) bool {
	t := v.Type()
	return !v.IsArray() && (t == ua.TypeNull || (int(t) < len(fixedSize) && fixedSize[t] > 0))
}

// setLast remembers dv as the base of the filter: an inline scalar in the hot
// fields, anything else in last.
func (it *monitoredItem) setLast(dv *ua.DataValue) {
	it.hasLast = true
	it.lastStatus, it.lastSrc, it.lastSrcPs, it.lastSrv = dv.Status, dv.SourceTimestamp, dv.SourcePicoseconds, dv.ServerTimestamp
	if isInline(&dv.Value) {
		if !it.lastInline {
			it.last = ua.DataValue{}
			it.lastInline = true
		}
		it.lastType, it.lastBits = dv.Value.Type(), dv.Value.RawBits()
		return
	}
	it.lastInline = false
	it.last = *dv
}

// lastValue returns the last value queued.
func (it *monitoredItem) lastValue() ua.DataValue {
	if !it.lastInline {
		return it.last
	}
	return ua.DataValue{Value: variantFromBits(it.lastType, it.lastBits), Status: it.lastStatus,
		SourceTimestamp: it.lastSrc, SourcePicoseconds: it.lastSrcPs, ServerTimestamp: it.lastSrv}
}

// variantFromBits rebuilds an inline scalar from its RawBits.
func variantFromBits(t ua.TypeID, bits uint64) ua.Variant {
	var v ua.Variant
	v.SetRawBits(t, bits)
	return v
}

// stripTimestamps keeps the timestamps the client asked for.
func (it *monitoredItem) stripTimestamps(dv *ua.DataValue) {
	switch it.ts {
	case ua.TimestampsToReturnSource:
		dv.ServerTimestamp, dv.ServerPicoseconds = 0, 0
	case ua.TimestampsToReturnServer:
		dv.SourceTimestamp, dv.SourcePicoseconds = 0, 0
	case ua.TimestampsToReturnNeither:
		dv.SourceTimestamp, dv.SourcePicoseconds, dv.ServerTimestamp, dv.ServerPicoseconds = 0, 0, 0, 0
	}
}
