package server

import (
	"testing"
	"time"

	"github.com/gopcua/opcua"
	gua "github.com/gopcua/opcua/ua"

	"github.com/uagate/gateway/uastack/ua"
)

// TestGopcuaClient: the gopcua v0.8.0 client (an independent implementation)
// connects with security None, browses, reads and subscribes.
func TestGopcuaClient(t *testing.T) {
	s := startServer(t, nil)
	ctx := testContext(t, time.Minute)
	c, err := opcua.NewClient(s.URL(),
		opcua.SecurityMode(gua.MessageSecurityModeNone),
		opcua.SecurityPolicy(gua.SecurityPolicyURINone),
		opcua.AutoReconnect(false),
		opcua.RequestTimeout(10*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)

	// Browse Objects.
	br, err := c.Browse(ctx, &gua.BrowseRequest{NodesToBrowse: []*gua.BrowseDescription{{
		NodeID: gua.NewNumericNodeID(0, 85), BrowseDirection: gua.BrowseDirectionForward,
		ReferenceTypeID: gua.NewNumericNodeID(0, 33), IncludeSubtypes: true, ResultMask: uint32(gua.BrowseResultMaskAll),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, r := range br.Results[0].References {
		names[r.BrowseName.Name] = true
	}
	if !names["Server"] || !names["Demo"] {
		t.Fatalf("Objects: %v", names)
	}

	// Read values of several types.
	rr, err := c.Read(ctx, &gua.ReadRequest{TimestampsToReturn: gua.TimestampsToReturnBoth, NodesToRead: []*gua.ReadValueID{
		{NodeID: gua.MustParseNodeID(NodeCounter), AttributeID: gua.AttributeIDValue},
		{NodeID: gua.MustParseNodeID(StaticNode(ua.TypeInt32, false)), AttributeID: gua.AttributeIDValue},
		{NodeID: gua.MustParseNodeID(ArrayNode(ua.TypeDouble)), AttributeID: gua.AttributeIDValue},
		{NodeID: gua.NewNumericNodeID(0, 2256), AttributeID: gua.AttributeIDValue}, // ServerStatus
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rr.Results {
		if r.Status != gua.StatusOK {
			t.Fatalf("read %d: %v", i, r.Status)
		}
	}
	if _, ok := rr.Results[0].Value.Value().(float64); !ok {
		t.Errorf("Counter = %#v", rr.Results[0].Value.Value())
	}
	if a, ok := rr.Results[2].Value.Value().([]float64); !ok || len(a) != defaultSimArrayLength {
		t.Errorf("DoubleArray = %#v", rr.Results[2].Value.Value())
	}
	if st, ok := rr.Results[3].Value.Value().(*gua.ExtensionObject); !ok || st.Value.(*gua.ServerStatusDataType).State != gua.ServerStateRunning {
		t.Errorf("ServerStatus = %#v", rr.Results[3].Value.Value())
	}

	// Subscribe to the Counter.
	notify := make(chan *opcua.PublishNotificationData, 16)
	sub, err := c.Subscribe(ctx, &opcua.SubscriptionParameters{Interval: 50 * time.Millisecond}, notify)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel(ctx)
	mr, err := sub.Monitor(ctx, gua.TimestampsToReturnBoth,
		opcua.NewMonitoredItemCreateRequestWithDefaults(gua.MustParseNodeID(NodeCounter), gua.AttributeIDValue, 42))
	if err != nil || mr.Results[0].StatusCode != gua.StatusOK {
		t.Fatalf("monitor: %v %+v", err, mr)
	}
	var last float64 = -1
	changes := 0
	timeout := time.After(20 * time.Second)
	for changes < 3 {
		select {
		case n := <-notify:
			if n.Error != nil {
				t.Fatal(n.Error)
			}
			dc, ok := n.Value.(*gua.DataChangeNotification)
			if !ok {
				continue
			}
			for _, it := range dc.MonitoredItems {
				v := it.Value.Value.Value().(float64)
				if it.ClientHandle != 42 || v <= last {
					t.Fatalf("notification %d: %v after %v", it.ClientHandle, v, last)
				}
				last = v
				changes++
			}
		case <-timeout:
			t.Fatalf("%d data changes in 20 s", changes)
		}
	}
}
