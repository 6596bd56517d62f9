package testutil

import (
	"log/slog"
	"runtime"
	"strings"
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

func TestConsistently(t *testing.T) {
	start := time.Now()
	if !Consistently(30*time.Millisecond, func() bool { return true }) {
		t.Fatal("a condition that always holds failed")
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Fatalf("watched for %v, less than asked", el)
	}
	var n atomic.Int32
	if Consistently(5*time.Second, func() bool { return n.Add(1) < 3 }) {
		t.Fatal("a condition that fails on the third check held")
	}
	if n.Load() != 3 {
		t.Fatalf("checked %d times, want 3: the first false ends the watch", n.Load())
	}
}

// TestCheckLeaks: a goroutine that outlives its test is reported, with the
// stacks; one that ends during the cleanups is not.
func TestCheckLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	stop := make(chan struct{})
	// Several: a goroutine of an earlier test ending meanwhile must not hide
	// them.
	for range 4 {
		go func() { <-stop }()
	}
	msg := leaked(base, 50*time.Millisecond)
	close(stop)
	if !strings.Contains(msg, "goroutine leak") || !strings.Contains(msg, "TestCheckLeaks") {
		t.Fatalf("a blocked goroutine reported as %q", msg)
	}
	WaitGoroutines(t, base)
	ok := t.Run("ends in cleanup", func(t *testing.T) {
		CheckLeaks(t)
		done := make(chan struct{})
		go func() { <-done }()
		t.Cleanup(func() { close(done) })
	})
	if !ok {
		t.Fatal("a goroutine ended by a cleanup counted as a leak")
	}
}

func TestLogger(t *testing.T) {
	t.Setenv(LogLevelEnv, "info")
	if l := logLevel(); l != slog.LevelInfo {
		t.Fatalf("level %v, want info", l)
	}
	t.Setenv(LogLevelEnv, "nonsense")
	if l := logLevel(); l != slog.LevelWarn {
		t.Fatalf("level %v for a bad setting, want warn", l)
	}
	var buf strings.Builder
	w := &testWriter{w: &buf}
	log := slog.New(slog.NewTextHandler(w, nil))
	log.Info("before")
	w.end()
	log.Info("after")
	if s := buf.String(); !strings.Contains(s, "before") || strings.Contains(s, "after") {
		t.Fatalf("logged %q: want the record before the end only", s)
	}
	Logger(t).Warn("a warning in the test's output")
}
