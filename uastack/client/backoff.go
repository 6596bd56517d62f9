package client

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// Defaults of Backoff.
const (
	DefaultBackoffInitial    = time.Second
	DefaultBackoffMax        = 30 * time.Second
	DefaultBackoffMultiplier = 2.0
	DefaultBackoffJitter     = 0.1
	DefaultBackoffBusyFactor = 4.0
)

// Backoff is the delay between connection attempts: exponential from Initial
// to Max with ±Jitter, and BusyFactor times longer after a server said it is
// busy (BadTooManySessions, BadTcpServerTooBusy, BadTooManyOperations …), never
// longer than Max, jitter and busy factor included. It retries forever unless
// MaxElapsed is set. The zero value uses the defaults.
// A Backoff holds the state of one sequence of attempts; it is not safe for
// concurrent use.
type Backoff struct {
	Initial    time.Duration // first delay; default 1 s
	Max        time.Duration // longest delay; default 30 s
	Multiplier float64       // growth per attempt; default 2
	Jitter     float64       // relative spread, 0.1 is ±10%; default 0.1, negative for none
	BusyFactor float64       // factor after a busy status; default 4
	// MaxElapsed stops retrying after this long without success; 0 never stops.
	MaxElapsed time.Duration

	next  time.Duration
	start time.Time
}

// params returns the effective settings (defaults for zero fields).
func (b *Backoff) params() (initial, maxd time.Duration, mult, jitter, busy float64) {
	initial, maxd, mult, jitter, busy = b.Initial, b.Max, b.Multiplier, b.Jitter, b.BusyFactor
	if initial <= 0 {
		initial = DefaultBackoffInitial
	}
	if maxd <= 0 {
		maxd = DefaultBackoffMax
	}
	maxd = max(maxd, initial)
	if mult < 1 {
		mult = DefaultBackoffMultiplier
	}
	switch {
	case jitter == 0:
		jitter = DefaultBackoffJitter
	case jitter < 0:
		jitter = 0
	case jitter > 1:
		jitter = 1
	}
	if busy < 1 {
		busy = DefaultBackoffBusyFactor
	}
	return
}

// Validate names the first field that cannot work.
func (b *Backoff) Validate() error {
	switch {
	case b.Initial < 0:
		return fmt.Errorf("client: Backoff.Initial %v is negative", b.Initial)
	case b.Max < 0:
		return fmt.Errorf("client: Backoff.Max %v is negative", b.Max)
	case b.MaxElapsed < 0:
		return fmt.Errorf("client: Backoff.MaxElapsed %v is negative", b.MaxElapsed)
	case b.Multiplier != 0 && b.Multiplier < 1:
		return fmt.Errorf("client: Backoff.Multiplier %v is below 1", b.Multiplier)
	}
	return nil
}

// Next returns how long to wait after an attempt that failed with err, or
// ErrGaveUp once MaxElapsed has passed since the first failure.
func (b *Backoff) Next(err error) (time.Duration, error) {
	initial, maxd, mult, jitter, busy := b.params()
	now := time.Now()
	if b.start.IsZero() {
		b.start = now
		b.next = initial
	}
	if b.MaxElapsed > 0 && now.Sub(b.start) >= b.MaxElapsed {
		return 0, ErrGaveUp
	}
	d := b.next
	b.next = min(time.Duration(float64(b.next)*mult), maxd)
	if IsBusy(err) {
		d = min(time.Duration(float64(d)*busy), maxd)
	}
	if jitter > 0 {
		d += time.Duration((rand.Float64()*2 - 1) * jitter * float64(d))
	}
	// Max is a promise to the operator (how long an endpoint may stay down
	// unnoticed by a retry): the busy factor and the jitter stay inside it.
	return min(max(d, 0), maxd), nil
}

// left returns the time until MaxElapsed passes, counted from the first
// failure of the sequence; ok is false without MaxElapsed or before a failure.
func (b *Backoff) left() (d time.Duration, ok bool) {
	if b.MaxElapsed <= 0 || b.start.IsZero() {
		return 0, false
	}
	return time.Until(b.start.Add(b.MaxElapsed)), true
}

// Reset starts a new sequence (after a success).
func (b *Backoff) Reset() { b.next, b.start = 0, time.Time{} }

// IsBusy reports whether err says the server is overloaded rather than
// unreachable or broken: waiting longer before the next attempt helps it.
// BadTimeout is not among them: it is what the client reports when no answer
// came in time, which a dead network causes as often as a busy server.
func IsBusy(err error) bool {
	return errorsIsAny(err,
		ua.StatusBadTooManySessions, ua.StatusBadTcpServerTooBusy, ua.StatusBadTooManyOperations,
		ua.StatusBadTooManyPublishRequests, ua.StatusBadTooManySubscriptions, ua.StatusBadTooManyMonitoredItems,
		ua.StatusBadResourceUnavailable, ua.StatusBadRequestTimeout)
}
