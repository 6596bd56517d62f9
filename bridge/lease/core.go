package lease

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/uagate/gateway/bridge/fence"
	"github.com/uagate/gateway/bridge/resume"
	"github.com/uagate/gateway/uastack/client"
)

// The decision core: what one replica does with the leases, as a function
// of the bucket as it observed it, the units it is given, the answers to its
// own writes and the clock. It does no I/O, starts no goroutine and reads no
// clock: the KV (kv.go) feeds it and carries its actions out, under its
// lock; the tests drive it with a fake clock.
//
// Fencing arithmetic, with T the TTL and t0 the time the holder's last
// successful write was decided (before it was sent):
//
//   - the holder renews every T/3 (renewEvery);
//   - a holding unrenewed for more than 2T/3 after t0 is fenced
//     (fenceAfter): Halt is sent, the lease is no longer written;
//   - Halt's deadline is t0 + T (stopAfter): by then the unit has stopped;
//   - another replica takes the lease only once it has seen its revision
//     unchanged for more than T + T/5 (expireAfter, with margin = T/5) of its
//     own clock. It saw that revision after it was written, so after t0: it
//     takes it at t0 + T + margin at the earliest, margin after the holder
//     stopped. Only the clocks' rates need to agree, not the clocks.
//   - the holding's fence (bridge/fence) is open until t0 + T, moved with
//     every successful renewal, and closed when the holding ends (halted,
//     lost, released): the writer group checks it before it hands a batch
//     to the sinks and the sinks before they publish, so a holder paused
//     past t0 + T (a stopped process, a stalled machine) publishes nothing
//     when it wakes, whatever its timers do first.
//
// Replica ids: a lease written with this replica's id by another process
// (instance) before this process's first presence write is an earlier
// life's: this replica takes it back before anyone else, but like anyone
// else only once it has expired — the earlier life may be alive and cut
// off, serving until its fence closes. Two live processes with one id: the
// one whose first presence came later (leaseValue.Since orders them)
// refuses to serve — it gives its units up, takes none and reports
// actRefuse — and the other goes on.

const (
	// saveEvery bounds how often a changed resume record is written.
	saveEvery = time.Second
	// presenceStale: a presence last renewed longer ago than this many
	// TTLs, by its writer's clock, counts as gone (it only biases the
	// balance, never safety).
	presenceStale = 10
)

func renewEvery(ttl time.Duration) time.Duration  { return ttl / 3 }
func fenceAfter(ttl time.Duration) time.Duration  { return 2 * ttl / 3 }
func stopAfter(ttl time.Duration) time.Duration   { return ttl }
func margin(ttl time.Duration) time.Duration      { return ttl / 5 }
func expireAfter(ttl time.Duration) time.Duration { return ttl + margin(ttl) }

// phase is where a unit stands with this replica.
type phase int

const (
	unitFree      phase = iota
	unitAcquiring       // a write taking the lease is out
	unitHeld            // this replica's: renewed and served
	unitReleasing       // held and being halted to be given up: renewed until halted, then released
	unitFenced          // being halted and not written again: not renewed in time, or someone else wrote
)

type unit struct {
	name, key  string
	wanted     bool // in the configuration
	phase      phase
	served     bool // Serve sent for this holding
	halting    bool // Halt sent
	halted     bool // Halt returned
	releaseOut bool // releasing: the release write is out
	remove     bool // releasing: delete the key (the unit is no longer configured)
	why        string
	rev        uint64    // revision of this replica's last write
	term       uint64    // of the acquisition that wrote rev
	acquired   time.Time // local
	lastOK     time.Time // t0: when the last successful write was decided
	lastWrite  time.Time // when the last write was decided
	deadline   time.Time // fenced: Halt's deadline
	rec        *resume.Record
	sess       *client.SessionState // the holder's OPC UA session (saveSession)
	recGen     uint64               // bumped by saveResume
	urgentGen  uint64               // a record to write at once (saveResumeNow)
	sessGen    uint64               // bumped by saveSession
	wroteGen   uint64               // recGen of the last successful write
	wroteSess  uint64               // sessGen of the last successful write
	freeSince  time.Time
	// releasedAt: when this replica gave it up to balance; it does not take
	// it back for a TTL (unless nobody else does).
	releasedAt time.Time
	// fence of the holding (nil when free): open until lastOK + stopAfter,
	// closed when the holding ends.
	fence *fence.Fence
}

// reset forgets a holding: the unit is free.
func (u *unit) reset() {
	u.endFence()
	u.phase = unitFree
	u.served, u.halting, u.halted, u.releaseOut, u.remove = false, false, false, false, false
	u.why = ""
	u.deadline = time.Time{}
}

// endFence closes the holding's fence: nothing of it is published any more.
func (u *unit) endFence() {
	u.fence.Close()
	u.fence = nil
}

// seen is a key as the bucket last showed it.
type seen struct {
	rev     uint64
	deleted bool
	bad     bool // a value that does not parse: treated as held, expiring
	val     leaseValue
	at      time.Time // when this revision was first seen (local, monotonic)
}

// leaseValue is the JSON value of a lease or a presence key.
type leaseValue struct {
	Replica  string    `json:"replica"`
	Instance string    `json:"instance"`
	Term     uint64    `json:"term,omitempty"`
	Unit     string    `json:"unit,omitempty"`
	Acquired time.Time `json:"acquired,omitzero"`
	Renewed  time.Time `json:"renewed"`
	Expires  time.Time `json:"expires"` // Renewed + TTL by the writer's clock: informative
	TTLms    int64     `json:"ttlMs"`
	Released bool      `json:"released,omitempty"`
	Held     int       `json:"held,omitempty"` // presence: units held
	// Since is the revision of the writer's first presence write (0 in
	// that write itself): of two processes with one replica id, the later
	// one refuses to serve.
	Since  uint64         `json:"since,omitempty"`
	Resume *resume.Record `json:"resume,omitempty"`
	// Session is what the holder's OPC UA session needs to be activated by
	// the next holder on its own channel (client.SessionState): kept only
	// for sessions over SecurityMode None, whose authentication token
	// travels unencrypted anyway.
	Session *client.SessionState `json:"session,omitempty"`
}

// actionKind says what an action asks the KV to do.
type actionKind int

const (
	// actAcquire: write value to key (Create when create, else Update on
	// rev), read it back after a moment, and answer written only when the
	// key still holds this write.
	actAcquire actionKind = iota + 1
	// actRenew: Update key with value on rev.
	actRenew
	// actRelease: Update key with value (released) on rev; Delete on rev
	// when remove.
	actRelease
	// actPresence: Put value on key.
	actPresence
	// actServe: Handler.Serve(unit), without waiting for it.
	actServe
	// actHalt: Handler.Halt(unit), after any Serve of the unit, with
	// haltDeadline(unit) as its deadline.
	actHalt
	// actDuplicate: another process (instance) writes with this replica's
	// id: warn.
	actDuplicate
)

type action struct {
	kind     actionKind
	unit     string
	key      string
	rev      uint64 // the revision an Update or a Delete expects
	create   bool
	remove   bool
	term     uint64
	gen      uint64 // actRenew: the resume record's generation written
	sessGen  uint64 // actRenew: the session state's generation written
	value    leaseValue
	at       time.Time // when decided: t0 if the write succeeds
	why      string    // actHalt: why; actAcquire: the previous holder
	instance string    // actDuplicate
}

// outcome is the answer to a write.
type outcome int

const (
	// written: the write succeeded with the revision.
	written outcome = iota
	// conflict: someone else changed the key (or deleted it).
	conflict
	// mine: the revision check failed, but the key holds this replica's
	// write of the same term (an answer lost); the revision is the key's.
	mine
	// failed: no answer, or an error that tells nothing about the key.
	failed
)

// Why a unit is halted (actHalt's why).
const (
	whyFenced  = "fenced"  // not renewed in time
	whyLost    = "lost"    // someone else wrote the lease
	whyBalance = "balance" // given to a replica with fewer units
	whyRemoved = "removed" // no longer configured
	whyClosing = "closing" // Close
	whyStopped = "stopped" // Close's context ended before the unit was given up
	whyRefused = "refused" // another process with this replica id was there first
)

// core is one replica's lease decisions. Not safe for concurrent use: the
// KV calls it under its lock.
type core struct {
	id, instance string
	ttl          time.Duration

	units      map[string]*unit // by name
	order      []string         // configured order
	keys       map[string]*unit // by key
	view       map[string]*seen // by key: leases and presences as last observed
	synced     time.Time        // when the bucket's content was first observed in full (zero: not yet)
	term       uint64
	released   time.Time // the last release for balance
	presence   time.Time // the last presence write decided
	firstPres  uint64    // revision of this process's first presence write (0: none yet)
	dup        string    // instance of another process writing with this replica id
	refused    bool      // dup was there first: serve nothing
	refuseSent bool      // actRefuse was sent
	closing    bool
}

func newCore(replicaID, instance string, ttl time.Duration) *core {
	return &core{
		id: replicaID, instance: instance, ttl: ttl,
		units: map[string]*unit{}, keys: map[string]*unit{}, view: map[string]*seen{},
	}
}

// setUnits sets the units to share, in order; a held unit no longer listed
// is halted and its lease deleted by the next decide.
func (c *core) setUnits(names []string) {
	want := map[string]bool{}
	c.order = c.order[:0]
	for _, n := range names {
		if want[n] {
			continue
		}
		want[n] = true
		c.order = append(c.order, n)
		u := c.units[n]
		if u == nil {
			u = &unit{name: n, key: unitKey(n)}
			c.units[n] = u
			c.keys[u.key] = u
		}
		u.wanted = true
	}
	for n, u := range c.units {
		if !want[n] {
			u.wanted = false
		}
	}
}

// observe takes a key's revision into the view (value nil with deleted);
// it reports whether a decision is worth taking at once: the key became
// free (deleted or released), or a lease this replica holds was written by
// someone else (lost: halted without waiting for the next renewal to fail).
func (c *core) observe(key string, rev uint64, deleted bool, value []byte, now time.Time) bool {
	if old := c.view[key]; old != nil && old.rev >= rev {
		return false // a watcher started again delivers what it had
	}
	s := &seen{rev: rev, at: now, deleted: deleted}
	if !deleted && json.Unmarshal(value, &s.val) != nil {
		s.bad = true
	}
	c.view[key] = s
	c.checkDuplicate(s)
	if u := c.keys[key]; u != nil && (u.phase == unitHeld || u.phase == unitReleasing) && !u.halted && rev > u.rev &&
		(s.deleted || s.bad || s.val.Instance != c.instance || s.val.Term != u.term) {
		c.lost(u, now)
		return true
	}
	return s.deleted || s.val.Released
}

// checkDuplicate notes a write with this replica id by another process
// after this one's first presence: revisions are the bucket's sequence,
// ordered across keys, so it is a live duplicate, not an earlier life. When
// the other's first presence came first, this process is the one to refuse.
func (c *core) checkDuplicate(s *seen) {
	if c.firstPres == 0 || s.deleted || s.bad || s.val.Replica != c.id || s.val.Instance == c.instance || s.rev <= c.firstPres {
		return
	}
	if c.dup == "" {
		c.dup = s.val.Instance
	}
	since := s.val.Since
	if since == 0 {
		since = s.rev // its first presence is this write, or later
	}
	if since < c.firstPres && !c.refused {
		c.refused = true
		c.closing = true
	}
}

// lost fences a holding someone else wrote: Halt by a third of a TTL, or
// by t0 + stopAfter when that is sooner. Its fence closes at once: the
// other writer may serve the unit already.
func (c *core) lost(u *unit, now time.Time) {
	u.fence.Close()
	u.phase, u.why = unitFenced, whyLost
	u.deadline = now.Add(renewEvery(c.ttl))
	if d := u.lastOK.Add(stopAfter(c.ttl)); d.Before(u.deadline) {
		u.deadline = d
	}
}

// markSynced notes that the view holds the whole bucket.
func (c *core) markSynced(now time.Time) {
	if c.synced.IsZero() {
		c.synced = now
	}
}

// close makes decide give every unit up and take none.
func (c *core) close() { c.closing = true }

// idle: no unit is held, being taken or being given up.
func (c *core) idle() bool {
	for _, u := range c.units {
		if u.phase != unitFree {
			return false
		}
	}
	return true
}

// sortedUnits lists the units in configured order, then those no longer
// configured by name: decisions do not depend on map order.
func (c *core) sortedUnits() []*unit {
	out := make([]*unit, 0, len(c.units))
	for _, n := range c.order {
		out = append(out, c.units[n])
	}
	var gone []*unit
	for _, u := range c.units {
		if !u.wanted {
			gone = append(gone, u)
		}
	}
	slices.SortFunc(gone, func(a, b *unit) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return append(out, gone...)
}

// decide is what to do at now: fence, serve, renew, release, write the
// presence, balance and (with acquire) take free units.
func (c *core) decide(now time.Time, acquire bool) []action {
	out := c.fence(now, nil)
	for _, u := range c.sortedUnits() {
		switch {
		case u.phase == unitFree && !u.wanted:
			delete(c.units, u.name)
			delete(c.keys, u.key)
			continue
		case u.phase == unitHeld && !u.wanted:
			out = c.startRelease(u, whyRemoved, true, out)
		case u.phase == unitHeld && c.refused:
			out = c.startRelease(u, whyRefused, false, out)
		case u.phase == unitHeld && c.closing:
			out = c.startRelease(u, whyClosing, false, out)
		case u.phase == unitHeld && !u.served:
			u.served = true
			out = append(out, action{kind: actServe, unit: u.name})
		}
		switch {
		case (u.phase == unitHeld || u.phase == unitReleasing) && !u.halted:
			since := now.Sub(u.lastWrite)
			// The first resume record of a holding goes out at once: a
			// replica that dies in its first second must leave a record
			// to resume from.
			// A new session state goes out at once too: the next holder
			// activates the session it names (activations are rare).
			urgent := u.urgentGen > u.wroteGen
			if since >= renewEvery(c.ttl) || (u.recGen != u.wroteGen && (u.wroteGen == 0 || since >= saveEvery)) || urgent || u.sessGen != u.wroteSess {
				u.lastWrite = now
				out = append(out, action{kind: actRenew, unit: u.name, key: u.key, rev: u.rev, term: u.term, gen: u.recGen, sessGen: u.sessGen, value: c.value(u, now), at: now})
			}
		case u.phase == unitReleasing && u.halted && !u.releaseOut:
			u.releaseOut = true
			v := c.value(u, now)
			v.Released, v.Expires = true, now
			out = append(out, action{kind: actRelease, unit: u.name, key: u.key, rev: u.rev, term: u.term, remove: u.remove, value: v, at: now})
		}
	}
	out = c.presenceAction(now, out)
	if c.closing || c.synced.IsZero() {
		return out
	}
	out = c.balance(now, out)
	if acquire {
		out = c.acquire(now, out)
	}
	return out
}

// startRelease begins giving a held unit up: Halt now, the lease renewed
// until Halt returns, then released (or deleted, with remove).
func (c *core) startRelease(u *unit, why string, remove bool, out []action) []action {
	u.phase, u.why, u.remove = unitReleasing, why, remove
	u.halting = true
	return append(out, action{kind: actHalt, unit: u.name, why: why})
}

// fence fences the holdings unrenewed for more than fenceAfter and halts
// the fenced units not halting yet; it needs no I/O, so the KV runs it on a
// timer of its own too.
func (c *core) fence(now time.Time, out []action) []action {
	for _, u := range c.sortedUnits() {
		if (u.phase == unitHeld || u.phase == unitReleasing) && now.Sub(u.lastOK) > fenceAfter(c.ttl) {
			u.phase, u.why = unitFenced, whyFenced
			u.deadline = u.lastOK.Add(stopAfter(c.ttl))
		}
		if u.phase != unitFenced {
			continue
		}
		if u.halted {
			u.reset() // it stopped already: a release that did not get out in time
			continue
		}
		if !u.halting {
			u.halting = true
			out = append(out, action{kind: actHalt, unit: u.name, why: u.why, at: u.lastOK})
		}
	}
	return out
}

// nextFence is when fence has something to do next at the latest (zero:
// nothing held).
func (c *core) nextFence() time.Time {
	var next time.Time
	for _, u := range c.units {
		if u.phase == unitHeld || u.phase == unitReleasing {
			t := u.lastOK.Add(fenceAfter(c.ttl) + time.Nanosecond)
			if next.IsZero() || t.Before(next) {
				next = t
			}
		}
	}
	return next
}

// haltDeadline is the deadline of a unit's Halt as it begins: the fenced
// deadline, else t0 + stopAfter.
func (c *core) haltDeadline(name string) time.Time {
	u := c.units[name]
	switch {
	case u == nil:
		return time.Time{}
	case u.phase == unitFenced:
		return u.deadline
	}
	return u.lastOK.Add(stopAfter(c.ttl))
}

// halted takes a Halt's return: a fenced unit is free, a released one is
// released by the next decide, with the final resume state (taken after
// the last acknowledgements) in place of the last saved record's.
func (c *core) halted(name string, final *client.ResumeState, now time.Time) {
	u := c.units[name]
	if u == nil || !u.halting {
		return
	}
	u.halted = true
	u.endFence()
	if u.phase == unitFenced {
		u.reset()
		return
	}
	if final != nil && u.rec != nil && final.SubscriptionID == u.rec.State.SubscriptionID {
		r := *u.rec
		r.State = *final
		r.Saved = now
		u.rec = &r
	}
}

// result takes the answer to a write action; it reports whether a decision
// is due at once (a unit to serve, a write to repeat).
func (c *core) result(a action, o outcome, rev uint64, now time.Time) bool {
	if a.kind == actPresence {
		if o == written {
			if c.firstPres != 0 {
				return false
			}
			c.firstPres = rev
			for _, s := range c.view { // seen before this write's answer
				c.checkDuplicate(s)
			}
			return true
		}
		return false
	}
	u := c.units[a.unit]
	if u == nil || u.term != a.term {
		return false
	}
	switch a.kind {
	case actAcquire:
		if u.phase != unitAcquiring {
			return false
		}
		if o != written {
			u.reset()
			return false
		}
		u.phase, u.rev = unitHeld, rev
		u.acquired, u.lastOK, u.lastWrite = a.at, a.at, a.at
		u.fence = fence.New(rev, a.at.Add(stopAfter(c.ttl)))
		u.rec, u.sess, u.recGen, u.wroteGen, u.sessGen, u.wroteSess = a.value.Resume, a.value.Session, 0, 0, 0, 0
		u.urgentGen = 0
		u.freeSince = time.Time{}
		if c.closing {
			// Close began meanwhile: give it back at once, unserved.
			u.phase, u.why, u.halting, u.halted = unitReleasing, whyClosing, true, true
		}
		return true
	case actRenew:
		if u.phase != unitHeld && u.phase != unitReleasing {
			return false
		}
		switch o {
		case written:
			u.rev, u.lastOK, u.wroteGen, u.wroteSess = rev, a.at, a.gen, a.sessGen
			if u.fence != nil {
				u.fence.Extend(a.at.Add(stopAfter(c.ttl)))
			}
		case mine:
			u.rev, u.lastWrite = rev, time.Time{} // write again at once
			return true
		case conflict:
			c.lost(u, a.at)
			return true
		}
	case actRelease:
		if u.phase != unitReleasing && u.phase != unitFenced {
			return false
		}
		if u.remove {
			delete(c.units, u.name)
			delete(c.keys, u.key)
			return false
		}
		u.reset()
		return true
	}
	return false
}

// abandon fences every unit at once (the loop ended before it could give
// them up): Halt with a deadline already passed.
func (c *core) abandon(now time.Time) []action {
	var out []action
	for _, u := range c.sortedUnits() {
		switch u.phase {
		case unitAcquiring:
			u.reset()
		case unitHeld, unitReleasing:
			if !u.halted {
				u.phase, u.why, u.deadline = unitFenced, whyStopped, now
				u.fence.Close()
			}
		}
	}
	return c.fence(now, out)
}

// value is u's lease value for a write at now.
func (c *core) value(u *unit, now time.Time) leaseValue {
	return leaseValue{
		Replica: c.id, Instance: c.instance, Term: u.term, Unit: u.name,
		Acquired: u.acquired, Renewed: now, Expires: now.Add(c.ttl), TTLms: c.ttl.Milliseconds(),
		Resume: u.rec, Session: u.sess, Since: c.firstPres,
	}
}

// presenceAction writes the presence every renewEvery and reports a
// duplicate replica id.
func (c *core) presenceAction(now time.Time, out []action) []action {
	if c.refused {
		return out
	}
	if now.Sub(c.presence) < renewEvery(c.ttl) {
		return out
	}
	c.presence = now
	held := 0
	for _, u := range c.units {
		if u.phase == unitHeld {
			held++
		}
	}
	if c.dup != "" {
		out = append(out, action{kind: actDuplicate, instance: c.dup})
	}
	v := leaseValue{Replica: c.id, Instance: c.instance, Renewed: now, Expires: now.Add(c.ttl), TTLms: c.ttl.Milliseconds(), Held: held, Since: c.firstPres}
	return append(out, action{kind: actPresence, key: presenceKey(c.id), value: v, at: now})
}

// ttlOf is the TTL a value declares, bounded to sane values.
func (c *core) ttlOf(v *leaseValue) time.Duration {
	d := time.Duration(v.TTLms) * time.Millisecond
	if d < MinTTL || d > 24*time.Hour {
		return c.ttl
	}
	return d
}

// expired says whether a key seen as s has gone unrenewed for its TTL and
// the margin, by this replica's clock.
func (c *core) expired(s *seen, now time.Time) bool {
	d := c.ttl
	if !s.bad {
		d = c.ttlOf(&s.val)
	}
	return now.Sub(s.at) > expireAfter(d)
}

// earlierLife: a lease with this replica id written by another process
// before this one's first presence write, none having written with this id
// since, and expired: a restarted replica takes its leases back first (a
// live duplicate would have written since, every renewEvery; one cut off
// serves until its fence closes, before the expiry).
func (c *core) earlierLife(s *seen, now time.Time) bool {
	return s.val.Replica == c.id && s.val.Instance != c.instance && c.dup == "" && c.firstPres != 0 && s.rev < c.firstPres &&
		c.expired(s, now)
}

// census counts the live replicas (this one included) and the units each
// holds, from the view.
func (c *core) census(now time.Time) (live int, held map[string]int) {
	held = map[string]int{}
	replicas := map[string]bool{c.id: true}
	for key, s := range c.view {
		if s.deleted || s.bad || !isPresenceKey(key) || c.expired(s, now) {
			continue
		}
		if now.Sub(s.val.Renewed) > presenceStale*c.ttl {
			continue
		}
		replicas[s.val.Replica] = true
	}
	for key, s := range c.view {
		u := c.keys[key]
		if u == nil || !u.wanted || s.deleted || s.bad || s.val.Released || c.expired(s, now) {
			continue
		}
		if s.val.Replica != c.id {
			held[s.val.Replica]++
		}
	}
	for _, u := range c.units {
		if u.phase != unitFree && u.wanted {
			held[c.id]++
		}
	}
	for r := range replicas {
		if _, ok := held[r]; !ok {
			held[r] = 0
		}
	}
	return len(replicas), held
}

// target is a replica's fair share: ceil(units / live replicas).
func (c *core) target(now time.Time) (target int, held map[string]int) {
	live, held := c.census(now)
	n := 0
	for _, u := range c.units {
		if u.wanted {
			n++
		}
	}
	return (n + live - 1) / live, held
}

// balance releases one unit when this replica holds more than its share
// and another live replica holds less (at most one per renewEvery).
func (c *core) balance(now time.Time, out []action) []action {
	if now.Sub(c.released) < renewEvery(c.ttl) {
		return out
	}
	target, held := c.target(now)
	mine := 0
	var last *unit
	// The candidate: the unit acquired last among those held for
	// fenceAfter at least (a replica that has just started, and settles
	// within renewEvery, takes free units first).
	for _, n := range c.order {
		u := c.units[n]
		if u.phase == unitHeld && u.wanted {
			mine++
			if now.Sub(u.acquired) >= fenceAfter(c.ttl) && (last == nil || u.acquired.After(last.acquired)) {
				last = u
			}
		}
	}
	// Another live replica holds two fewer (or fewer than the target while
	// this one is above it): moving one unit evens them out.
	under := false
	for r, n := range held {
		if r != c.id && (n < mine-1 || (mine > target && n < target)) {
			under = true
		}
	}
	if !under || last == nil {
		return out
	}
	c.released = now
	last.releasedAt = now
	return c.startRelease(last, whyBalance, false, out)
}

// acquire takes free units: this replica's own leases (written by this
// process, or by an earlier life) at once, others while below the target
// (once the first view has settled for renewEvery, so that the others are
// counted), and any unit free for longer than a TTL.
func (c *core) acquire(now time.Time, out []action) []action {
	settled := now.Sub(c.synced) >= renewEvery(c.ttl)
	target, _ := c.target(now)
	mine := 0
	for _, u := range c.units {
		if u.phase != unitFree && u.wanted {
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
	for _, n := range c.order {
		u := c.units[n]
		if u.phase != unitFree {
			continue
		}
		s := c.view[u.key]
		cd := cand{u: u, s: s}
		switch {
		case s == nil || s.deleted:
			cd.create = true
		case s.bad:
			if !c.expired(s, now) {
				u.freeSince = time.Time{}
				continue
			}
		case s.val.Released:
		case s.val.Replica == c.id && (s.val.Instance == c.instance || c.earlierLife(s, now)):
			cd.own = true // an earlier life, or fenced and not taken since
		case !c.expired(s, now):
			u.freeSince = time.Time{}
			continue // held by another
		}
		if u.freeSince.IsZero() {
			u.freeSince = now
		}
		cd.stale = now.Sub(u.freeSince) > c.ttl
		if !cd.stale && !u.releasedAt.IsZero() && now.Sub(u.releasedAt) < c.ttl {
			continue // given to another replica just now
		}
		cands = append(cands, cd)
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
	for _, cd := range cands {
		if !cd.own && !cd.stale && (!settled || mine >= target) {
			continue
		}
		mine++
		u, s := cd.u, cd.s
		c.term++
		u.phase, u.term = unitAcquiring, c.term
		a := action{kind: actAcquire, unit: u.name, key: u.key, create: cd.create, term: u.term, at: now}
		a.value = leaseValue{
			Replica: c.id, Instance: c.instance, Term: u.term, Unit: u.name,
			Acquired: now, Renewed: now, Expires: now.Add(c.ttl), TTLms: c.ttl.Milliseconds(),
		}
		if s != nil && !s.deleted {
			a.rev, a.why = s.rev, s.val.Replica
			if !s.bad && s.val.Resume != nil {
				r := *s.val.Resume
				a.value.Resume = &r
			}
			if !s.bad && s.val.Session != nil {
				st := *s.val.Session
				a.value.Session = &st
			}
		}
		out = append(out, a)
	}
	return out
}

// holds reports whether this replica holds a unit's lease and serves it.
func (c *core) holds(name string) bool {
	u := c.units[name]
	return u != nil && u.phase == unitHeld
}

// heldUnits lists the units this replica serves, in configured order.
func (c *core) heldUnits() []string {
	var out []string
	for _, n := range c.order {
		if c.holds(n) {
			out = append(out, n)
		}
	}
	return out
}

// holders lists every configured unit with its holder, in order.
func (c *core) holders(now time.Time) []Holding {
	out := make([]Holding, 0, len(c.order))
	for _, n := range c.order {
		u := c.units[n]
		h := Holding{Unit: n}
		switch s := c.view[u.key]; {
		case u.phase == unitHeld:
			h.Holder, h.Local = c.id, true
		case s == nil || s.deleted || s.bad || s.val.Released || c.expired(s, now):
		case s.val.Replica == c.id && s.val.Instance == c.instance:
			// Written by this process and not served (halting, or just
			// acquired and settling): not serving is what counts.
		default:
			h.Holder = s.val.Replica
		}
		out = append(out, h)
	}
	return out
}

// loadResume is the record that came with the lease or saved since.
func (c *core) loadResume(name string) (resume.Record, bool) {
	u := c.units[name]
	if u == nil || u.phase == unitFree || u.phase == unitAcquiring || u.rec == nil {
		return resume.Record{}, false
	}
	// A copy; its item list is shared (resume.Store: nobody modifies it).
	return *u.rec, true
}

// saveResume keeps a record for the next write of the lease; it reports
// whether the unit is this replica's (and, second, whether the record is
// written by the next renewal).
func (c *core) saveResume(name string, rec resume.Record) (ok, due bool) {
	u := c.units[name]
	if u == nil || u.phase == unitFree || u.phase == unitAcquiring {
		return false, false
	}
	u.rec = &rec // kept as it is: a writer group saves only when its state changed (client.ResumeMark)
	u.recGen++
	return true, u.phase == unitHeld
}

// saveResumeNow is saveResume for a record to be written at once, however
// recently the last one was; gen is its generation (recordWritten).
func (c *core) saveResumeNow(name string, rec resume.Record) (gen uint64, ok bool) {
	if ok, _ := c.saveResume(name, rec); !ok {
		return 0, false
	}
	u := c.units[name]
	u.urgentGen = u.recGen
	return u.recGen, true
}

// recordWritten reports whether unit name's record of generation gen (or a
// later one) is in the bucket, and whether this replica still holds it.
func (c *core) recordWritten(name string, gen uint64) (written, held bool) {
	u := c.units[name]
	if u == nil || (u.phase != unitHeld && u.phase != unitReleasing) {
		return false, false
	}
	return u.wroteGen >= gen, true
}

// loadSession is the OPC UA session state that came with the lease or
// saved since (nil: none).
func (c *core) loadSession(name string) *client.SessionState {
	u := c.units[name]
	if u == nil || u.phase == unitFree || u.phase == unitAcquiring || u.sess == nil {
		return nil
	}
	st := *u.sess
	return &st
}

// saveSession keeps the holder's OPC UA session state for the next write
// of the lease, as saveResume does a record.
func (c *core) saveSession(name string, st client.SessionState) (ok, due bool) {
	u := c.units[name]
	if u == nil || u.phase == unitFree || u.phase == unitAcquiring {
		return false, false
	}
	u.sess = &st
	u.sessGen++
	return true, u.phase == unitHeld
}

// refusal reports, once, that another process with this replica id was
// there first (its instance): this one gives everything up and serves
// nothing.
func (c *core) refusal() (string, bool) {
	if !c.refused || c.refuseSent {
		return "", false
	}
	c.refuseSent = true
	return c.dup, true
}

// fenceOf is the fence of a unit's holding; a closed one when this replica
// does not serve it.
func (c *core) fenceOf(name string) *fence.Fence {
	if u := c.units[name]; u != nil && u.phase == unitHeld && u.fence != nil {
		return u.fence
	}
	f := fence.New(0, time.Time{})
	f.Close()
	return f
}
