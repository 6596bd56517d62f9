package bridge

import (
	"context"
	"encoding/hex"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/uagate/gateway/bridge/resume"
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
	switch {
	case err != nil:
		g.log.Warn("bridge: reading the resume state failed; subscribing anew", "group", g.name, "err", err)
		return nil
	case !ok:
		return nil
	case rec.Fingerprint != fp:
		g.log.Info("bridge: the resume state is for other items; subscribing anew", "group", g.name)
		return nil
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

// saveResume saves the subscription's state when it changed since the last
// save (or always, with force); it returns whether it saved. The check is
// the client's ResumeMark, which copies nothing; the state, a list of every
// item, is built only to be saved and not kept.
func (g *WriterGroup) saveResume(sub *client.Subscription, force bool) bool {
	mark, ok := sub.ResumeMark()
	if !ok || !force && mark == g.saved {
		return false
	}
	var st client.ResumeState
	if g.savedItems != nil && mark.SubscriptionID == g.saved.SubscriptionID && mark.Items == g.saved.Items {
		// Only LastAcked moved: the list saved last time is still true.
		st = client.ResumeState{SubscriptionID: mark.SubscriptionID, Items: g.savedItems, LastAcked: mark.LastAcked}
	} else if st, ok = sub.ResumeState(); !ok {
		return false
	}
	rec := resume.Record{Fingerprint: g.fingerprint, ServerStart: g.serverStart, State: st, Saved: time.Now()}
	if err := g.resume.SaveResume(g.name, rec); err != nil {
		if time.Since(time.Unix(0, g.lastLog.Load())) > 10*time.Second {
			g.lastLog.Store(time.Now().UnixNano())
			g.log.Warn("bridge: saving the resume state failed", "group", g.name, "err", err)
		}
		return false
	}
	// The mark taken before the state: a change in between saves once more.
	g.saved = mark
	if g.tr != nil {
		// At least once, LastAcked moves with every acknowledgement: the
		// list is kept for the next saves rather than built each second.
		g.savedItems = st.Items
	}
	return true
}

// resumeLoop saves the resume record every interval while it changes; at
// the end once more, so a graceful stop leaves the latest state.
func (g *WriterGroup) resumeLoop(ctx context.Context, sub *client.Subscription, every time.Duration) {
	defer g.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.saveResume(sub, false)
		}
	}
}

// markRedelivered notes, for the message being written, whether the client
// redelivers it after a resume; g.mu held.
func (g *WriterGroup) markRedelivered(sub *client.Subscription) {
	if sub != nil && sub.Redelivered() {
		g.redeliver = true
		g.stats.redelivered.Add(1)
	}
}

func (g *WriterGroup) clearRedelivered() { g.redeliver = false }

// messageID sets the MessageId of the next NetworkMessage: generated by the
// writer, or, for redelivered data (a recovery, not the steady state), one
// that says so.
func (g *WriterGroup) messageID(data bool) {
	if g.redeliver && data {
		g.nmHdr.MessageID = RedeliveredPrefix + g.nmHdr.MessageIDPrefix + newMessageID()
		return
	}
	g.nmHdr.MessageID = ""
}
