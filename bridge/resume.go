package bridge

import (
	"context"
	"encoding/hex"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/uagate/gateway/bridge/resume"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/ua"
)

// Restart without loss (and takeover by another replica).
//
// A writer group with a resume.Store (Options.Resume) keeps there what it
// takes to resume its subscription: the client's ResumeState (subscription
// id, the monitored items' server ids by client handle, the last
// acknowledged sequence number) and a fingerprint of the items it asked for,
// in order (node, attribute, index range, monitoring options). It saves the
// record once its items are created and then every ResumeInterval when it
// changed: never per notification. At Start a record with the same
// fingerprint becomes SubscriptionConfig.Resume: the client transfers the
// subscription to the new session, the items keep their server ids, and what
// the server kept unacknowledged is republished. Those redelivered messages
// may carry data the sinks had before the process ended (at-least-once): the
// group counts them (GroupStats.Redelivered) and marks their NetworkMessages
// with a MessageId that starts with RedeliveredPrefix, so a consumer can tell
// a possible duplicate. When the server no longer has the subscription it is
// created anew and the client reports the gap (GroupStats.Gaps); the next
// DataSetMessage of every writer is a key frame with the current values. A
// record whose fingerprint differs (the configuration changed) is ignored:
// handles would name other nodes.

// RedeliveredPrefix starts the MessageId of a NetworkMessage that carries
// notifications republished after a resume (possible duplicates).
const RedeliveredPrefix = "redelivered-"

// DefaultResumeInterval is how often a changed resume record is saved.
const DefaultResumeInterval = time.Second

// itemsFingerprint names the items reqs ask for, in order.
func itemsFingerprint(reqs []client.ItemRequest, defaults *client.ItemOptions) string {
	h := fnv.New128a()
	var b []byte
	for i := range reqs {
		r := &reqs[i]
		b = b[:0]
		if !r.Node.IsNull() {
			b = append(b, r.Node.String()...)
		} else {
			b = append(b, r.NodeID.String()...)
		}
		b = append(b, '|')
		b = strconv.AppendUint(b, uint64(r.AttributeID), 10)
		b = append(b, '|')
		b = append(b, r.IndexRange...)
		o := r.Options
		if o == nil {
			o = defaults
		}
		if o != nil {
			b = append(b, '|')
			b = strconv.AppendInt(b, int64(o.SamplingInterval), 10)
			b = append(b, '|')
			b = strconv.AppendUint(b, uint64(o.QueueSize), 10)
			b = strconv.AppendBool(b, o.DiscardNewest)
			b = strconv.AppendUint(b, uint64(o.Mode), 10)
			b = strconv.AppendBool(b, o.Event != nil)
			if f := o.DataChange; f != nil {
				b = strconv.AppendUint(b, uint64(f.Trigger), 10)
				b = strconv.AppendUint(b, uint64(f.DeadbandType), 10)
				b = strconv.AppendFloat(b, f.DeadbandValue, 'g', -1, 64)
			}
		}
		b = append(b, '\n')
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// serverStart reads the server's StartTime; 0 when it cannot.
func serverStart(ctx context.Context, c *client.Client) int64 {
	dvs, err := c.ReadValues(ctx, ua.NewNumericNodeID(0, ua.ID_Server_ServerStatus_StartTime))
	if err != nil || len(dvs) != 1 || dvs[0].Status.IsBad() || dvs[0].Value.Type() != ua.TypeDateTime {
		return 0
	}
	return int64(dvs[0].Value.DateTime())
}

// loadResume returns the resume state for items of fingerprint fp, nil when
// there is none that fits. A record for a server that restarted since
// reports the loss (OnGap(LastAcked+1, 0), the subscription is made anew).
func (g *WriterGroup) loadResume(fp string) *client.ResumeState {
	if g.resume == nil {
		return nil
	}
	rec, ok, err := g.resume.LoadResume(g.name)
	// The marks tell where the group stopped when the last record was saved
	// beside them (or there is none): not when another replica held the
	// group since.
	g.marksOwn = g.marks != nil && (!ok || rec.Marks == g.marks.PreviousRecord())
	if ok && err == nil {
		g.continueWriters(&rec)
		if g.resumeShared && !g.marksOwn {
			g.sharedHanded = rec.Handed
		}
	}
	switch {
	case err != nil:
		g.log.Warn("bridge: reading the resume state failed; subscribing anew", "group", g.name, "err", err)
		return nil
	case !ok:
		return nil
	case rec.Fingerprint != fp:
		g.log.Info("bridge: the resume state is for other items; subscribing anew", "group", g.name)
		return nil
	}
	// The same items in the same slots: the last run's times name them.
	g.prevTimes = g.times
	g.mu.Lock()
	g.resendCheck = g.times != nil
	g.mu.Unlock()
	switch {
	case rec.State.SubscriptionID == 0:
		return nil
	case rec.ServerStart != 0 && g.serverStart != 0 && rec.ServerStart != g.serverStart:
		g.log.Info("bridge: the server restarted since the resume state was saved; subscribing anew", "group", g.name)
		last := rec.State.LastAcked
		g.onGap(nil, last+1, 0)
		return nil
	}
	g.log.Info("bridge: resuming the subscription", "group", g.name, "subscription", rec.State.SubscriptionID,
		"items", len(rec.State.Items), "lastAcked", rec.State.LastAcked, "saved", rec.Saved)
	st := rec.State
	return &st
}

// lastAckedEvery paces the saves of a group's own record (not a shared
// one) whose only change is LastAcked: one a second was a file written,
// fsynced and renamed each second at any rate (~1.5 ms of CPU a second).
const lastAckedEvery = 10 * time.Second

// saveResume saves the subscription's state when it changed since the last
// save (or always, with force); it returns whether it saved. The check is
// the client's ResumeMark, which copies nothing; the state, a list of every
// item, is built only to be saved and not kept.
func (g *WriterGroup) saveResume(sub *client.Subscription, force bool) bool {
	g.saveMu.Lock()
	defer g.saveMu.Unlock()
	mark, ok := sub.ResumeMark()
	if !ok {
		return false
	}
	// A shared record carries the writers' SequenceNumbers: it is saved
	// when they moved too.
	dsms := g.stats.dataSetMessages.Load()
	if !force && mark == g.saved && (!g.resumeShared || dsms == g.savedDSMs) {
		return false
	}
	if !force && !g.resumeShared && !g.recordAt.IsZero() && mark.SubscriptionID == g.saved.SubscriptionID &&
		mark.Items == g.saved.Items && time.Since(g.recordAt) < g.ackedEvery {
		// Only LastAcked moved (every publish response, at least once):
		// the record written at most every lastAckedEvery is enough, since
		// a resume reads what was acknowledged from the server's first
		// response (the numbers below the first it still has) and an
		// older LastAcked only widens the range a lost subscription
		// reports. The marks, which the writers' SequenceNumbers depend
		// on, are synced as every interval.
		g.syncMarks()
		return false
	}
	g.savedDSMs = dsms
	var st client.ResumeState
	if g.savedItems != nil && mark.SubscriptionID == g.saved.SubscriptionID && mark.Items == g.saved.Items {
		// Only LastAcked moved: the list saved last time is still true.
		st = client.ResumeState{SubscriptionID: mark.SubscriptionID, Items: g.savedItems, LastAcked: mark.LastAcked}
	} else if st, ok = sub.ResumeState(); !ok {
		return false
	}
	now := time.Now()
	ws, held := g.reservedWriters(now)
	rec := resume.Record{Fingerprint: g.fingerprint, ServerStart: g.serverStart, State: st, Saved: now, Writers: ws}
	if g.marks != nil {
		rec.Marks = g.instance
	}
	if h := g.handedAt.Load(); g.resumeShared && uint32(h>>32) == st.SubscriptionID {
		rec.Handed = uint32(h)
	}
	if err := g.storeResume(rec, force); err != nil {
		if time.Since(time.Unix(0, g.lastLog.Load())) > 10*time.Second {
			g.lastLog.Store(time.Now().UnixNano())
			g.log.Warn("bridge: saving the resume state failed", "group", g.name, "err", err)
		}
		return false
	}
	// Saved: the writers may use what it reserved.
	for i, w := range held {
		w.reserved.Store(1<<32 | uint64(ws[i].Seq))
	}
	// The mark taken before the state: a change in between saves once more.
	g.saved, g.recordAt = mark, now
	if g.marks != nil {
		g.marks.SetRecord(g.instance)
	}
	g.syncMarks()
	if g.tr != nil || g.resumeShared {
		// At least once, LastAcked moves with every acknowledgement (and a
		// shared record with every DataSetMessage): the list is kept for
		// the next saves rather than built each second.
		g.savedItems = st.Items
	}
	return true
}

// syncMarks makes the group's marks durable (none: nothing); a failure is
// logged, and the next save tries again.
func (g *WriterGroup) syncMarks() {
	if g.marks == nil {
		return
	}
	if err := g.marks.Sync(); err != nil {
		g.log.Debug("bridge: syncing the marks", "group", g.name, "err", err)
	}
}

// resumeLoop saves the resume record every interval while it changes; at
// the end once more, so a graceful stop leaves the latest state.
//
// A group at rest changes nothing the record holds, and the loop then
// sleeps without a timer until kickResume: a notification message, an
// item's status, a gap or the subscription's status (onDataChange …), or
// an acknowledgement upstream (ackTracker.onAcked); each costs the hot path
// one atomic load while the loop is awake. A shared record (scale-out)
// reserves SequenceNumbers for the time until its next save: it is saved
// every interval, rest or not.
func (g *WriterGroup) resumeLoop(ctx context.Context, sub *client.Subscription, every time.Duration) {
	defer g.wg.Done()
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		g.saveResume(sub, false)
		if !g.resumeShared {
			// Rest first, then look: a change after the look kicks.
			g.resumeRest.Store(true)
			if g.resumeDue(sub) {
				g.resumeRest.Store(false)
			} else {
				select {
				case <-ctx.Done():
					return
				case <-g.resumeKick:
				}
			}
		}
		t.Reset(every)
	}
}

// kickResume wakes the resume loop if it rests (resumeLoop).
func (g *WriterGroup) kickResume() {
	if g.resumeRest.Load() && g.resumeRest.CompareAndSwap(true, false) {
		select {
		case g.resumeKick <- struct{}{}:
		default:
		}
	}
}

// resumeDue reports whether the record saved last is behind the
// subscription's state (a save was put off: lastAckedEvery).
func (g *WriterGroup) resumeDue(sub *client.Subscription) bool {
	mark, ok := sub.ResumeMark()
	if !ok {
		return false
	}
	g.saveMu.Lock()
	defer g.saveMu.Unlock()
	return mark != g.saved
}

// Marks (Options.MarksDir, resume.Marks): the record above is written once
// a second, so alone it cannot tell exactly where the last run stopped.
// The marks can, at the cost of a few stores into a mapped file per
// notification message: the writers' SequenceNumbers, the last
// notification message handed to the queues, and, with at-least-once
// sinks, where each writer's DataSetMessages of the recent messages began.
// A restart then
//
//   - goes on with every writer's SequenceNumbers (never one used twice;
//     after a subscription created anew too);
//   - when it resumed the subscription the marks speak of, takes every
//     message the server republishes up to the last one handed to the
//     queues for a replay: it goes to the at-least-once queues only (the
//     at-most-once ones had it), marked redelivered, its DataSetMessages
//     written with the SequenceNumbers they had the first time, so that a
//     consumer tells the duplicates by (DataSetWriterId, SequenceNumber);
//     the writers then go on where they were. Messages after it are new
//     to every sink and go to all queues unmarked.
//
// Without marks (no state directory, or a subscription other than the one
// they speak of), what the client says it republished after a resume is
// marked and goes to every queue, as the record alone allows.

// openMarks opens the group's marks in dir ("" none) for writers writers;
// a failure is logged and the group goes on without them.
func (g *WriterGroup) openMarks(dir string, writers int) {
	if dir == "" {
		return
	}
	ring := 0
	if g.tr != nil {
		// The notification messages a replay can hold: those not yet
		// acknowledged, and a few whose acknowledgement was still to be sent.
		ring = g.maxUnacked + 16
	}
	m, err := resume.OpenMarks(dir, g.name, writers, ring)
	if err != nil {
		g.log.Warn("bridge: the marks file cannot be used; SequenceNumbers start at 1 and a replay goes to every sink", "group", g.name, "err", err)
		return
	}
	g.marks = m
}

// markWriter gives w its slot in the marks and goes on from the
// SequenceNumber it holds (appendWriter).
func (g *WriterGroup) markWriter(w *writer) {
	if g.marks == nil {
		return
	}
	i, wm, err := g.marks.Slot(w.name)
	if err != nil {
		g.log.Warn("bridge: writer without marks", "group", g.name, "writer", w.name, "err", err)
		return
	}
	w.mark = int32(i)
	if wm.Seq != 0 {
		w.seq, w.frames = wm.Seq, wm.Frames
	}
	w.hi, w.framesHi = w.seq, w.frames
	g.marks.SetWriter(i, resume.WriterMark{Seq: w.hi, Frames: w.framesHi})
}

// storeResume saves rec. Forced (the writers' reservation before they use
// it, the first record of a start) into a DurableStore, it returns once the
// record is where a successor reads it, within durableWait or until Stop.
func (g *WriterGroup) storeResume(rec resume.Record, force bool) error {
	if ds, ok := g.resume.(resume.DurableStore); ok && force {
		ctx, cancel := context.WithTimeout(context.Background(), durableWait)
		defer cancel()
		go func() { // Stop does not wait for it
			select {
			case <-g.quit:
				cancel()
			case <-ctx.Done():
			}
		}()
		return ds.SaveResumeNow(ctx, g.name, rec)
	}
	return g.resume.SaveResume(g.name, rec)
}

// durableWait bounds a forced save into a DurableStore; reserve tries again
// (the messages wait) until it succeeds or the group stops.
const durableWait = 5 * time.Second

// reservedWriters are the writers' continuation points for a shared
// record (Options.ResumeShared; nil otherwise), and the writers they are
// of: each writer's next SequenceNumber, plus what it may still write until
// its holder stops: twice its rate over the last interval, or one
// DataSetMessage per publishing interval if more, for the save interval
// and the lease horizon, and what a writer asked for at once (reserve).
// A writer never goes beyond its last saved reservation (reserve): a
// successor that goes on from it uses no number twice. Under saveMu.
func (g *WriterGroup) reservedWriters(now time.Time) ([]resume.WriterSeq, []*writer) {
	if !g.resumeShared || g.marks == nil {
		return nil, nil
	}
	elapsed := now.Sub(g.savedAt)
	if g.savedAt.IsZero() || elapsed <= 0 {
		elapsed = g.resumeEvery
	}
	g.savedAt = now
	span := g.resumeEvery + g.resumeHorizon
	window := float64(span) / float64(elapsed)
	floor := uint64(2 * span / max(g.interval, 10*time.Millisecond))
	need := uint64(g.reserveNeed.Load())
	ws := *g.snapshot.Load()
	out := make([]resume.WriterSeq, 0, len(ws))
	held := make([]*writer, 0, len(ws))
	for _, w := range ws {
		if w.mark < 0 {
			continue
		}
		wm := g.marks.Writer(int(w.mark))
		n := w.stats.dataSetMessages.Load()
		ahead := max(uint64(2*float64(n-w.savedDSMs)*window), floor) + reserveSlack + need
		w.savedDSMs = n
		out = append(out, resume.WriterSeq{Name: w.name, Seq: wm.Seq + uint32(min(ahead, 1<<30)), Frames: wm.Frames})
		held = append(held, w)
	}
	return out, held
}

// reserve makes sure, with a shared record, that every writer may take n
// more SequenceNumbers (and what a split DataSetMessage takes) within the
// reservation its holder last saved; when one may not, it saves the record
// now (sub's state) and, while that fails, tries again until Stop. False
// when Stop came first: the message is not to be written (nor, at least
// once, acknowledged: the server keeps it for the next holder). A record
// saved every second reserves far more than a second's numbers, so this
// saves only when a holder starts, or its rate jumps. g.mu held; it is
// released while saving.
func (g *WriterGroup) reserve(sub *client.Subscription, n int) bool {
	if !g.resumeShared || g.marks == nil {
		return true
	}
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		need, short := g.shortOf(uint32(min(n, 1<<24)))
		if !short {
			return true
		}
		if need > g.reserveNeed.Load() {
			g.reserveNeed.Store(need)
		}
		g.mu.Unlock()
		saved := sub != nil && g.saveResume(sub, true)
		if !saved {
			g.reserveHeld.Add(1)
			t := time.NewTimer(wait)
			select {
			case <-g.quit:
			case <-t.C:
			}
			t.Stop()
		}
		g.mu.Lock()
		select {
		case <-g.quit:
			g.abandoned.Store(true)
			return false
		default:
		}
		if g.closed {
			return false
		}
	}
}

// shortOf reports whether a writer's reservation does not cover n more
// numbers, and the most any writer needs for that; g.mu held.
func (g *WriterGroup) shortOf(n uint32) (need uint32, short bool) {
	for _, w := range g.writers {
		if w.removed || w.mark < 0 {
			continue
		}
		k := n + 2 + w.splitMax
		need = max(need, k)
		r := w.reserved.Load()
		if r == 0 || seqAfter(w.hi+k, uint32(r)) {
			short = true
		}
	}
	return need, short
}

// reserveSlack is what a shared record reserves beyond its estimate.
const reserveSlack = 16

// continueWriters goes on, in a writer whose marks do not know better,
// from the SequenceNumber a shared record reserved (a takeover from another
// replica); a restart that finds the marks the record was saved beside
// goes on from them. Start, before the subscription exists.
func (g *WriterGroup) continueWriters(rec *resume.Record) {
	if len(rec.Writers) == 0 || g.marksOwn {
		return
	}
	by := make(map[string]resume.WriterSeq, len(rec.Writers))
	for _, ws := range rec.Writers {
		by[ws.Name] = ws
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.writers {
		ws, ok := by[w.name]
		if !ok || w.removed || !seqAfter(ws.Seq, w.hi) {
			continue
		}
		g.log.Info("bridge: SequenceNumbers go on from the shared resume record", "group", g.name, "writer", w.name, "from", w.hi, "to", ws.Seq)
		w.seq, w.hi = ws.Seq, ws.Seq
		w.frames, w.framesHi = max(w.frames, ws.Frames), max(w.framesHi, ws.Frames)
		if w.mark >= 0 {
			g.marks.SetWriter(int(w.mark), resume.WriterMark{Seq: w.hi, Frames: w.framesHi})
		}
	}
}

// replayFrom arms the replay of a resumed subscription (Start, before it
// is created): what the server republishes up to the last message the
// marks say was handed to the queues.
func (g *WriterGroup) replayFrom(st *client.ResumeState) {
	if st != nil && g.resumeShared && !g.marksOwn && g.sharedHanded != 0 {
		// A takeover: what the last holder had handed over when it last
		// saved the record goes to the at-least-once queues only, with
		// new SequenceNumbers; what the server republishes after it
		// (handed over since, or not) is marked as the client says.
		g.mu.Lock()
		g.replayOn, g.replayTo, g.replayRing = true, g.sharedHanded, false
		g.mu.Unlock()
		return
	}
	if g.marks == nil || st == nil || !g.marksOwn {
		return
	}
	sub, handled, ok := g.marks.Previous()
	if !ok || sub != st.SubscriptionID || handled == 0 {
		return
	}
	g.mu.Lock()
	g.replayKnown, g.replayOn, g.replayTo, g.replayRing = true, true, handled, true
	g.mu.Unlock()
}

// beginMessage notes, for notification message seq of sub about to be
// written, whether it is a replay (the marks), or else redelivered after a
// resume (the client), and records it as handled; g.mu held.
func (g *WriterGroup) beginMessage(sub *client.Subscription, seq uint32) {
	g.replaying = false
	g.redeliver = false
	if sub == nil { // tests drive the handlers without one
		return
	}
	g.subID = sub.ID()
	if g.replayOn {
		if seqAfter(seq, g.replayTo) {
			g.replayOn = false
		} else {
			g.replaying = true
		}
	}
	if g.replaying || !g.replayKnown && sub.Redelivered() {
		g.redeliver = true
		g.stats.redelivered.Add(1)
	}
}

func (g *WriterGroup) clearRedelivered() { g.redeliver, g.replaying = false, false }

// handled records, before anything of notification message seq reaches a
// queue, that it is handed over: a process killed in the middle of it does
// not send it again to an at-most-once sink. A replay moves nothing.
func (g *WriterGroup) handled(seq uint32) {
	if g.replaying {
		return
	}
	if g.marks != nil {
		g.marks.SetHandled(g.subID, seq)
	}
	if g.resumeShared {
		g.handedAt.Store(uint64(g.subID)<<32 | uint64(seq))
	}
}

// touch is called before w's first DataSetMessage of a notification
// message: in a replay it sets w's SequenceNumber back to what it was for
// that message the first time; it records where w begins for a later
// replay. g.mu held.
func (g *WriterGroup) touch(w *writer) {
	if !g.track || w.cycle == g.cycle || w.mark < 0 {
		return
	}
	w.cycle = g.cycle
	if g.replaying && g.replayRing {
		if rm, ok := g.marks.PreviousRing(w.name, g.seq); ok {
			w.seq, w.frames, w.rewound = rm.Seq, rm.Frames, true
			g.rewound = true
		}
	}
	g.marks.SetRing(int(w.mark), g.seq, resume.RingMark{Seq: w.seq, Frames: w.frames})
}

// advanced records w's SequenceNumber after a DataSetMessage; g.mu held.
func (g *WriterGroup) advanced(w *writer) {
	if seqAfter(w.seq, w.hi) {
		w.hi = w.seq
	}
	w.framesHi = max(w.framesHi, w.frames)
	if w.mark >= 0 {
		g.marks.SetWriter(int(w.mark), resume.WriterMark{Seq: w.hi, Frames: w.framesHi})
	}
}

// endReplayCycle puts the writers a replay set back where they were; g.mu
// held.
func (g *WriterGroup) endReplayCycle() {
	if !g.rewound {
		return
	}
	g.rewound = false
	for _, w := range g.writers {
		if w.rewound {
			w.seq, w.frames, w.rewound = w.hi, w.framesHi, false
		}
	}
}

// dataQueues are the queues the message being written goes to: the
// at-least-once ones in a replay, all of them otherwise.
func (g *WriterGroup) dataQueues() []sink.Queue {
	if g.replaying {
		return g.aloQueues
	}
	return g.queues
}

func (g *WriterGroup) fieldQueues() []sink.Queue {
	if g.replaying {
		return g.aloFQueues
	}
	return g.fqueues
}

// closeMarks syncs and releases the marks (Stop, g.mu held).
func (g *WriterGroup) closeMarks() {
	if g.marks == nil {
		return
	}
	if err := g.marks.Close(); err != nil {
		g.log.Warn("bridge: closing the marks file", "group", g.name, "err", err)
	}
	g.marks = nil
}

// seqAfter reports whether sequence number a comes after b, allowing for
// the wrap-around (a is less than 2^31 ahead).
func seqAfter(a, b uint32) bool { return int32(a-b) > 0 }

// messageID sets the MessageId of the next NetworkMessage: generated by the
// writer, or, for redelivered data (a recovery, not the steady state), one
// that says so.
func (g *WriterGroup) messageID(data bool) {
	if g.redeliver && data {
		g.nmHdr.MessageID = RedeliveredPrefix + g.nmHdr.MessageIDPrefix + newMessageID()
		return
	}
	if g.backfilling && data {
		g.nmHdr.MessageID = BackfillPrefix + newMessageID()
		return
	}
	g.nmHdr.MessageID = ""
}
