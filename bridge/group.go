package bridge

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/resume"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/ua"
)

// Defaults applied where a config.WriterGroup leaves a field zero (the
// configuration loader applies the same ones; these keep a hand-built
// configuration safe).
const (
	DefaultPublishingInterval = time.Second
	DefaultKeyFrameCount      = 10
	DefaultMaxMessageSize     = 256 << 10
	DefaultMaxUnacked         = 64
	// MaxDefaultQueueSize bounds the queue size computed for a monitored
	// item (publishing interval ÷ sampling interval).
	MaxDefaultQueueSize = 1000
	// fastestSampling is what the queue size computation assumes for the
	// server's fastest sampling (sampling interval 0).
	fastestSampling = time.Millisecond
	// defaultEventQueue is the queue size of event items that set none.
	defaultEventQueue = 1000
)

// DefaultEventSelect are the event fields selected when an event field names
// none.
var DefaultEventSelect = []string{"EventId", "EventType", "SourceName", "Time", "Message", "Severity"}

// Per-field payloads (Options.FieldPayload).
const (
	FieldPayloadValue     = "value"     // the value as JSON (the Variant's body)
	FieldPayloadDataValue = "dataValue" // a DataValue object: value, status, timestamps
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
	// FieldPayload is FieldPayloadValue (default) or FieldPayloadDataValue.
	FieldPayload string
	// FieldNoRetain publishes per-field messages without the retain flag.
	FieldNoRetain bool
	// PublisherID of every message; default "uagate".
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
}

// field is one DataSet field: one monitored item. It is kept small (40
// bytes, TestFieldSize): a million of them must fit in a gateway's memory
// beside the client's item table. The cached value is compact (cache.go):
// status, timestamps, and an inline scalar's type and payload, or an index
// in the group's side table. The name is an offset into its writer's names;
// the writer is the one whose slot range holds the field (writerOf). What
// only the metadata or the REST API needs stays in the writer (its
// configuration, its odd types).
type field struct {
	src     ua.DateTime   // the cached value's SourceTimestamp
	val     uint64        // inline payload (Variant.RawBits), or with fieldExt the index in g.ext
	status  ua.StatusCode // the cached value's status
	srvd    int32         // its ServerTimestamp − SourceTimestamp (100 ns); with fieldExt the ServerTimestamp is in g.ext
	name    uint32        // offset of its name in writer.names
	nameLen uint8         // its length; nameLong: up to the next field's name
	typ     byte          // built-in type of the cached value
	builtin byte          // built-in type for the metadata; 0 when unknown or abstract
	flags   uint8
}

const (
	fieldHasValue  = 1 << iota // the cache holds a value from the server
	fieldEvent                 // an event field: no value, ua-event messages
	fieldAny                   // abstract DataType: VerboseEncoding keeps UaType
	fieldTypeKnown             // builtin is settled (from the DataType or a first value)
	fieldExt                   // the value is in the side table g.ext[val]
	fieldRemoved               // its writer was removed
)

// typeInfo is the DataType and ValueRank of a field whose metadata cannot be
// derived from its built-in type alone.
type typeInfo struct {
	dataType  ua.NodeID
	valueRank int32
}

// eventInfo is the EventFilter of an event field.
type eventInfo struct {
	slot   int32
	sel    []string
	ofType string // node id of the event type; "" any
}

// writer is one DataSetWriter: a contiguous range of the group's fields.
type writer struct {
	index       int32
	name        string
	id          uint16
	cfg         config.DataSetWriter
	first, end  int32 // its fields are g.fields[first:end]
	events      []eventInfo
	odd         map[int32]typeInfo // by slot; fields whose DataType is not their built-in type's
	sorted      []int32            // its slots sorted by field name, for lookups by name
	untyped     int                // fields whose built-in type is not settled
	seq         uint32             // SequenceNumber of its next DataSetMessage
	frames      uint64             // data DataSetMessages written (key frame count)
	forceKey    bool               // the next DataSetMessage is a key frame (after a gap)
	names       string             // its fields' names, one after the other (field.name)
	version     jsonenc.ConfigurationVersion
	metaSent    bool
	removed     bool
	lastSent    int64 // UnixNano of its last DataSetMessage; g.mu
	hdr         jsonenc.DataSetMessageHeader
	stats       writerCounters
	lastPublish atomic.Int64
	heartbeats  []heartbeat // its fields with a heartbeat; g.mu
	// nodes are its fields' node ids as configured, until their monitored
	// items are in the client's table (g.vmu; nil then: the client's item
	// is the one copy of a node id, see fieldNode). cfg.Fields is needed
	// only until the items are asked for (prepare) and is dropped then, so
	// that a large writer does not keep its configuration twice.
	nodes []string
}

// heartbeat is a field whose last value is sent again when it did not change
// for every (OPC Publisher's HeartbeatInterval, "last known value": the value
// goes out as it was, with its own timestamps). A change is told by the
// cached value's timestamps, so the hot path does nothing for it.
type heartbeat struct {
	slot             int32
	every, lastAt    int64 // ns; lastAt: UnixNano of its last change or resend
	seenSrc, seenSrv ua.DateTime
}

// eventSelect returns the select paths of event field slot.
func (w *writer) eventSelect(slot int32) []string {
	for i := range w.events {
		if w.events[i].slot == slot {
			return w.events[i].sel
		}
	}
	return nil
}

// nameLong in field.nameLen: the name is longer; it ends where the next
// field's begins.
const nameLong = math.MaxUint8

// fieldName returns the name of slot s of w.
func (g *WriterGroup) fieldName(w *writer, s int32) string {
	return g.nameOf(w, &g.fields[s], s)
}

// nameOf returns the name of f, slot s of w.
func (g *WriterGroup) nameOf(w *writer, f *field, s int32) string {
	if f.nameLen != nameLong {
		return w.names[f.name : f.name+uint32(f.nameLen)]
	}
	end := uint32(len(w.names))
	if s+1 < w.end {
		end = g.fields[s+1].name
	}
	return w.names[f.name:end]
}

// writerOf returns the writer whose slots hold s (s < len(g.fields)). The
// writers' slot ranges follow one another in g.writers.
func (g *WriterGroup) writerOf(s int32) *writer {
	ws := g.writers
	lo, hi := 0, len(ws)
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if ws[m].first <= s {
			lo = m
		} else {
			hi = m
		}
	}
	return ws[lo]
}

// WriterGroup is one writer group (config.WriterGroup) of the pipeline: one
// subscription on its endpoint's managed session, its dataset writers, their
// last-value cache, the JSON writer, and the acknowledgement tracker. See the
// package comment for the data flow, threading and ownership.
type WriterGroup struct {
	cfg        config.WriterGroup
	session    *client.ManagedSession
	queues     []sink.Queue
	fqueues    []sink.Queue
	publisher  string
	endpoint   string
	log        *slog.Logger
	interval   time.Duration
	keyFrames  uint64
	keepAlive  time.Duration // <= 0: none
	maxSize    int
	maxUnacked int
	single     bool
	samples    bool
	headerMode jsonenc.Mode
	fieldMode  jsonenc.Mode
	fieldMask  jsonenc.DataSetFieldContentMask
	fieldDV    bool        // per-field payload is a DataValue
	fieldKeep  bool        // per-field messages are retained
	tr         *ackTracker // nil: no AtLeastOnce queue, the client acknowledges on return

	resume      resume.Store // nil: none
	resumeEvery time.Duration
	fingerprint string              // of the items asked for at Start
	serverStart int64               // the server's StartTime at Start, 0 when unknown
	saved       client.ResumeMark   // of the last record saved; resume loop (or Start before it runs)
	savedItems  []client.ResumeItem // its list, kept only at least once (saveResume)
	redeliver   bool                // g.mu: the message being written was redelivered after a resume

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
	fields     []field
	nodes      []ua.NodeID // by slot, samples format only
	writers    []*writer
	base       uint32 // client handle of fields[0]
	namespaces []string
	versions   map[string]jsonenc.ConfigurationVersion // last version by writer name
	closed     bool
	started    bool

	w       *jsonenc.NetworkMessageWriter // borrowed for the cycle being written; nil between cycles
	wopts   jsonenc.WriterOptions         // what w is Reset for
	wown    *writerOwner                  // the claim of wopts on the pool's writers
	fenc    *jsonenc.Encoder
	nmHdr   jsonenc.NetworkMessageHeader
	cl      cloner
	ext     []extValue              // the cache's side table (cache.go); g.vmu
	itemSt  map[int32]ua.StatusCode // the monitored items' statuses (the server's answers) other than Good, by slot; g.vmu
	extFree []int32                 // free indexes of ext
	dv      ua.DataValue            // scratch: a cached value being written; g.mu
	ents    []entry
	cur     *writer // the writer of the open message (single shape)
	seq     uint32  // sequence number of the notification message being written
	track   bool    // messages of this cycle carry seq for the tracker
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

// NewWriterGroup checks cfg and builds the group's writers and fields. Start
// subscribes. cfg is expected with the loader's defaults applied; zero fields
// get the same defaults here.
func NewWriterGroup(cfg config.WriterGroup, opts Options) (*WriterGroup, error) {
	g := &WriterGroup{
		cfg:       cfg,
		session:   opts.Session,
		queues:    slices.Clone(opts.Queues),
		fqueues:   slices.Clone(opts.FieldQueues),
		publisher: opts.PublisherID,
		endpoint:  opts.EndpointURL,
		log:       opts.Logger,
		fieldKeep: !opts.FieldNoRetain,

		resume:      opts.Resume,
		resumeEvery: opts.ResumeInterval,
	}
	if g.resumeEvery <= 0 {
		g.resumeEvery = DefaultResumeInterval
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	if g.publisher == "" {
		g.publisher = "uagate"
	}
	if g.endpoint == "" && g.session != nil {
		g.endpoint = g.session.URL()
	}
	if cfg.Name == "" {
		return nil, errors.New("bridge: writer group: name is empty")
	}
	where := "bridge: writer group " + cfg.Name
	g.interval = cfg.PublishingInterval.D()
	if g.interval < 0 {
		return nil, fmt.Errorf("%s: publishingInterval %v is negative", where, g.interval)
	}
	if g.interval == 0 {
		g.interval = DefaultPublishingInterval
	}
	g.keyFrames = uint64(max(cfg.KeyFrameCount, 1))
	if cfg.KeyFrameCount < 0 {
		return nil, fmt.Errorf("%s: keyFrameCount %d is negative", where, cfg.KeyFrameCount)
	}
	switch ka := cfg.KeepAlive.D(); {
	case ka == 0:
		g.keepAlive = 10 * g.interval
	case ka > 0:
		g.keepAlive = max(ka, g.interval)
	}
	g.maxSize = cfg.MaxMessageSize
	if g.maxSize < 0 {
		return nil, fmt.Errorf("%s: maxMessageSize %d is negative", where, g.maxSize)
	}
	if g.maxSize == 0 {
		g.maxSize = DefaultMaxMessageSize
	}
	g.maxUnacked = cfg.MaxUnacked
	if g.maxUnacked <= 0 {
		g.maxUnacked = DefaultMaxUnacked
	}
	switch cfg.MessageShape {
	case "", config.ShapeSingle:
		g.single = true
	case config.ShapeBatched:
	default:
		return nil, fmt.Errorf("%s: messageShape %q: want single or batched", where, cfg.MessageShape)
	}
	switch cfg.Encoding {
	case "", "compact":
		g.headerMode = jsonenc.Compact
	case "verbose":
		g.headerMode = jsonenc.Verbose
	default:
		return nil, fmt.Errorf("%s: encoding %q: want compact or verbose", where, cfg.Encoding)
	}
	g.fieldMode = g.headerMode
	switch cfg.FieldEncoding {
	case "", config.FieldVariant:
	case config.FieldDataValue:
		g.fieldMask = jsonenc.FieldMaskStatusCode | jsonenc.FieldMaskSourceTimestamp | jsonenc.FieldMaskServerTimestamp
	case config.FieldRaw:
		// RawData is an option of VerboseEncoding (Part 6 §5.4.1): bare values.
		g.fieldMask = jsonenc.FieldMaskRawData
		g.fieldMode = jsonenc.Verbose
	default:
		return nil, fmt.Errorf("%s: fieldEncoding %q: want variant, dataValue or raw", where, cfg.FieldEncoding)
	}
	switch cfg.Format {
	case "", config.FormatPart14:
	case config.FormatSamples:
		g.samples = true
	default:
		return nil, fmt.Errorf("%s: format %q: want part14 or samples", where, cfg.Format)
	}
	switch opts.FieldPayload {
	case "", FieldPayloadValue:
	case FieldPayloadDataValue:
		g.fieldDV = true
	default:
		return nil, fmt.Errorf("%s: per-field payload %q: want value or dataValue", where, opts.FieldPayload)
	}
	for _, q := range append(slices.Clone(g.queues), g.fqueues...) {
		if q.Guarantee() == config.AtLeastOnce {
			g.tr = newAckTracker(nil, g.maxUnacked+8, g.log)
			break
		}
	}
	if _, err := g.itemOptions(config.Field{}, nil); err != nil {
		return nil, fmt.Errorf("%s: nodes: %w", where, err)
	}
	ids := map[uint16]bool{}
	names := map[string]bool{}
	total := 0
	for i := range cfg.Writers {
		total += len(cfg.Writers[i].Fields)
	}
	// At its size: appending would leave up to a quarter unused.
	g.fields = make([]field, 0, total)
	for i := range cfg.Writers {
		wc := cfg.Writers[i]
		if wc.ID == 0 {
			wc.ID = uint16(i + 1)
		}
		if wc.Name == "" {
			wc.Name = fmt.Sprintf("writer%d", wc.ID)
		}
		if ids[wc.ID] || names[wc.Name] {
			return nil, fmt.Errorf("%s: writer %q (id %d): the id or the name is not unique", where, wc.Name, wc.ID)
		}
		ids[wc.ID], names[wc.Name] = true, true
		if err := g.appendWriter(wc); err != nil {
			return nil, err
		}
	}
	// The writers keep what they need of their configuration; the group's
	// copy of the fields would only double the memory per item.
	g.cfg.Writers = nil
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
	g.nmHdr.WriterGroupName = g.cfg.Name
}

// appendWriter builds writer wc and its fields at the end of g.fields. The
// caller holds g.mu and g.vmu, or owns g alone.
func (g *WriterGroup) appendWriter(wc config.DataSetWriter) error {
	where := fmt.Sprintf("bridge: writer group %s: writer %s", g.cfg.Name, wc.Name)
	if len(wc.Browse) > 0 {
		g.log.Warn("bridge: browse selections are expanded by the caller (config.ExpandBrowse); only the listed fields are published", "group", g.cfg.Name, "writer", wc.Name)
	}
	w := &writer{
		index: int32(len(g.writers)),
		name:  wc.Name,
		id:    wc.ID,
		cfg:   wc,
		first: int32(len(g.fields)),
		seq:   1,
		nodes: make([]string, len(wc.Fields)),
	}
	for k := range wc.Fields {
		w.nodes[k] = wc.Fields[k].Node
	}
	names := make(map[string]bool, len(wc.Fields))
	size := 0
	for k := range wc.Fields {
		size += len(fieldNameOf(&wc.Fields[k]))
	}
	if size > math.MaxUint32 {
		return fmt.Errorf("%s: the field names take more than 4 GiB", where)
	}
	var text strings.Builder
	text.Grow(size)
	g.fields = slices.Grow(g.fields, len(wc.Fields))
	for k := range wc.Fields {
		fc := &wc.Fields[k]
		if fc.Node == "" {
			return fmt.Errorf("%s: field %d: node is empty", where, k+1)
		}
		if _, err := ua.ParseExpandedNodeID(fc.Node); err != nil {
			return fmt.Errorf("%s: field %d: node %q: %w", where, k+1, fc.Node, err)
		}
		name := fieldNameOf(fc)
		if names[name] {
			return fmt.Errorf("%s: field name %q is not unique", where, name)
		}
		names[name] = true
		if _, err := g.itemOptions(*fc, nil); err != nil {
			return fmt.Errorf("%s: field %s: %w", where, name, err)
		}
		f := field{name: uint32(text.Len()), nameLen: uint8(min(len(name), nameLong))}
		text.WriteString(name)
		slot := int32(len(g.fields))
		if hb := fc.Heartbeat; hb > 0 || g.cfg.Nodes.Heartbeat > 0 {
			if hb <= 0 {
				hb = g.cfg.Nodes.Heartbeat
			}
			if fc.Events == nil {
				w.heartbeats = append(w.heartbeats, heartbeat{slot: slot, every: int64(hb)})
			}
		}
		if ev := fc.Events; ev != nil {
			f.flags |= fieldEvent | fieldTypeKnown
			sel := ev.Select
			if len(sel) == 0 {
				sel = DefaultEventSelect
			}
			if ev.OfType != "" {
				if _, err := ua.ParseExpandedNodeID(ev.OfType); err != nil {
					return fmt.Errorf("%s: field %s: events.ofType %q: %w", where, name, ev.OfType, err)
				}
			}
			w.events = append(w.events, eventInfo{slot: slot, sel: sel, ofType: ev.OfType})
		} else {
			w.untyped++
		}
		g.fields = append(g.fields, f)
		if g.samples {
			g.nodes = append(g.nodes, ua.NodeID{})
		}
	}
	w.end = int32(len(g.fields))
	// One string for all names: no header and no allocation per field, and
	// the browse's strings are not kept.
	w.names = text.String()
	w.sorted = make([]int32, 0, w.end-w.first)
	for s := w.first; s < w.end; s++ {
		w.sorted = append(w.sorted, s)
	}
	slices.SortFunc(w.sorted, func(a, b int32) int { return strings.Compare(g.fieldName(w, a), g.fieldName(w, b)) })
	w.hdr = jsonenc.DataSetMessageHeader{
		DataSetWriterID:   w.id,
		DataSetWriterName: w.name,
		FieldContentMask:  g.fieldMask,
	}
	if g.samples {
		w.hdr.ContentMask = jsonenc.DSMSequenceNumber | jsonenc.DSMDataSetWriterID
		w.hdr.PublisherID = g.publisher
		w.hdr.EndpointURL = g.endpoint
	} else {
		w.hdr.ContentMask = jsonenc.DSMDataSetWriterID | jsonenc.DSMDataSetWriterName | jsonenc.DSMSequenceNumber |
			jsonenc.DSMMetaDataVersion | jsonenc.DSMTimestamp | jsonenc.DSMStatus | jsonenc.DSMMessageType |
			jsonenc.FieldEncodingBits(g.fieldMode)
	}
	// A writer that replaces one of the same name (a reload that changed its
	// fields) gets a newer MajorVersion: its fields may have changed in any
	// way.
	prev := g.versions[w.name]
	v := versionTime(time.Now(), max(prev.MajorVersion, prev.MinorVersion))
	w.version = jsonenc.ConfigurationVersion{MajorVersion: v, MinorVersion: v}
	if g.versions == nil {
		g.versions = map[string]jsonenc.ConfigurationVersion{}
	}
	g.versions[w.name] = w.version
	g.writers = append(g.writers, w)
	return nil
}

// fieldNameOf is the DataSet field name of fc: its name, or its node.
func fieldNameOf(fc *config.Field) string {
	if fc.Name == "" {
		return fc.Node
	}
	return fc.Name
}

// itemKey identifies equal monitoring parameters, so that items share one
// *client.ItemOptions (the client keeps one copy per distinct pointer).
type itemKey struct {
	sampling      time.Duration
	queue         uint32
	discardNewest bool
	filter        bool
	trigger       ua.DataChangeTrigger
	deadbandType  uint32
	deadband      float64
}

// itemOptions computes the monitoring parameters of data field fc from the
// group's node defaults; with dedup it returns a shared *client.ItemOptions.
func (g *WriterGroup) itemOptions(fc config.Field, dedup map[itemKey]*client.ItemOptions) (*client.ItemOptions, error) {
	nd := &g.cfg.Nodes
	sampling := g.interval / 10
	switch {
	case fc.SamplingInterval != nil:
		sampling = fc.SamplingInterval.D()
	case nd.SamplingInterval != nil:
		sampling = nd.SamplingInterval.D()
	}
	if sampling < 0 {
		return nil, fmt.Errorf("samplingInterval %v is negative", sampling)
	}
	queue := fc.QueueSize
	if queue == 0 {
		queue = nd.QueueSize
	}
	if queue == 0 {
		// Enough for every sample of two publishing intervals (headroom for
		// a late publish): the server delivers every change, not only the
		// last one per interval.
		s := sampling
		if s == 0 {
			s = fastestSampling
		}
		q := 2 * ((g.interval + s - 1) / s)
		queue = uint32(min(max(q, 2), MaxDefaultQueueSize))
	}
	discardOldest := true
	switch {
	case fc.DiscardOldest != nil:
		discardOldest = *fc.DiscardOldest
	case nd.DiscardOldest != nil:
		discardOldest = *nd.DiscardOldest
	}
	trigger := fc.Trigger
	if trigger == "" {
		trigger = nd.Trigger
	}
	db := fc.Deadband
	if db.Type == "" {
		db = nd.Deadband
	}
	key := itemKey{sampling: sampling, queue: queue, discardNewest: !discardOldest, trigger: ua.DataChangeTriggerStatusValue}
	switch trigger {
	case "", "statusValue":
	case "status":
		key.trigger, key.filter = ua.DataChangeTriggerStatus, true
	case "statusValueTimestamp":
		key.trigger, key.filter = ua.DataChangeTriggerStatusValueTimestamp, true
	default:
		return nil, fmt.Errorf("trigger %q: want status, statusValue or statusValueTimestamp", trigger)
	}
	switch db.Type {
	case "", "none":
	case "absolute":
		key.filter, key.deadbandType, key.deadband = true, uint32(ua.DeadbandTypeAbsolute), db.Value
	case "percent":
		if db.Value > 100 {
			return nil, fmt.Errorf("percent deadband %v is above 100", db.Value)
		}
		key.filter, key.deadbandType, key.deadband = true, uint32(ua.DeadbandTypePercent), db.Value
	default:
		return nil, fmt.Errorf("deadband type %q: want none, absolute or percent", db.Type)
	}
	if db.Value < 0 || math.IsNaN(db.Value) {
		return nil, fmt.Errorf("deadband %v is negative", db.Value)
	}
	if o := dedup[key]; o != nil {
		return o, nil
	}
	o := &client.ItemOptions{QueueSize: queue, DiscardNewest: !discardOldest, SamplingInterval: sampling}
	if sampling == 0 {
		o.SamplingInterval = client.SamplingFastest
	}
	if key.filter {
		switch key.deadbandType {
		case uint32(ua.DeadbandTypeAbsolute):
			o.DataChange = client.AbsoluteDeadband(db.Value)
		case uint32(ua.DeadbandTypePercent):
			o.DataChange = client.PercentDeadband(db.Value)
		default:
			o.DataChange = &ua.DataChangeFilter{}
		}
		o.DataChange.Trigger = key.trigger
	}
	if dedup != nil {
		dedup[key] = o
	}
	return o, nil
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
		x, _ := ua.ParseExpandedNodeID(fc.Node) // checked by appendWriter
		id, err := x.Resolve(g.namespaces)
		if err != nil {
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
				tx, _ := ua.ParseExpandedNodeID(ev.OfType)
				tid, err := tx.Resolve(g.namespaces)
				if err != nil {
					return nil, fmt.Errorf("bridge: writer %s: field %s: events.ofType: %w", w.name, g.fieldName(w, slot), err)
				}
				filter.WhereClause = client.OfType(tid)
			}
			q := fc.QueueSize
			if q == 0 {
				q = defaultEventQueue
			}
			reqs[k].Options = &client.ItemOptions{SamplingInterval: client.SamplingFastest, QueueSize: q, Event: filter}
			continue
		}
		o, err := g.itemOptions(*fc, dedup)
		if err != nil {
			return nil, err
		}
		reqs[k].Options = o
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
			g.log.Warn("bridge: reading the fields' DataType failed; types come from the first values", "group", g.cfg.Name, "writer", w.name, "err", err)
		} else {
			results = resp.Results
		}
	}
	for slot, err := range bad {
		g.log.Warn("bridge: field node cannot be resolved now", "group", g.cfg.Name, "writer", w.name, "field", g.fieldName(w, slot), "err", err)
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
		return errors.New("bridge: writer group " + g.cfg.Name + ": no session")
	}
	g.mu.Lock()
	started, closed := g.started, g.closed
	g.started = true
	g.mu.Unlock()
	if started || closed || g.stopped {
		return errors.New("bridge: writer group " + g.cfg.Name + ": started twice or after Stop")
	}
	c, err := g.session.WaitConnected(ctx)
	if err != nil {
		return fmt.Errorf("bridge: writer group %s: %w", g.cfg.Name, err)
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
	keepAliveCount := uint32(0)
	if g.keepAlive > 0 {
		keepAliveCount = uint32(min(max(g.keepAlive/g.interval, 1), 10000))
	}
	scfg := &client.SubscriptionConfig{
		PublishingInterval: g.interval,
		KeepAliveCount:     keepAliveCount,
		// negative (no bound but the server's) and unset are 0 there
		MaxNotificationsPerPublish: uint32(max(g.cfg.MaxNotificationsPerPublish, 0)),
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
	}
	// Before the subscription exists: a resumed one delivers what the
	// server kept at once, before the items are even added.
	now := time.Now().UnixNano()
	g.mu.Lock()
	g.base = 1 // a new subscription's first client handle
	for _, w := range g.writers {
		w.lastSent = now
		g.sendMetaData(w)
	}
	g.mu.Unlock()
	sub, err := g.session.CreateSubscription(ctx, scfg)
	if err != nil {
		return fmt.Errorf("bridge: writer group %s: creating the subscription: %w", g.cfg.Name, err)
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
			return fmt.Errorf("bridge: writer group %s: creating %d monitored items: %w", g.cfg.Name, len(reqs), err)
		}
		g.log.Info("bridge: writer group subscribed", "group", g.cfg.Name, "items", len(reqs),
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
	g.tr.setAckerOnce(sub)
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
func (g *WriterGroup) keepAliveLoop(ctx context.Context) {
	defer g.wg.Done()
	period := g.interval
	if g.keepAlive > 0 {
		period = min(period, g.keepAlive/2)
	}
	g.mu.Lock()
	for _, w := range g.writers {
		for _, hb := range w.heartbeats {
			period = min(period, time.Duration(hb.every)/2)
		}
	}
	g.mu.Unlock()
	period = max(period, 10*time.Millisecond)
	t := time.NewTicker(period)
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
		}
	}
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
		g.fenc.Release()
		g.w, g.fenc = nil, nil
	}()
	select {
	case <-released:
	case <-ctx.Done():
		return fmt.Errorf("bridge: writer group %s: a handler is still waiting for a full queue: %w", g.cfg.Name, ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("bridge: writer group %s: deleting the subscription: %w", g.cfg.Name, err)
	}
	return nil
}

// dropNodes forgets the configured node ids of writers whose monitored items
// are now in the client's table (g.vmu held): from then on fieldNode reads
// them from there, and a million items keep one copy of their node ids, not
// two.
func (g *WriterGroup) dropNodes(ws []*writer) {
	for _, w := range ws {
		w.nodes = nil
	}
	g.invalidateNodes() // the text of a node id may change (canonical form)
}

// invalidateNodes drops the node index: the fields or their node ids
// change (g.vmu held for writing).
func (g *WriterGroup) invalidateNodes() {
	g.idxGen.Add(1)
	g.nodeIdx.Store(nil)
}

// fieldNode returns the node id of slot s of w as configured (g.vmu held):
// the configuration's text until the items are created, then the client's
// item written back in the same form (nsu= when it was given so).
func (g *WriterGroup) fieldNode(w *writer, s int32) string {
	if w.nodes != nil {
		return w.nodes[s-w.first]
	}
	return string(g.appendFieldNode(nil, w, s))
}

// appendFieldNode appends fieldNode(w, s) to b (g.vmu held).
func (g *WriterGroup) appendFieldNode(b []byte, w *writer, s int32) []byte {
	if w.nodes != nil {
		return append(b, w.nodes[s-w.first]...)
	}
	if g.sub == nil {
		return b
	}
	it, ok := g.sub.Item(g.base + uint32(s))
	if !ok {
		return b
	}
	if it.NamespaceURI != "" {
		return ua.ExpandedNodeID{NodeID: it.NodeID, NamespaceURI: it.NamespaceURI}.AppendText(b)
	}
	return it.NodeID.AppendText(b)
}

// AddWriter adds a dataset writer to a running group (a configuration
// reload): its fields are monitored in one batched call, its metadata is
// sent; the other writers are not disturbed.
func (g *WriterGroup) AddWriter(ctx context.Context, wc config.DataSetWriter) error {
	g.opMu.Lock()
	defer g.opMu.Unlock()
	g.mu.Lock()
	if g.closed || g.stopped || g.sub == nil {
		g.mu.Unlock()
		return errors.New("bridge: writer group " + g.cfg.Name + ": AddWriter before Start or after Stop")
	}
	maxID := uint16(0)
	for _, w := range g.writers {
		if w.removed {
			continue
		}
		maxID = max(maxID, w.id)
		if w.name == wc.Name || (wc.ID != 0 && w.id == wc.ID) {
			g.mu.Unlock()
			return fmt.Errorf("bridge: writer group %s: writer %q (id %d) exists", g.cfg.Name, wc.Name, wc.ID)
		}
	}
	if wc.ID == 0 {
		wc.ID = maxID + 1
	}
	if wc.Name == "" {
		wc.Name = fmt.Sprintf("writer%d", wc.ID)
	}
	g.vmu.Lock()
	nf, nw := len(g.fields), len(g.writers)
	g.invalidateNodes()
	err := g.appendWriter(wc)
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
		g.log.Error("bridge: monitored items got unexpected client handles; writer dropped", "group", g.cfg.Name,
			"writer", w.name, "want", predicted, "got", res.FirstHandle)
		g.removeSlots(w)
		return fmt.Errorf("bridge: writer group %s: writer %s: client handles start at %d, want %d", g.cfg.Name, w.name, res.FirstHandle, predicted)
	}
	if err != nil {
		return fmt.Errorf("bridge: writer group %s: writer %s: creating monitored items: %w", g.cfg.Name, w.name, err)
	}
	return nil
}

// ReplaceWriter replaces the writer of wc's name by wc (a reload that
// changed its fields): the old one's items are deleted, the new one's
// created, and its metadata is sent with a newer MajorVersion. Its
// SequenceNumbers start over.
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
		return errors.New("bridge: writer group " + g.cfg.Name + ": RemoveWriter after Stop")
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
		return fmt.Errorf("bridge: writer group %s: no writer %q", g.cfg.Name, name)
	}
	handles := g.removeSlots(w)
	if g.sub == nil || len(handles) == 0 {
		return nil
	}
	if err := g.sub.DeleteMonitoredItems(ctx, handles); err != nil {
		return fmt.Errorf("bridge: writer group %s: writer %s: deleting monitored items: %w", g.cfg.Name, name, err)
	}
	return nil
}

// removeSlots marks w removed and empties its fields; it returns their
// client handles.
func (g *WriterGroup) removeSlots(w *writer) []uint32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.vmu.Lock()
	defer g.vmu.Unlock()
	w.removed = true
	g.invalidateNodes()
	handles := make([]uint32, 0, w.end-w.first)
	for s := w.first; s < w.end; s++ {
		f := &g.fields[s]
		if f.flags&fieldExt != 0 {
			g.freeExt(f)
		}
		*f = field{flags: fieldRemoved}
		delete(g.itemSt, s)
		handles = append(handles, g.base+uint32(s))
	}
	w.events, w.odd, w.sorted, w.names = nil, nil, nil, ""
	g.publishSnapshot()
	return handles
}

func (g *WriterGroup) publishSnapshot() {
	ws := make([]*writer, 0, len(g.writers))
	for _, w := range g.writers {
		if !w.removed {
			ws = append(ws, w)
		}
	}
	g.snapshot.Store(&ws)
}

// Name returns the group's name.
func (g *WriterGroup) Name() string { return g.cfg.Name }

// Subscription returns the group's subscription, nil before Start.
func (g *WriterGroup) Subscription() *client.Subscription {
	g.opMu.Lock()
	defer g.opMu.Unlock()
	return g.sub
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
