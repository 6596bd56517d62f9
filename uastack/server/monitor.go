package server

import (
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// overflowBits are the InfoType (DataValue) and Overflow bits set on the value
// next to one a full queue discarded (Part 4 §5.12.1.5, Part 4 §7.39.1).
const overflowBits ua.StatusCode = 0x0480

// monitoredItem is a monitored item; all of it is guarded by sub.mu, except
// the fields fixed at creation (id, sub, node, attr, event, gen).
//
// The fields a sample reads come first, and a generated node's generator is
// copied in, so that sampling an item touches one object rather than three:
// a sweep over 100,000 items is bound by cache misses, not by arithmetic.
type monitoredItem struct {
	// Cache line 0: what every sample reads and the filter state.
	mode          ua.MonitoringMode
	removed       bool
	sampled       bool
	hasLast       bool
	isGen         bool
	queued        bool // in sub.pending
	lastInline    bool // the last value is in lastType/lastBits, not in last
	discardOldest bool
	lastType      ua.TypeID
	trigger       ua.DataChangeTrigger
	deadband      ua.DeadbandType
	ts            ua.TimestampsToReturn
	queueSize     uint32
	lastStatus    ua.StatusCode
	lastSrcPs     uint16
	lastTick      int64
	lastBits      uint64      // the last value queued, an inline scalar
	lastSrc       ua.DateTime // its source timestamp
	// Cache line 1: the generator.
	gen generator // the node's, when isGen
	// Cache line 2: the queue of generated values.
	tq        ring[tickEntry]
	tq1       [1]tickEntry
	sub       *subscription
	lastQTick int64       // the tick of the last value queued, when isGen
	lastSrv   ua.DateTime // the server timestamp of the last value queued
	// Then the queue of other values.
	dq      ring[dvEntry]
	node    *node
	lastPtr *ua.DataValue
	absDB   float64 // the deadband in the value's units (percent converted)
	// dq1 holds the value of the usual queue of one.
	dq1 [1]dvEntry
	// last is the last value queued when it is not an inline scalar.
	last ua.DataValue

	id           uint32
	attr         uint32
	event        bool // monitors the events of node
	clientHandle uint32
	interval     time.Duration

	group        *rateGroup
	bucket       *bucket
	bidx         int // index in bucket.items
	evFilter     *eventFilter
	evq          []ua.EventFieldList
	evHead, evLn int
	evSource     *eventSource
}
