package api

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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
	grpIn, grpOut, grpMessages, grpBytes, grpErrors, grpUnacked, leaseHeld,
	sinkEnqueued, sinkSent, sinkConfirmed, sinkRetries, sinkErrors, sinkDropped, sinkUndelivered,
	sinkReconnects, sinkConnectFailures, sinkQueue, sinkInFlight, sinkConnected, sinkBytes,
	poolHits, poolMisses, poolDrops, poolIdle, poolCapacity, poolHitRatio,
	bufHits, bufMisses, bufDrops, bufHitRatio, bufOversize,
	roundTrip, sourceToSink *desc
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
	g := "group"
	c.grpIn = d("uagate_group_notifications_in_total", "Notifications the writer group received.", g, ep)
	c.grpOut = d("uagate_group_notifications_out_total", "Notifications the writer group wrote into messages.", g, ep)
	c.grpMessages = d("uagate_group_messages_total", "NetworkMessages the writer group produced.", g, ep)
	c.grpBytes = d("uagate_group_bytes_total", "Bytes of the NetworkMessages the writer group produced.", g, ep)
	c.grpErrors = d("uagate_group_errors_total", "Notifications the writer group could not encode or deliver.", g, ep)
	c.grpUnacked = d("uagate_group_unacked_sequence_numbers", "Notification messages not yet acknowledged upstream (waiting for at-least-once sinks).", g, ep)
	c.leaseHeld = d("uagate_scaleout_lease_held", "1 while this replica holds the writer group's lease and serves it (scale-out only).", g)
	k, kind := "sink", "kind"
	c.sinkEnqueued = d("uagate_sink_enqueued_messages_total", "Messages handed to the sink's queue.", k, kind)
	c.sinkSent = d("uagate_sink_sent_messages_total", "Messages the sink took (resends included).", k, kind)
	c.sinkConfirmed = d("uagate_sink_confirmed_messages_total", "Messages confirmed by the broker.", k, kind)
	c.sinkRetries = d("uagate_sink_retried_messages_total", "Messages resent after a failed confirmation.", k, kind)
	c.sinkErrors = d("uagate_sink_errors_total", "Failed confirmations and refused messages.", k, kind)
	c.sinkDropped = d("uagate_sink_dropped_messages_total", "Messages a drop-oldest queue dropped.", k, kind)
	c.sinkUndelivered = d("uagate_sink_undelivered_messages_total", "Messages settled as undelivered.", k, kind)
	c.sinkReconnects = d("uagate_sink_reconnects_total", "Connections made after the first.", k, kind)
	c.sinkConnectFailures = d("uagate_sink_connect_failures_total", "Failed connection attempts.", k, kind)
	c.sinkQueue = d("uagate_sink_queue_depth_messages", "Messages waiting in the sink's queue.", k, kind)
	c.sinkInFlight = d("uagate_sink_inflight_messages", "Messages published and not yet confirmed.", k, kind)
	c.sinkConnected = d("uagate_sink_connected", "1 while the sink is connected.", k, kind)
	c.sinkBytes = d("uagate_sink_sent_bytes_total", "Payload bytes the sink took.", k, kind)
	p := "pool"
	c.poolHits = d("uagate_pool_hits_total", "Gets served from the object pool.", p)
	c.poolMisses = d("uagate_pool_misses_total", "Gets that had to allocate.", p)
	c.poolDrops = d("uagate_pool_drops_total", "Objects given back to a full pool, left to the GC.", p)
	c.poolIdle = d("uagate_pool_idle_objects", "Objects waiting in the pool.", p)
	c.poolCapacity = d("uagate_pool_capacity_objects", "Most idle objects the pool keeps.", p)
	c.poolHitRatio = d("uagate_pool_hit_ratio", "Hits / (hits + misses) since the start.", p)
	cl := "class_bytes"
	c.bufHits = d("uagate_bufferpool_hits_total", "Buffer Gets served from the size class.", p, cl)
	c.bufMisses = d("uagate_bufferpool_misses_total", "Buffer Gets of the size class that had to allocate.", p, cl)
	c.bufDrops = d("uagate_bufferpool_drops_total", "Buffers given back to a full size class.", p, cl)
	c.bufHitRatio = d("uagate_bufferpool_hit_ratio", "Hits / (hits + misses) of the size class since the start.", p, cl)
	c.bufOversize = d("uagate_bufferpool_oversize_total", "Buffer Gets larger than the largest class (never pooled).", p)
	c.roundTrip = d("uagate_publish_round_trip_seconds", "Time from a Publish request sent to its response received.", ep)
	c.sourceToSink = d("uagate_sink_latency_seconds", "Time from a value's source timestamp (or arrival) to the sink's acceptance.", k)
	return c
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
	counter := func(d *desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.buildInfo, 1)
	for _, e := range c.b.Endpoints() {
		for _, s := range sessionStates {
			gauge(c.epState, b2f(e.State == s.String()), e.Name, s.String())
		}
		gauge(c.epConnected, b2f(e.Connected), e.Name)
		counter(c.epReconnects, e.Reconnects, e.Name)
		counter(c.epConnects, e.Counters.Connects, e.Name)
		counter(c.epReactivations, e.Counters.Reactivations, e.Name)
		counter(c.epTransfers, e.Counters.Transfers, e.Name)
		counter(c.epRecreations, e.Counters.Recreations, e.Name)
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
		counter(c.subMessages, sum.Messages, e.Name)
		counter(c.subKeepAlives, sum.KeepAlives, e.Name)
		counter(c.subDataChanges, sum.DataChanges, e.Name)
		counter(c.subEvents, sum.Events, e.Name)
		counter(c.subRepublished, sum.Republished, e.Name)
		counter(c.subLost, sum.Lost, e.Name)
		counter(c.subDuplicates, sum.Duplicates, e.Name)
		gauge(c.subItems, float64(sum.Items), e.Name)
		gauge(c.subFailedItems, float64(sum.FailedItems), e.Name)
	}
	st := c.b.Stats()
	for _, g := range st.Groups {
		counter(c.grpIn, g.NotificationsIn, g.Name, g.Endpoint)
		counter(c.grpOut, g.NotificationsOut, g.Name, g.Endpoint)
		counter(c.grpMessages, g.Messages, g.Name, g.Endpoint)
		counter(c.grpBytes, g.Bytes, g.Name, g.Endpoint)
		counter(c.grpErrors, g.Errors, g.Name, g.Endpoint)
		gauge(c.grpUnacked, float64(g.Unacked), g.Name, g.Endpoint)
	}
	if st.ScaleOut != nil {
		for _, h := range st.ScaleOut.Groups {
			gauge(c.leaseHeld, b2f(h.Local), h.Group)
		}
	}
	for _, s := range st.Sinks {
		o, l := &s.Output, []string{s.Output.Name, s.Kind}
		counter(c.sinkEnqueued, o.Enqueued, l...)
		counter(c.sinkSent, o.Sent, l...)
		counter(c.sinkConfirmed, o.Confirmed, l...)
		counter(c.sinkRetries, o.Retries, l...)
		counter(c.sinkErrors, o.Errors, l...)
		counter(c.sinkDropped, o.Dropped, l...)
		counter(c.sinkUndelivered, o.Undelivered, l...)
		counter(c.sinkReconnects, o.Reconnects, l...)
		counter(c.sinkConnectFailures, o.ConnectFailures, l...)
		gauge(c.sinkQueue, float64(o.Queued), l...)
		gauge(c.sinkInFlight, float64(o.InFlight), l...)
		gauge(c.sinkConnected, b2f(o.Connected), l...)
		counter(c.sinkBytes, s.Bytes, l...)
	}
	for _, p := range st.Pools {
		s := &p.Stats
		counter(c.poolHits, s.Hits, p.Name)
		counter(c.poolMisses, s.Misses, p.Name)
		counter(c.poolDrops, s.Drops, p.Name)
		gauge(c.poolIdle, float64(s.Idle), p.Name)
		gauge(c.poolCapacity, float64(s.Capacity), p.Name)
		gauge(c.poolHitRatio, ratio(s.Hits, s.Misses), p.Name)
	}
	for _, bp := range st.BufferPools {
		for _, cl := range bp.Stats.Classes {
			size := strconv.Itoa(cl.Size)
			counter(c.bufHits, cl.Hits, bp.Name, size)
			counter(c.bufMisses, cl.Misses, bp.Name, size)
			counter(c.bufDrops, cl.Drops, bp.Name, size)
			gauge(c.bufHitRatio, ratio(cl.Hits, cl.Misses), bp.Name, size)
		}
		counter(c.bufOversize, bp.Stats.Oversize, bp.Name)
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
// own: the gateway's collector and the Go runtime and process collectors.
func newMetricsHandler(c *collector) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	for _, x := range []prometheus.Collector{c, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(x); err != nil {
			return nil, err
		}
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}), nil
}
