// Package testutil holds what the tests of the uastack packages share: polling
// for a condition with a deadline, instead of sleeping for a guessed time, and
// checking that goroutines a test started have ended. It is imported only by
// tests (_test.go files).
package testutil

import (
	"runtime"
	"testing"
	"time"
)

// Tick is how often a condition is checked.
const Tick = 5 * time.Millisecond

// Eventually reports whether cond holds within timeout. cond is checked at once
// and then every Tick, on the calling goroutine; the last check is made at or
// after the deadline, so a condition that became true just in time counts.
func Eventually(timeout time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(Tick)
	defer tick.Stop()
	for range tick.C {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
	return false // not reached: a ticker's channel is never closed
}

// WaitFor fails the test (Fatalf) when cond does not hold within timeout; what
// names the condition in the message ("the session to time out").
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !Eventually(timeout, cond) {
		tb.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// GoroutineTimeout is how long WaitGoroutines waits for goroutines to end.
const GoroutineTimeout = 10 * time.Second

// WaitGoroutines fails the test, with every goroutine's stack, when the number
// of goroutines does not come down to base within GoroutineTimeout: the
// goroutines of a closed connection end asynchronously, a leaked one never.
// base is runtime.NumGoroutine() taken before the test started its work; tests
// that use it must not run in parallel.
func WaitGoroutines(tb testing.TB, base int) {
	tb.Helper()
	if Eventually(GoroutineTimeout, func() bool { return runtime.NumGoroutine() <= base }) {
		return
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	tb.Fatalf("goroutine leak: %d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf)
}
