package client

import (
	"context"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// Gap filling (Republish, OPC UA Part 4 §5.13.6) off the dispatch loop.
//
// When a subscription's messages cannot be delivered as they come (a gap in
// the sequence numbers, or no room under MaxUnacked), the dispatch loop leaves
// them unacknowledged at the server, notes the last number owed (seqState.deferTo)
// and starts a gapJob on a goroutine of the publisher. The job asks the server
// for the missing numbers one after the other with Republish, and hands each
// message it gets to the dispatch loop (gapc), which delivers it like any other
// and answers on the job's reply channel; the job waits for that answer before
// the next Republish, so a subscription's messages are still delivered in
// order, and the loop goes on serving the other subscriptions meanwhile. Lost
// runs (numbers the server no longer has) are reported the same way, before
// the next message.
//
// At most one job runs per subscription; messages of it that arrive meanwhile
// are left at the server too and fetched by the next job (no buffering on our
// side). At most maxConcurrentGapFills jobs of a session talk to the server at
// once (gapSem, which also holds their RepublishResponses). The loop owns the
// subscription's sequence state throughout; a job only reads what it was given.
// Jobs end when the publisher closes (their requests are cancelled) and are
// waited for by close.

// maxConcurrentGapFills bounds the gap fills of a session that run at once.
const maxConcurrentGapFills = 2

type gapKind uint8

const (
	gapDeliver gapKind = iota // msg is message seq: deliver it
	gapLost                   // from..to (n numbers) are lost
	gapEnd                    // the job is over
)

// gapEvent is what a job asks of the dispatch loop.
type gapEvent struct {
	j        *gapJob
	kind     gapKind
	seq      uint32
	msg      *ua.NotificationMessage // gapDeliver: the job's, valid until the reply
	from, to uint32                  // gapLost
	n        uint32
	fatal    bool // gapEnd: the session failed; the rest is found again later
	stopped  bool // gapEnd: no room; the rest waits for acknowledgements
}

// gapJob fills one gap of one subscription.
type gapJob struct {
	p     *publisher
	c     *Client
	sub   *Subscription
	epoch uint64 // the sequence state it belongs to
	id    uint32 // the subscription's server id
	from  uint32
	to    uint32
	all   bool     // try every number (the server's list is not known)
	avail []uint32 // the numbers the server said it has (when !all)
	reply chan bool
}

// newGap makes a job for the messages sub is owed; dispatch loop only.
func (p *publisher) newGap(c *Client, sub *Subscription, st *seqState) *gapJob {
	return &gapJob{
		p: p, c: c, sub: sub, epoch: st.epoch, id: sub.id.Load(),
		from: seqNext(st.last), to: st.deferTo, reply: make(chan bool, 1),
	}
}

// startGap runs j; dispatch loop only.
func (p *publisher) startGap(j *gapJob) {
	st := &j.sub.seq
	st.gap = j
	st.deferred = false // j covers it; later arrivals set it again
	p.gaps++
	p.gapWG.Add(1)
	go p.runGap(j)
}

func (p *publisher) runGap(j *gapJob) {
	defer p.gapWG.Done()
	var rep *ua.RepublishResponse
	select {
	case rep = <-p.gapSem:
	case <-p.done:
		return
	}
	defer func() { p.gapSem <- rep }()
	fatal, stopped := j.fill(rep)
	p.toLoop(gapEvent{j: j, kind: gapEnd, fatal: fatal, stopped: stopped})
}

// toLoop hands ev to the dispatch loop; false when it has ended.
func (p *publisher) toLoop(ev gapEvent) bool {
	select {
	case p.gapc <- ev:
		return true
	case <-p.done:
		return false
	}
}

// ask hands ev to the loop and waits for its answer.
func (p *publisher) ask(ev gapEvent) bool {
	if !p.toLoop(ev) {
		return false
	}
	select {
	case ok := <-ev.j.reply:
		return ok
	case <-p.done:
		return false
	}
}

// fill republishes from..to, in order. fatal: a Republish failed for another
// reason than the message being gone (the session or its channel, most
// likely); stopped: the loop refused a message (no room, or the job is stale).
func (j *gapJob) fill(rep *ua.RepublishResponse) (fatal, stopped bool) {
	p := j.p
	span := seqDist(j.from, j.to)
	var av []uint32
	if !j.all {
		for _, a := range j.avail {
			if seqDist(j.from, a) <= span && (a == j.from || seqAfter(a, j.from)) {
				av = append(av, a)
			}
		}
		for i := 1; i < len(av); i++ { // insertion sort by distance from `from`; lists are short and mostly sorted
			for k := i; k > 0 && seqDist(j.from, av[k]) <= seqDist(j.from, av[k-1]); k-- {
				av[k], av[k-1] = av[k-1], av[k]
			}
		}
		// Drop repeats (the number we saw may be in the server's list too).
		k := 0
		for i, a := range av {
			if i == 0 || a != av[k-1] {
				av[k] = a
				k++
			}
		}
		av = av[:k]
	}
	var lost gapRun
	flush := func() bool {
		if lost.n == 0 {
			return true
		}
		ok := p.ask(gapEvent{j: j, kind: gapLost, from: lost.from, to: lost.to, n: lost.n})
		lost = gapRun{}
		return ok
	}
	cursor := j.from
	inRange := func(a uint32) bool { return a == j.to || seqAfter(j.to, a) }
	tried := 0
	for i := 0; ; i++ {
		var a uint32
		if j.all {
			if !inRange(cursor) {
				break
			}
			a = cursor
		} else {
			if i == len(av) {
				break
			}
			a = av[i]
		}
		if a != cursor {
			lost.add(cursor, seqPrev(a))
		}
		if tried >= maxRepublishPerGap {
			if j.all {
				lost.add(a, j.to)
				cursor = seqNext(j.to)
				break
			}
			lost.add(a, a)
			cursor = seqNext(a)
			continue
		}
		tried++
		cursor = seqNext(a)
		ok, failed := j.republish(rep, a)
		if failed {
			flush()
			return true, false
		}
		if !ok {
			lost.add(a, a)
			continue
		}
		if !flush() {
			rep.Release()
			return false, true
		}
		more := p.ask(gapEvent{j: j, kind: gapDeliver, seq: a, msg: &rep.NotificationMessage})
		rep.Release()
		if !more {
			return false, true
		}
	}
	if inRange(cursor) {
		lost.add(cursor, j.to)
	}
	if !flush() {
		return false, true
	}
	return false, false
}

// republish asks the server for message seq into rep. ok: rep holds it;
// fatal: the request failed for another reason than the message being gone.
func (j *gapJob) republish(rep *ua.RepublishResponse, seq uint32) (ok, fatal bool) {
	p := j.p
	ctx, cancel := context.WithTimeout(p.gapCtx, p.reqTimeout)
	defer cancel()
	req := ua.RepublishRequest{SubscriptionID: j.id, RetransmitSequenceNumber: seq}
	start := time.Now()
	_, err := j.c.Send(ctx, &req, rep)
	if err != nil {
		rep.Release()
		if errorsIsAny(err, ua.StatusBadMessageNotAvailable, ua.StatusBadSequenceNumberUnknown, ua.StatusBadSubscriptionIdInvalid) {
			return false, false
		}
		p.log.Debug("client: Republish failed", "subscription", req.SubscriptionID, "seq", seq, "err", err)
		return false, true
	}
	p.observeRTT(time.Since(start))
	return true, false
}

// onGap handles what a job asks; dispatch loop only.
func (p *publisher) onGap(ev gapEvent) {
	j := ev.j
	sub := j.sub
	st := sub.syncSeq()
	current := st.gap == j && st.epoch == j.epoch
	switch ev.kind {
	case gapLost:
		if current {
			g := gapRun{from: ev.from, to: ev.to, n: ev.n}
			p.reportGap(sub, &g)
			st.last = ev.to
		}
		j.reply <- current
	case gapDeliver:
		if !current || sub.room() == 0 {
			j.reply <- false
			return
		}
		sub.stats.republished.Add(1)
		p.deliver(j.c, sub, ev.seq, ev.msg, false)
		st.last = ev.seq
		// No room for the next one: stop before fetching it.
		j.reply <- sub.room() > 0
	case gapEnd:
		p.gaps--
		if !current {
			return
		}
		st.gap = nil
		switch {
		case ev.fatal || ev.stopped:
			// What is left stays owed: fetched once there is room, or on the
			// session the recovery brings (bind resumes), or when the next
			// message shows the gap again.
			if !st.deferred || seqAfter(j.to, st.deferTo) {
				st.deferTo = j.to
			}
			st.deferred = seqAfter(st.deferTo, st.last)
			if ev.stopped {
				p.resume(sub)
			}
		default:
			if seqAfter(j.to, st.last) {
				st.last = j.to
			}
			p.resume(sub)
		}
	}
}

// gapRun is a run of lost sequence numbers being collected.
type gapRun struct {
	from, to uint32
	n        uint32 // numbers in the run; 0: empty
}

func (g *gapRun) add(from, to uint32) {
	if g.n > 0 && from == seqNext(g.to) {
		g.to = to
		g.n += seqDist(from, to) + 1
		return
	}
	g.from, g.to, g.n = from, to, seqDist(from, to)+1
}

func (p *publisher) reportGap(sub *Subscription, g *gapRun) {
	sub.trimResumeHole(g) // resume.go
	if g.n == 0 {
		return
	}
	sub.stats.lost.Add(uint64(g.n))
	p.log.Warn("client: notifications lost", "subscription", sub.id.Load(), "from", g.from, "to", g.to)
	if sub.cfg.OnGap != nil {
		sub.cfg.OnGap(sub, g.from, g.to)
	}
	*g = gapRun{}
}
