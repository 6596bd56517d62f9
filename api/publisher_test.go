package api

import (
	"testing"
	"time"

	"github.com/uagate/gateway/bridge"
)

// TestOPCPublisherAPI drives the configuration with OPC Publisher 2.9
// payloads at its routes and checks our configuration after each call.
func TestOPCPublisherAPI(t *testing.T) {
	b := newTestBackend(t, nil)
	_, ts := newTestServer(t, b, Options{})

	// PublishNodes creates the endpoint, the group and the writer; members
	// we do not implement are ignored.
	r := do(t, ts, "POST", "/v2/configuration/nodes", "", `{"EndpointUrl":"opc.tcp://plc7:4840","UseSecurity":false,
		"DataSetWriterGroup":"hall","DataSetWriterId":"press","DataSetPublishingIntervalTimespan":"00:00:00.500",
		"BatchSize":50,"MessagingMode":"PubSub",
		"OpcNodes":[{"Id":"ns=2;s=Press.Force","DisplayName":"force","OpcSamplingInterval":100,"HeartbeatInterval":5000},
			{"Id":"i=2258","DataSetFieldId":"time","QueueSize":3,"DiscardNew":true,"DeadbandType":"Absolute","DeadbandValue":0.5}]}`)
	if r.status != 200 || string(r.body) != "{}\n" {
		t.Fatalf("PublishNodes: %d %s", r.status, r.body)
	}
	c := b.Config()
	if len(c.Endpoints) != 1 || c.Endpoints[0].Name != "plc7-4840" || c.Endpoints[0].SecurityMode != "None" {
		t.Fatalf("endpoints %+v", c.Endpoints)
	}
	g := c.WriterGroups[0]
	if g.Name != "hall" || g.Endpoint != "plc7-4840" || g.PublishingInterval.D() != 500*time.Millisecond || len(g.Writers) != 1 {
		t.Fatalf("group %+v", g)
	}
	w := g.Writers[0]
	if w.Name != "press" || len(w.Fields) != 2 || w.Fields[0].Name != "force" || w.Fields[0].SamplingInterval.D() != 100*time.Millisecond ||
		w.Fields[0].Heartbeat.D() != 5*time.Second || w.Fields[1].Name != "time" || w.Fields[1].QueueSize != 3 ||
		*w.Fields[1].DiscardOldest || w.Fields[1].Deadband.Type != "absolute" {
		t.Fatalf("writer %+v", w)
	}

	// Again with one more node and one known: merged.
	r = do(t, ts, "POST", "/v2/configuration/nodes", "", `{"EndpointUrl":"opc.tcp://plc7:4840","UseSecurity":false,
		"DataSetWriterGroup":"hall","DataSetWriterId":"press","OpcNodes":[{"Id":"ns=2;s=Press.Temp"},{"Id":"i=2258","DataSetFieldId":"time"}]}`)
	if r.status != 200 || len(b.Config().WriterGroups[0].Writers[0].Fields) != 3 {
		t.Fatalf("second PublishNodes: %d %s %+v", r.status, r.body, b.Config().WriterGroups)
	}
	// Default writer id: the publishing interval in ms.
	r = do(t, ts, "POST", "/v2/configuration/nodes", "", `{"EndpointUrl":"opc.tcp://plc8:4840","OpcNodes":[{"Id":"i=2259","OpcPublishingInterval":2000}]}`)
	if r.status != 200 {
		t.Fatalf("third: %d %s", r.status, r.body)
	}
	if g := b.Config().WriterGroups[1]; g.Name != "plc8-4840" || g.Writers[0].Name != "2000" || g.PublishingInterval.D() != 2*time.Second {
		t.Fatalf("defaults: %+v", g)
	}

	// GetConfiguredEndpoints, with and without nodes.
	r = do(t, ts, "GET", "/v2/configuration?IncludeNodes=true", "", nil)
	var ce ConfiguredEndpointsResponse
	r.decode(t, &ce)
	if len(ce.Endpoints) != 2 || ce.Endpoints[0].EndpointURL != "opc.tcp://plc7:4840" || len(ce.Endpoints[0].OpcNodes) != 3 ||
		*ce.Endpoints[0].DataSetPublishingInterval != 500 {
		t.Fatalf("GetConfiguredEndpoints: %s", r.body)
	}
	r = do(t, ts, "GET", "/v2/configuration", "", nil)
	ce = ConfiguredEndpointsResponse{}
	if r.decode(t, &ce); len(ce.Endpoints[0].OpcNodes) != 0 {
		t.Fatalf("without nodes: %s", r.body)
	}
	// GetConfiguredNodesOnEndpoint.
	r = do(t, ts, "POST", "/v2/configuration/endpoints/list/nodes", "", `{"EndpointUrl":"opc.tcp://plc7:4840","UseSecurity":false,"DataSetWriterGroup":"hall"}`)
	var cn ConfiguredNodesResponse
	if r.decode(t, &cn); len(cn.OpcNodes) != 3 || cn.OpcNodes[2].ID != "ns=2;s=Press.Temp" {
		t.Fatalf("GetConfiguredNodesOnEndpoint: %s", r.body)
	}
	// GetDiagnosticInfo: one per group.
	b.stats.Groups = []bridge.GroupStats{{Name: "hall", Notifications: 10, Events: 1, Messages: 4}}
	r = do(t, ts, "POST", "/v2/configuration/diagnostics", "", nil)
	var di []DiagnosticInfo
	if r.decode(t, &di); len(di) != 2 || di[0].IngressDataChanges != 11 || di[0].OutgressIoTMessageCount != 4 || len(di[0].Endpoints) != 1 {
		t.Fatalf("GetDiagnosticInfo: %s", r.body)
	}

	// UnpublishNodes: unknown node → 404, nothing changed.
	before := cloneConfig(b.Config())
	r = do(t, ts, "POST", "/v2/configuration/nodes/unpublish", "", `{"EndpointUrl":"opc.tcp://plc7:4840","UseSecurity":false,
		"DataSetWriterGroup":"hall","OpcNodes":[{"Id":"ns=2;s=Press.Temp"},{"Id":"ns=2;s=Nope"}]}`)
	if p := r.problem(t); p.Status != 404 || p.Detail != "node ns=2;s=Nope is not published on opc.tcp://plc7:4840" {
		t.Fatalf("unpublish unknown: %+v", p)
	}
	if len(b.Config().WriterGroups[0].Writers[0].Fields) != len(before.WriterGroups[0].Writers[0].Fields) {
		t.Fatal("a refused unpublish changed something")
	}
	r = do(t, ts, "POST", "/v2/configuration/nodes/unpublish", "", `{"EndpointUrl":"opc.tcp://plc7:4840","UseSecurity":false,
		"DataSetWriterGroup":"hall","OpcNodes":[{"Id":"ns=2;s=Press.Temp"}]}`)
	if r.status != 200 || len(b.Config().WriterGroups[0].Writers[0].Fields) != 2 {
		t.Fatalf("unpublish: %d %s", r.status, r.body)
	}

	// AddOrUpdateEndpoints replaces the writer's nodes; an entry without
	// nodes removes its writer (and the emptied group).
	r = do(t, ts, "PATCH", "/v2/configuration", "", `[{"EndpointUrl":"opc.tcp://plc7:4840","UseSecurity":false,"DataSetWriterGroup":"hall",
		"DataSetWriterId":"press","OpcNodes":[{"Id":"ns=2;s=Press.Only"}]},
		{"EndpointUrl":"opc.tcp://plc8:4840","DataSetWriterId":"2000"}]`)
	if r.status != 200 {
		t.Fatalf("AddOrUpdateEndpoints: %d %s", r.status, r.body)
	}
	if c := b.Config(); len(c.WriterGroups) != 1 || len(c.WriterGroups[0].Writers[0].Fields) != 1 || c.WriterGroups[0].Writers[0].Fields[0].Node != "ns=2;s=Press.Only" {
		t.Fatalf("after AddOrUpdateEndpoints: %+v", c.WriterGroups)
	}
	// A bad entry refuses the whole call, naming the entry.
	r = do(t, ts, "PATCH", "/v2/configuration", "", `[{"EndpointUrl":"opc.tcp://plc9:4840","OpcNodes":[{"Id":"i=1"}]},{"EndpointUrl":"opc.tcp://plc9:4840","OpcNodes":[{"Id":"bad id"}]}]`)
	if p := r.problem(t); p.Status != 400 || p.Field != "/1/OpcNodes/0/Id" {
		t.Fatalf("bad entry: %+v", p)
	}
	if len(b.Config().Endpoints) != 2 {
		t.Fatal("a refused AddOrUpdateEndpoints added an endpoint")
	}
	// A group name used for another endpoint is a conflict.
	r = do(t, ts, "POST", "/v2/configuration/nodes", "", `{"EndpointUrl":"opc.tcp://plc9:4840","DataSetWriterGroup":"hall","OpcNodes":[{"Id":"i=1"}]}`)
	if p := r.problem(t); p.Status != 409 || p.Field != "/DataSetWriterGroup" {
		t.Fatalf("group of another endpoint: %+v", p)
	}
	// Certificate user authentication cannot be honoured.
	r = do(t, ts, "POST", "/v2/configuration/nodes", "", `{"EndpointUrl":"opc.tcp://plc9:4840","OpcAuthenticationMode":"Certificate","OpcNodes":[{"Id":"i=1"}]}`)
	if p := r.problem(t); p.Status != 400 || p.Field != "/OpcAuthenticationMode" {
		t.Fatalf("certificate auth: %+v", p)
	}

	// UnpublishAllNodes without an endpoint clears everything.
	r = do(t, ts, "POST", "/v2/configuration/nodes/unpublish/all", "", `{}`)
	if r.status != 200 || len(b.Config().WriterGroups) != 0 {
		t.Fatalf("UnpublishAllNodes: %d %s %+v", r.status, r.body, b.Config().WriterGroups)
	}
}

func TestParseTimeSpan(t *testing.T) {
	for in, want := range map[string]time.Duration{"00:00:01": time.Second, "00:00:00.250": 250 * time.Millisecond,
		"01:02:03": time.Hour + 2*time.Minute + 3*time.Second, "1.00:00:00": 24 * time.Hour} {
		if got, err := parseTimeSpan("x", in); err != nil || got != want {
			t.Errorf("%s: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"", "1s", "00:61:00", "-1:00:00", "a.00:00:00"} {
		if _, err := parseTimeSpan("x", in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
