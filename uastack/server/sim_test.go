package server

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"

	"github.com/uagate/gateway/uastack/ua"
)

// TestSimStagger: with Stagger the Load folders of a rate tick evenly over
// its period, each value stamped with its own tick, never in the future;
// without it every folder ticks at the same instant.
func TestSimStagger(t *testing.T) {
	const folders, period = 4, 100 * time.Millisecond
	for _, stagger := range []bool{false, true} {
		s := startServer(t, func(c *Config) {
			c.Sim = SimConfig{Folders: folders, Variables: 3, Rates: []time.Duration{period},
				Types: []ua.TypeID{ua.TypeInt32}, Generators: []Generator{GeneratorCounter}, AlarmInterval: -1, Stagger: stagger}
		})
		base := s.start.UnixNano() / 100 * 100
		now := time.Now().UnixNano()
		for f := range folders {
			want := base
			if stagger && f > 0 {
				want = base + (int64(period)*int64(f)/folders-int64(period))/100*100
			}
			for v := range 3 {
				n := s.as.get(ua.MustParseNodeID(LoadNode(f, v)))
				if n == nil || n.gen == nil {
					t.Fatalf("stagger %v: no generator at %s", stagger, LoadNode(f, v))
				}
				if n.gen.start != want {
					t.Errorf("stagger %v: %s starts at %+d ns from the server, want %+d", stagger, LoadNode(f, v), n.gen.start-base, want-base)
				}
				dv := s.readValue(n, 0)
				src := int64(dv.SourceTimestamp-116444736000000000) * 100
				if src > now+int64(time.Millisecond) || src < now-int64(period)-int64(time.Second) {
					t.Errorf("stagger %v: %s: SourceTimestamp %v, read at %v", stagger, LoadNode(f, v), time.Unix(0, src), time.Unix(0, now))
				}
				// The value is the tick whose start is the SourceTimestamp.
				if tick := n.gen.tickAt(src); dv.Value.RawBits() != uint64(tick) || n.gen.tickTime(tick) != dv.SourceTimestamp {
					t.Errorf("stagger %v: %s: value %d stamped %v, tick %d", stagger, LoadNode(f, v), dv.Value.RawBits(), dv.SourceTimestamp, tick)
				}
			}
		}
	}
}

// TestParallelSweep: a sweep of more than parallelSampleItems items is split
// over goroutines by subscription; every item of every subscription still
// gets every value of its counter, in order, without a gap (and, under the
// race detector, without a race). The counters tick every 500 ms, ten times
// the sampling interval: a sample that a busy machine delays by less than
// that still sees every tick.
func TestParallelSweep(t *testing.T) {
	const subs, perSub = 3, 3000 // 9,000 items at one sampling rate
	if subs*perSub < parallelSampleItems {
		t.Fatalf("%d items do not make a parallel sweep", subs*perSub)
	}
	s := startServer(t, func(c *Config) {
		c.Sim = SimConfig{Folders: subs * 3, Variables: perSub / 3, Rates: []time.Duration{500 * time.Millisecond},
			Types: []ua.TypeID{ua.TypeInt32}, Generators: []Generator{GeneratorCounter}, AlarmInterval: -1}
	})
	ctx := testContext(t, time.Minute)
	ts := mustSession(t, ctx, s, dialOpts{})
	type state struct {
		last    []int64 // per client handle − 1; 0: none yet
		changes []int
		bad     string
	}
	var mu sync.Mutex
	bySub := map[uint32]*state{}
	for k := range subs {
		cs, err := ts.createSubscription(ctx, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i := range perSub {
			ids = append(ids, LoadNode(k*3+i/(perSub/3), i%(perSub/3)))
		}
		res, err := ts.monitor(ctx, cs.SubscriptionID, 50, 10, nil, ids...)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.StatusCode != ua.StatusGood {
				t.Fatalf("create: %v", r.StatusCode)
			}
		}
		bySub[cs.SubscriptionID] = &state{last: make([]int64, perSub), changes: make([]int, perSub)}
	}
	p := ts.startPublishing(4, func(r *ua.PublishResponse) {
		mu.Lock()
		defer mu.Unlock()
		st := bySub[r.SubscriptionID]
		if st == nil {
			return
		}
		for _, n := range dataChanges(r) {
			i := int(n.ClientHandle) - 1
			v := int64(int32(n.Value.Value.RawBits()))
			switch {
			case i < 0 || i >= perSub:
				st.bad = fmt.Sprintf("handle %d", n.ClientHandle)
			case st.last[i] != 0 && v != st.last[i]+1 && st.bad == "":
				st.bad = fmt.Sprintf("handle %d: %d after %d", n.ClientHandle, v, st.last[i])
			}
			if i >= 0 && i < perSub {
				st.last[i] = v
				st.changes[i]++
			}
		}
	})
	defer p.halt()
	testutil.WaitFor(t, 30*time.Second, "3 values of every item of every subscription", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, st := range bySub {
			if st.bad != "" {
				return true
			}
			for _, n := range st.changes {
				if n < 3 {
					return false
				}
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for id, st := range bySub {
		if st.bad != "" {
			t.Errorf("subscription %d: %s", id, st.bad)
		}
	}
}
