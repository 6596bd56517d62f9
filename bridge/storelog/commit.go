package storelog

import (
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
)

// The committer: the one goroutine that writes the file. Each round takes
// what every stream has pending, the cursor moves the readers asked for,
// the head deletions they allow and those the bounds force, writes them in
// one transaction, commits it (one fdatasync), and only then settles the
// messages (their writer groups acknowledge upstream) and publishes the new
// state to the streams and readers. A failed commit stops the log: what it
// held is settled undelivered and every later Enqueue too, so nothing is
// acknowledged upstream that is not in the file.

// expireEvery paces the MaxAge scan of the streams' heads.
const expireEvery = time.Second

// round is one stream's part of a commit.
type round struct {
	s         *Stream
	batch     []*sink.Message
	tails     []tailRec
	last      uint64 // after the commit
	cum       uint64
	added     int64  // bytes written
	first     uint64 // first record kept after the commit
	deleted   int64  // bytes deleted
	ndeleted  int64
	dropped   uint64 // by drop-oldest, before every consumer had them
	expired   uint64
	cursors   []cursorMove
	head      uint64 // records up to it every reader settled
	upTo      uint32 // the stream's upTo after the commit
	upKnown   bool
	upChanged bool          // upTo is to be saved
	giveWay   bool          // the stream's records give way (StreamOptions)
	maxBytes  int64         // the stream's own bound (StreamOptions; 0: none)
	maxAge    time.Duration // the stream's own age bound (StreamOptions; 0: none)
	bytes     int64         // the stream's records' bytes before the commit
	taken     int           // pending bytes taken into the batch
}

type cursorMove struct {
	r     *Reader
	state cursorState
}

func (l *Log) committer() {
	defer close(l.done)
	// idle is armed only while something lazy may be due (idleDeadline):
	// an idle log's committer sleeps without a timer.
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var rounds []round
	var lastExpire, lastCommit time.Time
	for {
		lazy := false // cursor moves and head deletions alone are due
		select {
		case <-l.wake:
			l.gather(timer)
			// Group commit: what arrives during the interval after a
			// commit goes in one transaction (one fdatasync) with what
			// arrived during the commit.
			if wait := l.opts.CommitInterval - time.Since(lastCommit); wait > 0 && !l.isClosing() {
				timer.Reset(wait)
				<-timer.C
			}
		case <-idle.C:
			lazy = true
			// Settlements from now on are after this round's look at the
			// cursors: they set moved again (Reader.Settled).
			l.moved.Store(false)
		}
		// What signalled before now is in what this round takes: a signal
		// left in the channel (Handed after the first message's wake-up, a
		// claim asked during the wait) would wake the committer again for
		// nothing, and a group-commit wait after it (a sleep and a wake-up
		// per publish response at ordinary rates).
		select {
		case <-l.wake:
		default:
		}
		closing := l.isClosing()
		did := false
		for {
			now := time.Now()
			expire := (l.opts.MaxAge > 0 || l.anyAge.Load()) && now.Sub(lastExpire) >= expireEvery
			if expire {
				lastExpire = now
			}
			var err error
			var once bool
			rounds, once, err = l.commitOnce(rounds[:0], now, expire, lazy)
			if err != nil {
				l.fail(err)
				return
			}
			if !once {
				break
			}
			did, lastCommit = true, now
			if !closing {
				if l.pendingLeft() {
					l.signal() // over the commit's budget: the next round takes it
				}
				break
			}
		}
		if closing {
			return
		}
		if did {
			l.lazyDue.Store(true) // the records just committed settle later
		} else if lazy {
			// Nothing was due: the log is idle until an append, a claim or
			// a settlement (Reader.Settled wakes the committer when it
			// finds lazyDue false).
			l.lazyDue.Store(false)
			if l.moved.Load() {
				l.lazyDue.Store(true)
			}
		}
		if d, ok := l.idleDeadline(lastCommit, lastExpire); ok {
			idle.Reset(time.Until(d))
		} else {
			idle.Stop()
		}
	}
}

// idleDeadline is when the committer next looks for lazy work without
// being woken: idleSave after the last commit while settlements may be
// unsaved (lazyDue), the next MaxAge scan while records are held under an
// age bound, the end of loadGrace while it lasts; none on an idle log.
func (l *Log) idleDeadline(lastCommit, lastExpire time.Time) (time.Time, bool) {
	var d time.Time
	ok := false
	at := func(t time.Time) {
		if !ok || t.Before(d) {
			d, ok = t, true
		}
	}
	if l.lazyDue.Load() {
		at(lastCommit.Add(idleSave))
	}
	if (l.opts.MaxAge > 0 || l.anyAge.Load()) && l.holding() {
		at(lastExpire.Add(expireEvery))
	}
	if end := l.opened.Add(loadGrace); time.Now().Before(end) {
		at(end)
	}
	return d, ok
}

// holding reports whether a stream holds records in the file.
func (l *Log) holding() bool {
	return l.anyStream(func(s *Stream) bool { return s.records > 0 })
}

// pendingLeft reports whether a stream has messages pending still.
func (l *Log) pendingLeft() bool {
	return l.anyStream(func(s *Stream) bool { return len(s.pending) > 0 })
}

// anyStream reports whether f, called with each stream's mu held, holds
// for one of them. The committer's goroutine alone: the streams are taken
// into a slice it keeps, so that its checks on every wake allocate nothing.
func (l *Log) anyStream(f func(s *Stream) bool) bool {
	l.mu.Lock()
	clear(l.scratch)
	l.scratch = append(l.scratch[:0], l.order...)
	l.mu.Unlock()
	for _, s := range l.scratch {
		s.mu.Lock()
		ok := f(s)
		s.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

func (l *Log) isClosing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closing
}

// poke tells an idle committer that a cursor moved (Reader.Settled): it
// arms its idle save. One wake-up per idle period; none while lazyDue.
// A log short of room (over half full, or a producer waiting for room)
// gets its deletions at once: the committer is woken for each, commits at
// most one per CommitInterval.
func (l *Log) poke() {
	l.moved.Store(true)
	if l.roomWaiters.Load() > 0 || 2*l.used.Load() > l.opts.MaxBytes {
		l.signal()
		return
	}
	if !l.lazyDue.Load() && l.lazyDue.CompareAndSwap(false, true) {
		l.signal()
	}
}

// gather waits, up to CommitInterval, while a stream's pending messages end
// with a notification message its producer is still handing over
// (sink.TokenWatcher: Handed wakes the committer), so that the messages of
// one notification message — a publish response's DataSetMessages — go in
// one commit rather than the first alone and the rest one interval later.
func (l *Log) gather(timer *time.Timer) {
	deadline := time.Now().Add(l.opts.CommitInterval)
	for l.handing() {
		wait := time.Until(deadline)
		if wait <= 0 {
			return
		}
		timer.Reset(wait)
		select {
		case <-l.wake:
			timer.Stop()
		case <-timer.C:
			return
		}
	}
}

// handing reports whether a stream's newest pending message is of a
// notification message not yet handed over whole.
func (l *Log) handing() bool {
	return l.anyStream(func(s *Stream) bool {
		n := len(s.pending)
		if n == 0 {
			return false
		}
		tok := uint32(s.pending[n-1].Token)
		return tok != 0 && !s.closed && !s.removed && (!s.handedOK || int32(tok-s.handed) > 0)
	})
}

// fail stops the log after a failed commit.
func (l *Log) fail(err error) {
	l.commitErrors.Add(1)
	l.log.Error("storelog: commit failed; the log stopped (messages are no longer acknowledged upstream)", "err", err)
	l.broken.Store(true)
	l.mu.Lock()
	l.failed = fmt.Errorf("storelog: commit: %w", err)
	l.room.Broadcast()
	l.mu.Unlock()
	// What waits for a commit gets none: nothing is acknowledged upstream
	// that is not in the file.
	for _, s := range l.snapshot() {
		s.mu.Lock()
		pend := s.pending
		s.pending, s.pendingBytes = nil, 0
		s.mu.Unlock()
		for _, m := range pend {
			s.stats.undelivered.Add(1)
			m.Done(false)
		}
	}
}

// commitOnce commits one round; did is false when there was nothing to do.
// What the producers handed over whole is saved with the next commit, and
// at the last one (closing).
//
// Appends and the readers' claims are committed at once; what only moves
// a cursor (records settled) or deletes settled records waits for the next
// of them, or for lazy (the idle save), the last commit (closing), or for
// room being short:
// after each append commit it would otherwise take a commit (and an
// fdatasync) of its own.
func (l *Log) commitOnce(rounds []round, now time.Time, expire, lazy bool) ([]round, bool, error) {
	l.mu.Lock()
	closing := l.closing
	l.mu.Unlock()
	lazy = lazy || closing || l.roomShort()
	budget := maxCommitBytes
	work := false
	grace := now.Sub(l.opened) < loadGrace
	var gone []*Stream
	var taken int64 // pending bytes taken, in l.used already
	for _, s := range l.snapshot() {
		s.mu.Lock()
		removed := s.removed
		s.mu.Unlock()
		if removed {
			gone = append(gone, s)
			work = true
			continue
		}
		batch, n, whole, wholeOK := s.take(budget)
		budget -= n
		taken += int64(n)
		rd := round{s: s, batch: batch, taken: n}
		s.mu.Lock()
		rd.giveWay = s.giveWay
		rd.maxBytes, rd.maxAge, rd.bytes = s.maxBytes, s.maxAge, s.bytes
		rd.last, rd.cum, rd.first = s.last, s.cum, s.first
		rd.upTo, rd.upKnown = s.upTo, s.upKnown
		savedUp, savedOK := s.upTo, s.upSaved
		readers := s.readers
		held := s.awaitedLocked(grace)
		s.mu.Unlock()
		// The newest token in the batch may have more messages to come:
		// every one before it is whole, and so is the one the producer said
		// it handed over entirely (its messages were all pending).
		for i := len(batch) - 1; i >= 0; i-- {
			if tok := uint32(batch[i].Token); tok != 0 {
				rd.upTo, rd.upKnown = tok-1, true
				break
			}
		}
		if wholeOK && (!rd.upKnown || int32(whole-rd.upTo) > 0) {
			rd.upTo, rd.upKnown = whole, true
		}
		rd.upChanged = rd.upKnown && (!savedOK || rd.upTo != savedUp)
		if closing && rd.upChanged {
			work = true
		}
		floor := rd.last + uint64(len(batch))
		for _, r := range readers {
			st, changed, claim := r.cursorMove()
			if claim {
				work = true // a reader waits for its claim to hand records out
			}
			// The records appended now are claimed for their readers in the
			// same transaction: a reader then hands them out without
			// waiting for a commit of its own.
			if want := min(floor, st.acked+uint64(len(r.flight))); len(batch) > 0 && want > st.claimed {
				st.claimed, changed = want, true
			}
			if changed {
				rd.cursors = append(rd.cursors, cursorMove{r, st})
			}
			floor = min(floor, st.acked)
		}
		floor = min(floor, held)
		if len(batch) > 0 || lazy && (len(rd.cursors) > 0 || floor >= rd.first && rd.first <= rd.last+uint64(len(batch))) {
			work = true
		}
		rd.head = floor // records up to floor may go
		rounds = append(rounds, rd)
	}
	if !work && !expire && !(l.dropping() && l.overBytes()) && !overOwn(rounds) {
		return rounds, false, nil
	}
	start := time.Now()
	nowNano := now.UnixNano()
	err := l.db.Update(func(tx *bolt.Tx) error {
		sb, st, cb := tx.Bucket(bucketStreams), tx.Bucket(bucketState), tx.Bucket(bucketCursors)
		var total int64
		for _, s := range gone {
			if err := removeStream(tx, s.name); err != nil {
				return err
			}
		}
		for i := range rounds {
			rd := &rounds[i]
			name := []byte(rd.s.name)
			b, err := sb.CreateBucketIfNotExists(name)
			if err != nil {
				return err
			}
			b.FillPercent = fillPercent
			for _, m := range rd.batch {
				rd.last++
				t := newTailMessage(m)
				l.hdr = appendHeader(l.hdr[:0], m, nowNano, rd.cum)
				t.SetPayload2(l.hdr, m.Payload())
				rd.cum += uint64(m.Len())
				rec := t.Payload()
				ps := l.partSize
				for off, part := 0, 0; off < len(rec); off, part = off+ps, part+1 {
					k := key(rd.last, part)
					if err := b.Put(k[:], rec[off:min(off+ps, len(rec))]); err != nil {
						t.Done(true)
						return err
					}
				}
				rd.tails = append(rd.tails, tailRec{seq: rd.last, appended: nowNano, m: t})
				rd.added += int64(t.Len())
			}
			if len(rd.batch) > 0 || rd.upChanged {
				if err := st.Put(name, streamState{last: rd.last, cum: rd.cum, upTo: rd.upTo, upKnown: rd.upKnown}.encode()); err != nil {
					return err
				}
			}
			// Records every consumer settled.
			if err := rd.deleteThrough(b, min(rd.head, rd.last), nil); err != nil {
				return err
			}
			if age := minAge(l.opts.MaxAge, rd.maxAge); expire && age > 0 {
				limit := nowNano - int64(age)
				if err := rd.deleteThrough(b, rd.last, func(v []byte) bool {
					at, err := recordAppended(v)
					return err != nil || at < limit
				}); err != nil {
					return err
				}
			}
			if l.opts.Policy == config.DropOldest && rd.maxBytes > 0 {
				if err := rd.dropOwn(b); err != nil {
					return err
				}
			}
			for _, c := range rd.cursors {
				if err := cb.Put(cursorKey(rd.s.name, c.r.consumer), c.state.encode()); err != nil {
					return err
				}
			}
			total += rd.added - rd.deleted
		}
		if l.dropping() {
			return l.dropOldest(sb, rounds, total)
		}
		return nil
	})
	if err != nil {
		l.used.Add(-taken)
		for i := range rounds {
			if rounds[i].giveWay {
				l.yielding.Add(-int64(rounds[i].taken))
			}
			for _, t := range rounds[i].tails {
				t.m.Done(true)
			}
			for _, m := range rounds[i].batch {
				rounds[i].s.stats.undelivered.Add(1)
				m.Done(false)
			}
		}
		return rounds, false, err
	}
	l.commits.Add(1)
	if !l.opts.NoSync {
		l.syncs.Add(1)
	}
	l.commitNanos.Add(int64(time.Since(start)))
	l.forget(gone)
	l.applyRounds(rounds)
	return rounds, true, nil
}

// loadGrace is how long after Open the durable cursors the file holds
// keep their records for consumers whose readers are not made yet (a
// variable for the tests).
var loadGrace = 30 * time.Second

// awaitedLocked returns the lowest cursor the file held of a consumer that
// has no reader yet, while grace lasts (^0: none; s.mu held): the records
// after it are not deleted before the consumer's reader is made (the
// streams' readers are made one by one after Open). Past the grace, a
// consumer that did not come back (a sink removed) holds nothing.
func (s *Stream) awaitedLocked(grace bool) uint64 {
	low := ^uint64(0)
	if !grace {
		return low
	}
	for consumer, c := range s.cursors {
		if !slices.ContainsFunc(s.readers, func(r *Reader) bool { return r.consumer == consumer }) {
			low = min(low, c.acked)
		}
	}
	return low
}

// deleteThrough deletes the stream's records from its head up to seq
// through, while cond (when set) says so of each record's first part; b is
// its bucket.
func (rd *round) deleteThrough(b *bolt.Bucket, through uint64, cond func(first []byte) bool) error {
	if rd.first > through {
		return nil
	}
	c := b.Cursor()
	var cur uint64 // the record being deleted, part by part
	for k, v := c.First(); k != nil; k, v = c.First() {
		seq := seqOf(k)
		if seq != cur {
			if seq > through || cond != nil && !cond(v) {
				break
			}
			cur = seq
			rd.ndeleted++
			if cond != nil {
				rd.expired++
			}
		}
		rd.deleted += int64(len(v))
		if err := c.Delete(); err != nil {
			return err
		}
		rd.first = seq + 1
	}
	if k, _ := c.First(); k == nil {
		rd.first = rd.last + 1
	}
	return nil
}

// roomShort reports whether the log, or a stream with a bound of its own,
// is over half full: then settled records are deleted at once, for the
// producers that may wait for room.
func (l *Log) roomShort() bool {
	return 2*l.used.Load() > l.opts.MaxBytes || l.anyStream(func(s *Stream) bool {
		return s.maxBytes > 0 && 2*(s.bytes+int64(s.pendingBytes)) > s.maxBytes
	})
}

// minAge is the shorter of two age bounds, 0 being none.
func minAge(a, b time.Duration) time.Duration {
	if a <= 0 || b > 0 && b < a {
		return b
	}
	return a
}

// overOwn reports whether a stream holds more than its own MaxBytes under
// the drop-oldest policy (a commit is due to drop its oldest records).
func overOwn(rounds []round) bool {
	for i := range rounds {
		if rd := &rounds[i]; rd.maxBytes > 0 && rd.s.l.opts.Policy == config.DropOldest && rd.bytes > rd.maxBytes {
			return true
		}
	}
	return false
}

// dropOwn deletes the stream's oldest records until it fits its own
// MaxBytes (drop-oldest), never the one record just appended alone; b is
// its bucket.
func (rd *round) dropOwn(b *bolt.Bucket) error {
	for rd.bytes+rd.added-rd.deleted > rd.maxBytes && rd.first <= rd.last {
		if rd.first == rd.last && len(rd.batch) > 0 {
			return nil // a stream of one record takes it whatever its size
		}
		before := rd.ndeleted
		if err := rd.deleteThrough(b, rd.first, nil); err != nil {
			return err
		}
		if rd.ndeleted == before {
			return nil
		}
		rd.dropped++
	}
	return nil
}

// overBytes reports whether the log holds more than MaxBytes.
func (l *Log) overBytes() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes > l.opts.MaxBytes
}

// dropOldest deletes the oldest records, whichever stream holds them (with
// the block policy: whichever give-way stream), until the log (with this
// round's change of total bytes) fits MaxBytes.
func (l *Log) dropOldest(sb *bolt.Bucket, rounds []round, total int64) error {
	l.mu.Lock()
	size := l.bytes + total
	l.mu.Unlock()
	for size > l.opts.MaxBytes {
		var oldest *round
		var oldestAt int64
		var ob *bolt.Bucket
		for i := range rounds {
			rd := &rounds[i]
			if l.opts.Policy != config.DropOldest && !rd.giveWay {
				continue
			}
			b := sb.Bucket([]byte(rd.s.name))
			if b == nil {
				continue
			}
			k, v := b.Cursor().First()
			if k == nil {
				continue
			}
			// Never the record just appended alone: a log of one record
			// takes it whatever its size.
			if n, err := recordTotal(v); err == nil && seqOf(k) == rd.last && size-int64(n) <= 0 {
				continue
			}
			at, err := recordAppended(v)
			if err != nil {
				at = 0
			}
			if oldest == nil || at < oldestAt {
				oldest, oldestAt, ob = rd, at, b
			}
		}
		if oldest == nil {
			return nil
		}
		before := oldest.deleted
		if err := oldest.deleteThrough(ob, oldest.first, nil); err != nil {
			return err
		}
		oldest.dropped++
		size -= oldest.deleted - before
	}
	return nil
}

// forget drops removed streams, now out of the file, from the log.
func (l *Log) forget(gone []*Stream) {
	if len(gone) == 0 {
		return
	}
	var evicted []*sink.Message
	l.mu.Lock()
	for _, s := range gone {
		l.order = slices.DeleteFunc(l.order, func(x *Stream) bool { return x == s })
		s.mu.Lock()
		l.bytes -= s.bytes
		l.used.Add(-s.bytes)
		if s.giveWay {
			l.yielding.Add(-s.bytes)
		}
		for _, t := range s.tail {
			evicted = append(evicted, t.m)
		}
		s.tail, s.records, s.bytes = nil, 0, 0
		s.mu.Unlock()
	}
	l.room.Broadcast()
	l.mu.Unlock()
	for _, m := range evicted {
		m.Done(true)
	}
}

// applyRounds publishes a committed round to the streams and readers and
// settles its messages.
func (l *Log) applyRounds(rounds []round) {
	var evicted []*sink.Message
	var dropped uint64
	var delta, deleted, yielded int64
	room := false
	for i := range rounds {
		rd := &rounds[i]
		s := rd.s
		s.mu.Lock()
		s.committing = false
		s.last, s.cum = rd.last, rd.cum
		s.upTo, s.upKnown = rd.upTo, rd.upKnown
		s.upSaved = s.upSaved || rd.upKnown
		s.first = max(s.first, rd.first)
		if s.first > s.last {
			s.first = s.last + 1
		}
		s.records += int64(len(rd.batch)) - rd.ndeleted
		s.bytes += rd.added - rd.deleted
		for _, t := range rd.tails {
			evicted = s.pushTailLocked(t, evicted)
		}
		evicted = s.trimTailLocked(evicted)
		readers := s.readers
		s.mu.Unlock()
		for _, c := range rd.cursors {
			c.r.committed(c.state)
		}
		for _, r := range readers {
			r.signal()
		}
		s.stats.appended.Add(uint64(len(rd.batch)))
		s.stats.appendedBytes.Add(uint64(rd.added))
		s.stats.dropped.Add(rd.dropped)
		s.stats.expired.Add(rd.expired)
		dropped += rd.dropped
		delta += rd.added - rd.deleted
		deleted += rd.deleted
		if rd.giveWay {
			yielded += rd.deleted
		}
		room = room || rd.deleted > 0 || len(rd.batch) > 0
		for _, m := range rd.batch {
			m.Done(true)
		}
		s.giveBack(rd.batch)
		rd.batch, rd.tails, rd.cursors = nil, nil, nil
	}
	// The records' bytes were in l.used while pending; what was deleted
	// leaves it.
	l.used.Add(-deleted)
	l.yielding.Add(-yielded)
	l.mu.Lock()
	l.bytes += delta
	if room {
		l.room.Broadcast()
	}
	l.mu.Unlock()
	if dropped > 0 {
		l.logDrops(dropped)
	}
	for _, m := range evicted {
		m.Done(true)
	}
}
