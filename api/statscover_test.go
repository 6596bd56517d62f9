package api

import (
	"bytes"
	"encoding"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/command"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sparkplug"
	"github.com/uagate/gateway/bridge/sink/wssink"
	"github.com/uagate/gateway/bridge/storelog"
	"github.com/uagate/gateway/pooling"
)

// notInMetrics are the numbers of the stats types that are no series of
// their own in /metrics, and why.
var notInMetrics = map[string]string{
	"WriterStats.ID":       "an identifier: the writer label names the writer",
	"BufferStats.Size":     "the class_bytes label",
	"Stats.CommitNanos":    "in seconds: uagate_store_commit_seconds_total",
	"StreamStats.MaxAgeMs": "in seconds: uagate_store_group_max_age_seconds",
}

// counterField is a number of a stats type and the value the test gave it.
type counterField struct {
	path  string // Type.Field
	value uint64
}

// fillCounters gives every integer field reachable from v (nested and
// embedded structs, one element of each slice of structs) a power of two no
// other field has: no sum or difference of other fields equals it, so a
// value found in the output was read from that field. Narrow types get the
// small powers. Fields written as text (enums such as config.Guarantee) are
// not numbers and are left alone.
func fillCounters(t *testing.T, v reflect.Value) []counterField {
	t.Helper()
	type slot struct {
		path string
		v    reflect.Value
	}
	var slots []slot
	textType := reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		tp := v.Type()
		for i := range tp.NumField() {
			f, fv := tp.Field(i), v.Field(i)
			if !f.IsExported() || f.Type.Implements(textType) {
				continue
			}
			switch f.Type.Kind() {
			case reflect.Struct:
				if f.Type != reflect.TypeOf(time.Time{}) {
					walk(fv)
				}
			case reflect.Slice:
				if f.Type.Elem().Kind() == reflect.Struct {
					fv.Set(reflect.MakeSlice(f.Type, 1, 1))
					walk(fv.Index(0))
				}
			case reflect.Int, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				slots = append(slots, slot{tp.Name() + "." + f.Name, fv})
			case reflect.Float32, reflect.Float64, reflect.Int8:
				t.Fatalf("%s.%s: a %s counter; teach fillCounters its kind", tp.Name(), f.Name, f.Type)
			}
		}
	}
	walk(v)
	slices.SortStableFunc(slots, func(a, b slot) int { return int(a.v.Type().Size()) - int(b.v.Type().Size()) })
	var out []counterField
	for i, s := range slots {
		x := uint64(1) << (i + 3) // from 8: clear of the 0s and 1s of gauges
		if bits := s.v.Type().Bits(); (s.v.CanInt() && i+3 >= bits-1) || i+3 >= bits {
			t.Fatalf("%s: %d fields, no room for a distinct power of two in %s", s.path, len(slots), s.v.Type())
		}
		if s.v.CanInt() {
			s.v.SetInt(int64(x))
		} else {
			s.v.SetUint(x)
		}
		out = append(out, counterField{s.path, x})
	}
	return out
}

// TestMetricsCoverStats: every counter of the runtime's stats types —
// bridge.GroupStats with its WriterStats, sink.OutputStats, wssink.Stats,
// sparkplug.Stats, command.Stats, pooling.PoolStats and BufferPoolStats,
// storelog.Stats with its streams and readers — is a series of /metrics and a
// number of /api/v1/status. A field added to one of them and left out of
// the collector or the status fails it.
func TestMetricsCoverStats(t *testing.T) {
	var (
		group  = bridge.GroupStats{Name: "line1", Endpoint: "sim"}
		output = sink.OutputStats{Name: "broker"}
		ws     wssink.Stats
		spb    = sparkplug.Stats{Name: "scada"}
		pool   pooling.PoolStats
		bufs   pooling.BufferPoolStats
		cmds   = command.Stats{Transport: "mqtt"}
		store  = storelog.Stats{Streams: []storelog.StreamStats{{Name: "line1", Readers: []storelog.ReaderStats{{Consumer: "broker"}}}}}
	)
	for _, c := range []struct {
		name  string
		value any // a pointer to the stats value to fill
		stats func() Stats
	}{
		{"group", &group, func() Stats { return Stats{Groups: []bridge.GroupStats{group}} }},
		{"sink", &output, func() Stats { return Stats{Sinks: []SinkStats{{OutputStats: output, Kind: "mqtt"}}} }},
		{"websocket", &ws, func() Stats { return Stats{WebSocket: &ws} }},
		{"sparkplug", &spb, func() Stats { return Stats{Sparkplug: []sparkplug.Stats{spb}} }},
		{"pool", &pool, func() Stats { return Stats{Pools: []pooling.NamedPoolStats{{Name: "p", PoolStats: pool}}} }},
		{"commands", &cmds, func() Stats { return Stats{Commands: []command.Stats{cmds}} }},
		{"bufferpool", &bufs, func() Stats {
			return Stats{BufferPools: []pooling.NamedBufferPoolStats{{Name: "b", BufferPoolStats: bufs}}}
		}},
		{"store", &store, func() Stats { return Stats{Store: &store} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			fields := fillCounters(t, reflect.ValueOf(c.value).Elem())
			if len(fields) < 5 {
				t.Fatalf("only %d counters found: %v", len(fields), fields)
			}
			b := newTestBackend(t, nil)
			b.stats = c.stats()
			_, ts := newTestServer(t, b, Options{})

			r := do(t, ts, "GET", "/metrics", "", nil)
			if r.status != 200 {
				t.Fatalf("metrics: %d", r.status)
			}
			metrics := string(r.body)
			series := map[float64][]string{}
			for _, line := range strings.Split(metrics, "\n") {
				if !strings.HasPrefix(line, "uagate_") {
					continue
				}
				i := strings.LastIndexByte(line, ' ')
				v, err := strconv.ParseFloat(line[i+1:], 64)
				if err != nil {
					t.Fatalf("sample %q: %v", line, err)
				}
				series[v] = append(series[v], line[:i])
			}
			r = do(t, ts, "GET", "/api/v1/status", "", nil)
			if r.status != 200 {
				t.Fatalf("status: %d %s", r.status, r.body)
			}
			numbers := map[string]bool{}
			dec := json.NewDecoder(bytes.NewReader(r.body))
			dec.UseNumber()
			var doc any
			if err := dec.Decode(&doc); err != nil {
				t.Fatal(err)
			}
			var walk func(any)
			walk = func(x any) {
				switch x := x.(type) {
				case map[string]any:
					for _, v := range x {
						walk(v)
					}
				case []any:
					for _, v := range x {
						walk(v)
					}
				case json.Number:
					numbers[x.String()] = true
				}
			}
			walk(doc)

			for _, f := range fields {
				want := strconv.FormatUint(f.value, 10)
				if why, ok := notInMetrics[f.path]; ok {
					if f.path == "BufferStats.Size" && !strings.Contains(metrics, `class_bytes="`+want+`"`) {
						t.Errorf("%s: no class_bytes=%q label", f.path, want)
					}
					t.Logf("%s (%s) is not a series: %s", f.path, want, why)
				} else if len(series[float64(f.value)]) == 0 {
					t.Errorf("%s (set to %d) is in no series of /metrics", f.path, f.value)
				}
				if !numbers[want] {
					t.Errorf("%s (set to %d) is in no member of /api/v1/status", f.path, f.value)
				}
			}
		})
	}
}
