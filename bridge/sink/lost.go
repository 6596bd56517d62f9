package sink

import "sync"

// Lost tells, once, that a sink's broker connection became unusable and
// why: the sinks select on C while they wait for the broker, and a Publish
// after it answers ErrNotConnected. Mark may be called from any goroutine,
// any number of times; the first reason stays.
type Lost struct {
	ch   chan struct{}
	once sync.Once
	err  error // set before ch is closed
}

// NewLost returns a Lost not yet marked.
func NewLost() *Lost { return &Lost{ch: make(chan struct{})} }

// Mark records err as the reason (the first call wins) and closes C.
func (l *Lost) Mark(err error) {
	l.once.Do(func() {
		l.err = err
		close(l.ch)
	})
}

// C is closed once the connection is lost.
func (l *Lost) C() <-chan struct{} { return l.ch }

// Err is the reason; nil before Mark.
func (l *Lost) Err() error {
	if !l.Is() {
		return nil
	}
	return l.err
}

// Is reports whether the connection is lost.
func (l *Lost) Is() bool {
	select {
	case <-l.ch:
		return true
	default:
		return false
	}
}
