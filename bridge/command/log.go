package command

import (
	"sync"
	"sync/atomic"
	"time"

	json "github.com/goccy/go-json"
)

// LogEntry is one command in the command log: who, what, the value before
// and after, and the result.
type LogEntry struct {
	At        time.Time `json:"at"`
	Caller    string    `json:"caller"`
	Transport string    `json:"transport"`
	RequestID string    `json:"requestId"`
	Op        Op        `json:"op"`
	// Target is the resolved target ("sim ns=1;s=Demo.Static.Int16").
	Target   string          `json:"target"`
	OldValue json.RawMessage `json:"oldValue,omitempty"`
	Value    json.RawMessage `json:"value,omitempty"`
	Status   StatusCode      `json:"status"`
	// Error is the refusal's kind and message ("" when the request ran).
	Error     string `json:"error,omitempty"`
	Duplicate bool   `json:"duplicate,omitempty"`
	// DurationMs is how long the request took, queue included.
	DurationMs float64 `json:"durationMs"`
}

// commandLog keeps the last entries, newest last.
type commandLog struct {
	mu   sync.Mutex
	buf  []LogEntry
	next int // where the next entry goes
	full bool
	seq  uint64
}

func newLog(n int) *commandLog { return &commandLog{buf: make([]LogEntry, n)} }

func (l *commandLog) add(e LogEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf[l.next] = e
	l.next++
	l.seq++
	if l.next == len(l.buf) {
		l.next, l.full = 0, true
	}
}

// last returns up to n entries, newest first.
func (l *commandLog) last(n int) []LogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	size := l.next
	if l.full {
		size = len(l.buf)
	}
	n = min(max(n, 0), size)
	out := make([]LogEntry, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, l.buf[(l.next-i+len(l.buf))%len(l.buf)])
	}
	return out
}

// Stats are the command counters of one transport.
type Stats struct {
	Transport string `json:"transport"`
	// Requests counts every request received (refused ones included).
	Requests uint64 `json:"requests"`
	// Good counts requests done with a Good status; Bad those done (the
	// server was asked) whose status was not Good.
	Good uint64 `json:"good"`
	Bad  uint64 `json:"bad"`
	// Denied, RateLimited, Busy, Invalid (malformed, too large, unknown
	// target, wrong type), Timeouts and Unavailable count refusals by
	// kind; Duplicates the requests answered from the idempotency window.
	Denied      uint64 `json:"denied"`
	RateLimited uint64 `json:"rateLimited"`
	Busy        uint64 `json:"busy"`
	Invalid     uint64 `json:"invalid"`
	Timeouts    uint64 `json:"timeouts"`
	Unavailable uint64 `json:"unavailable"`
	Duplicates  uint64 `json:"duplicates"`
}

// transports are the transports counted, in the order Stats lists them.
var transports = [...]string{TransportMQTT, TransportNATS, TransportWebSocket, TransportAPI, TransportSparkplug}

type counters struct {
	requests, good, bad, denied, rateLimited, busy, invalid, timeouts, unavailable, duplicates atomic.Uint64
}

func transportIndex(t string) int {
	for i, x := range transports {
		if x == t {
			return i
		}
	}
	return -1
}

func (c *counters) count(resp *Response) {
	switch {
	case resp.Duplicate:
		c.duplicates.Add(1)
	case resp.Error == nil && resp.Status.Good():
		c.good.Add(1)
	case resp.Error == nil:
		c.bad.Add(1)
	default:
		switch resp.Error.Kind {
		case KindDenied:
			c.denied.Add(1)
		case KindRateLimited:
			c.rateLimited.Add(1)
		case KindBusy:
			c.busy.Add(1)
		case KindTimeout:
			c.timeouts.Add(1)
		case KindUnavailable:
			c.unavailable.Add(1)
		case KindUpstream:
			c.bad.Add(1)
		default:
			c.invalid.Add(1)
		}
	}
}

func (c *counters) snapshot(t string) Stats {
	return Stats{Transport: t, Requests: c.requests.Load(), Good: c.good.Load(), Bad: c.bad.Load(),
		Denied: c.denied.Load(), RateLimited: c.rateLimited.Load(), Busy: c.busy.Load(), Invalid: c.invalid.Load(),
		Timeouts: c.timeouts.Load(), Unavailable: c.unavailable.Load(), Duplicates: c.duplicates.Load()}
}
