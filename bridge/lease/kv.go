package lease

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/uastack/client"
)

// Scale-out: units of work (the gateway's writer groups) shared among
// replicas through leases in a NATS JetStream key-value bucket. JetStream
// (Raft-replicated, compare-and-set by revision) is the only arbiter: no
// consensus of our own.
//
// Keys: "group.<unit>" is a unit's lease, "replica.<id>" a replica's presence
// (names outside [A-Za-z0-9_-] are base64url-encoded after "="). A lease's
// value (leaseValue, JSON) names its holder (replica id and a random instance
// id per process), when it was acquired and renewed, its TTL, and the unit's
// resume record (bridge.ResumeRecord): KV implements bridge.ResumeStore on
// the leases, so a unit taken over resumes exactly as after a restart
// (TransferSubscriptions + Republish when the upstream still has the
// subscription, recreated with the gap reported when not).
//
// The protocol, with T the TTL:
//
//   - Acquire: kv.Create on a key that does not exist (or was deleted), else
//     kv.Update(key, value, revision seen) on a key that is free: released
//     (value.Released), expired, or held by this replica id in an earlier
//     life (a restarted StatefulSet pod takes its leases back at once; replica
//     ids must be unique among running replicas).
//   - Expired is judged without comparing clocks: a key whose revision this
//     replica has seen unchanged for T + T/5 of its own monotonic time. The
//     holder's last write happened before this replica saw it, so only
//     clock rates need to agree, not clocks (value.Expires is for people).
//   - Renew: kv.Update(key, value, own last revision) every T/3, and at most
//     once a second when the resume record changed (the group saves it every
//     second). A write whose answer was lost is recognised by its instance
//     id and term, and its revision adopted.
//   - Fencing: a holder whose last successful write was sent more than 2T/3
//     ago, or whose revision check failed (someone else wrote the key), stops
//     serving the unit (Handler.Halt, given until that write + T) — so it
//     has stopped, with T/5 to spare, before anyone else may take the key.
//     Messages already in a sink's queue may still be delivered after that
//     (at-least-once: possible duplicates, never a loss).
//   - Presence: "replica.<id>" is written every T/3; live replicas are those
//     whose presence revision changed within T + T/5 (presence records older
//     than 10 T by the writer's clock count as gone at once: they only bias
//     the balance, never safety).
//   - Balance: each replica aims at ceil(units / live replicas). One above
//     it releases at most one unit every T/3, and only while some live
//     replica has less: Halt (its session is detached, keeping the upstream
//     subscription), the final resume record written with Released set —
//     the others see it at once through their watcher and take it over
//     without waiting for an expiry. Free units are taken by replicas below
//     the target; a unit free for longer than T by anyone.
//   - A new replica waits T/3 after its first complete view before taking
//     free units (so that it counts the others), and takes its own earlier
//     leases at once.
//   - Close halts every unit and releases its lease with the final resume
//     record, and deletes the presence: the others take over at once.

const (
	// DefaultBucket is the key-value bucket of the leases.
	DefaultBucket = "uagate-leases"
	// DefaultTTL is a lease's time to live.
	DefaultTTL = 10 * time.Second
	// MinTTL bounds KVConfig.TTL (the gateway's configuration asks for 3s).
	MinTTL = 300 * time.Millisecond
	// saveEvery bounds how often a changed resume record is written.
	saveEvery = time.Second
	// maxTick bounds the loop's period.
	maxTick = time.Second
)

// ErrNotHeld is SaveResume's answer for a unit this replica does not hold.
var ErrNotHeld = errors.New("lease: the unit is not held by this replica")

// Handler serves the units whose leases this replica holds. Its methods are
// called from the lease loop (Serve) or from goroutines of their own (Halt),
// never twice at once for one unit, and never while the KV's lock is held.
type Handler interface {
	// Serve starts serving a unit; it returns soon (a start that waits for
	// the upstream goes on in the background). Its resume record is
	// LoadResume's.
	Serve(unit string)
	// Halt stops serving a unit: when it returns, the unit makes no more
	// messages. It keeps the upstream subscription for the next holder
	// (client.ManagedSession.Detach) and returns its final resume state (nil
	// when it has none): taken after the last acknowledgements, it replaces
	// the State of the last saved record. It must return by ctx's deadline.
	Halt(ctx context.Context, unit string) *client.ResumeState
}

// KVConfig configures a KV.
type KVConfig struct {
	// Conn is the NATS connection, owned by the caller; open until Close
	// returns. Reconnects are its business (nats.MaxReconnects(-1)).
	Conn *nats.Conn
	// Bucket is created when missing (history 1); default DefaultBucket.
	Bucket string
	// Replicas of a created bucket: 0 takes 3 when the connection knows at
	// least 3 servers, else 1.
	Replicas int
	// TTL of a lease; default DefaultTTL, at least MinTTL.
	TTL time.Duration
	// ReplicaID names this replica; required.
	ReplicaID string
	Logger    *slog.Logger
}

// KV holds leases of units in a NATS JetStream key-value bucket and calls a
// Handler to serve those it holds. It implements bridge.ResumeStore. Its
// methods are safe for concurrent use.
//
// Lock order: KV.mu is a leaf; the Handler is called without it.
type KV struct {
	cfg      KVConfig
	log      *slog.Logger
	h        Handler
	instance string
	js       jetstream.JetStream
	ttl      time.Duration
	margin   time.Duration
	tick     time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the loop, the watcher, halts
	kick   chan struct{}

	mu       sync.Mutex
	kv       jetstream.KeyValue
	units    map[string]*unit // by name
	order    []string         // configured order
	keys     map[string]*unit // by key
	view     map[string]*seen // by key: leases and presences as last seen
	synced   time.Time        // when the watcher delivered the bucket's content (zero: not yet)
	term     uint64
	released time.Time // the last release for balance
	presence time.Time // the last presence write
	presRev  uint64    // its revision
	replicas int       // of the bucket, once open
	closed   bool
	warned   map[string]time.Time // throttled warnings by kind
}

type unitState int

const (
	stateFree unitState = iota
	stateHeld
	stateHalting
)

type unit struct {
	name, key string
	wanted    bool // in the configuration
	state     unitState
	rev       uint64    // revision of this replica's last write
	term      uint64    // of the acquisition that wrote rev
	acquired  time.Time // local
	lastOK    time.Time // send time of the last write that succeeded
	lastWrite time.Time // send time of the last write attempt
	rec       *bridge.ResumeRecord
	recGen    uint64 // bumped by SaveResume
	wroteGen  uint64 // recGen of the last successful write
	freeSince time.Time
	// releasedAt: when this replica gave it up to balance; it does not take
	// it back for a TTL (unless nobody else does).
	releasedAt time.Time
}

// seen is a key as the watcher last delivered it.
type seen struct {
	rev     uint64
	deleted bool
	bad     bool // a value that does not parse: treated as held, expiring
	val     leaseValue
	at      time.Time // when this revision was first seen (local, monotonic)
}

// leaseValue is the JSON value of a lease or a presence key.
type leaseValue struct {
	Replica  string               `json:"replica"`
	Instance string               `json:"instance"`
	Term     uint64               `json:"term,omitempty"`
	Unit     string               `json:"unit,omitempty"`
	Acquired time.Time            `json:"acquired,omitzero"`
	Renewed  time.Time            `json:"renewed"`
	Expires  time.Time            `json:"expires"` // Renewed + TTL by the writer's clock: informative
	TTLms    int64                `json:"ttlMs"`
	Released bool                 `json:"released,omitempty"`
	Held     int                  `json:"held,omitempty"` // presence: units held
	Resume   *bridge.ResumeRecord `json:"resume,omitempty"`
}

// NewKV makes a KV for the configured replica; Start starts it.
func NewKV(cfg KVConfig, h Handler) (*KV, error) {
	if cfg.Conn == nil {
		return nil, errors.New("lease: KVConfig.Conn is nil")
	}
	if cfg.ReplicaID == "" {
		return nil, errors.New("lease: KVConfig.ReplicaID is empty")
	}
	if h == nil {
		return nil, errors.New("lease: no Handler")
	}
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.TTL < MinTTL {
		return nil, fmt.Errorf("lease: TTL %v is less than %v", cfg.TTL, MinTTL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	l := &KV{
		cfg: cfg, h: h, js: js, instance: hex.EncodeToString(id[:]),
		log:    cfg.Logger.With("replica", cfg.ReplicaID),
		ttl:    cfg.TTL,
		margin: cfg.TTL / 5,
		tick:   min(cfg.TTL/6, maxTick),
		kick:   make(chan struct{}, 1),
		units:  map[string]*unit{},
		keys:   map[string]*unit{},
		view:   map[string]*seen{},
		warned: map[string]time.Time{},
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l, nil
}

// ReplicaID is this replica's id.
func (l *KV) ReplicaID() string { return l.cfg.ReplicaID }

// SetUnits sets the units to share (the configured writer groups, in
// order). A unit no longer listed that this replica holds is halted and its
// lease deleted (the caller has removed it already: Halt finds nothing).
func (l *KV) SetUnits(names []string) {
	l.mu.Lock()
	want := map[string]bool{}
	l.order = l.order[:0]
	for _, n := range names {
		if want[n] {
			continue
		}
		want[n] = true
		l.order = append(l.order, n)
		u := l.units[n]
		if u == nil {
			u = &unit{name: n, key: unitKey(n)}
			l.units[n] = u
			l.keys[u.key] = u
		}
		u.wanted = true
	}
	for n, u := range l.units {
		if !want[n] {
			u.wanted = false
		}
	}
	l.mu.Unlock()
	l.poke()
}

// Start starts the loop: the bucket is opened (created if missing) as soon
// as NATS answers, then leases are taken and renewed until Close.
func (l *KV) Start() {
	l.wg.Add(1)
	go l.run()
}

// Held lists the units this replica serves, in configured order.
func (l *KV) Held() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, n := range l.order {
		if u := l.units[n]; u != nil && u.state == stateHeld {
			out = append(out, n)
		}
	}
	return out
}

// Holds reports whether this replica holds a unit's lease (and serves it).
func (l *KV) Holds(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.units[name]
	return u != nil && u.state == stateHeld
}

// Holding is a unit and who holds its lease, as this replica sees it.
type Holding struct {
	Unit string
	// Holder is the replica id of the holder; "" when nobody holds it
	// (never taken, released, or expired unrenewed).
	Holder string
	// Local: this replica serves it.
	Local bool
}

// Holders lists every configured unit with its holder, in configured order:
// this replica's own state for those it serves, the watched bucket for the
// others (as fresh as the watcher).
func (l *KV) Holders() []Holding {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Holding, 0, len(l.order))
	for _, n := range l.order {
		u := l.units[n]
		h := Holding{Unit: n}
		switch s := l.view[u.key]; {
		case u.state == stateHeld:
			h.Holder, h.Local = l.cfg.ReplicaID, true
		case s == nil || s.deleted || s.bad || s.val.Released || l.expired(s, now):
		case s.val.Replica == l.cfg.ReplicaID && s.val.Instance == l.instance:
			// Written by this process and not served (halting, or just
			// acquired and settling): not serving is what counts.
		default:
			h.Holder = s.val.Replica
		}
		out = append(out, h)
	}
	return out
}

// LoadResume implements bridge.ResumeStore: the record that came with the
// lease (the previous holder's last one) or saved since.
func (l *KV) LoadResume(name string) (bridge.ResumeRecord, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.units[name]
	if u == nil || u.state == stateFree || u.rec == nil {
		return bridge.ResumeRecord{}, false, nil
	}
	// A copy; its item list is shared (bridge.ResumeStore: nobody modifies it).
	return *u.rec, true, nil
}

// SaveResume implements bridge.ResumeStore: the record is written with the
// next renewal (within a second).
func (l *KV) SaveResume(name string, rec bridge.ResumeRecord) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.units[name]
	if u == nil || u.state == stateFree {
		return fmt.Errorf("%w: %s", ErrNotHeld, name)
	}
	u.rec = &rec // kept as it is: a writer group saves only when its state changed (client.ResumeMark)
	u.recGen++
	if u.state == stateHeld {
		l.pokeLocked()
	}
	return nil
}

// Close stops taking and renewing leases, halts every unit this replica
// serves and releases its lease with the final resume record (so another
// replica resumes it at once), and deletes the presence; within ctx.
func (l *KV) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait() // the loop and its halts
	l.mu.Lock()
	kv := l.kv
	var held []*unit
	for _, n := range l.order {
		if u := l.units[n]; u.state == stateHeld {
			u.state = stateHalting
			held = append(held, u)
		}
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, u := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.haltAndRelease(ctx, kv, u, false)
		}()
	}
	wg.Wait()
	if kv != nil {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := kv.Delete(dctx, presenceKey(l.cfg.ReplicaID)); err != nil {
			l.log.Debug("lease: deleting the presence", "err", err)
		}
	}
	return nil
}

func (l *KV) poke() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *KV) pokeLocked() { l.poke() }

// warn logs a warning of a kind at most every 10 s.
func (l *KV) warn(kind, msg string, args ...any) {
	l.mu.Lock()
	last := l.warned[kind]
	now := time.Now()
	ok := now.Sub(last) >= 10*time.Second
	if ok {
		l.warned[kind] = now
	}
	l.mu.Unlock()
	if ok {
		l.log.Warn(msg, args...)
	}
}

// run is the loop: open the bucket, keep the watcher, renew, fence, balance.
func (l *KV) run() {
	defer l.wg.Done()
	t := time.NewTicker(l.tick)
	defer t.Stop()
	for {
		if l.ctx.Err() != nil {
			return
		}
		l.step()
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		case <-l.kick:
		}
	}
}

func (l *KV) step() {
	l.mu.Lock()
	kv := l.kv
	l.mu.Unlock()
	if kv == nil {
		var err error
		if kv, err = l.open(); err != nil {
			if errors.Is(err, ErrUnsafeServer) {
				l.warn("unsafe", "lease: refusing the NATS server; serving nothing", "bucket", l.cfg.Bucket, "err", err)
				return
			}
			l.warn("open", "lease: the lease bucket is not available yet; serving nothing", "bucket", l.cfg.Bucket, "err", err)
			return
		}
		l.mu.Lock()
		l.kv = kv
		l.mu.Unlock()
		l.wg.Add(1)
		go l.watch(kv)
	}
	l.renew(kv)
	l.fence()
	l.writePresence(kv)
	l.dropRemoved(kv)
	l.balance(kv)
	// The connection may have moved to another server of the cluster since
	// the bucket was opened: take nothing through one that is not safe.
	l.mu.Lock()
	replicas := l.replicas
	l.mu.Unlock()
	if err := casSafe(l.cfg.Conn.ConnectedServerVersion(), replicas); err != nil {
		l.warn("unsafe", "lease: taking no leases", "err", err)
		return
	}
	l.acquire(kv)
}

// ErrUnsafeServer: the NATS server's compare-and-set is known to let two
// writers with the same expected revision both succeed, so leases on it
// could be granted twice.
var ErrUnsafeServer = errors.New("lease: this nats-server version can grant a lease twice")

// casSafe refuses the nats-server versions whose KV Update (a publish with
// Nats-Expected-Last-Subject-Sequence) is not a compare-and-set:
//   - before 2.9.21 on a clustered stream, the check ran before the Raft
//     proposal and concurrent writers could all pass it (nats-server#4320;
//     TestKVCompareAndSetClustered saw 279 of 300 rounds of three concurrent
//     writers on Debian's 2.9.10 with more than one success);
//   - 2.10.19 on a one-replica stream (nats-server#5840, fixed in 2.10.20).
//
// An empty or unparsable version (not connected) is not refused here: the
// writes fail on their own then.
func casSafe(version string, replicas int) error {
	var major, minor, patch int
	v := version
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	if _, err := fmt.Sscanf(v, "%d.%d.%d", &major, &minor, &patch); err != nil {
		return nil
	}
	below := func(a, b, c int) bool {
		return major < a || major == a && (minor < b || minor == b && patch < c)
	}
	switch {
	case replicas > 1 && below(2, 9, 21):
		return fmt.Errorf("%w: nats-server %s lets concurrent compare-and-set writes on a clustered (%d-replica) bucket all succeed (nats-server#4320, fixed in 2.9.21); upgrade the NATS cluster to 2.10.20 or later", ErrUnsafeServer, version, replicas)
	case major == 2 && minor == 10 && patch == 19:
		return fmt.Errorf("%w: nats-server %s accepts compare-and-set writes with a stale revision on a one-replica bucket (nats-server#5840, fixed in 2.10.20); upgrade NATS to 2.10.20 or later", ErrUnsafeServer, version)
	}
	return nil
}

// open opens the bucket, creating it when missing, and refuses a server
// whose compare-and-set cannot be trusted with it (casSafe).
func (l *KV) open() (jetstream.KeyValue, error) {
	ctx, cancel := context.WithTimeout(l.ctx, max(l.tick, 2*time.Second))
	defer cancel()
	kv, err := l.openOrCreate(ctx)
	if err != nil {
		return nil, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the bucket's status: %w", err)
	}
	replicas := 1
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok && bs.StreamInfo() != nil {
		replicas = bs.StreamInfo().Config.Replicas
	}
	version := l.cfg.Conn.ConnectedServerVersion()
	if err := casSafe(version, replicas); err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.replicas = replicas
	l.mu.Unlock()
	l.log.Info("lease: bucket open", "bucket", l.cfg.Bucket, "replicas", replicas, "natsServer", version)
	return kv, nil
}

func (l *KV) openOrCreate(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := l.js.KeyValue(ctx, l.cfg.Bucket)
	if err == nil || !errors.Is(err, jetstream.ErrBucketNotFound) {
		return kv, err
	}
	replicas := l.cfg.Replicas
	if replicas == 0 {
		replicas = 1
		if len(l.cfg.Conn.Servers()) >= 3 {
			replicas = 3
		}
	}
	kv, err = l.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      l.cfg.Bucket,
		Description: "uagate scale-out leases",
		History:     1,
		Replicas:    replicas,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		// Another replica created it meanwhile (with other settings, say).
		if kv2, err2 := l.js.KeyValue(ctx, l.cfg.Bucket); err2 == nil {
			return kv2, nil
		}
		return nil, err
	}
	l.log.Info("lease: bucket created", "bucket", l.cfg.Bucket, "replicas", replicas)
	return kv, nil
}

// watch keeps l.view up to date from the bucket; it starts again when the
// watcher ends, until Close.
func (l *KV) watch(kv jetstream.KeyValue) {
	defer l.wg.Done()
	for l.ctx.Err() == nil {
		w, err := kv.WatchAll(l.ctx)
		if err != nil {
			l.warn("watch", "lease: watching the bucket failed; retrying", "err", err)
			select {
			case <-l.ctx.Done():
				return
			case <-time.After(l.tick):
			}
			continue
		}
		for e := range w.Updates() {
			if e == nil {
				l.mu.Lock()
				if l.synced.IsZero() {
					l.synced = time.Now()
				}
				l.mu.Unlock()
				l.poke()
				continue
			}
			l.observe(e)
		}
		_ = w.Stop()
	}
}

// observe takes a key's new revision into the view.
func (l *KV) observe(e jetstream.KeyValueEntry) {
	s := &seen{rev: e.Revision(), at: time.Now()}
	switch e.Operation() {
	case jetstream.KeyValueDelete, jetstream.KeyValuePurge:
		s.deleted = true
	default:
		if err := json.Unmarshal(e.Value(), &s.val); err != nil {
			s.bad = true
		}
	}
	l.mu.Lock()
	old := l.view[e.Key()]
	if old != nil && old.rev >= s.rev {
		l.mu.Unlock()
		return // a watcher started again delivers what it had
	}
	l.view[e.Key()] = s
	free := s.deleted || s.val.Released
	l.mu.Unlock()
	if free {
		l.poke()
	}
}

// ttlOf is the TTL a value declares, bounded to sane values.
func (l *KV) ttlOf(v *leaseValue) time.Duration {
	d := time.Duration(v.TTLms) * time.Millisecond
	if d < MinTTL || d > 24*time.Hour {
		return l.ttl
	}
	return d
}

// expired says whether a key seen as s has gone unrenewed for its TTL and
// the margin, by this replica's clock; l.mu held.
func (l *KV) expired(s *seen, now time.Time) bool {
	d := l.ttl
	if !s.bad {
		d = l.ttlOf(&s.val)
	}
	return now.Sub(s.at) > d+d/5
}

// renew writes the leases that are due: every TTL/3, or within a second of
// a resume record saved. One round is bounded by the tick, so a stuck NATS
// cannot keep the loop from fencing.
func (l *KV) renew(kv jetstream.KeyValue) {
	now := time.Now()
	l.mu.Lock()
	var due []*unit
	for _, n := range l.order {
		u := l.units[n]
		if u.state != stateHeld || !u.wanted {
			continue
		}
		since := now.Sub(u.lastWrite)
		// The first resume record of a holding goes out at once: a replica
		// that dies in its first second must leave a record to resume from.
		if since >= l.ttl/3 || (u.recGen != u.wroteGen && (u.wroteGen == 0 || since >= saveEvery)) {
			due = append(due, u)
		}
	}
	l.mu.Unlock()
	if len(due) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.tick)
	defer cancel()
	for _, u := range due {
		l.renewOne(ctx, kv, u)
	}
}

func (l *KV) renewOne(ctx context.Context, kv jetstream.KeyValue, u *unit) {
	sent := time.Now()
	l.mu.Lock()
	if u.state != stateHeld {
		l.mu.Unlock()
		return
	}
	v := l.valueLocked(u, sent)
	rev, term, gen := u.rev, u.term, u.recGen
	u.lastWrite = sent
	l.mu.Unlock()
	b := l.marshal(u.name, &v)
	nrev, err := kv.Update(ctx, u.key, b, rev)
	if err == nil {
		l.mu.Lock()
		if u.state == stateHeld && u.term == term {
			u.rev, u.lastOK, u.wroteGen = nrev, sent, gen
		}
		l.mu.Unlock()
		return
	}
	if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		l.warn("renew", "lease: renewal failed", "unit", u.name, "err", err)
		return
	}
	// Someone wrote the key — or this replica did, and the answer was lost.
	e, gerr := kv.Get(ctx, u.key)
	if gerr == nil {
		var cur leaseValue
		if json.Unmarshal(e.Value(), &cur) == nil && cur.Instance == l.instance && cur.Term == term {
			l.mu.Lock()
			if u.state == stateHeld && u.term == term {
				u.rev = e.Revision()
				u.lastWrite = time.Time{} // write again at once
			}
			l.mu.Unlock()
			l.poke()
			return
		}
	}
	if gerr != nil && !errors.Is(gerr, jetstream.ErrKeyNotFound) && !errors.Is(gerr, jetstream.ErrKeyDeleted) {
		return // not known: the fence decides
	}
	l.log.Warn("lease: lost (another writer changed it); stopping the unit", "unit", u.name, "revision", rev)
	l.mu.Lock()
	if u.state == stateHeld && u.term == term {
		u.state = stateHalting
		l.startHalt(u, "lost", sent.Add(l.ttl/3))
	}
	l.mu.Unlock()
}

// valueLocked is u's lease value for a write at now; l.mu held.
func (l *KV) valueLocked(u *unit, now time.Time) leaseValue {
	return leaseValue{
		Replica: l.cfg.ReplicaID, Instance: l.instance, Term: u.term, Unit: u.name,
		Acquired: u.acquired, Renewed: now, Expires: now.Add(l.ttl), TTLms: l.ttl.Milliseconds(),
		Resume: u.rec,
	}
}

// marshal encodes a value; a resume record too big for a NATS message is left
// out (the next holder then creates the subscription anew, the gap reported).
func (l *KV) marshal(name string, v *leaseValue) []byte {
	b, _ := json.Marshal(v)
	if limit := l.cfg.Conn.MaxPayload() - 4096; limit > 0 && int64(len(b)) > limit && v.Resume != nil {
		l.warn("size", "lease: the resume record is larger than a NATS message; a takeover will subscribe anew", "unit", name, "bytes", len(b), "max", limit)
		w := *v
		w.Resume = nil
		b, _ = json.Marshal(&w)
	}
	return b
}

// fence halts the units whose last successful write is more than 2/3 of
// the TTL old: they must stop before anyone else may take them.
func (l *KV) fence() {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.order {
		u := l.units[n]
		if u.state == stateHeld && now.Sub(u.lastOK) > 2*l.ttl/3 {
			l.log.Warn("lease: not renewed in time; stopping the unit before the lease expires", "unit", u.name, "lastRenewal", u.lastOK.Format(time.RFC3339Nano))
			u.state = stateHalting
			l.startHalt(u, "fenced", u.lastOK.Add(l.ttl))
		}
	}
}

// startHalt halts u in the background, by deadline; l.mu held, u.state
// already stateHalting. The lease is not written afterwards.
func (l *KV) startHalt(u *unit, why string, deadline time.Time) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		l.h.Halt(ctx, u.name)
		l.mu.Lock()
		u.state = stateFree
		l.mu.Unlock()
		l.log.Info("lease: unit stopped", "unit", u.name, "why", why)
		l.poke()
	}()
}

// haltAndRelease halts u and then releases its lease with the final resume
// record (remove: deletes the key instead, the unit is gone). u.state is
// stateHalting.
func (l *KV) haltAndRelease(ctx context.Context, kv jetstream.KeyValue, u *unit, remove bool) {
	l.mu.Lock()
	deadline := u.lastOK.Add(l.ttl)
	l.mu.Unlock()
	hctx, cancel := context.WithDeadline(ctx, deadline)
	final := l.h.Halt(hctx, u.name)
	cancel()
	l.mu.Lock()
	if final != nil && u.rec != nil && final.SubscriptionID == u.rec.State.SubscriptionID {
		r := *u.rec
		r.State = *final
		r.Saved = time.Now()
		u.rec = &r
	}
	now := time.Now()
	v := l.valueLocked(u, now)
	v.Released, v.Expires = true, now
	rev := u.rev
	l.mu.Unlock()
	if kv != nil && now.Before(deadline) {
		wctx, cancel := context.WithTimeout(ctx, max(l.tick, time.Second))
		var err error
		if remove {
			err = kv.Delete(wctx, u.key, jetstream.LastRevision(rev))
		} else {
			_, err = kv.Update(wctx, u.key, l.marshal(u.name, &v), rev)
		}
		cancel()
		if err != nil {
			l.log.Warn("lease: release not written; it expires instead", "unit", u.name, "err", err)
		} else {
			l.log.Info("lease: released", "unit", u.name, "removed", remove)
		}
	}
	l.mu.Lock()
	u.state = stateFree
	if remove {
		delete(l.units, u.name)
		delete(l.keys, u.key)
	}
	l.mu.Unlock()
}

// writePresence puts the presence key every TTL/3.
func (l *KV) writePresence(kv jetstream.KeyValue) {
	now := time.Now()
	l.mu.Lock()
	if now.Sub(l.presence) < l.ttl/3 {
		l.mu.Unlock()
		return
	}
	l.presence = now
	held := 0
	for _, u := range l.units {
		if u.state == stateHeld {
			held++
		}
	}
	key := presenceKey(l.cfg.ReplicaID)
	// Written by another process after this one: the same replica id twice
	// (an earlier life's record, older than this one's first write, is not).
	dup := ""
	if s := l.view[key]; s != nil && l.presRev != 0 && s.rev > l.presRev && !s.deleted && !s.bad && s.val.Instance != l.instance {
		dup = s.val.Instance
	}
	l.mu.Unlock()
	if dup != "" {
		l.warn("dup", "lease: another process writes this replica id's presence; replica ids must be unique", "instance", dup)
	}
	v := leaseValue{Replica: l.cfg.ReplicaID, Instance: l.instance, Renewed: now, Expires: now.Add(l.ttl), TTLms: l.ttl.Milliseconds(), Held: held}
	b, _ := json.Marshal(&v)
	ctx, cancel := context.WithTimeout(l.ctx, l.tick)
	defer cancel()
	rev, err := kv.Put(ctx, key, b)
	if err != nil {
		l.warn("presence", "lease: writing the presence failed", "err", err)
		return
	}
	l.mu.Lock()
	l.presRev = rev
	l.mu.Unlock()
}

// dropRemoved halts the held units that are no longer configured and
// deletes their leases.
func (l *KV) dropRemoved(kv jetstream.KeyValue) {
	l.mu.Lock()
	var gone []*unit
	for n, u := range l.units {
		switch {
		case u.wanted:
		case u.state == stateHeld:
			u.state = stateHalting
			gone = append(gone, u)
		case u.state == stateFree:
			delete(l.units, n)
			delete(l.keys, u.key)
		}
	}
	l.mu.Unlock()
	for _, u := range gone {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.haltAndRelease(l.ctx, kv, u, true)
		}()
	}
}

// census counts the live replicas (this one included) and the units each
// holds, from the view; l.mu held.
func (l *KV) census(now time.Time) (live int, held map[string]int) {
	held = map[string]int{}
	replicas := map[string]bool{l.cfg.ReplicaID: true}
	for key, s := range l.view {
		if s.deleted || s.bad || !isPresenceKey(key) || l.expired(s, now) {
			continue
		}
		// A presence last renewed long ago by its writer's clock is gone;
		// this only biases the balance, never safety.
		if now.Sub(s.val.Renewed) > 10*l.ttl {
			continue
		}
		replicas[s.val.Replica] = true
	}
	for key, s := range l.view {
		u := l.keys[key]
		if u == nil || !u.wanted || s.deleted || s.bad || s.val.Released || l.expired(s, now) {
			continue
		}
		if s.val.Replica != l.cfg.ReplicaID {
			held[s.val.Replica]++
		}
	}
	for _, u := range l.units {
		if u.state != stateFree && u.wanted {
			held[l.cfg.ReplicaID]++
		}
	}
	for r := range replicas {
		if _, ok := held[r]; !ok {
			held[r] = 0
		}
	}
	return len(replicas), held
}

func (l *KV) targetLocked(now time.Time) (target int, held map[string]int, live int) {
	live, held = l.census(now)
	n := 0
	for _, u := range l.units {
		if u.wanted {
			n++
		}
	}
	return (n + live - 1) / live, held, live
}

// balance releases one unit when this replica holds more than its share
// and another live replica holds less (at most one per TTL/3).
func (l *KV) balance(kv jetstream.KeyValue) {
	now := time.Now()
	l.mu.Lock()
	if l.synced.IsZero() || now.Sub(l.released) < l.ttl/3 {
		l.mu.Unlock()
		return
	}
	target, held, _ := l.targetLocked(now)
	mine := 0
	var last *unit
	// The candidate: the unit acquired last among those held for 2/3 of a
	// TTL at least (a replica that has just started, and settles within
	// TTL/3, takes free units first).
	for _, n := range l.order {
		u := l.units[n]
		if u.state == stateHeld && u.wanted {
			mine++
			if now.Sub(u.acquired) >= 2*l.ttl/3 && (last == nil || u.acquired.After(last.acquired)) {
				last = u
			}
		}
	}
	// Another live replica holds two fewer (or fewer than the target while
	// this one is above it): moving one unit evens them out.
	under := false
	for r, n := range held {
		if r != l.cfg.ReplicaID && (n < mine-1 || (mine > target && n < target)) {
			under = true
		}
	}
	if !under || last == nil {
		l.mu.Unlock()
		return
	}
	l.released = now
	last.state = stateHalting
	last.releasedAt = now
	l.mu.Unlock()
	l.log.Info("lease: releasing a unit to balance", "unit", last.name, "held", mine, "target", target)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.haltAndRelease(l.ctx, kv, last, false)
		l.poke()
	}()
}

// acquire takes free units: this replica's own earlier leases at once, others
// while below the target (after the first view has settled), and any unit
// free for longer than a TTL.
func (l *KV) acquire(kv jetstream.KeyValue) {
	now := time.Now()
	l.mu.Lock()
	if l.synced.IsZero() || l.closed {
		l.mu.Unlock()
		return
	}
	settled := now.Sub(l.synced) >= l.ttl/3
	target, _, _ := l.targetLocked(now)
	mine := 0
	for _, u := range l.units {
		if u.state != stateFree && u.wanted {
			mine++
		}
	}
	type cand struct {
		u      *unit
		s      *seen // nil: never written
		own    bool
		stale  bool
		create bool
	}
	var cands []cand
	for _, n := range l.order {
		u := l.units[n]
		if u.state != stateFree || !u.wanted {
			continue
		}
		s := l.view[u.key]
		c := cand{u: u, s: s}
		switch {
		case s == nil || s.deleted:
			c.create = true
		case s.bad:
			if !l.expired(s, now) {
				u.freeSince = time.Time{}
				continue
			}
		case s.val.Released:
		case s.val.Replica == l.cfg.ReplicaID:
			c.own = true // an earlier life, or fenced and not taken since
		case !l.expired(s, now):
			u.freeSince = time.Time{}
			continue // held by another
		}
		if u.freeSince.IsZero() {
			u.freeSince = now
		}
		c.stale = now.Sub(u.freeSince) > l.ttl
		if !c.stale && !u.releasedAt.IsZero() && now.Sub(u.releasedAt) < l.ttl {
			continue // given to another replica just now
		}
		cands = append(cands, c)
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		switch {
		case a.own == b.own:
			return 0
		case a.own:
			return -1
		}
		return 1
	})
	var take []cand
	for _, c := range cands {
		if c.own || c.stale || (settled && mine < target) {
			take = append(take, c)
			mine++
		}
	}
	l.mu.Unlock()
	if len(take) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.tick)
	defer cancel()
	for _, c := range take {
		l.acquireOne(ctx, kv, c.u, c.s, c.create)
	}
}

func (l *KV) acquireOne(ctx context.Context, kv jetstream.KeyValue, u *unit, s *seen, create bool) {
	sent := time.Now()
	l.mu.Lock()
	if u.state != stateFree || l.closed {
		l.mu.Unlock()
		return
	}
	l.term++
	term := l.term
	var carried *bridge.ResumeRecord
	if s != nil && !s.deleted && !s.bad && s.val.Resume != nil {
		r := *s.val.Resume
		carried = &r
	}
	v := leaseValue{
		Replica: l.cfg.ReplicaID, Instance: l.instance, Term: term, Unit: u.name,
		Acquired: sent, Renewed: sent, Expires: sent.Add(l.ttl), TTLms: l.ttl.Milliseconds(), Resume: carried,
	}
	l.mu.Unlock()
	b := l.marshal(u.name, &v)
	var rev uint64
	var err error
	if create {
		rev, err = kv.Create(ctx, u.key, b)
	} else {
		rev, err = kv.Update(ctx, u.key, b, s.rev)
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			// Taken by another, or the view is behind: look again.
			if e, gerr := kv.Get(ctx, u.key); gerr == nil {
				l.observe(e)
			}
			l.log.Debug("lease: taken by another replica", "unit", u.name)
			return
		}
		l.warn("acquire", "lease: acquiring failed", "unit", u.name, "err", err)
		return
	}
	// Settle, then check that the lease's latest value is still this one
	// before serving. With a correct compare-and-set this always holds. It
	// is kept as a second line for a cluster whose nodes run different
	// versions (open checks only the server this connection talks to): on
	// Debian's nats-server 2.9.10 two replicas were both told their takeover
	// of a just-released unit succeeded (revisions 40 and 41 on the same
	// base, nats-server#4320), and the loser transferred the subscription
	// away from the winner. The later writer wins; the other backs off
	// unserved.
	if !l.settled(ctx, kv, u, term) {
		return
	}
	l.mu.Lock()
	if l.closed || u.state != stateFree {
		// Close began meanwhile: give it back at once.
		l.mu.Unlock()
		dctx, cancel := context.WithTimeout(context.Background(), time.Second)
		v.Released = true
		_, _ = kv.Update(dctx, u.key, l.marshal(u.name, &v), rev)
		cancel()
		return
	}
	u.state, u.rev, u.term = stateHeld, rev, term
	u.acquired, u.lastOK, u.lastWrite = sent, sent, sent
	u.rec, u.recGen, u.wroteGen = carried, 0, 0
	u.freeSince = time.Time{}
	prev := ""
	if s != nil && !s.deleted {
		prev = s.val.Replica
	}
	l.mu.Unlock()
	l.log.Info("lease: acquired", "unit", u.name, "revision", rev, "previous", prev, "resume", carried != nil)
	l.h.Serve(u.name)
}

// unitKey and presenceKey name a unit's lease and a replica's presence; a
// name outside [A-Za-z0-9_-] is base64url-encoded after "=".
func unitKey(name string) string    { return "group." + keyToken(name) }
func presenceKey(id string) string  { return "replica." + keyToken(id) }
func isPresenceKey(key string) bool { return len(key) > 8 && key[:8] == "replica." }

func keyToken(s string) string {
	plain := s != ""
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
	}
	if plain {
		return s
	}
	return "=" + base64.RawURLEncoding.EncodeToString([]byte(s))
}

// acquireSettle bounds how long an acquisition waits (at most a third of
// the loop's period) before it checks that its value is still the lease's
// latest.
const acquireSettle = 250 * time.Millisecond

// settled waits acquireSettle and reports whether the lease of u still holds
// the value this replica wrote with term (another replica's later write, or
// an error reading it back, means no).
func (l *KV) settled(_ context.Context, kv jetstream.KeyValue, u *unit, term uint64) bool {
	// Its own deadlines: the acquisition round's context may be spent.
	t := time.NewTimer(min(acquireSettle, l.tick/3))
	select {
	case <-t.C:
	case <-l.ctx.Done():
		t.Stop()
		return false
	}
	ctx, cancel := context.WithTimeout(l.ctx, max(l.tick, time.Second))
	defer cancel()
	e, err := kv.Get(ctx, u.key)
	if err != nil {
		l.warn("acquire", "lease: reading an acquired lease back failed; not serving it", "unit", u.name, "err", err)
		return false
	}
	var cur leaseValue
	if json.Unmarshal(e.Value(), &cur) != nil || cur.Instance != l.instance || cur.Term != term {
		l.observe(e)
		l.log.Info("lease: taken by another replica right after acquiring; not serving it", "unit", u.name, "holder", cur.Replica)
		return false
	}
	return true
}
