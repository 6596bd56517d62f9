package bridge

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/ua"
)

// The field table: one slot per DataSet field, that is per monitored item,
// in writer and field order. The items are created in that order in one
// batched call, so the slot of client handle h is h − base: no map between
// the client's handles and the fields. A writer owns a contiguous range of
// slots (writerOf finds it by binary search), and its fields' names are one
// string, each field keeping an offset into it. Slots are never reused: a
// removed writer's stay, marked fieldRemoved. The cached values live in the
// slots (cache.go); what only the metadata or the REST API needs stays in
// the writer.

// fieldTable is the group's slots, their cached values and their monitored
// items' statuses. The group's vmu guards it (the handlers hold mu too
// while they write it); see the WriterGroup's lock comment.
type fieldTable struct {
	fields  []field
	nodes   []ua.NodeID             // by slot, samples format only
	base    uint32                  // client handle of fields[0]
	ext     []extValue              // the cache's side table (cache.go)
	extFree []int32                 // free indexes of ext
	itemSt  map[int32]ua.StatusCode // the monitored items' statuses (the server's answers) other than Good, by slot
	cl      cloner                  // copies side-table values in; the dispatch path's
}

// field is one slot. It is kept small (TestFieldSize): a million of them
// must fit in a gateway's memory beside the client's item table. The cached
// value is compact (cache.go): status, timestamps, and an inline scalar's
// type and payload, or an index in the side table. The name is an offset
// into its writer's names.
type field struct {
	src     ua.DateTime   // the cached value's SourceTimestamp
	val     uint64        // inline payload (Variant.RawBits), or with fieldExt the index in ext
	status  ua.StatusCode // the cached value's status
	srvd    int32         // its ServerTimestamp − SourceTimestamp (100 ns); with fieldExt the ServerTimestamp is in ext
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
	fieldExt                   // the value is in the side table ext[val]
	fieldRemoved               // its writer was removed
)

// nameLong in field.nameLen: the name is longer; it ends where the next
// field's begins.
const nameLong = math.MaxUint8

// nameOf returns the name of f, slot s of w.
func (t *fieldTable) nameOf(w *writer, f *field, s int32) string {
	if f.nameLen != nameLong {
		return w.names[f.name : f.name+uint32(f.nameLen)]
	}
	end := uint32(len(w.names))
	if s+1 < w.end {
		end = t.fields[s+1].name
	}
	return w.names[f.name:end]
}

// fieldName returns the name of slot s of w.
func (t *fieldTable) fieldName(w *writer, s int32) string {
	return t.nameOf(w, &t.fields[s], s)
}

// typeInfo is the DataType and ValueRank of a field whose metadata cannot be
// derived from its built-in type alone.
type typeInfo struct {
	dataType  ua.NodeID
	valueRank int32
}

// eventInfo is the EventFilter of an event field.
type eventInfo struct {
	slot int32
	sel  []string
}

// writer is one DataSetWriter: a contiguous range of the group's slots and
// the state of its DataSetMessages.
type writer struct {
	index      int32
	name       string
	id         uint16
	cfg        config.DataSetWriter
	first, end int32 // its fields are g.fields[first:end]
	events     []eventInfo
	odd        map[int32]typeInfo // by slot; fields whose DataType is not their built-in type's
	sorted     []int32            // its slots sorted by field name, for lookups by name
	untyped    int                // fields whose built-in type is not settled
	seq        uint32             // SequenceNumber of its next DataSetMessage
	frames     uint64             // data DataSetMessages written (key frame count)
	hi         uint32             // the SequenceNumber to go on from after a replay (resume.go)
	framesHi   uint64             // frames to go on from after a replay
	mark       int32              // its slot in the group's marks; -1: none
	cycle      uint64             // the group's cycle of its last ring entry
	rewound    bool               // a replay set seq back for the cycle being written
	savedDSMs  uint64             // its DataSetMessages at the last shared record (resume loop)
	// reserved: with a shared record, 1<<32 | the first SequenceNumber this
	// holder's last saved record left to a successor (0: none saved yet).
	reserved    atomic.Uint64
	splitMax    uint32 // the most numbers one DataSetMessage took beyond its own (split parts); g.mu
	forceKey    bool   // the next DataSetMessage is a key frame (after a gap)
	names       string // its fields' names, one after the other (field.name)
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

// appendWriter builds writer wc (config's defaults applied) and its slots
// at the end of the table. The caller holds g.mu and g.vmu, or owns g
// alone.
func (g *WriterGroup) appendWriter(wc config.DataSetWriter) error {
	if len(wc.Browse) > 0 {
		g.log.Warn("bridge: browse selections are expanded by config.ExpandWriterGroup; only the listed fields are published", "group", g.name, "writer", wc.Name)
	}
	size := 0
	for k := range wc.Fields {
		size += len(wc.Fields[k].Name)
	}
	if size > math.MaxUint32 {
		return fmt.Errorf("bridge: writer group %s: writer %s: the field names take more than 4 GiB", g.name, wc.Name)
	}
	w := &writer{
		index: int32(len(g.writers)),
		name:  wc.Name,
		id:    wc.ID,
		cfg:   wc,
		first: int32(len(g.fields)),
		seq:   1,
		hi:    1,
		mark:  -1,
		nodes: make([]string, len(wc.Fields)),
	}
	g.markWriter(w) // resume.go: its SequenceNumbers go on from the last run's
	var text strings.Builder
	text.Grow(size)
	g.fields = slices.Grow(g.fields, len(wc.Fields))
	for k := range wc.Fields {
		fc := &wc.Fields[k]
		w.nodes[k] = fc.Node
		f := field{name: uint32(text.Len()), nameLen: uint8(min(len(fc.Name), nameLong))}
		text.WriteString(fc.Name)
		slot := int32(len(g.fields))
		if ev := fc.Events; ev != nil {
			f.flags |= fieldEvent | fieldTypeKnown
			w.events = append(w.events, eventInfo{slot: slot, sel: ev.Select})
		} else {
			w.untyped++
			if fc.Heartbeat > 0 {
				w.heartbeats = append(w.heartbeats, heartbeat{slot: slot, every: int64(fc.Heartbeat)})
			}
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

// removeSlots marks w removed and empties its slots; it returns their
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

// publishSnapshot stores the writers not removed for Stats (g.mu held).
func (g *WriterGroup) publishSnapshot() {
	ws := make([]*writer, 0, len(g.writers))
	for _, w := range g.writers {
		if !w.removed {
			ws = append(ws, w)
		}
	}
	g.snapshot.Store(&ws)
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
