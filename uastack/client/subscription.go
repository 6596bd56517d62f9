package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// Subscriptions (OPC UA Part 4 §5.13) and the handlers they deliver to.
//
// Ownership of notifications. A handler gets the notifications of one
// NotificationMessage as a slice into a pooled ua.DataChangeNotification (or
// ua.EventNotificationList). The slice, its elements and everything they
// reference (Variant strings, arrays, ExtensionObjects) are valid only until the
// handler returns: the dispatch loop releases them to their pools in a defer as
// soon as the handler is done, also when it panics (the panic is recovered,
// logged and counted in SubscriptionStats.HandlerPanics). A handler that keeps
// anything copies it: a DataValue holding a scalar number is a plain value
// copy; strings and arrays must be cloned.
//
// Threading. The handlers of all subscriptions of a session run one after the
// other on the session's dispatch goroutine, in sequence-number order per
// subscription. While a handler runs, no further Publish request is sent: a slow
// handler makes the server queue (and, when its queues are full, drop) rather
// than the client buffer without bound. A handler may call the methods of the
// Subscription and the session (they wait for the server, and dispatch waits
// with them), but should hand anything slow to another goroutine. Gap filling
// (Republish) runs on goroutines of the publish engine, at most
// maxConcurrentGapFills per session; the messages it recovers are still
// delivered on the dispatch goroutine, in order, and the subscription's
// messages that arrive meanwhile are left unacknowledged at the server and
// fetched with Republish once the gap is filled (no buffering on our side), so
// one subscription's gap never holds up the others.
//
// Acknowledgement. SubscriptionConfig.AckMode chooses who acknowledges a
// notification message to the server (Part 4 §5.13.5: only acknowledged
// messages leave the server's retransmission queue):
//
//   - AckOnReturn (the default): the engine acknowledges a message, in the next
//     Publish request, once its handlers have returned.
//   - AckManual: the application does, with Subscription.Ack(seq), once the
//     data is safe (say, every at-least-once sink confirmed it). At most
//     MaxUnacked messages are delivered and not yet acknowledged; at that limit
//     the subscription is held: the engine sends no Publish request on its
//     behalf, so the server's queues hold the data (backpressure), and a
//     message for it that still arrives (on a request that was at the server
//     already, or one meant for another subscription of the session) is not
//     delivered but left unacknowledged at the server and fetched with
//     Republish once acknowledgements make room. A held subscription is not
//     silent: it does not start a recovery. Use one subscription per session
//     for at-least-once delivery, so that no request meant for one subscription
//     carries another's messages. The engine's Publish requests carry the
//     acknowledgements: a held session sends none until Ack frees room, and
//     then at once; otherwise an acknowledgement goes out with the next
//     request sent, which, when all of them wait at the server, is the one
//     sent after the next response (at the latest a keep-alive). Keep the limit well below the server's retransmission
//     queue (MaxUnacked ≤ the server's queue, say 64 for most servers), or the
//     server drops what it cannot keep and the loss is reported through OnGap.
//
// In both modes OnMessageDone(sub, seq) is called on the dispatch goroutine
// once every handler call for message seq has returned (republished messages
// included, keep-alives not): in AckManual mode that is when the application
// knows all of seq's notifications were handed over.
//
// A duplicate message (a number already delivered) is dropped; it is
// acknowledged again unless the original is still waiting for Ack. After a
// transfer to a new session the unacknowledged messages stay unacknowledged
// (the server kept them with the subscription) and Ack still works for them;
// after the subscription had to be created anew (OnGap with to == 0) they are
// forgotten: the server's copy is gone, the new subscription numbers its
// messages from 1 again, and an Ack of an earlier number could name a new
// message, so the application must drop the numbers it still holds then.
//
// After a recovery (reactivation or transfer) some servers send each item's
// last value again with a new sequence number (node-opcua does on every
// ActivateSession). The first notification of each item after a recovery is
// therefore compared with the last one delivered for it (status, source
// timestamp, value); an identical one is dropped and counted
// (SubscriptionStats.Suppressed). Items without a source timestamp are never
// dropped: a resend cannot be told from a new sample.

// DataChangeHandler receives the data changes of one notification message: seq
// is its sequence number, items its MonitoredItemNotifications, each naming
// its item by client handle. items is valid only during the call.
type DataChangeHandler func(sub *Subscription, seq uint32, items []ua.MonitoredItemNotification)

// EventHandler receives the events of one notification message; events[i]
// holds the fields of the item's EventFilter select clauses, in order. events
// is valid only during the call.
type EventHandler func(sub *Subscription, seq uint32, events []ua.EventFieldList)

// Defaults of SubscriptionConfig.
const (
	DefaultPublishingInterval = time.Second
	DefaultKeepAliveCount     = 10
	// DefaultSubscriptionLifetime is how long a subscription outlives its client's silence
	// at the server when LifetimeCount is 0: long enough for a reconnect to find
	// it there (the session's default timeout).
	DefaultSubscriptionLifetime = 10 * time.Minute
	// DefaultMaxUnacked is SubscriptionConfig.MaxUnacked when it is 0.
	DefaultMaxUnacked = 64
	// maxMaxUnacked bounds MaxUnacked: servers keep far fewer messages.
	maxMaxUnacked = 1 << 16
)

// AckMode says who acknowledges a subscription's notification messages (see
// Acknowledgement above).
type AckMode uint8

const (
	// AckOnReturn acknowledges a message once its handlers have returned.
	AckOnReturn AckMode = iota
	// AckManual leaves it to Subscription.Ack, with at most MaxUnacked
	// messages delivered and not acknowledged.
	AckManual
)

func (m AckMode) String() string {
	switch m {
	case AckOnReturn:
		return "AckOnReturn"
	case AckManual:
		return "AckManual"
	}
	return fmt.Sprintf("AckMode(%d)", uint8(m))
}

// SubscriptionConfig configures a subscription. The zero value is complete
// apart from the handlers.
type SubscriptionConfig struct {
	// PublishingInterval is the requested publishing interval; 0 means
	// DefaultPublishingInterval. The server revises it (Subscription.PublishingInterval).
	PublishingInterval time.Duration
	// KeepAliveCount is the number of empty publishing intervals after which the
	// server sends a keep-alive; 0 means DefaultKeepAliveCount.
	KeepAliveCount uint32
	// LifetimeCount is the number of publishing intervals without a Publish
	// request after which the server deletes the subscription; 0 means
	// DefaultSubscriptionLifetime worth of intervals (at least 3 × KeepAliveCount).
	LifetimeCount uint32
	// MaxNotificationsPerPublish bounds the notifications in one message; 0: no limit.
	MaxNotificationsPerPublish uint32
	// Priority orders subscriptions of a session at the server.
	Priority byte
	// PublishingDisabled creates the subscription with publishing off (see
	// SetPublishingMode).
	PublishingDisabled bool
	// Timestamps selects the timestamps of data changes; the zero value is both.
	Timestamps Timestamps
	// Items holds the defaults of monitored items created without options.
	Items ItemOptions

	// AckMode says who acknowledges the notification messages: the engine
	// once the handlers returned (AckOnReturn, the default), or the
	// application with Subscription.Ack (AckManual).
	AckMode AckMode
	// MaxUnacked is, under AckManual, the most notification messages delivered
	// but not yet acknowledged; at the limit no Publish request is sent for
	// the subscription until Ack makes room. 0 means DefaultMaxUnacked.
	MaxUnacked int
	// OnMessageDone is called on the dispatch goroutine after every handler
	// call for the data message seq has returned (in both modes, for
	// republished messages too, not for keep-alives). Under AckManual it is
	// where an application learns that seq's notifications are all handed
	// over. It must not block.
	OnMessageDone func(sub *Subscription, seq uint32)

	// OnDataChange receives data changes; OnEvent events. See the ownership
	// rules above.
	OnDataChange DataChangeHandler
	OnEvent      EventHandler
	// OnGap is told of notification messages that are lost for good: from..to
	// (sequence numbers, inclusive) were neither received nor available for
	// Republish. to == 0 means the subscription itself was lost (its server,
	// or its session and the subscription with it, was gone) and recreated:
	// everything after from-1 up to the new subscription's first values is lost.
	// It runs on the dispatch goroutine.
	OnGap func(sub *Subscription, from, to uint32)
	// OnStatusChange is told of the subscription's status: the server's
	// StatusChangeNotification (BadTimeout, GoodSubscriptionTransferred),
	// StatusGoodSubscriptionTransferred when a managed session moved it to a new
	// session, StatusBadNoCommunication when it went silent or its session
	// failed, StatusGood when it delivers again. It runs on the dispatch
	// goroutine or on the managed session's worker, and must not block.
	OnStatusChange func(sub *Subscription, status ua.StatusCode)
	// OnItemStatus is told when a monitored item cannot be created (or
	// re-created, or modified), with the server's status for it, and when a
	// failed item was created on a retry (StatusGood). Items that fail are
	// retried every ItemRetryInterval; the others are not affected.
	OnItemStatus func(sub *Subscription, handle uint32, status ua.StatusCode)
	// ItemRetryInterval is how often failed monitored items are retried; 0
	// means DefaultItemRetryInterval, a negative value never.
	ItemRetryInterval time.Duration

	// Resume, when set, takes over the subscription another session made
	// (a restart, another replica): see resume.go. ManagedSession only.
	Resume *ResumeState
}

// Timestamps selects the timestamps a server returns with data changes.
type Timestamps uint8

const (
	TimestampsBoth Timestamps = iota
	TimestampsSource
	TimestampsServer
	TimestampsNeither
)

func (t Timestamps) ua() ua.TimestampsToReturn {
	switch t {
	case TimestampsSource:
		return ua.TimestampsToReturnSource
	case TimestampsServer:
		return ua.TimestampsToReturnServer
	case TimestampsNeither:
		return ua.TimestampsToReturnNeither
	}
	return ua.TimestampsToReturnBoth
}

// DefaultItemRetryInterval is how often monitored items that failed are tried
// again.
const DefaultItemRetryInterval = 30 * time.Second

// Subscription is a subscription of a session, with its monitored items. Its
// methods are safe for concurrent use (but see the threading rules above for
// calls from handlers).
type Subscription struct {
	pub *publisher
	cfg SubscriptionConfig

	id    atomic.Uint32 // the server's id; 0 while it does not exist there
	epoch atomic.Uint64 // bumped when the subscription is created anew
	seq   seqState      // dispatch loop only

	lastActivity atomic.Int64 // UnixNano of the last response for it
	since        atomic.Int64 // UnixNano of its creation (or recreation, or transfer)

	revInterval  atomic.Int64 // revised publishing interval, ns
	revKeepAlive atomic.Uint32
	revLifetime  atomic.Uint32
	publishing   atomic.Bool
	silent       atomic.Bool // reported as silent, not yet heard from again

	opMu  sync.Mutex // serialises creating, re-creating and deleting items on the server
	items itemTable
	stats subStats

	acks       ackSet       // AckManual: delivered, not yet acknowledged
	releasedAt atomic.Int64 // UnixNano when it was last released from being held (for the watchdog)

	rs resumeState // resume.go
}

type subStats struct {
	messages, keepAlives, dataChanges, events atomic.Uint64
	republished, lost, duplicates             atomic.Uint64
	handlerPanics, recreated, transferred     atomic.Uint64
	suppressed, badAcks, adopted              atomic.Uint64
}

// ackSet holds the sequence numbers of an AckManual subscription's messages
// that were delivered and not yet sent to the server as acknowledged, in the
// order delivered (ascending, modulo the wrap). Ack marks one; the dispatch
// loop moves the marked ones into the next Publish request. It never grows
// beyond its preallocated capacity (MaxUnacked), so Ack does not allocate and
// never blocks for longer than a binary search under a mutex nobody holds for
// longer.
type ackSet struct {
	mu      sync.Mutex
	ents    []ackEnt // len: delivered and not sent; cap: MaxUnacked
	marked  int      // entries Ack marked, to send
	unacked atomic.Int32
	lastSeq uint32 // the last number pushed (ResumeState's watermark when all are acknowledged)
}

type ackEnt struct {
	seq    uint32
	marked bool
}

// push records a delivered message; the dispatch loop makes sure there is room.
func (a *ackSet) push(seq uint32) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.ents) == cap(a.ents) {
		return false
	}
	a.ents = append(a.ents, ackEnt{seq: seq})
	a.lastSeq = seq
	a.unacked.Add(1)
	return true
}

// find returns the index of seq in ents, or -1; a.mu must be held. The entries
// are ascending from ents[0] (sequence numbers wrap, so distances from the
// first are compared).
func (a *ackSet) find(seq uint32) int {
	if len(a.ents) == 0 {
		return -1
	}
	base := a.ents[0].seq
	if seq != base && !seqAfter(seq, base) {
		return -1
	}
	d := seqDist(base, seq)
	lo, hi := 0, len(a.ents)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if seqDist(base, a.ents[m].seq) < d {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(a.ents) && a.ents[lo].seq == seq {
		return lo
	}
	return -1
}

// waiting reports whether seq was delivered and is not acknowledged yet.
func (a *ackSet) waiting(seq uint32) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := a.find(seq)
	return i >= 0 && !a.ents[i].marked
}

// take appends the marked entries to acks (for subscription id) and drops
// them; it returns the new slice.
func (a *ackSet) take(id uint32, acks []ua.SubscriptionAcknowledgement) []ua.SubscriptionAcknowledgement {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.marked == 0 {
		return acks
	}
	k := 0
	for _, e := range a.ents {
		if e.marked {
			acks = append(acks, ua.SubscriptionAcknowledgement{SubscriptionID: id, SequenceNumber: e.seq})
			continue
		}
		a.ents[k] = e
		k++
	}
	a.ents = a.ents[:k]
	a.marked = 0
	return acks
}

// reset forgets every entry (the subscription was created anew).
func (a *ackSet) reset() {
	a.mu.Lock()
	a.ents = a.ents[:0]
	a.marked = 0
	a.lastSeq = 0
	a.unacked.Store(0)
	a.mu.Unlock()
}

// Ack acknowledges the notification message seq of an AckManual subscription:
// it is sent to the server with the next Publish request, and makes room
// under MaxUnacked at once. It may be called from any goroutine (handlers and
// OnMessageDone included), never blocks and does not allocate. A number that
// is not waiting for an acknowledgement (unknown, acknowledged already, or
// from before the subscription was created anew) changes nothing: the result
// is ErrUnknownSequence, and SubscriptionStats.BadAcks counts it. Under
// AckOnReturn the result is ErrNotManualAck.
func (s *Subscription) Ack(seq uint32) error {
	if s.cfg.AckMode != AckManual {
		return ErrNotManualAck
	}
	a := &s.acks
	a.mu.Lock()
	i := a.find(seq)
	if i < 0 || a.ents[i].marked {
		a.mu.Unlock()
		s.stats.badAcks.Add(1)
		return ErrUnknownSequence
	}
	a.ents[i].marked = true
	a.marked++
	released := int(a.unacked.Add(-1)) == s.cfg.MaxUnacked-1
	if released {
		// It was held: the watchdog's window starts now.
		s.releasedAt.Store(time.Now().UnixNano())
	}
	a.mu.Unlock()
	// The dispatch loop collects the mark into the next Publish request it
	// issues (refill). It is woken only when it waits for this Ack: the
	// subscription was held (requests to issue, a gap fill deferred for
	// room) or the session is closing (quiesce waits for every Ack). One
	// wake-up per acknowledgement was one goroutine hand-off per publish
	// response of a gateway with its log on.
	if released || s.pub.quiescing.Load() {
		s.pub.ackWake()
	}
	return nil
}

// Unacked returns the number of messages delivered and not yet acknowledged
// (AckManual; 0 under AckOnReturn).
func (s *Subscription) Unacked() int { return int(s.acks.unacked.Load()) }

// held reports whether an AckManual subscription is at MaxUnacked.
func (s *Subscription) held() bool {
	return s.cfg.AckMode == AckManual && int(s.acks.unacked.Load()) >= s.cfg.MaxUnacked
}

// room is the number of messages it may still be given (a large number under
// AckOnReturn).
func (s *Subscription) room() int {
	if s.cfg.AckMode != AckManual {
		return math.MaxInt32
	}
	return max(0, s.cfg.MaxUnacked-int(s.acks.unacked.Load()))
}

// SubscriptionStats are a subscription's counters since it was made.
type SubscriptionStats struct {
	Messages      uint64 // notification messages delivered (republished ones included)
	KeepAlives    uint64
	DataChanges   uint64 // MonitoredItemNotifications delivered
	Events        uint64 // EventFieldLists delivered
	Republished   uint64 // messages recovered with Republish
	Lost          uint64 // messages reported lost (OnGap)
	Duplicates    uint64 // duplicate or old messages dropped
	HandlerPanics uint64
	Recreated     uint64 // times it was created anew after its server copy was lost
	Transferred   uint64 // times it was moved to a new session
	Adopted       uint64 // times it was taken up with the session of an earlier process (ResumeSession)
	// Suppressed counts notifications dropped after a recovery because they
	// repeated the last value delivered for their item (same value, status
	// and source timestamp).
	Suppressed uint64
	// BadAcks counts Ack calls for numbers not waiting for one.
	BadAcks     uint64
	Unacked     int // AckManual: messages delivered, not yet acknowledged
	Items       int // monitored items (not deleted)
	FailedItems int // items the server refused, being retried
}

// syncSeq returns the sequence state, reset when the subscription was created
// anew since it was last used.
func (s *Subscription) syncSeq() *seqState {
	if e := s.epoch.Load(); s.seq.epoch != e {
		s.seq = seqState{epoch: e}
	}
	return &s.seq
}

// ID returns the server's id of the subscription, 0 while it does not exist
// on the server (not yet created, or being recovered). It changes when the
// subscription has to be created anew.
func (s *Subscription) ID() uint32 { return s.id.Load() }

// PublishingInterval returns the publishing interval the server granted.
func (s *Subscription) PublishingInterval() time.Duration {
	return time.Duration(s.revInterval.Load())
}

// KeepAliveCount returns the keep-alive count the server granted.
func (s *Subscription) KeepAliveCount() uint32 { return s.revKeepAlive.Load() }

// LifetimeCount returns the lifetime count the server granted.
func (s *Subscription) LifetimeCount() uint32 { return s.revLifetime.Load() }

// keepAliveWindow is the longest the server may stay silent: a keep-alive
// count of publishing intervals, plus one for the timer's phase.
func (s *Subscription) keepAliveWindow() time.Duration {
	return time.Duration(s.revInterval.Load()) * time.Duration(s.revKeepAlive.Load()+1)
}

// LastActivity returns when the server was last heard from for this
// subscription (a message or a keep-alive).
func (s *Subscription) LastActivity() time.Time { return time.Unix(0, s.lastActivity.Load()) }

// Stats returns the subscription's counters.
func (s *Subscription) Stats() SubscriptionStats {
	n, failed := s.items.counts()
	return SubscriptionStats{
		Messages:      s.stats.messages.Load(),
		KeepAlives:    s.stats.keepAlives.Load(),
		DataChanges:   s.stats.dataChanges.Load(),
		Events:        s.stats.events.Load(),
		Republished:   s.stats.republished.Load(),
		Lost:          s.stats.lost.Load(),
		Duplicates:    s.stats.duplicates.Load(),
		HandlerPanics: s.stats.handlerPanics.Load(),
		Recreated:     s.stats.recreated.Load(),
		Transferred:   s.stats.transferred.Load(),
		Adopted:       s.stats.adopted.Load(),
		Suppressed:    s.stats.suppressed.Load(),
		BadAcks:       s.stats.badAcks.Load(),
		Unacked:       s.Unacked(),
		Items:         n,
		FailedItems:   failed,
	}
}

// withDefaults fills the zero fields of a configuration.
func (cfg SubscriptionConfig) withDefaults() (SubscriptionConfig, error) {
	if cfg.PublishingInterval < 0 {
		return cfg, fmt.Errorf("client: SubscriptionConfig.PublishingInterval %v is negative", cfg.PublishingInterval)
	}
	if cfg.PublishingInterval == 0 {
		cfg.PublishingInterval = DefaultPublishingInterval
	}
	if cfg.KeepAliveCount == 0 {
		cfg.KeepAliveCount = DefaultKeepAliveCount
	}
	if cfg.LifetimeCount == 0 {
		n := uint64(DefaultSubscriptionLifetime / cfg.PublishingInterval)
		cfg.LifetimeCount = uint32(min(max(n, 3*uint64(cfg.KeepAliveCount)), math.MaxUint32))
	}
	if cfg.LifetimeCount < 3*cfg.KeepAliveCount {
		return cfg, fmt.Errorf("client: SubscriptionConfig.LifetimeCount %d is less than 3 × KeepAliveCount (%d)", cfg.LifetimeCount, cfg.KeepAliveCount)
	}
	if cfg.ItemRetryInterval == 0 {
		cfg.ItemRetryInterval = DefaultItemRetryInterval
	}
	if cfg.Timestamps > TimestampsNeither {
		return cfg, fmt.Errorf("client: SubscriptionConfig.Timestamps %d is not a Timestamps value", cfg.Timestamps)
	}
	if err := cfg.Items.validate(); err != nil {
		return cfg, fmt.Errorf("client: SubscriptionConfig.Items: %w", err)
	}
	if cfg.AckMode > AckManual {
		return cfg, fmt.Errorf("client: SubscriptionConfig.AckMode %d is not an AckMode", cfg.AckMode)
	}
	if cfg.MaxUnacked < 0 || cfg.MaxUnacked > maxMaxUnacked {
		return cfg, fmt.Errorf("client: SubscriptionConfig.MaxUnacked %d is outside 0..%d", cfg.MaxUnacked, maxMaxUnacked)
	}
	if cfg.MaxUnacked == 0 {
		cfg.MaxUnacked = DefaultMaxUnacked
	}
	return cfg, nil
}

func newSubscription(p *publisher, cfg *SubscriptionConfig) (*Subscription, error) {
	var c SubscriptionConfig
	if cfg != nil {
		c = *cfg
	}
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Subscription{pub: p, cfg: c}
	s.initResume(c.Resume)
	if c.AckMode == AckManual {
		s.acks.ents = make([]ackEnt, 0, c.MaxUnacked)
	}
	s.revInterval.Store(int64(c.PublishingInterval))
	s.revKeepAlive.Store(c.KeepAliveCount)
	s.revLifetime.Store(c.LifetimeCount)
	s.publishing.Store(!c.PublishingDisabled)
	s.items.defaults = newTemplate(&s.cfg.Items)
	s.items.onNeed = p.wakeMaintenance
	return s, nil
}

// subscriptions returns the publish engine of a Client used without a managed
// session, starting it on first use.
func (c *Client) subscriptions() *publisher {
	c.subsOnce.Do(func() {
		p := newPublisher(c.log, DefaultMaxPublishRequests, DefaultKeepAliveGrace, c.cfg.RequestTimeout)
		p.onFault = func(_ *Client, sub *Subscription, err error) {
			// A bare Client does not recover; it tells the handlers.
			subs := []*Subscription{sub}
			if sub == nil {
				subs = p.list()
			}
			for _, s := range subs {
				if s.silent.CompareAndSwap(false, true) && s.cfg.OnStatusChange != nil {
					s.cfg.OnStatusChange(s, ua.StatusBadNoCommunication)
				}
			}
		}
		p.client = c
		p.bound = time.Now()
		c.subs = p
		p.start(c.conn.Done())
		go c.maintainSubscriptions(p)
	})
	return c.subs
}

// maintainSubscriptions retries failed items of a bare Client's subscriptions
// and reports silent ones, until the channel ends. Like a managed session's
// supervisor it ticks only while items need creating or a handler runs; at
// rest it sleeps until the first subscription could fall silent or failed
// items are due, at most superviseIdle, or until wakeMaintenance.
func (c *Client) maintainSubscriptions(p *publisher) {
	const tick = 250 * time.Millisecond
	t := time.NewTimer(tick)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-p.maintain:
			t.Reset(0) // look now
		case now := <-t.C:
			for _, s := range p.silent(now) {
				if s.silent.CompareAndSwap(false, true) && s.cfg.OnStatusChange != nil {
					s.cfg.OnStatusChange(s, ua.StatusBadNoCommunication)
				}
			}
			p.retryItems(c, now)
			t.Reset(p.maintainAfter(now, tick))
		}
	}
}

// maintainAfter returns how long a bare Client's maintenance may sleep after
// its check at now.
func (p *publisher) maintainAfter(now time.Time, tick time.Duration) time.Duration {
	if p.needsMaintenance(now) {
		return tick
	}
	next, ok := p.restUntil(now)
	if !ok {
		return tick
	}
	return max(next.Sub(now), tick)
}

// CreateSubscription creates a subscription on the session. Its handlers
// receive notifications as soon as monitored items are added to it.
//
// A bare Client does not recover from a lost connection: its subscriptions
// report StatusBadNoCommunication and stay silent. ManagedSession.CreateSubscription
// makes subscriptions that survive reconnects.
func (c *Client) CreateSubscription(ctx context.Context, cfg *SubscriptionConfig) (*Subscription, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	p := c.subscriptions()
	s, err := newSubscription(p, cfg)
	if err != nil {
		return nil, err
	}
	p.add(s)
	if err := p.create(ctx, c, s); err != nil {
		p.remove(s)
		return nil, err
	}
	return s, nil
}

// create creates s on the server through c and registers it.
func (p *publisher) create(ctx context.Context, c *Client, s *Subscription) error {
	cfg := &s.cfg
	req := &ua.CreateSubscriptionRequest{
		RequestedPublishingInterval: float64(cfg.PublishingInterval) / float64(time.Millisecond),
		RequestedLifetimeCount:      cfg.LifetimeCount,
		RequestedMaxKeepAliveCount:  cfg.KeepAliveCount,
		MaxNotificationsPerPublish:  cfg.MaxNotificationsPerPublish,
		PublishingEnabled:           s.publishing.Load(),
		Priority:                    cfg.Priority,
	}
	var resp ua.CreateSubscriptionResponse
	p.createMu.Lock()
	defer p.createMu.Unlock()
	start := time.Now()
	if _, err := c.Send(ctx, req, &resp); err != nil {
		return err
	}
	p.observeRTT(time.Since(start))
	if resp.SubscriptionID == 0 {
		return fmt.Errorf("%w: CreateSubscription returned subscription id 0", ErrBadResponse)
	}
	s.revise(resp.RevisedPublishingInterval, resp.RevisedMaxKeepAliveCount, resp.RevisedLifetimeCount)
	now := time.Now().UnixNano()
	s.since.Store(now)
	// A new subscription at the server: the old one's unacknowledged
	// messages are gone with it, and its numbers start again.
	s.acks.reset()
	s.epoch.Add(1)
	p.register(s, resp.SubscriptionID)
	return nil
}

func (s *Subscription) revise(intervalMS float64, keepAlive, lifetime uint32) {
	if intervalMS > 0 {
		s.revInterval.Store(int64(intervalMS * float64(time.Millisecond)))
	}
	if keepAlive > 0 {
		s.revKeepAlive.Store(keepAlive)
	}
	if lifetime > 0 {
		s.revLifetime.Store(lifetime)
	}
	s.pub.wakeMaintenance() // a shorter keep-alive window
}

// client returns the session to send the subscription's requests on, or
// ErrNotConnected.
func (s *Subscription) client() (*Client, error) {
	c := s.pub.current()
	if c == nil || c.closed.Load() {
		return nil, ErrNotConnected
	}
	return c, nil
}

// Modify changes the subscription's publishing interval, keep-alive and
// lifetime counts, notification limit and priority (the other fields of cfg are
// ignored; zero fields take the defaults, as in CreateSubscription).
func (s *Subscription) Modify(ctx context.Context, cfg SubscriptionConfig) error {
	cfg.Items = s.cfg.Items
	cfg.Timestamps = s.cfg.Timestamps
	cfg.ItemRetryInterval = s.cfg.ItemRetryInterval
	cfg.AckMode, cfg.MaxUnacked = s.cfg.AckMode, s.cfg.MaxUnacked
	n, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	c, err := s.client()
	if err != nil {
		return err
	}
	id := s.id.Load()
	if id == 0 {
		return ErrNotConnected
	}
	req := modifyRequest(id, &n)
	var resp ua.ModifySubscriptionResponse
	if _, err := c.Send(ctx, req, &resp); err != nil {
		return err
	}
	// The server parameters of cfg are read under opMu only (by recreate).
	s.cfg.PublishingInterval, s.cfg.KeepAliveCount, s.cfg.LifetimeCount = n.PublishingInterval, n.KeepAliveCount, n.LifetimeCount
	s.cfg.MaxNotificationsPerPublish, s.cfg.Priority = n.MaxNotificationsPerPublish, n.Priority
	s.revise(resp.RevisedPublishingInterval, resp.RevisedMaxKeepAliveCount, resp.RevisedLifetimeCount)
	s.since.Store(time.Now().UnixNano())
	s.pub.updateTimeout()
	s.pub.wake()
	return nil
}

// modifyRequest asks for cfg's server parameters for subscription id.
func modifyRequest(id uint32, cfg *SubscriptionConfig) *ua.ModifySubscriptionRequest {
	return &ua.ModifySubscriptionRequest{
		SubscriptionID:              id,
		RequestedPublishingInterval: float64(cfg.PublishingInterval) / float64(time.Millisecond),
		RequestedLifetimeCount:      cfg.LifetimeCount,
		RequestedMaxKeepAliveCount:  cfg.KeepAliveCount,
		MaxNotificationsPerPublish:  cfg.MaxNotificationsPerPublish,
		Priority:                    cfg.Priority,
	}
}

// SetPublishingMode turns publishing on or off. The setting is kept across
// recreation.
func (s *Subscription) SetPublishingMode(ctx context.Context, enabled bool) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	id := s.id.Load()
	if id == 0 {
		return ErrNotConnected
	}
	req := &ua.SetPublishingModeRequest{PublishingEnabled: enabled, SubscriptionIDs: []uint32{id}}
	var resp ua.SetPublishingModeResponse
	if _, err := c.Send(ctx, req, &resp); err != nil {
		return err
	}
	if len(resp.Results) != 1 {
		return fmt.Errorf("%w: SetPublishingMode of 1 subscription returned %d results", ErrBadResponse, len(resp.Results))
	}
	if sc := resp.Results[0]; sc.IsBad() {
		return fmt.Errorf("client: SetPublishingMode: %w", sc)
	}
	s.publishing.Store(enabled)
	return nil
}

// Delete deletes the subscription (and its monitored items) on the server and
// stops its delivery. It is forgotten even when the server cannot be reached.
func (s *Subscription) Delete(ctx context.Context) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	id := s.id.Load()
	s.pub.remove(s)
	if id == 0 {
		return nil
	}
	c, err := s.client()
	if err != nil {
		// Not connected: a managed session deletes it once it is (the server
		// may still have it when the session is reactivated).
		s.pub.deleteLater(id)
		return nil
	}
	req := &ua.DeleteSubscriptionsRequest{SubscriptionIDs: []uint32{id}}
	var resp ua.DeleteSubscriptionsResponse
	if _, err := c.Send(ctx, req, &resp); err != nil {
		if isConnectionError(err) {
			s.pub.deleteLater(id)
		}
		return err
	}
	if len(resp.Results) == 1 && resp.Results[0].IsBad() && !errors.Is(resp.Results[0], ua.StatusBadSubscriptionIdInvalid) {
		return fmt.Errorf("client: DeleteSubscriptions: %w", resp.Results[0])
	}
	return nil
}
