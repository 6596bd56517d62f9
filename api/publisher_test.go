package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
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
		"OpcNodes":[{"Id":"ns=2;s=Press.Force","DisplayName":"force","OpcSamplingInterval":100,"HeartbeatInterval":5},
			{"Id":"i=2258","DataSetFieldId":"time","QueueSize":3,"DiscardNew":true,"DeadbandType":"Absolute","DeadbandValue":0.5}]}`)
	if r.status != 200 || string(r.body) != "{}\n" {
		t.Fatalf("PublishNodes: %d %s", r.status, r.body)
	}
	c := b.Config()
	if len(c.Endpoints) != 1 || c.Endpoints[0].Name != "plc7_4840" || c.Endpoints[0].SecurityMode != "None" {
		t.Fatalf("endpoints %+v", c.Endpoints)
	}
	g := c.WriterGroups[0]
	if g.Name != "hall" || g.Endpoint != "plc7_4840" || g.PublishingInterval.D() != 500*time.Millisecond || len(g.Writers) != 1 {
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
	if g := b.Config().WriterGroups[1]; g.Name != "plc8_4840" || g.Writers[0].Name != "2000" || g.PublishingInterval.D() != 2*time.Second {
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
	// A group name used for another endpoint makes a group of its own, as
	// in a publishednodes.json (ours has one endpoint), found by the name.
	r = do(t, ts, "POST", "/v2/configuration/nodes", "", `{"EndpointUrl":"opc.tcp://plc9:4840","DataSetWriterGroup":"hall","OpcNodes":[{"Id":"i=1"}]}`)
	if g := b.Config().WriterGroups[len(b.Config().WriterGroups)-1]; r.status != 200 || g.Name != "hall_2" || g.Endpoint != "plc9_4840" {
		t.Fatalf("group of another endpoint: %d %s %+v", r.status, r.body, g)
	}
	r = do(t, ts, "POST", "/v2/configuration/endpoints/list/nodes", "", `{"EndpointUrl":"opc.tcp://plc9:4840","DataSetWriterGroup":"hall"}`)
	cn = ConfiguredNodesResponse{}
	if r.decode(t, &cn); len(cn.OpcNodes) != 1 || cn.OpcNodes[0].ID != "i=1" {
		t.Fatalf("nodes of hall on plc9: %s", r.body)
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

// samePublishedNodes are entries of OPC Publisher 2.9 that exercise the
// mapping's rules: a group across two endpoints and two intervals, writers
// named by default, TimeSpans, heartbeat seconds, a node given twice, two
// nodes of one name, an event filter, the {uri}#{id} node form.
const samePublishedNodes = `[
  {"EndpointUrl": "opc.tcp://plc1:4840", "UseSecurity": false, "DataSetWriterGroup": "Line 1", "DataSetWriterId": "Press",
   "DataSetPublishingInterval": 500, "DataSetSamplingInterval": 100, "DataSetKeyFrameCount": 5, "MessagingMode": "PubSub",
   "OpcNodes": [
     {"Id": "ns=2;s=Force", "DisplayName": "Force", "HeartbeatInterval": 30, "QueueSize": 4, "DiscardNew": true},
     {"Id": "ns=2;s=Temp", "DataSetFieldId": "Force", "DeadbandType": "Percent", "DeadbandValue": 5, "DataChangeTrigger": "StatusValueTimestamp"},
     {"Id": "ns=2;s=Speed", "OpcPublishingIntervalTimespan": "00:00:02", "OpcSamplingIntervalTimespan": "00:00:00.250"}]},
  {"EndpointUrl": "opc.tcp://PLC1:4840/", "EndpointSecurityMode": "None", "DataSetWriterGroup": "Line 1", "DataSetWriterId": "Press",
   "OpcNodes": [{"Id": "ns=2;s=Force", "DisplayName": "Force", "HeartbeatIntervalTimespan": "00:01:00"}, {"Id": "ns=2;s=Level"}]},
  {"EndpointUrl": "opc.tcp://plc1:4840", "UseSecurity": true, "OpcAuthenticationMode": "UsernamePassword",
   "OpcAuthenticationUsername": "op", "OpcAuthenticationPassword": "pw", "DataSetWriterGroup": "Line 1",
   "OpcNodes": [{"Id": "http://example.com/plant/#s=Valve", "OpcPublishingInterval": 250}, {"ExpandedNodeId": "nsu=http://example.com/plant/;s=Pump"}]},
  {"EndpointUrl": "opc.tcp://plc2.example:4841/UA", "EndpointSecurityMode": "Sign", "EndpointSecurityPolicy": "Basic256Sha256",
   "OpcNodes": [{"Id": "i=2253", "DisplayName": "Events", "EventFilter": {"TypeDefinitionId": "ns=2;i=235",
     "SelectClauses": [{"BrowsePath": ["EventId"]}, {"BrowsePath": ["/2:CycleId"]}]}}]}
]`

// TestOPCPublisherSameMapping feeds the same entries through a
// publishednodes.json (config.Parse) and through the /v2 API, one
// PublishNodes per entry and all at once in AddOrUpdateEndpoints: the
// endpoints, writer groups, writers, fields and intervals are the same.
func TestOPCPublisherSameMapping(t *testing.T) {
	file, warns, err := config.Parse([]byte(samePublishedNodes), "publishednodes.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) == 0 {
		t.Error("no warnings: the renamed and split groups and the replaced node are warned")
	}
	model := func(c *config.Config) string {
		return (&config.Config{Endpoints: c.Endpoints, WriterGroups: c.WriterGroups}).String()
	}
	want := model(file)
	// What the file gives, spelled out where the two old mappings differed.
	for _, s := range []string{
		"name: plc1_4840\n", "name: plc1_4840_2\n", "name: plc2.example_4841\n",
		"name: Line_1\n", "name: Line_1_2s\n", "name: Line_1_2\n", "name: Line_1_2_1s\n",
		"name: Press\n", `name: "1000"`, `name: "250"`, "name: Force_2\n", "heartbeat: 1m0s\n",
		"node: nsu=http://example.com/plant/;s=Valve\n", "securityMode: Sign\n", "ofType: ns=2;i=235\n",
	} {
		if !strings.Contains(want, s) {
			t.Errorf("the file's configuration lacks %q:\n%s", s, want)
		}
	}
	var entries []json.RawMessage
	if err := json.Unmarshal([]byte(samePublishedNodes), &entries); err != nil {
		t.Fatal(err)
	}

	b := newTestBackend(t, nil)
	_, ts := newTestServer(t, b, Options{})
	for i, e := range entries {
		if r := do(t, ts, "POST", "/v2/configuration/nodes", "", []byte(e)); r.status != 200 {
			t.Fatalf("PublishNodes %d: %d %s", i, r.status, r.body)
		}
	}
	api := b.Config().Clone()
	api.ApplyDefaults()
	if got := model(api); got != want {
		t.Errorf("PublishNodes:\n%s\nthe file:\n%s", got, want)
	}
	if pw := api.Endpoints[1].Identity.Password.Value; pw != "pw" || file.Endpoints[1].Identity.Password.Reveal() != "pw" {
		t.Errorf("password %q", pw)
	}

	b2 := newTestBackend(t, nil)
	_, ts2 := newTestServer(t, b2, Options{})
	if r := do(t, ts2, "PATCH", "/v2/configuration", "", samePublishedNodes); r.status != 200 {
		t.Fatalf("AddOrUpdateEndpoints: %d %s", r.status, r.body)
	}
	api = b2.Config().Clone()
	api.ApplyDefaults()
	if got := model(api); got != want {
		t.Errorf("AddOrUpdateEndpoints:\n%s\nthe file:\n%s", got, want)
	}
}
