package lease

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/resume"
	"github.com/uagate/gateway/uastack/client"
)

// The decision core under a fake clock: table tests of single decisions,
// and runs of several cores sharing a simulated bucket (compare-and-set by
// revision, one revision sequence across keys, as JetStream's KV) that
// check who serves what at every step.

const simTTL = 3 * time.Second

var t0 = time.Unix(1_000_000, 0)

// obs is a key as a test shows it to a core.
type obs struct {
	key  string
	rev  uint64
	val  *leaseValue   // nil: deleted
	raw  string        // instead of val: a value that does not parse
	seen time.Duration // when first seen, after t0
}

func lease(replica, instance string, released bool) *leaseValue {
	return &leaseValue{Replica: replica, Instance: instance, Term: 1, TTLms: simTTL.Milliseconds(), Released: released}
}

func presence(replica, instance string, renewed time.Time) *leaseValue {
	return &leaseValue{Replica: replica, Instance: instance, Renewed: renewed, TTLms: simTTL.Milliseconds()}
}

func (c *core) show(os ...obs) {
	for _, o := range os {
		var b []byte
		switch {
		case o.raw != "":
			b = []byte(o.raw)
		case o.val != nil:
			b, _ = json.Marshal(o.val)
		}
		c.observe(o.key, o.rev, o.val == nil && o.raw == "", b, t0.Add(o.seen))
	}
}

// describe names actions compactly: "acquire u0 create", "renew u0 @20",
// "halt u0 fenced", "serve u0", "presence", "duplicate i2".
func describe(acts []action, kinds ...actionKind) []string {
	var out []string
	for _, a := range acts {
		if len(kinds) > 0 && !slices.Contains(kinds, a.kind) {
			continue
		}
		switch a.kind {
		case actAcquire:
			if a.create {
				out = append(out, "acquire "+a.unit+" create")
			} else {
				out = append(out, fmt.Sprintf("acquire %s @%d", a.unit, a.rev))
			}
		case actRenew:
			out = append(out, fmt.Sprintf("renew %s @%d", a.unit, a.rev))
		case actRelease:
			out = append(out, fmt.Sprintf("release %s @%d", a.unit, a.rev))
		case actServe:
			out = append(out, "serve "+a.unit)
		case actHalt:
			out = append(out, "halt "+a.unit+" "+a.why)
		case actPresence:
			out = append(out, "presence")
		case actDuplicate:
			out = append(out, "duplicate "+a.instance)
		}
	}
	return out
}

// startedCore is replica a (instance i1) with units, its first presence
// written at revision 10 and the bucket's content seen at t0.
func startedCore(units ...string) *core { return startedCoreOf("a", "i1", units...) }

// startedCoreOf is startedCore as replica id, instance instance.
func startedCoreOf(id, instance string, units ...string) *core {
	c := newCore(id, instance, simTTL)
	c.setUnits(units)
	for _, a := range c.decide(t0, false) {
		if a.kind == actPresence {
			c.result(a, written, 10, t0)
		}
	}
	c.markSynced(t0)
	return c
}

func TestCoreAcquisition(t *testing.T) {
	T := simTTL
	rec := &resume.Record{Fingerprint: "fp", State: client.ResumeState{SubscriptionID: 5}}
	carried := lease("b", "j", true)
	carried.Resume = rec
	for _, c := range []struct {
		name    string
		view    []obs
		at      time.Duration // after t0
		unsafe  bool
		want    []string
		carries bool // the acquisition of u0 carries the record
	}{
		{name: "a new replica waits for its view to settle", at: T/3 - time.Nanosecond},
		{name: "settled: the free units, up to the target", at: T / 3, want: []string{"acquire u0 create", "acquire u1 create"}},
		{name: "not on an unsafe server", at: T / 3, unsafe: true},
		{name: "another live replica: the target is one", at: T / 3,
			view: []obs{{key: "replica.b", rev: 11, val: presence("b", "j", t0)}},
			want: []string{"acquire u0 create"}},
		{name: "a presence older than 10 TTL by its writer's clock does not count", at: T / 3,
			view: []obs{{key: "replica.b", rev: 11, val: presence("b", "j", t0.Add(-11*T))}},
			want: []string{"acquire u0 create", "acquire u1 create"}},
		{name: "held by another and renewed: not taken", at: T / 3,
			view: []obs{{key: "group.u0", rev: 12, val: lease("b", "j", false)}},
			want: []string{"acquire u1 create"}},
		{name: "expiry boundary: unchanged for exactly TTL + margin is not expired", at: T + T/5,
			view: []obs{{key: "group.u0", rev: 12, val: lease("b", "j", false)}},
			want: []string{"acquire u1 create"}},
		{name: "expiry boundary: a nanosecond later it is", at: T + T/5 + time.Nanosecond,
			view: []obs{{key: "group.u0", rev: 12, val: lease("b", "j", false)}},
			want: []string{"acquire u0 @12", "acquire u1 create"}},
		{name: "released: taken at once, with its resume record", at: T / 3,
			view:    []obs{{key: "group.u0", rev: 12, val: carried}},
			want:    []string{"acquire u0 @12", "acquire u1 create"},
			carries: true},
		{name: "deleted: created", at: T / 3,
			view: []obs{{key: "group.u0", rev: 12}},
			want: []string{"acquire u0 create", "acquire u1 create"}},
		{name: "a value that does not parse is held until it expires", at: T / 3,
			view: []obs{{key: "group.u0", rev: 12, raw: "{"}},
			want: []string{"acquire u1 create"}},
		{name: "own lease of an earlier life: not before it expired (the earlier life may be cut off, serving)", at: T + T/5,
			view: []obs{{key: "group.u1", rev: 5, val: lease("a", "i0", false)}},
			want: []string{"acquire u0 create"}},
		{name: "own lease of an earlier life (before this one's first presence): first, once expired", at: T + T/5 + time.Nanosecond,
			view: []obs{{key: "group.u1", rev: 5, val: lease("a", "i0", false)}},
			want: []string{"acquire u1 @5", "acquire u0 create"}},
		{name: "this process's own lease (fenced, not taken since): at once", at: 0,
			view: []obs{{key: "group.u1", rev: 15, val: lease("a", "i1", false)}},
			want: []string{"acquire u1 @15"}},
		{name: "own replica id written after this one's first presence: another process's", at: T / 3,
			view: []obs{{key: "group.u1", rev: 15, val: lease("a", "i2", false)}},
			want: []string{"acquire u0 create"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := startedCore("u0", "u1")
			now := t0.Add(c.at)
			k.show(c.view...)
			acts := k.decide(now, !c.unsafe)
			if got := describe(acts, actAcquire); !slices.Equal(got, c.want) {
				t.Fatalf("acquisitions %q, want %q", got, c.want)
			}
			for _, a := range acts {
				if a.kind != actAcquire {
					continue
				}
				if a.value.Replica != "a" || a.value.Instance != "i1" || a.value.Term != a.term || a.term == 0 || !a.at.Equal(now) {
					t.Errorf("acquisition value %+v term %d at %v", a.value, a.term, a.at)
				}
				if got := a.value.Resume != nil; got != (c.carries && a.unit == "u0") {
					t.Errorf("%s carries a resume record: %v", a.unit, got)
				}
			}
			// Decided once: being acquired, not again.
			if again := describe(k.decide(now, !c.unsafe), actAcquire); len(again) != 0 {
				t.Errorf("acquired twice: %v", again)
			}
		})
	}
}

// held makes k hold unit u, acquired (and last written) at at, revision
// rev; the other acquisitions of that decision fail.
func held(t *testing.T, k *core, u string, at time.Time, rev uint64) {
	t.Helper()
	k.show(obs{key: unitKey(u), rev: rev - 1, val: lease("a", "i1", true), seen: at.Sub(t0)})
	for _, a := range k.decide(at, true) {
		if a.kind == actAcquire {
			if a.unit == u {
				k.result(a, written, rev, at)
			} else {
				k.result(a, failed, 0, at)
			}
		}
	}
	if !k.holds(u) {
		t.Fatalf("%s not held", u)
	}
}

func TestCoreRenewal(t *testing.T) {
	T := simTTL
	k := startedCore("u0")
	t1 := t0.Add(T)
	held(t, k, "u0", t1, 20)
	if got := describe(k.decide(t1, true), actServe, actRenew); !slices.Equal(got, []string{"serve u0"}) {
		t.Fatalf("after the acquisition %v, want serve", got)
	}
	if got := describe(k.decide(t1.Add(T/3-time.Nanosecond), true), actServe, actRenew); len(got) != 0 {
		t.Fatalf("before T/3: %v", got)
	}
	acts := k.decide(t1.Add(T/3), true)
	if got := describe(acts, actRenew); !slices.Equal(got, []string{"renew u0 @20"}) {
		t.Fatalf("at T/3: %v", got)
	}
	renewal := acts[slices.IndexFunc(acts, func(a action) bool { return a.kind == actRenew })]
	k.result(renewal, written, 21, t1.Add(T/3))
	// A first resume record goes out at once, later ones at most once per
	// saveEvery.
	t2 := t1.Add(T / 3)
	k.saveResume("u0", resume.Record{Fingerprint: "fp"})
	acts = k.decide(t2, true)
	if got := describe(acts, actRenew); !slices.Equal(got, []string{"renew u0 @21"}) || acts[0].value.Resume == nil {
		t.Fatalf("first record: %v", got)
	}
	k.result(acts[0], written, 22, t2)
	k.saveResume("u0", resume.Record{Fingerprint: "fp2"})
	if got := describe(k.decide(t2.Add(saveEvery-time.Nanosecond), true), actRenew); len(got) != 0 {
		t.Fatalf("second record before saveEvery: %v", got)
	}
	acts = k.decide(t2.Add(saveEvery), true)
	if got := describe(acts, actRenew); !slices.Equal(got, []string{"renew u0 @22"}) || acts[0].value.Resume.Fingerprint != "fp2" {
		t.Fatalf("second record: %v", got)
	}
	// A write whose answer was lost (the key holds it): its revision is
	// adopted and the lease written again at once.
	t3 := t2.Add(saveEvery)
	if again := k.result(acts[0], mine, 30, t3); !again {
		t.Error("adopting a revision asks for no decision")
	}
	if got := describe(k.decide(t3, true), actRenew); !slices.Equal(got, []string{"renew u0 @30"}) {
		t.Fatalf("after an adopted revision: %v", got)
	}
	if rec, ok := k.loadResume("u0"); !ok || rec.Fingerprint != "fp2" {
		t.Errorf("loadResume %+v %v", rec, ok)
	}
	if ok, _ := k.saveResume("nope", resume.Record{}); ok {
		t.Error("saved the record of a unit not held")
	}
}

// TestCoreSession: the holder's OPC UA session state goes out with the
// next write at once, without taking the first resume record's turn (that
// one still goes out at once after it), and comes to the next holder with
// the released lease.
func TestCoreSession(t *testing.T) {
	T := simTTL
	k := startedCore("u0")
	t1 := t0.Add(T)
	held(t, k, "u0", t1, 20)
	k.decide(t1, true) // serve
	st := client.SessionState{SessionID: "ns=1;i=7", AuthenticationToken: "b=AQ==", SecurityMode: 1}
	if ok, _ := k.saveSession("u0", st); !ok {
		t.Fatal("session of a held unit not saved")
	}
	acts := k.decide(t1, true)
	if got := describe(acts, actRenew); !slices.Equal(got, []string{"renew u0 @20"}) || acts[0].value.Session == nil || acts[0].value.Session.SessionID != st.SessionID {
		t.Fatalf("session state: %v", got)
	}
	k.result(acts[0], written, 21, t1)
	if got := describe(k.decide(t1, true), actRenew); len(got) != 0 {
		t.Fatalf("written again with nothing new: %v", got)
	}
	k.saveResume("u0", resume.Record{Fingerprint: "fp"})
	acts = k.decide(t1, true)
	if got := describe(acts, actRenew); !slices.Equal(got, []string{"renew u0 @21"}) || acts[0].value.Resume == nil || acts[0].value.Session == nil {
		t.Fatalf("the first record after the session's write: %v", got)
	}
	k.result(acts[0], written, 22, t1)
	if got := k.loadSession("u0"); got == nil || got.AuthenticationToken != st.AuthenticationToken {
		t.Errorf("loadSession %+v", got)
	}
	if ok, _ := k.saveSession("nope", st); ok {
		t.Error("saved the session of a unit not held")
	}
	// Another replica takes the released lease, and the session with it.
	v := lease("a", "i1", true)
	v.Session = &st
	b := startedCoreOf("b", "i2", "u0")
	t2 := t1.Add(T / 3)
	b.show(obs{key: unitKey("u0"), rev: 23, val: v, seen: t2.Sub(t0)})
	for _, a := range b.decide(t2, true) {
		if a.kind == actAcquire {
			b.result(a, written, 24, t2)
		}
	}
	if got := b.loadSession("u0"); !b.holds("u0") || got == nil || got.SessionID != st.SessionID {
		t.Errorf("the next holder's session state: %+v (holds %v)", got, b.holds("u0"))
	}
}

// TestCoreFencing checks the fencing arithmetic at its boundaries: the
// holder halts once its last successful write is more than 2T/3 old, with a
// deadline of that write + T; another replica that saw that write takes the
// lease only more than T + T/5 after — the margin after the holder stopped.
func TestCoreFencing(t *testing.T) {
	T := simTTL
	a := startedCore("u0")
	t1 := t0.Add(T)
	held(t, a, "u0", t1, 20)
	a.decide(t1, true) // serve
	if next := a.nextFence(); !next.Equal(t1.Add(2*T/3 + time.Nanosecond)) {
		t.Errorf("nextFence %v, want t1 + 2T/3 + 1ns", next.Sub(t1))
	}
	// Renewals fail from now on.
	for at := t1; at.Before(t1.Add(2 * T / 3)); at = at.Add(T / 30) {
		for _, x := range a.decide(at, true) {
			if x.kind == actRenew {
				a.result(x, failed, 0, at)
			}
			if x.kind == actHalt {
				t.Fatalf("halted at %v, before 2T/3", at.Sub(t1))
			}
		}
	}
	if got := describe(a.fence(t1.Add(2*T/3), nil)); len(got) != 0 {
		t.Fatalf("at exactly 2T/3: %v", got)
	}
	if got := describe(a.fence(t1.Add(2*T/3+time.Nanosecond), nil)); !slices.Equal(got, []string{"halt u0 fenced"}) {
		t.Fatalf("past 2T/3: %v", got)
	}
	if a.holds("u0") {
		t.Error("a fenced unit is still held")
	}
	stop := a.haltDeadline("u0")
	if !stop.Equal(t1.Add(T)) {
		t.Errorf("halt deadline t1 + %v, want t1 + T", stop.Sub(t1))
	}
	if got := describe(a.decide(t1.Add(T), true)); slices.ContainsFunc(got, func(s string) bool { return !strings.HasPrefix(s, "presence") }) {
		t.Errorf("a fenced unit halting: %v", got)
	}

	// b saw the last write at t1 at the earliest (it was written after it
	// was decided).
	b := newCore("b", "j1", T)
	b.setUnits([]string{"u0"})
	for _, x := range b.decide(t1, false) {
		if x.kind == actPresence {
			b.result(x, written, 30, t1)
		}
	}
	b.markSynced(t1)
	b.show(obs{key: "group.u0", rev: 20, val: lease("a", "i1", false), seen: t1.Sub(t0)})
	if got := describe(b.decide(t1.Add(T+T/5), true), actAcquire); len(got) != 0 {
		t.Fatalf("b takes it at t1 + T + T/5: %v", got)
	}
	took := t1.Add(T + T/5 + time.Nanosecond)
	if got := describe(b.decide(took, true), actAcquire); !slices.Equal(got, []string{"acquire u0 @20"}) {
		t.Fatalf("b past t1 + T + T/5: %v", got)
	}
	if gap := took.Sub(stop); gap <= margin(T) || gap > margin(T)+time.Nanosecond {
		t.Errorf("b takes it %v after a must have stopped, want the margin %v", gap, margin(T))
	}

	// a's Halt returns: the unit is free, and a takes its own lease back at
	// once when nobody else wrote it.
	a.halted("u0", nil, t1.Add(T))
	a.show(obs{key: "group.u0", rev: 20, val: lease("a", "i1", false), seen: T})
	if got := describe(a.decide(t1.Add(T), true), actAcquire); !slices.Equal(got, []string{"acquire u0 @20"}) {
		t.Fatalf("after the halt: %v", got)
	}
}

// holdingTwo is a core holding u0 (revision 20) and u1 (21), acquired at
// t1 = t0 + TTL.
func holdingTwo(t *testing.T) (*core, time.Time) {
	k := startedCore("u0", "u1")
	t1 := t0.Add(simTTL)
	held(t, k, "u0", t1, 20)
	held(t, k, "u1", t1, 21)
	return k, t1
}

// TestCoreLostAndRelease: a renewal refused because another wrote the key
// halts at once (by a third of a TTL); a release keeps renewing until its
// Halt returns, then writes the release with the final resume state.
func TestCoreLostAndRelease(t *testing.T) {
	T := simTTL
	k, t1 := holdingTwo(t)
	k.decide(t1, true)
	at := t1.Add(T / 3)
	for _, x := range k.decide(at, true) {
		switch {
		case x.kind == actRenew && x.unit == "u0":
			k.result(x, conflict, 0, at)
		case x.kind == actRenew:
			k.result(x, written, 22, at)
		}
	}
	if got := describe(k.decide(at, true), actHalt); !slices.Equal(got, []string{"halt u0 lost"}) {
		t.Fatalf("after a refused renewal: %v", got)
	}
	if d := k.haltDeadline("u0"); !d.Equal(at.Add(T / 3)) {
		t.Errorf("lost: deadline +%v, want T/3", d.Sub(at))
	}
	k.halted("u0", nil, at)

	// u1 is given up (removed from the configuration).
	k.saveResume("u1", resume.Record{State: client.ResumeState{SubscriptionID: 7, LastAcked: 3}})
	k.setUnits([]string{"u0"})
	acts := k.decide(at, true)
	if got := describe(acts, actHalt, actRenew); !slices.Equal(got, []string{"halt u1 removed", "renew u1 @22"}) {
		t.Fatalf("removed: %v", got)
	}
	for _, x := range acts {
		if x.kind == actRenew {
			k.result(x, written, 23, at)
		}
	}
	later := at.Add(T / 3)
	if got := describe(k.decide(later, true), actRenew, actRelease); !slices.Equal(got, []string{"renew u1 @23"}) {
		t.Fatalf("while halting, renewed: %v", got)
	}
	k.halted("u1", &client.ResumeState{SubscriptionID: 7, LastAcked: 9}, later)
	acts = k.decide(later, true)
	i := slices.IndexFunc(acts, func(a action) bool { return a.kind == actRelease })
	if i < 0 || !acts[i].remove || acts[i].rev != 23 || !acts[i].value.Released || acts[i].value.Resume.State.LastAcked != 9 {
		t.Fatalf("release after the halt: %v", describe(acts))
	}
	k.result(acts[i], written, 0, later)
	if _, ok := k.units["u1"]; ok {
		t.Error("a removed unit is still known after its release")
	}
}

// TestCoreBalanceRelease: above its share while another replica has
// fewer, a replica releases one unit (held for 2T/3 at least), does not take
// it back while it is fresh, and takes it again once nobody has for a TTL.
func TestCoreBalanceRelease(t *testing.T) {
	T := simTTL
	k, t1 := holdingTwo(t)
	rev := uint64(30)
	live := func(at time.Time) { // b's presence, renewed
		rev++
		k.show(obs{key: "replica.b", rev: rev, val: presence("b", "j", at), seen: at.Sub(t0)})
	}
	renewAll := func(at time.Time, acts []action) {
		for _, a := range acts {
			if a.kind == actRenew {
				rev++
				k.result(a, written, rev, at)
			}
		}
	}
	live(t1)
	renewAll(t1, k.decide(t1, true))
	at := t1.Add(2*T/3 - time.Nanosecond)
	live(at)
	acts := k.decide(at, true)
	if got := describe(acts, actHalt); len(got) != 0 {
		t.Fatalf("released a unit held less than 2T/3: %v", got)
	}
	renewAll(at, acts)
	at = t1.Add(2 * T / 3)
	acts = k.decide(at, true)
	renewAll(at, acts)
	i := slices.IndexFunc(acts, func(a action) bool { return a.kind == actHalt })
	if i < 0 || acts[i].why != whyBalance {
		t.Fatalf("no release to balance: %v", describe(acts))
	}
	gone := acts[i].unit
	if got := describe(k.decide(at.Add(T/3), true), actHalt); len(got) != 0 {
		t.Fatalf("a second release within T/3: %v", got)
	}
	k.halted(gone, nil, at)
	acts = k.decide(at, true)
	i = slices.IndexFunc(acts, func(a action) bool { return a.kind == actRelease })
	if i < 0 || acts[i].unit != gone || !acts[i].value.Released {
		t.Fatalf("no release written: %v", describe(acts))
	}
	rev++
	k.result(acts[i], written, rev, at)
	k.show(obs{key: unitKey(gone), rev: rev, val: lease("a", "i1", true), seen: at.Sub(t0)})
	released := at
	// Nobody takes it: this replica, at its target, leaves it for a TTL.
	var took time.Time
	for at := released; at.Before(released.Add(2 * T)); at = at.Add(T / 30) {
		live(at)
		acts := k.decide(at, true)
		renewAll(at, acts)
		if got := describe(acts, actAcquire); len(got) > 0 {
			took = at
			break
		}
	}
	if d := took.Sub(released); took.IsZero() || d <= T || d > T+T/30 {
		t.Errorf("took the released unit back %v after its release, want just past a TTL", d)
	}
}

func TestCoreDuplicateReplicaID(t *testing.T) {
	T := simTTL
	k := startedCore("u0", "u1")
	now := t0.Add(T + T/5 + time.Nanosecond)
	// No other process wrote with this id since this one's first presence:
	// an earlier life's expired lease is taken back.
	k.show(obs{key: "group.u0", rev: 5, val: lease("a", "i0", false)})
	acts := k.decide(now, true)
	if got := describe(acts, actAcquire, actDuplicate); !slices.Equal(got, []string{"acquire u0 @5", "acquire u1 create"}) {
		t.Fatalf("earlier life: %v", got)
	}
	for _, x := range acts {
		if x.kind == actAcquire {
			k.result(x, failed, 0, now) // say both were taken by someone else
		}
	}
	// Another process writes this replica's presence and a lease after
	// this one's first presence (its own first: it came later; this one
	// goes on and reports it).
	seen := now.Sub(t0)
	k.show(obs{key: "replica.a", rev: 12, val: presence("a", "i2", now), seen: seen}, obs{key: "group.u1", rev: 13, val: lease("a", "i2", false), seen: seen})
	now = now.Add(T / 3)
	acts = k.decide(now, true)
	if got := describe(acts, actDuplicate); !slices.Equal(got, []string{"duplicate i2"}) {
		t.Fatalf("duplicate not reported: %v", describe(acts))
	}
	if _, refused := k.refusal(); refused {
		t.Fatal("the process that was there first refused")
	}
	// Its leases are anyone else's: taken once expired only (the earlier
	// life's expired already).
	if got := describe(acts, actAcquire); !slices.Equal(got, []string{"acquire u0 @5"}) {
		t.Fatalf("acquisitions beside a duplicate: %v", got)
	}
	if got := describe(k.decide(t0.Add(seen+T+T/5+time.Nanosecond), true), actAcquire); !slices.Equal(got, []string{"acquire u1 @13"}) {
		t.Fatalf("expired: %v", got)
	}
}

// TestCoreDuplicateRefused: a process that finds another with its replica
// id that was there first (its presence says since when) refuses: it gives
// up what it holds, takes nothing, writes no presence, and says so once.
func TestCoreDuplicateRefused(t *testing.T) {
	T := simTTL
	k := startedCore("u0", "u1")
	held(t, k, "u0", t0.Add(T/3), 20)
	if f := k.fenceOf("u0"); !f.Open(t0.Add(T/3)) || f.Epoch() != 20 {
		t.Fatalf("the holding's fence: epoch %d, open %v", f.Epoch(), f.Open(t0.Add(T/3)))
	}
	first := presence("a", "i0", t0)
	first.Since = 3 // its first presence was revision 3, before this one's 10
	k.show(obs{key: "replica.a", rev: 21, val: first, seen: T / 2})
	now := t0.Add(T / 2)
	acts := k.decide(now, true)
	if got := describe(acts, actHalt, actAcquire, actPresence); !slices.Equal(got, []string{"halt u0 refused"}) {
		t.Fatalf("refusal: %v", got)
	}
	if other, ok := k.refusal(); !ok || other != "i0" {
		t.Fatalf("refusal reported: %q %v", other, ok)
	}
	if _, again := k.refusal(); again {
		t.Error("the refusal reported twice")
	}
	k.halted("u0", nil, now)
	if k.fenceOf("u0").Open(now) {
		t.Error("the fence of a unit given up is open")
	}
	acts = k.decide(now.Add(time.Millisecond), true)
	if got := describe(acts, actRelease); !slices.Equal(got, []string{"release u0 @20"}) {
		t.Fatalf("after the halt: %v", describe(acts))
	}
	if got := describe(acts, actAcquire, actPresence); len(got) != 0 {
		t.Errorf("a refused process went on: %v", got)
	}
}

// TestCoreFence: a holding's fence is open until its last successful write
// + TTL, moves with renewals, and closes when the lease is lost.
func TestCoreFence(t *testing.T) {
	T := simTTL
	k := startedCore("u0")
	at := t0.Add(T / 3)
	held(t, k, "u0", at, 20)
	f := k.fenceOf("u0")
	if !f.Open(at.Add(T-time.Nanosecond)) || f.Open(at.Add(T)) {
		t.Fatalf("fence after the acquisition: deadline %v, want %v", f.Deadline(), at.Add(T))
	}
	renewAt := at.Add(T / 3)
	var renewed bool
	for _, a := range k.decide(renewAt, true) {
		if a.kind == actRenew {
			k.result(a, written, 22, renewAt)
			renewed = true
		}
	}
	if !renewed || !f.Open(renewAt.Add(T-time.Nanosecond)) || f.Open(renewAt.Add(T)) {
		t.Fatalf("fence after the renewal: renewed %v, deadline %v, want %v", renewed, f.Deadline(), renewAt.Add(T))
	}
	// Someone else writes the lease: closed at once.
	k.show(obs{key: "group.u0", rev: 23, val: lease("b", "j", false), seen: renewAt.Add(time.Second).Sub(t0)})
	if f.Open(renewAt.Add(time.Second)) {
		t.Error("the fence of a lost lease is open")
	}
}

// The simulation: cores sharing a bucket, stepped by a fake clock.

type simEntry struct {
	rev     uint64
	val     []byte
	deleted bool
}

type simNode struct {
	c       *core
	name    string
	up      bool // its writes reach the bucket, the bucket's changes reach it
	start   time.Time
	halts   []pendingHalt // slow halts, each ends at its deadline
	dups    int
	refused int
	serves  int
}

type pendingHalt struct {
	unit     string
	deadline time.Time
}

type sim struct {
	t        *testing.T
	now      time.Time
	step     time.Duration
	seq      uint64
	keys     map[string]*simEntry
	nodes    []*simNode
	serving  map[string]*simNode
	slowHalt bool // a Halt takes until its deadline
	halts    []time.Time
}

func newSim(t *testing.T) *sim {
	return &sim{t: t, now: t0, step: simTTL / 60, keys: map[string]*simEntry{}, serving: map[string]*simNode{}}
}

func (s *sim) add(name, instance string, units []string, after time.Duration) *simNode {
	n := &simNode{c: newCore(name, instance, simTTL), name: name + "/" + instance, up: true, start: s.now.Add(after)}
	n.c.setUnits(units)
	s.nodes = append(s.nodes, n)
	return n
}

// resync shows a node the whole bucket (a watcher started again).
func (s *sim) resync(n *simNode) {
	for k, e := range s.keys {
		n.c.observe(k, e.rev, e.deleted, e.val, s.now)
	}
	n.c.markSynced(s.now)
}

func (s *sim) publish(key string) {
	e := s.keys[key]
	for _, n := range s.nodes {
		if n.up && !s.now.Before(n.start) {
			n.c.observe(key, e.rev, e.deleted, e.val, s.now)
		}
	}
}

func (s *sim) write(n *simNode, a action) (outcome, uint64) {
	if !n.up {
		return failed, 0
	}
	e := s.keys[a.key]
	b, _ := json.Marshal(&a.value)
	switch {
	case a.kind == actPresence:
	case a.kind == actAcquire && a.create:
		if e != nil && !e.deleted {
			return conflict, 0
		}
	case e == nil || e.deleted || e.rev != a.rev:
		if e != nil && !e.deleted {
			var cur leaseValue
			if json.Unmarshal(e.val, &cur) == nil && cur.Instance == a.value.Instance && cur.Term == a.term && a.kind == actRenew {
				return mine, e.rev
			}
		}
		return conflict, 0
	}
	s.seq++
	if a.kind == actRelease && a.remove {
		s.keys[a.key] = &simEntry{rev: s.seq, deleted: true}
	} else {
		s.keys[a.key] = &simEntry{rev: s.seq, val: b}
	}
	s.publish(a.key)
	return written, s.seq
}

func (s *sim) stopServing(n *simNode, unit string) {
	if s.serving[unit] == n {
		delete(s.serving, unit)
	}
	n.c.halted(unit, nil, s.now)
	s.halts = append(s.halts, s.now)
}

func (s *sim) run(d time.Duration) {
	for end := s.now.Add(d); s.now.Before(end); s.now = s.now.Add(s.step) {
		for _, n := range s.nodes {
			if s.now.Before(n.start) {
				continue
			}
			if n.c.synced.IsZero() {
				s.resync(n)
			}
			// Slow halts end at their deadline.
			n.halts = slices.DeleteFunc(n.halts, func(h pendingHalt) bool {
				if s.now.Before(h.deadline) {
					return false
				}
				s.stopServing(n, h.unit)
				return true
			})
			if _, ok := n.c.refusal(); ok {
				n.refused++
			}
			for _, a := range n.c.decide(s.now, true) {
				switch a.kind {
				case actServe:
					if o := s.serving[a.unit]; o != nil && o != n {
						s.t.Fatalf("%v: %s serves %s while %s does", s.now.Sub(t0), n.name, a.unit, o.name)
					}
					s.serving[a.unit] = n
					n.serves++
				case actHalt:
					if s.slowHalt {
						n.halts = append(n.halts, pendingHalt{a.unit, n.c.haltDeadline(a.unit)})
					} else {
						s.stopServing(n, a.unit)
					}
				case actDuplicate:
					n.dups++
				default:
					o, rev := s.write(n, a)
					n.c.result(a, o, rev, s.now)
				}
			}
		}
	}
}

func (s *sim) count(n *simNode) int {
	c := 0
	for _, o := range s.serving {
		if o == n {
			c++
		}
	}
	return c
}

// TestCoreRebalance: N replicas joining one after another share M units:
// at every step no unit is served twice, and at the end every unit is
// served, each replica has floor or ceil of M/N, and nothing moves any more.
func TestCoreRebalance(t *testing.T) {
	for _, c := range []struct{ replicas, units int }{{1, 3}, {2, 4}, {3, 4}, {3, 10}, {4, 3}, {5, 12}} {
		t.Run(fmt.Sprintf("%d replicas %d units", c.replicas, c.units), func(t *testing.T) {
			s := newSim(t)
			var units []string
			for i := range c.units {
				units = append(units, fmt.Sprintf("u%d", i))
			}
			for i := range c.replicas {
				s.add(fmt.Sprintf("r%d", i), "i", units, time.Duration(i)*simTTL)
			}
			s.run(time.Duration(c.replicas)*simTTL + 30*simTTL)
			if len(s.serving) != c.units {
				t.Fatalf("%d of %d units served", len(s.serving), c.units)
			}
			lo, hi := c.units/c.replicas, (c.units+c.replicas-1)/c.replicas
			for _, n := range s.nodes {
				if k := s.count(n); k < lo || k > hi {
					t.Errorf("%s serves %d, want %d..%d", n.name, k, lo, hi)
				}
			}
			if len(s.halts) > 0 && s.now.Sub(s.halts[len(s.halts)-1]) < 10*simTTL {
				t.Errorf("still moving: last halt %v before the end", s.now.Sub(s.halts[len(s.halts)-1]))
			}
		})
	}
}

// TestCorePartition: a replica cut off from the bucket (its writes fail, it
// sees nothing) whose Halts take until their deadline: the others take its
// units over only after it stopped serving them.
func TestCorePartition(t *testing.T) {
	s := newSim(t)
	s.slowHalt = true
	units := []string{"u0", "u1", "u2", "u3"}
	a := s.add("a", "i", units, 0)
	b := s.add("b", "j", units, simTTL)
	s.run(10 * simTTL)
	if s.count(a) != 2 || s.count(b) != 2 {
		t.Fatalf("before: a %d b %d", s.count(a), s.count(b))
	}
	a.up = false
	s.run(3 * simTTL)
	if s.count(a) != 0 || s.count(b) != 4 {
		t.Fatalf("after the partition: a %d b %d", s.count(a), s.count(b))
	}
	// Healed: a sees the bucket again and gets its share back.
	a.up = true
	s.resync(a)
	s.run(10 * simTTL)
	if s.count(a) != 2 || s.count(b) != 2 {
		t.Fatalf("healed: a %d b %d", s.count(a), s.count(b))
	}
}

// TestCoreDuplicateSim: a second process with the same replica id starts
// while the first holds every unit. The second does not take the first's
// leases as an earlier life's (the first renews within the window), sees
// the first's writes, and, having come later, refuses to serve; the first
// reports the duplicate and goes on serving everything. No unit is ever
// served twice (the simulation checks every Serve), and nothing moves.
func TestCoreDuplicateSim(t *testing.T) {
	s := newSim(t)
	units := []string{"u0", "u1", "u2", "u3"}
	a := s.add("r", "i1", units, 0)
	s.run(3 * simTTL)
	serves := a.serves
	b := s.add("r", "i2", units, 0)
	s.run(simTTL)
	if a.dups == 0 || b.refused != 1 || a.refused != 0 {
		t.Fatalf("duplicate: the first reported it %d times and refused %d times; the second refused %d times", a.dups, a.refused, b.refused)
	}
	s.run(20 * simTTL)
	if b.serves != 0 || a.serves != serves {
		t.Errorf("Serves after the second started: first %d more, second %d", a.serves-serves, b.serves)
	}
	if s.count(a) != len(units) {
		t.Errorf("the first serves %d of %d units", s.count(a), len(units))
	}
}
