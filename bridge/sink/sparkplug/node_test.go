package sparkplug

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"google.golang.org/protobuf/proto"

	"github.com/uagate/gateway/bridge/sink"
	pb "github.com/uagate/gateway/bridge/sink/sparkplug/sparkplugpb"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/internal/testutil"
)

// watch subscribes to a Sparkplug group on the broker at url and returns
// the kinds (NBIRTH, NDEATH, …) of what arrives, with each NDEATH's bdSeq.
func watch(t *testing.T, url string) func() []string {
	t.Helper()
	var mu sync.Mutex
	var got []string
	c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(url).SetClientID("watch-" + t.Name()))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	tok := c.Subscribe(Namespace+"/G/#", 1, func(_ mqtt.Client, m mqtt.Message) {
		k := strings.Split(m.Topic(), "/")[2]
		if k == "NDEATH" {
			var p pb.Payload
			if err := proto.Unmarshal(m.Payload(), &p); err == nil && len(p.Metrics) == 1 {
				k += " " + strconv.FormatUint(p.Metrics[0].GetLongValue(), 10)
			}
		}
		mu.Lock()
		got = append(got, k)
		mu.Unlock()
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestNodeLifecycle: the node as a sink of an Output: Connect starts its
// session (NBIRTH), Close ends it with NDEATH, and what it started has
// ended; Connect after Close fails.
func TestNodeLifecycle(t *testing.T) {
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	seen := watch(t, mosq.URL())
	testutil.CheckLeaks(t)
	n, err := New(Config{URL: mosq.URL(), GroupID: "G", EdgeNodeID: "E", Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	o, err := sink.NewOutput(n, sink.OutputOptions{Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	o.Start()
	testutil.WaitFor(t, 10*time.Second, "NBIRTH", func() bool { return contains(seen(), "NBIRTH") })
	if st := n.Stats(); st.State != StateOnline || !st.Connected || st.NodeBirths != 1 || st.BdSeq != 0 {
		t.Fatalf("stats %+v", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "NDEATH", func() bool { return contains(seen(), "NDEATH 0") })
	if st := n.Stats(); st.State != StateOffline || st.Connected {
		t.Errorf("after Close: %+v", st)
	}
	if err := n.Connect(context.Background()); err == nil {
		t.Error("Connect after Close succeeded")
	}
}

// TestNodeCloseBrokerDown: Close ends within its context while the node
// cannot reach its broker; a node never connected closes at once.
func TestNodeCloseBrokerDown(t *testing.T) {
	mosq := brokertest.StartMosquitto(t, brokertest.MosquittoOptions{})
	url := mosq.URL()
	mosq.Kill()
	testutil.CheckLeaks(t)
	n, err := New(Config{URL: url, GroupID: "G", EdgeNodeID: "E", Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "a failed connection attempt", func() bool { return n.Stats().ConnectFailures > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_ = n.Close(ctx)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %v with a context of 1 s", d)
	}

	never, err := New(Config{URL: url, GroupID: "G", EdgeNodeID: "E2", Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := never.Close(context.Background()); err != nil {
		t.Errorf("Close of a node never connected: %v", err)
	}
	if err := never.Connect(context.Background()); err == nil {
		t.Error("Connect after Close succeeded")
	}
}
