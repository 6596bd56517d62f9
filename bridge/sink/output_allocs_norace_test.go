//go:build !race

package sink_test

import (
	"testing"

	"github.com/uagate/gateway/bridge/sink"
)

// Allocation tests: the race detector allocates on its own account, so they
// are built without it only (scripts/test.sh runs them in a step of their own).

// The Output's steady path (Enqueue, the worker's publish, the confirmation,
// the last Done back to the pools) allocates nothing.
func TestOutputAllocs(t *testing.T) {
	o := startDiscardOutput(t)
	tr := make(chanTracker, 1)
	payload := []byte(`{"MessageId":"1","MessageType":"ua-data","Messages":[{"counter":1}]}`)
	send := func() {
		m := sink.NewMessage(len(payload))
		m.SetPayload(payload)
		m.Tracker = tr
		o.Enqueue(m)
		if !<-tr {
			t.Fatal("undelivered")
		}
	}
	for range 100 { // warm the pools
		send()
	}
	if n := testing.AllocsPerRun(2000, send); n != 0 {
		t.Fatalf("%v allocations per message through Output", n)
	}
	if st := o.Stats(); st.Confirmed < 2100 || st.Errors != 0 {
		t.Fatalf("stats %+v", st)
	}
}
