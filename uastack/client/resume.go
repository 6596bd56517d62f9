package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// Resuming a subscription that another process (an earlier run of this one,
// or another replica) made, with the same user identity.
//
// The server keeps a subscription whose session died until its lifetime
// ends, with its monitored items and the messages it sent and nobody
// acknowledged (its retransmission queue). A process that kept
// Subscription.ResumeState can take it over: SubscriptionConfig.Resume makes
// the first creation of the subscription on the server a
// TransferSubscriptions(sendInitialValues=false) of ResumeState.SubscriptionID
// to the new session instead of a CreateSubscription. On success:
//
//   - the subscription keeps its server id and its monitored items: the
//     items then added with CreateMonitoredItems, in the order of the first
//     run, adopt the server ids of ResumeState.Items by client handle instead
//     of being created again (items without one are created as usual). The
//     caller must add the same items in the same order (a fingerprint of its
//     configuration beside the state, say); a handle names the item it named
//     in the run that saved the state.
//   - the messages the server still has (TransferResult.AvailableSequenceNumbers)
//     after ResumeState.LastAcked are republished, in order, and delivered
//     as usual; while a handler runs for one of them, Subscription.Redelivered
//     is true: its data may have been delivered before (at-least-once), so a
//     consumer may see it twice. Numbers below the first available one were
//     acknowledged (the server drops only what was acknowledged, or what its
//     queue could not keep, which MaxUnacked prevents), so they are not
//     reported lost.
//   - SubscriptionStats.Transferred counts it, OnStatusChange is told
//     StatusGoodSubscriptionTransferred.
//
// When the server no longer has it (BadSubscriptionIdInvalid: its lifetime
// ran out, or the server restarted) or refuses it (another identity), the
// subscription is created anew with all its items, and OnGap(from, 0) reports
// the loss (from = LastAcked + 1): everything not delivered up to the new
// subscription's first values is gone. The new subscription's first
// notifications carry every item's current value.
//
// A connection failure during the transfer keeps the resume for the next
// attempt. The resume is used once: later recoveries of the session follow
// the managed session's usual path (reactivate, transfer, recreate).

// ResumeState is what it takes to resume a subscription in another session:
// its server id, its monitored items' server ids by client handle, and the
// highest sequence number up to which every message was acknowledged.
type ResumeState struct {
	SubscriptionID uint32       `json:"subscriptionId"`
	Items          []ResumeItem `json:"items"`
	LastAcked      uint32       `json:"lastAcked"`
}

// ResumeItem is a monitored item of a ResumeState.
type ResumeItem struct {
	Handle   uint32 `json:"handle"`
	ServerID uint32 `json:"serverId"`
}

// itemMap is the items' server ids by client handle, for adoption.
func (r *ResumeState) itemMap() map[uint32]uint32 {
	items := make(map[uint32]uint32, len(r.Items))
	for _, it := range r.Items {
		if it.Handle != 0 && it.ServerID != 0 {
			items[it.Handle] = it.ServerID
		}
	}
	return items
}

// resumeState is a Subscription's resume bookkeeping.
type resumeState struct {
	mu    sync.Mutex
	want  *ResumeState      // to transfer at the first creation; nil once tried
	items map[uint32]uint32 // handle → server id, for CreateMonitoredItems to adopt
	id    uint32            // the resumed subscription's id, for from
	from  uint32            // its LastAcked: the watermark until something is delivered

	// dispatch loop only
	adopt     bool   // no message was available: take the next number the server sends
	first     bool   // adopted with its session: the first response tells what the server still has
	replaying bool   // messages up to replayEnd are redeliveries
	replayEnd uint32 // the last number available at the transfer
	hole      uint32 // the number after it, which the transfer's status message to the old session may have taken; 0: none
	cur       bool   // the message being delivered is a redelivery
}

// initResume takes cfg.Resume into s (newSubscription).
func (s *Subscription) initResume(r *ResumeState) {
	if r == nil || r.SubscriptionID == 0 {
		return
	}
	want := *r
	want.Items = append([]ResumeItem(nil), r.Items...)
	s.rs.want = &want
}

// ResumeState returns what another session needs to take the subscription
// over (SubscriptionConfig.Resume); false while it does not exist on the
// server. LastAcked is the number before the first delivered message that is
// not acknowledged (AckManual), or the last delivered one when all are; under
// AckOnReturn it is 0 (the messages the server still has are republished).
//
// Items is a new list at each call (8 bytes per item): ask ResumeMark, which
// copies nothing, whether it changed before asking for the state again. The
// client keeps no copy of it, so a group that saved its record holds none
// either: at a million items a kept list is 8 MB of resident memory, and one
// built anew every second is as much garbage per second.
func (s *Subscription) ResumeState() (ResumeState, bool) {
	id := s.id.Load()
	if id == 0 {
		return ResumeState{}, false
	}
	st := ResumeState{SubscriptionID: id}
	t := &s.items
	t.mu.Lock()
	items := make([]ResumeItem, 0, t.created)
	for h := uint32(1); int(h) <= t.n; h++ {
		if it := t.at(h); !it.deleted() && it.id != 0 {
			items = append(items, ResumeItem{Handle: h, ServerID: it.id})
		}
	}
	st.Items = items
	t.mu.Unlock()
	st.LastAcked = s.lastAcked(id)
	if s.id.Load() != id {
		return ResumeState{}, false // recreated meanwhile
	}
	return st, true
}

// ResumeMark tells when the ResumeState changed, without copying it: two
// marks are equal while the subscription, its items' server ids and the last
// acknowledged number stay as they were. False while the subscription does
// not exist on the server. It allocates nothing.
func (s *Subscription) ResumeMark() (ResumeMark, bool) {
	id := s.id.Load()
	if id == 0 {
		return ResumeMark{}, false
	}
	t := &s.items
	t.mu.Lock()
	m := ResumeMark{SubscriptionID: id, Items: t.gen}
	t.mu.Unlock()
	m.LastAcked = s.lastAcked(id)
	if s.id.Load() != id {
		return ResumeMark{}, false
	}
	return m, true
}

// ResumeMark identifies a ResumeState (Subscription.ResumeMark).
type ResumeMark struct {
	SubscriptionID, LastAcked uint32
	Items                     uint64 // counts the changes of the items' server ids
}

// lastAcked is ResumeState.LastAcked of the subscription whose id is id.
func (s *Subscription) lastAcked(id uint32) uint32 {
	if s.cfg.AckMode != AckManual {
		return 0
	}
	a := &s.acks
	a.mu.Lock()
	mark := a.lastSeq
	for _, e := range a.ents {
		if !e.marked {
			mark = seqPrev(e.seq)
			break
		}
	}
	a.mu.Unlock()
	if mark == 0 {
		s.rs.mu.Lock()
		if s.rs.id == id {
			mark = s.rs.from
		}
		s.rs.mu.Unlock()
	}
	return mark
}

// Redelivered reports whether the message whose handler is running is one
// republished after a resume (SubscriptionConfig.Resume): it may have been
// delivered before the process that saved the state ended. Call it only from
// the subscription's handlers (the dispatch goroutine).
func (s *Subscription) Redelivered() bool { return s.rs.cur }

// markReplay sets Redelivered for message seq; dispatch loop, before the
// handlers.
func (s *Subscription) markReplay(seq uint32) {
	rs := &s.rs
	rs.cur = false
	if !rs.replaying {
		return
	}
	if seqAfter(seq, rs.replayEnd) {
		rs.replaying = false
		return
	}
	rs.cur = true
	if seq == rs.replayEnd {
		rs.replaying = false
	}
}

// adoptNext takes the first number the server sends after a resume with
// nothing available as the next one (a keep-alive names the next message's,
// a data message its own); dispatch loop only.
func (s *Subscription) adoptNext(st *seqState, seq uint32) {
	if !s.rs.adopt {
		return
	}
	s.rs.adopt = false
	if prev := seqPrev(seq); seqAfter(prev, st.last) {
		st.last = prev
	}
}

// trimResumeHole drops from a lost run the number the transfer's
// StatusChangeNotification to the old session took (Part 4 §5.13.7: a
// message of the subscription, sent to the session it left): it is after every
// message available at the transfer, so it can only be that one or a message
// still to come, never a lost one. Dispatch loop only.
func (s *Subscription) trimResumeHole(g *gapRun) {
	h := s.rs.hole
	if h == 0 || g.n == 0 {
		return
	}
	if seqAfter(g.from, h) {
		s.rs.hole = 0 // past it
		return
	}
	if g.from == h {
		s.rs.hole = 0
		g.n--
		g.from = seqNext(h)
		if g.n == 0 {
			*g = gapRun{}
		}
	}
}

// adoptItems gives the items with handles first … first+n-1 the server ids
// of the resumed subscription; t.mu must be held. It returns how many it
// adopted.
func (s *Subscription) adoptItems(t *itemTable, first uint32, n int) int {
	s.rs.mu.Lock()
	defer s.rs.mu.Unlock()
	if len(s.rs.items) == 0 || s.rs.id != s.id.Load() {
		return 0
	}
	adopted := 0
	for h := first; h < first+uint32(n); h++ {
		sid, ok := s.rs.items[h]
		if !ok {
			continue
		}
		delete(s.rs.items, h)
		if it := t.at(h); !it.deleted() && it.id == 0 {
			t.set(it, sid, ua.StatusGood)
			adopted++
		}
	}
	if len(s.rs.items) == 0 {
		s.rs.items = nil
	}
	return adopted
}

// resumeOn tries the resume of s on c (ensure, s.opMu held, s not on the
// server): true when the subscription was transferred. A connection error is
// returned with the resume kept for the next attempt; any other failure
// means the subscription is to be created anew, its loss reported.
func (p *publisher) resumeOn(ctx context.Context, c *Client, s *Subscription) (bool, error) {
	s.rs.mu.Lock()
	want := s.rs.want
	s.rs.mu.Unlock()
	if want == nil {
		return false, nil
	}
	if c.resumed {
		// The session of the process that made the subscription, activated
		// again: the subscription is still its own, unless it moved.
		adopted, err := p.adoptOn(ctx, c, s, want)
		if err != nil || adopted {
			return adopted, err
		}
	}
	req := &ua.TransferSubscriptionsRequest{SubscriptionIDs: []uint32{want.SubscriptionID}, SendInitialValues: false}
	var resp ua.TransferSubscriptionsResponse
	_, err := c.Send(ctx, req, &resp)
	if err != nil && isConnectionError(err) && !isSessionGone(err) {
		return false, err
	}
	s.rs.mu.Lock()
	s.rs.want = nil
	s.rs.mu.Unlock()
	var status ua.StatusCode
	switch {
	case err != nil:
		var sc ua.StatusCode
		if errors.As(err, &sc) {
			status = sc
		} else {
			status = ua.StatusBadUnexpectedError
		}
	case len(resp.Results) != 1:
		err = fmt.Errorf("%w: TransferSubscriptions of 1 subscription returned %d results", ErrBadResponse, len(resp.Results))
		status = ua.StatusBadUnexpectedError
	default:
		status = resp.Results[0].StatusCode
	}
	if err != nil || !status.IsGood() {
		p.log.Info("client: the subscription to resume is gone; creating it anew", "subscription", want.SubscriptionID, "status", status, "err", err)
		from := seqNext(want.LastAcked)
		s.stats.lost.Add(1)
		s.stats.recreated.Add(1)
		if s.cfg.OnGap != nil {
			p.post(func() { s.cfg.OnGap(s, from, 0) })
		}
		return false, nil
	}
	avail := resp.Results[0].AvailableSequenceNumbers
	// What the loop must know before the server's messages can reach it:
	// where the sequence starts, and which of them are redeliveries.
	last := want.LastAcked
	var lo, hi uint32
	for i, a := range avail {
		if i == 0 || seqAfter(lo, a) {
			lo = a
		}
		if i == 0 || seqAfter(a, hi) {
			hi = a
		}
	}
	if len(avail) > 0 && seqAfter(seqPrev(lo), last) {
		last = seqPrev(lo)
	}
	items := p.takeUp(ctx, c, s, want)
	p.post(func() {
		st := s.syncSeq()
		st.last = last
		s.armResend()
		s.rs.adopt = len(avail) == 0
		s.rs.replaying = len(avail) > 0 && seqAfter(hi, last)
		s.rs.replayEnd = hi
		s.rs.hole = 0
		if len(avail) > 0 {
			s.rs.hole = seqNext(hi)
		}
	})
	p.register(s, want.SubscriptionID)
	s.stats.transferred.Add(1)
	p.log.Info("client: subscription resumed", "subscription", want.SubscriptionID, "lastAcked", want.LastAcked,
		"available", len(avail), "items", len(items))
	if s.cfg.OnStatusChange != nil {
		s.cfg.OnStatusChange(s, ua.StatusGoodSubscriptionTransferred)
	}
	if len(avail) > 0 && seqAfter(hi, last) {
		av := append([]uint32(nil), avail...)
		p.post(func() {
			st := s.syncSeq()
			if seqAfter(hi, st.last) {
				p.behind(c, s, st, hi, av, 0)
			}
		})
	}
	return true, nil
}

// Detach ends the session as Close does — no new Publish requests, the
// responses still out delivered and acknowledged within ctx, the last
// acknowledgements sent — but keeps its subscriptions at the server: the
// session is closed with DeleteSubscriptions=false (or, when ctx has no time
// left, only its channel is cut), so the server keeps each subscription, its
// items and what it did not get acknowledged, for the subscription's
// lifetime. Another session (another replica taking the work over, or this
// process started again) resumes them with SubscriptionConfig.Resume. Take
// the subscriptions' ResumeState after Detach returns: it then includes the
// last acknowledgements. When Detach returns, no handler runs and none will.
// Close or Detach after the first call return its result at once.
func (m *ManagedSession) Detach(ctx context.Context) error {
	m.detach.Store(true)
	return m.Close(ctx)
}

// Suspend ends the session's use as Detach does — no new Publish requests,
// the responses still out delivered and acknowledged within ctx, the last
// acknowledgements sent — but keeps the session itself at the server: its
// channel is cut without CloseSession, so the server keeps the session, and
// its subscriptions with what they queue, for the session's timeout. A later
// process that kept its SessionState (ManagedConfig.OnSession) activates it
// again (SavedSession) and its subscriptions go on without a transfer,
// which a server may refuse (node-opcua does for an anonymous user on an
// unsecured channel). It is for a restart of this process, or for another
// that was given the SessionState; to hand the work to one that was not,
// Detach. When no process comes back, the server ends
// the session at its timeout and keeps the subscriptions until their
// lifetime runs out.
func (m *ManagedSession) Suspend(ctx context.Context) error {
	m.suspend.Store(true)
	m.detach.Store(true)
	return m.Close(ctx)
}

// abandonSession cuts the channel without closing the session (Suspend);
// a later Close does nothing.
func (c *Client) abandonSession() error {
	var err error
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		err = c.conn.Close()
		c.closeErr = err
	})
	return err
}

// closeKeeping closes the session keeping its subscriptions, within what ctx
// leaves (at most 2 s: the answer does not matter), then the channel. A
// later Close does nothing: it must not delete what was kept.
func (c *Client) closeKeeping(ctx context.Context) error {
	var err error
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		if c.session != nil {
			if d, ok := ctx.Deadline(); !ok || time.Until(d) > 50*time.Millisecond {
				sctx, cancel := context.WithTimeout(ctx, min(c.cfg.RequestTimeout, 2*time.Second))
				_, _ = c.send(sctx, &ua.CloseSessionRequest{DeleteSubscriptions: false}, &ua.CloseSessionResponse{}, c.session.authToken)
				cancel()
			}
			clear(c.session.serverNonce)
		}
		err = c.conn.Close()
		c.closeErr = err
	})
	return err
}

// adoptOn takes up subscription want of the session c resumed
// (ResumeSession): it is still there, with its items and what it queued,
// unless the server ended it or gave it to another session. SetPublishingMode
// asks (it names only the session's own subscriptions) and leaves
// publishing as configured. True: adopted; false with a nil error: not this
// session's (the caller tries a transfer); an error: the connection's, the
// resume kept for the next attempt.
func (p *publisher) adoptOn(ctx context.Context, c *Client, s *Subscription, want *ResumeState) (bool, error) {
	req := &ua.SetPublishingModeRequest{PublishingEnabled: !s.cfg.PublishingDisabled, SubscriptionIDs: []uint32{want.SubscriptionID}}
	var resp ua.SetPublishingModeResponse
	_, err := c.Send(ctx, req, &resp)
	if err != nil && isConnectionError(err) && !isSessionGone(err) {
		return false, err
	}
	if err != nil || len(resp.Results) != 1 || !resp.Results[0].IsGood() {
		status := ua.StatusBadUnexpectedError
		if err == nil && len(resp.Results) == 1 {
			status = resp.Results[0]
		}
		p.log.Info("client: the subscription to resume is not the resumed session's", "subscription", want.SubscriptionID, "status", status, "err", err)
		return false, nil
	}
	s.rs.mu.Lock()
	s.rs.want = nil
	s.rs.mu.Unlock()
	items := p.takeUp(ctx, c, s, want)
	s.publishing.Store(!s.cfg.PublishingDisabled)
	last := want.LastAcked
	p.post(func() {
		st := s.syncSeq()
		st.last = last
		s.armResend()
		s.rs.adopt, s.rs.first = false, true
		s.rs.replaying, s.rs.hole = false, 0
	})
	p.register(s, want.SubscriptionID)
	s.stats.adopted.Add(1)
	p.log.Info("client: subscription resumed with its session", "subscription", want.SubscriptionID,
		"lastAcked", want.LastAcked, "items", len(items))
	return true, nil
}

// adoptFirst reads what the server still has of a subscription adopted with
// its session from the first response for it: the numbers below the first
// available one were acknowledged (the record's LastAcked may be older),
// and those available up to this message are redeliveries. Dispatch loop
// only; seq is the response's number (a keep-alive's: the next message's).
func (s *Subscription) adoptFirst(st *seqState, seq uint32, data bool, avail []uint32) {
	rs := &s.rs
	if !rs.first {
		return
	}
	rs.first = false
	var lo, hi uint32
	n := 0
	for _, a := range avail {
		if data && !seqAfter(seq, a) {
			continue // the message itself
		}
		if n == 0 || seqAfter(lo, a) {
			lo = a
		}
		if n == 0 || seqAfter(a, hi) {
			hi = a
		}
		n++
	}
	if n == 0 {
		// Nothing kept: what this response carries (or announces) is next.
		if prev := seqPrev(seq); seqAfter(prev, st.last) {
			st.last = prev
		}
		return
	}
	if prev := seqPrev(lo); seqAfter(prev, st.last) {
		st.last = prev
	}
	if seqAfter(hi, st.last) {
		rs.replaying, rs.replayEnd = true, hi
	}
}

// takeUp makes s the subscription want names, now on c (transferred or
// adopted): its items to adopt, its settings revised, a new epoch; it
// returns the items.
func (p *publisher) takeUp(ctx context.Context, c *Client, s *Subscription, want *ResumeState) map[uint32]uint32 {
	items := want.itemMap()
	s.rs.mu.Lock()
	s.rs.items, s.rs.id, s.rs.from = items, want.SubscriptionID, want.LastAcked
	s.rs.mu.Unlock()
	p.reviseResumed(ctx, c, s, want.SubscriptionID)
	s.epoch.Add(1)
	s.since.Store(time.Now().UnixNano())
	s.acks.reset()
	return items
}

// reviseResumed gives a subscription taken over from an earlier process the
// settings it is configured with now (ModifySubscription), and learns the
// server's revised values: the keep-alive watchdog needs them. When the
// server refuses, the values asked for stand in.
func (p *publisher) reviseResumed(ctx context.Context, c *Client, s *Subscription, id uint32) {
	req := modifyRequest(id, &s.cfg)
	var resp ua.ModifySubscriptionResponse
	if _, err := c.Send(ctx, req, &resp); err != nil {
		p.log.Debug("client: ModifySubscription of a resumed subscription", "subscription", id, "err", err)
		s.revise(req.RequestedPublishingInterval, s.cfg.KeepAliveCount, s.cfg.LifetimeCount)
		return
	}
	s.revise(resp.RevisedPublishingInterval, resp.RevisedMaxKeepAliveCount, resp.RevisedLifetimeCount)
}
