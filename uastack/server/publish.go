package server

import (
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// publish handles a Publish request: it processes the acknowledgements, then
// either answers at once (a subscription has something to send) or parks the
// request in its session, freeing the worker. The publishing sweep answers
// parked requests when their subscriptions' timers fire.
func (s *Server) publish(sess *session, ch *channel, r *uasc.Request, m *ua.PublishRequest) {
	var results []ua.StatusCode
	if n := len(m.SubscriptionAcknowledgements); n > 0 {
		results = make([]ua.StatusCode, n)
	}
	now := s.now()
	var out []sendItem
	sess.mu.Lock()
	if sess.closed.Load() {
		sess.mu.Unlock()
		s.fault(ch, r, ua.StatusBadSessionClosed)
		return
	}
	for i, a := range m.SubscriptionAcknowledgements {
		results[i] = ua.StatusBadSubscriptionIdInvalid
		for _, sub := range sess.subs {
			if sub.id == a.SubscriptionID {
				sub.mu.Lock()
				results[i] = sub.ack(a.SequenceNumber)
				sub.mu.Unlock()
				break
			}
		}
	}
	if len(sess.subs) == 0 && len(sess.statusQ) == 0 {
		sess.mu.Unlock()
		s.fault(ch, r, ua.StatusBadNoSubscription)
		return
	}
	pp := parkedPublish{ch: ch, r: r, results: results}
	if r.TimeoutHint > 0 {
		pp.deadline = now + int64(r.TimeoutHint)
	}
	if len(sess.publishQ) >= s.cfg.MaxPublishRequestsPerSession {
		old := sess.publishQ[0]
		copy(sess.publishQ, sess.publishQ[1:])
		sess.publishQ[len(sess.publishQ)-1] = parkedPublish{}
		sess.publishQ = sess.publishQ[:len(sess.publishQ)-1]
		out = append(out, sendItem{ch: old.ch, r: old.r, fault: ua.StatusBadTooManyPublishRequests})
	}
	sess.publishQ = append(sess.publishQ, pp)
	out = s.serveLocked(sess, ua.Now(), out)
	parked := len(sess.publishQ) > 0
	sess.mu.Unlock()
	if parked && pp.deadline > 0 {
		// Let the next sweep see the deadline (seconds away, as a rule: no
		// need to wake it for every parked request).
		sess.nextDue.Store(0)
	}
	s.send(out)
}

// serveLocked pairs parked Publish requests with subscriptions that have
// something to send (sess.mu held): status changes first, then the ready
// subscriptions by priority, round robin among equals.
func (s *Server) serveLocked(sess *session, now ua.DateTime, out []sendItem) []sendItem {
	for len(sess.publishQ) > 0 {
		if len(sess.statusQ) > 0 {
			sm := sess.statusQ[0]
			sess.statusQ = sess.statusQ[1:]
			pp := sess.popPublish()
			scn := &ua.StatusChangeNotification{Status: sm.status}
			out = append(out, sendItem{ch: pp.ch, r: pp.r, resp: &ua.PublishResponse{
				SubscriptionID: sm.subID,
				Results:        pp.results,
				NotificationMessage: ua.NotificationMessage{
					SequenceNumber: sm.seq, PublishTime: now,
					NotificationData: []ua.ExtensionObject{ua.NewExtensionObject(scn)},
				},
			}})
			s.stats.publishResponses.Add(1)
			continue
		}
		sub := sess.pickReady()
		if sub == nil {
			break
		}
		pp := sess.popPublish()
		sub.mu.Lock()
		out = append(out, sub.build(&pp, now))
		sub.mu.Unlock()
	}
	return out
}

// popPublish takes the oldest parked request (mu held).
func (sess *session) popPublish() parkedPublish {
	pp := sess.publishQ[0]
	copy(sess.publishQ, sess.publishQ[1:])
	sess.publishQ[len(sess.publishQ)-1] = parkedPublish{}
	sess.publishQ = sess.publishQ[:len(sess.publishQ)-1]
	return pp
}

// pickReady returns the ready subscription of highest priority, starting the
// search after the last one served (mu held).
func (sess *session) pickReady() *subscription {
	var best *subscription
	bestIdx, bestPrio := -1, -1
	n := len(sess.subs)
	for k := 0; k < n; k++ {
		i := (sess.rr + k) % n
		sub := sess.subs[i]
		sub.mu.Lock()
		ready, prio := sub.ready != notReady, int(sub.priority)
		sub.mu.Unlock()
		if ready && prio > bestPrio {
			best, bestIdx, bestPrio = sub, i, prio
		}
	}
	if best != nil {
		sess.rr = bestIdx + 1
	}
	return best
}

// senderQueue bounds the Publish responses waiting to be written to one
// channel. A client that lets it fill up reads slower than it asked to be
// served: its channel is closed rather than buffered for without end.
const senderQueue = 256

// send hands responses built under the locks to their channels' senders, so
// that neither the publishing sweep nor a worker ever waits for a slow
// client's socket, and the responses of a channel keep their order.
func (s *Server) send(out []sendItem) {
	for i := range out {
		it := out[i]
		out[i] = sendItem{}
		ch := it.ch
		if ch.closed.Load() {
			it.release()
			continue
		}
		ch.startSender(s)
		select {
		case ch.out <- it:
		default:
			s.log.Warn("server: client too slow, closing its channel", "channel", ch.ChannelID(), "queued", senderQueue)
			it.release()
			ch.close()
		}
	}
}

// release gives back what an unsent item holds.
func (it *sendItem) release() {
	if it.ret != nil {
		it.ret.unref()
		it.ret = nil
	}
}

// startSender starts the channel's sender goroutine once.
func (ch *channel) startSender(s *Server) {
	ch.senderOnce.Do(func() {
		ch.out = make(chan sendItem, senderQueue)
		s.wg.Add(1)
		go s.senderLoop(ch)
	})
}

// senderLoop writes a channel's queued responses until the channel or the
// server ends.
func (s *Server) senderLoop(ch *channel) {
	defer s.wg.Done()
	for {
		select {
		case it := <-ch.out:
			switch {
			case ch.closed.Load():
			case it.fault != 0:
				s.fault(it.ch, it.r, it.fault)
			default:
				s.respond(it.ch, it.r, it.resp)
			}
			it.release()
		case <-ch.done:
			s.drainSender(ch)
			return
		case <-s.ctx.Done():
			s.drainSender(ch)
			return
		}
	}
}

func (s *Server) drainSender(ch *channel) {
	for {
		select {
		case it := <-ch.out:
			it.release()
		default:
			return
		}
	}
}

// minPublishWait is the shortest wait between two publishing sweeps: it
// bounds their rate when many subscriptions fall due at different instants.
const minPublishWait = time.Millisecond

// publishLoop runs the publishing sweep when the next session falls due,
// at least every PublishResolution. A fixed tick would run a subscription's
// timer late by up to a tick (on average half of one), which is latency
// added to every notification. A session whose due time changed asks for a
// sweep at once (sweepSoon).
func (s *Server) publishLoop() {
	defer s.wg.Done()
	res := s.cfg.PublishResolution
	t := time.NewTimer(res)
	defer t.Stop()
	var list []*session
	last := s.now()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.sweepKick:
			// (Go ≥ 1.23: no stale tick after Stop or Reset.)
			if since := time.Duration(s.now() - last); since < minPublishWait {
				t.Reset(minPublishWait - since)
				continue
			}
			t.Stop()
		case <-t.C:
		}
		last = s.now()
		var next int64
		list, next = s.sweep(list[:0])
		wait := res
		if next > 0 {
			wait = publishWait(time.Duration(next-s.now()), res)
		}
		t.Reset(wait)
	}
}

// sweepSoon makes the next publishing sweep look at sess, and runs it now
// (or a millisecond after the last one): something changed its due time (a
// subscription, its items, an activation).
func (s *Server) sweepSoon(sess *session) {
	sess.nextDue.Store(0)
	select {
	case s.sweepKick <- struct{}{}:
	default:
	}
}

// publishWait is the wait until the next sweep, d being the time until the
// earliest session falls due (≤ 0: it passed during the sweep).
func publishWait(d, res time.Duration) time.Duration {
	switch {
	case d > res:
		return res
	case d < minPublishWait:
		return minPublishWait
	}
	return d
}

// sweep runs the publishing timers of every session, answers the Publish
// requests that became answerable, expires Publish requests, subscriptions
// and sessions. Many sessions are swept in parallel. It returns the earliest
// time (Server.now) after now a session falls due, 0 when none does.
func (s *Server) sweep(list []*session) ([]*session, int64) {
	now := s.now()
	dt := ua.Now()
	s.sessMu.RLock()
	for _, sess := range s.sessions {
		list = append(list, sess)
	}
	s.sessMu.RUnlock()
	if w := runtime.GOMAXPROCS(0); len(list) >= parallelSweepThreshold && w > 1 {
		var wg sync.WaitGroup
		chunk := (len(list) + w - 1) / w
		for i := 0; i < len(list); i += chunk {
			part := list[i:min(i+chunk, len(list))]
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out []sendItem
				for _, sess := range part {
					out = s.sweepSession(sess, now, dt, out[:0])
				}
			}()
		}
		wg.Wait()
	} else {
		var out []sendItem
		for _, sess := range list {
			out = s.sweepSession(sess, now, dt, out[:0])
		}
	}
	s.sweepOrphans(now)
	next := int64(math.MaxInt64)
	for _, sess := range list {
		if sess.closed.Load() {
			continue
		}
		// One due already (waiting for a Publish request, or changed) is
		// swept within the resolution anyway.
		if due := sess.nextDue.Load(); due > now {
			next = min(next, due)
		}
	}
	if next == math.MaxInt64 {
		next = 0
	}
	clear(list)
	return list, next
}

// sweepSession runs one session's part of the sweep. out is scratch space.
func (s *Server) sweepSession(sess *session, now int64, dt ua.DateTime, out []sendItem) []sendItem {
	if now < sess.nextDue.Load() || sess.closed.Load() {
		return out
	}
	if now-sess.lastSeen.Load() > sess.timeout {
		s.stats.sessionsTimedOut.Add(1)
		s.log.Debug("server: session timed out", "session", sess.id)
		s.closeSession(sess, false, ua.StatusBadSessionClosed)
		return out
	}
	next := sess.lastSeen.Load() + sess.timeout + 1
	var expired []*subscription
	sess.mu.Lock()
	// Expire Publish requests past their timeout hint.
	kept := sess.publishQ[:0]
	for _, pp := range sess.publishQ {
		if pp.deadline > 0 && now >= pp.deadline {
			out = append(out, sendItem{ch: pp.ch, r: pp.r, fault: ua.StatusBadTimeout})
			continue
		}
		kept = append(kept, pp)
	}
	clear(sess.publishQ[len(kept):])
	sess.publishQ = kept
	have := len(sess.publishQ) > 0
	for _, sub := range sess.subs {
		sub.mu.Lock()
		if sub.timer(now, have) {
			expired = append(expired, sub)
		}
		next = min(next, sub.nextPub)
		sub.mu.Unlock()
	}
	for _, sub := range expired {
		for j, x := range sess.subs {
			if x == sub {
				sess.subs = append(sess.subs[:j], sess.subs[j+1:]...)
				break
			}
		}
		sub.mu.Lock()
		seq := sub.peekSeq()
		sub.mu.Unlock()
		sess.statusQ = append(sess.statusQ, statusMessage{subID: sub.id, seq: seq, status: ua.StatusBadTimeout})
	}
	out = s.serveLocked(sess, dt, out)
	if len(sess.subs) == 0 && len(sess.statusQ) == 0 {
		// Nothing will ever answer them.
		for _, pp := range sess.publishQ {
			out = append(out, sendItem{ch: pp.ch, r: pp.r, fault: ua.StatusBadNoSubscription})
		}
		clear(sess.publishQ)
		sess.publishQ = sess.publishQ[:0]
	}
	for _, pp := range sess.publishQ {
		if pp.deadline > 0 {
			next = min(next, pp.deadline)
		}
	}
	if len(sess.statusQ) > 0 {
		next = now // try again on the next sweep
	}
	sess.mu.Unlock()
	sess.nextDue.Store(next)
	for _, sub := range expired {
		s.stats.subsExpired.Add(1)
		s.deleteSubscription(sub)
	}
	s.send(out)
	return out[:0]
}

// sweepOrphans expires the subscriptions without a session.
func (s *Server) sweepOrphans(now int64) {
	s.subsMu.Lock()
	if len(s.orphans) == 0 {
		s.subsMu.Unlock()
		return
	}
	orphans := make([]*subscription, 0, len(s.orphans))
	for sub := range s.orphans {
		orphans = append(orphans, sub)
	}
	s.subsMu.Unlock()
	for _, sub := range orphans {
		sub.mu.Lock()
		expired := sub.sess == nil && sub.timer(now, false)
		sub.mu.Unlock()
		if expired {
			s.stats.subsExpired.Add(1)
			s.deleteSubscription(sub)
		}
	}
}

// flushNoSubscription answers the parked Publish requests of a session left
// without subscriptions with Bad_NoSubscription.
func (s *Server) flushNoSubscription(sess *session) {
	sess.mu.Lock()
	var out []sendItem
	if len(sess.subs) == 0 && len(sess.statusQ) == 0 {
		for _, pp := range sess.publishQ {
			out = append(out, sendItem{ch: pp.ch, r: pp.r, fault: ua.StatusBadNoSubscription})
		}
		clear(sess.publishQ)
		sess.publishQ = sess.publishQ[:0]
	}
	sess.mu.Unlock()
	s.send(out)
}
