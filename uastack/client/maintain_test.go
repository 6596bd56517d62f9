package client

import (
	"log/slog"
	"testing"
	"time"
)

// TestMaintainAfter checks how long a bare Client's maintenance sleeps: until
// the first subscription could fall silent (at most a second) when nothing
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

	// A long window: the sleep is bounded by a second.
	s.revKeepAlive.Store(100)
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
