package testutil

import (
	"bytes"
	"sync"
)

// LockedBuffer collects what several goroutines write (a log), up to 8 MiB;
// what comes after is dropped.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 8<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

// String returns what was written.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
