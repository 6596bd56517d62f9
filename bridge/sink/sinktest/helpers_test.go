package sinktest

import (
	"testing"

	"github.com/uagate/gateway/bridge/sink"
)

func TestPaddedMessage(t *testing.T) {
	for _, size := range []int{0, 13, 40, 2 << 20} {
		m := PaddedMessage(nil, 7, sink.KindData, Addr, size)
		if m.Len() < size || (size > 22 && m.Len() != size) {
			t.Errorf("size %d: %d bytes", size, m.Len())
		}
		if c, ok := Counter(m.Payload()); !ok || c != 7 {
			t.Errorf("size %d: counter %d %v in %.40q", size, c, ok, m.Payload())
		}
		m.Done(true)
	}
}

func TestTracker(t *testing.T) {
	tr := NewTracker()
	tr.Settled(1, true)
	tr.Settled(2, false)
	tr.Settled(2, true)
	if tr.Count() != 2 {
		t.Fatalf("count %d, want 2", tr.Count())
	}
	if d, u := tr.Outcome(2); d != 1 || u != 1 {
		t.Fatalf("outcome of 2: %d delivered, %d undelivered", d, u)
	}
}
