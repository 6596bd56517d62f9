package gateway

import (
	"context"
	goruntime "runtime"
	"testing"
	"time"
)

// TestProcsGovernor drives the governor's decision with a fake CPU clock:
// one P after procsQuietFor quiet periods, the default again after one busy
// period, nothing changed by a load in between.
func TestProcsGovernor(t *testing.T) {
	var cpu time.Duration
	singles, restores := 0, 0
	g := &procsGovernor{
		cpu:     func() time.Duration { return cpu },
		single:  func() { singles++ },
		restore: func() { restores++ },
	}
	at := time.Unix(1000, 0)
	tick := func(cores float64) (float64, bool) {
		cpu += time.Duration(cores * float64(procsEvery))
		at = at.Add(procsEvery)
		return g.step(at)
	}
	if _, changed := g.step(at); changed {
		t.Fatal("the first sample changed something")
	}
	for i := range procsQuietFor - 1 {
		if u, changed := tick(0.02); changed || u < 0.019 || u > 0.021 {
			t.Fatalf("quiet period %d: usage %.3f changed %v", i, u, changed)
		}
	}
	// A period above procsQuiet starts the count again.
	if _, changed := tick(0.3); changed {
		t.Fatal("a middling period changed the processors")
	}
	for range procsQuietFor - 1 {
		tick(0.02)
	}
	if singles != 0 {
		t.Fatalf("one P after %d quiet periods", procsQuietFor-1)
	}
	if _, changed := tick(0.02); !changed || singles != 1 || !g.one {
		t.Fatalf("not on one P after %d quiet periods (singles %d)", procsQuietFor, singles)
	}
	// On one P: a middling load keeps it, a busy period restores.
	if _, changed := tick(0.4); changed || restores != 0 {
		t.Fatal("0.4 core restored the default")
	}
	if _, changed := tick(0.8); !changed || restores != 1 || g.one {
		t.Fatalf("0.8 core did not restore the default (restores %d)", restores)
	}
	// And quiet again: one P again after as many periods.
	for range procsQuietFor {
		tick(0.01)
	}
	if singles != 2 {
		t.Fatalf("singles %d, want 2", singles)
	}
	// Sampled every procsEvery, every procsRestEvery only at rest on one P.
	for _, c := range []struct {
		one   bool
		usage float64
		want  time.Duration
	}{{true, 0.001, procsRestEvery}, {true, 0.01, procsEvery}, {false, 0.001, procsEvery}} {
		g.one = c.one
		if got := g.next(c.usage); got != c.want {
			t.Errorf("next after %.3f cores (one P %v): %v, want %v", c.usage, c.one, got, c.want)
		}
	}
}

// TestGovernProcsHonoursEnv: GOMAXPROCS in the environment leaves the
// processors alone (GovernProcs starts nothing); without it, it starts
// when the runtime has more than one P.
func TestGovernProcsHonoursEnv(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "GOMAXPROCS" {
				return v
			}
			return ""
		}
	}
	if GovernProcs(t.Context(), env("2"), func(string, ...any) {}) {
		t.Fatal("started with GOMAXPROCS set")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got, want := GovernProcs(ctx, env(""), func(string, ...any) {}), goruntime.GOMAXPROCS(0) > 1; got != want {
		t.Fatalf("started %v with %d Ps", got, goruntime.GOMAXPROCS(0))
	}
}
