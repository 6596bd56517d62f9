package main

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/ua"
)

// benchChildEnv makes this test binary the gateway binary: the bench harness
// starts its children (sim, run, bench-subscriber) as `<test binary> <command>
// …`, and TestMain runs the command instead of the tests.
const benchChildEnv = "UAGATE_BENCH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(benchChildEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	// The gateways these tests run in this process would set the
	// collector's GOGC to steadyGCPercent after their setup (memory.go),
	// for the whole test binary, whose heap is small and whose tests
	// allocate a lot: thousands of collections more. TestMemReleaserGCPercent
	// checks that setting on its own.
	if os.Getenv("GOGC") == "" {
		os.Setenv("GOGC", "100")
	}
	os.Exit(m.Run())
}

// benchLine parses the key=value line of one bridge.
func benchLine(t *testing.T, out, bridge string) map[string]float64 {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "bridge="+bridge+" ") {
			continue
		}
		kv := map[string]float64{}
		for _, f := range strings.Fields(l)[1:] {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				t.Fatalf("%q in %q is not key=value", f, l)
			}
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s=%q in %q: %v", k, v, l, err)
			}
			kv[k] = x
		}
		return kv
	}
	t.Fatalf("no line bridge=%s in\n%s", bridge, out)
	return nil
}

// TestBenchEndToEnd runs the whole harness at CI size for each bridge: real
// processes (this binary as sim, gateway and subscriber; the baseline built
// with the go tool; Debian's nats-server), 1,000 items at 100 ms for 2 s.
func TestBenchEndToEnd(t *testing.T) {
	for _, bridge := range []string{"baseline", "gateway"} {
		t.Run(bridge, func(t *testing.T) {
			t.Setenv(benchChildEnv, "1")
			var out, errb bytes.Buffer
			code := run([]string{"bench", "-items", "1000", "-variables", "500", "-rate", "100ms",
				"-duration", "2s", "-warmup", "1s", "-setup-timeout", "2m", "-per-group", "500",
				"-bridge", bridge, "-gateway-bin", os.Args[0]}, strings.NewReader(""), &out, &errb)
			if code != 0 {
				t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
			}
			kv := benchLine(t, out.String(), bridge)
			for _, k := range []string{"notifications_per_s", "gateway_cpu_us_per_notification", "p50_ms", "p99_ms", "lost", "rss_mb", "bytes_per_item"} {
				if _, ok := kv[k]; !ok {
					t.Errorf("no %s in the line", k)
				}
			}
			// 10,000 notifications/s are offered; a loaded CI machine under
			// the race detector still delivers most of them.
			if n := kv["notifications_per_s"]; n < 5000 || n > 11000 {
				t.Errorf("notifications_per_s=%v, want about 10000", n)
			}
			for _, k := range []string{"lost", "dup", "unknown", "bad", "sub_dropped"} {
				if kv[k] != 0 {
					t.Errorf("%s=%v, want 0", k, kv[k])
				}
			}
			if kv["gateway_cpu_us_per_notification"] <= 0 || kv["rss_mb"] <= 0 || kv["bytes_per_item"] <= 0 {
				t.Errorf("CPU or memory not measured: %v", kv)
			}
			if kv["rss_peak_mb"] < kv["rss_mb"] {
				t.Errorf("rss_peak_mb=%v below rss_mb=%v", kv["rss_peak_mb"], kv["rss_mb"])
			}
			// The latency includes the sampling delay (≤ 20 ms) and is
			// bounded by the window.
			if p50, p99 := kv["p50_ms"], kv["p99_ms"]; p50 <= 0 || p99 < p50 || p99 > 2000 {
				t.Errorf("p50_ms=%v p99_ms=%v", p50, p99)
			}
			if bridge == "gateway" {
				// The stages add up to the latency: the gateway's messages
				// carry every timestamp.
				for _, k := range []string{"sample_p50_ms", "up_p50_ms", "down_p50_ms", "sub_queue_p50_ms"} {
					if _, ok := kv[k]; !ok {
						t.Errorf("no %s in the line", k)
					}
				}
				if sum := kv["sample_p50_ms"] + kv["up_p50_ms"] + kv["down_p50_ms"]; sum <= 0 || kv["up_p50_ms"] <= 0 || kv["down_p50_ms"] <= 0 {
					t.Errorf("stages sample %v up %v down %v ms, want positive", kv["sample_p50_ms"], kv["up_p50_ms"], kv["down_p50_ms"])
				}
			}
			t.Log(strings.TrimSpace(out.String()))
		})
	}
}

// TestBenchSimCommand: the counters' ticks are staggered unless
// -stagger=false.
func TestBenchSimCommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{{nil, true}, {[]string{"-stagger=false"}, false}} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		stagger := fs.Bool("stagger", true, "")
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		o := benchOptions{items: 2000, variables: 1000, typ: "Int32", rate: 100 * time.Millisecond, stagger: *stagger, gatewayBin: "gw"}
		cmd := strings.Join(simCommand(&o), " ")
		if got := strings.Contains(cmd, " -stagger"); got != c.want {
			t.Errorf("%q: %s, want -stagger %v", c.args, cmd, c.want)
		}
		if !strings.Contains(cmd, "-folders 2 -variables 1000 -rates 100ms") {
			t.Errorf("%s", cmd)
		}
	}
}

func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-bridge", "nope"},
		{"-items", "0"},
		{"-items", "1500", "-variables", "1000"},
		{"-type", "String"},
		{"-rate", "10ms", "-sampling", "10ms"},
		{"-fields", "some"},
		{"extra"},
	} {
		var errb bytes.Buffer
		if code := run(append([]string{"bench"}, args...), nil, &bytes.Buffer{}, &errb); code != 2 {
			t.Errorf("%q: exit code %d, want 2 (usage); stderr %q", args, code, errb.String())
		}
	}
}

// TestBenchGatewayConfig checks that every key of the generated configuration
// is a field of the configuration model (bridge/config), with values of its
// type, and that it names every item once.
func TestBenchGatewayConfig(t *testing.T) {
	for _, fields := range []string{"list", "browse"} {
		o := benchOptions{items: 3000, variables: 1000, typ: "Int32", rate: 100 * time.Millisecond,
			publishing: 20 * time.Millisecond, duration: time.Second, warmup: time.Second, setupTimeout: time.Minute,
			queue: 10, perGroup: 2000, fields: fields, natsURL: "nats://127.0.0.1:4222"}
		if err := o.resolve("gateway"); err != nil {
			t.Fatal(err)
		}
		text := gatewayConfig(&o, "opc.tcp://127.0.0.1:4840", "/tmp/state")
		var tree any
		if err := yaml.Unmarshal(text, &tree); err != nil {
			t.Fatalf("%s: %v\n%s", fields, err, text)
		}
		checkAgainstModel(t, "", tree, reflect.TypeOf(config.Config{}))

		var cfg struct {
			WriterGroups []struct {
				Writers []struct {
					ID     int
					Name   string
					Fields []struct{ Name, Node string }
					Browse []struct{ Root string }
				}
			} `yaml:"writerGroups"`
		}
		if err := yaml.Unmarshal(text, &cfg); err != nil {
			t.Fatal(err)
		}
		if len(cfg.WriterGroups) != 2 { // 2 folders per group, 3 folders
			t.Fatalf("%s: %d writer groups, want 2", fields, len(cfg.WriterGroups))
		}
		nodes := map[string]bool{}
		writers := 0
		for _, g := range cfg.WriterGroups {
			for _, w := range g.Writers {
				writers++
				if w.ID != writers || w.Name != fmt.Sprintf("F%03d", writers-1) {
					t.Errorf("%s: writer %d is %d %q", fields, writers, w.ID, w.Name)
				}
				for _, f := range w.Fields {
					if !strings.HasSuffix(f.Node, "."+f.Name) || nodes[f.Node] {
						t.Errorf("%s: field %+v", fields, f)
					}
					nodes[f.Node] = true
				}
				if fields == "browse" && (len(w.Browse) != 1 || w.Browse[0].Root != fmt.Sprintf("ns=1;s=Load.F%03d", writers-1)) {
					t.Errorf("%s: browse %+v", fields, w.Browse)
				}
			}
		}
		if writers != 3 || (fields == "list" && len(nodes) != 3000) {
			t.Errorf("%s: %d writers, %d nodes", fields, writers, len(nodes))
		}
	}
}

// checkAgainstModel walks a decoded YAML tree along the model type.
func checkAgainstModel(t *testing.T, path string, v any, typ reflect.Type) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case typ == reflect.TypeOf(config.Duration(0)):
		s, ok := v.(string)
		if _, err := time.ParseDuration(s); !ok || err != nil {
			t.Errorf("%s: %v is not a duration", path, v)
		}
		return
	case typ.Kind() == reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s: %T, want a mapping", path, v)
			return
		}
	keys:
		for k, x := range m {
			for i := range typ.NumField() {
				if f := typ.Field(i); f.Tag.Get("yaml") == k {
					checkAgainstModel(t, path+"."+k, x, f.Type)
					continue keys
				}
			}
			t.Errorf("%s: %q is not a key of %v", path, k, typ)
		}
	case typ.Kind() == reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			t.Errorf("%s: %T, want a sequence", path, v)
			return
		}
		for i, x := range l {
			checkAgainstModel(t, fmt.Sprintf("%s[%d]", path, i), x, typ.Elem())
		}
	case typ.Kind() == reflect.String:
		if _, ok := v.(string); !ok {
			t.Errorf("%s: %T, want a string", path, v)
		}
	case typ.Kind() == reflect.Bool:
		if _, ok := v.(bool); !ok {
			t.Errorf("%s: %T, want a bool", path, v)
		}
	default: // numbers
		if _, ok := v.(uint64); !ok {
			if _, ok := v.(int64); !ok {
				t.Errorf("%s: %T (%v), want a number", path, v, v)
			}
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

// TestBenchScanJSONEnc feeds the subscriber what our encoder writes in every
// field encoding, with DataValue and Variant fields, in both layouts.
func TestBenchScanJSONEnc(t *testing.T) {
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
				c := newBenchCounter(folders*vars, vars)
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

// TestBenchScanShapes: the baseline's encoding/json shape, field names with
// the folder, Int64 strings, Double counters, unknown nodes.
func TestBenchScanShapes(t *testing.T) {
	c := newBenchCounter(2000, 1000)
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

func TestBenchScanBadInput(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 100) + "1" + strings.Repeat("}", 100)
	for _, m := range []string{
		"", "x", "{", `{"Messages":[`, `{"Payload":{"V00001":{"Value":1,}}}`, `{"Payload":{"V00001"}}`,
		`[{"Payload":{"V00001":1}}] trailing`, `{"Payload":{"V00001":{"Value":"unterminated}}}`, deep,
		`{"Payload":{"V00001":{"Value":12345678901234567890123}}}`,
	} {
		c := newBenchCounter(10, 10)
		c.message([]byte(m), 0)
		if st := c.snapshot(false); st.Bad != 1 && !(st.Bad == 0 && st.Fields == 1 && st.Unknown == 1) {
			t.Errorf("%.40q: %+v, want bad=1", m, st)
		}
	}
}

func FuzzBenchScan(f *testing.F) {
	src := ua.NewDateTime(time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC))
	for _, m := range encodeCounters(f, jsonenc.Verbose, jsonenc.FieldMaskSourceTimestamp, jsonenc.LayoutNetworkMessage, [][]int32{{1, 2}, {3}}, src) {
		f.Add(m)
		f.Add(m[:len(m)/2])
	}
	f.Add([]byte(`[{"Payload":{"F001.V00002":{"UaType":8,"Value":"9"}},"DataSetWriterId":2}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := newBenchCounter(100, 10)
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
	rss, err := procRSS(pid)
	if err != nil || rss < 1<<20 {
		t.Fatalf("RSS %d: %v", rss, err)
	}
	if _, err := procCPU(1 << 30); err == nil {
		t.Error("no error for a missing process")
	}
}

// benchScanMessage is a 1,000-field DataValue message as the gateway writes
// it (Verbose, SourceTimestamp).
func benchScanMessage(tb testing.TB) []byte {
	vals := [][]int32{make([]int32, 1000)}
	for i := range vals[0] {
		vals[0][i] = 1234567
	}
	return encodeCounters(tb, jsonenc.Verbose, jsonenc.FieldMaskSourceTimestamp, jsonenc.LayoutNetworkMessage, vals, ua.Now())[0]
}

// BenchmarkBenchScan: the subscriber's cost per message of 1,000 fields; it
// must stay far below the gateway's (ns/op ÷ 1,000 per notification).
func BenchmarkBenchScan(b *testing.B) {
	m := benchScanMessage(b)
	c := newBenchCounter(1000, 1000)
	b.ReportAllocs()
	b.SetBytes(int64(len(m)))
	for b.Loop() {
		c.message(m, 0)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/notification")
}

// TestBenchStages: the subscriber splits each new value's latency at the
// ServerTimestamp and the DataSetMessage's Timestamp, and measures a
// message's wait for the parser apart; repeats and values without the
// timestamps are not staged.
func TestBenchStages(t *testing.T) {
	c := newBenchCounter(10, 10)
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
