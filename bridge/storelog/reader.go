package storelog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
)

// readBatch bounds the records a Reader takes per step.
const readBatch = 64

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	// Accept, when set, says which kinds of message the consumer takes;
	// the others are passed over (settled at once).
	Accept func(sink.Kind) bool
}

// Reader feeds one consumer's queue (a sink's Output) from one stream,
// through the consumer's durable cursor: see the package comment. It
// implements sink.Tracker for the messages it makes.
type Reader struct {
	s          *Stream
	consumer   string
	q          sink.Queue
	accept     func(sink.Kind) bool
	atMostOnce bool
	log        *slog.Logger

	wake   chan struct{} // cap 1
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc

	nextSeq atomic.Uint64 // next, for the stream's tail trimming

	mu          sync.Mutex
	next        uint64 // next record to hand out
	acked       uint64 // every record up to it settled
	claimed     uint64 // durable claim: records up to it may be handed out
	claimReq    uint64 // claim asked of the committer
	saved       cursorState
	redeliverTo uint64   // records up to it are marked redelivered
	flight      []uint8  // states of acked+1 … next-1, ring from fhead
	flightAt    []int64  // their append times
	flightCum   []uint64 // the stream's payload bytes up to and with each
	fhead       int
	ackedCum    uint64 // the stream's payload bytes up to and with acked
	cumKnown    bool
	started     bool
	closed      bool
	live        *sink.Message // a Live message to hand after record liveAt (see offerLive)
	liveAt      uint64
	names       map[string]string // interned writer and field names of records read from the file
	scratch     []byte            // a redelivered payload being marked
	record      []byte            // a record read from the file, its parts put together

	stats readerCounters
}

// flight states.
const (
	flightOut    uint8 = iota + 1 // handed to the queue
	flightDone                    // settled delivered
	flightFailed                  // settled undelivered (the queue closed)
)

type readerCounters struct {
	delivered, skipped, redelivered, passed, abandoned atomic.Uint64
	live, liveDropped                                  atomic.Uint64
}

// NewReader makes the reader of consumer on s feeding q; Start starts it.
// A consumer with a durable cursor continues from it: at-least-once (q's
// guarantee) after its last settled record, marking those it had claimed
// as redelivered; at-most-once after its claim. A new consumer starts at
// the stream's end.
func (s *Stream) NewReader(consumer string, q sink.Queue, opts ReaderOptions) (*Reader, error) {
	if consumer == "" || q == nil {
		return nil, errors.New("storelog: a reader needs a consumer name and a queue")
	}
	return s.newReader(consumer, q, opts)
}

// NewPullReader makes the reader of consumer on s whose owner takes the
// records when it chooses, on its own goroutine (Pull), instead of having
// them handed to a queue: a consumer that sends what the log held in one
// go (a Sparkplug node at its next birth). Its durable cursor is
// at-least-once: after a restart it continues after the last record Pull
// handed out and saw taken. A new consumer starts at the stream's end.
func (s *Stream) NewPullReader(consumer string) (*Reader, error) {
	if consumer == "" {
		return nil, errors.New("storelog: a reader needs a consumer name")
	}
	return s.newReader(consumer, nil, ReaderOptions{})
}

// newReader makes a reader feeding q, or a pull reader (q nil).
func (s *Stream) newReader(consumer string, q sink.Queue, opts ReaderOptions) (*Reader, error) {
	pull := q == nil
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return nil, fmt.Errorf("storelog: stream %s was removed", s.name)
	}
	for _, r := range s.readers {
		if r.consumer == consumer {
			return nil, fmt.Errorf("storelog: stream %s has a reader for %s", s.name, consumer)
		}
	}
	amo := !pull && q.Guarantee() != config.AtLeastOnce
	w := s.l.opts.ClaimWindow
	switch {
	case pull:
		w = 0 // Pull moves the cursor as it goes: nothing is out
	case amo:
		// What a crash abandons is what an at-most-once consumer has out.
		w = max(w/4, 2)
	}
	r := &Reader{
		s: s, consumer: consumer, q: q, accept: opts.Accept,
		atMostOnce: amo,
		log:        s.l.log.With("stream", s.name, "consumer", consumer),
		wake:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		flight:     make([]uint8, w),
		flightAt:   make([]int64, w),
		flightCum:  make([]uint64, w),
		names:      map[string]string{},
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	c, ok := s.cursors[consumer]
	switch {
	case !ok:
		c = cursorState{acked: s.last, claimed: s.last}
	case pull:
		c.claimed = max(c.claimed, c.acked)
	case r.atMostOnce:
		// Nothing twice: what was claimed and not settled at the stop is
		// not handed out again.
		if lost := c.claimed - c.acked; lost > 0 {
			r.stats.abandoned.Add(lost)
			r.log.Warn("storelog: an at-most-once sink does not get again what it was handed before the stop and had not written", "messages", lost)
		}
		c.acked = c.claimed
	default:
		r.redeliverTo = c.claimed
	}
	r.acked, r.claimed, r.claimReq, r.saved = c.acked, c.claimed, c.claimed, c
	if !ok {
		// Saved at the next commit, so that a restart before anything was
		// read starts here too (a pull reader claims nothing that would
		// save it with the first records: its saved state is one it never
		// has).
		r.saved = cursorState{}
		if pull {
			r.saved.acked = ^uint64(0)
		}
	}
	r.next = r.acked + 1
	r.nextSeq.Store(r.next)
	s.readers = append(s.readers, r)
	return r, nil
}

// Consumer is the consumer's name.
func (r *Reader) Consumer() string { return r.consumer }

// Start starts the reader's goroutine. Calling it again does nothing.
func (r *Reader) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.closed || r.q == nil {
		return
	}
	r.started = true
	go r.run()
}

// Close stops handing out records and waits for the reader's goroutine
// until ctx ends (it may be waiting in a full Block queue: closing the
// queue releases it). The reader stays registered: the settlements still
// to come move its cursor, saved by the log's next commit (Log.Close makes
// one). Remove unregisters it.
func (r *Reader) Close(ctx context.Context) error {
	r.mu.Lock()
	started := r.started
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	if !started {
		r.releaseLive() // run's, once started
		return nil
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("storelog: reader %s of %s still waiting for its queue: %w", r.consumer, r.s.name, ctx.Err())
	}
}

// Remove unregisters a closed reader from its stream; its cursor stays in
// the file (Stream.DropCursor deletes it).
func (r *Reader) Remove() {
	s := r.s
	s.mu.Lock()
	for i, x := range s.readers {
		if x == r {
			s.readers = append(s.readers[:i:i], s.readers[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
}

func (r *Reader) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run hands records to the queue as the claim allows.
func (r *Reader) run() {
	defer close(r.done)
	defer r.releaseLive()
	s, w := r.s, uint64(len(r.flight))
	var recs [readBatch]record
	for {
		if r.ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		first, last := s.first, s.last
		s.mu.Unlock()
		r.mu.Lock()
		if r.next < first && r.acked+1 == r.next {
			// Removed before this consumer had them (drop-oldest, maxAge).
			r.stats.skipped.Add(first - r.next)
			r.acked, r.next = first-1, first
			r.nextSeq.Store(r.next)
		}
		ask := false
		if want := min(last, r.acked+w); want > r.claimed && want > r.claimReq &&
			(r.next > r.claimed || want-r.claimed >= w/4) {
			r.claimReq, ask = want, true
		}
		from, to := r.next, min(r.claimed, last, r.next+readBatch-1)
		n := 0
		if from >= first && from <= to {
			n = int(to - from + 1)
			for seq := from; seq <= to; seq++ {
				r.flight[r.slot(seq)] = flightOut
			}
			r.next = to + 1
			r.nextSeq.Store(r.next)
		}
		r.mu.Unlock()
		if ask {
			s.l.signal()
		}
		if n == 0 {
			if live := r.takeLive(last); live != nil {
				r.q.Enqueue(live)
				continue
			}
			select {
			case <-r.wake:
			case <-r.ctx.Done():
				return
			}
			continue
		}
		got := r.fetch(from, recs[:n])
		r.mu.Lock()
		for i := range got {
			if seq := got[i].seq; seq > r.acked {
				r.flightAt[r.slot(seq)] = got[i].appended
				r.flightCum[r.slot(seq)] = got[i].cumAfter
			}
			if i == 0 && !r.cumKnown {
				r.ackedCum, r.cumKnown = got[i].cumAfter-got[i].size, true
			}
		}
		r.mu.Unlock()
		for i := range got {
			rc := &got[i]
			if rc.m == nil {
				// Gone from the file meanwhile (drop-oldest): passed over.
				r.stats.skipped.Add(1)
				r.Settled(rc.seq, true)
				continue
			}
			if r.accept != nil && !r.accept(rc.m.Kind) {
				r.stats.passed.Add(1)
				rc.m.Tracker = nil
				rc.m.Done(true)
				r.Settled(rc.seq, true)
				continue
			}
			if rc.redelivered {
				r.stats.redelivered.Add(1)
			}
			r.q.Enqueue(rc.m)
		}
	}
}

// offerLive gives the reader a Live message (a keep-alive) that the stream
// did not log, made when the stream's last record was at and nothing was
// pending: the reader's goroutine hands it to the queue once it has handed
// every record up to at, and drops it if a record came after it meanwhile
// (the consumer is behind, or data followed: either way the keep-alive is
// stale). A newer one replaces one not handed yet. Pull readers and
// consumers that do not accept its kind get none. It takes a reference of
// its own.
func (r *Reader) offerLive(m *sink.Message, at uint64) {
	if r.q == nil || (r.accept != nil && !r.accept(m.Kind)) {
		return
	}
	m.Retain(1)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		m.Done(true)
		return
	}
	old := r.live
	r.live, r.liveAt = m, at
	r.mu.Unlock()
	if old != nil {
		r.stats.liveDropped.Add(1)
		old.Done(true)
	}
	r.signal()
}

// releaseLive lets go of a Live message not handed (the reader ends; a
// closed reader is offered none after).
func (r *Reader) releaseLive() {
	r.mu.Lock()
	m := r.live
	r.live = nil
	r.mu.Unlock()
	if m != nil {
		m.Done(true)
	}
}

// takeLive returns the Live message to hand now, if the reader has handed
// every record (last is the stream's) and none came after the message;
// one that is stale is dropped.
func (r *Reader) takeLive(last uint64) *sink.Message {
	r.mu.Lock()
	m, at := r.live, r.liveAt
	if m == nil {
		r.mu.Unlock()
		return nil
	}
	r.live = nil
	fresh := at == last && r.next == last+1
	r.mu.Unlock()
	if !fresh {
		r.stats.liveDropped.Add(1)
		m.Done(true)
		return nil
	}
	r.stats.live.Add(1)
	return m
}

// ErrNotPull is returned by Pull on a reader that feeds a queue.
var ErrNotPull = errors.New("storelog: not a pull reader")

// Pull hands the committed records after the reader's cursor to f, oldest
// first, on the caller's goroutine, and returns how many f took. f returns
// false to stop: that record and the ones after it stay for the next Pull.
// m is valid during the call only: its payload, Kind, Addr (Writer and
// Field as appended), Created as the producer set them, Token the record's
// sequence number; f must not call m.Done. Records removed before the
// reader had them (drop-oldest, maxAge) are passed over, counted as
// skipped. What f took moves the cursor, which the log's next commit saves
// (Pull asks for one): a crash before it hands those records out again.
// One Pull at a time, on a pull reader (NewPullReader) that is not closed.
func (r *Reader) Pull(f func(m *sink.Message) bool) (int, error) {
	if r.q != nil {
		return 0, ErrNotPull
	}
	s := r.s
	var recs [readBatch]record
	took, moved := 0, false
	defer func() {
		if moved {
			s.l.signal()
		}
	}()
	for {
		s.mu.Lock()
		first, last := s.first, s.last
		s.mu.Unlock()
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return took, ErrClosed
		}
		if r.next < first {
			// Removed before this consumer had them.
			r.stats.skipped.Add(first - r.next)
			r.takenLocked(first-1, 0)
			moved = true
		}
		from, to := r.next, min(last, r.next+readBatch-1)
		r.mu.Unlock()
		if from > to {
			return took, nil
		}
		got := r.fetch(from, recs[:to-from+1])
		stop := false
		for i := range got {
			rc := &got[i]
			switch {
			case rc.m == nil && stop:
			case rc.m == nil:
				// Gone from the file meanwhile: passed over.
				r.stats.skipped.Add(1)
				r.taken(rc.seq, 0)
				moved = true
			case stop:
				rc.m.Tracker = nil
				rc.m.Done(true)
			default:
				rc.m.Tracker = nil
				ok := f(rc.m)
				rc.m.Done(true)
				if !ok {
					stop = true
					continue
				}
				r.taken(rc.seq, rc.cumAfter)
				r.stats.delivered.Add(1)
				took++
				moved = true
			}
		}
		if stop {
			return took, nil
		}
	}
}

// taken moves a pull reader's cursor past seq; cum, when not 0, is the
// stream's payload bytes up to and with it.
func (r *Reader) taken(seq, cum uint64) {
	r.mu.Lock()
	r.takenLocked(seq, cum)
	r.mu.Unlock()
}

func (r *Reader) takenLocked(seq, cum uint64) {
	r.acked, r.claimed, r.next = seq, max(r.claimed, seq), seq+1
	r.nextSeq.Store(r.next)
	if cum != 0 {
		r.ackedCum, r.cumKnown = cum, true
	}
}

// record is a message made from a record, or nil when the record is gone.
type record struct {
	seq         uint64
	m           *sink.Message
	redelivered bool
	appended    int64  // UnixNano of its append
	cumAfter    uint64 // the stream's payload bytes up to and with it
	size        uint64 // its payload bytes
}

// slot is the flight index of seq (acked < seq < next; r.mu held).
func (r *Reader) slot(seq uint64) int {
	return (r.fhead + int(seq-r.acked-1)) % len(r.flight)
}

// fetch makes the messages of the records from … from+len(out)-1: from the
// stream's tail, and from the file for those no longer there.
func (r *Reader) fetch(from uint64, out []record) []record {
	s := r.s
	var held [readBatch]*sink.Message
	missing := -1
	s.mu.Lock()
	for i := range out {
		out[i] = record{seq: from + uint64(i)}
		if t := s.tailAtLocked(out[i].seq); t != nil {
			t.m.Retain(1)
			held[i] = t.m
		} else if missing < 0 {
			missing = i
		}
	}
	var evicted []*sink.Message
	evicted = s.trimTailLocked(evicted)
	s.mu.Unlock()
	for _, m := range evicted {
		m.Done(true)
	}
	for i := range out {
		if held[i] != nil {
			r.make(&out[i], held[i].Payload(), &held[i].Addr)
			held[i].Done(true)
		}
	}
	if missing >= 0 {
		err := s.l.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketStreams).Bucket([]byte(s.name))
			if b == nil {
				return nil
			}
			c := b.Cursor()
			k0 := key(out[missing].seq, 0)
			k, v := c.Seek(k0[:])
			for i := missing; i < len(out); i++ {
				if held[i] != nil {
					continue
				}
				for k != nil && seqOf(k) < out[i].seq {
					k, v = c.Next()
				}
				if k == nil || seqOf(k) != out[i].seq || partOf(k) != 0 {
					continue
				}
				// The record's parts, put together.
				r.record = append(r.record[:0], v...)
				for k, v = c.Next(); k != nil && seqOf(k) == out[i].seq; k, v = c.Next() {
					r.record = append(r.record, v...)
				}
				r.make(&out[i], r.record, nil)
			}
			return nil
		})
		if err != nil {
			r.log.Error("storelog: reading the log failed", "err", err)
		}
	}
	return out
}

// make fills rc with a message made from record b; addr, when set, is the
// original message's (its names need no interning).
func (r *Reader) make(rc *record, b []byte, addr *sink.Addr) {
	h, err := decodeRecord(b)
	if err != nil {
		r.log.Error("storelog: a record cannot be read; passed over", "seq", rc.seq, "err", err)
		return
	}
	m := sink.NewMessage(len(h.payload) + len(RedeliveredPrefix))
	rc.redelivered = rc.seq <= r.redeliverTo
	if rc.redelivered && bytes.HasPrefix(h.payload, []byte(redeliveredMark)) {
		r.scratch = append(append(append(r.scratch[:0], redeliveredMark...), RedeliveredPrefix...), h.payload[len(redeliveredMark):]...)
		m.SetPayload(r.scratch)
	} else {
		m.SetPayload(h.payload)
	}
	m.Kind, m.Retained, m.Created = h.kind, h.retained, h.created
	if addr != nil {
		m.Addr = *addr
	} else {
		m.Addr = sink.Addr{Publisher: r.s.l.opts.Publisher, Group: r.s.name, Writer: r.intern(h.writer), Field: r.intern(h.field)}
	}
	m.Tracker, m.Token = r, rc.seq
	rc.m = m
	rc.appended, rc.size = h.appended, uint64(len(h.payload))
	rc.cumAfter = h.cum + rc.size
}

// maxNames bounds the interned names of a reader.
const maxNames = 1 << 16

func (r *Reader) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := r.names[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(r.names) < maxNames {
		r.names[s] = s
	}
	return s
}

// Settled implements sink.Tracker: the queue is done with record token.
func (r *Reader) Settled(token uint64, delivered bool) {
	r.mu.Lock()
	if token <= r.acked || token >= r.next {
		r.mu.Unlock()
		return
	}
	i := r.slot(token)
	if delivered {
		r.flight[i] = flightDone
	} else {
		r.flight[i] = flightFailed
	}
	moved := false
	for r.acked+1 < r.next && r.flight[r.fhead] == flightDone {
		r.flight[r.fhead] = 0
		if r.flightCum[r.fhead] != 0 {
			r.ackedCum, r.cumKnown = r.flightCum[r.fhead], true
		}
		r.fhead = (r.fhead + 1) % len(r.flight)
		r.acked++
		moved = true
	}
	claimed := r.claimed
	r.mu.Unlock()
	if delivered {
		r.stats.delivered.Add(1)
	}
	if moved {
		// The reader waits for this only when records past its claim are
		// in the file (its window was full): then it may claim more.
		// Otherwise the next commit's records wake it.
		s := r.s
		s.mu.Lock()
		more := s.last > claimed
		s.mu.Unlock()
		if more {
			r.signal()
		}
		s.l.poke() // the moved cursor is saved by a commit or the idle save
	}
}

// cursorMove returns the cursor to save, whether it changed since the
// last save, and whether its claim did: the reader waits for that one
// (committer).
func (r *Reader) cursorMove() (c cursorState, changed, claim bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c = cursorState{acked: r.acked, claimed: max(r.claimed, r.claimReq)}
	return c, c != r.saved, c.claimed != r.saved.claimed
}

// committed records a committed cursor (committer, after the commit).
func (r *Reader) committed(c cursorState) {
	r.mu.Lock()
	r.saved = c
	r.claimed = max(r.claimed, c.claimed)
	r.mu.Unlock()
	r.signal()
}

// ReaderStats are a consumer's position in its stream.
type ReaderStats struct {
	Consumer  string           `json:"consumer"`
	Guarantee config.Guarantee `json:"guarantee"`
	// Delivered counts records the consumer's queue settled delivered.
	Delivered uint64 `json:"delivered"`
	// Redelivered counts records handed out again after a restart (marked).
	Redelivered uint64 `json:"redelivered"`
	// Skipped counts records removed (drop-oldest, maxAge) before this
	// consumer had them; Abandoned those an at-most-once consumer had been
	// handed and not written before a restart.
	Skipped   uint64 `json:"skipped"`
	Abandoned uint64 `json:"abandoned"`
	// KeepAlives counts the keep-alives (Live messages, not logged) handed
	// to the queue; KeepAlivesDropped those not handed because records
	// came before or after them.
	KeepAlives        uint64 `json:"keepAlives"`
	KeepAlivesDropped uint64 `json:"keepAlivesDropped"`
	// Backlog is what the consumer has not settled: records, their payload
	// bytes (once the reader read one: 0 before), and when the oldest of
	// those handed to its queue was appended (zero when none is out).
	BacklogMessages uint64    `json:"backlogMessages"`
	BacklogBytes    uint64    `json:"backlogBytes"`
	BacklogSince    time.Time `json:"backlogSince"`
	Acked           uint64    `json:"acked"`   // cursor: every record up to it settled
	Claimed         uint64    `json:"claimed"` // records up to it may have been handed out
}

// Stats returns the reader's counters and backlog.
func (r *Reader) Stats() ReaderStats {
	s := r.s
	s.mu.Lock()
	last, cum := s.last, s.cum
	s.mu.Unlock()
	r.mu.Lock()
	st := ReaderStats{Consumer: r.consumer, Acked: r.acked, Claimed: r.claimed, Guarantee: config.AtLeastOnce}
	if r.q != nil {
		st.Guarantee = r.q.Guarantee()
	}
	if r.cumKnown && cum > r.ackedCum {
		st.BacklogBytes = cum - r.ackedCum
	}
	if r.acked+1 < r.next {
		if at := r.flightAt[r.fhead]; at > 0 {
			st.BacklogSince = time.Unix(0, at)
		}
	}
	r.mu.Unlock()
	if last > st.Acked {
		st.BacklogMessages = last - st.Acked
	}
	st.Delivered = r.stats.delivered.Load()
	st.Redelivered = r.stats.redelivered.Load()
	st.Skipped = r.stats.skipped.Load()
	st.Abandoned = r.stats.abandoned.Load()
	st.KeepAlives, st.KeepAlivesDropped = r.stats.live.Load(), r.stats.liveDropped.Load()
	return st
}
