package client

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/ua"
)

// TestMaintainAfter checks how long a bare Client's maintenance sleeps: until
// the first subscription could fall silent (at most superviseIdle) when nothing
// needs it, its tick while items wait to be created or a handler runs.
func TestMaintainAfter(t *testing.T) {
	const tick = 250 * time.Millisecond
	p := newPublisher(slog.New(slog.DiscardHandler), 0, 100*time.Millisecond, time.Second)
	s, err := newSubscription(p, &SubscriptionConfig{PublishingInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p.add(s)
	now := time.Now()

	// Not created on the server yet: maintenance is due.
	if d := p.maintainAfter(now, tick); d != tick {
		t.Fatalf("subscription not created: slept %v, want the tick %v", d, tick)
	}

	// Created, keep-alive window 100 ms × (2+1) + 100 ms grace, heard now:
	// silent after 400 ms.
	s.id.Store(7)
	s.revInterval.Store(int64(100 * time.Millisecond))
	s.revKeepAlive.Store(2)
	s.lastActivity.Store(now.UnixNano())
	if d := p.maintainAfter(now, tick); d != 401*time.Millisecond {
		t.Fatalf("heard now, silent after 400 ms: slept %v, want 401ms", d)
	}

	// A long window: the sleep is bounded by superviseIdle.
	s.revKeepAlive.Store(1000)
	if d := p.maintainAfter(now, tick); d != superviseIdle {
		t.Fatalf("long keep-alive window: slept %v, want %v", d, superviseIdle)
	}

	// Already past its window: the tick, not a negative sleep.
	s.revKeepAlive.Store(2)
	if d := p.maintainAfter(now.Add(time.Second), tick); d != tick {
		t.Fatalf("silent subscription: slept %v, want the tick %v", d, tick)
	}

	// Items waiting to be created: the tick.
	s.items.mu.Lock()
	s.items.pending = 1
	s.items.mu.Unlock()
	if d := p.maintainAfter(now, tick); d != tick {
		t.Fatalf("pending items: slept %v, want the tick %v", d, tick)
	}
	s.items.mu.Lock()
	s.items.pending = 0
	s.items.mu.Unlock()

	// Failed items to be tried again in 150 ms: the sleep ends then.
	s.cfg.ItemRetryInterval = 150 * time.Millisecond
	s.items.mu.Lock()
	s.items.failed = 1
	s.items.retryAt = now.Add(300 * time.Millisecond)
	s.items.mu.Unlock()
	if d := p.maintainAfter(now, tick); d != 300*time.Millisecond {
		t.Fatalf("item retry due in 300 ms: slept %v, want 300ms", d)
	}
	s.items.mu.Lock()
	s.items.failed = 0
	s.items.mu.Unlock()

	// A handler running: silence is not counted, the tick.
	p.busySince.Store(now.UnixNano())
	if d := p.maintainAfter(now, tick); d != tick {
		t.Fatalf("handler running: slept %v, want the tick %v", d, tick)
	}
}

// TestReadStatusAllocs: the keep-alive read of ServerStatus.State, which a
// session at rest sends every KeepAliveInterval for as long as it runs,
// allocates nothing once its probe exists; a probe whose read is out when
// supervise returns is forgotten, not reused. (The server runs in a child
// process: its allocations are not counted.)
func TestReadStatusAllocs(t *testing.T) {
	url := startSimProcess(t, simOptions{})
	var log stateLog
	cfg := testManagedConfig(&log)
	cfg.KeepAliveInterval = -1 // the test sends the reads
	m, err := NewManagedSession(url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	m.Start()
	var c *Client
	if !testutil.Eventually(10*time.Second, func() bool {
		c = m.pub.current()
		return c != nil && m.State() == StateConnected
	}) {
		t.Fatalf("not connected: %v", &log)
	}
	read := func() {
		p := m.readStatus(c)
		if err := <-p.out; err != nil {
			t.Fatal(err)
		}
	}
	read()
	first := m.probe
	allocs := testing.AllocsPerRun(20, read)
	t.Logf("%.2f allocations per status read", allocs)
	if !raceEnabled && allocs != 0 {
		t.Errorf("a status read allocates %.2f times, want 0", allocs)
	}
	if m.probe != first {
		t.Error("the reads did not keep their probe")
	}
	m.dropStatus(first)
	if p := m.readStatus(c); p == first {
		t.Error("a dropped probe was used again")
	} else if err := <-p.out; err != nil {
		t.Fatal(err)
	}
}

// TestWakeMaintenance: what the supervisor cannot see coming while it sleeps
// at rest (up to superviseIdle) wakes it: a subscription added, registered,
// revised or lost, an item waiting to be created or refused. An item created
// on the server does not.
func TestWakeMaintenance(t *testing.T) {
	p := newPublisher(slog.New(slog.DiscardHandler), 0, 100*time.Millisecond, time.Second)
	woken := func() bool {
		select {
		case <-p.maintain:
			return true
		default:
			return false
		}
	}
	s, err := newSubscription(p, &SubscriptionConfig{PublishingInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	woken()
	steps := []struct {
		what string
		do   func()
		want bool
	}{
		{"subscription added", func() { p.add(s) }, true},
		{"registered under its id", func() { p.register(s, 7) }, true},
		{"keep-alive revised", func() { s.revise(100, 2, 60) }, true},
		{"item waiting to be created", func() { s.items.mu.Lock(); s.items.push(item{}); s.items.mu.Unlock() }, true},
		{"item refused", func() {
			s.items.mu.Lock()
			s.items.push(item{status: ua.StatusBadNodeIdUnknown})
			s.items.mu.Unlock()
		}, true},
		{"item on the server", func() { s.items.mu.Lock(); s.items.push(item{id: 9}); s.items.mu.Unlock() }, false},
		{"lost", func() { p.unregister(s) }, true},
	}
	for _, st := range steps {
		st.do()
		if got := woken(); got != st.want {
			t.Errorf("%s: woken %v, want %v", st.what, got, st.want)
		}
	}
}
