// Package testutil holds what the repository's tests share: polling for a
// condition with a deadline, instead of sleeping for a guessed time;
// checking that goroutines a test started have ended; and a logger that
// writes to the test's own output. It is imported only by tests (_test.go
// files and the test-support packages under internal/ and bridge/sink/sinktest).
package testutil

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
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

// Consistently reports whether cond holds at every check for d: the negative
// check ("nothing more is delivered while held"), which has to watch for a
// while since the absence of an event cannot be waited for. cond is checked
// at once, every Tick and at the end; the first false ends the watch.
func Consistently(d time.Duration, cond func() bool) bool {
	if !cond() {
		return false
	}
	deadline := time.Now().Add(d)
	tick := time.NewTicker(Tick)
	defer tick.Stop()
	for range tick.C {
		if !cond() {
			return false
		}
		if !time.Now().Before(deadline) {
			return true
		}
	}
	return true // not reached
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
	if msg := leaked(base, GoroutineTimeout); msg != "" {
		tb.Fatal(msg)
	}
}

// CheckLeaks fails the test when goroutines it started outlive it, as
// WaitGoroutines does, once the test and its cleanups are over. Call it
// first in the test, so that its cleanup, registered first, runs last.
// Tests that use it must not run in parallel.
func CheckLeaks(tb testing.TB) {
	tb.Helper()
	base := runtime.NumGoroutine()
	tb.Cleanup(func() {
		tb.Helper()
		if msg := leaked(base, GoroutineTimeout); msg != "" {
			tb.Error(msg)
		}
	})
}

// leaked waits up to timeout for the goroutines to come down to base and
// returns "" or a report with every goroutine's stack.
func leaked(base int, timeout time.Duration) string {
	if Eventually(timeout, func() bool { return runtime.NumGoroutine() <= base }) {
		return ""
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return fmt.Sprintf("goroutine leak: %d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf)
}

// LogLevelEnv names the environment variable that sets the level of Logger:
// debug, info, warn (the default) or error.
const LogLevelEnv = "UAGATE_TEST_LOG"

// Logger returns a logger that writes text records to the test's output
// (shown when the test fails, or with -v), at the level LogLevelEnv sets,
// warnings and errors by default: what went wrong is in the failed test's
// output, and a passing test stays quiet. Records logged once the test's
// cleanups have run (a goroutine that outlived its test) are dropped
// instead of reaching a finished test.
func Logger(tb testing.TB) *slog.Logger {
	w := &testWriter{w: tb.Output()}
	tb.Cleanup(w.end)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: logLevel()}))
}

func logLevel() slog.Level {
	var l slog.Level
	s := os.Getenv(LogLevelEnv)
	if s == "" || l.UnmarshalText([]byte(strings.ToUpper(s))) != nil {
		return slog.LevelWarn
	}
	return l
}

// testWriter passes writes to a test's output until end.
type testWriter struct {
	mu    sync.Mutex
	w     io.Writer
	ended bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return len(p), nil
	}
	return w.w.Write(p)
}

func (w *testWriter) end() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
}
