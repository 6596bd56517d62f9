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
// with them), but should hand anything slow to another goroutine.
//
// Acknowledgement. A message is acknowledged (in the next Publish request) once
// its handlers have returned.

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
)

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
}

type subStats struct {
	messages, keepAlives, dataChanges, events atomic.Uint64
	republished, lost, duplicates             atomic.Uint64
	handlerPanics, recreated, transferred     atomic.Uint64
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
	Items         int    // monitored items (not deleted)
	FailedItems   int    // items the server refused, being retried
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
	s.revInterval.Store(int64(c.PublishingInterval))
	s.revKeepAlive.Store(c.KeepAliveCount)
	s.revLifetime.Store(c.LifetimeCount)
	s.publishing.Store(!c.PublishingDisabled)
	s.items.defaults = newTemplate(&s.cfg.Items)
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
// and reports silent ones, until the channel ends.
func (c *Client) maintainSubscriptions(p *publisher) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case now := <-t.C:
			for _, s := range p.silent(now) {
				if s.silent.CompareAndSwap(false, true) && s.cfg.OnStatusChange != nil {
					s.cfg.OnStatusChange(s, ua.StatusBadNoCommunication)
				}
			}
			p.retryItems(c, now)
		}
	}
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

// ErrNotConnected: the managed session is not connected right now; what was
// asked is done once it is (subscriptions and items are created on connect).
var ErrNotConnected = fmt.Errorf("client: not connected: %w", ua.StatusBadNotConnected)

// Modify changes the subscription's publishing interval, keep-alive and
// lifetime counts, notification limit and priority (the other fields of cfg are
// ignored; zero fields take the defaults, as in CreateSubscription).
func (s *Subscription) Modify(ctx context.Context, cfg SubscriptionConfig) error {
	cfg.Items = s.cfg.Items
	cfg.Timestamps = s.cfg.Timestamps
	cfg.ItemRetryInterval = s.cfg.ItemRetryInterval
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
	req := &ua.ModifySubscriptionRequest{
		SubscriptionID:              id,
		RequestedPublishingInterval: float64(n.PublishingInterval) / float64(time.Millisecond),
		RequestedLifetimeCount:      n.LifetimeCount,
		RequestedMaxKeepAliveCount:  n.KeepAliveCount,
		MaxNotificationsPerPublish:  n.MaxNotificationsPerPublish,
		Priority:                    n.Priority,
	}
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
