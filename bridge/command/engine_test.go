package command

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

var (
	hmi   = Caller{Transport: TransportMQTT, Sink: "mqtt", ID: "hmi-1"}
	other = Caller{Transport: TransportMQTT, Sink: "mqtt", ID: "intruder"}
)

const (
	int16Node  = "ns=1;s=Demo.Static.Int16"
	doubleNode = "ns=1;s=Demo.Static.Double"
	floatArr   = "ns=1;s=Demo.Static.FloatArray"
)

func writeRules() []config.CommandRule {
	return []config.CommandRule{{
		Callers: []string{"mqtt:hmi-*"},
		Write:   []config.CommandTarget{{Group: "line", Writer: "w", Field: "Level"}, {Endpoint: "sim", Node: "ns=1;s=Demo.Static.*"}},
		Read:    []config.CommandTarget{{Group: "line"}},
		Call:    []config.CommandMethod{{Endpoint: "sim", Object: "ns=1;s=Demo.Methods", Method: "nsu=urn:uagate:sim:nodes;s=Demo.Methods.*"}},
	}}
}

func newWriteFixture(t *testing.T) *fixture {
	return newFixture(t, false, func(url string) *config.Config {
		return testConfig(url, map[string]string{"Level": int16Node, "Speed": doubleNode, "Setpoint": server.NodeSetpoint}, writeRules()...)
	})
}

// TestWriteTypes: a JSON number becomes the node's type; what does not fit
// is refused and changes nothing.
func TestWriteTypes(t *testing.T) {
	f := newWriteFixture(t)
	r := f.do(hmi, `{"requestId":"1","op":"write","group":"line","writer":"w","field":"Level","value":7}`)
	wantGood(t, "write 7 to Int16", r)
	if v := f.value(int16Node); v.Type() != ua.TypeInt16 || v.Int16() != 7 {
		t.Fatalf("read back %v", v)
	}
	if r.Target == nil || r.Target.Type != "Int16" || r.Target.Node != int16Node || string(r.OldValue) != `{"UaType":4,"Value":0}` ||
		string(r.Value) != `{"UaType":4,"Value":7}` {
		t.Fatalf("response %s", r.Marshal())
	}
	for _, c := range []struct{ name, value, typ string }{
		{"fraction", `3.5`, ""},
		{"out of range", `70000`, ""},
		{"string for a number", `"7"`, ""},
		{"boolean", `true`, ""},
		{"array for a scalar", `[1,2]`, ""},
		{"Double Variant", `{"UaType":11,"Value":7}`, ""},
		{"asserted type", `7`, "Int32"},
	} {
		req := fmt.Sprintf(`{"requestId":"m-%s","op":"write","group":"line","writer":"w","field":"Level","value":%s`, c.name, c.value)
		if c.typ != "" {
			req += `,"type":"` + c.typ + `"`
		}
		r := f.do(hmi, req+"}")
		wantRefusal(t, c.name, r, KindTypeMismatch, ua.StatusBadTypeMismatch)
	}
	if v := f.value(int16Node); v.Int16() != 7 {
		t.Fatalf("a refused write changed the value: %v", v)
	}
	// A Variant of the right type, a raw node, an array, a Double from an
	// integral number.
	wantGood(t, "Int16 Variant", f.do(hmi, `{"requestId":"v","op":"write","endpoint":"sim","node":"`+int16Node+`","value":{"UaType":4,"Value":-3}}`))
	wantGood(t, "Double", f.do(hmi, `{"requestId":"d","op":"write","group":"line","writer":"w","field":"Speed","value":2}`))
	if v := f.value(doubleNode); v.Type() != ua.TypeDouble || v.Double() != 2 {
		t.Fatalf("Double read back %v", v)
	}
	wantGood(t, "Float array", f.do(hmi, `{"requestId":"a","op":"write","endpoint":"sim","node":"`+floatArr+`","value":[1.5,2.5]}`))
	if v := f.value(floatArr); !v.IsArray() || v.Type() != ua.TypeFloat || v.ArrayLen() != 2 {
		t.Fatalf("Float array read back %v", v)
	}
	wantRefusal(t, "string in a Float array", f.do(hmi, `{"requestId":"a2","op":"write","endpoint":"sim","node":"`+floatArr+`","value":[1.5,"x"]}`),
		KindTypeMismatch, ua.StatusBadTypeMismatch)
}

// TestDenied: a caller no rule names, a target no rule lists: refused with
// the reason, nothing written.
func TestDenied(t *testing.T) {
	f := newWriteFixture(t)
	r := f.do(other, `{"requestId":"1","op":"write","group":"line","writer":"w","field":"Level","value":9}`)
	wantRefusal(t, "unknown caller", r, KindDenied, ua.StatusBadUserAccessDenied)
	if !strings.Contains(r.Error.Message, "mqtt/mqtt:intruder") {
		t.Fatalf("the reason names no caller: %s", r.Error.Message)
	}
	r = f.do(hmi, `{"requestId":"2","op":"write","endpoint":"sim","node":"`+server.NodeSetpoint+`","value":9}`)
	wantRefusal(t, "node not listed", r, KindDenied, ua.StatusBadUserAccessDenied)
	r = f.do(hmi, `{"requestId":"3","op":"write","group":"line","writer":"w","field":"Setpoint","value":9}`)
	wantRefusal(t, "field not listed", r, KindDenied, ua.StatusBadUserAccessDenied)
	if !strings.Contains(r.Error.Message, "line/w/Setpoint") {
		t.Fatalf("the reason names no field: %s", r.Error.Message)
	}
	r = f.do(hmi, `{"requestId":"4","op":"call","endpoint":"sim","object":"i=2253","method":"i=11492","arguments":[1]}`)
	wantRefusal(t, "method not listed", r, KindDenied, ua.StatusBadUserAccessDenied)
	if v := f.value(server.NodeSetpoint); v.Double() != 0 {
		t.Fatalf("a denied write took effect: %v", v)
	}
	if v := f.value(int16Node); v.Int16() != 0 {
		t.Fatalf("a denied write took effect: %v", v)
	}
	st := f.e.Stats()[transportIndex(TransportMQTT)]
	if st.Denied != 4 || st.Requests != 4 || st.Good != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestUnknownTargets: names the configuration does not have, nodes the
// server does not have, malformed requests.
func TestUnknownTargets(t *testing.T) {
	f := newWriteFixture(t)
	for _, c := range []struct {
		name, req string
		kind      string
		status    ua.StatusCode
	}{
		{"group", `{"requestId":"1","op":"write","group":"nope","writer":"w","field":"Level","value":1}`, KindUnknownTarget, ua.StatusBadNodeIdUnknown},
		{"writer", `{"requestId":"2","op":"write","group":"line","writer":"nope","field":"Level","value":1}`, KindUnknownTarget, ua.StatusBadNodeIdUnknown},
		{"field", `{"requestId":"3","op":"write","group":"line","writer":"w","field":"nope","value":1}`, KindUnknownTarget, ua.StatusBadNodeIdUnknown},
		{"endpoint", `{"requestId":"4","op":"write","endpoint":"nope","node":"ns=1;s=X","value":1}`, KindUnknownTarget, ua.StatusBadNodeIdUnknown},
		{"node at the server", `{"requestId":"5","op":"write","endpoint":"sim","node":"ns=1;s=Demo.Static.Nope","value":1}`, KindUnknownTarget, ua.StatusBadNodeIdUnknown},
		{"node id syntax", `{"requestId":"6","op":"write","endpoint":"sim","node":"ns=1;q=1","value":1}`, KindInvalid, ua.StatusBadNodeIdInvalid},
		{"no request id", `{"op":"write","group":"line","writer":"w","field":"Level","value":1}`, KindInvalid, ua.StatusBadInvalidArgument},
		{"no op", `{"requestId":"7","group":"line","writer":"w","field":"Level","value":1}`, KindInvalid, ua.StatusBadInvalidArgument},
		{"unknown member", `{"requestId":"8","op":"write","group":"line","writer":"w","field":"Level","valeu":1}`, KindInvalid, ua.StatusBadDecodingError},
		{"not JSON", `write Level 1`, KindInvalid, ua.StatusBadDecodingError},
		{"no value", `{"requestId":"9","op":"write","group":"line","writer":"w","field":"Level"}`, KindInvalid, ua.StatusBadInvalidArgument},
	} {
		wantRefusal(t, c.name, f.do(hmi, c.req), c.kind, c.status)
	}
	// The refusal of a request that cannot be decoded still names its id.
	if r := f.do(hmi, `{"requestId":"x1","op":"write","value":}`); r.RequestID != "x1" {
		t.Fatalf("the id of an undecodable request: %s", r.Marshal())
	}
	big := `{"requestId":"big","op":"write","group":"line","writer":"w","field":"Level","value":"` + strings.Repeat("x", config.DefaultCommandMaxPayload) + `"}`
	r := f.do(hmi, big)
	wantRefusal(t, "oversized", r, KindTooLarge, ua.StatusBadRequestTooLarge)
	if r.RequestID != "big" {
		t.Fatalf("oversized: the id is lost: %q", r.RequestID)
	}
}

// TestCallAndRead: arguments take the method's InputArguments types; a
// read is fresh.
func TestCallAndRead(t *testing.T) {
	f := newWriteFixture(t)
	r := f.do(hmi, `{"requestId":"1","op":"call","endpoint":"sim","object":"ns=1;s=Demo.Methods","method":"ns=1;s=Demo.Methods.Add","arguments":[1.5,2]}`)
	wantGood(t, "Add", r)
	if len(r.OutputArguments) != 1 || string(r.OutputArguments[0]) != `{"UaType":11,"Value":3.5}` {
		t.Fatalf("Add: %s", r.Marshal())
	}
	r = f.do(hmi, `{"requestId":"2","op":"call","group":"line","object":"ns=1;s=Demo.Methods","method":"ns=1;s=Demo.Methods.Multiply","arguments":[2.5,3]}`)
	wantRefusal(t, "Multiply 2.5", r, KindTypeMismatch, ua.StatusBadTypeMismatch)
	if len(r.InputArgumentResults) != 2 || r.InputArgumentResults[0].Symbol != "BadTypeMismatch" || !r.InputArgumentResults[1].Good() {
		t.Fatalf("argument results: %s", r.Marshal())
	}
	r = f.do(hmi, `{"requestId":"3","op":"call","endpoint":"sim","object":"ns=1;s=Demo.Methods","method":"ns=1;s=Demo.Methods.Multiply","arguments":[2]}`)
	wantRefusal(t, "Multiply with one argument", r, KindInvalid, ua.StatusBadArgumentsMissing)
	r = f.do(hmi, `{"requestId":"4","op":"call","endpoint":"sim","object":"ns=1;s=Demo.Methods","method":"ns=1;s=Demo.Methods.Fail","arguments":[2151350272]}`)
	if r.Error != nil || r.Status.Symbol != "BadNotWritable" {
		t.Fatalf("Fail: the server's status: %s", r.Marshal())
	}

	wantGood(t, "write", f.do(hmi, `{"requestId":"5","op":"write","group":"line","writer":"w","field":"Level","value":12}`))
	r = f.do(hmi, `{"requestId":"6","op":"read","group":"line","writer":"w","field":"Level"}`)
	wantGood(t, "read", r)
	if !strings.Contains(string(r.Value), `"Value":12`) || !strings.Contains(string(r.Value), `"UaType":4`) {
		t.Fatalf("read: %s", r.Marshal())
	}
	wantRefusal(t, "read of a node no rule lists", f.do(hmi, `{"requestId":"7","op":"read","endpoint":"sim","node":"i=2258"}`), KindDenied, ua.StatusBadUserAccessDenied)
}

// TestIdempotent: a request sent again within the window is answered with
// the first one's response and not run again.
func TestIdempotent(t *testing.T) {
	f := newWriteFixture(t)
	first := f.do(hmi, `{"requestId":"same","op":"write","group":"line","writer":"w","field":"Level","value":5}`)
	wantGood(t, "first", first)
	again := f.do(hmi, `{"requestId":"same","op":"write","group":"line","writer":"w","field":"Level","value":6}`)
	if !again.Duplicate || !again.Status.Good() || string(again.Value) != string(first.Value) {
		t.Fatalf("resent: %s", again.Marshal())
	}
	if v := f.value(int16Node); v.Int16() != 5 {
		t.Fatalf("the resent request ran: %v", v)
	}
	// Another caller's request with the same id is its own.
	f.e.SetConfig(testConfig(f.srv.URL(), map[string]string{"Level": int16Node}, config.CommandRule{
		Callers: []string{"mqtt:*"}, Write: []config.CommandTarget{{Group: "line"}}}))
	wantGood(t, "other caller", f.do(other, `{"requestId":"same","op":"write","group":"line","writer":"w","field":"Level","value":6}`))
	if v := f.value(int16Node); v.Int16() != 6 {
		t.Fatalf("another caller's request did not run: %v", v)
	}
	if st := f.e.Stats()[transportIndex(TransportMQTT)]; st.Duplicates != 1 || st.Good != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRateLimit: a burst beyond the caller's bucket is refused; the bucket
// refills with time; another caller has its own.
func TestRateLimit(t *testing.T) {
	f := newFixture(t, true, func(url string) *config.Config {
		rules := writeRules()
		rules[0].Rate = &config.CommandRate{PerSecond: 1, Burst: 3}
		rules = append(rules, config.CommandRule{Callers: []string{"nats:*"}, Read: []config.CommandTarget{{Group: "line"}}})
		return testConfig(url, map[string]string{"Level": int16Node}, rules...)
	})
	read := func(c Caller, id int) *Response {
		return f.do(c, fmt.Sprintf(`{"requestId":"%d","op":"read","group":"line","writer":"w","field":"Level"}`, id))
	}
	for i := range 3 {
		wantGood(t, "within the burst", read(hmi, i))
	}
	wantRefusal(t, "beyond the burst", read(hmi, 3), KindRateLimited, ua.StatusBadTooManyOperations)
	wantGood(t, "another caller", read(Caller{Transport: TransportNATS, Sink: "nats", ID: "x"}, 4))
	f.now.Add(time.Second)
	wantGood(t, "after a second", read(hmi, 5))
	wantRefusal(t, "and then", read(hmi, 6), KindRateLimited, ua.StatusBadTooManyOperations)
	// A rate-limited request is not remembered: sent again later, it runs.
	f.now.Add(time.Second)
	if r := read(hmi, 6); r.Duplicate || r.Error != nil {
		t.Fatalf("resent after the refusal: %s", r.Marshal())
	}
}

// TestBusyAndTimeout: a full queue answers busy at once; what waits past the
// endpoint's request timeout is answered timeout.
func TestBusyAndTimeout(t *testing.T) {
	f := newFixture(t, false, func(url string) *config.Config {
		cfg := testConfig(url, map[string]string{"Level": int16Node}, config.CommandRule{
			Callers: []string{"*:*"}, Read: []config.CommandTarget{{Group: "line"}}, Rate: &config.CommandRate{PerSecond: 1000, Burst: 1000}})
		cfg.Commands.QueueSize, cfg.Commands.Workers = 2, 1
		cfg.Endpoints[0].RequestTimeout = config.Duration(500 * time.Millisecond)
		return cfg
	})
	f.b.gate = make(chan struct{})
	// One in the worker, two queued, then busy (the worker may take the
	// first one a little later: submit until the queue refuses).
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []*Response
	var busy *Response
	for i := 0; busy == nil; i++ {
		if i == 10 {
			t.Fatal("the queue never filled")
		}
		ch := make(chan *Response, 1)
		wg.Add(1)
		f.e.Submit(hmi, &Request{RequestID: fmt.Sprint(i), Op: OpRead, Group: "line", Writer: "w", Field: "Level"}, func(r *Response) {
			if r.Error != nil && r.Error.Kind == KindBusy {
				ch <- r
			} else {
				mu.Lock()
				held = append(held, r)
				mu.Unlock()
			}
			wg.Done()
		})
		select {
		case busy = <-ch:
		default:
		}
	}
	wantRefusal(t, "full queue", busy, KindBusy, ua.StatusBadTooManyOperations)
	wg.Wait()                           // the gate is never opened: each times out
	if len(held) < 2 || len(held) > 3 { // the queue's two, and the worker's one when it took it in time
		t.Fatalf("%d held, want 2 or 3", len(held))
	}
	for i, r := range held {
		wantRefusal(t, fmt.Sprint("held ", i), r, KindTimeout, ua.StatusBadTimeout)
	}
	close(f.b.gate)
	wantGood(t, "after", f.do(hmi, `{"requestId":"after","op":"read","group":"line","writer":"w","field":"Level"}`))
}

// TestNamespaceForms: a rule in the nsu= form allows a request in the ns=
// form and the other way round.
func TestNamespaceForms(t *testing.T) {
	f := newFixture(t, false, func(url string) *config.Config {
		return testConfig(url, map[string]string{"Level": int16Node}, config.CommandRule{Callers: []string{"api:ops"},
			Write: []config.CommandTarget{{Endpoint: "sim", Node: "nsu=urn:uagate:sim:nodes;s=Demo.Static.Int32"}},
			Call:  []config.CommandMethod{{Endpoint: "*", Object: "ns=1;s=Demo.Methods", Method: "ns=1;s=Demo.Methods.Echo"}}})
	})
	ops := Caller{Transport: TransportAPI, ID: "ops"}
	wantGood(t, "ns= request, nsu= rule", f.do(ops, `{"requestId":"1","op":"write","endpoint":"sim","node":"ns=1;s=Demo.Static.Int32","value":-4}`))
	if v := f.value("ns=1;s=Demo.Static.Int32"); v.Int32() != -4 {
		t.Fatalf("read back %v", v)
	}
	r := f.do(ops, `{"requestId":"2","op":"call","endpoint":"sim","object":"nsu=urn:uagate:sim:nodes;s=Demo.Methods","method":"nsu=urn:uagate:sim:nodes;s=Demo.Methods.Echo","arguments":["hi"]}`)
	wantGood(t, "nsu= request, ns= rule", r)
	wantRefusal(t, "another node", f.do(ops, `{"requestId":"3","op":"write","endpoint":"sim","node":"ns=1;s=Demo.Static.Int16","value":1}`),
		KindDenied, ua.StatusBadUserAccessDenied)
}

// TestLog: every command is in the log, newest first, with old and new
// value and its result.
func TestLog(t *testing.T) {
	f := newWriteFixture(t)
	f.do(hmi, `{"requestId":"a","op":"write","group":"line","writer":"w","field":"Level","value":3}`)
	f.do(other, `{"requestId":"b","op":"write","group":"line","writer":"w","field":"Level","value":4}`)
	log := f.e.Log(10)
	if len(log) != 2 {
		t.Fatalf("log %+v", log)
	}
	if l := log[1]; l.RequestID != "a" || l.Caller != "mqtt/mqtt:hmi-1" || string(l.OldValue) != `{"UaType":4,"Value":0}` ||
		string(l.Value) != `{"UaType":4,"Value":3}` || l.Status.Symbol != "Good" || l.Error != "" || !strings.Contains(l.Target, int16Node) {
		t.Fatalf("log entry %+v", l)
	}
	if l := log[0]; l.RequestID != "b" || !strings.HasPrefix(l.Error, "denied: ") || l.Status.Symbol != "BadUserAccessDenied" {
		t.Fatalf("log entry %+v", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r := f.e.Handle(ctx, hmi, &Request{RequestID: "h", Op: OpRead, Group: "line", Writer: "w", Field: "Level"}); r.Error != nil {
		t.Fatalf("Handle: %s", r.Marshal())
	}
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		p, s string
		ok   bool
	}{
		{"*", "", true}, {"*", "abc", true}, {"a*", "abc", true}, {"*c", "abc", true}, {"a*c", "abbbc", true},
		{"a*b*c", "aXbYc", true}, {"a*c", "abd", false}, {"abc", "abc", true}, {"abc", "abcd", false},
		{"ns=1;s=Demo.*", "ns=1;s=Demo.Static/x", true}, {"*.Int16", "ns=1;s=Demo.Static.Int32", false},
	} {
		if glob(c.p, c.s) != c.ok {
			t.Errorf("glob(%q, %q) = %v", c.p, c.s, !c.ok)
		}
	}
}

func TestCheckReplyTo(t *testing.T) {
	for _, c := range []struct {
		to  string
		sep byte
		ok  bool
	}{
		{"hmi/answers", '/', true}, {"opcua/json/command/p/hmi/reply", '/', true},
		{"opcua/json/command/p/x", '/', false}, {"opcua/json/command/p", '/', false},
		{"a/+/b", '/', false}, {"a/#", '/', false}, {"$SYS/x", '/', false}, {"", '/', false},
		{"answers.hmi", '.', true}, {"a.*", '.', false}, {"a.>", '.', false}, {"opcua.json.command.p.y", '.', false},
	} {
		prefix := "opcua/json/command/p"
		if c.sep == '.' {
			prefix = "opcua.json.command.p"
		}
		if err := CheckReplyTo(c.to, c.sep, prefix); (err == nil) != c.ok {
			t.Errorf("CheckReplyTo(%q) = %v", c.to, err)
		}
	}
	if got := PeekReplyTo([]byte(`{"requestId":"1", "replyTo" : "a/b","op":"read"}`)); got != "a/b" {
		t.Errorf("PeekReplyTo: %q", got)
	}
}
