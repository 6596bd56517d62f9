package uasc

import (
	"time"

	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/ua"
)

// pendingKind tells what a pending request waits for.
type pendingKind uint8

const (
	kindMessage pendingKind = iota // a service request (MSG)
	kindOpen                       // an OpenSecureChannel renewal (OPN)
)

// pending is a request waiting for its response. Pending requests are pooled; the
// one who takes one out of the registry (the reader with the response, the timer
// with a timeout, the channel's end) completes it, exactly once.
type pending struct {
	pooling.Header
	id       uint32
	kind     pendingKind
	resp     ua.Structure              // decoded into when of the response's type
	done     func(ua.Structure, error) // asynchronous requests
	ready    chan struct{}             // synchronous requests; kept across reuse
	out      ua.Structure              // result of a synchronous request
	err      error
	deadline int64 // Unix nanoseconds
	hidx     int   // index in the deadline heap
	nonce    []byte
}

var pendings = pooling.NewPool[pending](0, func(p *pending) {
	ready := p.ready
	*p = pending{ready: ready}
})

func init() { pooling.Register("uasc.pending", pendings) }

func getPending(kind pendingKind) *pending {
	p := pendings.Get()
	p.kind = kind
	if p.ready == nil {
		p.ready = make(chan struct{}, 1)
	}
	return p
}

// deadlineHeap is a min-heap of pending requests by deadline, so that one timer
// serves all of them: no goroutine and no timer per request.
type deadlineHeap []*pending

func (h *deadlineHeap) push(p *pending) {
	p.hidx = len(*h)
	*h = append(*h, p)
	h.up(p.hidx)
}

func (h *deadlineHeap) remove(i int) {
	s := *h
	n := len(s) - 1
	if i != n {
		s.swap(i, n)
	}
	s[n].hidx = -1
	s[n] = nil
	*h = s[:n]
	if i != n {
		if !h.down(i) {
			h.up(i)
		}
	}
}

func (h deadlineHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}

func (h deadlineHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if h[parent].deadline <= h[i].deadline {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

func (h deadlineHeap) down(i int) bool {
	start := i
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h[r].deadline < h[l].deadline {
			j = r
		}
		if h[i].deadline <= h[j].deadline {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > start
}

// registry holds a client channel's pending requests by request id, with their
// deadlines. All methods are called with Channel.mu held.
type registry struct {
	m       map[uint32]*pending
	h       deadlineHeap
	timer   *time.Timer
	timerAt int64 // deadline the timer is armed for; 0: not armed
	lastID  uint32
	onTimer func() // runs when the timer fires; set once
}

// add assigns p a request id and registers it with a deadline timeout from now.
func (r *registry) add(p *pending, timeout time.Duration) {
	for {
		r.lastID++
		if _, used := r.m[r.lastID]; r.lastID != 0 && !used {
			break
		}
	}
	p.id = r.lastID
	p.deadline = time.Now().Add(timeout).UnixNano()
	r.m[p.id] = p
	r.h.push(p)
	if r.timerAt == 0 || p.deadline < r.timerAt {
		r.arm(p.deadline)
	}
}

func (r *registry) arm(at int64) {
	r.timerAt = at
	d := time.Duration(at - time.Now().UnixNano())
	if r.timer == nil {
		r.timer = time.AfterFunc(d, r.onTimer)
		return
	}
	r.timer.Reset(d)
}

// take removes and returns the request with id, or nil.
func (r *registry) take(id uint32) *pending {
	p := r.m[id]
	if p != nil {
		delete(r.m, id)
		r.h.remove(p.hidx)
	}
	return p
}

// remove removes p, registered as id, if it is still registered and reports
// whether it was.
func (r *registry) remove(id uint32, p *pending) bool {
	if q := r.m[id]; q != p {
		return false
	}
	delete(r.m, id)
	r.h.remove(p.hidx)
	return true
}

// expired removes and returns the requests whose deadline passed, and re-arms the
// timer for the next one.
func (r *registry) expired(now int64, dst []*pending) []*pending {
	for len(r.h) > 0 && r.h[0].deadline <= now {
		p := r.h[0]
		delete(r.m, p.id)
		r.h.remove(0)
		dst = append(dst, p)
	}
	r.timerAt = 0
	if len(r.h) > 0 {
		r.arm(r.h[0].deadline)
	}
	return dst
}

// drain removes and returns every request, and stops the timer.
func (r *registry) drain() []*pending {
	all := make([]*pending, 0, len(r.m))
	for _, p := range r.m {
		all = append(all, p)
	}
	clear(r.m)
	for i := range r.h {
		r.h[i] = nil
	}
	r.h = r.h[:0]
	if r.timer != nil {
		r.timer.Stop()
	}
	r.timerAt = 0
	return all
}
