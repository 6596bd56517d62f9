package bridge

import (
	"errors"
	"time"

	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/ua"
)

// The hot path: notification message → last-value cache → JSON → sink
// messages. It runs on the client's dispatch goroutine with g.mu held, on
// borrowed pooled notifications, and allocates nothing in steady state for
// numeric values: the field of an item is g.fields[handle − base] (no map),
// the per-message scratch (entries) keeps its capacity, the JSON goes into
// the NetworkMessageWriter's pooled buffer and from there into a pooled
// sink.Message.

// entry is one notification of the message being written: the field's slot
// and the index of the notification. Entries are in slot order; the k-th
// value of one field in a message (its round, told by the entries before it
// of the same slot) goes into the k-th DataSetMessage of the writer.
type entry struct {
	slot int32
	// item is the index of the notification; ^index (negative) for one
	// cached but not sent: a value the last run delivered, sent again
	// (resend.go).
	item int32
}

// sortEntries sorts ents by slot, stably, and returns them sorted and the
// other buffer, which the caller keeps as spare for the next time (tmp may
// be nil: it grows to the largest message once). Short lists are sorted by
// insertion; longer ones by a radix sort over the bytes the slots use, in
// linear time and without a call per comparison.
func sortEntries(ents, tmp []entry) (sorted, spare []entry) {
	if len(ents) <= 32 {
		for i := 1; i < len(ents); i++ {
			e := ents[i]
			j := i
			for ; j > 0 && ents[j-1].slot > e.slot; j-- {
				ents[j] = ents[j-1]
			}
			ents[j] = e
		}
		return ents, tmp
	}
	if cap(tmp) < len(ents) {
		tmp = make([]entry, len(ents), cap(ents))
	}
	maxSlot := int32(0)
	for i := range ents {
		maxSlot = max(maxSlot, ents[i].slot)
	}
	src, dst := ents, tmp[:len(ents)]
	for shift := uint(0); shift < 32 && maxSlot>>shift != 0; shift += 8 {
		var count [256]int32
		for i := range src {
			count[byte(src[i].slot>>shift)]++
		}
		if int(count[byte(src[0].slot>>shift)]) == len(src) {
			continue // one digit for all: this pass would change nothing
		}
		sum := int32(0)
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		for i := range src {
			d := byte(src[i].slot >> shift)
			dst[count[d]] = src[i]
			count[d]++
		}
		src, dst = dst, src
	}
	return src, dst[:0]
}

// at is the index of e's notification.
func (e *entry) at() int32 {
	if e.item < 0 {
		return ^e.item
	}
	return e.item
}

// silent reports whether e is cached but not sent.
func (e *entry) silent() bool { return e.item < 0 }

// onDataChange is the subscription's DataChangeHandler.
func (g *WriterGroup) onDataChange(sub *client.Subscription, seq uint32, items []ua.MonitoredItemNotification) {
	g.kickResume() // resume.go: the record may be behind now
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	if !g.reserve(sub, len(items)) { // resume.go: SequenceNumbers reserved
		return
	}
	g.beginMessage(sub, seq) // resume.go: a replay, or redelivered
	defer g.clearRedelivered()
	if g.testTap != nil {
		g.testTap(seq, items)
	}
	g.stats.notifications.Add(uint64(len(items)))
	g.anySilent = false
	ents := g.ents[:0]
	inOrder, dup := true, false
	prev := int32(-1)
	n := uint32(len(g.fields))
	unknown, overflows := 0, 0
	for i := range items {
		ovf := items[i].Value.Status&overflowBits == overflowBits
		if ovf {
			overflows++
		}
		idx := items[i].ClientHandle - g.base // wraps for handles below base
		if idx >= n {
			unknown++
			continue
		}
		if g.fields[idx].flags&(fieldRemoved|fieldEvent) != 0 {
			unknown++
			continue
		}
		if g.bf != nil {
			g.lostBefore(int32(idx), &items[i].Value, ovf) // backfill.go
		}
		// A replay is written as it was the first time.
		silent := g.resendCheck && !g.replaying && g.resentFromLastRun(int32(idx), &items[i].Value) // resend.go
		s := int32(idx)
		if s <= prev {
			inOrder = false
		}
		prev = s
		e := entry{slot: s, item: int32(i)}
		if silent {
			e.item = ^e.item
			g.anySilent = true
		}
		ents = append(ents, e)
	}
	if unknown > 0 {
		g.stats.unknownHandles.Add(uint64(unknown))
	}
	if overflows > 0 {
		g.overflowed(overflows)
	}
	g.ents = ents
	if len(ents) == 0 {
		return
	}
	if !inOrder {
		// Items are created in writer and field order, so handle order is
		// the emission order; a server that reorders (or sends several
		// values of a field, each queue in turn) costs a stable sort: values
		// of one field keep their order.
		ents, g.entsTmp = sortEntries(ents, g.entsTmp)
		g.ents = ents
		for i := 1; i < len(ents); i++ {
			if ents[i].slot == ents[i-1].slot {
				dup = true
				break
			}
		}
	}
	g.beginCycle(seq, true)
	for i := 0; i < len(ents); {
		w := g.writerOf(ents[i].slot)
		j, rounds, r := i+1, int32(0), int32(0)
		for j < len(ents) && ents[j].slot < w.end {
			if dup {
				r = nextRound(ents, j, r)
				rounds = max(rounds, r)
			}
			j++
		}
		g.writeData(w, ents[i:j], int(rounds), items)
		i = j
	}
	g.endCycle()
}

// nextRound returns the round of ents[k] given r, the round of ents[k-1]
// (ents in slot order; ents[0] is of round 0).
func nextRound(ents []entry, k int, r int32) int32 {
	if k > 0 && ents[k].slot == ents[k-1].slot {
		return r + 1
	}
	return 0
}

// writeData writes the DataSetMessages of writer w for its entries of one
// notification message: rounds+1 of them (one per value of the field with
// the most values), each a key frame or a delta frame.
func (g *WriterGroup) writeData(w *writer, ents []entry, rounds int, items []ua.MonitoredItemNotification) {
	g.touch(w)
	w.stats.notifications.Add(uint64(len(ents)))
	if w.untyped > 0 {
		g.learnTypes(w, ents, items)
	}
	for r := int32(0); r <= int32(rounds); r++ {
		// With one round (the usual case) every entry is of round 0.
		g.vmu.Lock()
		rk := int32(0)
		for k := range ents {
			if rounds > 0 {
				if rk = nextRound(ents, k, rk); rk != r {
					continue
				}
			}
			e := &ents[k]
			dv := &items[e.at()].Value
			g.storeValue(&g.fields[e.slot], dv)
			if g.times != nil {
				g.times.Set(int(e.slot), int64(dv.SourceTimestamp))
			}
		}
		g.vmu.Unlock()
		if g.anySilent && !visibleIn(ents, rounds, r) {
			continue // only values sent again: cached, nothing to send
		}
		key := g.keyFrame(w)
		if key && g.replaying {
			// A replay knows only its message's values, not the cache the
			// key frame had the first time: the values it carries, with the
			// key frame's SequenceNumber.
			key = false
		}
		typ := jsonenc.DeltaFrame
		if key {
			typ = jsonenc.KeyFrame
		}
		g.beginDSM(w, typ)
		if key {
			for s := w.first; s < w.end; s++ {
				f := &g.fields[s]
				switch {
				case f.flags&fieldEvent != 0:
				case f.flags&fieldHasValue != 0:
					g.addCached(w, f, s)
				default:
					// Part 14 §7.2.4.5.4: a key frame carries every field; a
					// field without a value carries the status saying why
					// (written as its StatusCode in the Variant encoding).
					g.addField(w, f, s, g.missingValue(s))
				}
			}
		} else {
			// A delta frame carries the values just cached: written from
			// the notifications themselves, the same values, without
			// unpacking the compact cache.
			rk := int32(0)
			for k := range ents {
				if rounds > 0 {
					if rk = nextRound(ents, k, rk); rk != r {
						continue
					}
				}
				e := &ents[k]
				if !e.silent() {
					g.addField(w, &g.fields[e.slot], e.slot, &items[e.item].Value)
				}
			}
		}
		g.endDSM(w)
		if len(g.vsinks) > 0 {
			g.sendValues(w, ents, rounds, r, items)
		}
		if len(g.fqueues) > 0 {
			rk := int32(0)
			for k := range ents {
				if rounds > 0 {
					if rk = nextRound(ents, k, rk); rk != r {
						continue
					}
				}
				if e := &ents[k]; !e.silent() {
					g.publishField(w, e.slot, &items[e.item].Value)
				}
			}
		}
	}
}

// overflowBits are the InfoType DataValue and Overflow bits of a StatusCode
// (Part 4 §7.39.1): the server's queue for the item was full and discarded
// values before (discardOldest) or after this one.
const overflowBits ua.StatusCode = 0x0480

// overflowLogInterval throttles the overflow log line.
const overflowLogInterval = 10 * time.Second

// overflowed counts values with the Overflow bit and logs them, at most once
// per overflowLogInterval (g.mu held).
func (g *WriterGroup) overflowed(n int) {
	total := g.stats.overflows.Add(uint64(n))
	now := time.Now().UnixNano()
	if now-g.lastOvf < int64(overflowLogInterval) {
		return
	}
	g.lastOvf = now
	since := total - g.stats.overflowsLogged.Swap(total)
	g.log.Warn("bridge: the server's monitored-item queues overflowed: values were discarded upstream (raise queueSize or the sampling interval)",
		"group", g.name, "overflows", since, "overflowsTotal", total)
}

// waitingForData is written for fields without a value in a key frame.
var waitingForData = ua.DataValue{Status: ua.StatusBadWaitingForInitialData}

// missingValue is what a key frame carries for slot s, which has no value: the
// server's refusal of its monitored item (BadNodeIdUnknown …), which tells a
// subscriber more than BadWaitingForInitialData does. g.mu held; the status
// is read under vmu (onItemStatus writes it without g.mu).
func (g *WriterGroup) missingValue(s int32) *ua.DataValue {
	g.vmu.RLock()
	st := g.itemStatus(s)
	g.vmu.RUnlock()
	if !st.IsBad() {
		return &waitingForData
	}
	g.refused = ua.DataValue{Status: st}
	return &g.refused
}

// keyFrame reports whether w's next data DataSetMessage is a key frame and
// counts it.
func (g *WriterGroup) keyFrame(w *writer) bool {
	if g.samples {
		return false // the samples format has no frames
	}
	key := w.forceKey || w.frames%g.keyFrames == 0
	w.forceKey = false
	w.frames++
	return key
}

// learnTypes settles the built-in type of w's fields from their first value
// (fields whose DataType named none the gateway knows) and sends the
// metadata again with a new MinorVersion when it changed.
func (g *WriterGroup) learnTypes(w *writer, ents []entry, items []ua.MonitoredItemNotification) {
	changed := false
	g.vmu.Lock()
	for k := range ents {
		f := &g.fields[ents[k].slot]
		v := &items[ents[k].at()].Value.Value
		if f.flags&fieldTypeKnown != 0 || v.IsNull() {
			continue
		}
		f.builtin = byte(v.Type())
		f.flags |= fieldTypeKnown
		w.untyped--
		changed = true
		if v.IsArray() {
			ti := w.odd[ents[k].slot]
			if ti.dataType.IsNull() {
				ti.dataType = ua.NewNumericNodeID(0, uint32(v.Type()))
			}
			ti.valueRank = 1
			if w.odd == nil {
				w.odd = map[int32]typeInfo{}
			}
			w.odd[ents[k].slot] = ti
		}
	}
	g.vmu.Unlock()
	if changed && w.metaSent {
		w.version.MinorVersion = versionTime(time.Now(), w.version.MinorVersion)
		g.versions[w.name] = w.version
		g.sendMetaData(w)
	}
}

// onEvent is the subscription's EventHandler: every event becomes one
// ua-event DataSetMessage of its field's writer, its payload the selected
// event fields.
func (g *WriterGroup) onEvent(sub *client.Subscription, seq uint32, events []ua.EventFieldList) {
	g.kickResume() // resume.go: the record may be behind now
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	if !g.reserve(sub, len(events)) {
		return
	}
	g.beginMessage(sub, seq)
	defer g.clearRedelivered()
	g.stats.events.Add(uint64(len(events)))
	open := false
	n := uint32(len(g.fields))
	for i := range events {
		ev := &events[i]
		idx := ev.ClientHandle - g.base
		if idx >= n || g.fields[idx].flags&(fieldRemoved|fieldEvent) != fieldEvent {
			g.stats.unknownHandles.Add(1)
			continue
		}
		w := g.writerOf(int32(idx))
		sel := w.eventSelect(int32(idx))
		if !open {
			g.beginCycle(seq, true)
			open = true
		}
		w.stats.notifications.Add(1)
		g.touch(w)
		g.beginDSM(w, jsonenc.Event)
		for k := range ev.EventFields {
			if k >= len(sel) || g.skip {
				break
			}
			dv := ua.DataValue{Value: ev.EventFields[k]}
			var err error
			if eventFieldType(sel[k]) == 0 {
				err = g.w.AddFieldAny(sel[k], &dv)
			} else {
				err = g.w.AddField(sel[k], &dv)
			}
			g.check(err, sel[k])
		}
		g.endDSM(w)
	}
	if open {
		g.endCycle()
	}
}

// beginCycle starts writing for notification message seq (track: the
// messages carry it for acknowledgement).
func (g *WriterGroup) beginCycle(seq uint32, track bool) {
	g.seq, g.track = seq, track
	if track {
		g.cycle++
		g.handled(seq)
	}
	g.w = takeWriter(g.wown, &g.wopts)
	now := time.Now()
	g.now = now.UnixNano()
	g.nowDT = ua.NewDateTime(now)
	// One atomic load per cycle: past the lease's deadline nothing of this
	// cycle reaches the queues (publish).
	g.fenced = !g.fence.Open(now)
	g.cur, g.skip = nil, false
	if !g.single {
		g.messageID(track)
		g.check(g.w.Begin(&g.nmHdr), "")
	}
}

func (g *WriterGroup) endCycle() {
	if !g.single {
		g.check(g.w.End(), "")
	}
	putWriter(g.w, g.wown)
	g.w = nil
	g.fenced = false
	g.stats.lastPublish.Store(g.now)
	g.endReplayCycle()
}

// beginDSM opens a DataSetMessage of w (in its own NetworkMessage in the
// single shape).
func (g *WriterGroup) beginDSM(w *writer, typ jsonenc.DataSetMessageType) {
	g.skip = false
	if g.single {
		g.cur = w
		g.messageID(typ != jsonenc.KeepAlive)
		if !g.check(g.w.Begin(&g.nmHdr), "") {
			g.skip = true
			return
		}
	}
	h := &w.hdr
	h.SequenceNumber = w.seq
	if typ != jsonenc.KeepAlive {
		// A keep-alive carries the next expected number (Part 14
		// §7.2.4.5.6); everything else takes one.
		w.seq++
	}
	h.Type = typ
	h.Timestamp = g.nowDT
	h.MetaDataVersion = w.version
	if !g.check(g.w.BeginDataSetMessage(h), "") {
		g.skip = true
		return
	}
	w.lastSent = g.now
	w.lastPublish.Store(g.now)
	w.stats.dataSetMessages.Add(1)
	g.stats.dataSetMessages.Add(1)
	switch typ {
	case jsonenc.KeyFrame:
		w.stats.keyFrames.Add(1)
		g.stats.keyFrames.Add(1)
	case jsonenc.KeepAlive:
		w.stats.keepAlives.Add(1)
		g.stats.keepAlives.Add(1)
	}
}

func (g *WriterGroup) endDSM(w *writer) {
	if !g.skip {
		if g.check(g.w.EndDataSetMessage(), "") && w.hdr.Type != jsonenc.KeepAlive {
			// A DataSetMessage split at MaxMessageSize used one number per
			// part.
			w.seq = g.w.NextSequenceNumber()
			if extra := w.seq - w.hdr.SequenceNumber - 1; extra > w.splitMax && extra < 1<<24 {
				w.splitMax = extra
			}
		}
	}
	g.advanced(w)
	if g.single {
		g.check(g.w.End(), "")
	}
	g.skip = false
}

// addCached writes slot s of w with its cached value into the open
// DataSetMessage.
func (g *WriterGroup) addCached(w *writer, f *field, s int32) {
	if g.skip {
		return
	}
	g.loadValue(f, &g.dv)
	g.addField(w, f, s, &g.dv)
}

// addField writes f, slot s of w, with value dv into the open
// DataSetMessage.
func (g *WriterGroup) addField(w *writer, f *field, s int32, dv *ua.DataValue) {
	if g.skip {
		return
	}
	name := g.nameOf(w, f, s)
	var err error
	switch {
	case g.samples:
		err = g.w.AddFieldNode(name, &g.nodes[s], dv)
	case f.flags&fieldAny != 0:
		err = g.w.AddFieldAny(name, dv)
	default:
		err = g.w.AddField(name, dv)
	}
	g.check(err, name)
}

// check counts and logs an encoding error. A field too large for
// MaxMessageSize is skipped and the writer goes on; any other error stopped
// the JSON writer, which is replaced (what it held of the open message is
// lost, counted), so that one bad value never stops the group. It reports
// whether err was nil.
func (g *WriterGroup) check(err error, what string) bool {
	if err == nil {
		return true
	}
	g.encodeError(err, what)
	if errors.Is(err, jsonenc.ErrFieldTooLarge) && g.w.Err() == nil {
		return false
	}
	g.w.Release()
	g.w = takeWriter(g.wown, &g.wopts)
	g.skip = true
	if !g.single {
		_ = g.w.Begin(&g.nmHdr) // the cycle goes on in the new writer
	}
	return false
}

// encodeError counts err and logs it, at most every 10 s.
func (g *WriterGroup) encodeError(err error, what string) {
	n := g.stats.encodeErrors.Add(1)
	now := time.Now().UnixNano()
	if last := g.lastLog.Load(); now-last >= int64(10*time.Second) && g.lastLog.CompareAndSwap(last, now) {
		g.log.Warn("bridge: encoding failed", "group", g.name, "what", what, "err", err, "errors", n)
	}
}

// sinkData is the NetworkMessageWriter's Sink: every complete message (each
// piece of a split one) becomes one sink.Message.
func (g *WriterGroup) sinkData(msg []byte) error {
	name := ""
	if g.single && g.cur != nil {
		name = g.cur.name
	}
	g.publish(sink.KindData, name, "", msg, g.seq, g.track, false, g.dataQueues(), g.cur)
	return nil
}

// publish copies msg into a pooled sink.Message and hands one reference to
// each queue. With track, the message carries seq to the ack tracker, which
// counts it before any queue can settle it. A full Block queue makes this
// wait (the handler with it: see doc.go).
func (g *WriterGroup) publish(kind sink.Kind, writerName, fieldName string, msg []byte, seq uint32, track, retained bool, queues []sink.Queue, w *writer) {
	if len(queues) == 0 {
		return
	}
	if g.fenced {
		g.dropFenced(seq, track)
		return
	}
	live := g.live && kind == sink.KindData
	for _, q := range queues {
		if r, ok := q.(sink.RoomWaiter); ok && !live {
			r.WaitRoom(len(msg))
		}
	}
	m := sink.NewMessage(len(msg))
	m.SetPayload(msg)
	m.Kind = kind
	m.Live = live
	m.Addr = sink.Addr{Publisher: g.publisher, Group: g.name, Writer: writerName, Field: fieldName}
	m.Retained = retained
	m.Samples = g.samples && kind == sink.KindData
	m.Fence = g.fence
	m.Created = g.now
	if kind != sink.KindData && kind != sink.KindField {
		m.Created = time.Now().UnixNano()
	}
	if track {
		m.Token = uint64(seq)
		if g.tr != nil {
			m.Tracker = g.tr
			g.tr.add(seq)
		}
	}
	if len(queues) > 1 {
		m.Retain(len(queues) - 1)
	}
	g.stats.bytes.Add(uint64(len(msg)))
	for _, q := range queues {
		q.Enqueue(m)
	}
	switch kind {
	case sink.KindField:
		g.stats.fieldMessages.Add(1)
	default:
		g.stats.messages.Add(1)
		if w != nil && writerName != "" {
			w.stats.messages.Add(1)
		}
	}
}

// dropFenced drops a message of a cycle past the lease's deadline. A
// tracked sequence number is held: counted and settled undelivered at
// once, so it is never acknowledged upstream and the next holder of the
// group gets it again from the server.
func (g *WriterGroup) dropFenced(seq uint32, track bool) {
	g.stats.fenced.Add(1)
	if track && g.tr != nil {
		g.tr.add(seq)
		g.tr.Settled(uint64(seq), false)
	}
	now := time.Now().UnixNano()
	if last := g.lastLog.Load(); now-last >= int64(10*time.Second) && g.lastLog.CompareAndSwap(last, now) {
		g.log.Warn("bridge: the lease's deadline has passed; not publishing (another replica may hold the group now)",
			"group", g.name, "fenced", g.stats.fenced.Load())
	}
}

// publishField sends the per-field message of dv, the value just cached
// for slot s of w.
func (g *WriterGroup) publishField(w *writer, s int32, dv *ua.DataValue) {
	name := g.fieldName(w, s)
	e := g.fenc
	e.Truncate()
	if g.fieldDV {
		e.WriteDataValue(dv)
	} else if dv.Status.IsBad() {
		var sv ua.Variant
		sv.SetStatusCode(dv.Status)
		e.WriteVariantBody(&sv)
	} else {
		e.WriteVariantBody(&dv.Value)
	}
	if err := e.Err(); err != nil {
		g.encodeError(err, name)
		e.Reset(nil, jsonenc.Options{Mode: g.headerMode, NamespaceURIs: g.namespaces})
		return
	}
	g.publish(sink.KindField, w.name, name, e.Bytes(), g.seq, g.track, g.fieldKeep, g.fieldQueues(), w)
}

// heartbeatsDue sends, for every writer, one ua-deltaframe with the last
// values of its heartbeat fields that did not change for their heartbeat
// interval. It carries no notification of the server (nothing to
// acknowledge).
func (g *WriterGroup) heartbeatsDue(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || !g.reserve(g.sub, 1) {
		return
	}
	n := now.UnixNano()
	open := false
	for _, w := range g.writers {
		if w.removed || len(w.heartbeats) == 0 {
			continue
		}
		began := false
		for i := range w.heartbeats {
			hb := &w.heartbeats[i]
			f := &g.fields[hb.slot]
			if f.flags&fieldHasValue == 0 {
				continue
			}
			if srv := g.serverTimestamp(f); hb.lastAt == 0 || f.src != hb.seenSrc || srv != hb.seenSrv {
				hb.seenSrc, hb.seenSrv, hb.lastAt = f.src, srv, n
				continue
			}
			if n-hb.lastAt < hb.every {
				continue
			}
			hb.lastAt = n
			if !open {
				g.beginCycle(0, false)
				open = true
			}
			if !began {
				g.beginDSM(w, jsonenc.DeltaFrame)
				began = true
			}
			g.addCached(w, f, hb.slot)
		}
		if began {
			g.endDSM(w)
			w.stats.heartbeats.Add(1)
			g.stats.heartbeats.Add(1)
		}
	}
	if open {
		g.endCycle()
	}
}

// keepAlives sends a ua-keepalive for every writer idle for KeepAlive.
func (g *WriterGroup) keepAlives(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.samples { // the samples format has no keep-alives
		return
	}
	n := now.UnixNano()
	open := false
	for _, w := range g.writers {
		if w.removed || n-w.lastSent < int64(g.keepAlive) {
			continue
		}
		if !open {
			g.beginCycle(0, false)
			g.live, open = true, true
		}
		g.beginDSM(w, jsonenc.KeepAlive)
		g.endDSM(w)
	}
	if open {
		g.endCycle()
		g.live = false
	}
}

// onItemStatus records a monitored item's status (a refusal, or its
// creation on a retry) for the API, and logs it.
func (g *WriterGroup) onItemStatus(_ *client.Subscription, handle uint32, st ua.StatusCode) {
	g.kickResume() // resume.go: the record may be behind now
	g.vmu.Lock()
	idx := handle - g.base
	if idx >= uint32(len(g.fields)) || g.fields[idx].flags&fieldRemoved != 0 {
		g.vmu.Unlock()
		return
	}
	g.setItemStatus(int32(idx), st)
	w := g.writerOf(int32(idx))
	name, wname := g.fieldName(w, int32(idx)), w.name
	g.vmu.Unlock()
	if st.IsBad() {
		g.stats.badItems.Add(1)
		g.log.Warn("bridge: monitored item refused", "group", g.name, "writer", wname, "field", name, "status", st)
	} else {
		g.log.Info("bridge: monitored item created", "group", g.name, "writer", wname, "field", name)
	}
}

// onGap: notification messages were lost for good; the next DataSetMessage
// of every writer is a key frame so that subscribers resynchronise.
func (g *WriterGroup) onGap(_ *client.Subscription, from, to uint32) {
	g.kickResume() // resume.go: the record may be behind now
	g.stats.gaps.Add(1)
	if to == 0 {
		// A new subscription numbers its messages from 1 again: none is a
		// replay.
		g.mu.Lock()
		g.replayOn = false
		g.mu.Unlock()
	}
	if to == 0 {
		// The subscription itself was lost and is made anew: everything
		// after from-1 until its first values (its key frame) is gone.
		g.log.Warn("bridge: notification messages lost: the subscription was gone and is created anew; the next messages are key frames with the current values",
			"group", g.name, "afterSequence", from-1)
	} else {
		g.log.Warn("bridge: notification messages lost", "group", g.name, "from", from, "to", to)
	}
	g.mu.Lock()
	for _, w := range g.writers {
		w.forceKey = true
	}
	g.awaitGap() // backfill.go
	g.mu.Unlock()
}

func (g *WriterGroup) onStatusChange(_ *client.Subscription, st ua.StatusCode) {
	g.kickResume() // resume.go: the record may be behind now
	g.subState.Store(uint32(st))
}
