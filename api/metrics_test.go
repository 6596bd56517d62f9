package api

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/wssink"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// TestMetrics scrapes /metrics with a real session and subscription and
// the pipeline's counters set, and checks the series and their values.
func TestMetrics(t *testing.T) {
	srv := startSim(t, &server.Config{})
	m := startSession(t, srv.URL(), nil, true)
	sub, err := m.CreateSubscription(t.Context(), &client.SubscriptionConfig{
		PublishingInterval: 20 * time.Millisecond,
		OnDataChange:       func(*client.Subscription, uint32, []ua.MonitoredItemNotification) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.CreateMonitoredItems(t.Context(), []client.ItemRequest{{NodeID: ua.MustParseNodeID(server.NodeCounter)}}, nil); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "data changes", func() bool { return sub.Stats().DataChanges >= 2 })

	b := newTestBackend(t, nil)
	b.addSession("sim", srv.URL(), m)
	pool := pooling.NewPool[pooling.Buffer](8, nil)
	pool.Put(pool.Get())
	pool.Get()
	bp := pooling.NewBufferPool(pooling.BufferPoolConfig{})
	bp.Put(bp.Get(1000))
	bp.Get(1000)
	b.stats = Stats{
		Groups: []bridge.GroupStats{{Name: "line1", Endpoint: "sim", Notifications: 40, Events: 2, UnknownHandles: 2, Messages: 6, FieldMessages: 1,
			Bytes: 9000, Unacked: 3, Overflows: 5, Writers: []bridge.WriterStats{{Name: "motors", Fields: 12, KeyFrames: 4}}}},
		Sinks: []SinkStats{{Kind: "mqtt", OutputStats: sink.OutputStats{Name: "broker", Enqueued: 7, Sent: 7, SentBytes: 8000, Confirmed: 6,
			Dropped: 1, Queued: 2, InFlight: 1, Connected: true}}},
		WebSocket:   &wssink.Stats{Clients: 2, Sent: 11, Bytes: 1100},
		Pools:       []pooling.NamedPoolStats{{Name: "datavalue", PoolStats: pool.Stats()}},
		BufferPools: []pooling.NamedBufferPoolStats{{Name: "chunks", BufferPoolStats: bp.Stats()}},
		ScaleOut: &ScaleOutStatus{ReplicaID: "gw-0", Groups: []LeaseHolder{
			{Group: "line1", Holder: "gw-0", Local: true}, {Group: "line2", Holder: "gw-1"}}},
	}
	h := NewHistograms()
	rt := h.PublishRoundTrip("sim")
	rt.Observe(3 * time.Millisecond)
	rt.Observe(30 * time.Millisecond)
	h.SourceToSink("broker").Observe(2 * time.Second)
	_, ts := newTestServer(t, b, Options{Histograms: h, Version: "1.2.3"})

	r := do(t, ts, "GET", "/metrics", "", nil)
	if r.status != 200 {
		t.Fatalf("metrics: %d", r.status)
	}
	text := string(r.body)
	for _, want := range []string{
		`uagate_build_info{version="1.2.3"} 1`,
		`uagate_endpoint_session_state{endpoint="sim",state="Connected"} 1`,
		`uagate_endpoint_session_state{endpoint="sim",state="Reconnecting"} 0`,
		`uagate_endpoint_session_connected{endpoint="sim"} 1`,
		`uagate_endpoint_reconnects_total{endpoint="sim"} 0`,
		`uagate_endpoint_sessions_created_total{endpoint="sim"} 1`,
		`uagate_subscription_monitored_items{endpoint="sim"} 1`,
		`uagate_group_notifications_in_total{endpoint="sim",group="line1"} 42`,
		`uagate_group_notifications_out_total{endpoint="sim",group="line1"} 40`,
		`uagate_group_bytes_total{endpoint="sim",group="line1"} 9000`,
		`uagate_group_unacked_sequence_numbers{endpoint="sim",group="line1"} 3`,
		`uagate_group_messages_total{endpoint="sim",group="line1"} 7`,
		`uagate_group_overflows_total{endpoint="sim",group="line1"} 5`,
		`uagate_writer_fields{group="line1",writer="motors"} 12`,
		`uagate_writer_key_frames_total{group="line1",writer="motors"} 4`,
		`uagate_websocket_clients 2`,
		`uagate_sink_sent_messages_total{kind="websocket",sink="websocket"} 11`,
		`uagate_sink_sent_bytes_total{kind="websocket",sink="websocket"} 1100`,
		`uagate_sink_sent_messages_total{kind="mqtt",sink="broker"} 7`,
		`uagate_sink_dropped_messages_total{kind="mqtt",sink="broker"} 1`,
		`uagate_sink_queue_depth_messages{kind="mqtt",sink="broker"} 2`,
		`uagate_sink_sent_bytes_total{kind="mqtt",sink="broker"} 8000`,
		`uagate_sink_connected{kind="mqtt",sink="broker"} 1`,
		`uagate_pool_hits_total{pool="datavalue"} 1`,
		`uagate_pool_misses_total{pool="datavalue"} 1`,
		`uagate_pool_hit_ratio{pool="datavalue"} 0.5`,
		`uagate_bufferpool_hits_total{class_bytes="1024",pool="chunks"} 1`,
		`uagate_publish_round_trip_seconds_bucket{endpoint="sim",le="0.005"} 1`,
		`uagate_publish_round_trip_seconds_bucket{endpoint="sim",le="0.05"} 2`,
		`uagate_publish_round_trip_seconds_count{endpoint="sim"} 2`,
		`uagate_sink_latency_seconds_bucket{sink="broker",le="1"} 0`,
		`uagate_sink_latency_seconds_bucket{sink="broker",le="2.5"} 1`,
		`uagate_scaleout_lease_held{group="line1"} 1`,
		`uagate_scaleout_lease_held{group="line2"} 0`,
		"go_goroutines ",
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %s", want)
		}
	}
	// The allocations counted as a scrape begins: the next scrape's count
	// holds this one's allocations (a few thousand objects: at least one).
	a1, err1 := strconv.ParseFloat(metricIn(r.body, "uagate_process_allocs_at_scrape_total"), 64)
	r2 := do(t, ts, "GET", "/metrics", "", nil)
	a2, err2 := strconv.ParseFloat(metricIn(r2.body, "uagate_process_allocs_at_scrape_total"), 64)
	if err1 != nil || err2 != nil || a1 <= 0 || a2 <= a1 {
		t.Errorf("uagate_process_allocs_at_scrape_total: %v (%v), then %v (%v); want a count that grows by a scrape's allocations", a1, err1, a2, err2)
	}
	// Data changes were counted (at least the two waited for).
	if m := regexp.MustCompile(`uagate_subscription_data_changes_total\{endpoint="sim"\} (\d+)`).FindStringSubmatch(text); m == nil || m[1] == "0" || m[1] == "1" {
		t.Errorf("data changes: %v", m)
	}
	// Every series of ours follows uagate_<subsystem>_<thing>_<unit> and
	// none is labelled by node.
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "uagate_") {
			continue
		}
		if strings.Contains(line, "node=") {
			t.Errorf("per-node label: %s", line)
		}
		if !regexp.MustCompile(`^uagate_[a-z]+_[a-z_]+[{ ]`).MatchString(line) {
			t.Errorf("name: %s", line)
		}
	}
	// The status names the holders.
	var st struct {
		ScaleOut *ScaleOutStatus `json:"scaleOut"`
	}
	if r := do(t, ts, "GET", "/api/v1/status", "", nil); r.status != 200 || json.Unmarshal(r.body, &st) != nil {
		t.Fatalf("status: %d %s", r.status, r.body)
	}
	if so := st.ScaleOut; so == nil || so.ReplicaID != "gw-0" || len(so.Groups) != 2 || so.Groups[1] != (LeaseHolder{Group: "line2", Holder: "gw-1"}) {
		t.Errorf("status scaleOut: %+v", st.ScaleOut)
	}
	// With keys, /metrics needs the read role unless it is public.
	_, ts2 := newTestServer(t, b, Options{Keys: []Key{{Name: "r", Token: readToken, Role: RoleRead}}})
	if r := do(t, ts2, "GET", "/metrics", "", nil); r.status != 401 {
		t.Errorf("metrics without a key: %d", r.status)
	}
	if r := do(t, ts2, "GET", "/metrics", readToken, nil); r.status != 200 {
		t.Errorf("metrics with a key: %d", r.status)
	}
	_, ts3 := newTestServer(t, b, Options{Keys: []Key{{Name: "r", Token: readToken, Role: RoleRead}}, PublicMetrics: true})
	if r := do(t, ts3, "GET", "/metrics", "", nil); r.status != 200 {
		t.Errorf("public metrics: %d", r.status)
	}
}

func TestHistogram(t *testing.T) {
	h := NewHistogram([]time.Duration{time.Millisecond, 10 * time.Millisecond, time.Millisecond})
	for _, d := range []time.Duration{-time.Second, time.Millisecond, 2 * time.Millisecond, time.Minute} {
		h.Observe(d)
	}
	s := h.Snapshot()
	if s.Count != 4 || s.Buckets[0.001] != 2 || s.Buckets[0.01] != 3 || len(s.Buckets) != 2 {
		t.Fatalf("snapshot %+v", s)
	}
	if want := (time.Millisecond + 2*time.Millisecond + time.Minute).Seconds(); s.Sum != want {
		t.Fatalf("sum %v, want %v", s.Sum, want)
	}
	if a := testing.AllocsPerRun(1000, func() { h.Observe(5 * time.Millisecond) }); a != 0 {
		t.Fatalf("Observe allocates %v times", a)
	}
}

func BenchmarkHistogramObserve(b *testing.B) {
	h := NewHistogram(nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		d := time.Duration(0)
		for pb.Next() {
			d += 37 * time.Microsecond
			h.Observe(d % (3 * time.Second))
		}
	})
}
