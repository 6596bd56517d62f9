package bridge

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/fence"
	"github.com/uagate/gateway/bridge/resume"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/ua"
)

// Options are what a WriterGroup needs besides its configuration.
type Options struct {
	// Session is the managed session of the group's endpoint.
	Session *client.ManagedSession
	// Queues receive every ua-data and ua-metadata message. A message is
	// acknowledged upstream only once every AtLeastOnce queue (of Queues and
	// FieldQueues) confirmed it; with no AtLeastOnce queue the subscription
	// acknowledges as soon as the handlers return.
	Queues []sink.Queue
	// FieldQueues, when set, receive one KindField message per field value
	// (Addr.Field names the field): the "unified namespace" layout.
	FieldQueues []sink.Queue
	// FieldPayload is config.PayloadValue (default) or
	// config.PayloadDataValue.
	FieldPayload string
	// FieldNoRetain publishes per-field messages without the retain flag.
	FieldNoRetain bool
	// ValueSinks receive the values themselves (valuesink.go).
	ValueSinks []ValueSink
	// PublisherID of every message; default config.DefaultPublisherID.
	PublisherID string
	// EndpointURL is written per value in the samples format; default the
	// session's URL.
	EndpointURL string
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Resume, when set, keeps the subscription's resume state so that a
	// restart (or another replica) takes the subscription over (resume.go).
	Resume resume.Store
	// ResumeInterval is how often a changed resume state is saved; default
	// DefaultResumeInterval.
	ResumeInterval time.Duration
	// Fence, under scale-out, is the group's lease deadline: once it has
	// passed, nothing more is handed to the queues (data at least once is
	// left unacknowledged for the next holder), and the messages carry it
	// so that the queues check it again before they publish. Its epoch
	// prefixes the MessageId of the retained ua-metadata messages. nil:
	// no fence.
	Fence *fence.Fence
	// MarksDir, when set, keeps the group's marks there (resume.OpenMarks):
	// its writers' SequenceNumbers go on across restarts, and what the
	// server republishes after a resume reaches only the sinks that may
	// not have it (resume.go).
	MarksDir string
	// ResumeShared says Resume is shared with other replicas (scale-out):
	// its records carry the writers' SequenceNumbers for a takeover.
	ResumeShared bool
	// ResumeHorizon is, for a shared Resume, how long a holder may go on
	// after its last record was saved before it stops (the lease's
	// fencing): what its writers may write meanwhile is reserved.
	ResumeHorizon time.Duration
}

// WriterGroup is one writer group (config.WriterGroup) of the pipeline: one
// subscription on its endpoint's managed session, its dataset writers, their
// last-value cache, the JSON writer, and the acknowledgement tracker. See the
// package comment for the data flow, threading and ownership.
type WriterGroup struct {
	plan    // what the configuration and Options fix (plan.go)
	session *client.ManagedSession
	queues  []sink.Queue
	fqueues []sink.Queue
	vsinks  []ValueSink
	tr      *ackTracker // nil: no AtLeastOnce queue, the client acknowledges on return

	fence        *fence.Fence        // nil: none
	fenced       bool                // the cycle being written is past the fence; g.mu
	resume       resume.Store        // nil: none
	fingerprint  string              // of the items asked for at Start
	serverStart  int64               // the server's StartTime at Start, 0 when unknown
	saved        client.ResumeMark   // of the last record saved; resume loop (or Start before it runs)
	savedItems   []client.ResumeItem // its list, kept only at least once (saveResume)
	savedDSMs    uint64              // DataSetMessages written at the last save
	recordAt     time.Time           // when the record was saved last (ackedEvery)
	ackedEvery   time.Duration       // lastAckedEvery (a test's shorter)
	savedAt      time.Time           // of the last shared record
	saveMu       sync.Mutex          // one saveResume at a time (resume loop, Start, a handler short of numbers)
	resumeRest   atomic.Bool         // the resume loop sleeps until kickResume (resumeLoop)
	resumeKick   chan struct{}       // wakes it; room for one
	quit         chan struct{}       // closed when Stop begins
	reserveNeed  atomic.Uint32       // the most numbers a writer asked to have reserved at once (reserve)
	abandoned    atomic.Bool         // a message was left unwritten at Stop: no more acknowledgements
	reserveHeld  atomic.Uint64       // times reserve could not save and held the writers
	handedAt     atomic.Uint64       // with a shared record: subscription id << 32 | the last notification message handed to the queues
	sharedHanded uint32              // the shared record's Handed when another holder saved it (Start)
	replayRing   bool                // g.mu: the replay's SequenceNumbers are the marks' (a restart), not new (a takeover)
	resumeShared bool
	// resumeHorizon: how long a holder goes on after its last shared record.
	resumeHorizon time.Duration
	instance      uint64        // marks this group's records and marks (Record.Marks)
	marksOwn      bool          // the marks were kept beside the last record: they tell where the group stopped
	redeliver     bool          // g.mu: the message being written was redelivered after a resume
	marks         *resume.Marks // nil: none
	replayKnown   bool          // the marks tell what the resumed subscription's last run handed over
	replayOn      bool          // g.mu: messages up to replayTo replay what the last run handed to the queues
	replayTo      uint32
	replaying     bool         // g.mu: the message being written is such a replay
	rewound       bool         // g.mu: a writer's SequenceNumber was set back for it
	cycle         uint64       // g.mu: counts the notification messages written
	subID         uint32       // g.mu: the subscription of the message being written
	aloQueues     []sink.Queue // the at-least-once ones of queues: a replay goes to them only
	aloFQueues    []sink.Queue
	bf            *backfiller   // backfill: history; nil otherwise (backfill.go)
	times         *resume.Times // the fields' last delivered source timestamps (backfill)
	prevTimes     *resume.Times // times whose Previous are the last run's of these slots; nil: none
	awaitBits     []uint64      // g.mu: fields waiting for their first value after a gap
	awaitN        int           // g.mu: how many
	backfilling   bool          // g.mu: the message being written is a backfill
	resendCheck   bool          // the last run's times name these slots: a field's first value may be one it delivered (resend.go)
	anySilent     bool          // g.mu: the message being written has values not to send

	opMu    sync.Mutex // serialises Start, AddWriter, RemoveWriter, Stop
	sub     *client.Subscription
	stopped bool // Stop was called; opMu

	// mu is held by the handlers for a whole notification message, by the
	// keep-alive loop and by reconfiguration; it guards the writers, the
	// JSON writer and the emission state. vmu guards the fields (values,
	// statuses, the slice itself) against the readers of LastValue; it is
	// taken after mu and only briefly. Lock order: opMu → mu → vmu.
	mu         sync.Mutex
	vmu        sync.RWMutex
	fieldTable // the slots, their cached values and items' statuses (fields.go); vmu
	writers    []*writer
	namespaces []string
	versions   map[string]jsonenc.ConfigurationVersion // last version by writer name
	closed     bool
	started    bool

	w      *jsonenc.NetworkMessageWriter // borrowed for the cycle being written; nil between cycles
	wopts  jsonenc.WriterOptions         // what w is Reset for
	wown   *writerOwner                  // the claim of wopts on the pool's writers
	fenc   *jsonenc.Encoder
	nmHdr  jsonenc.NetworkMessageHeader
	dv     ua.DataValue // scratch: a cached value being written; g.mu
	ents   []entry
	vbatch ValueBatch // scratch of sendValues
	// entsTmp is sortEntries' other buffer; g.mu.
	entsTmp []entry
	cur     *writer // the writer of the open message (single shape)
	seq     uint32  // sequence number of the notification message being written
	track   bool    // messages of this cycle carry seq for the tracker
	live    bool    // g.mu: the cycle holds keep-alives only (sink.Message.Live)
	now     int64   // UnixNano of this cycle
	nowDT   ua.DateTime
	skip    bool // an encoding error ended the open DataSetMessage

	snapshot atomic.Pointer[[]*writer] // for Stats without mu
	// nodeIdx is the index of the fields by node id (values.go), built at
	// the first query by node (idxMu serialises the builders) for the
	// fields as idxGen counts their changes; idxGen is incremented, and
	// nodeIdx dropped, under vmu's write lock (invalidateNodes).
	nodeIdx  atomic.Pointer[nodeIndex]
	idxGen   atomic.Uint64
	idxMu    sync.Mutex
	stats    groupCounters
	subState atomic.Uint32 // last subscription status (ua.StatusCode)
	lastLog  atomic.Int64  // throttles encode-error logs
	lastOvf  int64         // UnixNano of the last overflow log; mu
	refused  ua.DataValue  // scratch of missingValue; mu

	cancel context.CancelFunc
	wg     sync.WaitGroup

	// testTap, set by tests before Start, sees every notification message
	// the client delivers (g.mu held).
	testTap func(seq uint32, items []ua.MonitoredItemNotification)
}

// NewWriterGroup builds the group's plan, writers and fields from cfg,
// which must have bridge/config's defaults applied and validate (config.Load
// and config.Parse do both; for browse selections, config.ExpandWriterGroup
// keeps them): it refuses one without the defaults (ErrNotDefaulted) and
// checks nothing config checks. Start subscribes.
func NewWriterGroup(cfg config.WriterGroup, opts Options) (*WriterGroup, error) {
	p, err := compile(&cfg, &opts)
	if err != nil {
		return nil, err
	}
	g := &WriterGroup{
		plan:       p,
		session:    opts.Session,
		queues:     slices.Clone(opts.Queues),
		fqueues:    slices.Clone(opts.FieldQueues),
		vsinks:     slices.Clone(opts.ValueSinks),
		resume:     opts.Resume,
		fence:      opts.Fence,
		quit:       make(chan struct{}),
		resumeKick: make(chan struct{}, 1),
		ackedEvery: lastAckedEvery,
	}
	g.resumeShared, g.resumeHorizon = opts.ResumeShared, opts.ResumeHorizon
	g.instance = randomMark()
	for _, q := range g.queues {
		if q.Guarantee() == config.AtLeastOnce {
			g.aloQueues = append(g.aloQueues, q)
		}
	}
	for _, q := range g.fqueues {
		if q.Guarantee() == config.AtLeastOnce {
			g.aloFQueues = append(g.aloFQueues, q)
		}
	}
	if len(g.aloQueues)+len(g.aloFQueues) > 0 {
		g.tr = newAckTracker(nil, g.maxUnacked+8, g.log)
		g.tr.onAcked = g.kickResume // LastAcked moved: the resume record is to be saved
	}
	if cfg.Backfill == config.BackfillHistory {
		g.bf = newBackfiller(g)
	}
	g.openMarks(opts.MarksDir, len(cfg.Writers))
	total := 0
	for i := range cfg.Writers {
		total += len(cfg.Writers[i].Fields)
	}
	// At its size: appending would leave up to a quarter unused.
	g.fields = make([]field, 0, total)
	for i := range cfg.Writers {
		if err := g.appendWriter(cfg.Writers[i]); err != nil {
			return nil, err
		}
	}
	g.openTimes(opts.MarksDir) // backfill.go
	// The writers keep what they need of their configuration (until Start);
	// cfg is not kept, so the group does not hold its fields twice.
	g.configureWriter()
	g.fenc = jsonenc.NewEncoder(nil, jsonenc.Options{Mode: g.headerMode})
	g.publishSnapshot()
	liveGroups.Add(1) // Stop counts it out (writerpool.go)
	return g, nil
}

// configureWriter sets the options of the group's JSON writers (borrowed
// per cycle, writerpool.go) and its NetworkMessage header.
func (g *WriterGroup) configureWriter() {
	if g.wown != nil {
		g.wown.g = nil // its idle writers have the old options
	}
	g.wown = &writerOwner{g: g}
	g.wopts = jsonenc.WriterOptions{
		NamespaceURIs:  g.namespaces,
		HeaderMode:     g.headerMode,
		MaxMessageSize: g.maxSize,
		Sink:           g.wown.sink,
	}
	if g.samples {
		g.wopts.Format = jsonenc.FormatSamples
	}
	switch {
	case g.samples && g.single:
		g.nmHdr.ContentMask = jsonenc.NMSingleDataSetMessage
	case g.samples:
		g.nmHdr.ContentMask = 0
	case g.single:
		g.nmHdr.ContentMask = jsonenc.LayoutNetworkMessage | jsonenc.NMSingleDataSetMessage | jsonenc.NMWriterGroupName
	default:
		g.nmHdr.ContentMask = jsonenc.LayoutNetworkMessage | jsonenc.NMWriterGroupName
	}
	g.nmHdr.PublisherID = g.publisher
	g.nmHdr.WriterGroupName = g.name
	g.nmHdr.MessageIDPrefix = epochPrefix(g.fence)
}

// prepare resolves the node ids of w's fields against the server's
// namespaces, reads their DataType and ValueRank once, and returns the
// monitored-item requests in slot order. g.opMu held (not g.mu: it talks to
// the server); it writes w's fields under g.vmu.
func (g *WriterGroup) prepare(ctx context.Context, c *client.Client, w *writer, dedup map[itemKey]*client.ItemOptions) ([]client.ItemRequest, error) {
	reqs := make([]client.ItemRequest, len(w.cfg.Fields))
	read := &ua.ReadRequest{}
	var readSlots []int32
	bad := map[int32]error{}
	for k := range w.cfg.Fields {
		fc := &w.cfg.Fields[k]
		slot := w.first + int32(k)
		// Every slot gets its request, so that handles follow the slots.
		var id ua.NodeID
		x, err := ua.ParseExpandedNodeID(fc.Node) // config validated it
		if err != nil {
			bad[slot] = err // the server refuses the null node id, the field reports it
		} else if id, err = x.Resolve(g.namespaces); err != nil {
			// A namespace URI the server does not know (now): the item is
			// still created; the client resolves the URI at every creation,
			// reports BadNodeIdUnknown meanwhile and retries.
			bad[slot] = err
		}
		if g.samples {
			g.nodes[slot] = id
		}
		if x.NamespaceURI != "" {
			// The client re-resolves nsu= at every (re)creation: a server that
			// restarted with its namespaces in another order still gets the
			// node meant.
			reqs[k].Node = x
		} else {
			reqs[k].NodeID = id
		}
		if ev := fc.Events; ev != nil {
			sel := w.eventSelect(slot)
			filter := &ua.EventFilter{SelectClauses: client.SelectEventFields(sel...)}
			if ev.OfType != "" {
				tx, err := ua.ParseExpandedNodeID(ev.OfType) // config validated it
				tid := ua.NodeID{}
				if err == nil {
					tid, err = tx.Resolve(g.namespaces)
				}
				if err != nil {
					return nil, fmt.Errorf("bridge: writer %s: field %s: events.ofType: %w", w.name, g.fieldName(w, slot), err)
				}
				filter.WhereClause = client.OfType(tid)
			}
			reqs[k].Options = &client.ItemOptions{SamplingInterval: client.SamplingFastest, QueueSize: fc.QueueSize, Event: filter}
			continue
		}
		reqs[k].Options = itemOptions(fc, dedup)
		if _, isBad := bad[slot]; !isBad {
			read.NodesToRead = append(read.NodesToRead,
				ua.ReadValueID{NodeID: id, AttributeID: client.AttributeDataType},
				ua.ReadValueID{NodeID: id, AttributeID: client.AttributeValueRank})
			readSlots = append(readSlots, slot)
		}
	}
	var results []ua.DataValue
	if len(readSlots) > 0 && c != nil {
		resp, err := c.Read(ctx, read)
		if err != nil {
			// Not fatal: the first values give the built-in types.
			g.log.Warn("bridge: reading the fields' DataType failed; types come from the first values", "group", g.name, "writer", w.name, "err", err)
		} else {
			results = resp.Results
		}
	}
	for slot, err := range bad {
		g.log.Warn("bridge: field node cannot be resolved now", "group", g.name, "writer", w.name, "field", g.fieldName(w, slot), "err", err)
	}
	g.vmu.Lock()
	for i, slot := range readSlots {
		if 2*i+1 >= len(results) {
			break
		}
		dt, rank := results[2*i], results[2*i+1]
		f := &g.fields[slot]
		if dt.Status.IsBad() {
			continue // BadNodeIdUnknown and the like: the item reports it
		}
		id, ok := dt.Value.Value().(ua.NodeID)
		if !ok {
			continue
		}
		vr := int32(-1)
		if rank.Status.IsGood() && rank.Value.Type() == ua.TypeInt32 {
			vr = rank.Value.Int32()
		}
		bt, abstract, known := builtInOf(id)
		if abstract {
			f.flags |= fieldAny
		}
		if known && f.flags&fieldTypeKnown == 0 {
			// An abstract DataType settles too: BaseDataType, Number …
			// (built-in type 0) say that the values' types vary.
			f.builtin = bt
			f.flags |= fieldTypeKnown
			w.untyped--
		}
		if !(id.Namespace == 0 && id.Type == ua.IDNumeric && id.Numeric == uint32(f.builtin) && f.builtin != 0) || vr != -1 {
			if w.odd == nil {
				w.odd = map[int32]typeInfo{}
			}
			w.odd[slot] = typeInfo{dataType: id, valueRank: vr}
		}
	}
	g.vmu.Unlock()
	return reqs, nil
}

// Start subscribes: it waits for the session to be connected (ctx bounds
// the wait), resolves the fields' node ids, reads their DataTypes, sends
// every writer's ua-metadata, creates the subscription and all monitored
// items in one batched call, and starts the keep-alive timer. Items the
// server refuses are reported per field (FieldValue.Status, a log line) and
// retried by the client; the others flow. After an error call Stop.
func (g *WriterGroup) Start(ctx context.Context) error {
	g.opMu.Lock()
	defer g.opMu.Unlock()
	if g.session == nil {
		return errors.New("bridge: writer group " + g.name + ": no session")
	}
	g.mu.Lock()
	started, closed := g.started, g.closed
	g.started = true
	g.mu.Unlock()
	if started || closed || g.stopped {
		return errors.New("bridge: writer group " + g.name + ": started twice or after Stop")
	}
	c, err := g.session.WaitConnected(ctx)
	if err != nil {
		return fmt.Errorf("bridge: writer group %s: %w", g.name, err)
	}
	ns := slices.Clone(c.Namespaces())
	g.mu.Lock()
	g.namespaces = ns
	g.configureWriter() // with the namespace table
	g.fenc.Reset(nil, jsonenc.Options{Mode: g.headerMode, NamespaceURIs: ns})
	g.mu.Unlock()

	dedup := map[itemKey]*client.ItemOptions{}
	var reqs []client.ItemRequest
	for _, w := range g.writers {
		r, err := g.prepare(ctx, c, w, dedup)
		if err != nil {
			return err
		}
		reqs = append(reqs, r...)
		w.cfg.Fields = nil // prepare was its last reader
	}
	scfg := &client.SubscriptionConfig{
		PublishingInterval:         g.interval,
		KeepAliveCount:             g.keepAliveCount(),
		MaxNotificationsPerPublish: g.maxNotifs,
		OnDataChange:               g.onDataChange,
		OnEvent:                    g.onEvent,
		OnItemStatus:               g.onItemStatus,
		OnGap:                      g.onGap,
		OnStatusChange:             g.onStatusChange,
	}
	g.configureAck(scfg)
	if g.resume != nil {
		g.serverStart = serverStart(ctx, c)
		g.fingerprint = itemsFingerprint(reqs, nil)
		scfg.Resume = g.loadResume(g.fingerprint)
		g.replayFrom(scfg.Resume)
	}
	// Before the subscription exists: a resumed one delivers what the
	// server kept at once, before the items are even added.
	now := time.Now().UnixNano()
	g.mu.Lock()
	g.vmu.Lock() // LastValues reads base (FieldValue.Handle)
	g.base = 1   // a new subscription's first client handle
	g.vmu.Unlock()
	for _, w := range g.writers {
		w.lastSent = now
		g.sendMetaData(w)
	}
	g.mu.Unlock()
	sub, err := g.session.CreateSubscription(ctx, scfg)
	if err != nil {
		return fmt.Errorf("bridge: writer group %s: creating the subscription: %w", g.name, err)
	}
	g.sub = sub
	g.wireAck(sub)
	if len(reqs) > 0 {
		res, err := sub.CreateMonitoredItems(ctx, reqs, nil)
		g.mu.Lock()
		g.vmu.Lock()
		if res.FirstHandle != 1 && res.FirstHandle != 0 {
			g.base = res.FirstHandle
		}
		if res.FirstHandle != 0 {
			g.dropNodes(g.writers)
		}
		g.vmu.Unlock()
		g.mu.Unlock()
		if err != nil {
			return fmt.Errorf("bridge: writer group %s: creating %d monitored items: %w", g.name, len(reqs), err)
		}
		g.log.Info("bridge: writer group subscribed", "group", g.name, "items", len(reqs),
			"created", res.Created, "failed", res.Failed, "pending", res.Pending, "interval", sub.PublishingInterval())
	}
	ctx2, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	if g.keepAlive > 0 || g.hasHeartbeats() {
		g.wg.Add(1)
		go g.keepAliveLoop(ctx2)
	}
	if g.resume != nil {
		g.saveResume(sub, true)
		g.wg.Add(1)
		go g.resumeLoop(ctx2, sub, g.resumeEvery)
	}
	if g.bf != nil {
		g.wg.Add(1)
		go g.bf.run(ctx2)
	}
	return nil
}

// configureAck sets the subscription's acknowledgement mode: manual when an
// at-least-once queue needs the tracker (g.tr), with MaxUnacked as the
// backpressure bound and the client's OnMessageDone telling the tracker that
// every handler call for a sequence number returned. Without an
// at-least-once queue the client acknowledges on return.
func (g *WriterGroup) configureAck(scfg *client.SubscriptionConfig) {
	if g.tr == nil {
		return
	}
	scfg.AckMode = client.AckManual
	scfg.MaxUnacked = g.maxUnacked
	scfg.OnMessageDone = g.onMessageDone
}

// onMessageDone: every notification of seq was handed to the queues.
func (g *WriterGroup) onMessageDone(sub *client.Subscription, seq uint32) {
	// A resumed subscription delivers before CreateSubscription returned
	// (wireAck): the acknowledgements need it already.
	if g.abandoned.Load() {
		// A message left unwritten at Stop (reserve): no acknowledgement,
		// so that the server keeps it for the next holder.
		return
	}
	g.tr.setAckerOnce(sub)
	for _, q := range g.queues {
		if w, ok := q.(sink.TokenWatcher); ok {
			w.Handed(uint64(seq))
		}
	}
	g.tr.handed(seq)
}

// wireAck gives the tracker the subscription to acknowledge on.
func (g *WriterGroup) wireAck(sub *client.Subscription) {
	if g.tr != nil {
		g.tr.setAcker(sub)
	}
}

// keepAliveLoop sends ua-keepalive DataSetMessages for writers that sent
// nothing for KeepAlive, and the heartbeats of fields that did not change.
// It sleeps until the next of them may be due (nextDue), not a publishing
// interval: at rest and under a steady flow alike it wakes about once per
// KeepAlive.
func (g *WriterGroup) keepAliveLoop(ctx context.Context) {
	defer g.wg.Done()
	t := time.NewTimer(g.nextDue(time.Now()))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			g.heartbeatsDue(now)
			if g.keepAlive > 0 {
				g.keepAlives(now)
			}
			t.Reset(g.nextDue(time.Now()))
		}
	}
}

// minDueWait bounds how often keepAliveLoop wakes.
const minDueWait = 10 * time.Millisecond

// nextDue returns how long the keep-alive loop may sleep after now: until
// the earliest writer's last DataSetMessage + KeepAlive (a writer added
// later is due after that), or half the shortest heartbeat interval (a
// field's change is seen by looking at its timestamps), at least
// minDueWait.
func (g *WriterGroup) nextDue(now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := now.UnixNano()
	next := int64(math.MaxInt64)
	if g.keepAlive > 0 {
		next = int64(g.keepAlive) // with no writer yet
		for _, w := range g.writers {
			if !w.removed {
				next = min(next, w.lastSent+int64(g.keepAlive)-n)
			}
		}
	}
	for _, w := range g.writers {
		for _, hb := range w.heartbeats {
			next = min(next, hb.every/2)
		}
	}
	return max(time.Duration(next), minDueWait)
}

// hasHeartbeats reports whether a field of the group has a heartbeat.
func (g *WriterGroup) hasHeartbeats() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.writers {
		if len(w.heartbeats) > 0 {
			return true
		}
	}
	return false
}

// Stop ends the group: it stops the keep-alive timer, deletes the
// subscription on the server (ctx bounds it) and releases the JSON writer.
// Messages already handed to the queues stay theirs. Safe to call more than
// once; later calls return nil. Stop the groups before closing their queues:
// a handler blocked on a full Block queue is released only by the queue
// (Stop returns ctx's error then, and the release completes when the
// handler returns).
func (g *WriterGroup) Stop(ctx context.Context) error {
	g.opMu.Lock()
	defer g.opMu.Unlock()
	if g.stopped {
		return nil
	}
	g.stopped = true
	defer groupStopped()
	close(g.quit) // a handler waiting for numbers (reserve) gives up
	if g.cancel != nil {
		g.cancel()
	}
	g.wg.Wait()
	var err error
	if g.sub != nil {
		err = g.sub.Delete(ctx)
	}
	// A handler blocked in a full Block queue holds g.mu until the queue
	// takes the message or is closed; Stop does not wait for that past ctx.
	// The goroutine below then finishes the release when the handler
	// returns.
	released := make(chan struct{})
	go func() {
		defer close(released)
		g.mu.Lock()
		defer g.mu.Unlock()
		g.closed = true
		if g.w != nil { // a handler's cycle ended by an encoding error
			g.w.Release()
		}
		g.wown.g = nil // the idle writers it used keep nothing of the group
		g.closeMarks()
		if g.times != nil {
			_ = g.times.Close()
			g.times = nil
		}
		g.fenc.Release()
		g.w, g.fenc = nil, nil
	}()
	select {
	case <-released:
	case <-ctx.Done():
		return fmt.Errorf("bridge: writer group %s: a handler is still waiting for a full queue: %w", g.name, ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("bridge: writer group %s: deleting the subscription: %w", g.name, err)
	}
	return nil
}

// AddWriter adds a dataset writer to a running group (a configuration
// reload): its fields are monitored in one batched call, its metadata is
// sent; the other writers are not disturbed. wc comes as the reloaded
// configuration has it, defaults applied (ErrNotDefaulted otherwise).
func (g *WriterGroup) AddWriter(ctx context.Context, wc config.DataSetWriter) error {
	if err := checkWriterDefaulted(g.name, &wc); err != nil {
		return err
	}
	g.opMu.Lock()
	defer g.opMu.Unlock()
	g.mu.Lock()
	if g.closed || g.stopped || g.sub == nil {
		g.mu.Unlock()
		return errors.New("bridge: writer group " + g.name + ": AddWriter before Start or after Stop")
	}
	for _, w := range g.writers {
		if !w.removed && (w.name == wc.Name || w.id == wc.ID) {
			g.mu.Unlock()
			return fmt.Errorf("bridge: writer group %s: writer %q (id %d) exists", g.name, wc.Name, wc.ID)
		}
	}
	g.vmu.Lock()
	nf, nw := len(g.fields), len(g.writers)
	g.invalidateNodes()
	err := g.appendWriter(wc)
	if err == nil && g.times != nil {
		if gerr := g.times.Grow(len(g.fields)); gerr != nil {
			g.log.Warn("bridge: the times file cannot grow; the new writer's fields have no backfill start after a restart", "group", g.name, "err", gerr)
		}
	}
	if err != nil {
		g.fields, g.writers = g.fields[:nf], g.writers[:nw]
		if g.samples {
			g.nodes = g.nodes[:nf]
		}
	}
	g.vmu.Unlock()
	if err != nil {
		g.mu.Unlock()
		return err
	}
	w := g.writers[nw]
	predicted := g.base + uint32(nf)
	g.mu.Unlock()

	reqs, err := g.prepare(ctx, g.session.Client(), w, map[itemKey]*client.ItemOptions{})
	if err != nil {
		g.removeSlots(w)
		return err
	}
	w.cfg.Fields = nil // prepare was its last reader
	g.mu.Lock()
	w.lastSent = time.Now().UnixNano()
	g.sendMetaData(w)
	g.publishSnapshot()
	g.mu.Unlock()
	res, err := g.sub.CreateMonitoredItems(ctx, reqs, nil)
	if len(reqs) > 0 && res.FirstHandle == predicted {
		g.vmu.Lock()
		g.dropNodes([]*writer{w})
		g.vmu.Unlock()
	}
	if len(reqs) > 0 && res.FirstHandle != predicted {
		// Only this group adds items to its subscription, so handles follow
		// one another; anything else is a bug worth a loud log.
		g.log.Error("bridge: monitored items got unexpected client handles; writer dropped", "group", g.name,
			"writer", w.name, "want", predicted, "got", res.FirstHandle)
		g.removeSlots(w)
		return fmt.Errorf("bridge: writer group %s: writer %s: client handles start at %d, want %d", g.name, w.name, res.FirstHandle, predicted)
	}
	if err != nil {
		return fmt.Errorf("bridge: writer group %s: writer %s: creating monitored items: %w", g.name, w.name, err)
	}
	return nil
}

// ReplaceWriter replaces the writer of wc's name by wc (a reload that
// changed its fields): the old one's items are deleted, the new one's
// created, and its metadata is sent with a newer MajorVersion. Its
// SequenceNumbers go on (with marks, Options.MarksDir; without, they start
// over).
func (g *WriterGroup) ReplaceWriter(ctx context.Context, wc config.DataSetWriter) error {
	if err := g.RemoveWriter(ctx, wc.Name); err != nil {
		return err
	}
	return g.AddWriter(ctx, wc)
}

// RemoveWriter removes a dataset writer from a running group: its monitored
// items are deleted and its cached values dropped. Its slots stay (client
// handles are never reused), a few bytes each.
func (g *WriterGroup) RemoveWriter(ctx context.Context, name string) error {
	g.opMu.Lock()
	defer g.opMu.Unlock()
	if g.stopped {
		return errors.New("bridge: writer group " + g.name + ": RemoveWriter after Stop")
	}
	g.mu.Lock()
	var w *writer
	for _, x := range g.writers {
		if x.name == name && !x.removed {
			w = x
		}
	}
	g.mu.Unlock()
	if w == nil {
		return fmt.Errorf("bridge: writer group %s: no writer %q", g.name, name)
	}
	handles := g.removeSlots(w)
	if g.sub == nil || len(handles) == 0 {
		return nil
	}
	if err := g.sub.DeleteMonitoredItems(ctx, handles); err != nil {
		return fmt.Errorf("bridge: writer group %s: writer %s: deleting monitored items: %w", g.name, name, err)
	}
	return nil
}

// Name returns the group's name.
func (g *WriterGroup) Name() string { return g.name }

// Subscription returns the group's subscription, nil before Start.
func (g *WriterGroup) Subscription() *client.Subscription {
	g.opMu.Lock()
	defer g.opMu.Unlock()
	return g.sub
}

// randomMark is a random non-zero 64-bit value.
func randomMark() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}

// newMessageID returns a random UUID for messages outside the hot path.
func newMessageID() string {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	raw[6] = raw[6]&0x0F | 0x40
	raw[8] = raw[8]&0x3F | 0x80
	var u ua.Guid
	u.Data1 = uint32(raw[0])<<24 | uint32(raw[1])<<16 | uint32(raw[2])<<8 | uint32(raw[3])
	u.Data2 = uint16(raw[4])<<8 | uint16(raw[5])
	u.Data3 = uint16(raw[6])<<8 | uint16(raw[7])
	copy(u.Data4[:], raw[8:])
	return string(u.AppendText(nil))
}
