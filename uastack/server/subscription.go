package server

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// readiness says what a subscription has to send once a Publish request is
// available.
type readiness uint8

const (
	notReady readiness = iota
	readyData
	readyKeepAlive
)

// subscription is an OPC UA subscription. Everything below mu is guarded by it;
// sampling (sampling.go) and publishing (publish.go) both work under it.
type subscription struct {
	id  uint32
	srv *Server

	mu       sync.Mutex
	sess     *session // the owner; nil when orphaned (its session closed)
	owner    string   // the identity of the session that owns it
	closed   bool
	interval time.Duration
	lifetime uint32 // in publishing intervals
	maxKA    uint32 // keep-alive count
	maxNotif uint32
	priority byte
	enabled  bool

	items   map[uint32]*monitoredItem
	buckets map[time.Duration]*bucket // the items sampled at each rate
	pending []*monitoredItem          // items with queued notifications, oldest first

	seq       uint32      // last sequence number used
	retrans   []*retained // sent, not yet acknowledged; oldest first
	nextPub   int64       // Server.now of the next publishing cycle
	kaCount   uint32      // publishing cycles since the last message
	lifeCount uint32      // publishing cycles without a Publish request available
	ready     readiness
	scratch   ua.Encoder // to measure values whose size is not obvious
	scratchB  []byte
}

// retained is a notification message that was sent and is kept for Republish
// until acknowledged. It holds pooled notifications; refs counts the
// retransmission queue and the senders writing it, and the last unref releases
// everything.
type retained struct {
	pooling.Header
	msg  ua.NotificationMessage
	refs atomic.Int32
}

var retainedPool = pooling.NewPool[retained](0, func(r *retained) {
	r.msg.Release() // gives the notifications back, keeps the slice
	*r = retained{msg: ua.NotificationMessage{NotificationData: r.msg.NotificationData[:0]}}
})

func init() { pooling.Register("server.retained", retainedPool) }

func (r *retained) unref() {
	if r.refs.Add(-1) == 0 {
		retainedPool.Put(r)
	}
}

// reviseInterval clamps a requested publishing interval (ms).
func (s *Server) reviseInterval(ms float64) time.Duration {
	d := s.cfg.MinPublishingInterval
	if ms > 0 && !math.IsNaN(ms) && ms < float64(s.cfg.MaxPublishingInterval/time.Millisecond) {
		d = time.Duration(ms * float64(time.Millisecond))
	} else if ms >= float64(s.cfg.MaxPublishingInterval/time.Millisecond) {
		d = s.cfg.MaxPublishingInterval
	}
	return min(max(d, s.cfg.MinPublishingInterval), s.cfg.MaxPublishingInterval)
}

// reviseCounts revises the keep-alive and lifetime counts: the lifetime is at
// least three keep-alive periods (Part 4 §5.13.2.2).
func (s *Server) reviseCounts(lifetime, keepAlive uint32) (uint32, uint32) {
	if keepAlive == 0 {
		keepAlive = 10
	}
	keepAlive = min(keepAlive, s.cfg.MaxKeepAliveCount)
	lifetime = max(lifetime, 3*keepAlive)
	lifetime = min(lifetime, s.cfg.MaxLifetimeCount)
	if lifetime < 3*keepAlive {
		keepAlive = max(1, lifetime/3)
	}
	return lifetime, keepAlive
}

func (s *Server) reviseMaxNotifications(n uint32) uint32 {
	if n == 0 || n > s.cfg.MaxNotificationsPerPublish {
		return s.cfg.MaxNotificationsPerPublish
	}
	return n
}

func (s *Server) createSubscription(sess *session, ch *channel, r *uasc.Request, m *ua.CreateSubscriptionRequest) {
	interval := s.reviseInterval(m.RequestedPublishingInterval)
	lifetime, ka := s.reviseCounts(m.RequestedLifetimeCount, m.RequestedMaxKeepAliveCount)
	sub := &subscription{
		srv: s, interval: interval, lifetime: lifetime, maxKA: ka,
		maxNotif: s.reviseMaxNotifications(m.MaxNotificationsPerPublish), priority: m.Priority,
		enabled: m.PublishingEnabled, items: map[uint32]*monitoredItem{}, buckets: map[time.Duration]*bucket{},
		// The first cycle without notifications sends a keep-alive.
		kaCount: ka - 1,
	}
	sub.nextPub = s.now() + int64(interval)
	sub.owner = sess.transferOwner()

	sess.mu.Lock()
	if sess.closed.Load() {
		sess.mu.Unlock()
		s.fault(ch, r, ua.StatusBadSessionIdInvalid)
		return
	}
	if len(sess.subs) >= s.cfg.MaxSubscriptionsPerSession {
		sess.mu.Unlock()
		s.fault(ch, r, ua.StatusBadTooManySubscriptions)
		return
	}
	s.subsMu.Lock()
	if len(s.subs) >= s.cfg.MaxSubscriptionCount {
		s.subsMu.Unlock()
		sess.mu.Unlock()
		s.fault(ch, r, ua.StatusBadTooManySubscriptions)
		return
	}
	for {
		sub.id = s.lastSub.Add(1)
		if _, dup := s.subs[sub.id]; sub.id != 0 && !dup {
			break
		}
	}
	s.subs[sub.id] = sub
	s.subsMu.Unlock()
	sub.sess = sess
	sess.subs = append(sess.subs, sub)
	sess.mu.Unlock()
	s.sweepSoon(sess)

	s.respond(ch, r, &ua.CreateSubscriptionResponse{
		SubscriptionID:            sub.id,
		RevisedPublishingInterval: float64(interval) / float64(time.Millisecond),
		RevisedLifetimeCount:      lifetime,
		RevisedMaxKeepAliveCount:  ka,
	})
}

// sessionSub returns the subscription id of sess, or nil.
func (sess *session) sub(id uint32) *subscription {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	for _, sub := range sess.subs {
		if sub.id == id {
			return sub
		}
	}
	return nil
}

func (s *Server) modifySubscription(sess *session, ch *channel, r *uasc.Request, m *ua.ModifySubscriptionRequest) {
	sub := sess.sub(m.SubscriptionID)
	if sub == nil {
		s.fault(ch, r, ua.StatusBadSubscriptionIdInvalid)
		return
	}
	interval := s.reviseInterval(m.RequestedPublishingInterval)
	lifetime, ka := s.reviseCounts(m.RequestedLifetimeCount, m.RequestedMaxKeepAliveCount)
	sub.mu.Lock()
	if sub.interval != interval {
		sub.nextPub = s.now() + int64(interval)
	}
	sub.interval, sub.lifetime, sub.maxKA = interval, lifetime, ka
	sub.maxNotif = s.reviseMaxNotifications(m.MaxNotificationsPerPublish)
	sub.priority = m.Priority
	sub.mu.Unlock()
	s.sweepSoon(sess)
	s.respond(ch, r, &ua.ModifySubscriptionResponse{
		RevisedPublishingInterval: float64(interval) / float64(time.Millisecond),
		RevisedLifetimeCount:      lifetime,
		RevisedMaxKeepAliveCount:  ka,
	})
}

func (s *Server) setPublishingMode(sess *session, ch *channel, r *uasc.Request, m *ua.SetPublishingModeRequest) {
	if len(m.SubscriptionIDs) == 0 {
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	}
	results := make([]ua.StatusCode, len(m.SubscriptionIDs))
	for i, id := range m.SubscriptionIDs {
		sub := sess.sub(id)
		if sub == nil {
			results[i] = ua.StatusBadSubscriptionIdInvalid
			continue
		}
		sub.mu.Lock()
		sub.enabled = m.PublishingEnabled
		sub.mu.Unlock()
	}
	s.respond(ch, r, &ua.SetPublishingModeResponse{Results: results})
}

func (s *Server) deleteSubscriptions(sess *session, ch *channel, r *uasc.Request, m *ua.DeleteSubscriptionsRequest) {
	if len(m.SubscriptionIDs) == 0 {
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	}
	results := make([]ua.StatusCode, len(m.SubscriptionIDs))
	for i, id := range m.SubscriptionIDs {
		sess.mu.Lock()
		var sub *subscription
		for j, x := range sess.subs {
			if x.id == id {
				sub = x
				sess.subs = append(sess.subs[:j], sess.subs[j+1:]...)
				break
			}
		}
		sess.mu.Unlock()
		if sub == nil {
			results[i] = ua.StatusBadSubscriptionIdInvalid
			continue
		}
		s.deleteSubscription(sub)
	}
	// A session left without subscriptions answers its parked Publish requests
	// with Bad_NoSubscription.
	s.flushNoSubscription(sess)
	s.respond(ch, r, &ua.DeleteSubscriptionsResponse{Results: results})
}

// deleteSubscription removes sub from the server and releases what it holds.
// The caller has removed it from its session.
func (s *Server) deleteSubscription(sub *subscription) {
	s.subsMu.Lock()
	delete(s.subs, sub.id)
	delete(s.orphans, sub)
	s.subsMu.Unlock()
	sub.mu.Lock()
	if sub.closed {
		sub.mu.Unlock()
		return
	}
	sub.closed = true
	items := make([]*monitoredItem, 0, len(sub.items))
	for _, it := range sub.items {
		items = append(items, it)
	}
	retrans := sub.retrans
	sub.retrans, sub.pending, sub.sess = nil, nil, nil
	sub.mu.Unlock()
	for _, r := range retrans {
		r.unref()
	}
	s.removeItems(sub, items)
}

// orphan keeps sub alive without a session until its lifetime expires or a
// session transfers it.
func (s *Server) orphan(sub *subscription) {
	sub.mu.Lock()
	sub.sess = nil
	sub.ready = notReady
	closed := sub.closed
	sub.mu.Unlock()
	if closed {
		return
	}
	s.subsMu.Lock()
	if _, ok := s.subs[sub.id]; ok {
		s.orphans[sub] = struct{}{}
	}
	s.subsMu.Unlock()
}

func (s *Server) transferSubscriptions(sess *session, ch *channel, r *uasc.Request, m *ua.TransferSubscriptionsRequest) {
	if len(m.SubscriptionIDs) == 0 {
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	}
	identity := sess.transferOwner()
	results := make([]ua.TransferResult, len(m.SubscriptionIDs))
	s.transferMu.Lock()
	defer s.transferMu.Unlock()
	for i, id := range m.SubscriptionIDs {
		s.subsMu.Lock()
		sub := s.subs[id]
		s.subsMu.Unlock()
		if sub == nil {
			results[i].StatusCode = ua.StatusBadSubscriptionIdInvalid
			continue
		}
		sub.mu.Lock()
		old := sub.sess
		closed := sub.closed
		sub.mu.Unlock()
		if closed {
			results[i].StatusCode = ua.StatusBadSubscriptionIdInvalid
			continue
		}
		if identity == "" {
			results[i].StatusCode = ua.StatusBadUserAccessDenied
			continue
		}
		if old != nil {
			if old.transferOwner() != identity {
				results[i].StatusCode = ua.StatusBadUserAccessDenied
				continue
			}
		} else if !s.orphanOwnedBy(sub, identity) {
			results[i].StatusCode = ua.StatusBadUserAccessDenied
			continue
		}
		if old != sess {
			if old != nil {
				old.mu.Lock()
				for j, x := range old.subs {
					if x == sub {
						old.subs = append(old.subs[:j], old.subs[j+1:]...)
						break
					}
				}
				sub.mu.Lock()
				seq := sub.nextSeq()
				sub.mu.Unlock()
				old.statusQ = append(old.statusQ, statusMessage{subID: sub.id, seq: seq, status: ua.StatusGoodSubscriptionTransferred})
				old.mu.Unlock()
				s.sweepSoon(old)
			}
			s.subsMu.Lock()
			delete(s.orphans, sub)
			s.subsMu.Unlock()
			sess.mu.Lock()
			sess.subs = append(sess.subs, sub)
			sub.mu.Lock()
			sub.sess = sess
			sub.owner = identity
			sub.lifeCount = 0
			sub.mu.Unlock()
			sess.mu.Unlock()
		}
		sub.mu.Lock()
		if m.SendInitialValues {
			for _, it := range sub.items {
				it.resendLast()
			}
		}
		results[i].AvailableSequenceNumbers = sub.available()
		sub.mu.Unlock()
		s.sweepSoon(sess)
	}
	s.respond(ch, r, &ua.TransferSubscriptionsResponse{Results: results})
}

// transferOwner names who may take the session's subscriptions over with
// TransferSubscriptions (Part 4 §5.13.7): the same user; for an anonymous
// user, a session of the same client application (ApplicationUri) on a
// signed channel, as both must be; "" for an anonymous user on an
// unsecured channel, whose subscriptions nobody may take (node-opcua
// refuses them too; its session can be activated again on a new channel
// instead, Part 4 §5.6.3).
func (sess *session) transferOwner() string {
	sess.mu.Lock()
	id := sess.identity
	sess.mu.Unlock()
	if id != "anonymous" {
		return id
	}
	if sess.clientCert == nil {
		return ""
	}
	return "anonymous@" + sess.appURI
}

// orphanOwnedBy reports whether an orphaned subscription belonged to identity.
func (s *Server) orphanOwnedBy(sub *subscription, identity string) bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.owner == identity
}

func (s *Server) republish(sess *session, ch *channel, r *uasc.Request, m *ua.RepublishRequest) {
	sub := sess.sub(m.SubscriptionID)
	if sub == nil {
		s.fault(ch, r, ua.StatusBadSubscriptionIdInvalid)
		return
	}
	sub.mu.Lock()
	var ret *retained
	for _, x := range sub.retrans {
		if x.msg.SequenceNumber == m.RetransmitSequenceNumber {
			ret = x
			ret.refs.Add(1)
			break
		}
	}
	sub.mu.Unlock()
	if ret == nil {
		s.fault(ch, r, ua.StatusBadMessageNotAvailable)
		return
	}
	s.stats.republishes.Add(1)
	s.respond(ch, r, &ua.RepublishResponse{NotificationMessage: ret.msg})
	ret.unref()
}

// nextSeq returns the next sequence number (mu held); 0 is skipped on wrap.
func (sub *subscription) nextSeq() uint32 {
	sub.seq++
	if sub.seq == 0 {
		sub.seq = 1
	}
	return sub.seq
}

// peekSeq returns the sequence number the next message will get (mu held).
func (sub *subscription) peekSeq() uint32 {
	if sub.seq+1 == 0 {
		return 1
	}
	return sub.seq + 1
}

// available returns the sequence numbers in the retransmission queue (mu held).
func (sub *subscription) available() []uint32 {
	out := make([]uint32, len(sub.retrans))
	for i, r := range sub.retrans {
		out[i] = r.msg.SequenceNumber
	}
	return out
}

// ack releases an acknowledged message (mu held).
func (sub *subscription) ack(seq uint32) ua.StatusCode {
	for i, r := range sub.retrans {
		if r.msg.SequenceNumber == seq {
			copy(sub.retrans[i:], sub.retrans[i+1:])
			sub.retrans[len(sub.retrans)-1] = nil
			sub.retrans = sub.retrans[:len(sub.retrans)-1]
			r.unref()
			return ua.StatusGood
		}
	}
	return ua.StatusBadSequenceNumberUnknown
}

// retain puts a sent message into the retransmission queue (mu held),
// dropping the oldest beyond the limit.
func (sub *subscription) retain(r *retained) {
	if max := sub.srv.cfg.MaxRetransmissionQueue; len(sub.retrans) >= max {
		old := sub.retrans[0]
		copy(sub.retrans, sub.retrans[1:])
		sub.retrans[len(sub.retrans)-1] = nil
		sub.retrans = sub.retrans[:len(sub.retrans)-1]
		old.unref()
	}
	sub.retrans = append(sub.retrans, r)
}

// timer runs the publishing timer at now (mu held); haveRequest says whether a
// Publish request is available. It reports whether the lifetime expired.
func (sub *subscription) timer(now int64, haveRequest bool) (expired bool) {
	if now < sub.nextPub {
		return false
	}
	sub.nextPub += int64(sub.interval)
	if sub.nextPub <= now {
		sub.nextPub = now + int64(sub.interval)
	}
	if haveRequest {
		sub.lifeCount = 0
	} else {
		sub.lifeCount++
		if sub.lifeCount >= sub.lifetime {
			return true
		}
	}
	if sub.ready != notReady {
		return false
	}
	if sub.enabled && len(sub.pending) > 0 {
		sub.ready = readyData
		return false
	}
	sub.kaCount++
	if sub.kaCount >= sub.maxKA {
		sub.ready = readyKeepAlive
	}
	return false
}

// sendItem is a response built under the locks and sent after them.
type sendItem struct {
	ch    *channel
	r     *uasc.Request
	resp  ua.Structure
	ret   *retained // unref after sending; nil for keep-alives and status messages
	fault ua.StatusCode
	notif int
	ka    bool
}

// build makes the response to pp from sub's state (mu held). It sends
// notifications when there are any (and publishing is enabled), else a
// keep-alive.
func (sub *subscription) build(pp *parkedPublish, now ua.DateTime) sendItem {
	s := sub.srv
	resp := &ua.PublishResponse{SubscriptionID: sub.id, Results: pp.results}
	item := sendItem{ch: pp.ch, r: pp.r, resp: resp}
	sub.kaCount, sub.lifeCount = 0, 0
	if sub.enabled && len(sub.pending) > 0 {
		// The acknowledgement results and available sequence numbers take
		// room of the response too.
		budget := pp.ch.responseBudget(sub.sessMaxResponse()) - 4*len(pp.results) - 4*(len(sub.retrans)+1)
		ret, n, more := sub.collect(now, budget)
		if ret != nil {
			sub.retain(ret)
			ret.refs.Add(1) // the sender's
			resp.NotificationMessage = ret.msg
			resp.MoreNotifications = more
			item.ret, item.notif = ret, n
			if more {
				sub.ready = readyData
			} else {
				sub.ready = notReady
			}
			resp.AvailableSequenceNumbers = sub.available()
			s.stats.notifications.Add(uint64(n))
			s.stats.publishResponses.Add(1)
			return item
		}
	}
	sub.ready = notReady
	resp.NotificationMessage = ua.NotificationMessage{SequenceNumber: sub.peekSeq(), PublishTime: now}
	resp.AvailableSequenceNumbers = sub.available()
	item.ka = true
	s.stats.keepAlives.Add(1)
	s.stats.publishResponses.Add(1)
	return item
}

func (sub *subscription) sessMaxResponse() int {
	if sub.sess == nil {
		return 0
	}
	return sub.sess.maxResponse
}

// responseBudget is how many bytes of notifications a response on ch may
// carry: within one chunk when chunks are large enough, and within what the
// client accepts.
func (ch *channel) responseBudget(maxResponse int) int {
	const overhead = 1024
	b := ch.sendChunk
	if b < 16<<10 {
		b = 64 << 10
	}
	if ch.maxSend > 0 && ch.maxSend < b {
		b = ch.maxSend
	}
	if maxResponse > 0 && maxResponse < b {
		b = maxResponse
	}
	return max(b-overhead, 1024)
}
