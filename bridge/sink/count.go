package sink

import "sync"

// CountData wraps s: once n data messages (KindData) went through its
// Publish without error, done is closed (`gateway run -count`).
func CountData(s Sink, n int64, done chan<- struct{}) Sink {
	return &countingSink{Sink: s, left: n, done: done}
}

type countingSink struct {
	Sink
	mu   sync.Mutex
	left int64
	done chan<- struct{}
}

func (c *countingSink) Publish(m *Message, ack Acker) error {
	// m may be confirmed, and freed, before Publish returns: look first.
	data := m.Kind == KindData
	if err := c.Sink.Publish(m, ack); err != nil || !data {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left > 0 {
		if c.left--; c.left == 0 {
			close(c.done)
		}
	}
	return nil
}
