package bridge

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/uagate/gateway/bridge/resume"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/ua"
)

// Backfill from the server's history (config backfill: history).
//
// Values can be lost upstream, whatever the gateway does: a monitored
// item's queue overflowed (the Overflow bit), notification messages were
// lost (the client's OnGap), the subscription had to be created anew (a
// server that lost it, a restart after the session's timeout). For each
// field involved the group knows the source timestamp of the last value it
// delivered (its cache, or the last run's Times after a restart) and learns
// the first it gets again: the first value after an overflow carries the
// bit; after a gap, the field's next notification (a new subscription sends
// every item's current value; a field that sends none within backfillWait
// takes the time of the gap as its end). The values between, exclusive of
// both, are read from the server's history for the fields whose node is
// Historizing (HistoryRead of raw values, client.HistoryReadRaw: the
// server's limits and continuation points), merged in source timestamp
// order and published: a DataSetMessage per writer and source timestamp,
// ua-deltaframe, its Timestamp the values' source timestamp (when they were
// collected, not when the message was written), taking the writer's next
// SequenceNumber, in NetworkMessages whose MessageId starts with
// BackfillPrefix. They come after the live values that followed the gap,
// marked apart; they do not touch the last-value cache. A field without
// history keeps its gap (reported, counted: GroupStats.BackfillMissed).
//
// Bounds: a job holds at most maxBackfillValues values (the rest of its
// ranges is counted as missed), and publishes them backfillChunk at a time,
// so that live data waits at most that long for g.mu. One goroutine per
// group runs the jobs (Start starts it; Stop ends it).

// BackfillPrefix starts the MessageId of a NetworkMessage that carries
// values read from the server's history to fill a loss upstream.
const BackfillPrefix = "backfill-"

const (
	maxBackfillValues = 200_000
	backfillChunk     = 1000
	minBackfillWait   = 2 * time.Second
)

// gapRange is a field's lost range: the values with source timestamps in
// (from, to).
type gapRange struct {
	slot     int32
	from, to ua.DateTime
}

// awaitEntry is a field waiting for its first value after a gap.
type awaitEntry struct {
	from  ua.DateTime // its last delivered value's source timestamp
	gapAt ua.DateTime // when the gap was told: the end when no value comes
	since time.Time
}

// backfiller is a group's backfill state.
type backfiller struct {
	g    *WriterGroup
	wait time.Duration // how long a field awaits its first value after a gap
	kick chan struct{}

	mu    sync.Mutex // guards await, ready and the fields below (a leaf: taken under g.mu)
	await map[int32]awaitEntry
	ready []gapRange
	// taken and done count the ranges the goroutine took from ready and
	// those it is done with (filled, or given up); stuck: its last fill
	// found no session (the ranges wait for the next tick); changed, when
	// not nil, is closed at the end of a fill (finish waits for it).
	taken, done uint64
	stuck       bool
	changed     chan struct{}

	// the backfill goroutine's
	hist map[int32]bool // slots whose Historizing is known
}

func newBackfiller(g *WriterGroup) *backfiller {
	return &backfiller{g: g, wait: max(minBackfillWait, 4*g.interval), kick: make(chan struct{}, 1),
		await: map[int32]awaitEntry{}, hist: map[int32]bool{}}
}

func (b *backfiller) wake() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// add queues a lost range that is complete (an overflow); g.mu held.
func (b *backfiller) add(r gapRange) {
	if r.from == 0 || r.to <= r.from {
		return
	}
	b.mu.Lock()
	b.ready = append(b.ready, r)
	b.mu.Unlock()
	b.wake()
}

// openTimes keeps the fields' last delivered source timestamps in dir (the
// marks' directory), for a restart: where a backfill starts, and which
// first values were delivered before (resend.go); g.mu not needed (New).
func (g *WriterGroup) openTimes(dir string) {
	if dir == "" {
		return
	}
	t, err := resume.OpenTimes(dir, g.name, len(g.fields))
	if err != nil {
		g.log.Warn("bridge: the times file cannot be used; after a restart a field's last value may be sent again, and a backfill has no start", "group", g.name, "err", err)
		return
	}
	g.times = t
}

// awaitGap marks every data field as waiting for its first value after a
// gap told now (OnGap); g.mu held, not g.vmu.
func (g *WriterGroup) awaitGap() {
	if g.bf == nil {
		return
	}
	now := time.Now()
	at := ua.NewDateTime(now)
	if need := (len(g.fields) + 63) / 64; len(g.awaitBits) < need {
		g.awaitBits = append(g.awaitBits, make([]uint64, need-len(g.awaitBits))...)
	}
	b := g.bf
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range g.fields {
		f := &g.fields[s]
		if f.flags&(fieldEvent|fieldRemoved) != 0 {
			continue
		}
		from := ua.DateTime(0)
		if f.flags&fieldHasValue != 0 {
			from = f.src
		} else if g.prevTimes != nil {
			from = ua.DateTime(g.prevTimes.Previous(s))
		}
		if from == 0 {
			continue // nothing delivered: nothing known to be missing
		}
		if _, waiting := b.await[int32(s)]; waiting {
			continue // the earlier gap's start holds
		}
		b.await[int32(s)] = awaitEntry{from: from, gapAt: at, since: now}
		g.awaitBits[s>>6] |= 1 << (s & 63)
		g.awaitN++
	}
}

// lostBefore sees notification dv of field s before it is cached (the hot
// path, g.mu held): it ends the field's wait after a gap, and a value with
// the Overflow bit (its queue discarded older values, the default
// discardOldest) makes the range since the field's last value a lost one.
func (g *WriterGroup) lostBefore(s int32, dv *ua.DataValue, overflow bool) {
	if g.awaitN > 0 && g.awaitBits[s>>6]&(1<<(s&63)) != 0 {
		g.awaitEnd(s, dv.SourceTimestamp)
		return
	}
	if f := &g.fields[s]; overflow && f.flags&fieldHasValue != 0 {
		g.bf.add(gapRange{slot: s, from: f.src, to: dv.SourceTimestamp})
	}
}

// awaitEnd takes field s's first value after a gap (source timestamp ts)
// as the end of its lost range; g.mu held (the hot path, rarely).
func (g *WriterGroup) awaitEnd(s int32, ts ua.DateTime) {
	g.awaitBits[s>>6] &^= 1 << (s & 63)
	g.awaitN--
	b := g.bf
	b.mu.Lock()
	e, ok := b.await[s]
	delete(b.await, s)
	if ok && ts > e.from {
		b.ready = append(b.ready, gapRange{slot: s, from: e.from, to: ts})
	}
	b.mu.Unlock()
	b.wake()
}

// expire ends the waits older than b.wait at their gap's time (every wait
// when all: a stop comes before their first values); it takes g.mu.
func (b *backfiller) expire(now time.Time, all bool) {
	g := b.g
	g.mu.Lock()
	defer g.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	for s, e := range b.await {
		if !all && now.Sub(e.since) < b.wait {
			continue
		}
		delete(b.await, s)
		g.awaitBits[s>>6] &^= 1 << (s & 63)
		g.awaitN--
		if e.gapAt > e.from {
			b.ready = append(b.ready, gapRange{slot: s, from: e.from, to: e.gapAt})
		}
	}
}

// run is the group's backfill goroutine: it ends the waits that timed out
// and fills the ranges that are ready, until ctx ends.
func (b *backfiller) run(ctx context.Context) {
	defer b.g.wg.Done()
	t := time.NewTicker(min(b.wait/2, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		case now := <-t.C:
			b.expire(now, false)
		}
		b.mu.Lock()
		ready := b.ready
		b.ready = nil
		b.taken += uint64(len(ready))
		if len(ready) > 0 {
			b.stuck = false // a try under way: finish waits for its outcome
		}
		b.mu.Unlock()
		if len(ready) > 0 {
			ok := b.fill(ctx, ready)
			b.mu.Lock()
			if !ok && ctx.Err() == nil {
				// No session now: again at the next tick.
				b.ready = append(ready, b.ready...)
				b.taken -= uint64(len(ready))
			} else {
				b.done += uint64(len(ready))
			}
			b.stuck = !ok
			if b.changed != nil {
				close(b.changed)
				b.changed = nil
			}
			b.mu.Unlock()
		}
	}
}

// finish waits, within ctx, until the ranges taken or ready when it was
// called are done: not for ranges that come later (while values go on
// overflowing it would never end), nor when the last fill found no
// session, nor for fields still waiting for their first value after a
// gap.
func (b *backfiller) finish(ctx context.Context) {
	// A field still waiting for its first value after a gap has lost what
	// came between its last value and the gap: that range is read now, as
	// its time-out would have it, before the session goes. (g.mu may be
	// held by a handler waiting for a full queue: not past ctx.)
	expired := make(chan struct{})
	go func() {
		defer close(expired)
		b.expire(time.Now(), true)
	}()
	select {
	case <-expired:
	case <-ctx.Done():
		return
	}
	b.mu.Lock()
	target := b.taken + uint64(len(b.ready))
	b.mu.Unlock()
	b.wake()
	for {
		b.mu.Lock()
		if b.done >= target || b.stuck {
			b.mu.Unlock()
			return
		}
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// FinishBackfill waits, within ctx, for the backfill under way: the ranges
// of values lost upstream that are ready to be read from the server's
// history are read and published before the caller detaches the group's
// session (a stop right after a gap would otherwise cut them short, and
// after a restart that keeps the subscription the gap would not be seen
// again). A field still waiting for its first value after a gap has its
// range end at the gap, as the wait's time-out would. It does not wait for
// a range that cannot be read now (no session), and takes at most half of
// what is left of ctx: the rest of a stop (the
// detach, the final resume record) gets the other half even when the reads
// cannot end (the group's queues full of a dead broker's messages).
func (g *WriterGroup) FinishBackfill(ctx context.Context) {
	if g.bf == nil {
		return
	}
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
		defer cancel()
	}
	g.bf.finish(ctx)
}

// backfillValue is a value read from history for a slot.
type backfillValue struct {
	slot int32
	dv   ua.DataValue
}

// fill reads the ranges from the server's history and publishes what it
// finds; false when there is no session to read with (the ranges wait).
func (b *backfiller) fill(ctx context.Context, ranges []gapRange) bool {
	g := b.g
	c := g.session.Client()
	sub := g.Subscription()
	if c == nil || sub == nil {
		return false
	}
	// Historizing, once per field.
	var ask []int32
	for _, r := range ranges {
		if _, known := b.hist[r.slot]; !known && !slices.Contains(ask, r.slot) {
			ask = append(ask, r.slot)
		}
	}
	if len(ask) > 0 {
		nodes := make([]ua.NodeID, len(ask))
		for i, s := range ask {
			it, _ := sub.Item(g.base + uint32(s))
			nodes[i] = it.NodeID
		}
		h, err := c.Historizing(ctx, nodes)
		if err != nil {
			g.log.Warn("bridge: backfill: reading Historizing failed: the gap stays", "group", g.name, "err", err)
			g.stats.backfillMissed.Add(uint64(len(ranges)))
			return true
		}
		for i, s := range ask {
			b.hist[s] = h[i]
		}
	}
	var hr []client.HistoryRange
	var slots []int32
	var bounds []gapRange
	missed := 0
	for _, r := range ranges {
		if !b.hist[r.slot] {
			missed++
			continue
		}
		it, ok := sub.Item(g.base + uint32(r.slot))
		if !ok {
			continue // removed meanwhile
		}
		// Start is inclusive: one DateTime unit after the last delivered value.
		hr = append(hr, client.HistoryRange{NodeID: it.NodeID, Start: r.from + 1, End: r.to})
		slots = append(slots, r.slot)
		bounds = append(bounds, r)
	}
	if missed > 0 {
		g.stats.backfillMissed.Add(uint64(missed))
		g.log.Warn("bridge: values lost upstream, and the server keeps no history of these fields: the gap stays", "group", g.name, "fields", missed)
	}
	if len(hr) == 0 {
		return true
	}
	per := max(maxBackfillValues/len(hr), 1)
	for i := range hr {
		hr[i].Max = per
	}
	var vals []backfillValue
	res, err := c.HistoryReadRaw(ctx, hr, ua.TimestampsToReturnBoth, 0, func(i int, dvs []ua.DataValue) error {
		for k := range dvs {
			// The bounds again: a server that compares at a coarser
			// resolution (node-opcua: milliseconds) returns the values at
			// both ends too, which were delivered live.
			if ts := dvs[k].SourceTimestamp; ts > bounds[i].from && ts < bounds[i].to {
				vals = append(vals, backfillValue{slot: slots[i], dv: dvs[k]})
			}
		}
		return nil
	})
	if err != nil {
		g.log.Warn("bridge: backfill: HistoryRead failed", "group", g.name, "err", err, "values", len(vals))
	}
	short := 0
	for i := range res {
		if res[i].Status.IsBad() || res[i].Truncated {
			short++
		}
	}
	if short > 0 {
		g.stats.backfillMissed.Add(uint64(short))
		g.log.Warn("bridge: backfill: part of the lost values could not be read from history", "group", g.name, "fields", short)
	}
	slices.SortStableFunc(vals, func(a, b backfillValue) int {
		return cmp.Or(cmp.Compare(a.dv.SourceTimestamp, b.dv.SourceTimestamp), cmp.Compare(a.slot, b.slot))
	})
	for i := 0; i < len(vals); {
		j := min(i+backfillChunk, len(vals))
		// A chunk ends between timestamps: one writer's DataSetMessage
		// of a timestamp is never split.
		for j < len(vals) && vals[j].dv.SourceTimestamp == vals[j-1].dv.SourceTimestamp {
			j++
		}
		if !g.publishBackfill(vals[i:j]) {
			return true
		}
		i = j
	}
	g.stats.backfilled.Add(uint64(len(vals)))
	g.stats.backfillRanges.Add(uint64(len(hr) - short))
	g.log.Info("bridge: values lost upstream filled from the server's history", "group", g.name, "fields", len(hr), "values", len(vals))
	return true
}

// publishBackfill writes vals (sorted by source timestamp, then slot) as
// backfill DataSetMessages; false when the group is closed.
func (g *WriterGroup) publishBackfill(vals []backfillValue) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || !g.reserve(g.sub, len(vals)) {
		return false
	}
	g.backfilling = true
	defer func() { g.backfilling = false }()
	g.beginCycle(0, false)
	for i := 0; i < len(vals); {
		ts := vals[i].dv.SourceTimestamp
		j := i
		for j < len(vals) && vals[j].dv.SourceTimestamp == ts {
			j++
		}
		for k := i; k < j; {
			w := g.writerOf(vals[k].slot)
			m := k
			for m < j && vals[m].slot < w.end {
				m++
			}
			if !w.removed {
				g.nowDT = ts // the DataSetMessage's Timestamp: when the values were collected
				g.beginDSM(w, jsonenc.DeltaFrame)
				for x := k; x < m; x++ {
					s := vals[x].slot
					if x > k && s == vals[x-1].slot {
						continue // a value the history holds twice
					}
					if f := &g.fields[s]; f.flags&fieldRemoved == 0 {
						g.addField(w, f, s, &vals[x].dv)
					}
				}
				g.endDSM(w)
			}
			k = m
		}
		i = j
	}
	g.endCycle()
	return true
}
