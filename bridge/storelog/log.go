package storelog

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
)

// Defaults of Options.
const (
	DefaultMaxBytes = 1 << 30
	// A stream's pending messages wait for one commit (milliseconds): a few
	// MiB hold what a writer group produces meanwhile at the highest rates.
	DefaultPendingMessages = 1024
	DefaultPendingBytes    = 4 << 20
	DefaultTailBytes       = 2 << 20
	DefaultClaimWindow     = 256
	DefaultCommitInterval  = 20 * time.Millisecond
	// FileName is the log's file in Options.Dir.
	FileName = "log.db"
	// idleSave is how often cursor moves are saved when nothing else is
	// committed.
	idleSave = time.Second
	// maxCommitBytes bounds the records one transaction writes.
	maxCommitBytes  = 16 << 20
	dropLogInterval = 10 * time.Second
)

// RedeliveredPrefix starts the MessageId of a record handed to a sink again
// after a restart (bridge.RedeliveredPrefix: consumers know one mark).
const RedeliveredPrefix = "redelivered-"

// ErrClosed is returned by what is called on a closed Log.
var ErrClosed = errors.New("storelog: closed")

// Options configure a Log.
type Options struct {
	// Dir holds the log's file (FileName); created when missing.
	Dir string
	// MaxBytes bounds the records' bytes over every stream; default
	// DefaultMaxBytes.
	MaxBytes int64
	// MaxAge, when positive, removes records older than it whether or not
	// every consumer had them (counted as expired).
	MaxAge time.Duration
	// Policy when the log is full: config.Block (default) makes Enqueue
	// wait until consumers free room; config.DropOldest removes the oldest
	// records (counted, logged).
	Policy config.Policy
	// NoSync commits without fdatasync: the log then survives a crash of
	// the process but not of the machine.
	NoSync bool
	// CommitInterval is the least time between the starts of two commits:
	// what the streams append meanwhile goes in one (one fdatasync), at the
	// cost of up to this much latency. Default DefaultCommitInterval;
	// negative: commit as soon as anything is pending.
	CommitInterval time.Duration
	// PendingMessages and PendingBytes bound what a stream holds waiting for
	// its commit; defaults DefaultPendingMessages, DefaultPendingBytes.
	PendingMessages int
	PendingBytes    int
	// TailBytes bounds the committed records a stream keeps in memory for
	// the readers that have not taken them yet (a reader further behind
	// reads the file); default DefaultTailBytes. Records every reader took
	// leave the tail at once.
	TailBytes int
	// ClaimWindow is how many records past what its queue settled a reader
	// claims and hands out at most (a quarter of it for an at-most-once
	// queue: what a crash abandons); default DefaultClaimWindow.
	ClaimWindow int
	// Publisher is the Addr.Publisher of the messages readers make.
	Publisher string
	// Logger; default slog.Default().
	Logger *slog.Logger

	// pageSize and partSize replace the file's page size and the largest
	// part of a record, for the benchmark comparing layouts.
	pageSize, partSize int
}

func (o *Options) defaults() error {
	if o.Dir == "" {
		return errors.New("storelog: Options.Dir is required")
	}
	p, err := config.ParsePolicy(string(o.Policy))
	if err != nil {
		return fmt.Errorf("storelog: Options.Policy %w", err)
	}
	o.Policy = p
	switch {
	case o.MaxBytes < 0:
		return fmt.Errorf("storelog: Options.MaxBytes %d is negative", o.MaxBytes)
	case o.MaxAge < 0:
		return fmt.Errorf("storelog: Options.MaxAge %v is negative", o.MaxAge)
	case o.PendingMessages < 0, o.PendingBytes < 0, o.TailBytes < 0, o.ClaimWindow < 0:
		return errors.New("storelog: negative Options bound")
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.PendingMessages == 0 {
		o.PendingMessages = DefaultPendingMessages
	}
	if o.PendingBytes == 0 {
		o.PendingBytes = DefaultPendingBytes
	}
	if o.TailBytes == 0 {
		o.TailBytes = DefaultTailBytes
	}
	if o.ClaimWindow == 0 {
		o.ClaimWindow = DefaultClaimWindow
	}
	if o.CommitInterval == 0 {
		o.CommitInterval = DefaultCommitInterval
	}
	o.ClaimWindow = max(o.ClaimWindow, 2)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Bucket names.
var (
	bucketStreams = []byte("streams") // a sub-bucket of records per stream
	bucketState   = []byte("state")   // stream name → streamState
	bucketCursors = []byte("cursors") // stream \x00 consumer → cursorState
)

func cursorKey(stream, consumer string) []byte {
	return []byte(stream + "\x00" + consumer)
}

// Log is the store-and-forward log: streams of records, each read by its
// consumers through durable cursors. See the package comment.
type Log struct {
	opts     Options
	partSize int
	hdr      []byte    // a record's header being written; the committer's
	scratch  []*Stream // anyStream; the committer's
	log      *slog.Logger
	db       *bolt.DB
	path     string

	wake   chan struct{} // cap 1: work for the committer
	done   chan struct{} // closed when the committer ended
	opened time.Time     // Open's time: loadGrace

	mu      sync.Mutex
	room    sync.Cond // producers waiting for room (block), under mu
	streams map[string]*Stream
	order   []*Stream // streams in creation order, for the committer
	closing bool
	bytes   int64 // records' bytes in the file, all streams
	failed  error // a commit failed: the log stopped

	// used is what counts against MaxBytes: the records in the file and
	// the messages pending (in the streams or in the commit running);
	// yielding is the part of it that give-way streams hold.
	used                         atomic.Int64
	yielding                     atomic.Int64
	anyAge                       atomic.Bool  // a stream has a MaxAge of its own
	lazyDue                      atomic.Bool  // settlements may await an idle save (committer)
	moved                        atomic.Bool  // a cursor moved since the last idle save began
	roomWaiters                  atomic.Int32 // producers waiting for room (waitRoom)
	broken                       atomic.Bool  // a commit failed
	commits, commitErrors, syncs atomic.Uint64
	written                      atomic.Uint64 // bytes written to the file (trimPageWrites)
	commitNanos                  atomic.Int64
	dropsLogged                  uint64
	lastDropLog                  time.Time
	droppedTotal                 uint64 // mu
}

// Open opens (or creates) the log in opts.Dir and starts its committer.
func Open(opts Options) (*Log, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("storelog: %w", err)
	}
	path := filepath.Join(opts.Dir, FileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      2 * time.Second, // another process holds it
		FreelistType: bolt.FreelistMapType,
		PageSize:     cmp.Or(opts.pageSize, pageSize),
		// Mapped at once for the bound (address space, not memory): the
		// file growing then never remaps it, which copies every node in
		// use off the map.
		InitialMmapSize: int(min(2*opts.MaxBytes, 1<<36)),
		// The freelist is rebuilt by scanning at open instead of written
		// at every commit.
		NoFreelistSync: true,
		NoSync:         opts.NoSync,
	})
	if err != nil {
		return nil, fmt.Errorf("storelog: opening %s: %w", path, err)
	}
	l := &Log{
		partSize: cmp.Or(opts.partSize, partSize),
		opts:     opts,
		log:      opts.Logger.With("component", "storelog"),
		db:       db,
		path:     path,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		opened:   time.Now(),
		streams:  map[string]*Stream{},
	}
	l.room.L = &l.mu
	if !trimPageWrites(db, db.Info().PageSize, &l.written) {
		l.log.Debug("bbolt's page writer is not where the log expects it: pages are written whole")
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketStreams, bucketState, bucketCursors} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("storelog: %s: %w", path, err)
	}
	if err := l.load(); err != nil {
		db.Close()
		return nil, err
	}
	go l.committer()
	return l, nil
}

// load opens every stream the file holds, with its bounds and bytes.
func (l *Log) load() error {
	if err := l.db.View(func(tx *bolt.Tx) error {
		sb, st := tx.Bucket(bucketStreams), tx.Bucket(bucketState)
		return sb.ForEachBucket(func(name []byte) error {
			s := l.newStream(string(name))
			if ss, ok := decodeStreamState(st.Get(name)); ok {
				s.last, s.cum, s.upTo, s.upKnown, s.upSaved = ss.last, ss.cum, ss.upTo, ss.upKnown, ss.upKnown
			}
			c := sb.Bucket(name).Cursor()
			s.first = s.last + 1
			for k, v := c.First(); k != nil; k, v = c.Next() {
				seq := seqOf(k)
				if s.first > s.last {
					s.first = seq
				}
				s.last = max(s.last, seq)
				if partOf(k) == 0 {
					s.records++
				}
				s.bytes += int64(len(v))
			}
			if s.records == 0 {
				s.first = s.last + 1
			}
			l.bytes += s.bytes
			l.used.Add(s.bytes)
			return nil
		})
	}); err != nil {
		return fmt.Errorf("storelog: %s: %w", l.path, err)
	}
	// Cursors: a claim beyond the stream's end names records that were
	// never appended (claims run ahead of appends), so it is cut back.
	return l.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCursors).ForEach(func(k, v []byte) error {
			i := bytes.IndexByte(k, 0)
			c, ok := decodeCursor(v)
			if i < 0 || !ok {
				return nil
			}
			s := l.streams[string(k[:i])]
			if s == nil {
				return nil
			}
			c.claimed = min(c.claimed, s.last)
			c.acked = min(c.acked, c.claimed)
			if s.cursors == nil {
				s.cursors = map[string]cursorState{}
			}
			s.cursors[string(k[i+1:])] = c
			return nil
		})
	})
}

// Path is the log's file.
func (l *Log) Path() string { return l.path }

// newStream registers a stream object (l.mu held or before the committer
// runs).
func (l *Log) newStream(name string) *Stream {
	s := &Stream{l: l, name: name, first: 1}
	s.room = &l.room
	l.streams[name] = s
	l.order = append(l.order, s)
	return s
}

// Stream returns the stream name, creating it (empty) when the log has
// none of that name. Its records are appended through Enqueue.
func (l *Log) Stream(name string) (*Stream, error) {
	if name == "" {
		return nil, errors.New("storelog: a stream needs a name")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return nil, ErrClosed
	}
	if s := l.streams[name]; s != nil {
		return s, nil
	}
	return l.newStream(name), nil
}

// StreamOptions configure a stream (Log.OpenStream).
type StreamOptions struct {
	// GiveWay makes the stream's records the first to go when the log is
	// full, whatever Options.Policy says: its Enqueue never waits for room,
	// the other streams count its records as free room, and the committer
	// removes its oldest records (counted as dropped, logged) to keep the
	// log within MaxBytes. For data that must never hold the writer groups
	// up: a Sparkplug node's history while its host is offline.
	GiveWay bool
	// MaxBytes, when positive, bounds the stream's records' bytes below
	// the log's Options.MaxBytes (a writer group's own bound): with the
	// block policy its Enqueue waits for room within it, with drop-oldest
	// its own oldest records go (counted as dropped). 0: the log's bound
	// only.
	MaxBytes int64
	// MaxAge, when positive, removes the stream's records older than it
	// (or than Options.MaxAge, whichever is shorter), whether every reader
	// had them or not (counted as expired).
	MaxAge time.Duration
}

// OpenStream returns the stream name as Stream does, with opts, which
// replace those it had; set them before the stream is used.
func (l *Log) OpenStream(name string, opts StreamOptions) (*Stream, error) {
	s, err := l.Stream(name)
	if err != nil {
		return nil, err
	}
	if opts.MaxBytes < 0 || opts.MaxAge < 0 {
		return nil, fmt.Errorf("storelog: stream %s: negative bound (maxBytes %d, maxAge %v)", name, opts.MaxBytes, opts.MaxAge)
	}
	s.mu.Lock()
	s.maxBytes, s.maxAge = opts.MaxBytes, opts.MaxAge
	if opts.MaxAge > 0 {
		l.anyAge.Store(true)
	}
	if s.giveWay != opts.GiveWay {
		s.giveWay = opts.GiveWay
		n := s.bytes + int64(s.pendingBytes)
		if !opts.GiveWay {
			n = -n
		}
		l.yielding.Add(n)
	}
	s.mu.Unlock()
	l.mu.Lock()
	l.room.Broadcast() // what it holds may be room for the others now
	l.mu.Unlock()
	l.signal()
	return s, nil
}

// dropping reports whether the committer removes records to keep the log
// within MaxBytes: the drop-oldest policy, or records of give-way streams.
func (l *Log) dropping() bool {
	return l.opts.Policy == config.DropOldest || l.yielding.Load() > 0
}

// Streams lists the names of the log's streams.
func (l *Log) Streams() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	for _, s := range l.order {
		names = append(names, s.name)
	}
	return names
}

// RemoveStream deletes stream name with its records and cursors, at the
// committer's next round; its readers must be closed. What it holds
// pending is settled undelivered. It returns how many records it had.
func (l *Log) RemoveStream(name string) int {
	l.mu.Lock()
	s := l.streams[name]
	if s == nil {
		l.mu.Unlock()
		return 0
	}
	delete(l.streams, name)
	l.mu.Unlock()
	s.mu.Lock()
	s.removed = true
	pend := s.pending
	l.used.Add(-int64(s.pendingBytes))
	if s.giveWay {
		l.yielding.Add(-int64(s.pendingBytes))
	}
	s.pending, s.pendingBytes = nil, 0
	n := s.records
	s.mu.Unlock()
	for _, p := range pend {
		s.stats.undelivered.Add(1)
		p.Done(false)
	}
	l.room.Broadcast()
	l.signal()
	return int(n)
}

// removeStream deletes a removed stream from the file (committer, in tx).
func removeStream(tx *bolt.Tx, name string) error {
	if err := tx.Bucket(bucketStreams).DeleteBucket([]byte(name)); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
		return err
	}
	if err := tx.Bucket(bucketState).Delete([]byte(name)); err != nil {
		return err
	}
	c := tx.Bucket(bucketCursors).Cursor()
	prefix := cursorKey(name, "")
	for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

func hasPrefix(b, p []byte) bool { return len(b) >= len(p) && string(b[:len(p)]) == string(p) }

func (l *Log) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Close stops the committer after a last commit of what is pending and
// closes the file. Readers must be closed first; producers still waiting
// are released (their messages settled undelivered). Calling it again
// returns nil.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		<-l.done
		return nil
	}
	l.closing = true
	l.room.Broadcast()
	l.mu.Unlock()
	l.signal()
	<-l.done
	// What arrived after the last commit is not in the log.
	for _, s := range l.snapshot() {
		s.mu.Lock()
		s.closed = true
		pend := s.pending
		s.pending, s.pendingBytes = nil, 0
		tail := s.tail
		s.tail = nil
		s.mu.Unlock()
		for _, p := range pend {
			s.stats.undelivered.Add(1)
			p.Done(false)
		}
		for _, t := range tail {
			t.m.Done(true)
		}
	}
	err := l.db.Close()
	l.mu.Lock()
	failed := l.failed
	l.mu.Unlock()
	return errors.Join(failed, err)
}

func (l *Log) snapshot() []*Stream {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.order)
}

// logDrops logs the drop-oldest removals, at most once per dropLogInterval.
func (l *Log) logDrops(n uint64) {
	l.mu.Lock()
	l.droppedTotal += n
	now := time.Now()
	if now.Sub(l.lastDropLog) < dropLogInterval {
		l.mu.Unlock()
		return
	}
	since := l.droppedTotal - l.dropsLogged
	l.dropsLogged, l.lastDropLog = l.droppedTotal, now
	total := l.droppedTotal
	l.mu.Unlock()
	l.log.Warn("storelog: the log (maxBytes) or a writer group's part of it (its storeAndForward.maxBytes) is full: dropped its oldest records", "dropped", since, "droppedTotal", total, "maxBytes", l.opts.MaxBytes)
}

// newTailMessage makes the pooled copy a stream keeps of a committed
// record: its payload is the record (header and names included,
// SetPayload2), so that it is also the value the transaction writes.
func newTailMessage(m *sink.Message) *sink.Message {
	t := sink.NewMessage(recordSize(m))
	t.Kind, t.Addr, t.Retained, t.Created = m.Kind, m.Addr, m.Retained, m.Created
	return t
}
