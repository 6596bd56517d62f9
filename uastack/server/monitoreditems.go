package server

import (
	"math"
	"time"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// The monitored item services (Part 4 §5.12) and the items' lifecycle:
// parameters revised, registered with the sampler, removed.

func (s *Server) createMonitoredItems(sess *session, ch *channel, r *uasc.Request, m *ua.CreateMonitoredItemsRequest) {
	switch {
	case len(m.ItemsToCreate) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.ItemsToCreate)) > s.cfg.MaxMonitoredItemsPerCall:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	case m.TimestampsToReturn < ua.TimestampsToReturnSource || m.TimestampsToReturn > ua.TimestampsToReturnNeither:
		s.fault(ch, r, ua.StatusBadTimestampsToReturnInvalid)
		return
	}
	sub := sess.sub(m.SubscriptionID)
	if sub == nil {
		s.fault(ch, r, ua.StatusBadSubscriptionIdInvalid)
		return
	}
	sub.mu.Lock()
	pubInterval := sub.interval
	sub.mu.Unlock()
	results := make([]ua.MonitoredItemCreateResult, len(m.ItemsToCreate))
	now := time.Now()
	for i := range m.ItemsToCreate {
		req := &m.ItemsToCreate[i]
		it, res := s.newItem(sub, pubInterval, &req.ItemToMonitor, req.MonitoringMode, &req.RequestedParameters, m.TimestampsToReturn)
		if res.StatusCode == ua.StatusGood {
			res.StatusCode = s.register(it, now)
			if res.StatusCode == ua.StatusGood {
				res.MonitoredItemID = it.id
			}
		}
		results[i] = res
	}
	s.sweepSoon(sess)
	s.respond(ch, r, &ua.CreateMonitoredItemsResponse{Results: results})
}

// newItem checks a request to monitor and builds the item (not registered).
func (s *Server) newItem(sub *subscription, pubInterval time.Duration, rv *ua.ReadValueID, mode ua.MonitoringMode,
	p *ua.MonitoringParameters, ts ua.TimestampsToReturn) (*monitoredItem, ua.MonitoredItemCreateResult) {
	var res ua.MonitoredItemCreateResult
	fail := func(st ua.StatusCode) (*monitoredItem, ua.MonitoredItemCreateResult) {
		res.StatusCode = st
		return nil, res
	}
	if mode < ua.MonitoringModeDisabled || mode > ua.MonitoringModeReporting {
		return fail(ua.StatusBadMonitoringModeInvalid)
	}
	n := s.as.get(rv.NodeID)
	if n == nil {
		return fail(ua.StatusBadNodeIdUnknown)
	}
	if !attributeValid(n, rv.AttributeID) {
		return fail(ua.StatusBadAttributeIdInvalid)
	}
	if rv.IndexRange != "" {
		return fail(ua.StatusBadIndexRangeInvalid)
	}
	if !rv.DataEncoding.IsNull() {
		return fail(ua.StatusBadDataEncodingInvalid)
	}
	it := &monitoredItem{sub: sub, node: n, attr: rv.AttributeID, mode: mode, ts: ts}
	if n.gen != nil && rv.AttributeID == attrValue {
		it.gen, it.isGen = *n.gen, true
	}
	if st := s.applyParams(it, pubInterval, p, &res); st != ua.StatusGood {
		return fail(st)
	}
	return it, res
}

// applyParams checks and applies monitoring parameters (on a new item, or
// under sub.mu on an existing one), filling in the revised values.
func (s *Server) applyParams(it *monitoredItem, pubInterval time.Duration, p *ua.MonitoringParameters, res *ua.MonitoredItemCreateResult) ua.StatusCode {
	n := it.node
	trigger, deadband, absDB := ua.DataChangeTriggerStatusValue, ua.DeadbandTypeNone, 0.0
	var evf *eventFilter
	isEvent := it.attr == attrEventNotifier
	switch f := p.Filter.Value.(type) {
	case nil:
		if p.Filter.Body != nil {
			return ua.StatusBadMonitoredItemFilterUnsupported
		}
		if isEvent {
			return ua.StatusBadMonitoredItemFilterInvalid
		}
	case *ua.DataChangeFilter:
		if it.attr != attrValue {
			return ua.StatusBadFilterNotAllowed
		}
		if f.Trigger < ua.DataChangeTriggerStatus || f.Trigger > ua.DataChangeTriggerStatusValueTimestamp {
			return ua.StatusBadMonitoredItemFilterInvalid
		}
		trigger = f.Trigger
		switch ua.DeadbandType(f.DeadbandType) {
		case ua.DeadbandTypeNone:
		case ua.DeadbandTypeAbsolute:
			if f.DeadbandValue < 0 || math.IsNaN(f.DeadbandValue) {
				return ua.StatusBadDeadbandFilterInvalid
			}
			if !numericType(s.as, n) {
				return ua.StatusBadFilterNotAllowed
			}
			deadband, absDB = ua.DeadbandTypeAbsolute, f.DeadbandValue
		case ua.DeadbandTypePercent:
			if f.DeadbandValue < 0 || f.DeadbandValue > 100 || math.IsNaN(f.DeadbandValue) {
				return ua.StatusBadDeadbandFilterInvalid
			}
			if n.euRange == nil {
				return ua.StatusBadMonitoredItemFilterUnsupported
			}
			deadband, absDB = ua.DeadbandTypePercent, f.DeadbandValue/100*math.Abs(n.euRange.High-n.euRange.Low)
		default:
			return ua.StatusBadDeadbandFilterInvalid
		}
	case *ua.EventFilter:
		if !isEvent {
			return ua.StatusBadFilterNotAllowed
		}
		if n.events == nil {
			return ua.StatusBadNotSupported
		}
		var fres ua.EventFilterResult
		var st ua.StatusCode
		evf, fres, st = s.newEventFilter(f)
		if st != ua.StatusGood {
			res.FilterResult = ua.NewExtensionObject(&fres)
			return st
		}
		if fres.SelectClauseResults != nil || fres.WhereClauseResult.ElementResults != nil {
			res.FilterResult = ua.NewExtensionObject(&fres)
		}
	default:
		return ua.StatusBadMonitoredItemFilterUnsupported
	}
	if isEvent && evf == nil {
		return ua.StatusBadMonitoredItemFilterInvalid
	}
	qs := p.QueueSize
	if isEvent {
		if qs == 0 {
			qs = defaultEventQueueSize
		}
		it.interval = 0
		res.RevisedSamplingInterval = 0
	} else {
		if qs == 0 {
			qs = 1
		}
		it.interval = s.reviseSampling(p.SamplingInterval, pubInterval)
		res.RevisedSamplingInterval = float64(it.interval) / float64(time.Millisecond)
	}
	qs = min(qs, s.cfg.MaxQueueSize)
	res.RevisedQueueSize = qs
	it.event = isEvent
	it.clientHandle = p.ClientHandle
	it.discardOldest = p.DiscardOldest
	it.trigger, it.deadband, it.absDB, it.evFilter = trigger, deadband, absDB, evf
	if qs != it.queueSize && it.queueSize != 0 {
		it.resize(qs)
	}
	it.queueSize = qs
	return ua.StatusGood
}

// resize changes the queue size of an existing item, keeping the newest values
// (sub.mu held).
func (it *monitoredItem) resize(qs uint32) {
	if it.dq.buf != nil {
		resizeRing(&it.dq, qs, &it.dq1)
	}
	if it.tq.buf != nil {
		resizeRing(&it.tq, qs, &it.tq1)
	}
	for it.evLn > int(qs) {
		it.evq[it.evHead] = ua.EventFieldList{}
		it.evHead = (it.evHead + 1) % len(it.evq)
		it.evLn--
	}
	eq := make([]ua.EventFieldList, max(min(int(qs), 16), it.evLn))
	for i := 0; i < it.evLn; i++ {
		eq[i] = it.evq[(it.evHead+i)%len(it.evq)]
	}
	it.evq, it.evHead = eq, 0
}

// numericType reports whether a variable's values are numbers.
func numericType(as *addressSpace, n *node) bool {
	if n.class != ua.NodeClassVariable {
		return false
	}
	dt := as.get(n.dataType)
	return dt != nil && isSubtype(dt, as.ns0(ua.ID_Number))
}

// register adds a new item to its subscription and to its sampling group or
// event source, and queues its first value.
func (s *Server) register(it *monitoredItem, now time.Time) ua.StatusCode {
	sub := it.sub
	var g *rateGroup
	var es *eventSource
	switch {
	case it.event:
		es = it.node.events
		es.mu.Lock()
		defer es.mu.Unlock()
	case it.attr == attrValue:
		g = s.sampler.group(it.interval)
		g.mu.Lock()
		defer g.mu.Unlock()
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.closed {
		return ua.StatusBadSubscriptionIdInvalid
	}
	if len(sub.items) >= s.cfg.MaxMonitoredItemsPerSubscription || s.stats.items.Load() >= int64(s.cfg.MaxMonitoredItems) {
		return ua.StatusBadTooManyMonitoredItems
	}
	for {
		it.id = s.lastItem.Add(1)
		if _, dup := sub.items[it.id]; it.id != 0 && !dup {
			break
		}
	}
	sub.items[it.id] = it
	s.stats.items.Add(1)
	switch {
	case es != nil:
		it.evSource = es
		es.items = append(es.items, it)
	case g != nil:
		it.group = g
		sub.addToBucket(it, g)
		if it.mode != ua.MonitoringModeDisabled {
			c := sampleClock{ns: now.UnixNano()}
			c.dt = unixToDateTime(c.ns)
			it.sample(&c)
		}
	default:
		if it.mode != ua.MonitoringModeDisabled {
			dv := s.readAttribute(it.node, it.attr, ua.DateTime(0))
			dv.ServerTimestamp = unixToDateTime(now.UnixNano())
			it.offer(&dv)
		}
	}
	return ua.StatusGood
}

// addToBucket puts it into sub's bucket of group g (g.mu and sub.mu held).
func (sub *subscription) addToBucket(it *monitoredItem, g *rateGroup) {
	b := sub.buckets[g.interval]
	if b == nil {
		b = &bucket{sub: sub}
		sub.buckets[g.interval] = b
		g.add(b)
	}
	it.bucket, it.bidx = b, len(b.items)
	b.items = append(b.items, it)
}

// removeFromBucket takes it out of its bucket (g.mu and sub.mu held).
func (sub *subscription) removeFromBucket(it *monitoredItem, g *rateGroup) {
	b := it.bucket
	if b == nil {
		return
	}
	last := b.items[len(b.items)-1]
	b.items[it.bidx], last.bidx = last, it.bidx
	b.items[len(b.items)-1] = nil
	b.items = b.items[:len(b.items)-1]
	it.bucket = nil
	if len(b.items) == 0 {
		delete(sub.buckets, g.interval)
		g.remove(b)
	}
}

// removeItems unregisters items from their groups and event sources. The
// caller marked them removed (or closed the subscription).
func (s *Server) removeItems(sub *subscription, items []*monitoredItem) {
	for _, it := range items {
		switch {
		case it.group != nil:
			g := it.group
			g.mu.Lock()
			sub.mu.Lock()
			sub.removeFromBucket(it, g)
			sub.mu.Unlock()
			g.mu.Unlock()
		case it.evSource != nil:
			es := it.evSource
			es.mu.Lock()
			for i, x := range es.items {
				if x == it {
					es.items[i] = es.items[len(es.items)-1]
					es.items[len(es.items)-1] = nil
					es.items = es.items[:len(es.items)-1]
					break
				}
			}
			es.mu.Unlock()
		}
		s.stats.items.Add(-1)
	}
}

func (s *Server) modifyMonitoredItems(sess *session, ch *channel, r *uasc.Request, m *ua.ModifyMonitoredItemsRequest) {
	switch {
	case len(m.ItemsToModify) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.ItemsToModify)) > s.cfg.MaxMonitoredItemsPerCall:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	case m.TimestampsToReturn < ua.TimestampsToReturnSource || m.TimestampsToReturn > ua.TimestampsToReturnNeither:
		s.fault(ch, r, ua.StatusBadTimestampsToReturnInvalid)
		return
	}
	sub := sess.sub(m.SubscriptionID)
	if sub == nil {
		s.fault(ch, r, ua.StatusBadSubscriptionIdInvalid)
		return
	}
	results := make([]ua.MonitoredItemModifyResult, len(m.ItemsToModify))
	for i := range m.ItemsToModify {
		req := &m.ItemsToModify[i]
		sub.mu.Lock()
		it := sub.items[req.MonitoredItemID]
		if it == nil {
			sub.mu.Unlock()
			results[i].StatusCode = ua.StatusBadMonitoredItemIdInvalid
			continue
		}
		oldGroup := it.group
		var cr ua.MonitoredItemCreateResult
		// Check on a copy, so that a refused modification changes nothing.
		trial := *it
		trial.dq, trial.tq, trial.evq = ring[dvEntry]{}, ring[tickEntry]{}, nil
		trial.queueSize = 0
		st := s.applyParams(&trial, sub.interval, &req.RequestedParameters, &cr)
		if st == ua.StatusGood {
			st = s.applyParams(it, sub.interval, &req.RequestedParameters, &cr)
			it.ts = m.TimestampsToReturn
		}
		newInterval := it.interval
		sub.mu.Unlock()
		results[i] = ua.MonitoredItemModifyResult{StatusCode: st, RevisedSamplingInterval: cr.RevisedSamplingInterval,
			RevisedQueueSize: cr.RevisedQueueSize, FilterResult: cr.FilterResult}
		if st != ua.StatusGood || oldGroup == nil || oldGroup.interval == newInterval {
			continue
		}
		// Move to the new rate group.
		oldGroup.mu.Lock()
		sub.mu.Lock()
		sub.removeFromBucket(it, oldGroup)
		it.group = nil
		sub.mu.Unlock()
		oldGroup.mu.Unlock()
		g := s.sampler.group(newInterval)
		g.mu.Lock()
		sub.mu.Lock()
		if !sub.closed && !it.removed {
			it.group = g
			sub.addToBucket(it, g)
		}
		sub.mu.Unlock()
		g.mu.Unlock()
	}
	s.respond(ch, r, &ua.ModifyMonitoredItemsResponse{Results: results})
}

func (s *Server) setMonitoringMode(sess *session, ch *channel, r *uasc.Request, m *ua.SetMonitoringModeRequest) {
	switch {
	case len(m.MonitoredItemIDs) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.MonitoredItemIDs)) > s.cfg.MaxMonitoredItemsPerCall:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	case m.MonitoringMode < ua.MonitoringModeDisabled || m.MonitoringMode > ua.MonitoringModeReporting:
		s.fault(ch, r, ua.StatusBadMonitoringModeInvalid)
		return
	}
	sub := sess.sub(m.SubscriptionID)
	if sub == nil {
		s.fault(ch, r, ua.StatusBadSubscriptionIdInvalid)
		return
	}
	results := make([]ua.StatusCode, len(m.MonitoredItemIDs))
	sub.mu.Lock()
	for i, id := range m.MonitoredItemIDs {
		it := sub.items[id]
		if it == nil {
			results[i] = ua.StatusBadMonitoredItemIdInvalid
			continue
		}
		old := it.mode
		it.mode = m.MonitoringMode
		switch {
		case it.mode == ua.MonitoringModeDisabled:
			it.clearQueue()
			it.sampled, it.hasLast = false, false
		case old == ua.MonitoringModeDisabled:
			it.sampled, it.hasLast = false, false
		case it.mode == ua.MonitoringModeReporting && (it.queuedValues() > 0 || it.evLn > 0):
			it.markPending()
		}
	}
	sub.mu.Unlock()
	s.respond(ch, r, &ua.SetMonitoringModeResponse{Results: results})
}

func (s *Server) deleteMonitoredItems(sess *session, ch *channel, r *uasc.Request, m *ua.DeleteMonitoredItemsRequest) {
	switch {
	case len(m.MonitoredItemIDs) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.MonitoredItemIDs)) > s.cfg.MaxMonitoredItemsPerCall:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	}
	sub := sess.sub(m.SubscriptionID)
	if sub == nil {
		s.fault(ch, r, ua.StatusBadSubscriptionIdInvalid)
		return
	}
	results := make([]ua.StatusCode, len(m.MonitoredItemIDs))
	var removed []*monitoredItem
	sub.mu.Lock()
	for i, id := range m.MonitoredItemIDs {
		it := sub.items[id]
		if it == nil {
			results[i] = ua.StatusBadMonitoredItemIdInvalid
			continue
		}
		delete(sub.items, id)
		it.removed = true
		it.clearQueue()
		removed = append(removed, it)
	}
	sub.mu.Unlock()
	s.removeItems(sub, removed)
	s.respond(ch, r, &ua.DeleteMonitoredItemsResponse{Results: results})
}

// getMonitoredItemsMethod is Server.GetMonitoredItems(SubscriptionId) ->
// (ServerHandles, ClientHandles).
func (s *Server) getMonitoredItemsMethod(c *callContext, in []ua.Variant) ([]ua.Variant, ua.StatusCode) {
	sub := c.sess.sub(in[0].UInt32())
	if sub == nil {
		return nil, ua.StatusBadSubscriptionIdInvalid
	}
	sub.mu.Lock()
	server := make([]uint32, 0, len(sub.items))
	client := make([]uint32, 0, len(sub.items))
	for id, it := range sub.items {
		server = append(server, id)
		client = append(client, it.clientHandle)
	}
	sub.mu.Unlock()
	return []ua.Variant{ua.MustVariant(server), ua.MustVariant(client)}, ua.StatusGood
}
