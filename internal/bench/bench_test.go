package bench

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/ua"
)

// TestSimCommand: the counters' ticks are staggered unless
// -stagger=false.
func TestSimCommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{{nil, true}, {[]string{"-stagger=false"}, false}} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		stagger := fs.Bool("stagger", true, "")
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		o := options{items: 2000, variables: 1000, typ: "Int32", rate: 100 * time.Millisecond, stagger: *stagger, gatewayBin: "gw"}
		cmd := strings.Join(simCommand(&o), " ")
		if got := strings.Contains(cmd, " -stagger"); got != c.want {
			t.Errorf("%q: %s, want -stagger %v", c.args, cmd, c.want)
		}
		if !strings.Contains(cmd, "-folders 2 -variables 1000 -rates 100ms") {
			t.Errorf("%s", cmd)
		}
	}
}

// TestGatewayConfig: the generated configuration loads as the gateway loads
// it (config.Parse: known keys, values of their type, validation), lays the
// folders out in writer groups of per-group items, and names every item once.
func TestGatewayConfig(t *testing.T) {
	for _, fields := range []string{"list", "browse"} {
		o := options{items: 3000, variables: 1000, typ: "Int32", rate: 100 * time.Millisecond,
			publishing: 20 * time.Millisecond, duration: time.Second, warmup: time.Second, setupTimeout: time.Minute,
			queue: 10, perGroup: 2000, fields: fields, natsURL: "nats://127.0.0.1:4222", upstream: upstreamSim, maxP99: time.Second, shape: config.ShapeSingle}
		if err := o.resolve("gateway"); err != nil {
			t.Fatal(err)
		}
		text := gatewayConfig(&o, "opc.tcp://127.0.0.1:4840", "/tmp/state", "", true)
		cfg, warns, err := config.Parse(text, "bench.yaml")
		if err != nil {
			t.Fatalf("%s: %v\n%s", fields, err, text)
		}
		if !cfg.StoreOn() {
			t.Errorf("%s: the store-and-forward log is off", fields)
		}
		if off, _, err := config.Parse(gatewayConfig(&o, "opc.tcp://127.0.0.1:4840", "/tmp/state", "", false), "bench.yaml"); err != nil || off.StoreOn() {
			t.Errorf("%s: without the log: %v, on=%v", fields, err, off != nil && off.StoreOn())
		}
		// The one warning: the simulation server's certificate is trusted as it is.
		if len(warns) != 1 || warns[0].Path != "endpoints[0].autoAccept" {
			t.Errorf("%s: warnings %v", fields, warns)
		}
		if cfg.HTTP.Disabled != true || cfg.Embedded.Sim.On() || cfg.Embedded.MQTT.On() || cfg.Embedded.NATS.On() ||
			len(cfg.Sinks.NATS) != 1 || len(cfg.Sinks.MQTT) != 0 || cfg.Sinks.WebSocket != nil || cfg.Endpoints[0].SecurityPolicy != "None" {
			t.Errorf("%s: not the bench's parts only:\n%s", fields, text)
		}
		if len(cfg.WriterGroups) != 2 { // 2 folders per group, 3 folders
			t.Fatalf("%s: %d writer groups, want 2", fields, len(cfg.WriterGroups))
		}
		nodes := map[string]bool{}
		writers := 0
		for _, g := range cfg.WriterGroups {
			if g.PublishingInterval.D() != o.publishing || g.Nodes.SamplingInterval.D() != o.sampling || g.FieldEncoding != config.FieldDataValue {
				t.Errorf("%s: group %s: %+v", fields, g.Name, g)
			}
			for _, w := range g.Writers {
				writers++
				if int(w.ID) != writers || w.Name != fmt.Sprintf("F%03d", writers-1) {
					t.Errorf("%s: writer %d is %d %q", fields, writers, w.ID, w.Name)
				}
				for _, f := range w.Fields {
					if !strings.HasSuffix(f.Node, "."+f.Name) || nodes[f.Node] {
						t.Errorf("%s: field %+v", fields, f)
					}
					nodes[f.Node] = true
				}
				if fields == "browse" && (len(w.Browse) != 1 || w.Browse[0].Root != fmt.Sprintf("ns=1;s=Load.F%03d", writers-1) || w.Browse[0].MaxNodes != 1000) {
					t.Errorf("%s: browse %+v", fields, w.Browse)
				}
			}
		}
		if writers != 3 || (fields == "list" && len(nodes) != 3000) {
			t.Errorf("%s: %d writers, %d nodes", fields, writers, len(nodes))
		}
	}
}

// encodeCounters writes one ua-data message with jsonenc holding the values
// of folders × variables counters, each value[f][v].
func encodeCounters(t testing.TB, mode jsonenc.Mode, fieldMask jsonenc.DataSetFieldContentMask, layout jsonenc.NetworkMessageContentMask,
	values [][]int32, src ua.DateTime) [][]byte {
	var msgs [][]byte
	w := jsonenc.NewNetworkMessageWriter(jsonenc.WriterOptions{Sink: func(m []byte) error {
		msgs = append(msgs, append([]byte(nil), m...))
		return nil
	}})
	defer w.Release()
	hdr := jsonenc.NetworkMessageHeader{PublisherID: "bench", ContentMask: layout}
	single := layout&jsonenc.NMSingleDataSetMessage != 0
	for f, vals := range values {
		if f == 0 || single {
			if err := w.Begin(&hdr); err != nil {
				t.Fatal(err)
			}
		}
		dsm := jsonenc.DataSetMessageHeader{DataSetWriterID: uint16(f + 1), SequenceNumber: 1, Type: jsonenc.DeltaFrame,
			ContentMask:      jsonenc.DSMDataSetWriterID | jsonenc.DSMSequenceNumber | jsonenc.DSMMessageType | jsonenc.FieldEncodingBits(mode),
			FieldContentMask: fieldMask}
		if f%2 == 1 { // some writers by name only
			dsm.ContentMask = dsm.ContentMask&^jsonenc.DSMDataSetWriterID | jsonenc.DSMDataSetWriterName
			dsm.DataSetWriterName = fmt.Sprintf("F%03d", f)
		}
		if err := w.BeginDataSetMessage(&dsm); err != nil {
			t.Fatal(err)
		}
		for v, x := range vals {
			dv := ua.DataValue{Value: ua.NewInt32Variant(x), SourceTimestamp: src, ServerTimestamp: src}
			if err := w.AddField(fmt.Sprintf("V%05d", v), &dv); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.EndDataSetMessage(); err != nil {
			t.Fatal(err)
		}
		if f == len(values)-1 || single {
			if err := w.End(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return msgs
}

// TestScanJSONEnc feeds the subscriber what our encoder writes in every
// field encoding, with DataValue and Variant fields, in both layouts.
func TestScanJSONEnc(t *testing.T) {
	const folders, vars = 3, 4
	round := func(base int32) [][]int32 {
		out := make([][]int32, folders)
		for f := range out {
			out[f] = make([]int32, vars)
			for v := range out[f] {
				out[f][v] = base
			}
		}
		return out
	}
	for _, mode := range []jsonenc.Mode{jsonenc.Compact, jsonenc.Verbose, jsonenc.Reversible104, jsonenc.NonReversible104} {
		for _, fm := range []jsonenc.DataSetFieldContentMask{0, jsonenc.FieldMaskStatusCode | jsonenc.FieldMaskSourceTimestamp,
			jsonenc.FieldMaskSourceTimestamp | jsonenc.FieldMaskServerTimestamp} {
			for _, layout := range []jsonenc.NetworkMessageContentMask{jsonenc.LayoutNetworkMessage, jsonenc.LayoutDataSetMessage} {
				name := fmt.Sprintf("mode%d/fields%#x/layout%#x", mode, fm, layout)
				c := newCounter(folders*vars, vars)
				src := ua.NewDateTime(time.Now().Add(-5 * time.Millisecond))
				feed := func(vals [][]int32) {
					for _, m := range encodeCounters(t, mode, fm, layout, vals, src) {
						c.message(m, time.Now().UnixNano())
					}
				}
				feed(round(0)) // 0 is omitted in Compact: the default
				feed(round(1))
				feed(round(3)) // 1 lost per node
				feed(round(2)) // a step back: a duplicate
				feed(round(3)) // the last value again (a key frame): a repeat
				st := c.snapshot(true)
				n := int64(folders * vars)
				want := subStats{Msgs: st.Msgs, Bytes: st.Bytes, Fields: 5 * n, New: 3 * n, Lost: n, Dup: n, Repeat: n, Seen: n}
				if fm == 0 {
					want.NoTS = 3 * n
				} else {
					want.LatN = 3 * n
				}
				got := st
				got.TimeNs, got.P50ms, got.P99ms, got.MaxMs, got.Stages = 0, 0, 0, 0, stageStats{}
				if got != want {
					t.Errorf("%s:\n got %+v\nwant %+v\n%s", name, got, want, encodeCounters(t, mode, fm, layout, round(5), src)[0])
				}
				if fm != 0 && (st.P50ms < 4 || st.P99ms > 1000) {
					t.Errorf("%s: latency p50 %v p99 %v, want ≥ 5 ms", name, st.P50ms, st.P99ms)
				}
			}
		}
	}
}

// TestScanShapes: the baseline's encoding/json shape, field names with
// the folder, Int64 strings, Double counters, unknown nodes.
func TestScanShapes(t *testing.T) {
	c := newCounter(2000, 1000)
	now := time.Date(2024, 5, 1, 10, 15, 30, 500_000_000, time.UTC).UnixNano()
	for _, m := range []string{
		`{"MessageId":"0-1","MessageType":"ua-data","PublisherId":"baseline","Messages":[{"DataSetWriterId":1,"DataSetWriterName":"F000","SequenceNumber":1,"MessageType":"ua-deltaframe","Payload":{"V00000":{"Value":7,"SourceTimestamp":"2024-05-01T10:15:30.49Z"},"V00001":{"Value":7,"SourceTimestamp":"2024-05-01T10:15:30.4+00:00"}}}]}`,
		// Payload before the writer id; folder in the field name; Int64 string; Double.
		` [ {"Payload": {"F001.V00002": {"UaType": 8, "Value": "9", "SourceTimestamp": "2024-05-01T10:15:30.49Z"}, "V00003": 4.0}, "DataSetWriterId": 2} ] `,
		// Node ids as field names, 1.04 Variant, a value that is no counter, an unknown node.
		`{"Messages":{"DataSetWriterName":"F001","Payload":{"ns=1;s=Load.F001.V00004":{"Type":6,"Body":11},"V00005":{"Value":"x"},"V01000":1,"Other":2}}}`,
	} {
		c.message([]byte(m), now)
	}
	st := c.snapshot(true)
	if st.Bad != 0 || st.Fields != 8 || st.New != 5 || st.Seen != 5 || st.Unknown != 3 || st.NoTS != 2 || st.LatN != 3 {
		t.Errorf("%+v", st)
	}
	if st.P50ms < 9 || st.P50ms > 11 || st.MaxMs < 99 || st.MaxMs > 101 {
		t.Errorf("latency p50 %v max %v, want 10 and 100 ms", st.P50ms, st.MaxMs)
	}
	for i, want := range map[int]int64{0: 7, 1: 7, 1002: 9, 1003: 4, 1004: 11} {
		if c.last[i] != want {
			t.Errorf("node %d: last %d, want %d", i, c.last[i], want)
		}
	}
}

func TestScanBadInput(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 100) + "1" + strings.Repeat("}", 100)
	for _, m := range []string{
		"", "x", "{", `{"Messages":[`, `{"Payload":{"V00001":{"Value":1,}}}`, `{"Payload":{"V00001"}}`,
		`[{"Payload":{"V00001":1}}] trailing`, `{"Payload":{"V00001":{"Value":"unterminated}}}`, deep,
		`{"Payload":{"V00001":{"Value":12345678901234567890123}}}`,
	} {
		c := newCounter(10, 10)
		c.message([]byte(m), 0)
		if st := c.snapshot(false); st.Bad != 1 && !(st.Bad == 0 && st.Fields == 1 && st.Unknown == 1) {
			t.Errorf("%.40q: %+v, want bad=1", m, st)
		}
	}
}

func FuzzScan(f *testing.F) {
	src := ua.NewDateTime(time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC))
	for _, m := range encodeCounters(f, jsonenc.Verbose, jsonenc.FieldMaskSourceTimestamp, jsonenc.LayoutNetworkMessage, [][]int32{{1, 2}, {3}}, src) {
		f.Add(m)
		f.Add(m[:len(m)/2])
	}
	f.Add([]byte(`[{"Payload":{"F001.V00002":{"UaType":8,"Value":"9"}},"DataSetWriterId":2}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := newCounter(100, 10)
		c.message(b, time.Now().UnixNano())
		st := c.snapshot(true)
		if st.New+st.Dup+st.Repeat+st.Unknown != st.Fields || st.Seen > st.New || st.Bad > 1 {
			t.Errorf("%+v", st)
		}
	})
}

func TestParseUTCTimestamp(t *testing.T) {
	for _, s := range []string{"2024-05-01T10:15:30Z", "2024-05-01T10:15:30.1234567Z", "1970-01-01T00:00:00.000000001Z",
		"2000-02-29T23:59:59.5+01:30", "2099-12-31T00:00:00-08:00", "2024-03-01T00:00:00Z"} {
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		if got := parseUTCTimestamp([]byte(s)); got != want.UnixNano() {
			t.Errorf("%s: %d, want %d (%v)", s, got, want.UnixNano(), time.Unix(0, got).UTC())
		}
	}
	for _, s := range []string{"", "2024-05-01", "2024-05-01T10:15:30", "2024-13-01T10:15:30Z", "2024-05-01T10:15:30.Z", "2024-05-01T10:15:30+0100", "x024-05-01T10:15:30Z"} {
		if got := parseUTCTimestamp([]byte(s)); got != 0 {
			t.Errorf("%q: %d, want 0", s, got)
		}
	}
}

func TestLatencyHist(t *testing.T) {
	var h latencyHist
	for us := int64(1); us <= 100000; us++ { // 1 µs … 100 ms, uniform
		h.add(us * 1000)
	}
	for _, c := range []struct {
		q    float64
		want int64
	}{{0.5, 50000}, {0.99, 99000}, {0.001, 100}} {
		got := h.quantile(c.q)
		if math.Abs(float64(got-c.want)) > 0.02*float64(c.want) {
			t.Errorf("q%v: %d µs, want %d ± 2 %%", c.q, got, c.want)
		}
	}
	h.add(-5)   // a clock step: counted as 0
	h.add(1e15) // 11 days: the last bucket
	if h.n != 100002 || h.quantile(1) != h.max {
		t.Errorf("n %d, q1 %d max %d", h.n, h.quantile(1), h.max)
	}
	for i := range len(h.buckets) - 1 {
		if latencyValue(i) >= latencyValue(i+1) || latencyBucket(latencyValue(i)) != i {
			t.Fatalf("bucket %d: value %d, next %d, back %d", i, latencyValue(i), latencyValue(i+1), latencyBucket(latencyValue(i)))
		}
	}
}

func TestProcStats(t *testing.T) {
	pid := os.Getpid()
	t0, err := procCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; { // burn 50 ms of CPU
		if d, _ := procCPU(pid); d-t0 >= 50*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("CPU time did not grow")
		}
	}
	if d := procRunTime(pid); d < t0 {
		t.Errorf("run time %v below the CPU time %v counted before", d, t0)
	}
	rss, err := procRSS(pid)
	if err != nil || rss < 1<<20 {
		t.Fatalf("RSS %d: %v", rss, err)
	}
	if _, err := procCPU(1 << 30); err == nil {
		t.Error("no error for a missing process")
	}
}

// scanMessage is a 1,000-field DataValue message as the gateway writes
// it (Verbose, SourceTimestamp).
func scanMessage(tb testing.TB) []byte {
	vals := [][]int32{make([]int32, 1000)}
	for i := range vals[0] {
		vals[0][i] = 1234567
	}
	return encodeCounters(tb, jsonenc.Verbose, jsonenc.FieldMaskSourceTimestamp, jsonenc.LayoutNetworkMessage, vals, ua.Now())[0]
}

// BenchmarkScan: the subscriber's cost per message of 1,000 fields; it
// must stay far below the gateway's (ns/op ÷ 1,000 per notification).
func BenchmarkScan(b *testing.B) {
	m := scanMessage(b)
	c := newCounter(1000, 1000)
	b.ReportAllocs()
	b.SetBytes(int64(len(m)))
	for b.Loop() {
		c.message(m, 0)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/notification")
}

// TestStages: the subscriber splits each new value's latency at the
// ServerTimestamp and the DataSetMessage's Timestamp, and measures a
// message's wait for the parser apart; repeats and values without the
// timestamps are not staged.
func TestStages(t *testing.T) {
	c := newCounter(10, 10)
	recv := time.Date(2024, 5, 1, 10, 15, 30, 500_000_000, time.UTC).UnixNano()
	// Tick at .400, sampled at .410, the gateway began at .430, received at .500.
	m := `{"Messages":[{"DataSetWriterId":1,"Timestamp":"2024-05-01T10:15:30.43Z","Payload":{` +
		`"V00000":{"Value":1,"SourceTimestamp":"2024-05-01T10:15:30.4Z","ServerTimestamp":"2024-05-01T10:15:30.41Z"},` +
		`"V00001":{"Value":1,"ServerTimestamp":"2024-05-01T10:15:30.41Z","SourceTimestamp":"2024-05-01T10:15:30.4Z"},` +
		`"V00002":{"Value":1,"SourceTimestamp":"2024-05-01T10:15:30.4Z"}}}]}`
	c.message([]byte(m), recv)
	// The same values again (a key frame): repeats, no samples.
	c.message([]byte(m), recv+int64(time.Second))
	st := c.snapshot(true)
	if st.New != 3 || st.Repeat != 3 || st.LatN != 3 {
		t.Fatalf("%+v", st)
	}
	near := func(got, want float64) bool { return got > want*0.98 && got < want*1.02 }
	if !near(st.P50ms, 100) || !near(st.MaxMs, 100) {
		t.Errorf("latency p50 %v max %v, want 100 ms", st.P50ms, st.MaxMs)
	}
	s := st.Stages
	if !near(s.SampleP50, 10) || !near(s.SampleP99, 10) || !near(s.UpP50, 20) || !near(s.UpP99, 20) ||
		!near(s.DownP50, 70) || !near(s.DownP99, 70) {
		t.Errorf("stages %+v, want sample 10, up 20, down 70 ms", s)
	}
	// Parsed now, received 50 ms ago: the parser's queue.
	c.message([]byte(`{"Payload":{}}`), time.Now().Add(-50*time.Millisecond).UnixNano())
	if q := c.snapshot(true).Stages.QueueP50; q < 49 || q > 1000 {
		t.Errorf("queue p50 %v ms, want ≥ 50", q)
	}
}

func TestItemSteps(t *testing.T) {
	for _, c := range []struct {
		from, last, variables int
		want                  []int
	}{
		{1000, 2000000, 1000, []int{1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000, 2000000}},
		{100, 500, 500, []int{100, 200, 500}},
		{100, 5000, 1000, []int{100, 200, 500, 1000, 2000, 5000}},
		{300, 7000, 1000, []int{300, 600, 3000, 6000}}, // 1500 is no multiple of 1000
	} {
		if got := itemSteps(c.from, c.last, c.variables); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("itemSteps(%d, %d, %d) = %v, want %v", c.from, c.last, c.variables, got, c.want)
		}
	}
}

// TestJudge: the verdict tells a bridge that lost from a harness that fell
// behind and from a machine with every core busy.
func TestJudge(t *testing.T) {
	base := func() *result {
		r := &result{bridge: "gateway", upstream: "sim", items: 1000, offered: 10000,
			window: 10 * time.Second, wall: 10 * time.Second, gm: metrics{},
			machine: machineSample{cpus: 2, busy: 5 * time.Second}}
		r.b = subStats{New: 100000, LatN: 100000, P99ms: 30}
		r.bridgeP.cpu = time.Second
		r.subP.cpu = time.Second
		return r
	}
	for _, c := range []struct {
		name      string
		change    func(r *result)
		sustained bool
		limit     string
	}{
		{"sustained", func(*result) {}, true, limitNone},
		{"lost, nothing else", func(r *result) { r.b.Lost = 5 }, false, limitBridge},
		{"slow", func(r *result) { r.b.P99ms = 500 }, false, limitBridge},
		{"short", func(r *result) { r.b.New = 50000 }, false, limitBridge},
		{"sink dropped", func(r *result) { r.b.Lost = 5; r.gm["uagate_sink_dropped_messages_total"] = 3; r.b.Cut = "EOF" }, false, limitBridge},
		{"subscriber cut", func(r *result) { r.b.Lost = 5; r.b.Cut = "EOF" }, false, limitHarness},
		{"subscriber busy", func(r *result) { r.b.Lost = 5; r.subP.cpu = 9500 * time.Millisecond }, false, limitHarness},
		{"subscriber queue", func(r *result) { r.b.P99ms = 500; r.b.Stages.QueueP99 = 400 }, false, limitHarness},
		{"nats slow consumer", func(r *result) { r.b.Lost = 5; r.natsSlow = 1 }, false, limitHarness},
		{"machine full", func(r *result) { r.b.P99ms = 500; r.machine.busy = 19800 * time.Millisecond }, false, limitMachine},
	} {
		r := base()
		c.change(r)
		v := r.judge(100 * time.Millisecond)
		if v.sustained != c.sustained || v.limit != c.limit {
			t.Errorf("%s: sustained %v limit %q, want %v %q (%+v)", c.name, v.sustained, v.limit, c.sustained, c.limit, v)
		}
		if line := r.verdictLine(v); !strings.HasPrefix(line, "verdict bridge=gateway ") {
			t.Errorf("%s: %q", c.name, line)
		}
	}
}
