package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// The publish engine of a session (OPC UA Part 4 §5.13.5).
//
// A publisher keeps several Publish requests outstanding at the server, each in
// a publishSlot that owns its request and its response for good: the response is
// decoded into the slot's PublishResponse (reusing its slices and, through
// ua.Grow, its pooled notifications' capacity), so a steady stream of responses
// allocates nothing. The channel's reader goroutine completes a slot by putting
// it on the ready channel, whose capacity is the number of slots (plus the one
// a closing session's last acknowledgements go in), so it never blocks. One
// goroutine, the dispatch loop (run), owns everything else: it checks sequence
// numbers, calls the handlers, releases the notifications, queues the
// acknowledgements and sends the slot's request again with them. Gaps are
// filled by gap jobs on goroutines of their own that hand what they recover
// to the loop (gap.go).
//
// Only the dispatch loop touches: the slots it holds, the acknowledgement
// queue, the sequence state of every Subscription (Subscription.seq, including
// the gap job running for it), the items' last delivered values (for dropping
// resent values after a recovery) and the drain state of a closing session.
// Other goroutines talk to it through kick (refill), ackKick (Subscription.Ack
// marked a message: collect it and maybe resume), gapc (a gap job's message,
// loss or end) and ctl (run a function on the loop, as the managed session
// does to republish after a transfer).
//
// Acknowledgements of AckManual subscriptions are marked by Ack in the
// subscription's ackSet (any goroutine, a small mutex, no allocation) and
// collected by the loop into the next Publish request. Such a subscription at
// MaxUnacked is held: target does not count it, so a session whose
// subscriptions are all held sends no Publish at all until Ack makes room.
//
// Lock order: publisher.mu, then Subscription.acks.mu or itemTable.mu (never
// both); createMu before publisher.mu.

const (
	// DefaultMaxPublishRequests bounds the Publish requests a session keeps at
	// the server.
	DefaultMaxPublishRequests = 10
	// minPublishRequests is kept outstanding as soon as one subscription exists,
	// so that one response is being handled while another waits at the server.
	minPublishRequests = 2
	// DefaultKeepAliveGrace is added to a subscription's keep-alive window
	// (publishing interval × keep-alive count, plus one interval) before the
	// subscription is declared silent.
	DefaultKeepAliveGrace = time.Second
	// maxRepublishPerGap bounds the Republish calls made for one gap; the rest of
	// the gap is reported lost. Servers keep far fewer messages than this.
	maxRepublishPerGap = 1024
	// publishProbeInterval is how long the limit BadTooManyPublishRequests set
	// holds before it is raised by one to probe the server again: its limit
	// may be a passing one (its load), or our reading of it too low (it
	// answered while fewer requests were out than it allows).
	publishProbeInterval = time.Minute
)

// publishSlot is one Publish request and the response it is answered with.
type publishSlot struct {
	p    *publisher
	req  ua.PublishRequest
	resp ua.PublishResponse
	c    *Client      // the session the request went out on
	out  ua.Structure // as returned by the channel
	err  error
	done func(ua.Structure, error) // s.complete, bound once
	sent int64                     // UnixNano when the request went out
}

// complete runs on the channel's reader goroutine (or its timer, or whoever
// closes it): it must not block, and does not.
func (s *publishSlot) complete(out ua.Structure, err error) {
	s.out, s.err = out, err
	s.p.ready <- s
}

// seqState is a subscription's sequence number bookkeeping; only the dispatch
// loop reads and writes it.
type seqState struct {
	epoch    uint64  // Subscription.epoch this state belongs to
	last     uint32  // last sequence number delivered (or reported lost)
	gap      *gapJob // the gap fill running for it, nil when none
	deferred bool    // messages up to deferTo were left at the server, to fetch with Republish
	deferTo  uint32
}

// publisher is the publish engine of a Client, or of a ManagedSession across
// the Clients it goes through.
type publisher struct {
	log   *slog.Logger
	max   int           // most Publish requests outstanding
	grace time.Duration // added to the keep-alive window before a subscription counts as silent

	// onFault is called (from the dispatch loop, must not block) when a Publish
	// shows the session or its channel is gone, or that the server lost our
	// subscriptions (sub != nil: that one only).
	onFault func(c *Client, sub *Subscription, err error)

	mu       sync.Mutex
	client   *Client // where Publish requests go; nil while there is none
	faulted  bool    // client failed: send nothing until rebind
	bound    time.Time
	byID     map[uint32]*Subscription
	subs     []*Subscription
	orphans  []uint32   // ids of subscriptions deleted while disconnected, to delete at the server
	createMu sync.Mutex // held while subscriptions are created, so a response for a new one waits for it

	ready    chan *publishSlot
	ctl      chan func()
	kick     chan struct{}
	ackKick  chan struct{}
	maintain chan struct{} // wakeMaintenance: the supervisor's schedule may be stale
	gapc     chan gapEvent
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	manual    atomic.Int32 // AckManual subscriptions in subs
	quiescing atomic.Bool  // quiesce waits for the acknowledgements: Ack wakes the loop
	gapSem    chan *ua.RepublishResponse
	gapWG     sync.WaitGroup
	gapCtx    context.Context // cancelled by close: ends the gap jobs' requests
	gapCancel context.CancelFunc

	// owned by the dispatch loop
	slots    []*publishSlot
	idle     []*publishSlot
	inflight int
	limit    int       // lowered after BadTooManyPublishRequests
	limitAt  time.Time // when limit was lowered or raised last
	probe    time.Duration
	acks     []ua.SubscriptionAcknowledgement
	noSubs   bool // the server said BadNoSubscription: wait for a kick
	pause    time.Time
	errs     int
	pauseT   *time.Timer
	gaps     int             // gap jobs running
	scratch  []*Subscription // copy of subs for the loop's passes over them
	fp       fingerprinter   // values of items, for dropping resent ones
	draining bool            // closing: no new Publish requests or gap fills
	drained  chan struct{}   // closed once draining is complete (nil: nobody waits)
	final    *publishSlot    // the closing session's last acknowledgements

	// latency, when set, is told how long each Publish took from request to
	// response (its time parked at the server included).
	latency interface{ Observe(time.Duration) }

	rtt        atomic.Int64 // smoothed round trip of synchronous calls, ns
	busySince  atomic.Int64 // UnixNano when a handler call began, 0 when none runs
	active     atomic.Int32 // subscriptions that exist on the server
	timeout    atomic.Int64 // Publish request timeout, ns
	fastest    atomic.Int64 // shortest publishing interval of the subscriptions on the server, ns
	reqTimeout time.Duration

	// Copies of inflight and limit for ManagedStats, stored by the loop.
	statInflight, statLimit atomic.Int32
}

func newPublisher(log *slog.Logger, maxRequests int, grace time.Duration, reqTimeout time.Duration) *publisher {
	if maxRequests <= 0 {
		maxRequests = DefaultMaxPublishRequests
	}
	if grace <= 0 {
		grace = DefaultKeepAliveGrace
	}
	if reqTimeout <= 0 {
		reqTimeout = DefaultRequestTimeout
	}
	p := &publisher{
		log:        log,
		max:        maxRequests,
		grace:      grace,
		byID:       map[uint32]*Subscription{},
		ready:      make(chan *publishSlot, maxRequests+1),
		ctl:        make(chan func()),
		kick:       make(chan struct{}, 1),
		ackKick:    make(chan struct{}, 1),
		maintain:   make(chan struct{}, 1),
		gapc:       make(chan gapEvent),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		limit:      maxRequests,
		probe:      publishProbeInterval,
		reqTimeout: reqTimeout,
		idle:       make([]*publishSlot, 0, maxRequests),
		gapSem:     make(chan *ua.RepublishResponse, maxConcurrentGapFills),
		fp:         newFingerprinter(),
	}
	for range maxConcurrentGapFills {
		p.gapSem <- new(ua.RepublishResponse)
	}
	p.gapCtx, p.gapCancel = context.WithCancel(context.Background())
	p.timeout.Store(int64(reqTimeout))
	p.statLimit.Store(int32(maxRequests))
	return p
}

// start runs the dispatch loop. end, when not nil, stops it when closed (the
// channel of a bare Client).
func (p *publisher) start(end <-chan struct{}) {
	go p.run(end)
}

// close stops the dispatch loop and the gap jobs, and waits for them.
func (p *publisher) close() {
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
	p.gapWG.Wait()
}

func (p *publisher) run(end <-chan struct{}) {
	defer close(p.done)
	defer p.gapCancel()
	defer p.drain()
	for {
		select {
		case s := <-p.ready:
			p.handle(s)
		case ev := <-p.gapc:
			p.onGap(ev)
		case <-p.ackKick:
			p.collectAcks(true)
		case f := <-p.ctl:
			f()
		case <-p.kick:
			p.noSubs = false
		case <-p.stop:
			return
		case <-end:
			return
		}
		p.refill()
		if p.drained != nil {
			p.checkDrained()
		}
		p.statInflight.Store(int32(p.inflight))
		p.statLimit.Store(int32(p.limit))
	}
}

// ackWake tells the loop that Ack marked a message.
func (p *publisher) ackWake() {
	select {
	case p.ackKick <- struct{}{}:
	default:
	}
}

// loopSubs copies the subscriptions into the loop's scratch slice (no
// allocation once it has grown) and returns it.
func (p *publisher) loopSubs() []*Subscription {
	p.mu.Lock()
	p.scratch = append(p.scratch[:0], p.subs...)
	p.mu.Unlock()
	return p.scratch
}

// collectAcks moves what Ack marked into the acknowledgement queue and, when
// resume is set, restarts the gap fills that waited for room; dispatch loop
// only.
func (p *publisher) collectAcks(resume bool) {
	if p.manual.Load() == 0 {
		return
	}
	for _, s := range p.loopSubs() {
		if s.cfg.AckMode != AckManual {
			continue
		}
		if id := s.id.Load(); id != 0 {
			p.acks = s.acks.take(id, p.acks)
		}
		if resume {
			p.resume(s)
		}
	}
	clear(p.scratch)
}

// quiesce prepares a close: no new Publish requests or gap fills from now on;
// it waits until the gap fills have ended and every message delivered to an
// AckManual subscription is acknowledged (or ctx ends, or the session is
// gone), and sends the acknowledgements queued by then in one last Publish
// request. Responses to the requests still at the server are delivered
// meanwhile.
func (p *publisher) quiesce(ctx context.Context) {
	done := make(chan struct{})
	p.quiescing.Store(true)
	if !p.postCtx(ctx, func() { p.draining, p.drained = true, done; p.checkDrained() }) {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	case <-p.done:
		return
	}
	p.postCtx(ctx, func() {
		p.drained = nil
		p.collectAcks(false)
		p.sendFinalAcks()
	})
}

// checkDrained closes drained once nothing is left to wait for; dispatch
// loop only.
func (p *publisher) checkDrained() {
	c := p.current()
	gone := c == nil || c.closed.Load()
	if !gone && p.gaps > 0 {
		return
	}
	if !gone && p.manual.Load() > 0 {
		for _, s := range p.loopSubs() {
			if s.cfg.AckMode == AckManual && s.id.Load() != 0 && s.Unacked() > 0 {
				clear(p.scratch)
				return
			}
		}
		clear(p.scratch)
	}
	close(p.drained)
	p.drained = nil
}

// sendFinalAcks sends the queued acknowledgements in a Publish request of
// their own (its response, if any comes before the session closes, is not
// delivered); without a session they are dropped.
func (p *publisher) sendFinalAcks() {
	if len(p.acks) == 0 {
		return
	}
	p.mu.Lock()
	c, faulted := p.client, p.faulted
	p.mu.Unlock()
	if c == nil || faulted || c.closed.Load() {
		p.log.Debug("client: closing: acknowledgements dropped, no session", "acks", len(p.acks))
		p.acks = p.acks[:0]
		return
	}
	s := p.slot()
	if s == nil {
		// Every slot is at the server: one more, which ready has room for.
		if p.final == nil {
			p.final = &publishSlot{p: p}
			p.final.done = p.final.complete
		}
		s = p.final
	}
	if err := p.issue(c, s); err != nil {
		p.log.Debug("client: closing: the last acknowledgements could not be sent", "err", err)
		if s != p.final {
			p.idle = append(p.idle, s)
		}
		return
	}
	p.inflight++
}

// drain releases what completed slots hold once the loop ends; slots still at
// the channel are dropped with it.
func (p *publisher) drain() {
	if p.pauseT != nil {
		p.pauseT.Stop()
	}
	for {
		select {
		case s := <-p.ready:
			s.resp.Release()
		default:
			return
		}
	}
}

// post runs f on the dispatch loop and waits for it; false when the loop has
// ended.
func (p *publisher) post(f func()) bool {
	return p.postCtx(context.Background(), f)
}

// postCtx is post within ctx: false, with f not run, when ctx ends before the
// loop takes f (the loop may be inside a handler that waits for a full
// queue). Once taken, f runs to its end: it is short.
func (p *publisher) postCtx(ctx context.Context, f func()) bool {
	done := make(chan struct{})
	select {
	case p.ctl <- func() { f(); close(done) }:
	case <-p.done:
		return false
	case <-ctx.Done():
		return false
	}
	<-done
	return true
}

func (p *publisher) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// wakeMaintenance tells the supervisor (ManagedSession.supervise, or a bare
// Client's maintainSubscriptions), which at rest sleeps until the first
// thing it knows to be due, that something changed it cannot see by
// itself: a subscription added, registered under a new id or without one,
// revised, or items waiting to be created or refused. It looks again now.
func (p *publisher) wakeMaintenance() {
	select {
	case p.maintain <- struct{}{}:
	default:
	}
}

// bind makes c the session Publish requests go to (nil: none).
func (p *publisher) bind(c *Client) {
	p.mu.Lock()
	p.client = c
	p.faulted = false
	p.bound = time.Now()
	p.mu.Unlock()
	if c != nil {
		p.post(func() {
			p.limit = p.max
			p.errs = 0
			p.pause = time.Time{}
			// Messages owed from before the fault: fetch them on this session.
			for _, s := range p.loopSubs() {
				p.resume(s)
			}
			clear(p.scratch)
		})
		p.wake()
	}
}

func (p *publisher) current() *Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.client
}

// register makes s known under its server id (after create, recreate or
// transfer).
func (p *publisher) register(s *Subscription, id uint32) {
	p.mu.Lock()
	if old := s.id.Load(); old != 0 && p.byID[old] == s {
		delete(p.byID, old)
	} else if old == 0 {
		p.active.Add(1)
	}
	s.id.Store(id)
	p.byID[id] = s
	p.mu.Unlock()
	p.updateTimeout()
	p.wake()
	p.wakeMaintenance()
}

// unregister forgets s's server id (deleted, or lost with its session).
func (p *publisher) unregister(s *Subscription) {
	p.mu.Lock()
	if old := s.id.Load(); old != 0 {
		if p.byID[old] == s {
			delete(p.byID, old)
		}
		s.id.Store(0)
		p.active.Add(-1)
	}
	p.mu.Unlock()
	p.updateTimeout()
	p.wakeMaintenance()
}

// add keeps s in the publisher's list of subscriptions.
func (p *publisher) add(s *Subscription) {
	p.mu.Lock()
	p.subs = append(p.subs, s)
	if s.cfg.AckMode == AckManual {
		p.manual.Add(1)
	}
	p.mu.Unlock()
	p.wakeMaintenance()
}

// remove drops s from the list and the ids.
func (p *publisher) remove(s *Subscription) {
	p.unregister(s)
	p.mu.Lock()
	for i, x := range p.subs {
		if x == s {
			p.subs = append(p.subs[:i], p.subs[i+1:]...)
			if s.cfg.AckMode == AckManual {
				p.manual.Add(-1)
			}
			break
		}
	}
	p.mu.Unlock()
	p.updateTimeout()
}

// deleteLater remembers a subscription to delete at the server once
// connected.
func (p *publisher) deleteLater(id uint32) {
	p.mu.Lock()
	p.orphans = append(p.orphans, id)
	p.mu.Unlock()
}

func (p *publisher) dropOrphans() {
	p.mu.Lock()
	p.orphans = nil
	p.mu.Unlock()
}

// deleteOrphans deletes at the server the subscriptions deleted while the
// session was away, once it is reactivated.
func (p *publisher) deleteOrphans(ctx context.Context, c *Client) {
	p.mu.Lock()
	ids := p.orphans
	p.orphans = nil
	p.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	var resp ua.DeleteSubscriptionsResponse
	_, _ = c.Send(ctx, &ua.DeleteSubscriptionsRequest{SubscriptionIDs: ids}, &resp)
}

func (p *publisher) list() []*Subscription {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Subscription(nil), p.subs...)
}

func (p *publisher) lookup(id uint32) *Subscription {
	p.mu.Lock()
	s := p.byID[id]
	p.mu.Unlock()
	if s == nil {
		// It may be being created: its response can overtake CreateSubscription's.
		// Look again once no create is under way.
		p.createMu.Lock()
		p.mu.Lock()
		s = p.byID[id]
		p.mu.Unlock()
		p.createMu.Unlock()
	}
	return s
}

// updateTimeout sets the Publish timeout: the request may wait at the server
// for a keep-alive window behind each of the others, and then some.
// It also keeps the fastest publishing interval for target.
func (p *publisher) updateTimeout() {
	var window, fastest time.Duration
	for _, s := range p.list() {
		if w := s.keepAliveWindow(); w > window {
			window = w
		}
		if iv := time.Duration(s.revInterval.Load()); s.id.Load() != 0 && iv > 0 && (fastest == 0 || iv < fastest) {
			fastest = iv
		}
	}
	p.timeout.Store(int64(p.reqTimeout + time.Duration(p.max+1)*window))
	p.fastest.Store(int64(fastest))
}

// target is the number of Publish requests to keep outstanding: per
// subscription one, plus as many as responses can be on their way back in one
// round trip (one per publishing interval), at least minPublishRequests, at
// most the limit (MaxPublishRequests; after BadTooManyPublishRequests the
// number that was out then, raised by one every publishProbeInterval while
// responses come). AckManual
// subscriptions at MaxUnacked (held) do not count, and when only AckManual
// subscriptions are there, no more requests than they have room for
// messages: at the limit the server's queues hold the data.
func (p *publisher) target() int {
	n := int(p.active.Load())
	if n == 0 {
		return 0
	}
	room := math.MaxInt
	if p.manual.Load() > 0 {
		n, room = p.open()
		if n == 0 {
			return 0
		}
	}
	t := n
	if fastest := time.Duration(p.fastest.Load()); fastest > 0 {
		if rtt := time.Duration(p.rtt.Load()); rtt > 0 {
			t += n * int((rtt+fastest-1)/fastest)
		}
	}
	t = max(t, minPublishRequests)
	return min(t, p.limit, room)
}

// open counts the subscriptions on the server that are not held and, when
// all of those are AckManual, the messages they have room for (else
// math.MaxInt).
func (p *publisher) open() (n, room int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.subs {
		if s.id.Load() == 0 {
			continue
		}
		r := s.room()
		if r == 0 {
			continue
		}
		n++
		if s.cfg.AckMode != AckManual {
			room = math.MaxInt
		} else if room != math.MaxInt {
			room += r
		}
	}
	return n, room
}

// observeRTT feeds a round trip into the moving average (1/8 weight).
func (p *publisher) observeRTT(d time.Duration) {
	for {
		old := p.rtt.Load()
		nv := int64(d)
		if old != 0 {
			nv = old + (int64(d)-old)/8
		}
		if p.rtt.CompareAndSwap(old, nv) {
			return
		}
	}
}

// refill sends Publish requests until target are outstanding.
func (p *publisher) refill() {
	if p.draining || p.noSubs || (!p.pause.IsZero() && time.Now().Before(p.pause)) {
		return
	}
	p.mu.Lock()
	c, faulted := p.client, p.faulted
	p.mu.Unlock()
	if c == nil || faulted || c.closed.Load() {
		return
	}
	target := p.target()
	if p.inflight < target {
		p.collectAcks(false)
	}
	for p.inflight < target {
		s := p.slot()
		if s == nil {
			return
		}
		if err := p.issue(c, s); err != nil {
			p.idle = append(p.idle, s)
			p.failed(c, err)
			return
		}
		p.inflight++
	}
}

func (p *publisher) slot() *publishSlot {
	if n := len(p.idle); n > 0 {
		s := p.idle[n-1]
		p.idle = p.idle[:n-1]
		return s
	}
	if len(p.slots) >= p.max {
		return nil
	}
	s := &publishSlot{p: p}
	s.done = s.complete
	p.slots = append(p.slots, s)
	return s
}

// issue sends s's request on c with the queued acknowledgements.
func (p *publisher) issue(c *Client, s *publishSlot) error {
	s.c, s.out, s.err = c, nil, nil
	s.req.SubscriptionAcknowledgements = append(s.req.SubscriptionAcknowledgements[:0], p.acks...)
	timeout := time.Duration(p.timeout.Load())
	s.req.RequestHeader = ua.RequestHeader{}
	c.fillHeader(&s.req.RequestHeader, c.session.authToken, timeout)
	if p.latency != nil {
		s.sent = time.Now().UnixNano()
	}
	if err := c.conn.SendRequestAsync(&s.req, &s.resp, timeout, s.done); err != nil {
		return err
	}
	p.acks = p.acks[:0]
	return nil
}

// handle takes a completed slot back.
func (p *publisher) handle(s *publishSlot) {
	p.inflight--
	err := s.err
	if p.latency != nil && s.sent != 0 && err == nil {
		p.latency.Observe(time.Duration(time.Now().UnixNano() - s.sent))
	}
	if err == nil && s.out != ua.Structure(&s.resp) {
		err = fmt.Errorf("%w: Publish answered with %s", ErrBadResponse, typeName(s.out))
	}
	if err == nil {
		if sc := s.resp.ResponseHeader.ServiceResult; sc.IsBad() {
			err = sc
		}
	}
	if s == p.final {
		// The closing session's last acknowledgements: nothing to deliver.
		s.resp.Release()
		return
	}
	if err != nil {
		s.resp.Release()
		// The acknowledgements may not have reached the server: send them again
		// (a duplicate only earns BadSequenceNumberUnknown).
		p.acks = append(p.acks, s.req.SubscriptionAcknowledgements...)
		p.idle = append(p.idle, s)
		p.failed(s.c, err)
		return
	}
	p.errs = 0
	if p.limit < p.max {
		p.probeLimit()
	}
	p.process(s.c, &s.resp)
	p.idle = append(p.idle, s)
}

// probeLimit raises the limit BadTooManyPublishRequests lowered by one once
// it has held for p.probe: if the server still does not want more, it says so
// again, once per probe, and the limit goes back down.
func (p *publisher) probeLimit() {
	if now := time.Now(); now.Sub(p.limitAt) >= p.probe {
		p.limit++
		p.limitAt = now
		p.log.Debug("client: probing for more outstanding Publish requests", "limit", p.limit)
	}
}

// failed decides what a failed Publish means.
func (p *publisher) failed(c *Client, err error) {
	p.mu.Lock()
	cur := p.client
	p.mu.Unlock()
	switch {
	case c != cur:
		// A request of an earlier session or channel: nothing to do.
	case errorsIsAny(err, ua.StatusBadTimeout, ua.StatusBadRequestTimeout):
		// No response in time; the next request goes out at once.
	case errors.Is(err, ua.StatusBadTooManyPublishRequests):
		p.limit = max(1, p.inflight)
		p.limitAt = time.Now()
		p.log.Debug("client: server limits outstanding Publish requests", "limit", p.limit)
	case errors.Is(err, ua.StatusBadNoSubscription):
		p.noSubs = true
		if p.active.Load() > 0 {
			// We think subscriptions exist; the server has none.
			p.fault(c, nil, err)
		}
	case isSessionGone(err) || errors.Is(err, uasc.ErrChannelClosed) || errors.Is(err, ErrClosed):
		p.fault(c, nil, err)
	default:
		p.errs++
		if p.errs >= 3 {
			// Do not spin on a server that fails every Publish at once.
			d := time.Duration(min(p.errs, 10)) * 100 * time.Millisecond
			p.pause = time.Now().Add(d)
			if p.pauseT == nil {
				p.pauseT = time.AfterFunc(d, p.wake)
			} else {
				p.pauseT.Reset(d)
			}
		}
		p.log.Warn("client: Publish failed", "err", err)
	}
}

func (p *publisher) fault(c *Client, sub *Subscription, err error) {
	if sub == nil {
		p.mu.Lock()
		if p.client == c {
			p.faulted = true
		}
		p.mu.Unlock()
	}
	if p.onFault != nil {
		p.onFault(c, sub, err)
	}
}

// isSessionGone reports whether err says the server no longer has the session.
func isSessionGone(err error) bool {
	return errorsIsAny(err, ua.StatusBadSessionIdInvalid, ua.StatusBadSessionClosed, ua.StatusBadSessionNotActivated)
}

// Sequence numbers run from 1 to 2^32-1 and then start at 1 again (Part 4
// §7.38); 0 is never used.

func seqNext(s uint32) uint32 {
	if s == 0xFFFFFFFF {
		return 1
	}
	return s + 1
}

func seqPrev(s uint32) uint32 {
	if s <= 1 {
		return 0xFFFFFFFF
	}
	return s - 1
}

// seqAfter reports whether a comes after b, allowing for wrap-around: a is
// after b when it is less than 2^31 ahead.
func seqAfter(a, b uint32) bool { return int32(a-b) > 0 }

// seqDist is the number of sequence numbers from a up to b (b after or equal a).
func seqDist(a, b uint32) uint32 {
	d := b - a
	if b < a { // crossed the wrap, which skips 0
		d--
	}
	return d
}

// process checks the sequence number of a response and delivers it, or
// leaves it at the server to be fetched with Republish when it cannot be
// delivered now (a gap before it, a gap fill under way, no room under
// MaxUnacked). It releases r.
func (p *publisher) process(c *Client, r *ua.PublishResponse) {
	defer r.Release()
	msg := &r.NotificationMessage
	seq := msg.SequenceNumber
	data := len(msg.NotificationData) > 0
	sub := p.lookup(r.SubscriptionID)
	if sub == nil {
		if data {
			// Deleted meanwhile: acknowledge, so the server can drop it.
			p.ack(r.SubscriptionID, seq)
		}
		return
	}
	sub.lastActivity.Store(time.Now().UnixNano())
	if sub.silent.Load() && sub.silent.CompareAndSwap(true, false) && sub.cfg.OnStatusChange != nil {
		sub.cfg.OnStatusChange(sub, ua.StatusGood)
	}
	st := sub.syncSeq()
	sub.adoptNext(st, seq)                                    // resume.go
	sub.adoptFirst(st, seq, data, r.AvailableSequenceNumbers) // resume.go
	if !data {
		// A keep-alive carries the number the next message will have.
		sub.stats.keepAlives.Add(1)
		if next := seqNext(st.last); seq != next && seqAfter(seq, next) {
			p.behind(c, sub, st, seqPrev(seq), r.AvailableSequenceNumbers, 0)
		}
		return
	}
	if !seqAfter(seq, st.last) {
		sub.stats.duplicates.Add(1)
		// The original may still be waiting for the application's Ack: then
		// the server must keep it.
		if sub.cfg.AckMode != AckManual || !sub.acks.waiting(seq) {
			p.ack(r.SubscriptionID, seq)
		}
		return
	}
	if seq != seqNext(st.last) || st.gap != nil || sub.room() == 0 {
		p.behind(c, sub, st, seq, r.AvailableSequenceNumbers, seq)
		return
	}
	p.deliver(c, sub, seq, msg, true)
	st.last = seq
}

func (p *publisher) ack(id, seq uint32) {
	p.acks = append(p.acks, ua.SubscriptionAcknowledgement{SubscriptionID: id, SequenceNumber: seq})
}

// behind notes that sub has messages up to `to` that were not delivered and
// starts filling the gap, unless a gap fill runs for it already or it has no
// room (then the gap is filled once that one ends, or acknowledgements make
// room). available are the numbers the server said it has; have, when not 0,
// is one we saw and left there.
func (p *publisher) behind(c *Client, sub *Subscription, st *seqState, to uint32, available []uint32, have uint32) {
	if !st.deferred || seqAfter(to, st.deferTo) {
		st.deferTo, st.deferred = to, true
	}
	if st.gap != nil || sub.room() == 0 || p.draining {
		return
	}
	j := p.newGap(c, sub, st)
	j.all = false
	j.avail = append(j.avail[:0], available...)
	if have != 0 {
		j.avail = append(j.avail, have)
	}
	p.startGap(j)
}

// resume starts the gap fill a subscription is owed (messages it left at the
// server), if it has room and none runs.
func (p *publisher) resume(sub *Subscription) {
	st := sub.syncSeq()
	if !st.deferred || st.gap != nil || p.draining || sub.room() == 0 {
		return
	}
	if !seqAfter(st.deferTo, st.last) {
		st.deferred = false
		return
	}
	c := p.current()
	if c == nil || c.closed.Load() {
		return // the recovery finds the gap again
	}
	j := p.newGap(c, sub, st)
	j.all = true
	p.startGap(j)
}

// deliver hands the notifications of one message to sub's handlers, then
// tells OnMessageDone, and queues the acknowledgement (AckOnReturn) or
// leaves it to Ack (AckManual; the caller made sure there is room). fresh is
// false for a republished message.
func (p *publisher) deliver(c *Client, sub *Subscription, seq uint32, msg *ua.NotificationMessage, fresh bool) {
	manual := sub.cfg.AckMode == AckManual
	sub.markReplay(seq) // resume.go: Redelivered
	if manual {
		// Before the handlers: they may call Ack.
		sub.acks.push(seq)
	}
	sub.stats.messages.Add(1)
	for i := range msg.NotificationData {
		switch v := msg.NotificationData[i].Value.(type) {
		case *ua.DataChangeNotification:
			if len(v.MonitoredItems) > 0 {
				sub.stats.dataChanges.Add(uint64(len(v.MonitoredItems)))
				p.callData(sub, seq, v.MonitoredItems, fresh)
			}
		case *ua.EventNotificationList:
			if len(v.Events) > 0 {
				sub.stats.events.Add(uint64(len(v.Events)))
				p.callEvents(sub, seq, v.Events)
			}
		case *ua.StatusChangeNotification:
			p.statusChange(c, sub, v.Status)
		}
	}
	if sub.cfg.OnMessageDone != nil {
		p.callDone(sub, seq)
	}
	if !manual {
		p.ack(sub.id.Load(), seq)
	}
}

func (p *publisher) callData(sub *Subscription, seq uint32, items []ua.MonitoredItemNotification, fresh bool) {
	h := sub.cfg.OnDataChange
	if h == nil {
		return
	}
	items = p.dropResent(sub, items, fresh)
	if len(items) == 0 {
		return
	}
	p.busySince.Store(time.Now().UnixNano())
	defer p.handlerDone(sub)
	h(sub, seq, items)
}

func (p *publisher) callDone(sub *Subscription, seq uint32) {
	p.busySince.Store(time.Now().UnixNano())
	defer p.handlerDone(sub)
	sub.cfg.OnMessageDone(sub, seq)
}

func (p *publisher) callEvents(sub *Subscription, seq uint32, events []ua.EventFieldList) {
	h := sub.cfg.OnEvent
	if h == nil {
		return
	}
	p.busySince.Store(time.Now().UnixNano())
	defer p.handlerDone(sub)
	h(sub, seq, events)
}

// handlerDone ends a handler call; a handler that panicked is logged and
// counted, and the dispatch goes on (the notifications are released by the
// caller's defer either way).
func (p *publisher) handlerDone(sub *Subscription) {
	p.busySince.Store(0)
	if r := recover(); r != nil {
		sub.stats.handlerPanics.Add(1)
		p.log.Error("client: subscription handler panicked", "subscription", sub.id.Load(), "panic", r)
	}
}

// statusChange handles a StatusChangeNotification: the server ended the
// subscription (BadTimeout: its lifetime ran out) or gave it to another session
// (GoodSubscriptionTransferred).
func (p *publisher) statusChange(c *Client, sub *Subscription, st ua.StatusCode) {
	p.log.Info("client: subscription status changed", "subscription", sub.id.Load(), "status", st)
	if sub.cfg.OnStatusChange != nil {
		sub.cfg.OnStatusChange(sub, st)
	}
	if st.IsBad() || st.Code() == ua.StatusGoodSubscriptionTransferred {
		p.fault(c, sub, st)
	}
}

// silent returns the subscriptions that have not been heard from (data or
// keep-alive) within their keep-alive window plus grace, counted from the later
// of their last message and the session's binding. A handler that is still
// running holds the requests back; while it does nothing counts as silent.
func (p *publisher) silent(now time.Time) []*Subscription {
	if b := p.busySince.Load(); b != 0 {
		return nil
	}
	p.mu.Lock()
	bound := p.bound
	subs := p.subs
	var out []*Subscription
	for _, s := range subs {
		if s.id.Load() == 0 || s.held() {
			// A held subscription gets no Publish requests: its silence is ours.
			continue
		}
		if now.Sub(s.lastHeard(bound)) > s.keepAliveWindow()+p.grace {
			out = append(out, s)
		}
	}
	p.mu.Unlock()
	return out
}

// silentAt returns when the first subscription would become silent (see
// silent) if nothing is heard meanwhile; ok is false when none can, or when
// a handler runs (silent looks again at the next check).
func (p *publisher) silentAt() (at time.Time, ok bool) {
	if p.busySince.Load() != 0 {
		return time.Time{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.subs {
		if s.id.Load() == 0 || s.held() {
			continue
		}
		t := s.lastHeard(p.bound).Add(s.keepAliveWindow() + p.grace)
		if !ok || t.Before(at) {
			at, ok = t, true
		}
	}
	return at, ok
}

// restUntil returns until when a supervisor with nothing to maintain may
// sleep after its check at now: until the first subscription would fall
// silent or failed items are to be tried again, at most superviseIdle. ok is
// false while a handler runs (silence is not counted then, and the
// supervisor keeps its tick).
func (p *publisher) restUntil(now time.Time) (next time.Time, ok bool) {
	next = now.Add(superviseIdle)
	if at, ok := p.itemRetryAt(); ok {
		next = minTime(next, at)
	}
	if at, ok := p.silentAt(); ok {
		return minTime(next, at.Add(time.Millisecond)), true // past the bound: silent compares with >
	}
	if p.busySince.Load() != 0 {
		return time.Time{}, false
	}
	return next, true
}

// lastHeard is when s was last heard from, or was created, released or
// bound to the session's current channel (bound), whichever came last: its
// keep-alive window runs from there.
func (s *Subscription) lastHeard(bound time.Time) time.Time {
	last := time.Unix(0, s.lastActivity.Load())
	if since := time.Unix(0, s.since.Load()); since.After(last) {
		last = since
	}
	if rel := time.Unix(0, s.releasedAt.Load()); rel.After(last) {
		last = rel
	}
	if bound.After(last) {
		last = bound
	}
	return last
}
