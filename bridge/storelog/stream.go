package storelog

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
)

// Stream is one writer group's part of the log. It implements sink.Queue
// (at-least-once: a message is settled delivered once its record is
// committed) and sink.RoomWaiter; Readers read it.
type Stream struct {
	l    *Log
	name string
	room *sync.Cond // l.room: producers waiting for room

	mu           sync.Mutex
	pending      []*sink.Message // enqueued, not yet committed; each holds one reference
	spare        []*sink.Message // the slice the committer gave back, reused
	pendingBytes int
	committing   bool // the committer took pending messages it has not applied yet
	// handed: every message of a token up to it was enqueued (Handed).
	handed   uint32
	handedOK bool
	removed  bool
	closed   bool          // the log closed: nothing more is taken
	giveWay  bool          // StreamOptions.GiveWay
	maxBytes int64         // StreamOptions.MaxBytes (0: none of its own)
	maxAge   time.Duration // StreamOptions.MaxAge (0: none of its own)

	// Committed state, written by the committer (and RemoveStream) under mu.
	first, last uint64 // records first..last are in the file (first > last: none)
	cum         uint64 // payload bytes of every record ever appended
	// upTo: every message of a token (an OPC UA sequence number) up to it,
	// in serial number order, is in the log (upKnown: one is).
	upTo      uint32
	upKnown   bool
	upSaved   bool // upTo is the one in the file
	records   int64
	bytes     int64 // records' bytes in the file
	tail      []tailRec
	tailBytes int
	readers   []*Reader
	cursors   map[string]cursorState // durable cursors by consumer, as loaded

	stats streamCounters
}

type tailRec struct {
	seq      uint64
	appended int64
	m        *sink.Message // payload: the record
}

type streamCounters struct {
	appended, appendedBytes, dropped, expired, undelivered atomic.Uint64
	waits, duplicates                                      atomic.Uint64
}

// Name is the stream's name (sink.Queue).
func (s *Stream) Name() string { return s.name }

// Guarantee is at-least-once: a message is settled delivered once its record
// is committed.
func (s *Stream) Guarantee() config.Guarantee { return config.AtLeastOnce }

// fullLocked reports whether a message of n bytes must wait (s.mu held).
func (s *Stream) fullLocked(n int) bool {
	o := &s.l.opts
	if len(s.pending) > 0 && (len(s.pending) >= o.PendingMessages || s.pendingBytes+n > o.PendingBytes) {
		return true
	}
	return false
}

// Enqueue takes over one reference of m and appends it at the next commit;
// m is then settled delivered (or undelivered if the log closes or fails
// first). It waits while the stream's pending messages are at their bound
// and, with the block policy, while the log is full.
//
// A message its producer marked redelivered (its MessageId starts with
// RedeliveredPrefix: a notification the OPC UA server republished after a
// restart) whose token is one the log holds every message of already is
// settled delivered at once and not appended again (counted as a
// duplicate): what the previous process appended reaches no sink twice.
func (s *Stream) Enqueue(m *sink.Message) {
	if m.Live {
		s.enqueueLive(m)
		return
	}
	if s.already(m) {
		s.stats.duplicates.Add(1)
		m.Done(true)
		return
	}
	n := recordSize(m)
	if !s.waitRoom(n) {
		s.stats.undelivered.Add(1)
		m.Done(false)
		return
	}
	s.mu.Lock()
	if s.removed || s.closed || s.l.broken.Load() {
		s.mu.Unlock()
		s.stats.undelivered.Add(1)
		m.Done(false)
		return
	}
	first := len(s.pending) == 0
	s.pending = append(s.pending, m)
	s.pendingBytes += n
	s.l.used.Add(int64(n))
	if s.giveWay {
		s.l.yielding.Add(int64(n))
	}
	s.mu.Unlock()
	if first {
		// A committer that has this stream's pending messages to take
		// already was woken by the first of them (or takes them in the
		// round it runs): one wake-up per batch, not per message.
		s.l.signal()
	}
}

// enqueueLive passes a Live message (a keep-alive) to the readers without
// logging it: it is worth nothing after an outage or a restart, and
// logging it would cost a commit (and an fdatasync) of its own at idle. It
// reaches only consumers that have had every record before it (none are
// pending or being committed, and the reader handed the last one); a
// consumer that is behind gets the records instead, which say more.
func (s *Stream) enqueueLive(m *sink.Message) {
	var buf [8]*Reader
	s.mu.Lock()
	caughtUp := !s.removed && !s.closed && !s.l.broken.Load() && len(s.pending) == 0 && !s.committing
	last := s.last
	readers := append(buf[:0], s.readers...)
	s.mu.Unlock()
	if caughtUp {
		for _, r := range readers {
			r.offerLive(m, last)
		}
	}
	m.Done(true)
}

// Handed implements sink.TokenWatcher: every message of token was
// enqueued, so once they are committed the log holds the token whole.
func (s *Stream) Handed(token uint64) {
	s.mu.Lock()
	s.handed, s.handedOK = uint32(token), true
	pending := len(s.pending) > 0
	s.mu.Unlock()
	if pending {
		s.l.signal() // a committer gathering the token's messages (gather)
	}
}

// already reports whether m is a redelivered message whose token's
// messages are all in the log.
func (s *Stream) already(m *sink.Message) bool {
	if m.Token == 0 || !bytes.HasPrefix(m.Payload(), redeliveredStart) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.upKnown && int32(uint32(m.Token)-s.upTo) <= 0
}

// redeliveredStart begins a NetworkMessage its producer marked redelivered.
var redeliveredStart = []byte(redeliveredMark + RedeliveredPrefix)

// WaitRoom implements sink.RoomWaiter: it waits until a message of n
// payload bytes fits. The producer then builds its message.
func (s *Stream) WaitRoom(n int) { s.waitRoom(n) }

// waitRoom waits for room for a record of n bytes; false when the log is
// closing or failed. Its fast path takes only s.mu; a producer that waits
// does so on the log's condition, which every change that makes room
// broadcasts under l.mu.
func (s *Stream) waitRoom(n int) bool {
	if s.roomFor(n) {
		return true
	}
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	s.stats.waits.Add(1)
	l.roomWaiters.Add(1)
	defer l.roomWaiters.Add(-1)
	l.signal() // settled records to delete: the committer need not wait for its idle save
	for {
		if l.closing || l.failed != nil {
			return false
		}
		if s.roomFor(n) {
			l.room.Signal() // pass the wake-up on (see sink.Output.WaitRoom)
			return true
		}
		l.room.Wait()
	}
}

// roomFor reports whether a record of n bytes may be enqueued now: the
// stream's pending messages are under their bounds and, with the block
// policy, the log has room, give-way streams' records counting as room (a
// log that holds nothing else takes a record of any size). A give-way
// stream never waits for room.
func (s *Stream) roomFor(n int) bool {
	s.mu.Lock()
	full := s.fullLocked(n) && !s.removed
	giveWay := s.giveWay
	l := s.l
	if !full && s.maxBytes > 0 && l.opts.Policy == config.Block && !giveWay && !s.removed {
		// The stream's own bound: a stream that holds nothing takes a
		// record of any size.
		held := s.bytes + int64(s.pendingBytes)
		full = held > 0 && held+int64(n) > s.maxBytes
	}
	s.mu.Unlock()
	if full {
		return false
	}
	if l.opts.Policy != config.Block || giveWay {
		return true
	}
	used := l.used.Load() - l.yielding.Load()
	return used <= 0 || used+int64(n) <= l.opts.MaxBytes
}

// take hands the pending messages to the committer, and at most
// maxCommitBytes of them; the caller gives the slice back with giveBack.
// whole, when set, is a token every message of which is in the batch or
// committed before.
func (s *Stream) take(budget int) (batch []*sink.Message, bytes int, whole uint32, wholeOK bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	whole, wholeOK = s.handed, s.handedOK
	if len(s.pending) == 0 || s.removed {
		return nil, 0, whole, wholeOK
	}
	n := 0
	for n < len(s.pending) && (n == 0 || bytes+recordSize(s.pending[n]) <= budget) {
		bytes += recordSize(s.pending[n])
		n++
	}
	batch = s.pending[:n:n]
	s.committing = true
	if n == len(s.pending) {
		s.pending = s.spare[:0]
		s.spare = nil
	} else {
		rest := append(s.spare[:0], s.pending[n:]...)
		s.pending = rest
		s.spare = nil
		wholeOK = false // some of its messages may still wait
	}
	s.pendingBytes -= bytes
	return batch, bytes, whole, wholeOK
}

// giveBack returns a batch slice for reuse.
func (s *Stream) giveBack(batch []*sink.Message) {
	clear(batch)
	s.mu.Lock()
	if s.spare == nil {
		s.spare = batch[:0:cap(batch)]
	}
	s.mu.Unlock()
}

// pushTailLocked adds a committed record to the tail, evicting the oldest
// beyond TailBytes into evicted (s.mu held; the caller releases them).
func (s *Stream) pushTailLocked(r tailRec, evicted []*sink.Message) []*sink.Message {
	s.tail = append(s.tail, r)
	s.tailBytes += r.m.Len()
	return s.dropTailLocked(evicted, func(t *tailRec) bool { return s.tailBytes > s.l.opts.TailBytes && t.seq < r.seq })
}

// trimTailLocked drops the tail records every reader has taken (s.mu held)
// into evicted; the caller releases them.
func (s *Stream) trimTailLocked(evicted []*sink.Message) []*sink.Message {
	low := s.last + 1
	for _, r := range s.readers {
		low = min(low, r.nextSeq.Load())
	}
	return s.dropTailLocked(evicted, func(t *tailRec) bool { return t.seq < low })
}

// dropTailLocked drops the tail's head while drop says so.
func (s *Stream) dropTailLocked(evicted []*sink.Message, drop func(*tailRec) bool) []*sink.Message {
	n := 0
	for n < len(s.tail) && drop(&s.tail[n]) {
		s.tailBytes -= s.tail[n].m.Len()
		evicted = append(evicted, s.tail[n].m)
		n++
	}
	if n > 0 {
		k := copy(s.tail, s.tail[n:])
		clear(s.tail[k:])
		s.tail = s.tail[:k]
	}
	return evicted
}

// tailAtLocked returns the tail record of seq, or nil (s.mu held).
func (s *Stream) tailAtLocked(seq uint64) *tailRec {
	if len(s.tail) == 0 || seq < s.tail[0].seq || seq > s.tail[len(s.tail)-1].seq {
		return nil
	}
	return &s.tail[seq-s.tail[0].seq]
}

// StreamStats are a stream's counters and state.
type StreamStats struct {
	Name string `json:"name"`
	// Appended counts records committed, AppendedBytes their bytes.
	Appended      uint64 `json:"appended"`
	AppendedBytes uint64 `json:"appendedBytes"`
	// Dropped counts records removed by the drop-oldest policy before every
	// consumer had them; Expired those removed by MaxAge.
	Dropped uint64 `json:"dropped"`
	Expired uint64 `json:"expired"`
	// Undelivered counts messages settled undelivered: the log closed or
	// failed before their commit.
	Undelivered uint64 `json:"undelivered"`
	// Waits counts the times a producer waited for room.
	Waits uint64 `json:"waits"`
	// Duplicates counts redelivered messages not appended: the log held
	// their notifications already.
	Duplicates uint64 `json:"duplicates"`
	// GiveWay: the stream's records are the first to go when the log is
	// full (StreamOptions.GiveWay).
	GiveWay bool `json:"giveWay,omitempty"`
	// MaxBytes and MaxAgeMs are the stream's own bounds (a writer group's
	// storeAndForward), when it has them.
	MaxBytes int64         `json:"maxBytes,omitempty"`
	MaxAgeMs int64         `json:"maxAgeMs,omitempty"`
	Records  int64         `json:"records"`  // in the file
	Bytes    int64         `json:"bytes"`    // their bytes
	Pending  int           `json:"pending"`  // messages waiting for their commit
	FirstSeq uint64        `json:"firstSeq"` // of the oldest record kept
	LastSeq  uint64        `json:"lastSeq"`  // of the newest record
	Readers  []ReaderStats `json:"readers"`
}

// Stats returns the stream's counters and its readers'.
func (s *Stream) Stats() StreamStats {
	s.mu.Lock()
	st := StreamStats{
		Name: s.name, Records: s.records, Bytes: s.bytes, Pending: len(s.pending),
		FirstSeq: s.first, LastSeq: s.last, GiveWay: s.giveWay,
		MaxBytes: s.maxBytes, MaxAgeMs: s.maxAge.Milliseconds(),
	}
	readers := append([]*Reader(nil), s.readers...)
	s.mu.Unlock()
	st.Appended = s.stats.appended.Load()
	st.AppendedBytes = s.stats.appendedBytes.Load()
	st.Dropped = s.stats.dropped.Load()
	st.Expired = s.stats.expired.Load()
	st.Undelivered = s.stats.undelivered.Load()
	st.Waits = s.stats.waits.Load()
	st.Duplicates = s.stats.duplicates.Load()
	for _, r := range readers {
		st.Readers = append(st.Readers, r.Stats())
	}
	return st
}
