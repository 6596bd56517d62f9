package bridge

import (
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/ua"
)

// Counters are atomics so that Stats never waits for the dispatch path
// (which may be blocked on a full Block queue).

type groupCounters struct {
	notifications, events, unknownHandles      atomic.Uint64
	dataSetMessages, messages, fieldMessages   atomic.Uint64
	keyFrames, keepAlives, metaData            atomic.Uint64
	heartbeats, bytes                          atomic.Uint64
	encodeErrors, badItems, gaps               atomic.Uint64
	redelivered, fenced                        atomic.Uint64
	backfilled, backfillRanges, backfillMissed atomic.Uint64
	overflows, overflowsLogged                 atomic.Uint64
	lastPublish                                atomic.Int64
}

type writerCounters struct {
	notifications, dataSetMessages, messages, keyFrames, keepAlives atomic.Uint64
	heartbeats                                                      atomic.Uint64
}

// GroupStats are a writer group's counters since it was made (with the JSON
// names of the REST API's status).
type GroupStats struct {
	Name            string `json:"name"`
	Endpoint        string `json:"endpoint"`        // the configured endpoint's name
	Notifications   uint64 `json:"notifications"`   // data change notifications received
	Events          uint64 `json:"events"`          // events received
	UnknownHandles  uint64 `json:"unknownHandles"`  // notifications for no (or a removed) field
	DataSetMessages uint64 `json:"dataSetMessages"` // written, keep-alives included
	Messages        uint64 `json:"messages"`        // ua-data and ua-metadata messages handed to the queues
	Bytes           uint64 `json:"bytes"`           // payload bytes of all messages handed to the queues
	FieldMessages   uint64 `json:"fieldMessages"`   // per-field messages handed to the field queues
	KeyFrames       uint64 `json:"keyFrames"`
	KeepAlives      uint64 `json:"keepAlives"`
	Heartbeats      uint64 `json:"heartbeats"` // DataSetMessages resending unchanged fields (heartbeat)
	MetaData        uint64 `json:"metaData"`   // ua-metadata messages
	EncodeErrors    uint64 `json:"encodeErrors"`
	RefusedItems    uint64 `json:"refusedItems"` // monitored item refusals reported by the server
	Gaps            uint64 `json:"gaps"`         // losses of notification messages reported by the client
	// Redelivered counts notification messages republished after a resume
	// (possible duplicates, marked with RedeliveredPrefix; see resume.go).
	Redelivered uint64 `json:"redelivered"`
	// Fenced counts messages not handed to the queues because the group's
	// lease deadline had passed (scale-out: another replica may hold the
	// group); at least once, their notifications are left unacknowledged
	// for the next holder.
	Fenced uint64 `json:"fenced"`
	// Overflows counts values the server sent with the Overflow info bit:
	// its monitored item's queue was full and it discarded values next to
	// this one (Part 4 §5.12.1.5). The values themselves are lost upstream.
	Overflows uint64 `json:"overflows"`
	// Backfilled counts values read from the server's history to fill what
	// was lost upstream (backfill: history), BackfillRanges the fields'
	// lost ranges filled, BackfillMissed those left as they were (no
	// history, or not all of it readable).
	Backfilled     uint64 `json:"backfilled"`
	BackfillRanges uint64 `json:"backfillRanges"`
	BackfillMissed uint64 `json:"backfillMissed"`
	// Unacked is the number of notification messages whose sink messages
	// are not all settled; Acked those acknowledged upstream after every
	// at-least-once queue confirmed them; Undelivered those left
	// unacknowledged because a message was not delivered.
	Unacked     int    `json:"unacked"`
	Acked       uint64 `json:"acked"`
	Undelivered uint64 `json:"undelivered"`
	AckErrors   uint64 `json:"ackErrors"`
	// SubscriptionStatus is the last status the client reported for the
	// subscription (Good when none).
	SubscriptionStatus ua.StatusCode `json:"subscriptionStatus"`
	LastPublish        time.Time     `json:"lastPublish"` // zero before the first DataSetMessage
	Writers            []WriterStats `json:"writers"`
}

// WriterStats are a dataset writer's counters.
type WriterStats struct {
	Name            string    `json:"name"`
	ID              uint16    `json:"id"`
	Fields          int       `json:"fields"`
	Notifications   uint64    `json:"notifications"`
	DataSetMessages uint64    `json:"dataSetMessages"`
	Messages        uint64    `json:"messages"` // single shape only: messages carrying its DataSetMessages
	KeyFrames       uint64    `json:"keyFrames"`
	KeepAlives      uint64    `json:"keepAlives"`
	Heartbeats      uint64    `json:"heartbeats"`
	LastPublish     time.Time `json:"lastPublish"`
}

func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Stats returns the group's counters. It never waits for the dispatch path.
func (g *WriterGroup) Stats() GroupStats {
	s := GroupStats{
		Name:               g.name,
		Endpoint:           g.endpointName,
		Notifications:      g.stats.notifications.Load(),
		Events:             g.stats.events.Load(),
		UnknownHandles:     g.stats.unknownHandles.Load(),
		DataSetMessages:    g.stats.dataSetMessages.Load(),
		Messages:           g.stats.messages.Load(),
		FieldMessages:      g.stats.fieldMessages.Load(),
		KeyFrames:          g.stats.keyFrames.Load(),
		KeepAlives:         g.stats.keepAlives.Load(),
		Heartbeats:         g.stats.heartbeats.Load(),
		Bytes:              g.stats.bytes.Load(),
		MetaData:           g.stats.metaData.Load(),
		EncodeErrors:       g.stats.encodeErrors.Load(),
		Fenced:             g.stats.fenced.Load(),
		RefusedItems:       g.stats.badItems.Load(),
		Gaps:               g.stats.gaps.Load(),
		Redelivered:        g.stats.redelivered.Load(),
		Overflows:          g.stats.overflows.Load(),
		Backfilled:         g.stats.backfilled.Load(),
		BackfillRanges:     g.stats.backfillRanges.Load(),
		BackfillMissed:     g.stats.backfillMissed.Load(),
		SubscriptionStatus: ua.StatusCode(g.subState.Load()),
		LastPublish:        unixTime(g.stats.lastPublish.Load()),
	}
	if g.tr != nil {
		s.Unacked = g.tr.unacked()
		s.Acked = g.tr.acked.Load()
		s.Undelivered = g.tr.undelivered.Load()
		s.AckErrors = g.tr.ackErrors.Load()
	}
	if ws := g.snapshot.Load(); ws != nil {
		for _, w := range *ws {
			s.Writers = append(s.Writers, WriterStats{
				Name:            w.name,
				ID:              w.id,
				Fields:          int(w.end - w.first),
				Notifications:   w.stats.notifications.Load(),
				DataSetMessages: w.stats.dataSetMessages.Load(),
				Messages:        w.stats.messages.Load(),
				KeyFrames:       w.stats.keyFrames.Load(),
				KeepAlives:      w.stats.keepAlives.Load(),
				Heartbeats:      w.stats.heartbeats.Load(),
				LastPublish:     unixTime(w.lastPublish.Load()),
			})
		}
	}
	return s
}

// FieldValue is a field's state for the API.
type FieldValue struct {
	Writer string
	Field  string
	Node   string // as configured (in its canonical text form once its item exists)
	Handle uint32 // client handle of its monitored item
	// Status is its monitored item's status: Good once created (or not yet
	// tried), the server's refusal otherwise (BadNodeIdUnknown …).
	Status   ua.StatusCode
	HasValue bool
	Value    ua.DataValue // the last value; its strings and arrays must not be modified
	// BuiltInType as published in the metadata (0: unknown or abstract).
	BuiltInType ua.TypeID
	// ValueRank as published in the metadata: -1 a scalar, 1 an array, …
	ValueRank int32
	// Event: an event field (its events go out as ua-event messages; it
	// has no value).
	Event bool
}

// fieldValue fills a FieldValue for slot s of w; g.vmu held.
func (g *WriterGroup) fieldValue(w *writer, s int32) FieldValue {
	f := &g.fields[s]
	v := FieldValue{
		Writer:      w.name,
		Field:       g.fieldName(w, s),
		Node:        g.fieldNode(w, s),
		Handle:      g.base + uint32(s),
		Status:      g.itemStatus(s),
		HasValue:    f.flags&fieldHasValue != 0,
		BuiltInType: ua.TypeID(f.builtin),
		ValueRank:   -1,
		Event:       f.flags&fieldEvent != 0,
	}
	if ti, ok := w.odd[s]; ok {
		v.ValueRank = ti.valueRank
	}
	if v.HasValue {
		g.loadValue(f, &v.Value)
	}
	return v
}

// LastValue returns the last value of a field (writer and field name) and
// its state; ok is false when there is no such field. It waits only for a
// cache update in progress, never for a sink.
func (g *WriterGroup) LastValue(writerName, fieldName string) (FieldValue, bool) {
	g.vmu.RLock()
	defer g.vmu.RUnlock()
	for _, w := range g.writers {
		if w.removed || w.name != writerName {
			continue
		}
		i, found := slices.BinarySearchFunc(w.sorted, fieldName, func(s int32, name string) int {
			return strings.Compare(g.fieldName(w, s), name)
		})
		if !found {
			return FieldValue{}, false
		}
		return g.fieldValue(w, w.sorted[i]), true
	}
	return FieldValue{}, false
}

// MetaDataVersion returns the current ConfigurationVersion of a writer.
func (g *WriterGroup) MetaDataVersion(writerName string) (jsonenc.ConfigurationVersion, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.writers {
		if !w.removed && w.name == writerName {
			return w.version, true
		}
	}
	return jsonenc.ConfigurationVersion{}, false
}

// MetaData returns the DataSetMetaData of a writer as its last ua-metadata
// message carried it; false when there is no such writer.
func (g *WriterGroup) MetaData(writerName string) (*ua.DataSetMetaDataType, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.writers {
		if !w.removed && w.name == writerName {
			return g.metaData(w), true
		}
	}
	return nil, false
}
