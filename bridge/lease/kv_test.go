package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uagate/gateway/bridge/resume"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/client"
)

// The lease tests run KVs of several replicas against Debian's nats-server
// (JetStream) with a short TTL. The handler records who serves what; the
// ledger checks that a unit is never served by two replicas at once.

const testTTL = 1500 * time.Millisecond

// ledger is who serves each unit now, shared by the replicas of a test.
type ledger struct {
	mu         sync.Mutex
	serving    map[string]string // unit → replica
	serves     map[string]int    // replica → Serve calls
	violations []string
	halts      map[string]int // unit → Halt calls
}

func newLedger() *ledger {
	return &ledger{serving: map[string]string{}, serves: map[string]int{}, halts: map[string]int{}}
}

func (g *ledger) owners() map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]string{}
	for u, r := range g.serving {
		out[u] = r
	}
	return out
}

func (g *ledger) count(replica string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, r := range g.serving {
		if r == replica {
			n++
		}
	}
	return n
}

// handler is one replica's Handler: it serves by writing the ledger.
type handler struct {
	id    string
	g     *ledger
	final map[string]*client.ResumeState // returned by Halt
	// slow: Serve of these units first waits this long, as one waiting
	// for a runtime busy elsewhere; it then serves unless ctx is done.
	slow     map[string]time.Duration
	inSlow   atomic.Int32 // Serves waiting
	slowDone atomic.Int32 // slow Serves returned
}

func (h *handler) Serve(ctx context.Context, unit string) {
	if d := h.slow[unit]; d > 0 {
		h.inSlow.Add(1)
		t := time.NewTimer(d)
		<-t.C
		h.inSlow.Add(-1)
		defer h.slowDone.Add(1)
	}
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	if ctx.Err() != nil {
		return // the holding ended meanwhile
	}
	if o, ok := h.g.serving[unit]; ok {
		h.g.violations = append(h.g.violations, fmt.Sprintf("%s serves %s while %s does", h.id, unit, o))
	}
	h.g.serving[unit] = h.id
	h.g.serves[h.id]++
}

func (h *handler) Halt(ctx context.Context, unit string) *client.ResumeState {
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	if h.g.serving[unit] == h.id {
		delete(h.g.serving, unit)
	}
	h.g.halts[unit]++
	if _, ok := ctx.Deadline(); !ok {
		h.g.violations = append(h.g.violations, "Halt without a deadline")
	}
	return h.final[unit]
}

type replica struct {
	kv *KV
	nc *nats.Conn
	h  *handler
}

func startReplica(t *testing.T, url, id string, g *ledger, units []string) *replica {
	t.Helper()
	return startReplicaWith(t, url, &handler{id: id, g: g, final: map[string]*client.ResumeState{}}, units)
}

func startReplicaWith(t *testing.T, url string, h *handler, units []string) *replica {
	t.Helper()
	id := h.id
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := NewKV(KVConfig{Conn: nc, Bucket: "leases", TTL: testTTL, ReplicaID: id, Logger: testutil.Logger(t)}, h)
	if err != nil {
		t.Fatal(err)
	}
	kv.SetUnits(units)
	kv.Start()
	r := &replica{kv: kv, nc: nc, h: h}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = kv.Close(ctx)
		nc.Close()
	})
	return r
}

// crash ends a replica the way a dead process does, seen from NATS: its
// connection is gone and nothing is released. Its own loop fences.
func (r *replica) crash() { r.nc.Close() }

func balanced(g *ledger, units int, ids ...string) func() bool {
	return func() bool {
		own := g.owners()
		if len(own) != units {
			return false
		}
		per := (units + len(ids) - 1) / len(ids)
		for _, id := range ids {
			n := g.count(id)
			if n == 0 || n > per {
				return false
			}
		}
		return true
	}
}

func (g *ledger) check(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, v := range g.violations {
		t.Error(v)
	}
}

var fourUnits = []string{"g0", "g1", "g2", "g3"}

// TestKVShareAndTakeOver: three replicas share four units (2/1/1); one dies
// (its connection cut): it stops serving on its own (fencing) and the others
// take its units over within a TTL and a bit, never two at once.
func TestKVShareAndTakeOver(t *testing.T) {
	ns := brokertest.StartNATS(t, brokertest.NATSOptions{JetStream: true})
	g := newLedger()
	a := startReplica(t, ns.URL(), "a", g, fourUnits)
	b := startReplica(t, ns.URL(), "b", g, fourUnits)
	c := startReplica(t, ns.URL(), "c", g, fourUnits)
	testutil.WaitFor(t, 20*time.Second, "four units shared by three replicas", balanced(g, 4, "a", "b", "c"))
	g.check(t)
	// Every replica's Holders agrees with who serves (once its watcher saw
	// the last acquisitions).
	for _, r := range []*replica{a, b, c} {
		testutil.WaitFor(t, 5*time.Second, r.h.id+"'s Holders to match the ledger", func() bool {
			own := g.owners()
			hs := r.kv.Holders()
			if len(hs) != len(fourUnits) {
				return false
			}
			for i, h := range hs {
				if h.Unit != fourUnits[i] || h.Holder != own[h.Unit] || h.Local != (own[h.Unit] == r.h.id) {
					return false
				}
			}
			return true
		})
	}

	victim := a
	for _, r := range []*replica{a, b, c} {
		if g.count(r.h.id) == 2 {
			victim = r // the one with two: the others each take one
		}
	}
	gone := victim.kv.Held()
	victim.crash()
	start := time.Now()
	// The victim's loop fences: it stops serving by 2/3 TTL after its last
	// renewal, before the lease expires.
	testutil.WaitFor(t, 2*testTTL, "the victim stops serving", func() bool { return g.count(victim.h.id) == 0 })
	fenced := time.Since(start)
	var rest []string
	for _, r := range []*replica{a, b, c} {
		if r != victim {
			rest = append(rest, r.h.id)
		}
	}
	testutil.WaitFor(t, 4*testTTL, "the others take its units over", balanced(g, 4, rest...))
	took := time.Since(start)
	for _, h := range b.kv.Holders() {
		if h.Holder == victim.h.id && victim != b {
			t.Errorf("b still sees %s held by the dead %s", h.Unit, h.Holder)
		}
	}
	t.Logf("units %v of %s: fenced after %v, taken over after %v", gone, victim.h.id, fenced.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	// The lease expires T + T/5 (the margin) after the victim's last
	// renewal, which was at most T/3 before the crash: no takeover earlier
	// than 13T/15 after it.
	if earliest := testTTL + testTTL/5 - testTTL/3; took < earliest {
		t.Errorf("taken over %v after the crash: before the lease could expire (TTL %v: not before %v)", took, testTTL, earliest)
	}
	g.check(t)
}

// TestKVGracefulHandover: Close releases the leases with the final resume
// state; another replica takes them at once (no expiry to wait for) and
// loads that state.
func TestKVGracefulHandover(t *testing.T) {
	ns := brokertest.StartNATS(t, brokertest.NATSOptions{JetStream: true})
	g := newLedger()
	a := startReplica(t, ns.URL(), "a", g, []string{"u"})
	testutil.WaitFor(t, 10*time.Second, "a serves u", func() bool { return g.owners()["u"] == "a" })
	// The group saves its record; at the halt the final state (later
	// acknowledgements) replaces its State.
	rec := resume.Record{Fingerprint: "fp", ServerStart: 7, State: client.ResumeState{SubscriptionID: 5, LastAcked: 10, Items: []client.ResumeItem{{Handle: 1, ServerID: 9}}}}
	if err := a.kv.SaveResume("u", rec); err != nil {
		t.Fatal(err)
	}
	a.h.final["u"] = &client.ResumeState{SubscriptionID: 5, LastAcked: 12, Items: []client.ResumeItem{{Handle: 1, ServerID: 9}}}
	b := startReplica(t, ns.URL(), "b", g, []string{"u"})
	// b is a standby: a holds its share (1 unit, 2 replicas: target 1).
	// Once b has settled (it counts a, and would take free units):
	testutil.WaitFor(t, 10*time.Second, "b counts a", func() bool {
		b.kv.mu.Lock()
		defer b.kv.mu.Unlock()
		live, _ := b.kv.c.census(time.Now())
		return live == 2 && !b.kv.c.synced.IsZero() && time.Since(b.kv.c.synced) > testTTL/3
	})
	if g.owners()["u"] != "a" {
		t.Fatalf("owners %v", g.owners())
	}
	if _, ok, _ := b.kv.LoadResume("u"); ok {
		t.Error("b has a resume record of a unit it does not hold")
	}
	if err := b.kv.SaveResume("u", rec); err == nil {
		t.Error("b saved a record of a unit it does not hold")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := a.kv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %v", time.Since(start))
	testutil.WaitFor(t, 10*time.Second, "b takes u", func() bool { return g.owners()["u"] == "b" })
	took := time.Since(start)
	t.Logf("handed over in %v", took)
	if took > testTTL/3 {
		t.Errorf("handover took %v: it waited (TTL %v)", took, testTTL)
	}
	got, ok, err := b.kv.LoadResume("u")
	if !ok || err != nil || got.Fingerprint != "fp" || got.ServerStart != 7 || got.State.SubscriptionID != 5 || got.State.LastAcked != 12 ||
		len(got.State.Items) != 1 || got.State.Items[0].ServerID != 9 {
		t.Errorf("resume record after the handover: %+v %v %v", got, ok, err)
	}
	if err := a.kv.SaveResume("u", rec); err == nil {
		t.Error("a closed replica saved a record")
	}
	g.check(t)
}

// TestKVSaveResumeNow: a record saved with SaveResumeNow is in the bucket
// when the call returns, however recently the last one was written (a
// record saved with SaveResume then waits up to saveEvery for the next
// write); a replica that does not hold the unit is refused.
func TestKVSaveResumeNow(t *testing.T) {
	ns := brokertest.StartNATS(t, brokertest.NATSOptions{JetStream: true})
	g := newLedger()
	a := startReplica(t, ns.URL(), "a", g, []string{"u"})
	testutil.WaitFor(t, 10*time.Second, "a serves u", func() bool { return g.owners()["u"] == "a" })
	inBucket := func(fp string) bool {
		a.kv.mu.Lock()
		kv := a.kv.kv
		a.kv.mu.Unlock()
		e, err := kv.Get(context.Background(), unitKey("u"))
		if err != nil {
			return false
		}
		var v leaseValue
		return json.Unmarshal(e.Value(), &v) == nil && v.Resume != nil && v.Resume.Fingerprint == fp
	}
	if err := a.kv.SaveResume("u", resume.Record{Fingerprint: "first"}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the first record written", func() bool { return inBucket("first") })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 5 {
		fp := fmt.Sprint("now", i)
		if err := a.kv.SaveResumeNow(ctx, "u", resume.Record{Fingerprint: fp}); err != nil {
			t.Fatal(err)
		}
		if !inBucket(fp) {
			t.Fatalf("SaveResumeNow returned before %s was in the bucket", fp)
		}
	}
	if err := a.kv.SaveResumeNow(ctx, "nope", resume.Record{}); !errors.Is(err, ErrNotHeld) {
		t.Errorf("a unit not held: %v", err)
	}
	g.check(t)
}

// TestKVRebalanceAndRestart: one replica takes every unit; a second one
// makes it release half, one every TTL/3 (bounded); the second restarts
// under the same id and takes its leases back at once, before they expire.
func TestKVRebalanceAndRestart(t *testing.T) {
	ns := brokertest.StartNATS(t, brokertest.NATSOptions{JetStream: true})
	g := newLedger()
	startReplica(t, ns.URL(), "a", g, fourUnits)
	testutil.WaitFor(t, 10*time.Second, "a serves all", func() bool { return g.count("a") == 4 })
	b := startReplica(t, ns.URL(), "b", g, fourUnits)
	start := time.Now()
	testutil.WaitFor(t, 10*testTTL, "balanced 2/2", balanced(g, 4, "a", "b"))
	took := time.Since(start)
	t.Logf("rebalanced in %v", took)
	if took < testTTL/3 {
		t.Errorf("rebalanced in %v: faster than one release per TTL/3", took)
	}
	g.mu.Lock()
	halts := 0
	for _, n := range g.halts {
		halts += n
	}
	g.mu.Unlock()
	if halts != 2 {
		t.Errorf("%d halts to go from 4/0 to 2/2, want 2", halts)
	}
	// b dies (no release) and comes back at once under the same id. Its
	// earlier life might be cut off rather than dead, serving until its
	// fence closes, so its leases are taken back only once expired (the
	// ledger checks that nothing is served twice); then the units are
	// shared again.
	crashed := time.Now()
	b.crash()
	b2 := startReplica(t, ns.URL(), "b", g, fourUnits)
	testutil.WaitFor(t, 10*time.Second, "b serves again, balanced 2/2", func() bool {
		return len(b2.kv.Held()) > 0 && balanced(g, 4, "a", "b")()
	})
	if d := time.Since(crashed); d < testTTL {
		t.Errorf("the restarted replica served %v after the crash: before its earlier life's leases expired", d)
	}
	g.check(t)
}

// TestKVFencedUnitComesBack: a NATS outage shorter than anything else makes
// the holder fence; when NATS is back, nobody else having written, it takes
// its units back through the same revision check.
func TestKVFencedUnitComesBack(t *testing.T) {
	ns := brokertest.StartNATS(t, brokertest.NATSOptions{JetStream: true})
	g := newLedger()
	startReplica(t, ns.URL(), "a", g, []string{"u"})
	testutil.WaitFor(t, 10*time.Second, "a serves u", func() bool { return g.owners()["u"] == "a" })
	ns.Stop()
	testutil.WaitFor(t, 3*testTTL, "a fenced", func() bool { return g.count("a") == 0 })
	ns.Start()
	testutil.WaitFor(t, 20*time.Second, "a serves u again", func() bool { return g.owners()["u"] == "a" })
	g.check(t)
}

// leaseRenewed reads a unit's lease through a connection of the test's own:
// who holds it and when its holder last renewed it (by the holder's clock,
// this machine's).
func leaseRenewed(t *testing.T, kv jetstream.KeyValue, unit string) (string, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	e, err := kv.Get(ctx, unitKey(unit))
	if err != nil {
		return "", time.Time{}
	}
	var v leaseValue
	if json.Unmarshal(e.Value(), &v) != nil || v.Released {
		return "", time.Time{}
	}
	return v.Replica, v.Renewed
}

func openBucket(t *testing.T, url string) jetstream.KeyValue {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, "leases")
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestKVSlowServe: a Handler whose Serve of one unit waits 3 TTL (a runtime
// busy elsewhere) holds up neither the renewals of the replica's leases nor
// the balance: every lease is renewed past any expiry while that Serve
// waits, a second replica gets only what the first releases (never a unit
// the first serves), and the only halts are the two releases to balance.
func TestKVSlowServe(t *testing.T) {
	ns := brokertest.StartNATS(t, brokertest.NATSOptions{JetStream: true})
	g := newLedger()
	ha := &handler{id: "a", g: g, final: map[string]*client.ResumeState{}, slow: map[string]time.Duration{"g0": 3 * testTTL}}
	startReplicaWith(t, ns.URL(), ha, fourUnits)
	testutil.WaitFor(t, 10*time.Second, "a serves g1..g3 while its Serve of g0 waits", func() bool {
		return g.count("a") == 3 && ha.inSlow.Load() == 1
	})
	slowSince := time.Now()
	bucket := openBucket(t, ns.URL())
	testutil.WaitFor(t, 2*testTTL, "a renews every lease past any expiry while Serve(g0) waits", func() bool {
		for _, u := range fourUnits {
			holder, renewed := leaseRenewed(t, bucket, u)
			if holder != "a" || !renewed.After(slowSince.Add(expireAfter(testTTL))) {
				return false
			}
		}
		return true
	})
	if ha.inSlow.Load() != 1 {
		t.Fatal("Serve(g0) returned before the check: the test did not check what it says")
	}
	g.mu.Lock()
	halts := len(g.halts)
	g.mu.Unlock()
	if halts != 0 {
		t.Fatalf("%d halts while a was renewing", halts)
	}
	startReplica(t, ns.URL(), "b", g, fourUnits)
	testutil.WaitFor(t, 10*testTTL, "balanced 2/2", balanced(g, 4, "a", "b"))
	g.mu.Lock()
	halts = 0
	for _, n := range g.halts {
		halts += n
	}
	g.mu.Unlock()
	if halts != 2 {
		t.Errorf("%d halts to go from 4/0 to 2/2, want 2 (the releases; no fencing)", halts)
	}
	g.check(t)
}

// TestKVSlowServeFencing: the replica's connection is cut while its Serve of
// g0 waits: it fences its other units in time all the same; another replica
// takes all four over once they expire, and the Serve of g0, returning
// after that, does not start it (its context is done).
func TestKVSlowServeFencing(t *testing.T) {
	ns := brokertest.StartNATS(t, brokertest.NATSOptions{JetStream: true})
	g := newLedger()
	ha := &handler{id: "a", g: g, final: map[string]*client.ResumeState{}, slow: map[string]time.Duration{"g0": 3 * testTTL}}
	a := startReplicaWith(t, ns.URL(), ha, fourUnits)
	testutil.WaitFor(t, 10*time.Second, "a serves g1..g3 while its Serve of g0 waits", func() bool {
		return g.count("a") == 3 && ha.inSlow.Load() == 1
	})
	a.crash()
	testutil.WaitFor(t, 2*testTTL, "a fences g1..g3", func() bool { return g.count("a") == 0 })
	if ha.inSlow.Load() != 1 {
		t.Fatal("Serve(g0) returned before the fencing: the test did not check what it says")
	}
	startReplica(t, ns.URL(), "b", g, fourUnits)
	testutil.WaitFor(t, 10*testTTL, "b serves the four units", func() bool { return g.count("b") == 4 })
	testutil.WaitFor(t, 3*testTTL, "a's Serve of g0 returns", func() bool { return ha.slowDone.Load() == 1 })
	if own := g.owners(); own["g0"] != "b" {
		t.Errorf("g0 served by %q after a's Serve returned", own["g0"])
	}
	g.check(t)
}

func TestKeyToken(t *testing.T) {
	for in, want := range map[string]string{"line1": "line1", "a-b_c": "a-b_c", "a.b": "=YS5i", "ü": "=w7w", "": "="} {
		if got := keyToken(in); got != want {
			t.Errorf("keyToken(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCASSafe(t *testing.T) {
	for _, c := range []struct {
		version  string
		replicas int
		unsafe   bool
	}{
		{"2.9.10", 3, true},  // Debian bookworm's: nats-server#4320
		{"2.9.20", 3, true},  // the last one before the fix
		{"2.9.10", 1, false}, // one replica: the check and the write are one step
		{"2.9.21", 3, false},
		{"2.10.0", 3, false},
		{"2.10.19", 1, true}, // nats-server#5840
		{"2.10.19", 3, true},
		{"2.10.20", 1, false},
		{"2.11.0-RC.1", 3, false},
		{"2.15.2", 3, false}, // the one this module builds in
		{"", 3, false},       // not connected: the writes fail on their own
	} {
		err := casSafe(c.version, c.replicas)
		if got := errors.Is(err, ErrUnsafeServer); got != c.unsafe {
			t.Errorf("casSafe(%q, %d) = %v, want unsafe %v", c.version, c.replicas, err, c.unsafe)
		}
		if err != nil && !strings.Contains(err.Error(), c.version) {
			t.Errorf("casSafe(%q, %d): %q does not name the version", c.version, c.replicas, err)
		}
	}
}
