package publishednodes

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
)

// load reads a published nodes file through config.Parse, as Load does.
func load(t *testing.T, file string) (*config.Config, []string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !IsFile(data) {
		t.Fatalf("%s is not recognised as a published nodes file", file)
	}
	c, w, err := config.Parse(data, file)
	if err != nil {
		t.Fatalf("%s:\n%v", file, err)
	}
	var ws []string
	for _, x := range w {
		ws = append(ws, x.String())
	}
	return c, ws
}

func fieldsOf(w config.DataSetWriter) string {
	var s []string
	for _, f := range w.Fields {
		s = append(s, f.Name+"="+f.Node)
	}
	return strings.Join(s, ", ")
}

func checkWarnings(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPublishedNodesBasic(t *testing.T) {
	c, w := load(t, "testdata/pn_basic.json")
	checkWarnings(t, w, nil)
	if len(c.Endpoints) != 1 || len(c.WriterGroups) != 1 {
		t.Fatalf("%d endpoints, %d groups", len(c.Endpoints), len(c.WriterGroups))
	}
	e := c.Endpoints[0]
	if e.Name != "testserver_62541" || e.URL != "opc.tcp://testserver:62541/Quickstarts/ReferenceServer" ||
		e.SecurityMode != "SignAndEncrypt" || e.SecurityPolicy != config.SecurityBest || e.Identity.Type != config.IdentityAnonymous {
		t.Errorf("endpoint %+v", e)
	}
	g := c.WriterGroups[0]
	f := g.Writers[0].Fields[0]
	if g.Endpoint != e.Name || g.PublishingInterval.D() != 5*time.Second || g.Writers[0].Name != "5000" || f.Name != "Current time" || f.Node != "i=2258" ||
		f.SamplingInterval.D() != 2*time.Second || f.QueueSize != 6 {
		t.Errorf("group %+v field %+v", g, f)
	}
}

func TestPublishedNodes29(t *testing.T) {
	c, w := load(t, "testdata/pn_2.9.json")
	checkWarnings(t, w, []string{
		"testdata/pn_2.9.json:24:5: [1].OpcAuthenticationPassword: inline password; in a YAML configuration it can come from a file or the environment ({file: …}, {env: …})",
		`testdata/pn_2.9.json:37:5: [2]: writer group "Asset0" is also used with another endpoint or security: this one becomes writer group "Asset0_2" (one endpoint per group)`,
		`testdata/pn_2.9.json:52:5: [3]: writer group "win10iot_51210" has writers with publishing interval 4s besides 1s: they become writer group "win10iot_51210_4s" (one subscription per group)`,
		`testdata/pn_2.9.json:57:9: [3].OpcNodes[2]: node nsu=http://opcfoundation.org/UA/;i=2258 is field "nsu=http://opcfoundation.org/UA/;i=2258" of writer "1000" already: these settings replace the earlier ones`,
	})
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
		{"plc1.example_4840", "plc1.example_4840", "5s", "5000{i=2258=i=2258}"},
		{"Asset0", "plc1.example_4840_2", "5s", `DataFlow0{ns=2;s=Siemens S7 "TCP".PLC_1.Motor_Simulation.M1.Motor_Drehzahl=ns=2;s=Siemens S7 "TCP".PLC_1.Motor_Simulation.M1.Motor_Drehzahl}`},
		{"Asset0_2", "plc1.example_4840", "5s", "DataFlow1{StepUp=nsu=http://microsoft.com/Opc/OpcPlc/;s=StepUp}"},
		{"win10iot_51210", "win10iot_51210", "1s", "1000{nsu=http://opcfoundation.org/UA/;i=2258=nsu=http://opcfoundation.org/UA/;i=2258}"},
		{"win10iot_51210_4s", "win10iot_51210", "4s", "4000{nsu=http://opcfoundation.org/UA/;i=2258=nsu=http://opcfoundation.org/UA/;i=2258}"},
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
	if f1.SamplingInterval.D() != 2*time.Second || f1.Heartbeat.D() != time.Minute || f1.QueueSize != 10 || f1.Trigger != config.TriggerStatusValueTimestamp {
		t.Errorf("timespans, queue, trigger: %+v", f1)
	}
	// The node given again took the later settings.
	if f := c.WriterGroups[3].Writers[0].Fields[0]; f.SamplingInterval == nil || f.SamplingInterval.D() != time.Second {
		t.Errorf("replaced node: %+v", f)
	}
}

func TestPublishedNodesEvents(t *testing.T) {
	c, w := load(t, "testdata/pn_events.json")
	checkWarnings(t, w, []string{
		"testdata/pn_events.json:23:45: [1].OpcNodes[0].EventFilter.SelectClauses[0].DataSetClassFieldId: DataSetClassFieldId is not supported; ignored",
		"testdata/pn_events.json:24:45: [1].OpcNodes[0].EventFilter.SelectClauses[1].DataSetClassFieldId: DataSetClassFieldId is not supported; ignored",
		"testdata/pn_events.json:25:15: [1].OpcNodes[0].EventFilter.SelectClauses[2].TypeDefinitionId: ns=2;i=235: select clauses are taken relative to BaseEventType",
		"testdata/pn_events.json:25:49: [1].OpcNodes[0].EventFilter.SelectClauses[2].DataSetClassFieldId: DataSetClassFieldId is not supported; ignored",
		"testdata/pn_events.json:26:15: [1].OpcNodes[0].EventFilter.SelectClauses[3].TypeDefinitionId: nsu=http://opcfoundation.org/Quickstarts/SimpleEvents;i=235: select clauses are taken relative to BaseEventType",
		`testdata/pn_events.json:26:113: [1].OpcNodes[0].EventFilter.SelectClauses[3].BrowsePath: "http://opcfoundation.org/Quickstarts/SimpleEvents#CurrentStep" names its namespace by URI, which select clauses here cannot: use <index>:<name>; this clause is ignored`,
		"testdata/pn_events.json:44:9: [2].OpcNodes[0].ConditionHandling: ConditionHandling is not supported; ignored",
	})
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
	c, w := load(t, "testdata/pn_pubsub.json")
	checkWarnings(t, w, []string{
		"testdata/pn_pubsub.json:9:5: [0].DataSetName: DataSetName is not supported; ignored",
		"testdata/pn_pubsub.json:14:5: [0].BatchSize: BatchSize is not supported; ignored",
		"testdata/pn_pubsub.json:15:5: [0].DataSetExtensionFields: DataSetExtensionFields is not supported; ignored",
		`testdata/pn_pubsub.json:16:5: [0].Frobnicate: unknown key "Frobnicate"; ignored`,
		"testdata/pn_pubsub.json:19:130: [0].OpcNodes[1].DeadbandValue: 150 is not from 0 to 100: clamped to 100, as OPC Publisher does",
		"testdata/pn_pubsub.json:19:135: [0].OpcNodes[1].SkipFirst: SkipFirst is not supported; ignored",
	})
	e := c.Endpoints[0]
	if e.SecurityPolicy != "http://opcfoundation.org/UA/SecurityPolicy#Basic256Sha256" || e.SecurityMode != "SignAndEncrypt" {
		t.Errorf("explicit security overrides UseSecurity: %+v", e)
	}
	g := c.WriterGroups[0]
	if g.Name != "Line1" || g.PublishingInterval.D() != 500*time.Millisecond || g.KeyFrameCount != 3 || g.Format != config.FormatPart14 || g.Writers[0].Name != "Press" {
		t.Errorf("group %+v", g)
	}
	fs := g.Writers[0].Fields
	if got := fieldsOf(g.Writers[0]); got != "Speed=ns=3;s=FastUInt1, Slow=nsu=http://microsoft.com/Opc/OpcPlc/;s=SlowUInt1, Speed_2=ns=3;s=FastUInt2" {
		t.Errorf("fields %s", got)
	}
	if fs[0].Deadband != (config.Deadband{Type: config.DeadbandAbsolute, Value: 0.5}) || fs[0].QueueSize != 5 || *fs[0].DiscardOldest || !*fs[1].DiscardOldest ||
		fs[1].Deadband != (config.Deadband{Type: config.DeadbandPercent, Value: 100}) {
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
		if got := IsFile([]byte(tc.data)); got != tc.pn {
			t.Errorf("%q: %v, want %v", tc.data, got, tc.pn)
		}
	}
	// Comments are blanked in place: line and column stay right, strings stay whole.
	in := "[ // a\n  {\"A\": \"x//y\", /* b\n c */ \"B\": 1}]"
	out := string(stripComments([]byte(in)))
	if len(out) != len(in) || strings.Count(out, "\n") != 2 || !strings.Contains(out, `"x//y"`) || strings.Contains(out, "/*") || strings.Contains(out, "// a") {
		t.Errorf("stripped %q", out)
	}
	// Trailing commas, as OPC Publisher's reader takes them, a BOM, and a
	// column counted in characters.
	c, _, err := config.Parse([]byte("\xef\xbb\xbf[{\"EndpointUrl\": \"opc.tcp://a:1\", \"OpcNodes\": [{\"Id\": \"i=1\", \"DisplayName\": \"Drehzahl \u00fc\"},],},\n]"), "pn.json")
	if err != nil || len(c.WriterGroups) != 1 || c.WriterGroups[0].Writers[0].Fields[0].Name != "Drehzahl ü" {
		t.Errorf("trailing commas: %v", err)
	}
	_, _, err = config.Parse([]byte(`[{"EndpointUrl": "opc.tcp://a:1", "DataSetWriterId": "ü", "OpcNodes": [{"Id": "i=1", "QueueSize": "x"}]}]`), "pn.json")
	if got := err.Error(); got != "pn.json:1:99: [0].OpcNodes[0].QueueSize: want a number, got a string" {
		t.Errorf("column: %s", got)
	}
}

func TestPublishedNodesErrors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`[{"EndpointUrl": "opc.tcp://a:1", "OpcAuthenticationMode": "Certificate", "OpcNodes": [{"Id": "i=1"}]}]`,
			"pn.json:1:60: [0].OpcAuthenticationMode: Certificate names a certificate in OPC Publisher's user store, which this gateway does not have: give the endpoint an identity of type x509 with certFile and keyFile (in YAML, or through /api/v1/endpoints)"},
		{`[{"EndpointUrl": "opc.tcp://a:1", "UseSecurity": "maybe", "OpcNodes": [{"Id": "i=1"}]}]`,
			"pn.json:1:50: [0].UseSecurity: want true or false, got a string"},
		{`[{"EndpointUrl": "opc.tcp://a:1", "OpcNodes": [{"DisplayName": "x"}]}]`,
			"pn.json:1:49: [0].OpcNodes[0].Id: missing: Id or ExpandedNodeId"},
		{`[{"EndpointUrl": "opc.tcp://a:1", "OpcNodes": [{"Id": "i=1", "OpcSamplingIntervalTimespan": "soon"}]}]`,
			`pn.json:1:93: [0].OpcNodes[0].OpcSamplingIntervalTimespan: "soon" is not a TimeSpan (want [d.]hh:mm:ss[.fff])`},
		{`[{"EndpointUrl": "opc.tcp://a:1", "OpcNodes": [{"Id": "i=1", "DataChangeTrigger": "Value"}]}]`,
			`pn.json:1:83: [0].OpcNodes[0].DataChangeTrigger: "Value": want Status, StatusValue or StatusValueTimestamp`},
		{`[{"EndpointUrl": "opc.tcp://a:1", "OpcNodes": [{"Id": "ns=x;i=1"}]}]`,
			`pn.json:1:55: [0].OpcNodes[0].Id: "ns=x;i=1" is not a node id (want e.g. ns=1;s=Demo.Counter, i=2258 or nsu=<uri>;s=Name)`},
		{`[{"EndpointUrl": "http://a:1", "OpcNodes": [{"Id": "i=1"}]}]`,
			`pn.json:1:18: [0].EndpointUrl: "http://a:1": want opc.tcp://host:port[/path]`},
		{`[{"EndpointUrl": "opc.tcp://a:1", "OpcNodes": [{"Id": "i=1", "QueueSize": -1}]}]`,
			`pn.json:1:75: [0].OpcNodes[0].QueueSize: -1: want 0 to 10000`},
		{`[{"EndpointUrl": "opc.tcp://a:1", "OpcAuthenticationMode": "UsernamePassword", "OpcNodes": [{"Id": "i=1"}]}]`,
			`pn.json:1:3: [0].OpcAuthenticationUsername: missing: UsernamePassword needs a user name`},
		{"[{\"EndpointUrl\": \"opc.tcp://a:1\",\n \"OpcNodes\": [{\"Id\": \"i=1\"}}]",
			`pn.json:2:28: malformed JSON: invalid character '}' after array element`},
		{`[{"EndpointUrl": "opc.tcp://a:1", "OpcNodes": {"Id": "i=1"}}]`,
			`pn.json:1:47: [0].OpcNodes: want a JSON array, got an object`},
	} {
		_, _, err := config.Parse([]byte(tc.json), "pn.json")
		if err == nil {
			t.Errorf("%s: no error", tc.json)
			continue
		}
		var got []string
		for _, is := range config.Issues(err) {
			got = append(got, is.String())
		}
		if len(got) != 1 || got[0] != tc.want {
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

// TestTimeSpan: the members' TimeSpan form, read with the configuration's
// parser; milliseconds and seconds by member.
func TestTimeSpan(t *testing.T) {
	for in, want := range map[string]time.Duration{"00:00:01": time.Second, "00:00:00.250": 250 * time.Millisecond,
		"01:02:03": time.Hour + 2*time.Minute + 3*time.Second, "1.00:00:00": 24 * time.Hour} {
		if got, err := timeSpan(in); err != nil || got != want {
			t.Errorf("%s: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"", "1s", "00:61:00", "-1:00:00", "a.00:00:00", "00:00:60"} {
		if _, err := timeSpan(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	hb, ms := 90.0, 1500.0
	r, errs, _ := Resolve(&Entry{EndpointURL: "opc.tcp://a:1", DataSetPublishingInterval: &ms,
		OpcNodes: []OpcNode{{ID: "i=1", HeartbeatInterval: &hb}, {ID: "i=2", HeartbeatIntervalTimespan: "00:00:02", HeartbeatInterval: &hb}}})
	if len(errs) != 0 || r.Interval != 1500*time.Millisecond || r.Nodes[0].Field.Heartbeat.D() != 90*time.Second || r.Nodes[1].Field.Heartbeat.D() != 2*time.Second {
		t.Errorf("%v %+v", errs, r)
	}
}

// TestPublishAgain: publishing the entries read back from a configuration
// changes nothing, and the operations of the API find what the file made.
func TestPublishAgain(t *testing.T) {
	c, _ := load(t, "testdata/pn_2.9.json")
	before := c.String()
	for _, e := range Entries(c, true) {
		r, errs, _ := Resolve(&e)
		if e.OpcAuthenticationMode == "UsernamePassword" {
			continue // the password is not given back
		}
		if len(errs) != 0 {
			t.Fatalf("entry %+v: %v", e, errs)
		}
		Publish(c, r)
	}
	c.ApplyDefaults()
	if after := c.String(); after != before {
		t.Errorf("publishing the entries again changed the configuration:\n%s\nwas\n%s", after, before)
	}
	// The group split by interval is found by its OPC Publisher name.
	r, _, _ := Resolve(&Entry{EndpointURL: "opc.tcp://win10iot:51210/UA/SampleServer", UseSecurity: ptr(true), DataSetWriterGroup: "win10iot_51210"})
	if gs := r.Groups(c, r.FindEndpoint(c)); len(gs) != 2 {
		t.Errorf("groups of win10iot_51210: %v", gs)
	}
	r.Nodes = []Node{{Field: config.Field{Node: "nsu=http://opcfoundation.org/UA/;i=2258"}}}
	if err := Unpublish(c, r); err != nil {
		t.Fatal(err)
	}
	for _, g := range c.WriterGroups {
		if strings.HasPrefix(g.Name, "win10iot") {
			t.Errorf("group %s left after its last node was unpublished", g.Name)
		}
	}
	r.Nodes[0].Field.Node = "i=1"
	if err := Unpublish(c, r); !errors.Is(err, ErrNotFound) {
		t.Errorf("unpublish from a group that is gone: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }
