package api

import (
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/command"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sparkplug"
	"github.com/uagate/gateway/bridge/sink/wssink"
	"github.com/uagate/gateway/bridge/storelog"
	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/client"
)

// Metrics. A collector reads the Backend's snapshots (Endpoints, Stats) at
// scrape time: nothing is updated per notification, except the latency
// histograms the pipeline feeds (Histogram.Observe, a few atomic adds).
// Names are uagate_<subsystem>_<thing>_<unit>; labels name endpoints,
// writer groups, sinks and pools, never nodes (their number is unbounded).

type desc = prometheus.Desc

func newDesc(name, help string, labels ...string) *desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var sessionStates = []client.State{client.StateDisconnected, client.StateConnecting, client.StateConnected,
	client.StateReconnecting, client.StateClosing, client.StateClosed}

type collector struct {
	b  Backend
	h  *Histograms
	ds []*desc

	buildInfo,
	epState, epConnected, epReconnects, epConnects, epReactivations, epTransfers, epRecreations,
	subMessages, subKeepAlives, subDataChanges, subEvents, subRepublished, subLost, subDuplicates, subItems, subFailedItems,
	leaseHeld, roundTrip, sourceToSink *desc

	// The HTTP listener's own: keys and refusals (nil srv: none).
	srv                                       *Server
	keysInUse, keysStale, keysErrors, refused *desc

	// The runtime's own counters, one series each (TestMetricsCoverStats
	// checks that none is left out).
	groups      []series[bridge.GroupStats]       // labels group, endpoint
	writers     []series[bridge.WriterStats]      // labels group, writer
	sinks       []series[sink.OutputStats]        // labels sink, kind
	webSocket   []series[wssink.Stats]            // no labels
	pools       []series[pooling.PoolStats]       // label pool
	classes     []series[pooling.BufferStats]     // labels pool, class_bytes
	bufferPools []series[pooling.BufferPoolStats] // label pool
	sparkplug   []series[sparkplug.Stats]         // label sink
	commands    []series[command.Stats]           // label transport
	store       []series[storelog.Stats]          // no labels
	streams     []series[storelog.StreamStats]    // label group
	readers     []series[storelog.ReaderStats]    // labels group, sink
}

// series is one metric read from a stats value.
type series[T any] struct {
	d *desc
	t prometheus.ValueType
	v func(*T) float64
}

// counter and gauge make the series of a stats type T.
func counter[T any](c *collector, name, help string, v func(*T) uint64, labels ...string) series[T] {
	d := newDesc(name, help, labels...)
	c.ds = append(c.ds, d)
	return series[T]{d, prometheus.CounterValue, func(x *T) float64 { return float64(v(x)) }}
}

func gauge[T any](c *collector, name, help string, v func(*T) float64, labels ...string) series[T] {
	d := newDesc(name, help, labels...)
	c.ds = append(c.ds, d)
	return series[T]{d, prometheus.GaugeValue, v}
}

func collect[T any](ch chan<- prometheus.Metric, ss []series[T], x *T, labels ...string) {
	for _, s := range ss {
		ch <- prometheus.MustNewConstMetric(s.d, s.t, s.v(x), labels...)
	}
}

// unixSeconds is t as a timestamp metric: 0 for the zero time.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

func newCollector(b Backend, h *Histograms, version string) *collector {
	c := &collector{b: b, h: h}
	d := func(name, help string, labels ...string) *desc {
		x := newDesc(name, help, labels...)
		c.ds = append(c.ds, x)
		return x
	}
	c.buildInfo = prometheus.NewDesc("uagate_build_info", "Build information; always 1.", nil, prometheus.Labels{"version": version})
	c.ds = append(c.ds, c.buildInfo)
	ep, st := "endpoint", "state"
	c.epState = d("uagate_endpoint_session_state", "1 for the endpoint session's current state, 0 for the others.", ep, st)
	c.epConnected = d("uagate_endpoint_session_connected", "1 while the endpoint has an active session.", ep)
	c.epReconnects = d("uagate_endpoint_reconnects_total", "Recoveries started after a fault of the session.", ep)
	c.epConnects = d("uagate_endpoint_sessions_created_total", "Sessions created.", ep)
	c.epReactivations = d("uagate_endpoint_reactivations_total", "Sessions reactivated on a new secure channel.", ep)
	c.epTransfers = d("uagate_endpoint_transfers_total", "Subscriptions transferred to a new session.", ep)
	c.epRecreations = d("uagate_endpoint_recreations_total", "Subscriptions created anew (their queued data lost).", ep)
	c.subMessages = d("uagate_subscription_messages_total", "Notification messages received.", ep)
	c.subKeepAlives = d("uagate_subscription_keepalives_total", "Keep-alive messages received.", ep)
	c.subDataChanges = d("uagate_subscription_data_changes_total", "Data change notifications received (notifications in).", ep)
	c.subEvents = d("uagate_subscription_events_total", "Event notifications received.", ep)
	c.subRepublished = d("uagate_subscription_republished_total", "Notification messages recovered with Republish.", ep)
	c.subLost = d("uagate_subscription_lost_messages_total", "Notification messages reported lost.", ep)
	c.subDuplicates = d("uagate_subscription_duplicate_messages_total", "Duplicate or old notification messages dropped.", ep)
	c.subItems = d("uagate_subscription_monitored_items", "Monitored items.", ep)
	c.subFailedItems = d("uagate_subscription_failed_items", "Monitored items the server refused, being retried.", ep)
	g, w := "group", "writer"
	c.leaseHeld = d("uagate_scaleout_lease_held", "1 while this replica holds the writer group's lease and serves it (scale-out only).", g)
	c.groups = groupSeries(c, g, ep)
	c.writers = writerSeries(c, g, w)
	k, kind := "sink", "kind"
	c.sinks = sinkSeries(c, k, kind)
	c.webSocket = webSocketSeries(c)
	c.sparkplug = sparkplugSeries(c, k)
	p, cl := "pool", "class_bytes"
	c.pools = poolSeries(c, "uagate_pool_", "objects", p)
	c.classes = classSeries(c, p, cl)
	c.bufferPools = []series[pooling.BufferPoolStats]{
		counter(c, "uagate_bufferpool_oversize_total", "Buffer Gets larger than the largest class (never pooled).", func(s *pooling.BufferPoolStats) uint64 { return s.Oversize }, p),
		counter(c, "uagate_bufferpool_foreign_total", "Buffers given back whose capacity is no class size, dropped.", func(s *pooling.BufferPoolStats) uint64 { return s.Foreign }, p),
		counter(c, "uagate_bufferpool_over_releases_total", "Releases of a shared buffer with no reference left, ignored.", func(s *pooling.BufferPoolStats) uint64 { return s.OverReleases }, p),
		counter(c, "uagate_bufferpool_dead_retains_total", "Retains of a shared buffer with no reference left, ignored.", func(s *pooling.BufferPoolStats) uint64 { return s.DeadRetains }, p),
	}
	c.commands = commandSeries(c, "transport")
	c.store, c.streams, c.readers = storeSeries(c), streamSeries(c, g), readerSeries(c, g, k)
	c.keysInUse = d("uagate_api_keys", "API keys in use (inline and from the keys file).")
	c.keysStale = d("uagate_api_keys_file_stale", "1 while the keys file cannot be used and the keys read before it stay in use.")
	c.keysErrors = d("uagate_api_keys_file_errors_total", "Reads of the keys file that failed (unreadable, malformed, without a key).")
	c.refused = d("uagate_api_refused_total", "Requests and connections the HTTP listener refused, by reason.", "reason")
	c.roundTrip = d("uagate_publish_round_trip_seconds", "Time from a Publish request sent to its response received.", ep)
	c.sourceToSink = d("uagate_sink_latency_seconds", "Time from a value's source timestamp (or arrival) to the sink's acceptance.", k)
	return c
}

func groupSeries(c *collector, labels ...string) []series[bridge.GroupStats] {
	type G = bridge.GroupStats
	n := func(name, help string, v func(*G) uint64) series[G] {
		return counter(c, "uagate_group_"+name, help, v, labels...)
	}
	return []series[G]{
		n("notifications_in_total", "Notifications the writer group received (data changes and events).", func(g *G) uint64 { return g.Notifications + g.Events }),
		n("notifications_out_total", "Notifications the writer group wrote into messages.", func(g *G) uint64 { return g.Notifications + g.Events - g.UnknownHandles }),
		n("messages_total", "NetworkMessages the writer group produced, per-field messages included.", func(g *G) uint64 { return g.Messages + g.FieldMessages }),
		n("bytes_total", "Bytes of the NetworkMessages the writer group produced.", func(g *G) uint64 { return g.Bytes }),
		n("errors_total", "Notifications the writer group could not encode.", func(g *G) uint64 { return g.EncodeErrors }),
		n("data_changes_total", "Data change notifications the writer group received.", func(g *G) uint64 { return g.Notifications }),
		n("events_total", "Event notifications the writer group received.", func(g *G) uint64 { return g.Events }),
		n("unknown_handles_total", "Notifications for no field (or a removed one).", func(g *G) uint64 { return g.UnknownHandles }),
		n("dataset_messages_total", "DataSetMessages written, keep-alives included.", func(g *G) uint64 { return g.DataSetMessages }),
		n("network_messages_total", "ua-data and ua-metadata messages handed to the sinks' queues.", func(g *G) uint64 { return g.Messages }),
		n("field_messages_total", "Per-field messages handed to the field queues.", func(g *G) uint64 { return g.FieldMessages }),
		n("key_frames_total", "Key frame DataSetMessages written.", func(g *G) uint64 { return g.KeyFrames }),
		n("keepalives_total", "Keep-alive DataSetMessages written.", func(g *G) uint64 { return g.KeepAlives }),
		n("heartbeats_total", "DataSetMessages resending unchanged fields (heartbeat).", func(g *G) uint64 { return g.Heartbeats }),
		n("metadata_messages_total", "ua-metadata messages written.", func(g *G) uint64 { return g.MetaData }),
		n("refused_items_total", "Monitored item refusals the server reported.", func(g *G) uint64 { return g.RefusedItems }),
		n("gaps_total", "Losses of notification messages the client reported.", func(g *G) uint64 { return g.Gaps }),
		n("redelivered_messages_total", "Notification messages republished after a resume (possible duplicates).", func(g *G) uint64 { return g.Redelivered }),
		n("overflows_total", "Values the server sent with the Overflow bit: its queue discarded values next to them.", func(g *G) uint64 { return g.Overflows }),
		n("backfilled_values_total", "Values read from the server's history to fill values lost upstream.", func(g *G) uint64 { return g.Backfilled }),
		n("backfill_ranges_total", "Fields' lost ranges filled from the server's history.", func(g *G) uint64 { return g.BackfillRanges }),
		n("backfill_missed_total", "Fields' lost ranges left unfilled (no history, or not all of it readable).", func(g *G) uint64 { return g.BackfillMissed }),
		n("acked_sequence_numbers_total", "Notification messages acknowledged upstream once every at-least-once sink confirmed them.", func(g *G) uint64 { return g.Acked }),
		n("fenced_messages_total", "Messages not handed to the sinks because the writer group's lease deadline had passed (scale-out).", func(g *G) uint64 { return g.Fenced }),
		n("undelivered_sequence_numbers_total", "Notification messages left unacknowledged because a message was not delivered.", func(g *G) uint64 { return g.Undelivered }),
		n("ack_errors_total", "Acknowledgements upstream that failed.", func(g *G) uint64 { return g.AckErrors }),
		gauge(c, "uagate_group_unacked_sequence_numbers", "Notification messages not yet acknowledged upstream (waiting for at-least-once sinks).",
			func(g *G) float64 { return float64(g.Unacked) }, labels...),
		gauge(c, "uagate_group_subscription_status_code", "The last status the server reported for the subscription (0: Good).",
			func(g *G) float64 { return float64(g.SubscriptionStatus) }, labels...),
		gauge(c, "uagate_group_last_publish_timestamp_seconds", "When the writer group last wrote a DataSetMessage (0: never).",
			func(g *G) float64 { return unixSeconds(g.LastPublish) }, labels...),
	}
}

func writerSeries(c *collector, labels ...string) []series[bridge.WriterStats] {
	type W = bridge.WriterStats
	n := func(name, help string, v func(*W) uint64) series[W] {
		return counter(c, "uagate_writer_"+name, help, v, labels...)
	}
	return []series[W]{
		gauge(c, "uagate_writer_fields", "Fields of the dataset writer.", func(w *W) float64 { return float64(w.Fields) }, labels...),
		n("notifications_total", "Notifications for the dataset writer's fields.", func(w *W) uint64 { return w.Notifications }),
		n("dataset_messages_total", "DataSetMessages the dataset writer wrote, keep-alives included.", func(w *W) uint64 { return w.DataSetMessages }),
		n("messages_total", "Messages carrying its DataSetMessages (single message shape only).", func(w *W) uint64 { return w.Messages }),
		n("key_frames_total", "Key frame DataSetMessages the dataset writer wrote.", func(w *W) uint64 { return w.KeyFrames }),
		n("keepalives_total", "Keep-alive DataSetMessages the dataset writer wrote.", func(w *W) uint64 { return w.KeepAlives }),
		n("heartbeats_total", "DataSetMessages resending unchanged fields (heartbeat).", func(w *W) uint64 { return w.Heartbeats }),
		gauge(c, "uagate_writer_last_publish_timestamp_seconds", "When the dataset writer last wrote a DataSetMessage (0: never).",
			func(w *W) float64 { return unixSeconds(w.LastPublish) }, labels...),
	}
}

func sinkSeries(c *collector, labels ...string) []series[sink.OutputStats] {
	type O = sink.OutputStats
	n := func(name, help string, v func(*O) uint64) series[O] {
		return counter(c, "uagate_sink_"+name, help, v, labels...)
	}
	g := func(name, help string, v func(*O) float64) series[O] {
		return gauge(c, "uagate_sink_"+name, help, v, labels...)
	}
	return []series[O]{
		n("enqueued_messages_total", "Messages handed to the sink's queue.", func(o *O) uint64 { return o.Enqueued }),
		n("sent_messages_total", "Messages the sink took (resends included).", func(o *O) uint64 { return o.Sent }),
		n("sent_bytes_total", "Payload bytes the sink took (resends included).", func(o *O) uint64 { return o.SentBytes }),
		n("confirmed_messages_total", "Messages confirmed by the broker.", func(o *O) uint64 { return o.Confirmed }),
		n("retried_messages_total", "Messages resent after a failed confirmation.", func(o *O) uint64 { return o.Retries }),
		n("errors_total", "Failed confirmations and refused messages.", func(o *O) uint64 { return o.Errors }),
		n("dropped_messages_total", "Messages a drop-oldest queue dropped.", func(o *O) uint64 { return o.Dropped }),
		n("undelivered_messages_total", "Messages settled as undelivered.", func(o *O) uint64 { return o.Undelivered }),
		n("dead_lettered_messages_total", "Messages the broker refused for good, kept in the dead-letter file and acknowledged.", func(o *O) uint64 { return o.DeadLettered }),
		n("fenced_messages_total", "Messages not published because their writer group's lease deadline had passed (scale-out).", func(o *O) uint64 { return o.Fenced }),
		n("reconnects_total", "Connections made after the first.", func(o *O) uint64 { return o.Reconnects }),
		n("connect_failures_total", "Failed connection attempts.", func(o *O) uint64 { return o.ConnectFailures }),
		g("queue_depth_messages", "Messages waiting in the sink's queue.", func(o *O) float64 { return float64(o.Queued) }),
		g("queue_depth_bytes", "Bytes of the buffers of the messages waiting in the sink's queue.", func(o *O) float64 { return float64(o.QueuedBytes) }),
		g("inflight_messages", "Messages published and not yet confirmed.", func(o *O) float64 { return float64(o.InFlight) }),
		g("connected", "1 while the sink is connected.", func(o *O) float64 { return b2f(o.Connected) }),
	}
}

func storeSeries(c *collector) []series[storelog.Stats] {
	type S = storelog.Stats
	return []series[S]{
		gauge(c, "uagate_store_bytes", "Bytes of the records in the store-and-forward log.", func(s *S) float64 { return float64(s.Bytes) }),
		gauge(c, "uagate_store_max_bytes", "The log's bound (storeAndForward.maxBytes).", func(s *S) float64 { return float64(s.MaxBytes) }),
		gauge(c, "uagate_store_file_bytes", "Size of the log's file on disk.", func(s *S) float64 { return float64(s.FileBytes) }),
		counter(c, "uagate_store_commits_total", "Transactions the log committed.", func(s *S) uint64 { return s.Commits }),
		counter(c, "uagate_store_syncs_total", "fdatasyncs of the log's commits.", func(s *S) uint64 { return s.Syncs }),
		counter(c, "uagate_store_commit_errors_total", "Failed commits (the first stops the log).", func(s *S) uint64 { return s.CommitErrors }),
		gauge(c, "uagate_store_commit_seconds_total", "Time spent committing.", func(s *S) float64 { return float64(s.CommitNanos) / 1e9 }),
		counter(c, "uagate_store_written_bytes_total", "Bytes the log's commits wrote to its file.", func(s *S) uint64 { return s.WrittenBytes }),
	}
}

func streamSeries(c *collector, labels ...string) []series[storelog.StreamStats] {
	type S = storelog.StreamStats
	n := func(name, help string, v func(*S) uint64) series[S] {
		return counter(c, "uagate_store_"+name, help, v, labels...)
	}
	g := func(name, help string, v func(*S) float64) series[S] {
		return gauge(c, "uagate_store_"+name, help, v, labels...)
	}
	return []series[S]{
		n("appended_messages_total", "Messages the writer group appended to the log (the append rate).", func(s *S) uint64 { return s.Appended }),
		n("appended_bytes_total", "Bytes of the records the writer group appended.", func(s *S) uint64 { return s.AppendedBytes }),
		n("dropped_messages_total", "Records removed by drop-oldest before every sink had them.", func(s *S) uint64 { return s.Dropped }),
		n("expired_messages_total", "Records removed by maxAge.", func(s *S) uint64 { return s.Expired }),
		n("unappended_messages_total", "Messages settled undelivered: the log closed or failed before their commit.", func(s *S) uint64 { return s.Undelivered }),
		n("waits_total", "Times the writer group waited for room in the log.", func(s *S) uint64 { return s.Waits }),
		n("duplicate_messages_total", "Republished messages not appended: the log held their notifications already.", func(s *S) uint64 { return s.Duplicates }),
		g("records", "Records of the writer group in the log.", func(s *S) float64 { return float64(s.Records) }),
		g("record_bytes", "Bytes of the writer group's records in the log.", func(s *S) float64 { return float64(s.Bytes) }),
		g("pending_messages", "Messages waiting for their commit.", func(s *S) float64 { return float64(s.Pending) }),
		g("first_sequence", "Sequence number of the oldest record kept.", func(s *S) float64 { return float64(s.FirstSeq) }),
		g("last_sequence", "Sequence number of the newest record.", func(s *S) float64 { return float64(s.LastSeq) }),
		g("group_max_bytes", "The writer group's own bound in the log (writerGroups[].storeAndForward.maxBytes; 0: the log's only).", func(s *S) float64 { return float64(s.MaxBytes) }),
		g("group_max_age_seconds", "The writer group's own age bound in the log (writerGroups[].storeAndForward.maxAge; 0: none of its own).", func(s *S) float64 { return float64(s.MaxAgeMs) / 1e3 }),
	}
}

func readerSeries(c *collector, labels ...string) []series[storelog.ReaderStats] {
	type R = storelog.ReaderStats
	n := func(name, help string, v func(*R) uint64) series[R] {
		return counter(c, "uagate_store_sink_"+name, help, v, labels...)
	}
	g := func(name, help string, v func(*R) float64) series[R] {
		return gauge(c, "uagate_store_sink_"+name, help, v, labels...)
	}
	return []series[R]{
		n("delivered_messages_total", "Records the sink settled (the drain rate).", func(r *R) uint64 { return r.Delivered }),
		n("redelivered_messages_total", "Records handed to the sink again after a restart (marked redelivered-).", func(r *R) uint64 { return r.Redelivered }),
		n("skipped_messages_total", "Records removed (drop-oldest, maxAge) before the sink had them.", func(r *R) uint64 { return r.Skipped }),
		n("abandoned_messages_total", "Records an at-most-once sink had been handed and not written before a restart (not sent again).", func(r *R) uint64 { return r.Abandoned }),
		n("keepalives_total", "Keep-alives (not logged) handed to the sink once it had every record before them.", func(r *R) uint64 { return r.KeepAlives }),
		n("keepalives_dropped_total", "Keep-alives not handed to the sink because records came before or after them.", func(r *R) uint64 { return r.KeepAlivesDropped }),
		g("backlog_messages", "Records the sink has not settled.", func(r *R) float64 { return float64(r.BacklogMessages) }),
		g("backlog_bytes", "Payload bytes of the records the sink has not settled.", func(r *R) float64 { return float64(r.BacklogBytes) }),
		g("backlog_oldest_timestamp_seconds", "When the oldest record handed to the sink and not settled was appended (0: none).", func(r *R) float64 { return unixSeconds(r.BacklogSince) }),
		g("cursor_acked", "The sink's cursor: every record up to it settled.", func(r *R) float64 { return float64(r.Acked) }),
		g("cursor_claimed", "Records up to it may have been handed to the sink.", func(r *R) float64 { return float64(r.Claimed) }),
	}
}

func sparkplugSeries(c *collector, labels ...string) []series[sparkplug.Stats] {
	type S = sparkplug.Stats
	n := func(name, help string, v func(*S) uint64) series[S] {
		return counter(c, "uagate_sparkplug_"+name, help, v, labels...)
	}
	g := func(name, help string, v func(*S) float64) series[S] {
		return gauge(c, "uagate_sparkplug_"+name, help, v, labels...)
	}
	return []series[S]{
		g("connected", "1 while the Sparkplug node is connected to its broker.", func(s *S) float64 { return b2f(s.Connected) }),
		g("online", "1 while the Sparkplug node is online (NBIRTH sent in this session).", func(s *S) float64 { return b2f(s.Online) }),
		g("host_online", "1 while the primary host's last STATE said online (0 without a primary host).", func(s *S) float64 { return b2f(s.HostOnline) }),
		g("host_timestamp_seconds", "Timestamp of the primary host's last STATE (0: none).", func(s *S) float64 { return unixSeconds(s.HostTimestamp) }),
		g("bdseq", "Birth/death sequence number of the node's current connection.", func(s *S) float64 { return float64(s.BdSeq) }),
		g("seq", "Sequence number of the last message the node sent.", func(s *S) float64 { return float64(s.Seq) }),
		g("devices", "Devices of the node.", func(s *S) float64 { return float64(s.Devices) }),
		g("devices_online", "Devices with a DBIRTH in the node's current session.", func(s *S) float64 { return float64(s.DevicesOnline) }),
		g("metrics", "Metrics of the node's devices.", func(s *S) float64 { return float64(s.Metrics) }),
		n("connects_total", "MQTT connections the node made.", func(s *S) uint64 { return s.Connects }),
		n("connect_failures_total", "MQTT connection attempts that failed.", func(s *S) uint64 { return s.ConnectFailures }),
		n("node_births_total", "NBIRTH messages sent.", func(s *S) uint64 { return s.NodeBirths }),
		n("rebirths_total", "Rebirth requests (NCMD Node Control/Rebirth) honoured.", func(s *S) uint64 { return s.Rebirths }),
		n("device_births_total", "DBIRTH messages sent.", func(s *S) uint64 { return s.DeviceBirths }),
		n("device_deaths_total", "DDEATH messages sent.", func(s *S) uint64 { return s.DeviceDeaths }),
		n("data_messages_total", "DDATA messages sent.", func(s *S) uint64 { return s.DataMessages }),
		n("metrics_encoded_total", "Metric values the node's feeds encoded.", func(s *S) uint64 { return s.MetricsEncoded }),
		n("historical_messages_total", "DDATA sent after a later birth, their older metrics marked historical.", func(s *S) uint64 { return s.Historical }),
		n("type_mismatches_total", "Values whose type was not their metric's datatype (the device is born again).", func(s *S) uint64 { return s.TypeMismatches }),
		n("unmapped_values_total", "Values of writers the node had no device for yet.", func(s *S) uint64 { return s.Unmapped }),
		n("stale_messages_total", "Data messages left out because their device died or its metrics changed before they went.", func(s *S) uint64 { return s.Stale }),
		n("stale_metrics_total", "Metrics left out of held data because their device no longer has a metric of that name and datatype.", func(s *S) uint64 { return s.StaleMetrics }),
		g("store_messages", "Data messages held for the next birth.", func(s *S) float64 { return float64(s.Store.Messages) }),
		g("store_bytes", "Bytes of the data messages held for the next birth.", func(s *S) float64 { return float64(s.Store.Bytes) }),
		n("store_dropped_total", "Held data messages dropped to make room.", func(s *S) uint64 { return s.Store.Dropped }),
		n("commands_total", "DCMD writes asked for.", func(s *S) uint64 { return s.Commands }),
		n("commands_denied_total", "DCMD writes refused (not allowed, unknown metric, wrong type, no command handler).", func(s *S) uint64 { return s.CommandsDenied }),
		n("commands_failed_total", "DCMD writes that failed.", func(s *S) uint64 { return s.CommandsFailed }),
		n("commands_busy_total", "DCMDs dropped because the command queue was full.", func(s *S) uint64 { return s.CommandsBusy }),
		n("state_messages_total", "STATE messages of the primary host received.", func(s *S) uint64 { return s.StateMessages }),
	}
}

func webSocketSeries(c *collector) []series[wssink.Stats] {
	type S = wssink.Stats
	n := func(name, help string, v func(*S) uint64) series[S] {
		return counter(c, "uagate_websocket_"+name, help, v)
	}
	return []series[S]{
		gauge(c, "uagate_websocket_clients", "WebSocket clients connected.", func(s *S) float64 { return float64(s.Clients) }),
		n("accepted_total", "WebSocket connections upgraded.", func(s *S) uint64 { return s.Accepted }),
		n("rejected_total", "WebSocket handshakes refused (token, origin, selection, limit, closed).", func(s *S) uint64 { return s.Rejected }),
		n("sent_messages_total", "Messages written to WebSocket clients (one per client).", func(s *S) uint64 { return s.Sent }),
		n("sent_bytes_total", "Payload bytes written to WebSocket clients.", func(s *S) uint64 { return s.Bytes }),
		n("slow_closed_total", "WebSocket clients closed because their queue was full.", func(s *S) uint64 { return s.SlowClosed }),
		n("idle_closed_total", "WebSocket clients closed because they did not subscribe in time.", func(s *S) uint64 { return s.IdleClosed }),
		gauge(c, "uagate_websocket_metadata_cached", "Metadata messages cached for new clients.", func(s *S) float64 { return float64(s.MetaData) }),
		n("metadata_refused_total", "Metadata messages not cached because the cache was full.", func(s *S) uint64 { return s.MetaFull }),
	}
}

func commandSeries(c *collector, labels ...string) []series[command.Stats] {
	type S = command.Stats
	n := func(name, help string, v func(*S) uint64) series[S] {
		return counter(c, "uagate_command_"+name, help, v, labels...)
	}
	return []series[S]{
		n("requests_total", "Commands received (refused ones included).", func(s *S) uint64 { return s.Requests }),
		n("good_total", "Commands done with a Good status.", func(s *S) uint64 { return s.Good }),
		n("bad_total", "Commands the server was asked and answered with a status not Good, or failed.", func(s *S) uint64 { return s.Bad }),
		n("denied_total", "Commands no rule allowed.", func(s *S) uint64 { return s.Denied }),
		n("rate_limited_total", "Commands over their caller's rate.", func(s *S) uint64 { return s.RateLimited }),
		n("busy_total", "Commands refused because the endpoint's command queue was full.", func(s *S) uint64 { return s.Busy }),
		n("invalid_total", "Commands refused as malformed, too large, of an unknown target or of the wrong type.", func(s *S) uint64 { return s.Invalid }),
		n("timeouts_total", "Commands not done within the endpoint's request timeout.", func(s *S) uint64 { return s.Timeouts }),
		n("unavailable_total", "Commands refused because the endpoint was not connected or the gateway was stopping.", func(s *S) uint64 { return s.Unavailable }),
		n("duplicates_total", "Commands answered from the idempotency window (not run again).", func(s *S) uint64 { return s.Duplicates }),
	}
}

// poolSeries are the series of a pool's counters: prefix uagate_pool_ for
// object pools, uagate_bufferpool_ for the size classes of buffer pools.
func poolSeries(c *collector, prefix, unit string, labels ...string) []series[pooling.PoolStats] {
	type P = pooling.PoolStats
	n := func(name, help string, v func(*P) uint64) series[P] {
		return counter(c, prefix+name, help, v, labels...)
	}
	return []series[P]{
		n("hits_total", "Gets served from the pool.", func(s *P) uint64 { return s.Hits }),
		n("misses_total", "Gets that had to allocate.", func(s *P) uint64 { return s.Misses }),
		n("puts_total", "Objects given back and kept.", func(s *P) uint64 { return s.Puts }),
		n("drops_total", "Objects given back to a full pool, left to the GC.", func(s *P) uint64 { return s.Drops }),
		n("double_puts_total", "Objects given back twice, ignored.", func(s *P) uint64 { return s.DoublePuts }),
		n("drained_total", "Idle objects let go by a drain.", func(s *P) uint64 { return s.Drained }),
		n("trimmed_total", "Idle objects let go by a trim.", func(s *P) uint64 { return s.Trimmed }),
		gauge(c, prefix+"idle_"+unit, "Objects waiting in the pool.", func(s *P) float64 { return float64(s.Idle) }, labels...),
		gauge(c, prefix+"capacity_"+unit, "Most idle objects the pool keeps.", func(s *P) float64 { return float64(s.Capacity) }, labels...),
		gauge(c, prefix+"hit_ratio", "Hits / (hits + misses) since the start.", func(s *P) float64 { return ratio(s.Hits, s.Misses) }, labels...),
	}
}

// classSeries are the series of a buffer pool's size classes.
func classSeries(c *collector, labels ...string) []series[pooling.BufferStats] {
	ps := poolSeries(c, "uagate_bufferpool_", "buffers", labels...)
	out := make([]series[pooling.BufferStats], len(ps))
	for i, p := range ps {
		out[i] = series[pooling.BufferStats]{p.d, p.t, func(s *pooling.BufferStats) float64 { return p.v(&s.PoolStats) }}
	}
	return out
}

// Describe sends every descriptor.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.ds {
		ch <- d
	}
}

func ratio(hits, misses uint64) float64 {
	if hits+misses == 0 {
		return 1 // nothing asked for: nothing missed
	}
	return float64(hits) / float64(hits+misses)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Collect reads the snapshots.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	count := func(d *desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.buildInfo, 1)
	if c.srv != nil {
		ks := c.srv.auth.state()
		gauge(c.keysInUse, float64(ks.Keys))
		gauge(c.keysStale, b2f(ks.Stale != ""))
		count(c.keysErrors, ks.Errors)
		for r := range refusalReasons {
			count(c.refused, c.srv.refused[r].Load(), refusalReasons[r])
		}
	}
	for _, e := range c.b.Endpoints() {
		for _, s := range sessionStates {
			gauge(c.epState, b2f(e.State == s.String()), e.Name, s.String())
		}
		gauge(c.epConnected, b2f(e.Connected), e.Name)
		count(c.epReconnects, e.Reconnects, e.Name)
		count(c.epConnects, e.Counters.Connects, e.Name)
		count(c.epReactivations, e.Counters.Reactivations, e.Name)
		count(c.epTransfers, e.Counters.Transfers, e.Name)
		count(c.epRecreations, e.Counters.Recreations, e.Name)
		var sum SubscriptionStatus
		for _, s := range e.Subscriptions {
			sum.Messages += s.Messages
			sum.KeepAlives += s.KeepAlives
			sum.DataChanges += s.DataChanges
			sum.Events += s.Events
			sum.Republished += s.Republished
			sum.Lost += s.Lost
			sum.Duplicates += s.Duplicates
			sum.Items += s.Items
			sum.FailedItems += s.FailedItems
		}
		count(c.subMessages, sum.Messages, e.Name)
		count(c.subKeepAlives, sum.KeepAlives, e.Name)
		count(c.subDataChanges, sum.DataChanges, e.Name)
		count(c.subEvents, sum.Events, e.Name)
		count(c.subRepublished, sum.Republished, e.Name)
		count(c.subLost, sum.Lost, e.Name)
		count(c.subDuplicates, sum.Duplicates, e.Name)
		gauge(c.subItems, float64(sum.Items), e.Name)
		gauge(c.subFailedItems, float64(sum.FailedItems), e.Name)
	}
	st := c.b.Stats()
	for i := range st.Groups {
		g := &st.Groups[i]
		collect(ch, c.groups, g, g.Name, g.Endpoint)
		for j := range g.Writers {
			collect(ch, c.writers, &g.Writers[j], g.Name, g.Writers[j].Name)
		}
	}
	if st.ScaleOut != nil {
		for _, h := range st.ScaleOut.Groups {
			gauge(c.leaseHeld, b2f(h.Local), h.Group)
		}
	}
	for _, s := range st.sinks() {
		collect(ch, c.sinks, &s.OutputStats, s.Name, s.Kind)
	}
	if st.WebSocket != nil {
		collect(ch, c.webSocket, st.WebSocket)
	}
	for i := range st.Sparkplug {
		collect(ch, c.sparkplug, &st.Sparkplug[i], st.Sparkplug[i].Name)
	}
	for i := range st.Pools {
		collect(ch, c.pools, &st.Pools[i].PoolStats, st.Pools[i].Name)
	}
	for i := range st.BufferPools {
		bp := &st.BufferPools[i]
		for j := range bp.Classes {
			collect(ch, c.classes, &bp.Classes[j], bp.Name, strconv.Itoa(bp.Classes[j].Size))
		}
		collect(ch, c.bufferPools, &bp.BufferPoolStats, bp.Name)
		// The pool of its Shared objects is an object pool of its own.
		collect(ch, c.pools, &bp.Shared, bp.Name+".shared")
	}
	for i := range st.Commands {
		collect(ch, c.commands, &st.Commands[i], st.Commands[i].Transport)
	}
	if st.Store != nil {
		collect(ch, c.store, st.Store)
		for i := range st.Store.Streams {
			s := &st.Store.Streams[i]
			collect(ch, c.streams, s, s.Name)
			for j := range s.Readers {
				collect(ch, c.readers, &s.Readers[j], s.Name, s.Readers[j].Consumer)
			}
		}
	}
	if c.h != nil {
		hist := func(d *desc) func(string, *Histogram) {
			return func(label string, x *Histogram) {
				s := x.Snapshot()
				ch <- prometheus.MustNewConstHistogram(d, s.Count, s.Sum, s.Buckets, label)
			}
		}
		c.h.each(c.h.roundTrip, hist(c.roundTrip))
		c.h.each(c.h.sourceToSink, hist(c.sourceToSink))
	}
}

// newMetricsHandler returns the /metrics handler over a registry of its
// own: the gateway's collector, the Go runtime and process collectors, and
// uagate_process_allocs_at_scrape_total.
//
// That last one is the process's heap allocations counted exactly
// (runtime.ReadMemStats, which flushes the processors' caches) when the
// scrape began, before the scrape allocated anything: the difference
// between two scrapes is what the process allocated between their starts,
// the first scrape's own allocations included, which two scrapes in a row
// measure. go_memstats_mallocs_total cannot tell it: it comes from
// runtime/metrics, which counts small objects by the span as the caches
// take them (thousands at a time), read while the other collectors
// allocate. Of two scrapes at once, each may report the other's start.
func newMetricsHandler(c *collector) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	var atScrape atomic.Uint64
	allocs := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "uagate_process_allocs_at_scrape_total",
		Help: "Heap allocations (objects) of the process when this scrape began, counted exactly: between two scrapes, what was allocated from the first's start to the second's, the first scrape's own included.",
	}, func() float64 { return float64(atScrape.Load()) })
	for _, x := range []prometheus.Collector{c, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), allocs} {
		if err := reg.Register(x); err != nil {
			return nil, err
		}
	}
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		atScrape.Store(ms.Mallocs)
		h.ServeHTTP(w, r)
	}), nil
}
