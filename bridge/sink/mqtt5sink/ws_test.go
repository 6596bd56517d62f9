package mqtt5sink

import (
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sinktest"
	"github.com/uagate/gateway/internal/testutil"
)

// MQTT over WebSocket (ws://): mochi-mqtt's WebSocket listener takes the
// sink's stream, packets spanning WebSocket messages; an MQTT 5
// subscriber over WebSocket as well receives everything in order.
func TestMQTT5WebSocket(t *testing.T) {
	srv := mochi.New(&mochi.Options{Logger: testutil.Logger(t)})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	a := testutil.FreeAddr(t)
	if err := srv.AddListener(listeners.NewWebsocket(listeners.Config{ID: "ws", Address: a})); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	u := "ws://" + a + "/mqtt"
	sub := subscribe(t, u, "sub-ws", true, "opcua/json/data/#", subOptions{})
	o := sinktest.StartOutput(t, newSink(t, Config{URL: u, QoS: 1, CleanSession: true, PublisherID: "pub"}),
		sink.OutputOptions{Guarantee: config.AtLeastOnce})
	tr := sinktest.NewTracker()
	const n = 100
	for i := range n {
		o.Enqueue(sinktest.PaddedMessage(tr, i, sink.KindData, addr, 100+i*50))
	}
	tr.Wait(t, n, true)
	testutil.WaitFor(t, 10*time.Second, "all received", func() bool { return len(sub.Received()) >= n })
	for i, p := range sub.Received() {
		if c, ok := sinktest.Counter(p); !ok || c != i {
			t.Fatalf("message %d: %.40s", i, p)
		}
	}
}
