package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// Monitored items (OPC UA Part 4 §5.12).
//
// A subscription keeps every monitored item it was asked for in a table indexed
// by client handle: the client handle is assigned by the subscription, 1, 2, 3
// … in the order items are added, and is what notifications carry. The table
// holds what it takes to create the item again (node, attribute, options shared
// by all items created with the same *ItemOptions) and the server's answer (id,
// status, revised sampling interval and queue size) in an entry of 32 bytes,
// plus 16 for the last value delivered (resend.go), in pages of 4096; the
// node id's text goes into the table's byte arena (itemstore.go), so a
// million items of 16-byte ids need 64 MB, and a notification never
// looks an item up: the handler gets the client handles. A node given by
// namespace URI keeps the URI (an index into a small list of the table's
// URIs), resolved again at every creation on the server.
//
// An item the server refuses (BadNodeIdUnknown, BadNotReadable,
// BadTooManyMonitoredItems …) is reported through OnItemStatus and tried again
// every ItemRetryInterval; its siblings are created regardless. Items added
// while a managed session is not connected are created when it is.

// MonitoringMode of a monitored item; the zero value is Reporting.
type MonitoringMode uint8

const (
	// Reporting samples and reports (OPC UA MonitoringMode Reporting).
	Reporting MonitoringMode = iota
	// Sampling samples into the queue without reporting (used with triggering).
	Sampling
	// Disabled neither samples nor reports.
	Disabled
)

func (m MonitoringMode) ua() ua.MonitoringMode {
	switch m {
	case Sampling:
		return ua.MonitoringModeSampling
	case Disabled:
		return ua.MonitoringModeDisabled
	}
	return ua.MonitoringModeReporting
}

func (m MonitoringMode) String() string {
	switch m {
	case Reporting:
		return "Reporting"
	case Sampling:
		return "Sampling"
	case Disabled:
		return "Disabled"
	}
	return fmt.Sprintf("MonitoringMode(%d)", uint8(m))
}

// SamplingFastest, as ItemOptions.SamplingInterval, asks the server for its
// fastest rate (OPC UA sampling interval 0: exception-based where the server
// supports it).
const SamplingFastest time.Duration = -1

// AttributeEventNotifier is the attribute event items monitor.
const AttributeEventNotifier uint32 = 12

// ItemOptions are the monitoring parameters of items. The zero value samples
// at the publishing interval, keeps one value, reports changes of status or
// value.
type ItemOptions struct {
	// SamplingInterval: > 0 that interval; 0 the subscription's publishing
	// interval (OPC UA -1); SamplingFastest the server's fastest.
	SamplingInterval time.Duration
	// QueueSize is the server's queue per item; 0 means 1.
	QueueSize uint32
	// DiscardNewest drops the newest value when the queue is full instead of
	// the oldest.
	DiscardNewest bool
	// Mode is the monitoring mode the item is created in.
	Mode MonitoringMode
	// DataChange is the data change filter (trigger, deadband; see
	// AbsoluteDeadband, PercentDeadband); nil: the server's default
	// (status or value changes).
	DataChange *ua.DataChangeFilter
	// Event makes the items event items: the filter's select clauses are the
	// fields each event delivers (see SelectEventFields), its where clause
	// which events (see OfType). Their attribute defaults to EventNotifier.
	Event *ua.EventFilter
}

func (o *ItemOptions) validate() error {
	if o == nil {
		return nil
	}
	if o.SamplingInterval < 0 && o.SamplingInterval != SamplingFastest {
		return fmt.Errorf("the SamplingInterval %v is negative (use SamplingFastest)", o.SamplingInterval)
	}
	if o.Mode > Disabled {
		return fmt.Errorf("the Mode %d is not a MonitoringMode", o.Mode)
	}
	if o.DataChange != nil && o.Event != nil {
		return errors.New("the DataChange and Event filters exclude each other")
	}
	if f := o.DataChange; f != nil {
		switch ua.DeadbandType(f.DeadbandType) {
		case ua.DeadbandTypeNone, ua.DeadbandTypeAbsolute:
		case ua.DeadbandTypePercent:
			if f.DeadbandValue < 0 || f.DeadbandValue > 100 {
				return fmt.Errorf("percent deadband %v is outside 0..100", f.DeadbandValue)
			}
		default:
			return fmt.Errorf("the DeadbandType %d is unknown", f.DeadbandType)
		}
		if f.DeadbandValue < 0 {
			return fmt.Errorf("deadband %v is negative", f.DeadbandValue)
		}
	}
	return nil
}

// AbsoluteDeadband is a data change filter that reports a value when it moved
// by more than v (and on status changes).
func AbsoluteDeadband(v float64) *ua.DataChangeFilter {
	return &ua.DataChangeFilter{Trigger: ua.DataChangeTriggerStatusValue, DeadbandType: uint32(ua.DeadbandTypeAbsolute), DeadbandValue: v}
}

// PercentDeadband is a data change filter that reports a value when it moved
// by more than pct percent of the item's EURange (AnalogItems only).
func PercentDeadband(pct float64) *ua.DataChangeFilter {
	return &ua.DataChangeFilter{Trigger: ua.DataChangeTriggerStatusValue, DeadbandType: uint32(ua.DeadbandTypePercent), DeadbandValue: pct}
}

// SelectEventFields returns select clauses for fields of BaseEventType (and
// its subtypes) by browse path: "EventId", "Time", "Message", "Severity",
// "SourceName", or a path such as "EnabledState/Id". Names are in namespace 0
// unless prefixed "<ns>:".
func SelectEventFields(paths ...string) []ua.SimpleAttributeOperand {
	out := make([]ua.SimpleAttributeOperand, len(paths))
	for i, p := range paths {
		var qn []ua.QualifiedName
		for _, part := range strings.Split(p, "/") {
			var ns uint16
			if j := strings.IndexByte(part, ':'); j > 0 {
				var n int
				if _, err := fmt.Sscanf(part[:j], "%d", &n); err == nil && n >= 0 && n <= math.MaxUint16 {
					ns, part = uint16(n), part[j+1:]
				}
			}
			qn = append(qn, ua.NewQualifiedName(ns, part))
		}
		out[i] = ua.SimpleAttributeOperand{
			TypeDefinitionID: ua.NewNumericNodeID(0, ua.ID_BaseEventType),
			BrowsePath:       qn,
			AttributeID:      AttributeValue,
		}
	}
	return out
}

// OfType is a where clause that passes events of eventType and its subtypes.
func OfType(eventType ua.NodeID) ua.ContentFilter {
	var v ua.Variant
	v, _ = ua.NewVariant(eventType)
	return ua.ContentFilter{Elements: []ua.ContentFilterElement{{
		FilterOperator: ua.FilterOperatorOfType,
		FilterOperands: []ua.ExtensionObject{ua.NewExtensionObject(&ua.LiteralOperand{Value: v})},
	}}}
}

// ItemRequest asks for one monitored item.
type ItemRequest struct {
	// NodeID is the node, by namespace index.
	NodeID ua.NodeID
	// Node, when not null, is the node instead of NodeID. A NamespaceURI
	// (nsu=) in it is resolved against the server's namespace array every time
	// the item is created on the server (at first, when its subscription is
	// created anew, on retries), so a server that restarted with its
	// namespaces in another order still gets the node meant; while the server
	// does not know the namespace, the item fails with BadNodeIdUnknown and is
	// retried. ServerIndex must be 0.
	Node ua.ExpandedNodeID
	// AttributeID is the attribute to monitor; 0 means Value, or EventNotifier
	// when the options have an Event filter.
	AttributeID uint32
	// IndexRange selects elements of an array value ("2:4"); "" the whole value.
	IndexRange string
	// Options are the item's monitoring parameters; nil means the
	// subscription's SubscriptionConfig.Items. Items created in one call with the
	// same *ItemOptions share one copy of them.
	Options *ItemOptions
}

// itemTemplate is what items created with the same options share: their
// parameters as sent (ClientHandle aside).
type itemTemplate struct {
	params ua.MonitoringParameters
	mode   MonitoringMode
	event  bool
}

func newTemplate(o *ItemOptions) *itemTemplate {
	t := &itemTemplate{mode: o.Mode, event: o.Event != nil}
	p := &t.params
	switch {
	case o.SamplingInterval == SamplingFastest:
		p.SamplingInterval = 0
	case o.SamplingInterval == 0:
		p.SamplingInterval = -1
	default:
		p.SamplingInterval = float64(o.SamplingInterval) / float64(time.Millisecond)
	}
	p.QueueSize = max(o.QueueSize, 1)
	p.DiscardOldest = !o.DiscardNewest
	switch {
	case o.DataChange != nil:
		f := *o.DataChange
		p.Filter = ua.NewExtensionObject(&f)
	case o.Event != nil:
		f := *o.Event
		p.Filter = ua.NewExtensionObject(&f)
	}
	return t
}

// item is one monitored item of a subscription: 32 bytes (TestItemSize),
// what does not fit is in the table's side storage (itemstore.go).
type item struct {
	// ref is the node's identifier: the number of a numeric id, the offset
	// of a string or opaque id in itemTable.text (tlen bytes), the index of
	// its text in itemTable.long (itemLongText), or of its Guid in
	// itemTable.guids.
	ref      uint32
	id       uint32        // the server's id; 0 while it does not exist there
	status   ua.StatusCode // the server's last answer for it
	sampling float32       // revised sampling interval, ms
	queue    uint32        // revised queue size
	tmpl     uint32        // index into itemTable.tmpls
	ns       uint16        // the node's namespace index (for nsu: as last resolved)
	tlen     uint16        // length of the text at ref
	nsu      uint16        // 1 + index into itemTable.uris of the node's namespace URI; 0: none
	attr     uint8         // the attribute id; attrOther: in itemTable.attrs
	bits     uint8         // itemDeleted …, the node's ua.IDType, the MonitoringMode
}

// lastValue is the last value delivered for an item, for dropping resent ones
// (resend.go); the dispatch loop reads and writes it, under itemTable.mu. It
// lives beside the items, in pages of its own, so the pass over a message's
// notifications touches 16 bytes per item, not the whole entry.
type lastValue struct {
	ts uint64 // the SourceTimestamp (lastTS bits), 0: none; lastOpen: in a recovery window
	fp uint64 // digest of the value, its type and its status (resend.go)
}

const (
	itemPageShift = 12
	itemPageSize  = 1 << itemPageShift
)

// itemTable holds a subscription's items by client handle (index + 1).
type itemTable struct {
	mu       sync.Mutex
	pages    [][]item
	last     [][]lastValue // parallel to pages
	n        int
	created  int               // items that exist on the server
	failed   int               // items the server refused
	pending  int               // items not yet (or no longer) on the server, not refused
	onNeed   func()            // an item became pending or failed (publisher.wakeMaintenance); nil: none
	ranges   map[uint32]string // index ranges by handle (itemHasRange)
	attrs    map[uint32]uint32 // attribute ids above 254 by handle (attrOther)
	uris     []string          // namespace URIs of the items' nodes (item.nsu - 1 indexes it)
	defaults *itemTemplate

	// Side storage of the items (itemstore.go): node id texts, Guids and long
	// texts; the bytes they hold for live and for deleted items.
	text               textArena
	guids              []ua.Guid
	long               []string
	sideLive, sideDead int

	// Templates by index (item.tmpl), their index by pointer, free slots.
	tmpls    []tmplSlot
	tmplIdx  map[*itemTemplate]uint32
	tmplFree []uint32
	retryAt  time.Time
	reserved int // items announced by reserve and not pushed yet

	// gen counts the changes of the items' server ids (created, adopted,
	// forgotten, deleted): Subscription.ResumeMark (resume.go).
	gen uint64
}

// uriIndex returns item.nsu for uri, adding it; t.mu must be held.
func (t *itemTable) uriIndex(uri string) (uint16, error) {
	for i, u := range t.uris {
		if u == uri {
			return uint16(i + 1), nil
		}
	}
	if len(t.uris) >= math.MaxUint16 {
		return 0, fmt.Errorf("more than %d namespace URIs", math.MaxUint16)
	}
	t.uris = append(t.uris, uri)
	return uint16(len(t.uris)), nil
}

// at returns the item of handle h (1 … n); t.mu must be held.
func (t *itemTable) at(h uint32) *item {
	i := int(h) - 1
	return &t.pages[i>>itemPageShift][i&(itemPageSize-1)]
}

// lastOf returns the last value of handle h (1 … n); t.mu must be held.
func (t *itemTable) lastOf(h uint32) *lastValue {
	i := int(h) - 1
	return &t.last[i>>itemPageShift][i&(itemPageSize-1)]
}

func (t *itemTable) valid(h uint32) bool { return h >= 1 && int(h) <= t.n }

// reserve announces n more items, so that pushing a large batch fills pages
// allocated once at their final size instead of growing each by doubling
// (garbage of the table's own size, which the runtime does not give back
// soon); a small batch gets no more than it needs.
func (t *itemTable) reserve(n int) {
	t.reserved = n
	if len(t.pages) == 0 {
		return
	}
	last := len(t.pages) - 1
	if l := len(t.pages[last]); l < itemPageSize {
		if more := min(n, itemPageSize-l); l+more > cap(t.pages[last]) {
			t.pages[last] = slices.Grow(t.pages[last], more)
			t.last[last] = slices.Grow(t.last[last], more)
		}
	}
}

func (t *itemTable) push(it item) uint32 {
	if len(t.pages) == 0 || len(t.pages[len(t.pages)-1]) == itemPageSize {
		c := min(max(t.reserved, 1), itemPageSize)
		t.pages = append(t.pages, make([]item, 0, c))
		t.last = append(t.last, make([]lastValue, 0, c))
	}
	if t.reserved > 0 {
		t.reserved--
	}
	if it.id != 0 {
		t.gen++
	}
	last := &t.pages[len(t.pages)-1]
	*last = append(*last, it)
	lv := &t.last[len(t.last)-1]
	*lv = append(*lv, lastValue{})
	t.n++
	t.count(&it, 1)
	return uint32(t.n)
}

func (t *itemTable) count(it *item, d int) {
	switch {
	case it.deleted():
	case it.id != 0:
		t.created += d
	case it.status.IsBad():
		t.failed += d
	default:
		t.pending += d
	}
	if d > 0 && it.id == 0 && !it.deleted() && t.onNeed != nil {
		t.onNeed()
	}
}

// set records the server's answer for an item.
func (t *itemTable) set(it *item, id uint32, st ua.StatusCode) {
	if it.id != id {
		t.gen++
	}
	t.count(it, -1)
	it.id, it.status = id, st
	t.count(it, 1)
}

func (t *itemTable) counts() (live, failed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.created + t.failed + t.pending, t.failed
}

// ItemInfo describes a monitored item.
type ItemInfo struct {
	Handle uint32
	// NodeID is the node; for a node given by namespace URI, with the index
	// it had when the item was last created (NamespaceURI says which).
	NodeID       ua.NodeID
	NamespaceURI string
	AttributeID  uint32
	IndexRange   string
	// ID is the server's id of the item, 0 while it does not exist there.
	ID uint32
	// Status is the server's last answer for the item: Good once created, the
	// reason otherwise (Good with ID 0: not tried yet).
	Status           ua.StatusCode
	SamplingInterval time.Duration // as revised by the server
	QueueSize        uint32        // as revised by the server
	Mode             MonitoringMode
}

// Item returns the monitored item with client handle h.
func (s *Subscription) Item(h uint32) (ItemInfo, bool) {
	t := &s.items
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.valid(h) {
		return ItemInfo{}, false
	}
	it := t.at(h)
	if it.deleted() {
		return ItemInfo{}, false
	}
	info := ItemInfo{
		Handle: h, NodeID: t.node(it), AttributeID: t.attrOf(h, it), ID: it.id, Status: it.status,
		SamplingInterval: time.Duration(float64(it.sampling) * float64(time.Millisecond)),
		QueueSize:        it.queue, Mode: it.mode(),
	}
	if it.bits&itemHasRange != 0 {
		info.IndexRange = t.ranges[h]
	}
	if it.nsu != 0 {
		info.NamespaceURI = t.uris[it.nsu-1]
	}
	return info, true
}

// FailedItems returns the handles of the items the server refused (they are
// being retried).
func (s *Subscription) FailedItems() []uint32 {
	t := &s.items
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []uint32
	if t.failed == 0 {
		return nil
	}
	for h := uint32(1); int(h) <= t.n; h++ {
		if it := t.at(h); !it.deleted() && it.id == 0 && it.status.IsBad() {
			out = append(out, h)
		}
	}
	return out
}

// CreateItemsOptions tune CreateMonitoredItems.
type CreateItemsOptions struct {
	// BatchSize bounds the items per CreateMonitoredItems request; 0 means the
	// server's MaxMonitoredItemsPerCall, or DefaultItemBatchSize when the
	// server sets no limit or a larger one.
	BatchSize int
	// Progress, when set, is called after every batch with the items handled
	// so far (created or refused) and the total.
	Progress func(done, total int)
}

// DefaultItemBatchSize bounds a CreateMonitoredItems request when the server
// publishes no lower limit: it keeps requests and responses far from message
// size limits.
const DefaultItemBatchSize = 1000

// CreateResult sums up a CreateMonitoredItems call.
type CreateResult struct {
	// FirstHandle is the client handle of the first item: items[i] has client
	// handle FirstHandle + i.
	FirstHandle uint32
	Created     int // created on the server
	Failed      int // refused by the server (reported through OnItemStatus, retried)
	Pending     int // not sent: created once the session is (re)connected
}

// CreateMonitoredItems adds monitored items to the subscription and creates
// them on the server in batches that respect its limits. Items the server
// refuses are counted in Failed, reported through OnItemStatus and retried
// every ItemRetryInterval; the error is for the call as a whole (a request
// that failed, a context that ended): items not yet sent stay in the
// subscription as Pending and are created once the (managed) session is
// connected again.
func (s *Subscription) CreateMonitoredItems(ctx context.Context, items []ItemRequest, opts *CreateItemsOptions) (CreateResult, error) {
	byOpts := map[*ItemOptions]*itemTemplate{}
	for i := range items {
		r := &items[i]
		if r.Node.ServerIndex != 0 {
			return CreateResult{}, fmt.Errorf("client: CreateMonitoredItems: item %d: %w: %s is on another server", i, ua.ErrInvalidNodeID, r.Node)
		}
		if r.NodeID.Type > ua.IDOpaque || r.Node.NodeID.Type > ua.IDOpaque {
			return CreateResult{}, fmt.Errorf("client: CreateMonitoredItems: item %d: %w: identifier type %d", i, ua.ErrInvalidNodeID, max(r.NodeID.Type, r.Node.NodeID.Type))
		}
		if r.Options == nil {
			continue
		}
		if _, ok := byOpts[r.Options]; ok {
			continue
		}
		if err := r.Options.validate(); err != nil {
			return CreateResult{}, fmt.Errorf("client: CreateMonitoredItems: item %d: %w", i, err)
		}
		byOpts[r.Options] = newTemplate(r.Options)
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	t := &s.items
	t.mu.Lock()
	first := uint32(t.n + 1)
	t.reserve(len(items))
	for i := range items {
		r := &items[i]
		tm := t.defaults
		if r.Options != nil {
			tm = byOpts[r.Options]
		}
		node := r.NodeID
		var nsu uint16
		if !r.Node.IsNull() {
			node = r.Node.NodeID
			if r.Node.NamespaceURI != "" {
				node.Namespace = 0 // not resolved yet
				var err error
				if nsu, err = t.uriIndex(r.Node.NamespaceURI); err != nil {
					t.mu.Unlock()
					return CreateResult{}, fmt.Errorf("client: CreateMonitoredItems: item %d: %w", i, err)
				}
			}
		}
		attr := r.AttributeID
		if attr == 0 {
			attr = AttributeValue
			if tm.event {
				attr = AttributeEventNotifier
			}
		}
		it := item{tmpl: t.tmplIndex(tm), nsu: nsu, attr: attrOther}
		t.holdTmpl(it.tmpl)
		it.setMode(tm.mode)
		t.setNode(&it, node)
		if attr < attrOther {
			it.attr = uint8(attr)
		}
		if r.IndexRange != "" {
			it.bits |= itemHasRange
		}
		h := t.push(it)
		if it.attr == attrOther {
			if t.attrs == nil {
				t.attrs = map[uint32]uint32{}
			}
			t.attrs[h] = attr
		}
		if r.IndexRange != "" {
			if t.ranges == nil {
				t.ranges = map[uint32]string{}
			}
			t.ranges[h] = r.IndexRange
		}
	}
	adopted := s.adoptItems(t, first, len(items)) // resume.go
	t.mu.Unlock()
	res := CreateResult{FirstHandle: first, Created: adopted}
	if len(items) == 0 {
		return res, nil
	}
	handles := make([]uint32, len(items))
	for i := range handles {
		handles[i] = first + uint32(i)
	}
	c, err := s.client()
	if err != nil || s.id.Load() == 0 {
		res.Pending = len(items) - adopted
		return res, nil
	}
	var progress func(int, int)
	batch := 0
	if opts != nil {
		progress, batch = opts.Progress, opts.BatchSize
	}
	created, failed, err := s.createItems(ctx, c, handles, batch, progress)
	res.Created, res.Failed = adopted+created, failed
	res.Pending = len(items) - res.Created - failed
	return res, err
}

// itemBatch returns the number of items per request.
func itemBatch(c *Client, want int) int {
	b := DefaultItemBatchSize
	if want > 0 {
		b = want
	}
	if l := c.chunkSize(limitMonitoredItems); l > 0 && l < b {
		b = l
	}
	return b
}

// tooLarge reports whether err says a request or its response was too big.
func tooLarge(err error) bool {
	return errors.Is(err, uasc.ErrRequestTooLarge) || errorsIsAny(err, ua.StatusBadTooManyOperations,
		ua.StatusBadRequestTooLarge, ua.StatusBadResponseTooLarge, ua.StatusBadEncodingLimitsExceeded)
}

// createItems creates the items of handles on the server, in order and in
// batches; s.opMu must be held. It returns how many were created and how many
// refused; items it did not get to stay pending.
func (s *Subscription) createItems(ctx context.Context, c *Client, handles []uint32, batch int, progress func(int, int)) (created, failed int, err error) {
	t := &s.items
	size := itemBatch(c, batch)
	req := &ua.CreateMonitoredItemsRequest{
		SubscriptionID:     s.id.Load(),
		TimestampsToReturn: s.cfg.Timestamps.ua(),
		ItemsToCreate:      make([]ua.MonitoredItemCreateRequest, 0, min(size, len(handles))),
	}
	var resp ua.CreateMonitoredItemsResponse
	sent := make([]uint32, 0, cap(req.ItemsToCreate))
	type report struct {
		h  uint32
		st ua.StatusCode
	}
	var reports []report
	var orphans []uint32 // created for items deleted meanwhile
	// Namespace URIs are resolved against the array of this session (read
	// when it was made): after a restart it may be in another order.
	var resolved []int // t.uris[i] is namespace resolved[i] on the server, -1: unknown there
	namespaces := c.Namespaces()
	t.mu.Lock()
	for _, u := range t.uris {
		ns := slices.Index(namespaces, u)
		if ns > math.MaxUint16 {
			ns = -1
		}
		resolved = append(resolved, ns)
	}
	for _, h := range handles {
		// Items in a namespace the server does not have fail, as for a node
		// it does not have.
		it := t.at(h)
		if it.nsu == 0 || it.deleted() || it.id != 0 || resolved[it.nsu-1] >= 0 {
			continue
		}
		if it.status != ua.StatusBadNodeIdUnknown {
			reports = append(reports, report{h, ua.StatusBadNodeIdUnknown})
		}
		t.set(it, 0, ua.StatusBadNodeIdUnknown)
		failed++
	}
	t.mu.Unlock()
	if s.cfg.OnItemStatus != nil {
		for _, r := range reports {
			s.cfg.OnItemStatus(s, r.h, r.st)
		}
	}
	reports = reports[:0]
	for lo := 0; lo < len(handles); {
		hi := min(lo+size, len(handles))
		req.ItemsToCreate, sent = req.ItemsToCreate[:0], sent[:0]
		t.mu.Lock()
		for _, h := range handles[lo:hi] {
			it := t.at(h)
			if it.deleted() || it.id != 0 {
				continue
			}
			if it.nsu != 0 {
				ns := -1
				if int(it.nsu) <= len(resolved) {
					ns = resolved[it.nsu-1]
				}
				if ns < 0 {
					continue // failed above (or added meanwhile: the next retry)
				}
				it.ns = uint16(ns)
			}
			params := t.tmplOf(it).params
			params.ClientHandle = h
			rv := ua.ReadValueID{NodeID: t.node(it), AttributeID: t.attrOf(h, it)}
			if it.bits&itemHasRange != 0 {
				rv.IndexRange = t.ranges[h]
			}
			req.ItemsToCreate = append(req.ItemsToCreate, ua.MonitoredItemCreateRequest{
				ItemToMonitor: rv, MonitoringMode: it.mode().ua(), RequestedParameters: params,
			})
			sent = append(sent, h)
		}
		t.mu.Unlock()
		if len(sent) == 0 {
			lo = hi
			continue
		}
		start := time.Now()
		_, err := c.Send(ctx, req, &resp)
		if err != nil && len(sent) > 1 && tooLarge(err) {
			size = max(1, len(sent)/2)
			if errors.Is(err, ua.StatusBadTooManyOperations) {
				c.lowerLimit(limitMonitoredItems, size)
			}
			continue
		}
		if err != nil {
			return created, failed, err
		}
		if len(resp.Results) != len(sent) {
			return created, failed, fmt.Errorf("%w: CreateMonitoredItems of %d items returned %d results", ErrBadResponse, len(sent), len(resp.Results))
		}
		s.pub.observeRTT(time.Since(start) / time.Duration(max(1, len(sent)/100)))
		t.mu.Lock()
		for i, h := range sent {
			r := &resp.Results[i]
			it := t.at(h)
			if it.deleted() {
				if r.StatusCode.IsGood() {
					orphans = append(orphans, r.MonitoredItemID)
				}
				continue
			}
			if r.StatusCode.IsGood() {
				wasBad := it.status.IsBad()
				t.set(it, r.MonitoredItemID, ua.StatusGood)
				it.sampling = float32(r.RevisedSamplingInterval)
				it.queue = r.RevisedQueueSize
				created++
				if wasBad {
					reports = append(reports, report{h, ua.StatusGood})
				}
				continue
			}
			if it.status != r.StatusCode {
				reports = append(reports, report{h, r.StatusCode})
			}
			t.set(it, 0, r.StatusCode)
			failed++
		}
		t.mu.Unlock()
		lo = hi
		if s.cfg.OnItemStatus != nil {
			for _, r := range reports {
				s.cfg.OnItemStatus(s, r.h, r.st)
			}
		}
		reports = reports[:0]
		if progress != nil {
			progress(lo, len(handles))
		}
	}
	if len(orphans) > 0 {
		_ = s.deleteOnServer(ctx, c, orphans)
	}
	if failed > 0 {
		t.mu.Lock()
		if t.retryAt.IsZero() {
			t.retryAt = time.Now().Add(s.cfg.ItemRetryInterval)
		}
		t.mu.Unlock()
	}
	return created, failed, nil
}

// createAll creates every item that is not on the server (after the
// subscription was created anew, or for items added while disconnected);
// s.opMu must be held.
func (s *Subscription) createAll(ctx context.Context, c *Client, failedToo bool) (created, failed int, err error) {
	t := &s.items
	t.mu.Lock()
	var handles []uint32
	if t.pending > 0 || (failedToo && t.failed > 0) {
		handles = make([]uint32, 0, t.pending+t.failed)
		for h := uint32(1); int(h) <= t.n; h++ {
			it := t.at(h)
			if it.deleted() || it.id != 0 || (!failedToo && it.status.IsBad()) {
				continue
			}
			handles = append(handles, h)
		}
	}
	t.mu.Unlock()
	if len(handles) == 0 {
		return 0, 0, nil
	}
	return s.createItems(ctx, c, handles, 0, nil)
}

// forgetServerItems marks every item as not on the server (the subscription is
// about to be created anew); s.opMu must be held.
func (s *Subscription) forgetServerItems() {
	t := &s.items
	t.mu.Lock()
	defer t.mu.Unlock()
	for h := uint32(1); int(h) <= t.n; h++ {
		if it := t.at(h); !it.deleted() && it.id != 0 {
			t.set(it, 0, ua.StatusGood)
		}
	}
}

// retryItems creates the failed and pending items of the subscriptions whose
// retry is due. It runs on a maintenance goroutine and skips a subscription that
// is busy with another item operation.
func (p *publisher) retryItems(c *Client, now time.Time) {
	if c == nil || c.closed.Load() {
		return
	}
	for _, s := range p.list() {
		if s.id.Load() == 0 || s.cfg.ItemRetryInterval < 0 {
			continue
		}
		t := &s.items
		t.mu.Lock()
		due := t.pending > 0 || (t.failed > 0 && !now.Before(t.retryAt))
		failedToo := t.failed > 0 && !now.Before(t.retryAt)
		if failedToo {
			t.retryAt = now.Add(s.cfg.ItemRetryInterval)
		}
		t.mu.Unlock()
		if !due || !s.opMu.TryLock() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*c.cfg.RequestTimeout)
		created, failed, err := s.createAll(ctx, c, failedToo)
		cancel()
		s.opMu.Unlock()
		if err != nil {
			p.log.Debug("client: retrying monitored items failed", "subscription", s.id.Load(), "err", err)
		} else if created+failed > 0 {
			p.log.Info("client: retried monitored items", "subscription", s.id.Load(), "created", created, "failed", failed)
		}
	}
}

// needsMaintenance reports whether a subscription is missing on the server,
// or has items to create or retry.
func (p *publisher) needsMaintenance(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.subs {
		if s.id.Load() == 0 {
			return true
		}
		t := &s.items
		t.mu.Lock()
		due := t.pending > 0 || (t.failed > 0 && s.cfg.ItemRetryInterval > 0 && !now.Before(t.retryAt))
		t.mu.Unlock()
		if due {
			return true
		}
	}
	return false
}

// itemRetryAt returns when the first subscription's failed items are to be
// tried again (see retryItems); ok is false when none has any.
func (p *publisher) itemRetryAt() (at time.Time, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.subs {
		if s.id.Load() == 0 || s.cfg.ItemRetryInterval <= 0 {
			continue
		}
		t := &s.items
		t.mu.Lock()
		if t.failed > 0 && (!ok || t.retryAt.Before(at)) {
			at, ok = t.retryAt, true
		}
		t.mu.Unlock()
	}
	return at, ok
}

// handlesOnServer splits handles into the server ids of the items that exist
// there (ids[i] belongs to on[i]); unknown and deleted handles are skipped.
func (t *itemTable) handlesOnServer(handles []uint32) (on, ids []uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, h := range handles {
		if !t.valid(h) {
			continue
		}
		if it := t.at(h); !it.deleted() && it.id != 0 {
			on = append(on, h)
			ids = append(ids, it.id)
		}
	}
	return on, ids
}

// DeleteMonitoredItems deletes items by client handle. They are forgotten
// whatever the server answers; the error is for the call as a whole.
func (s *Subscription) DeleteMonitoredItems(ctx context.Context, handles []uint32) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	t := &s.items
	_, ids := t.handlesOnServer(handles)
	t.mu.Lock()
	for _, h := range handles {
		if !t.valid(h) {
			continue
		}
		if it := t.at(h); !it.deleted() {
			if it.id != 0 {
				t.gen++
			}
			t.count(it, -1)
			t.forget(h, it)
		}
	}
	t.mu.Unlock()
	if len(ids) == 0 || s.id.Load() == 0 {
		return nil
	}
	c, err := s.client()
	if err != nil {
		return nil // the server's copy goes with the session, or is not recreated
	}
	return s.deleteOnServer(ctx, c, ids)
}

func (s *Subscription) deleteOnServer(ctx context.Context, c *Client, ids []uint32) error {
	req := &ua.DeleteMonitoredItemsRequest{SubscriptionID: s.id.Load()}
	return c.chunked(limitMonitoredItems, len(ids), func(lo, hi int) error {
		req.MonitoredItemIDs = ids[lo:hi]
		var resp ua.DeleteMonitoredItemsResponse
		_, err := c.Send(ctx, req, &resp)
		return err
	})
}

// SetMonitoringMode sets the monitoring mode of items by client handle and
// returns the server's status for each (StatusGood for items not on the server
// now: they get the mode when created). The mode is kept for re-creation.
func (s *Subscription) SetMonitoringMode(ctx context.Context, mode MonitoringMode, handles []uint32) ([]ua.StatusCode, error) {
	if mode > Disabled {
		return nil, fmt.Errorf("client: SetMonitoringMode: %d is not a MonitoringMode", mode)
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	t := &s.items
	results := make([]ua.StatusCode, len(handles))
	pos := map[uint32]int{}
	t.mu.Lock()
	for i, h := range handles {
		if !t.valid(h) || t.at(h).deleted() {
			results[i] = ua.StatusBadMonitoredItemIdInvalid
			continue
		}
		pos[h] = i
	}
	t.mu.Unlock()
	on, ids := t.handlesOnServer(handles)
	if len(ids) > 0 && s.id.Load() != 0 {
		c, err := s.client()
		if err != nil {
			return nil, err
		}
		req := &ua.SetMonitoringModeRequest{SubscriptionID: s.id.Load(), MonitoringMode: mode.ua()}
		err = c.chunked(limitMonitoredItems, len(ids), func(lo, hi int) error {
			req.MonitoredItemIDs = ids[lo:hi]
			var resp ua.SetMonitoringModeResponse
			if _, err := c.Send(ctx, req, &resp); err != nil {
				return err
			}
			if err := checkCount("SetMonitoringMode", hi-lo, len(resp.Results)); err != nil {
				return err
			}
			for i, sc := range resp.Results {
				results[pos[on[lo+i]]] = sc
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	t.mu.Lock()
	for i, h := range handles {
		if results[i].IsGood() && t.valid(h) {
			t.at(h).setMode(mode)
		}
	}
	t.mu.Unlock()
	return results, nil
}

// ModifyMonitoredItems gives items new monitoring parameters (sampling
// interval, queue, filter; the mode is SetMonitoringMode's) and returns the
// server's status for each. Items not on the server now take them when
// created.
func (s *Subscription) ModifyMonitoredItems(ctx context.Context, handles []uint32, opts *ItemOptions) ([]ua.StatusCode, error) {
	if opts == nil {
		opts = &s.cfg.Items
	}
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("client: ModifyMonitoredItems: %w", err)
	}
	tm := newTemplate(opts)
	s.opMu.Lock()
	defer s.opMu.Unlock()
	t := &s.items
	results := make([]ua.StatusCode, len(handles))
	pos := map[uint32]int{}
	t.mu.Lock()
	for i, h := range handles {
		if !t.valid(h) || t.at(h).deleted() {
			results[i] = ua.StatusBadMonitoredItemIdInvalid
			continue
		}
		pos[h] = i
	}
	t.mu.Unlock()
	on, ids := t.handlesOnServer(handles)
	if len(ids) > 0 && s.id.Load() != 0 {
		c, err := s.client()
		if err != nil {
			return nil, err
		}
		req := &ua.ModifyMonitoredItemsRequest{SubscriptionID: s.id.Load(), TimestampsToReturn: s.cfg.Timestamps.ua()}
		err = c.chunked(limitMonitoredItems, len(ids), func(lo, hi int) error {
			req.ItemsToModify = req.ItemsToModify[:0]
			for i := lo; i < hi; i++ {
				params := tm.params
				params.ClientHandle = on[i]
				req.ItemsToModify = append(req.ItemsToModify, ua.MonitoredItemModifyRequest{MonitoredItemID: ids[i], RequestedParameters: params})
			}
			var resp ua.ModifyMonitoredItemsResponse
			if _, err := c.Send(ctx, req, &resp); err != nil {
				return err
			}
			if err := checkCount("ModifyMonitoredItems", hi-lo, len(resp.Results)); err != nil {
				return err
			}
			t.mu.Lock()
			for i, r := range resp.Results {
				h := on[lo+i]
				results[pos[h]] = r.StatusCode
				if r.StatusCode.IsGood() {
					it := t.at(h)
					it.sampling, it.queue = float32(r.RevisedSamplingInterval), r.RevisedQueueSize
				}
			}
			t.mu.Unlock()
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	t.mu.Lock()
	for i, h := range handles {
		if results[i].IsGood() && t.valid(h) {
			t.setTmpl(t.at(h), tm)
		}
	}
	t.mu.Unlock()
	if s.cfg.OnItemStatus != nil {
		for i, h := range handles {
			if results[i].IsBad() {
				s.cfg.OnItemStatus(s, h, results[i])
			}
		}
	}
	return results, nil
}
