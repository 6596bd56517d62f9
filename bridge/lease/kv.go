package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uagate/gateway/bridge/fence"
	"github.com/uagate/gateway/bridge/resume"
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
// resume record (resume.Record): KV implements resume.Store on the leases,
// so a unit taken over resumes exactly as after a restart
// (TransferSubscriptions + Republish when the upstream still has the
// subscription, recreated with the gap reported when not).
//
// The decisions are core.go's (with the fencing arithmetic); this file does
// the I/O. The protocol, with T the TTL:
//
//   - Acquire: kv.Create on a key that does not exist (or was deleted), else
//     kv.Update(key, value, revision seen) on a key that is free: released
//     (value.Released), expired, or held by this replica id in an earlier
//     life (a restarted StatefulSet pod takes its leases back at once). The
//     acquisition then settles and reads the lease back before serving.
//   - Expired is judged without comparing clocks: a key whose revision this
//     replica has seen unchanged for T + T/5 of its own monotonic time. The
//     holder's last write happened before this replica saw it, so only
//     clock rates need to agree, not clocks (value.Expires is for people).
//   - Renew: kv.Update(key, value, own last revision) every T/3, and at most
//     once a second when the resume record changed (the group saves it every
//     second). A write whose answer was lost is recognised by its instance
//     id and term, and its revision adopted.
//   - Fencing: a holder whose last successful write is more than 2T/3 old,
//     or whose revision check failed (someone else wrote the key), stops
//     serving the unit (Handler.Halt, given until that write + T) — so it
//     has stopped, with T/5 to spare, before anyone else may take the key.
//     Fencing runs on a timer of its own, apart from the loop's I/O. The
//     holding's Fence (open until that write + T, closed when the holding
//     ends) is checked at publish time by the writer group and the sinks'
//     queues: a process paused past its deadline publishes nothing when it
//     wakes, before any timer of its own has run; what the sinks had not
//     published is left unacknowledged for the next holder.
//   - Presence: "replica.<id>" is written every T/3; live replicas are those
//     whose presence revision changed within T + T/5 (presence records older
//     than 10 T by the writer's clock count as gone at once: they only bias
//     the balance, never safety). Replica ids must be unique among running
//     replicas: a write with this id by another process after this one's
//     first presence is reported, and that process's leases are then
//     treated as anyone else's (taken only once expired). Of the two, the
//     one whose first presence came later (the values' "since") refuses to
//     serve: it gives its units up, takes none and calls OnRefused.
//   - Balance: each replica aims at ceil(units / live replicas). One above
//     it releases at most one unit every T/3, and only while some live
//     replica has less: Halt (its session is detached, keeping the upstream
//     subscription; the lease is renewed until Halt returns), then the final
//     resume record written with Released set — the others see it at once
//     through their watcher and take it over without waiting for an expiry.
//     Free units are taken by replicas below the target; a unit free for
//     longer than T by anyone.
//   - A new replica waits T/3 after its first complete view before taking
//     free units (so that it counts the others), and takes its own earlier
//     leases back once it has watched its id for T/3 + T/5 after its first
//     presence without another process writing with it.
//   - Close halts every unit and releases its lease with the final resume
//     record, and deletes the presence: the others take over at once.
//
// The Handler is called from goroutines of its own (one per unit with calls
// pending, in order), never from the loop: a Serve that waits for the
// runtime delays only its unit, not the renewals or the fencing of others.

const (
	// DefaultBucket is the key-value bucket of the leases.
	DefaultBucket = "uagate-leases"
	// DefaultTTL is a lease's time to live.
	DefaultTTL = 10 * time.Second
	// MinTTL bounds KVConfig.TTL (the gateway's configuration asks for 3s).
	MinTTL = 300 * time.Millisecond
	// maxTick bounds the loop's period.
	maxTick = time.Second
	// acquireSettle bounds how long an acquisition waits (at most a third
	// of the loop's period) before it checks that its value is still the
	// lease's latest.
	acquireSettle = 250 * time.Millisecond
)

// ErrNotHeld is SaveResume's answer for a unit this replica does not hold.
var ErrNotHeld = errors.New("lease: the unit is not held by this replica")

// Handler serves the units whose leases this replica holds. The KV calls it
// from goroutines of its own, one call at a time per unit and in order (a
// unit's Halt after its Serve, its next Serve after that Halt), never while
// the KV's lock is held and never from the loop that renews and fences: a
// call that takes long delays that unit only.
type Handler interface {
	// Serve starts serving a unit; it should return soon (a start that
	// waits for the upstream goes on in the background). ctx is done once
	// the holding ends (the lease is given up, lost or fenced): a Serve
	// that finds it done must not start the unit. A Halt follows in any
	// case. The unit's resume record is LoadResume's.
	Serve(ctx context.Context, unit string)
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
	// OnRefused is called (once, from the loop) when another process runs
	// with this ReplicaID and was there first: this KV gives its units up
	// and serves nothing from then on. The error says so.
	OnRefused func(error)
	Logger    *slog.Logger
}

// ErrDuplicateReplica is OnRefused's error: another live process uses this
// replica id.
var ErrDuplicateReplica = errors.New("lease: another running replica has this replica id")

// KV holds leases of units in a NATS JetStream key-value bucket and calls a
// Handler to serve those it holds. It implements resume.Store. Its methods
// are safe for concurrent use.
//
// Goroutines: the loop (the bucket's I/O: open, renew, release, presence,
// acquire), the fence timer, the watcher, and one per unit with Handler
// calls pending; all end by Close. Lock order: KV.mu is a leaf; the Handler
// is called without it.
type KV struct {
	cfg      KVConfig
	log      *slog.Logger
	h        Handler
	instance string
	js       jetstream.JetStream
	tick     time.Duration

	ctx      context.Context // cancelled when Close is done, or its context
	cancel   context.CancelFunc
	wg       sync.WaitGroup // every goroutine of the KV
	kick     chan struct{}
	loopDone chan struct{}

	mu       sync.Mutex
	c        *core
	kv       jetstream.KeyValue
	replicas int // of the bucket, once open
	started  bool
	closed   bool
	warned   map[string]time.Time          // throttled warnings by kind
	calls    map[string]*calls             // Handler calls by unit, while a goroutine runs them
	serving  map[string]context.CancelFunc // Serve's context by unit, until its Halt
	// reported is closed (and replaced) when a write's answer was taken:
	// SaveResumeNow waits on it.
	reported chan struct{}
}

// calls is a unit's queue of Handler calls, run in order by one goroutine.
type calls struct{ q []call }

type call struct {
	halt bool
	why  string
	ctx  context.Context // Serve's
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
		log:      cfg.Logger.With("replica", cfg.ReplicaID),
		tick:     min(cfg.TTL/6, maxTick),
		kick:     make(chan struct{}, 1),
		loopDone: make(chan struct{}),
		warned:   map[string]time.Time{},
		calls:    map[string]*calls{},
		serving:  map[string]context.CancelFunc{},
	}
	l.c = newCore(cfg.ReplicaID, l.instance, cfg.TTL)
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
	l.c.setUnits(names)
	l.mu.Unlock()
	l.poke()
}

// Start starts the loop: the bucket is opened (created if missing) as soon
// as NATS answers, then leases are taken and renewed until Close.
func (l *KV) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started || l.closed {
		return
	}
	l.started = true
	l.wg.Add(2)
	go l.run()
	go l.fenceLoop()
}

// Held lists the units this replica serves, in configured order.
func (l *KV) Held() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c.heldUnits()
}

// Holds reports whether this replica holds a unit's lease (and serves it).
func (l *KV) Holds(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c.holds(name)
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
	return l.c.holders(now)
}

// Fence is the fence of the unit's holding (bridge/fence): open while this
// replica's lease is known to be valid, closed once the holding ends; a
// closed one when this replica does not hold the unit. The writer group
// serving the unit publishes only while it is open.
func (l *KV) Fence(name string) *fence.Fence {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c.fenceOf(name)
}

// LoadResume implements resume.Store: the record that came with the lease
// (the previous holder's last one) or saved since.
func (l *KV) LoadResume(name string) (resume.Record, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec, ok := l.c.loadResume(name)
	return rec, ok, nil
}

// SaveResume implements resume.Store: the record is written with the next
// renewal (within a second).
func (l *KV) SaveResume(name string, rec resume.Record) error {
	return l.save(name, func() (bool, bool) { return l.c.saveResume(name, rec) })
}

// SaveResumeNow saves a record as SaveResume does, writes it at once and
// returns once it is in the bucket: a successor that takes the unit over
// after a crash finds it. An error when ctx ends first or the unit is no
// longer held here (the record may or may not have been written). A writer
// group saves its reservation of SequenceNumbers this way before it uses
// them (bridge: resume.DurableStore).
func (l *KV) SaveResumeNow(ctx context.Context, name string, rec resume.Record) error {
	l.mu.Lock()
	gen, ok := l.c.saveResumeNow(name, rec)
	l.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotHeld, name)
	}
	l.poke()
	for {
		l.mu.Lock()
		written, held := l.c.recordWritten(name, gen)
		if l.reported == nil {
			l.reported = make(chan struct{})
		}
		next := l.reported
		l.mu.Unlock()
		switch {
		case written:
			return nil
		case !held:
			return fmt.Errorf("%w: %s", ErrNotHeld, name)
		}
		select {
		case <-next:
		case <-ctx.Done():
			return fmt.Errorf("lease: the resume record of %s not written: %w", name, ctx.Err())
		}
	}
}

// save runs a core's save under l.mu (ok: the unit is held; due: written
// by the next decision, which it asks for).
func (l *KV) save(name string, save func() (ok, due bool)) error {
	l.mu.Lock()
	ok, due := save()
	l.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotHeld, name)
	}
	if due {
		l.poke()
	}
	return nil
}

// LoadSession returns the OPC UA session state that came with the lease
// (the previous holder's) or saved since; nil without one.
func (l *KV) LoadSession(name string) *client.SessionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c.loadSession(name)
}

// SaveSession keeps the holder's OPC UA session state with the lease, so
// that the next holder activates the same session (client.ResumeSession)
// rather than transfer its subscriptions; it is written with the next
// renewal (within a second). Keep only a session over SecurityMode None
// there: the bucket is no place for secrets, and over None the
// authentication token is not one.
func (l *KV) SaveSession(name string, st client.SessionState) error {
	return l.save(name, func() (bool, bool) { return l.c.saveSession(name, st) })
}

// Close stops taking leases, halts every unit this replica serves and
// releases its lease with the final resume record (so another replica
// resumes it at once), and deletes the presence. When ctx ends first, the
// units still held are halted at once (Halt's context is done) and their
// leases left to expire; Close then returns ctx's error. It waits for the
// Handler's calls to return.
func (l *KV) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.c.close()
	started := l.started
	l.mu.Unlock()
	if !started {
		l.cancel()
		return nil
	}
	l.poke()
	// The loop gives the units up and ends when none is left, or when ctx
	// ends.
	stop := context.AfterFunc(ctx, l.cancel)
	<-l.loopDone
	stop()
	l.cancel() // the fence timer and the watcher
	l.mu.Lock()
	abandoned := l.c.abandon(time.Now())
	for _, a := range abandoned {
		l.dispatchLocked(a)
	}
	kv := l.kv
	l.mu.Unlock()
	for _, a := range abandoned {
		l.log.Warn("lease: closing before the unit was released; it expires instead", "unit", a.unit)
	}
	l.wg.Wait()
	if len(abandoned) > 0 {
		return fmt.Errorf("lease: %d units halted without release: %w", len(abandoned), context.Cause(ctx))
	}
	if kv != nil && ctx.Err() == nil {
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

// run is the loop: open the bucket, keep the watcher, carry the core's
// decisions out. It ends when Close has given every unit up, or at cancel.
func (l *KV) run() {
	defer l.wg.Done()
	defer close(l.loopDone)
	t := time.NewTicker(l.tick)
	defer t.Stop()
	for l.ctx.Err() == nil {
		if l.step() {
			return
		}
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		case <-l.kick:
		}
	}
}

// step makes one round of decisions and carries them out; it reports
// whether the KV is closed with nothing left to give up.
func (l *KV) step() (done bool) {
	l.mu.Lock()
	kv, closing := l.kv, l.c.closing
	idle := l.c.idle()
	other, refused := l.c.refusal()
	l.mu.Unlock()
	if refused {
		err := fmt.Errorf("%w (%q, the other instance %s was there first): refusing to serve; give every replica its own scaleOut.replicaId",
			ErrDuplicateReplica, l.cfg.ReplicaID, other)
		l.log.Error("lease: "+err.Error(), "instance", l.instance)
		if l.cfg.OnRefused != nil {
			l.cfg.OnRefused(err)
		}
	}
	if closing && (idle || kv == nil) {
		return true
	}
	if kv == nil {
		var err error
		if kv, err = l.open(); err != nil {
			if errors.Is(err, ErrUnsafeServer) {
				l.warn("unsafe", "lease: refusing the NATS server; serving nothing", "bucket", l.cfg.Bucket, "err", err)
				return false
			}
			l.warn("open", "lease: the lease bucket is not available yet; serving nothing", "bucket", l.cfg.Bucket, "err", err)
			return false
		}
		l.mu.Lock()
		l.kv = kv
		l.mu.Unlock()
		l.wg.Add(1)
		go l.watch(kv)
	}
	// The connection may have moved to another server of the cluster since
	// the bucket was opened: take nothing through one that is not safe.
	l.mu.Lock()
	replicas := l.replicas
	l.mu.Unlock()
	safe := true
	if err := casSafe(l.cfg.Conn.ConnectedServerVersion(), replicas); err != nil {
		l.warn("unsafe", "lease: taking no leases", "err", err)
		safe = false
	}
	l.mu.Lock()
	acts := l.c.decide(time.Now(), safe)
	writes := acts[:0:0]
	for _, a := range acts {
		switch a.kind {
		case actServe, actHalt:
			l.dispatchLocked(a)
		case actDuplicate:
		default:
			writes = append(writes, a)
		}
	}
	l.mu.Unlock()
	for _, a := range acts {
		switch a.kind {
		case actHalt:
			l.logHalt(a)
		case actDuplicate:
			l.warn("dup", "lease: another process writes with this replica id; replica ids must be unique", "instance", a.instance)
		}
	}
	l.write(kv, writes)
	return false
}

// fenceLoop fences on a timer of its own: at the next fencing time or
// every tick, whatever the loop's I/O is waiting for.
func (l *KV) fenceLoop() {
	defer l.wg.Done()
	t := time.NewTimer(l.tick)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		acts := l.c.fence(time.Now(), nil)
		for _, a := range acts {
			l.dispatchLocked(a)
		}
		next := l.c.nextFence()
		l.mu.Unlock()
		for _, a := range acts {
			l.logHalt(a)
		}
		d := l.tick
		if !next.IsZero() {
			d = min(d, max(time.Until(next), time.Millisecond))
		}
		t.Reset(d)
	}
}

func (l *KV) logHalt(a action) {
	switch a.why {
	case whyFenced:
		l.log.Warn("lease: not renewed in time; stopping the unit before the lease expires", "unit", a.unit, "lastRenewal", a.at.Format(time.RFC3339Nano))
	case whyLost:
		l.log.Warn("lease: lost (another writer changed it); stopping the unit", "unit", a.unit)
	case whyBalance:
		l.log.Info("lease: releasing a unit to balance", "unit", a.unit)
	case whyRemoved:
		l.log.Info("lease: the unit is no longer configured; stopping it", "unit", a.unit)
	case whyRefused:
		l.log.Warn("lease: giving the unit up: another replica with this id was there first", "unit", a.unit)
	}
}

// dispatchLocked queues a Serve or a Halt on the unit's goroutine (started
// when none runs); l.mu held. A Halt cancels the context of the unit's
// Serve, which may still be waiting or running.
func (l *KV) dispatchLocked(a action) {
	var c call
	switch a.kind {
	case actServe:
		ctx, cancel := context.WithCancel(l.ctx)
		if old := l.serving[a.unit]; old != nil {
			old()
		}
		l.serving[a.unit] = cancel
		c.ctx = ctx
	case actHalt:
		if cancel := l.serving[a.unit]; cancel != nil {
			cancel()
			delete(l.serving, a.unit)
		}
		c.halt, c.why = true, a.why
	default:
		return
	}
	if q := l.calls[a.unit]; q != nil {
		q.q = append(q.q, c)
		return
	}
	q := &calls{q: []call{c}}
	l.calls[a.unit] = q
	l.wg.Add(1)
	go l.callHandler(a.unit, q)
}

// callHandler runs a unit's Handler calls in order until none is left.
func (l *KV) callHandler(name string, q *calls) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		if len(q.q) == 0 {
			delete(l.calls, name)
			l.mu.Unlock()
			return
		}
		c := q.q[0]
		q.q = q.q[1:]
		var deadline time.Time
		if c.halt {
			deadline = l.c.haltDeadline(name)
		}
		l.mu.Unlock()
		if !c.halt {
			if c.ctx.Err() == nil {
				l.h.Serve(c.ctx, name)
			}
			continue
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		final := l.h.Halt(ctx, name)
		cancel()
		l.mu.Lock()
		l.c.halted(name, final, time.Now())
		l.mu.Unlock()
		l.log.Info("lease: unit stopped", "unit", name, "why", c.why)
		l.poke()
	}
}

// write carries out the writes of a round: renewals and the presence
// within one tick (a stuck NATS cannot hold the loop long), releases, then
// the acquisitions.
func (l *KV) write(kv jetstream.KeyValue, acts []action) {
	ctx, cancel := context.WithTimeout(l.ctx, l.tick)
	defer cancel()
	var acq []action
	for _, a := range acts {
		switch a.kind {
		case actRenew:
			o, rev := l.renew(ctx, kv, a)
			l.report(a, o, rev)
		case actPresence:
			o, rev := l.putPresence(ctx, kv, a)
			l.report(a, o, rev)
		case actRelease:
			o, rev := l.release(kv, a)
			l.report(a, o, rev)
		case actAcquire:
			acq = append(acq, a)
		}
	}
	if len(acq) > 0 {
		l.acquire(kv, acq)
	}
}

// report gives the core a write's answer.
func (l *KV) report(a action, o outcome, rev uint64) {
	l.mu.Lock()
	again := l.c.result(a, o, rev, time.Now())
	if l.reported != nil {
		close(l.reported)
		l.reported = nil
	}
	l.mu.Unlock()
	if again {
		l.poke()
	}
}

func (l *KV) renew(ctx context.Context, kv jetstream.KeyValue, a action) (outcome, uint64) {
	rev, err := kv.Update(ctx, a.key, l.marshal(a.unit, &a.value), a.rev)
	if err == nil {
		return written, rev
	}
	if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		l.warn("renew", "lease: renewal failed", "unit", a.unit, "err", err)
		return failed, 0
	}
	// Someone wrote the key — or this replica did, and the answer was lost.
	e, err := kv.Get(ctx, a.key)
	switch {
	case err == nil:
		var cur leaseValue
		if json.Unmarshal(e.Value(), &cur) == nil && cur.Instance == l.instance && cur.Term == a.term {
			return mine, e.Revision()
		}
		l.observe(e)
		return conflict, 0
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return conflict, 0
	}
	return failed, 0 // not known: the fence decides
}

func (l *KV) putPresence(ctx context.Context, kv jetstream.KeyValue, a action) (outcome, uint64) {
	b, _ := json.Marshal(&a.value)
	rev, err := kv.Put(ctx, a.key, b)
	if err != nil {
		l.warn("presence", "lease: writing the presence failed", "err", err)
		return failed, 0
	}
	return written, rev
}

// release writes a halted unit's lease released, with its final resume
// record (or deletes it: the unit is gone). Failed, it expires instead.
func (l *KV) release(kv jetstream.KeyValue, a action) (outcome, uint64) {
	ctx, cancel := context.WithTimeout(l.ctx, max(l.tick, time.Second))
	defer cancel()
	var rev uint64
	var err error
	if a.remove {
		err = kv.Delete(ctx, a.key, jetstream.LastRevision(a.rev))
	} else {
		rev, err = kv.Update(ctx, a.key, l.marshal(a.unit, &a.value), a.rev)
	}
	if err != nil {
		l.log.Warn("lease: release not written; it expires instead", "unit", a.unit, "err", err)
		return failed, 0
	}
	l.log.Info("lease: released", "unit", a.unit, "removed", a.remove)
	return written, rev
}

// acquire writes the acquisitions of a round, lets them settle, and reads
// each lease back before the core may serve it.
func (l *KV) acquire(kv jetstream.KeyValue, acts []action) {
	ctx, cancel := context.WithTimeout(l.ctx, l.tick)
	defer cancel()
	revs := make([]uint64, len(acts))
	wrote := false
	for i, a := range acts {
		b := l.marshal(a.unit, &a.value)
		var rev uint64
		var err error
		if a.create {
			rev, err = kv.Create(ctx, a.key, b)
		} else {
			rev, err = kv.Update(ctx, a.key, b, a.rev)
		}
		switch {
		case err == nil:
			revs[i], wrote = rev, true
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			// Taken by another, or the view is behind: look again.
			if e, gerr := kv.Get(ctx, a.key); gerr == nil {
				l.observe(e)
			}
			l.log.Debug("lease: taken by another replica", "unit", a.unit)
			l.report(a, conflict, 0)
		default:
			l.warn("acquire", "lease: acquiring failed", "unit", a.unit, "err", err)
			l.report(a, failed, 0)
		}
	}
	if !wrote {
		return
	}
	// Settle, then check that each lease's latest value is still this one
	// before serving. With a correct compare-and-set this always holds. It
	// is kept as a second line for a cluster whose nodes run different
	// versions (open checks only the server this connection talks to): on
	// Debian's nats-server 2.9.10 two replicas were both told their takeover
	// of a just-released unit succeeded (revisions 40 and 41 on the same
	// base, nats-server#4320), and the loser transferred the subscription
	// away from the winner. The later writer wins; the other backs off
	// unserved. One wait for the whole round.
	t := time.NewTimer(min(acquireSettle, l.tick/3))
	select {
	case <-t.C:
	case <-l.ctx.Done():
		t.Stop()
	}
	rctx, rcancel := context.WithTimeout(l.ctx, max(l.tick, time.Second))
	defer rcancel()
	for i, a := range acts {
		if revs[i] == 0 {
			continue
		}
		e, err := kv.Get(rctx, a.key)
		if err != nil {
			l.warn("acquire", "lease: reading an acquired lease back failed; not serving it", "unit", a.unit, "err", err)
			l.report(a, failed, 0)
			continue
		}
		var cur leaseValue
		if json.Unmarshal(e.Value(), &cur) != nil || cur.Instance != l.instance || cur.Term != a.term {
			l.observe(e)
			l.log.Info("lease: taken by another replica right after acquiring; not serving it", "unit", a.unit, "holder", cur.Replica)
			l.report(a, conflict, 0)
			continue
		}
		l.log.Info("lease: acquired", "unit", a.unit, "revision", revs[i], "previous", a.why, "resume", a.value.Resume != nil)
		l.report(a, written, revs[i])
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

// watch keeps the core's view up to date from the bucket; it starts again
// when the watcher ends, until Close.
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
				l.c.markSynced(time.Now())
				l.mu.Unlock()
				l.poke()
				continue
			}
			l.observe(e)
		}
		_ = w.Stop()
	}
}

// observe takes a key's new revision into the core's view.
func (l *KV) observe(e jetstream.KeyValueEntry) {
	op := e.Operation()
	deleted := op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge
	var v []byte
	if !deleted {
		v = e.Value()
	}
	l.mu.Lock()
	free := l.c.observe(e.Key(), e.Revision(), deleted, v, time.Now())
	l.mu.Unlock()
	if free {
		l.poke()
	}
}
