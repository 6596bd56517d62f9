//go:build !race

package wssink

import (
	"strings"
	"testing"

	"github.com/uagate/gateway/bridge/sink"
)

// Allocation tests: the race detector allocates on its own account, so they
// are built without it only (scripts/test.sh runs them in a step of their own).

// TestEnqueueAllocs: a message fanned out to clients costs no allocation in
// steady state, from Enqueue through the writers' WriteMessage.
func TestEnqueueAllocs(t *testing.T) {
	const clients = 3
	h, url := serve(t, Options{}, nil)
	rawReaders(t, url+"?kind=data", clients)
	waitClients(t, h, clients, true)
	payload := []byte(strings.Repeat("x", 1000))
	var sent uint64
	run := func() {
		m := sink.NewMessage(len(payload))
		m.SetPayload(payload)
		h.Enqueue(m)
		sent += clients
		if !pace(h, sent) {
			t.Fatalf("hub wrote %d of %d messages", h.sent.Load(), sent)
		}
	}
	for range 100 {
		run() // warm the pools
	}
	if a := testing.AllocsPerRun(2000, run); a != 0 {
		t.Errorf("%.2f allocations per message to %d clients, want 0", a, clients)
	}
	if s := h.Stats(); s.SlowClosed != 0 || s.Clients != clients {
		t.Errorf("stats %+v", s)
	}
}
