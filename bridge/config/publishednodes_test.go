package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

func loadPN(t *testing.T, file string) (*Config, []string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !isPublishedNodes(data) {
		t.Fatalf("%s is not recognised as a published nodes file", file)
	}
	c, w, err := parse(data, file, noEnv, nil)
	if err != nil {
		t.Fatalf("%s:\n%v", file, err)
	}
	var ws []string
	for _, x := range w {
		ws = append(ws, x.String())
	}
	return c, ws
}

func fieldsOf(w DataSetWriter) string {
	var s []string
	for _, f := range w.Fields {
		s = append(s, f.Name+"="+f.Node)
	}
	return strings.Join(s, ", ")
}

func TestPublishedNodesBasic(t *testing.T) {
	c, w := loadPN(t, "testdata/pn_basic.json")
	if len(w) != 0 {
		t.Errorf("warnings %q", w)
	}
	if len(c.Endpoints) != 1 || len(c.WriterGroups) != 1 {
		t.Fatalf("%d endpoints, %d groups", len(c.Endpoints), len(c.WriterGroups))
	}
	e := c.Endpoints[0]
	if e.Name != "testserver_62541" || e.URL != "opc.tcp://testserver:62541/Quickstarts/ReferenceServer" ||
		e.SecurityMode != "SignAndEncrypt" || e.SecurityPolicy != SecurityBest || e.Identity.Type != IdentityAnonymous {
		t.Errorf("endpoint %+v", e)
	}
	g := c.WriterGroups[0]
	f := g.Writers[0].Fields[0]
	if g.Endpoint != e.Name || g.PublishingInterval.D() != 5*time.Second || f.Name != "Current time" || f.Node != "i=2258" ||
		f.SamplingInterval.D() != 2*time.Second || f.QueueSize != 6 {
		t.Errorf("group %+v field %+v", g, f)
	}
}

func TestPublishedNodes29(t *testing.T) {
	c, w := loadPN(t, "testdata/pn_2.9.json")
	wantWarn := []string{
		"testdata/pn_2.9.json:24:5: [1].OpcAuthenticationPassword: inline password; in a YAML configuration it can come from a file or the environment ({file: …}, {env: …})",
		`testdata/pn_2.9.json:37:5: [2]: writer group "Asset0" is also used with another endpoint or security: this one becomes writer group "Asset0_2" (one endpoint per group)`,
		`testdata/pn_2.9.json:52:5: [3]: writer group "win10iot_51210" has writers with publishing interval 4s besides 1s: they become writer group "win10iot_51210_4s" (one subscription per group)`,
	}
	if strings.Join(w, "\n") != strings.Join(wantWarn, "\n") {
		t.Errorf("warnings\n%s\nwant\n%s", strings.Join(w, "\n"), strings.Join(wantWarn, "\n"))
	}
	// Entries 0 and 2 share endpoint and security; entry 1 has its own
	// (security and user); entry 3 another server.
	var eps []string
	for _, e := range c.Endpoints {
		eps = append(eps, e.Name+" "+e.SecurityPolicy+"/"+e.SecurityMode+" "+e.Identity.Type)
	}
	if got := strings.Join(eps, "; "); got != "plc1.example_4840 None/None anonymous; plc1.example_4840_2 best/SignAndEncrypt username; win10iot_51210 best/SignAndEncrypt anonymous" {
		t.Errorf("endpoints: %s", got)
	}
	if pw := c.Endpoints[1].Identity.Password.Reveal(); pw != "password" || c.Endpoints[1].Identity.Username != "username" {
		t.Errorf("credentials not taken over")
	}
	type grp struct{ name, ep, interval, writers string }
	var got []grp
	for _, g := range c.WriterGroups {
		var ws []string
		for _, w := range g.Writers {
			ws = append(ws, w.Name+"{"+fieldsOf(w)+"}")
		}
		got = append(got, grp{g.Name, g.Endpoint, g.PublishingInterval.String(), strings.Join(ws, " ")})
	}
	want := []grp{
		{"plc1.example_4840", "plc1.example_4840", "5s", "default{i=2258=i=2258}"},
		{"Asset0", "plc1.example_4840_2", "5s", `DataFlow0{ns=2;s=Siemens S7 "TCP".PLC_1.Motor_Simulation.M1.Motor_Drehzahl=ns=2;s=Siemens S7 "TCP".PLC_1.Motor_Simulation.M1.Motor_Drehzahl}`},
		{"Asset0_2", "plc1.example_4840", "5s", "DataFlow1{StepUp=nsu=http://microsoft.com/Opc/OpcPlc/;s=StepUp}"},
		{"win10iot_51210", "win10iot_51210", "1s", "default{nsu=http://opcfoundation.org/UA/;i=2258=nsu=http://opcfoundation.org/UA/;i=2258, nsu=http://opcfoundation.org/UA/;i=2258_2=nsu=http://opcfoundation.org/UA/;i=2258}"},
		{"win10iot_51210_4s", "win10iot_51210", "4s", "default{nsu=http://opcfoundation.org/UA/;i=2258=nsu=http://opcfoundation.org/UA/;i=2258}"},
	}
	if len(got) != len(want) {
		t.Fatalf("groups %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("group %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	f0 := c.WriterGroups[0].Writers[0].Fields[0]
	if f0.SamplingInterval.D() != time.Second || f0.Heartbeat.D() != time.Hour {
		t.Errorf("ms sampling and seconds heartbeat: %+v", f0)
	}
	f1 := c.WriterGroups[1].Writers[0].Fields[0]
	if f1.SamplingInterval.D() != 2*time.Second || f1.Heartbeat.D() != time.Minute || f1.QueueSize != 10 || f1.Trigger != TriggerStatusValueTimestamp {
		t.Errorf("timespans, queue, trigger: %+v", f1)
	}
}

func TestPublishedNodesEvents(t *testing.T) {
	c, w := loadPN(t, "testdata/pn_events.json")
	wantWarn := []string{
		"testdata/pn_events.json:23:45: [1].OpcNodes[0].EventFilter.SelectClauses[0].DataSetClassFieldId: DataSetClassFieldId is not supported; ignored",
		"testdata/pn_events.json:24:45: [1].OpcNodes[0].EventFilter.SelectClauses[1].DataSetClassFieldId: DataSetClassFieldId is not supported; ignored",
		"testdata/pn_events.json:25:15: [1].OpcNodes[0].EventFilter.SelectClauses[2].TypeDefinitionId: ns=2;i=235: select clauses are taken relative to BaseEventType",
		"testdata/pn_events.json:25:49: [1].OpcNodes[0].EventFilter.SelectClauses[2].DataSetClassFieldId: DataSetClassFieldId is not supported; ignored",
		"testdata/pn_events.json:26:15: [1].OpcNodes[0].EventFilter.SelectClauses[3].TypeDefinitionId: nsu=http://opcfoundation.org/Quickstarts/SimpleEvents;i=235: select clauses are taken relative to BaseEventType",
		`testdata/pn_events.json:26:113: [1].OpcNodes[0].EventFilter.SelectClauses[3].BrowsePath: "http://opcfoundation.org/Quickstarts/SimpleEvents#CurrentStep" names its namespace by URI, which select clauses here cannot: use <index>:<name>; this clause is ignored`,
		"testdata/pn_events.json:44:9: [2].OpcNodes[0].ConditionHandling: ConditionHandling is not supported; ignored",
	}
	if strings.Join(w, "\n") != strings.Join(wantWarn, "\n") {
		t.Errorf("warnings\n%s\nwant\n%s", strings.Join(w, "\n"), strings.Join(wantWarn, "\n"))
	}
	simple := c.WriterGroups[0].Writers[0].Fields[0]
	if simple.Events == nil || simple.Events.OfType != "ns=2;i=235" || len(simple.Events.Select) != 8 || simple.Name != "SimpleEventServerEvents" {
		t.Errorf("simple filter: %+v %+v", simple, simple.Events)
	}
	adv := c.WriterGroups[0].Writers[1]
	if adv.Name != "Advanced" || adv.Fields[0].Events == nil || strings.Join(adv.Fields[0].Events.Select, ",") != "EventId,Message,2:CycleId" || adv.Fields[0].Events.OfType != "ns=2;i=235" {
		t.Errorf("advanced filter: %+v %+v", adv, adv.Fields[0].Events)
	}
	if cond := c.WriterGroups[1].Writers[0].Fields[0]; cond.Events == nil || cond.Events.OfType != "i=2915" {
		t.Errorf("condition node: %+v", cond)
	}
}

func TestPublishedNodesPubSub(t *testing.T) {
	c, w := loadPN(t, "testdata/pn_pubsub.json")
	wantWarn := []string{
		"testdata/pn_pubsub.json:14:5: [0].BatchSize: BatchSize is not supported; ignored",
		"testdata/pn_pubsub.json:15:5: [0].DataSetExtensionFields: DataSetExtensionFields is not supported; ignored",
		`testdata/pn_pubsub.json:16:5: [0].Frobnicate: unknown key "Frobnicate"; ignored`,
		"testdata/pn_pubsub.json:19:86: [0].OpcNodes[1].DeadbandValue: 150 is not from 0 to 100: clamped to 100, as OPC Publisher does",
		"testdata/pn_pubsub.json:19:135: [0].OpcNodes[1].SkipFirst: SkipFirst is not supported; ignored",
	}
	if strings.Join(w, "\n") != strings.Join(wantWarn, "\n") {
		t.Errorf("warnings\n%s\nwant\n%s", strings.Join(w, "\n"), strings.Join(wantWarn, "\n"))
	}
	e := c.Endpoints[0]
	if e.SecurityPolicy != "http://opcfoundation.org/UA/SecurityPolicy#Basic256Sha256" || e.SecurityMode != "SignAndEncrypt" {
		t.Errorf("explicit security overrides UseSecurity: %+v", e)
	}
	g := c.WriterGroups[0]
	if g.Name != "Line1" || g.PublishingInterval.D() != 500*time.Millisecond || g.KeyFrameCount != 3 || g.Format != FormatPart14 || g.Writers[0].Name != "Press" {
		t.Errorf("group %+v", g)
	}
	fs := g.Writers[0].Fields
	if got := fieldsOf(g.Writers[0]); got != "Speed=ns=3;s=FastUInt1, Slow=nsu=http://microsoft.com/Opc/OpcPlc/;s=SlowUInt1, Speed_2=ns=3;s=FastUInt1" {
		t.Errorf("fields %s", got)
	}
	if fs[0].Deadband != (Deadband{DeadbandAbsolute, 0.5}) || fs[0].QueueSize != 5 || *fs[0].DiscardOldest || !*fs[1].DiscardOldest || fs[1].Deadband != (Deadband{DeadbandPercent, 100}) {
		t.Errorf("monitoring settings %+v %+v", fs[0], fs[1])
	}
}

func TestPublishedNodesDetection(t *testing.T) {
	for _, tc := range []struct {
		data string
		pn   bool
	}{
		{`[{"EndpointUrl": "opc.tcp://a:1"}]`, true},
		{"// comment\n[ /* c */ {\"OpcNodes\": [], \"endpointurl\": \"opc.tcp://a:1\"}]", true},
		{"\xef\xbb\xbf[{\"EndpointUrl\": \"opc.tcp://a:1\"}]", true},
		{`[{"Url": "opc.tcp://a:1"}]`, false},
		{`[]`, false},
		{"endpoints: []", false},
		{`{"EndpointUrl": "x"}`, false},
	} {
		if got := isPublishedNodes([]byte(tc.data)); got != tc.pn {
			t.Errorf("%q: %v, want %v", tc.data, got, tc.pn)
		}
	}
	// Comments are blanked in place: line and column stay right, strings stay whole.
	in := "[ // a\n  {\"A\": \"x//y\", /* b\n c */ \"B\": 1}]"
	out := string(stripJSONComments([]byte(in)))
	if len(out) != len(in) || strings.Count(out, "\n") != 2 || !strings.Contains(out, `"x//y"`) || strings.Contains(out, "/*") || strings.Contains(out, "// a") {
		t.Errorf("stripped %q", out)
	}
}

func TestPublishedNodesErrors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`[{"EndpointUrl": "opc.tcp://a:1", "OpcAuthenticationMode": "Certificate", "OpcNodes": [{"Id": "i=1"}]}]`,
			"pn.json:1:60: [0].OpcAuthenticationMode: Certificate names a certificate in OPC Publisher's user store, which this gateway does not have: use a YAML configuration with identity type x509, certFile and keyFile"},
		{`[{"EndpointUrl": "opc.tcp://a:1", "UseSecurity": "maybe", "OpcNodes": [{"Id": "i=1"}]}]`,
			"pn.json:1:50: [0].UseSecurity: want true or false, got a string"},
		{`[{"EndpointUrl": "opc.tcp://a:1", "OpcNodes": [{"DisplayName": "x"}]}]`,
			"pn.json:1:49: [0].OpcNodes[0].Id: missing: Id or ExpandedNodeId"},
		{`[{"EndpointUrl": "opc.tcp://a:1", "OpcNodes": [{"Id": "i=1", "OpcSamplingIntervalTimespan": "soon"}]}]`,
			`pn.json:1:93: [0].OpcNodes[0].OpcSamplingIntervalTimespan: "soon" is not a duration (want e.g. "1s", "250ms", or a number of milliseconds)`},
		{`[{"EndpointUrl": "opc.tcp://a:1", "OpcNodes": [{"Id": "i=1", "DataChangeTrigger": "Value"}]}]`,
			`pn.json:1:83: [0].OpcNodes[0].DataChangeTrigger: "Value": want Status, StatusValue or StatusValueTimestamp`},
		{`[{"EndpointUrl": "opc.tcp://a:1", "OpcNodes": [{"Id": "ns=x;i=1"}]}]`,
			`pn.json:1:49: writerGroups[0].writers[0].fields[0].node: "ns=x;i=1" is not a node id (want e.g. ns=1;s=Demo.Counter, i=2258 or nsu=<uri>;s=Name)`},
		{`[{"EndpointUrl": "http://a:1", "OpcNodes": [{"Id": "i=1"}]}]`,
			`pn.json:1:3: endpoints[0].url: "http://a:1": want opc.tcp://host:port[/path] or embedded:sim`},
	} {
		_, _, err := parse([]byte(tc.json), "pn.json", noEnv, nil)
		if err == nil {
			t.Errorf("%s: no error", tc.json)
			continue
		}
		if got := issueLines(t, err); len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.json, got, tc.want)
		}
	}
}

func TestIIoTNodeID(t *testing.T) {
	for in, want := range map[string]string{
		"http://opcfoundation.org/UA/#i=2258": "nsu=http://opcfoundation.org/UA/;i=2258",
		"urn:a;b#s=X":                         "nsu=urn:a%3Bb;s=X",
		"ns=2;s=A#B":                          "ns=2;s=A#B",
		"nsu=urn:x;s=Y":                       "nsu=urn:x;s=Y",
		"i=85":                                "i=85",
	} {
		if got := iiotNodeID(in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
