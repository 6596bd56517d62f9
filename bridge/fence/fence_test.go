package fence

import (
	"testing"
	"time"
)

func TestFence(t *testing.T) {
	now := time.Now()
	f := New(7, now.Add(time.Second))
	if f.Epoch() != 7 || !f.Open(now) || f.Open(now.Add(time.Second)) {
		t.Fatalf("new fence: epoch %d, open now %v, open at the deadline %v", f.Epoch(), f.Open(now), f.Open(now.Add(time.Second)))
	}
	f.Extend(now.Add(500 * time.Millisecond)) // earlier: no change
	if !f.Open(now.Add(900 * time.Millisecond)) {
		t.Error("an earlier deadline moved the fence back")
	}
	f.Extend(now.Add(2 * time.Second))
	if !f.Open(now.Add(1500*time.Millisecond)) || f.Open(now.Add(2*time.Second)) {
		t.Error("extend")
	}
	if d := f.Deadline(); !d.Equal(now.Add(2 * time.Second)) {
		t.Errorf("deadline %v, want %v", d, now.Add(2*time.Second))
	}
	f.Close()
	if f.Open(now) || !f.Deadline().IsZero() {
		t.Error("closed fence open")
	}
	f.Extend(now.Add(time.Hour))
	if f.Open(now) {
		t.Error("a closed fence reopened")
	}
	var none *Fence
	if !none.Open(now.Add(1000*time.Hour)) || none.Epoch() != 0 {
		t.Error("a nil fence is not always open")
	}
	none.Close()
}
