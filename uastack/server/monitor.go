package server

import (
	"bytes"
	"math"
	"reflect"
	"sync"
	"time"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// overflowBits are the InfoType (DataValue) and Overflow bits set on the value
// next to one a full queue discarded (Part 4 §5.12.1.5, Part 4 §7.39.1).
const overflowBits ua.StatusCode = 0x0480

// monitoredItem is a monitored item; all of it is guarded by sub.mu, except
// the fields fixed at creation (id, sub, node, attr, event, gen).
//
// The fields a sample reads come first, and a generated node's generator is
// copied in, so that sampling an item touches one object rather than three:
// a sweep over 100,000 items is bound by cache misses, not by arithmetic.
type monitoredItem struct {
	// Cache line 0: what every sample reads and the filter state.
	mode          ua.MonitoringMode
	removed       bool
	sampled       bool
	hasLast       bool
	isGen         bool
	queued        bool // in sub.pending
	lastInline    bool // the last value is in lastType/lastBits, not in last
	discardOldest bool
	lastType      ua.TypeID
	trigger       ua.DataChangeTrigger
	deadband      ua.DeadbandType
	ts            ua.TimestampsToReturn
	queueSize     uint32
	lastStatus    ua.StatusCode
	lastSrcPs     uint16
	lastTick      int64
	lastBits      uint64      // the last value queued, an inline scalar
	lastSrc       ua.DateTime // its source timestamp
	// Cache line 1: the generator.
	gen generator // the node's, when isGen
	// Cache line 2: the queue of generated values.
	tq        ring[tickEntry]
	tq1       [1]tickEntry
	sub       *subscription
	lastQTick int64       // the tick of the last value queued, when isGen
	lastSrv   ua.DateTime // the server timestamp of the last value queued
	// Then the queue of other values.
	dq      ring[dvEntry]
	node    *node
	lastPtr *ua.DataValue
	absDB   float64 // the deadband in the value's units (percent converted)
	// dq1 holds the value of the usual queue of one.
	dq1 [1]dvEntry
	// last is the last value queued when it is not an inline scalar.
	last ua.DataValue

	id           uint32
	attr         uint32
	event        bool // monitors the events of node
	clientHandle uint32
	interval     time.Duration

	group        *rateGroup
	bucket       *bucket
	bidx         int // index in bucket.items
	evFilter     *eventFilter
	evq          []ua.EventFieldList
	evHead, evLn int
	evSource     *eventSource
}

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

// sweep samples every item of the group.
func (g *rateGroup) sweep(now time.Time) {
	c := sampleClock{ns: now.UnixNano()}
	c.dt = unixToDateTime(c.ns)
	g.mu.RLock()
	for _, b := range g.buckets {
		sub := b.sub
		sub.mu.Lock()
		if !sub.closed {
			for _, it := range b.items {
				it.sample(&c)
			}
		}
		sub.mu.Unlock()
	}
	g.mu.RUnlock()
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
	var dv ua.DataValue
	if it.isGen {
		tick := c.tickOf(&it.gen)
		if it.sampled && tick == it.lastTick {
			return
		}
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
		return
	}
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
	switch t {
	case ua.TypeBoolean:
		v.SetBoolean(bits != 0)
	case ua.TypeSByte:
		v.SetSByte(int8(bits))
	case ua.TypeByte:
		v.SetByte(byte(bits))
	case ua.TypeInt16:
		v.SetInt16(int16(bits))
	case ua.TypeUInt16:
		v.SetUInt16(uint16(bits))
	case ua.TypeInt32:
		v.SetInt32(int32(bits))
	case ua.TypeUInt32:
		v.SetUInt32(uint32(bits))
	case ua.TypeInt64:
		v.SetInt64(int64(bits))
	case ua.TypeUInt64:
		v.SetUInt64(bits)
	case ua.TypeFloat:
		v.SetFloat(math.Float32frombits(uint32(bits)))
	case ua.TypeDouble:
		v.SetDouble(math.Float64frombits(bits))
	case ua.TypeDateTime:
		v.SetDateTime(ua.DateTime(bits))
	case ua.TypeStatusCode:
		v.SetStatusCode(ua.StatusCode(bits))
	}
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

// changed applies the DataChangeFilter: dv against the last value queued.
func (it *monitoredItem) changed(dv *ua.DataValue) bool {
	if dv.Status != it.lastStatus {
		return true
	}
	if it.trigger == ua.DataChangeTriggerStatus {
		return false
	}
	inline := it.lastInline && isInline(&dv.Value)
	switch {
	case it.deadband != ua.DeadbandTypeNone && inline:
		x, ok1 := dv.Value.AsFloat64()
		last := variantFromBits(it.lastType, it.lastBits)
		y, ok2 := last.AsFloat64()
		if !ok1 || !ok2 {
			if dv.Value.Type() != it.lastType || dv.Value.RawBits() != it.lastBits {
				return true
			}
		} else if math.Abs(x-y) > it.absDB {
			return true
		}
	case it.deadband != ua.DeadbandTypeNone:
		last := it.lastValue()
		if exceeds(&last.Value, &dv.Value, it.absDB) {
			return true
		}
	case inline:
		if dv.Value.Type() != it.lastType || dv.Value.RawBits() != it.lastBits {
			return true
		}
	default:
		last := it.lastValue()
		if !variantEqual(&last.Value, &dv.Value) {
			return true
		}
	}
	return it.trigger == ua.DataChangeTriggerStatusValueTimestamp &&
		(dv.SourceTimestamp != it.lastSrc || dv.SourcePicoseconds != it.lastSrcPs)
}

// variantEqual compares two values without allocating for scalars.
func variantEqual(a, b *ua.Variant) bool {
	if a.Type() != b.Type() || a.IsArray() != b.IsArray() {
		return false
	}
	if !a.IsArray() {
		switch a.Type() {
		case ua.TypeNull:
			return true
		case ua.TypeString, ua.TypeXmlElement:
			return a.Str() == b.Str()
		}
		if inlineType(a.Type()) {
			return a.RawBits() == b.RawBits()
		}
		if x, ok := a.Value().([]byte); ok {
			y, _ := b.Value().([]byte)
			return bytes.Equal(x, y)
		}
	}
	return reflect.DeepEqual(a.Value(), b.Value()) && reflect.DeepEqual(a.ArrayDimensions(), b.ArrayDimensions())
}

// exceeds reports whether a numeric value moved by more than db from the last;
// arrays move when any element does or their length changed. Values that are
// not numbers compare by equality.
func exceeds(last, v *ua.Variant, db float64) bool {
	if !v.IsArray() {
		x, ok1 := v.AsFloat64()
		y, ok2 := last.AsFloat64()
		if !ok1 || !ok2 {
			return !variantEqual(last, v)
		}
		return math.Abs(x-y) > db
	}
	xs, ok1 := floats(v)
	ys, ok2 := floats(last)
	if !ok1 || !ok2 || len(xs) != len(ys) {
		return !variantEqual(last, v)
	}
	for i := range xs {
		if math.Abs(xs[i]-ys[i]) > db {
			return true
		}
	}
	return false
}

// floats converts a numeric array to float64 (for deadbands; not on the hot
// path of scalar items).
func floats(v *ua.Variant) ([]float64, bool) {
	rv := reflect.ValueOf(v.Value())
	if rv.Kind() != reflect.Slice {
		return nil, false
	}
	out := make([]float64, rv.Len())
	for i := range out {
		e := rv.Index(i)
		switch e.Kind() {
		case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			out[i] = float64(e.Int())
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out[i] = float64(e.Uint())
		case reflect.Float32, reflect.Float64:
			out[i] = e.Float()
		default:
			return nil, false
		}
	}
	return out, true
}

// Queues. A data item queues DataValues; a generated one only the tick and
// the sampling time, 24 bytes instead of a hundred, its value being a function
// of the tick: the sweep writes little, and the value is made when sent.
type (
	dvEntry   struct{ dv ua.DataValue }
	tickEntry struct {
		tick int64
		srv  ua.DateTime
		ovf  bool
	}
)

func (e *dvEntry) overflow()   { e.dv.Status |= overflowBits }
func (e *tickEntry) overflow() { e.ovf = true }

// ring is a bounded FIFO of queue entries.
type ring[T any] struct {
	buf     []T
	head, n int32
}

func (r *ring[T]) front() *T     { return &r.buf[r.head] }
func (r *ring[T]) at(i int32) *T { return &r.buf[(r.head+i)%int32(len(r.buf))] }

func (r *ring[T]) pop() {
	var zero T
	r.buf[r.head] = zero
	r.head = (r.head + 1) % int32(len(r.buf))
	r.n--
}

func (r *ring[T]) reset() {
	clear(r.buf)
	r.head, r.n = 0, 0
}

// pushRing queues v in a queue of size entries, discarding per the policy
// when it is full; inline is the storage of a queue of one.
func pushRing[T any, P interface {
	*T
	overflow()
}](r *ring[T], v T, size uint32, discardOldest bool, inline *[1]T) {
	if r.buf == nil {
		if size == 1 {
			r.buf = inline[:]
		} else {
			r.buf = make([]T, min(size, 4))
		}
	}
	if r.n == int32(size) {
		switch {
		case size == 1:
			r.buf[r.head] = v
		case discardOldest:
			// The new entry takes the oldest's slot; the next oldest carries
			// the overflow bit.
			r.buf[r.head] = v
			r.head = (r.head + 1) % int32(len(r.buf))
			P(r.front()).overflow()
		default:
			last := r.at(r.n - 1)
			*last = v
			P(last).overflow()
		}
		return
	}
	if int(r.n) == len(r.buf) {
		grown := make([]T, min(2*len(r.buf), int(size)))
		for i := int32(0); i < r.n; i++ {
			grown[i] = *r.at(i)
		}
		r.buf, r.head = grown, 0
	}
	*r.at(r.n) = v
	r.n++
}

// resizeRing changes the size of a queue, keeping its newest entries.
func resizeRing[T any](r *ring[T], size uint32, inline *[1]T) {
	for r.n > int32(size) {
		r.pop()
	}
	buf := make([]T, max(min(int(size), 4), int(r.n)))
	for i := int32(0); i < r.n; i++ {
		buf[i] = *r.at(i)
	}
	if size == 1 {
		inline[0] = buf[0]
		buf = inline[:]
	}
	r.buf, r.head = buf, 0
}

// queued reports how many values the item has queued.
func (it *monitoredItem) queuedValues() int32 { return it.tq.n + it.dq.n }

// push queues a value (sub.mu held).
func (it *monitoredItem) push(dv *ua.DataValue) {
	pushRing(&it.dq, dvEntry{*dv}, it.queueSize, it.discardOldest, &it.dq1)
	it.markPending()
}

// pushTick queues a generated value by its tick (sub.mu held).
func (it *monitoredItem) pushTick(tick int64, srv ua.DateTime) {
	pushRing(&it.tq, tickEntry{tick: tick, srv: srv}, it.queueSize, it.discardOldest, &it.tq1)
	it.markPending()
}

// pushEvent queues an event's fields (sub.mu held).
func (it *monitoredItem) pushEvent(fields []ua.Variant) {
	if it.evq == nil {
		it.evq = make([]ua.EventFieldList, min(int(it.queueSize), 16))
	}
	if it.evLn == int(it.queueSize) {
		if !it.discardOldest {
			return
		}
		it.evq[it.evHead] = ua.EventFieldList{}
		it.evHead = (it.evHead + 1) % len(it.evq)
		it.evLn--
	}
	if it.evLn == len(it.evq) {
		grown := make([]ua.EventFieldList, min(2*len(it.evq), int(it.queueSize)))
		for i := 0; i < it.evLn; i++ {
			grown[i] = it.evq[(it.evHead+i)%len(it.evq)]
		}
		it.evq, it.evHead = grown, 0
	}
	it.evq[(it.evHead+it.evLn)%len(it.evq)] = ua.EventFieldList{ClientHandle: it.clientHandle, EventFields: fields}
	it.evLn++
	it.markPending()
}

func (it *monitoredItem) markPending() {
	if it.mode == ua.MonitoringModeReporting && !it.queued {
		it.queued = true
		it.sub.pending = append(it.sub.pending, it)
	}
}

// clearQueue drops what the item has queued (sub.mu held).
func (it *monitoredItem) clearQueue() {
	it.dq.reset()
	it.tq.reset()
	clear(it.evq)
	it.evHead, it.evLn = 0, 0
}

// resendLast queues the last value again (TransferSubscriptions with
// SendInitialValues).
func (it *monitoredItem) resendLast() {
	if it.mode != ua.MonitoringModeDisabled && it.hasLast && it.isGen {
		it.pushTick(it.lastQTick, it.lastSrv)
		return
	}
	if it.mode != ua.MonitoringModeDisabled && it.hasLast && !it.event {
		dv := it.lastValue()
		it.stripTimestamps(&dv)
		it.push(&dv)
	}
}

// collect moves queued notifications into a new retained message, within
// budget bytes and the subscription's MaxNotificationsPerPublish (mu held).
// It returns nil when nothing was queued after all.
func (sub *subscription) collect(now ua.DateTime, budget int) (*retained, int, bool) {
	var dcn *ua.DataChangeNotification
	var enl *ua.EventNotificationList
	size, count, limit := 0, 0, int(sub.maxNotif)
	k := 0
	for ; k < len(sub.pending); k++ {
		it := sub.pending[k]
		if it.removed || it.mode != ua.MonitoringModeReporting {
			it.queued = false
			continue
		}
		for it.tq.n > 0 {
			e := it.tq.front()
			var dv ua.DataValue
			it.gen.sample(e.tick, &dv)
			dv.ServerTimestamp = e.srv
			it.stripTimestamps(&dv)
			if e.ovf {
				dv.Status |= overflowBits
			}
			sz := 4 + sub.dataValueSize(&dv)
			if count >= limit || (count > 0 && size+sz > budget) {
				break
			}
			if dcn == nil {
				dcn = ua.NewDataChangeNotification()
			}
			dcn.MonitoredItems = append(dcn.MonitoredItems, ua.MonitoredItemNotification{ClientHandle: it.clientHandle, Value: dv})
			it.tq.pop()
			size += sz
			count++
		}
		for it.dq.n > 0 {
			dv := &it.dq.front().dv
			sz := 4 + sub.dataValueSize(dv)
			if count >= limit || (count > 0 && size+sz > budget) {
				break
			}
			if dcn == nil {
				dcn = ua.NewDataChangeNotification()
			}
			dcn.MonitoredItems = append(dcn.MonitoredItems, ua.MonitoredItemNotification{ClientHandle: it.clientHandle, Value: *dv})
			it.dq.pop()
			size += sz
			count++
		}
		for it.evLn > 0 {
			ev := &it.evq[it.evHead]
			sz := 8 + sub.fieldsSize(ev.EventFields)
			if count >= limit || (count > 0 && size+sz > budget) {
				break
			}
			if enl == nil {
				enl = ua.NewEventNotificationList()
			}
			enl.Events = append(enl.Events, *ev)
			*ev = ua.EventFieldList{}
			it.evHead = (it.evHead + 1) % len(it.evq)
			it.evLn--
			size += sz
			count++
		}
		if it.queuedValues() > 0 || it.evLn > 0 {
			break
		}
		it.queued = false
	}
	n := copy(sub.pending, sub.pending[k:])
	clear(sub.pending[n:])
	sub.pending = sub.pending[:n]
	if count == 0 {
		return nil, 0, len(sub.pending) > 0
	}
	r := retainedPool.Get()
	r.refs.Store(1) // the retransmission queue's
	r.msg.SequenceNumber = sub.nextSeq()
	r.msg.PublishTime = now
	if dcn != nil {
		r.msg.NotificationData = append(r.msg.NotificationData, ua.NewExtensionObject(dcn))
	}
	if enl != nil {
		r.msg.NotificationData = append(r.msg.NotificationData, ua.NewExtensionObject(enl))
	}
	return r, count, len(sub.pending) > 0
}

// dataValueSize is the encoded size of dv.
func (sub *subscription) dataValueSize(dv *ua.DataValue) int {
	n := 1
	if !dv.Value.IsNull() {
		n += sub.variantSize(&dv.Value)
	}
	if dv.Status != 0 {
		n += 4
	}
	if dv.SourceTimestamp != 0 {
		n += 8
	}
	if dv.ServerTimestamp != 0 {
		n += 8
	}
	if dv.SourcePicoseconds != 0 {
		n += 2
	}
	if dv.ServerPicoseconds != 0 {
		n += 2
	}
	return n
}

func (sub *subscription) fieldsSize(fields []ua.Variant) int {
	n := 0
	for i := range fields {
		n += sub.variantSize(&fields[i])
	}
	return n
}

var fixedSize = [32]int{ua.TypeBoolean: 1, ua.TypeSByte: 1, ua.TypeByte: 1, ua.TypeInt16: 2, ua.TypeUInt16: 2,
	ua.TypeInt32: 4, ua.TypeUInt32: 4, ua.TypeInt64: 8, ua.TypeUInt64: 8, ua.TypeFloat: 4, ua.TypeDouble: 8,
	ua.TypeDateTime: 8, ua.TypeStatusCode: 4}

// variantSize is the encoded size of v: computed for scalars, measured by
// encoding for the rest.
func (sub *subscription) variantSize(v *ua.Variant) int {
	if !v.IsArray() {
		switch t := v.Type(); {
		case t == ua.TypeNull:
			return 1
		case t == ua.TypeString || t == ua.TypeXmlElement:
			return 5 + len(v.Str())
		case int(t) < len(fixedSize) && fixedSize[t] > 0:
			return 1 + fixedSize[t]
		}
	}
	sub.scratch.Reset(sub.scratchB[:0])
	sub.scratch.WriteVariant(v)
	n := sub.scratch.Len()
	if b := sub.scratch.Bytes(); cap(b) <= 1<<20 {
		sub.scratchB = b[:0]
	}
	return n
}

// --- services ------------------------------------------------------------------

func (s *Server) createMonitoredItems(sess *session, ch *channel, r *uasc.Request, m *ua.CreateMonitoredItemsRequest) {
	switch {
	case len(m.ItemsToCreate) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.ItemsToCreate)) > s.cfg.MaxMonitoredItemsPerCall:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	case m.TimestampsToReturn < ua.TimestampsToReturnSource || m.TimestampsToReturn > ua.TimestampsToReturnNeither:
		s.fault(ch, r, ua.StatusBadTimestampsToReturnInvalid)
		return
	}
	sub := sess.sub(m.SubscriptionID)
	if sub == nil {
		s.fault(ch, r, ua.StatusBadSubscriptionIdInvalid)
		return
	}
	sub.mu.Lock()
	pubInterval := sub.interval
	sub.mu.Unlock()
	results := make([]ua.MonitoredItemCreateResult, len(m.ItemsToCreate))
	now := time.Now()
	for i := range m.ItemsToCreate {
		req := &m.ItemsToCreate[i]
		it, res := s.newItem(sub, pubInterval, &req.ItemToMonitor, req.MonitoringMode, &req.RequestedParameters, m.TimestampsToReturn)
		if res.StatusCode == ua.StatusGood {
			res.StatusCode = s.register(it, now)
			if res.StatusCode == ua.StatusGood {
				res.MonitoredItemID = it.id
			}
		}
		results[i] = res
	}
	sess.nextDue.Store(0)
	s.respond(ch, r, &ua.CreateMonitoredItemsResponse{Results: results})
}

// newItem checks a request to monitor and builds the item (not registered).
func (s *Server) newItem(sub *subscription, pubInterval time.Duration, rv *ua.ReadValueID, mode ua.MonitoringMode,
	p *ua.MonitoringParameters, ts ua.TimestampsToReturn) (*monitoredItem, ua.MonitoredItemCreateResult) {
	var res ua.MonitoredItemCreateResult
	fail := func(st ua.StatusCode) (*monitoredItem, ua.MonitoredItemCreateResult) {
		res.StatusCode = st
		return nil, res
	}
	if mode < ua.MonitoringModeDisabled || mode > ua.MonitoringModeReporting {
		return fail(ua.StatusBadMonitoringModeInvalid)
	}
	n := s.as.get(rv.NodeID)
	if n == nil {
		return fail(ua.StatusBadNodeIdUnknown)
	}
	if !attributeValid(n, rv.AttributeID) {
		return fail(ua.StatusBadAttributeIdInvalid)
	}
	if rv.IndexRange != "" {
		return fail(ua.StatusBadIndexRangeInvalid)
	}
	if !rv.DataEncoding.IsNull() {
		return fail(ua.StatusBadDataEncodingInvalid)
	}
	it := &monitoredItem{sub: sub, node: n, attr: rv.AttributeID, mode: mode, ts: ts}
	if n.gen != nil && rv.AttributeID == attrValue {
		it.gen, it.isGen = *n.gen, true
	}
	if st := s.applyParams(it, pubInterval, p, &res); st != ua.StatusGood {
		return fail(st)
	}
	return it, res
}

// applyParams checks and applies monitoring parameters (on a new item, or
// under sub.mu on an existing one), filling in the revised values.
func (s *Server) applyParams(it *monitoredItem, pubInterval time.Duration, p *ua.MonitoringParameters, res *ua.MonitoredItemCreateResult) ua.StatusCode {
	n := it.node
	trigger, deadband, absDB := ua.DataChangeTriggerStatusValue, ua.DeadbandTypeNone, 0.0
	var evf *eventFilter
	isEvent := it.attr == attrEventNotifier
	switch f := p.Filter.Value.(type) {
	case nil:
		if p.Filter.Body != nil {
			return ua.StatusBadMonitoredItemFilterUnsupported
		}
		if isEvent {
			return ua.StatusBadMonitoredItemFilterInvalid
		}
	case *ua.DataChangeFilter:
		if it.attr != attrValue {
			return ua.StatusBadFilterNotAllowed
		}
		if f.Trigger < ua.DataChangeTriggerStatus || f.Trigger > ua.DataChangeTriggerStatusValueTimestamp {
			return ua.StatusBadMonitoredItemFilterInvalid
		}
		trigger = f.Trigger
		switch ua.DeadbandType(f.DeadbandType) {
		case ua.DeadbandTypeNone:
		case ua.DeadbandTypeAbsolute:
			if f.DeadbandValue < 0 || math.IsNaN(f.DeadbandValue) {
				return ua.StatusBadDeadbandFilterInvalid
			}
			if !numericType(s.as, n) {
				return ua.StatusBadFilterNotAllowed
			}
			deadband, absDB = ua.DeadbandTypeAbsolute, f.DeadbandValue
		case ua.DeadbandTypePercent:
			if f.DeadbandValue < 0 || f.DeadbandValue > 100 || math.IsNaN(f.DeadbandValue) {
				return ua.StatusBadDeadbandFilterInvalid
			}
			if n.euRange == nil {
				return ua.StatusBadMonitoredItemFilterUnsupported
			}
			deadband, absDB = ua.DeadbandTypePercent, f.DeadbandValue/100*math.Abs(n.euRange.High-n.euRange.Low)
		default:
			return ua.StatusBadDeadbandFilterInvalid
		}
	case *ua.EventFilter:
		if !isEvent {
			return ua.StatusBadFilterNotAllowed
		}
		if n.events == nil {
			return ua.StatusBadNotSupported
		}
		var fres ua.EventFilterResult
		var st ua.StatusCode
		evf, fres, st = s.newEventFilter(f)
		if st != ua.StatusGood {
			res.FilterResult = ua.NewExtensionObject(&fres)
			return st
		}
		if fres.SelectClauseResults != nil || fres.WhereClauseResult.ElementResults != nil {
			res.FilterResult = ua.NewExtensionObject(&fres)
		}
	default:
		return ua.StatusBadMonitoredItemFilterUnsupported
	}
	if isEvent && evf == nil {
		return ua.StatusBadMonitoredItemFilterInvalid
	}
	qs := p.QueueSize
	if isEvent {
		if qs == 0 {
			qs = defaultEventQueueSize
		}
		it.interval = 0
		res.RevisedSamplingInterval = 0
	} else {
		if qs == 0 {
			qs = 1
		}
		it.interval = s.reviseSampling(p.SamplingInterval, pubInterval)
		res.RevisedSamplingInterval = float64(it.interval) / float64(time.Millisecond)
	}
	qs = min(qs, s.cfg.MaxQueueSize)
	res.RevisedQueueSize = qs
	it.event = isEvent
	it.clientHandle = p.ClientHandle
	it.discardOldest = p.DiscardOldest
	it.trigger, it.deadband, it.absDB, it.evFilter = trigger, deadband, absDB, evf
	if qs != it.queueSize && it.queueSize != 0 {
		it.resize(qs)
	}
	it.queueSize = qs
	return ua.StatusGood
}

// resize changes the queue size of an existing item, keeping the newest values
// (sub.mu held).
func (it *monitoredItem) resize(qs uint32) {
	if it.dq.buf != nil {
		resizeRing(&it.dq, qs, &it.dq1)
	}
	if it.tq.buf != nil {
		resizeRing(&it.tq, qs, &it.tq1)
	}
	for it.evLn > int(qs) {
		it.evq[it.evHead] = ua.EventFieldList{}
		it.evHead = (it.evHead + 1) % len(it.evq)
		it.evLn--
	}
	eq := make([]ua.EventFieldList, max(min(int(qs), 16), it.evLn))
	for i := 0; i < it.evLn; i++ {
		eq[i] = it.evq[(it.evHead+i)%len(it.evq)]
	}
	it.evq, it.evHead = eq, 0
}

// numericType reports whether a variable's values are numbers.
func numericType(as *addressSpace, n *node) bool {
	if n.class != ua.NodeClassVariable {
		return false
	}
	dt := as.get(n.dataType)
	return dt != nil && isSubtype(dt, as.ns0(ua.ID_Number))
}

// register adds a new item to its subscription and to its sampling group or
// event source, and queues its first value.
func (s *Server) register(it *monitoredItem, now time.Time) ua.StatusCode {
	sub := it.sub
	var g *rateGroup
	var es *eventSource
	switch {
	case it.event:
		es = it.node.events
		es.mu.Lock()
		defer es.mu.Unlock()
	case it.attr == attrValue:
		g = s.sampler.group(it.interval)
		g.mu.Lock()
		defer g.mu.Unlock()
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.closed {
		return ua.StatusBadSubscriptionIdInvalid
	}
	if len(sub.items) >= s.cfg.MaxMonitoredItemsPerSubscription || s.stats.items.Load() >= int64(s.cfg.MaxMonitoredItems) {
		return ua.StatusBadTooManyMonitoredItems
	}
	for {
		it.id = s.lastItem.Add(1)
		if _, dup := sub.items[it.id]; it.id != 0 && !dup {
			break
		}
	}
	sub.items[it.id] = it
	s.stats.items.Add(1)
	switch {
	case es != nil:
		it.evSource = es
		es.items = append(es.items, it)
	case g != nil:
		it.group = g
		sub.addToBucket(it, g)
		if it.mode != ua.MonitoringModeDisabled {
			c := sampleClock{ns: now.UnixNano()}
			c.dt = unixToDateTime(c.ns)
			it.sample(&c)
		}
	default:
		if it.mode != ua.MonitoringModeDisabled {
			dv := s.readAttribute(it.node, it.attr, ua.DateTime(0))
			dv.ServerTimestamp = unixToDateTime(now.UnixNano())
			it.offer(&dv)
		}
	}
	return ua.StatusGood
}

// addToBucket puts it into sub's bucket of group g (g.mu and sub.mu held).
func (sub *subscription) addToBucket(it *monitoredItem, g *rateGroup) {
	b := sub.buckets[g.interval]
	if b == nil {
		b = &bucket{sub: sub}
		sub.buckets[g.interval] = b
		g.add(b)
	}
	it.bucket, it.bidx = b, len(b.items)
	b.items = append(b.items, it)
}

// removeFromBucket takes it out of its bucket (g.mu and sub.mu held).
func (sub *subscription) removeFromBucket(it *monitoredItem, g *rateGroup) {
	b := it.bucket
	if b == nil {
		return
	}
	last := b.items[len(b.items)-1]
	b.items[it.bidx], last.bidx = last, it.bidx
	b.items[len(b.items)-1] = nil
	b.items = b.items[:len(b.items)-1]
	it.bucket = nil
	if len(b.items) == 0 {
		delete(sub.buckets, g.interval)
		g.remove(b)
	}
}

// removeItems unregisters items from their groups and event sources. The
// caller marked them removed (or closed the subscription).
func (s *Server) removeItems(sub *subscription, items []*monitoredItem) {
	for _, it := range items {
		switch {
		case it.group != nil:
			g := it.group
			g.mu.Lock()
			sub.mu.Lock()
			sub.removeFromBucket(it, g)
			sub.mu.Unlock()
			g.mu.Unlock()
		case it.evSource != nil:
			es := it.evSource
			es.mu.Lock()
			for i, x := range es.items {
				if x == it {
					es.items[i] = es.items[len(es.items)-1]
					es.items[len(es.items)-1] = nil
					es.items = es.items[:len(es.items)-1]
					break
				}
			}
			es.mu.Unlock()
		}
		s.stats.items.Add(-1)
	}
}

func (s *Server) modifyMonitoredItems(sess *session, ch *channel, r *uasc.Request, m *ua.ModifyMonitoredItemsRequest) {
	switch {
	case len(m.ItemsToModify) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.ItemsToModify)) > s.cfg.MaxMonitoredItemsPerCall:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	case m.TimestampsToReturn < ua.TimestampsToReturnSource || m.TimestampsToReturn > ua.TimestampsToReturnNeither:
		s.fault(ch, r, ua.StatusBadTimestampsToReturnInvalid)
		return
	}
	sub := sess.sub(m.SubscriptionID)
	if sub == nil {
		s.fault(ch, r, ua.StatusBadSubscriptionIdInvalid)
		return
	}
	results := make([]ua.MonitoredItemModifyResult, len(m.ItemsToModify))
	for i := range m.ItemsToModify {
		req := &m.ItemsToModify[i]
		sub.mu.Lock()
		it := sub.items[req.MonitoredItemID]
		if it == nil {
			sub.mu.Unlock()
			results[i].StatusCode = ua.StatusBadMonitoredItemIdInvalid
			continue
		}
		oldGroup := it.group
		var cr ua.MonitoredItemCreateResult
		// Check on a copy, so that a refused modification changes nothing.
		trial := *it
		trial.dq, trial.tq, trial.evq = ring[dvEntry]{}, ring[tickEntry]{}, nil
		trial.queueSize = 0
		st := s.applyParams(&trial, sub.interval, &req.RequestedParameters, &cr)
		if st == ua.StatusGood {
			st = s.applyParams(it, sub.interval, &req.RequestedParameters, &cr)
			it.ts = m.TimestampsToReturn
		}
		newInterval := it.interval
		sub.mu.Unlock()
		results[i] = ua.MonitoredItemModifyResult{StatusCode: st, RevisedSamplingInterval: cr.RevisedSamplingInterval,
			RevisedQueueSize: cr.RevisedQueueSize, FilterResult: cr.FilterResult}
		if st != ua.StatusGood || oldGroup == nil || oldGroup.interval == newInterval {
			continue
		}
		// Move to the new rate group.
		oldGroup.mu.Lock()
		sub.mu.Lock()
		sub.removeFromBucket(it, oldGroup)
		it.group = nil
		sub.mu.Unlock()
		oldGroup.mu.Unlock()
		g := s.sampler.group(newInterval)
		g.mu.Lock()
		sub.mu.Lock()
		if !sub.closed && !it.removed {
			it.group = g
			sub.addToBucket(it, g)
		}
		sub.mu.Unlock()
		g.mu.Unlock()
	}
	s.respond(ch, r, &ua.ModifyMonitoredItemsResponse{Results: results})
}

func (s *Server) setMonitoringMode(sess *session, ch *channel, r *uasc.Request, m *ua.SetMonitoringModeRequest) {
	switch {
	case len(m.MonitoredItemIDs) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.MonitoredItemIDs)) > s.cfg.MaxMonitoredItemsPerCall:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	case m.MonitoringMode < ua.MonitoringModeDisabled || m.MonitoringMode > ua.MonitoringModeReporting:
		s.fault(ch, r, ua.StatusBadMonitoringModeInvalid)
		return
	}
	sub := sess.sub(m.SubscriptionID)
	if sub == nil {
		s.fault(ch, r, ua.StatusBadSubscriptionIdInvalid)
		return
	}
	results := make([]ua.StatusCode, len(m.MonitoredItemIDs))
	sub.mu.Lock()
	for i, id := range m.MonitoredItemIDs {
		it := sub.items[id]
		if it == nil {
			results[i] = ua.StatusBadMonitoredItemIdInvalid
			continue
		}
		old := it.mode
		it.mode = m.MonitoringMode
		switch {
		case it.mode == ua.MonitoringModeDisabled:
			it.clearQueue()
			it.sampled, it.hasLast = false, false
		case old == ua.MonitoringModeDisabled:
			it.sampled, it.hasLast = false, false
		case it.mode == ua.MonitoringModeReporting && (it.queuedValues() > 0 || it.evLn > 0):
			it.markPending()
		}
	}
	sub.mu.Unlock()
	s.respond(ch, r, &ua.SetMonitoringModeResponse{Results: results})
}

func (s *Server) deleteMonitoredItems(sess *session, ch *channel, r *uasc.Request, m *ua.DeleteMonitoredItemsRequest) {
	switch {
	case len(m.MonitoredItemIDs) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.MonitoredItemIDs)) > s.cfg.MaxMonitoredItemsPerCall:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	}
	sub := sess.sub(m.SubscriptionID)
	if sub == nil {
		s.fault(ch, r, ua.StatusBadSubscriptionIdInvalid)
		return
	}
	results := make([]ua.StatusCode, len(m.MonitoredItemIDs))
	var removed []*monitoredItem
	sub.mu.Lock()
	for i, id := range m.MonitoredItemIDs {
		it := sub.items[id]
		if it == nil {
			results[i] = ua.StatusBadMonitoredItemIdInvalid
			continue
		}
		delete(sub.items, id)
		it.removed = true
		it.clearQueue()
		removed = append(removed, it)
	}
	sub.mu.Unlock()
	s.removeItems(sub, removed)
	s.respond(ch, r, &ua.DeleteMonitoredItemsResponse{Results: results})
}

// getMonitoredItemsMethod is Server.GetMonitoredItems(SubscriptionId) ->
// (ServerHandles, ClientHandles).
func (s *Server) getMonitoredItemsMethod(c *callContext, in []ua.Variant) ([]ua.Variant, ua.StatusCode) {
	sub := c.sess.sub(in[0].UInt32())
	if sub == nil {
		return nil, ua.StatusBadSubscriptionIdInvalid
	}
	sub.mu.Lock()
	server := make([]uint32, 0, len(sub.items))
	client := make([]uint32, 0, len(sub.items))
	for id, it := range sub.items {
		server = append(server, id)
		client = append(client, it.clientHandle)
	}
	sub.mu.Unlock()
	return []ua.Variant{ua.MustVariant(server), ua.MustVariant(client)}, ua.StatusGood
}
