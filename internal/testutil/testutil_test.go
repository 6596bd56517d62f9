package testutil

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestEventually(t *testing.T) {
	if !Eventually(0, func() bool { return true }) {
		t.Fatal("a condition that holds at once failed with timeout 0")
	}
	var n atomic.Int32
	if !Eventually(5*time.Second, func() bool { return n.Add(1) >= 3 }) {
		t.Fatal("a condition that holds on the third check failed")
	}
	if n.Load() != 3 {
		t.Fatalf("checked %d times, want 3", n.Load())
	}
	start := time.Now()
	if Eventually(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds succeeded")
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before the timeout", el)
	}
}

// TestWaitGoroutines: goroutines that end after a while are waited for. Ten of
// them, so that a goroutine of the runtime or the testing package ending
// meanwhile cannot make the count look low enough early.
func TestWaitGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	stop := make(chan struct{})
	var stopped atomic.Bool
	for range 10 {
		go func() { <-stop }()
	}
	time.AfterFunc(30*time.Millisecond, func() { stopped.Store(true); close(stop) })
	WaitGoroutines(t, base)
	if !stopped.Load() {
		t.Fatal("returned while the goroutines were still running")
	}
}
