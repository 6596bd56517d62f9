package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/uastack/client"
)

// Defaults of OutputOptions.
const (
	DefaultQueueSize   = config.DefaultSinkQueueSize
	DefaultQueueBytes  = config.DefaultSinkQueueBytes
	DefaultMaxInFlight = 256
	// dropLogInterval throttles the drop-oldest log line.
	dropLogInterval = 10 * time.Second
)

// OutputOptions configure an Output. The zero value is an at-most-once,
// blocking queue of DefaultQueueSize messages.
type OutputOptions struct {
	Guarantee config.Guarantee // "": at-most-once
	Policy    config.Policy    // "": block
	// QueueSize bounds the messages waiting to be published; default
	// DefaultQueueSize.
	QueueSize int
	// QueueBytes bounds their bytes (their pooled buffers', Message.Size);
	// default DefaultQueueBytes. The queue is full when either bound is
	// reached (a message larger than QueueBytes is taken when the queue is
	// empty): a Block queue makes the producer wait, a DropOldest queue
	// drops the oldest until it fits.
	QueueBytes int
	// MaxInFlight bounds the messages handed to the sink and not yet
	// confirmed; default DefaultMaxInFlight.
	MaxInFlight int
	// Backoff paces reconnections and retries after an error; the zero value
	// goes from 1 s to 30 s with ±10% jitter.
	Backoff client.Backoff
	// Logger receives the output's logs; default slog.Default().
	Logger *slog.Logger
	// DeadLetters, when set, takes what the sink refuses for good (Publish
	// returned an error other than ErrNotConnected: too large for the
	// broker, say): a message it keeps is settled delivered, so that it
	// never holds an acknowledgement upstream, and counted
	// (OutputStats.DeadLettered). Without it, or when it cannot keep the
	// message, the message is settled as before: undelivered at-least-once.
	DeadLetters DeadLetters
	// Latency, when set, is told the time from a message's encoding
	// (Message.Created) to the broker's confirmation of it (the
	// source-to-sink latency histogram); called without a lock held.
	Latency interface{ Observe(time.Duration) }
}

// OutputOptionsFromConfig builds OutputOptions from a sink's delivery
// settings in the configuration.
func OutputOptionsFromConfig(d config.Delivery) (OutputOptions, error) {
	o := OutputOptions{Guarantee: d.Guarantee, Policy: d.Policy, QueueSize: d.QueueSize, QueueBytes: d.QueueBytes}
	return o, o.Validate()
}

// Validate names the first field that cannot work.
func (o *OutputOptions) Validate() error {
	if _, err := config.ParseGuarantee(string(o.Guarantee)); err != nil {
		return fmt.Errorf("sink: OutputOptions.Guarantee %w", err)
	}
	if _, err := config.ParsePolicy(string(o.Policy)); err != nil {
		return fmt.Errorf("sink: OutputOptions.Policy %w", err)
	}
	switch {
	case o.QueueSize < 0:
		return fmt.Errorf("sink: OutputOptions.QueueSize %d is negative", o.QueueSize)
	case o.QueueBytes < 0:
		return fmt.Errorf("sink: OutputOptions.QueueBytes %d is negative", o.QueueBytes)
	case o.MaxInFlight < 0:
		return fmt.Errorf("sink: OutputOptions.MaxInFlight %d is negative", o.MaxInFlight)
	}
	return o.Backoff.Validate()
}

// OutputStats is a snapshot of an Output's counters (with the JSON names of
// the REST API's status).
type OutputStats struct {
	Name      string           `json:"name"`
	Guarantee config.Guarantee `json:"guarantee"`
	Policy    config.Policy    `json:"policy"`
	// Enqueued counts messages handed to Enqueue.
	Enqueued uint64 `json:"enqueued"`
	// Sent counts messages the sink took (Publish returned nil), resends
	// included; SentBytes their payload bytes.
	Sent      uint64 `json:"sent"`
	SentBytes uint64 `json:"sentBytes"`
	// Confirmed counts confirmations without error.
	Confirmed uint64 `json:"confirmed"`
	// Retries counts resends of messages whose confirmation failed.
	Retries uint64 `json:"retries"`
	// Errors counts failed confirmations and messages the sink refused.
	Errors uint64 `json:"errors"`
	// Dropped counts messages a drop-oldest queue dropped.
	Dropped uint64 `json:"dropped"`
	// Undelivered counts messages settled as undelivered (at close, or
	// refused by the sink, in at-least-once mode).
	Undelivered uint64 `json:"undelivered"`
	// DeadLettered counts messages the sink refused for good that
	// OutputOptions.DeadLetters kept.
	DeadLettered uint64 `json:"deadLettered"`
	// Fenced counts messages not published because their writer group's
	// lease deadline had passed (Message.Fence; scale-out).
	Fenced uint64 `json:"fenced"`
	// Reconnects counts successful connections after the first; ConnectFailures
	// counts failed attempts.
	Reconnects      uint64    `json:"reconnects"`
	ConnectFailures uint64    `json:"connectFailures"`
	Queued          int       `json:"queued"`      // messages waiting to be published
	QueuedBytes     int       `json:"queuedBytes"` // the bytes of their buffers (Message.Size)
	InFlight        int       `json:"inFlight"`    // messages published and not yet confirmed
	Connected       bool      `json:"connected"`
	LastError       string    `json:"lastError,omitempty"` // "" when there was none
	LastErrorAt     time.Time `json:"lastErrorAt"`
}

// slot states of the in-flight window.
const (
	slotSent   uint8 = iota + 1 // handed to the sink, confirmation outstanding
	slotFailed                  // confirmation failed; to be resent in order
	slotDone                    // confirmed and settled; waiting to leave the window
)

type slot struct {
	m     *Message
	state uint8
}

// A window slot's sequence number is headSeq plus its index: it survives the
// head moving, so a resend pass can keep its place.

// ring is a fixed-capacity FIFO of T.
type ring[T any] struct {
	buf  []T
	head int
	n    int
}

func newRing[T any](n int) ring[T] { return ring[T]{buf: make([]T, n)} }

func (r *ring[T]) full() bool { return r.n == len(r.buf) }

func (r *ring[T]) at(i int) *T {
	i += r.head
	if i >= len(r.buf) {
		i -= len(r.buf)
	}
	return &r.buf[i]
}

func (r *ring[T]) push(v T) { r.n++; *r.at(r.n - 1) = v }

func (r *ring[T]) pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head++
	if r.head == len(r.buf) {
		r.head = 0
	}
	r.n--
	return v
}

// Output is a bounded queue in front of one Sink, and the one goroutine that
// feeds it: it connects (and reconnects with backoff after ErrNotConnected),
// publishes in order with at most MaxInFlight messages unconfirmed, settles
// every message exactly once and, at-least-once, resends in order what the
// broker did not confirm. It implements Queue.
//
// Messages live in two rings: the queue (waiting to be published, the only
// part the policy drops from) and the window (published, awaiting
// confirmation, in publish order). A confirmation settles its message at
// once; the window's head advances past settled slots. A failed confirmation
// at-least-once stops new publishing: once nothing in the window is
// outstanding, the failed slots are resent in their order, then the queue
// resumes. Nothing is allocated per message: the rings are allocated once,
// the worker reuses one timer.
//
// m.Done is never called with mu held: it may run the pipeline's Tracker,
// which may take the pipeline's locks, and the pipeline calls Enqueue with
// them held.
type Output struct {
	sink Sink
	opts OutputOptions
	// atLeastOnce and block are opts.Guarantee and opts.Policy as the
	// per-message paths test them.
	atLeastOnce, block bool
	log                *slog.Logger
	conn               ConnState // sink as ConnState, or nil

	wake chan struct{} // cap 1: something for the worker to look at
	done chan struct{} // closed when the worker (or Close without Start) finished

	mu       sync.Mutex
	room     sync.Cond // producers waiting for room in the queue (Block)
	queue    ring[*Message]
	queued   int // payload bytes in queue
	window   ring[slot]
	sentN    int // window slots in state slotSent
	failedN  int // window slots in state slotFailed
	started  bool
	closing  bool
	closeCtx context.Context
	cancel   context.CancelFunc // cancels the worker's context
	runCtx   context.Context

	backoffDue bool   // a failed confirmation: wait before resending
	inPass     bool   // resending the failed slots, in order, from passFrom
	passFrom   uint64 // window sequence number the resend pass continues at
	headSeq    uint64 // sequence number of the window's head slot
	connected  bool
	everConn   bool
	backoff    client.Backoff
	closeErr   error
	lastErr    error

	stats       OutputStats
	dropsLogged uint64
	lastDropLog time.Time
}

// NewOutput returns an Output in front of s; Start begins connecting. An
// at-least-once Output over a sink that can only promise at-most-once is
// refused.
func NewOutput(s Sink, opts OutputOptions) (*Output, error) {
	if s == nil {
		return nil, errors.New("sink: NewOutput with a nil Sink")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Guarantee == config.AtLeastOnce && s.Guarantee() != config.AtLeastOnce {
		return nil, fmt.Errorf("sink: output %s: at-least-once delivery over a sink that is only %s", s.Name(), s.Guarantee())
	}
	// The zero values name the defaults; normalised here so that the
	// per-message checks compare with one value.
	opts.Guarantee, _ = config.ParseGuarantee(string(opts.Guarantee))
	opts.Policy, _ = config.ParsePolicy(string(opts.Policy))
	if opts.QueueSize == 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.QueueBytes == 0 {
		opts.QueueBytes = DefaultQueueBytes
	}
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	o := &Output{
		sink:    s,
		opts:    opts,
		log:     opts.Logger.With("sink", s.Name()),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		queue:   newRing[*Message](opts.QueueSize),
		window:  newRing[slot](opts.MaxInFlight),
		backoff: opts.Backoff,
	}
	// An output never gives up: it retries at Backoff.Max until closed.
	o.backoff.MaxElapsed = 0
	o.atLeastOnce, o.block = opts.Guarantee == config.AtLeastOnce, opts.Policy == config.Block
	o.conn, _ = s.(ConnState)
	o.room.L = &o.mu
	o.stats.Name, o.stats.Guarantee, o.stats.Policy = s.Name(), opts.Guarantee, opts.Policy
	o.runCtx, o.cancel = context.WithCancel(context.Background())
	return o, nil
}

// Name is the sink's name.
func (o *Output) Name() string { return o.stats.Name }

// Guarantee is the configured guarantee.
func (o *Output) Guarantee() config.Guarantee { return o.opts.Guarantee }

// Sink returns the sink the Output feeds.
func (o *Output) Sink() Sink { return o.sink }

// Start starts the worker goroutine, which connects and publishes until Close.
// Calling it again does nothing.
func (o *Output) Start() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.started || o.closing {
		return
	}
	o.started = true
	go o.run()
}

// closedOutcome is what Done is told of a message the Output gives up on.
func (o *Output) closedOutcome() bool { return !o.atLeastOnce }

// Enqueue takes over one reference of m. See Queue for the policies.
func (o *Output) Enqueue(m *Message) {
	o.mu.Lock()
	o.stats.Enqueued++
	for !o.closing && o.fullLocked(m) && o.block {
		o.room.Wait()
	}
	for !o.closing && o.fullLocked(m) { // DropOldest
		dropped := o.popLocked()
		o.stats.Dropped++
		o.logDropsLocked()
		o.mu.Unlock()
		dropped.Done(true)
		o.mu.Lock()
	}
	if o.closing {
		outcome := o.closedOutcome()
		if !outcome {
			o.stats.Undelivered++
		}
		o.mu.Unlock()
		m.Done(outcome)
		return
	}
	o.queue.push(m)
	o.queued += m.Size()
	o.mu.Unlock()
	o.signal()
}

// fullLocked reports whether the queue has no room for m: QueueSize
// messages, or m's buffer would take it past QueueBytes (an empty queue
// takes any message); o.mu held. Buffers, not payloads, are counted: what
// the queue holds in memory is its messages' pooled buffers, up to twice
// their payloads.
func (o *Output) fullLocked(m *Message) bool { return o.fullForLocked(m.Size()) }

func (o *Output) fullForLocked(n int) bool {
	return o.queue.full() || (o.queue.n > 0 && o.queued+n > o.opts.QueueBytes)
}

// WaitRoom implements RoomWaiter: a Block queue makes the caller wait until
// it has room for a message of n payload bytes (or is closing); other
// policies return at once.
func (o *Output) WaitRoom(n int) {
	if !o.block {
		return
	}
	n = MessageSize(n)
	o.mu.Lock()
	waited := false
	for !o.closing && o.fullForLocked(n) {
		o.room.Wait()
		waited = true
	}
	if waited {
		// A pop wakes one waiter, and this one leaves without adding to the
		// queue yet: pass the wake-up on, or a waiter behind it could sleep
		// with room to spare until the next pop.
		o.room.Signal()
	}
	o.mu.Unlock()
}

// popLocked takes the oldest queued message; o.mu held, queue not empty.
func (o *Output) popLocked() *Message {
	m := o.queue.pop()
	o.queued -= m.Size()
	return m
}

// logDropsLocked logs the drops at most once per dropLogInterval.
func (o *Output) logDropsLocked() {
	now := time.Now()
	if now.Sub(o.lastDropLog) < dropLogInterval {
		return
	}
	n := o.stats.Dropped - o.dropsLogged
	o.dropsLogged, o.lastDropLog = o.stats.Dropped, now
	o.log.Warn("sink queue full, dropped the oldest messages", "dropped", n, "droppedTotal", o.stats.Dropped, "queueSize", o.opts.QueueSize)
}

func (o *Output) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Confirmed implements Acker: the sink's word on a message it took.
func (o *Output) Confirmed(m *Message, err error) {
	o.mu.Lock()
	i := o.findSentLocked(m)
	if i < 0 {
		// A sink that confirms a message twice, or one it never took, is
		// broken; settling anything here could free a message still in use.
		o.mu.Unlock()
		o.log.Error("sink confirmed a message it does not hold", "err", err)
		return
	}
	s := o.window.at(i)
	o.sentN--
	settle, outcome := false, true
	var created int64
	switch {
	case errors.Is(err, ErrRefused):
		// Refused for good: sent again it would be refused again.
		o.stats.Errors++
		o.setErrLocked(err)
		s.state, s.m = slotDone, nil
		o.compactLocked()
		o.mu.Unlock()
		o.signal()
		o.refused(m, err)
		return
	case err == nil:
		o.stats.Confirmed++
		s.state, s.m, settle = slotDone, nil, true
		if o.opts.Latency != nil && m.Created != 0 {
			created = m.Created
		}
		if o.failedN == 0 {
			o.backoff.Reset()
		}
	case o.atLeastOnce:
		o.stats.Errors++
		o.setErrLocked(err)
		s.state = slotFailed
		o.failedN++
		if !errors.Is(err, ErrNotConnected) {
			o.backoffDue = true
		}
	default:
		o.stats.Errors++
		o.setErrLocked(err)
		s.state, s.m, settle = slotDone, nil, true
	}
	o.compactLocked()
	o.mu.Unlock()
	o.signal()
	if created != 0 {
		o.opts.Latency.Observe(time.Duration(time.Now().UnixNano() - created))
	}
	if settle {
		m.Done(outcome)
	}
}

// findSentLocked returns the window index of m in state slotSent, or -1.
// Confirmations come mostly in publish order, so the scan from the head
// usually stops at once.
func (o *Output) findSentLocked(m *Message) int {
	for i := 0; i < o.window.n; i++ {
		if s := o.window.at(i); s.m == m && s.state == slotSent {
			return i
		}
	}
	return -1
}

// compactLocked drops settled slots from the window's head.
func (o *Output) compactLocked() {
	for o.window.n > 0 && o.window.at(0).state == slotDone {
		o.window.pop()
		o.headSeq++
	}
}

func (o *Output) setErrLocked(err error) {
	o.lastErr = err
	o.stats.LastError, o.stats.LastErrorAt = err.Error(), time.Now()
}

// Stats returns a snapshot of the counters.
func (o *Output) Stats() OutputStats {
	o.mu.Lock()
	s := o.stats
	s.Queued, s.QueuedBytes, s.InFlight = o.queue.n, o.queued, o.sentN
	s.Connected = o.connected
	o.mu.Unlock()
	if s.Connected && o.conn != nil {
		s.Connected = o.conn.Connected()
	}
	return s
}

// Close stops accepting messages (Enqueue settles them at once, blocked
// producers are released), delivers what it can of the queue until ctx
// ends, then closes the sink and settles what is left: undelivered
// at-least-once, delivered at-most-once; with a context that never ends it
// waits until everything was delivered. It returns the sink's Close error,
// joined with a count of undelivered messages when there were any. Close
// waits for the worker; calling it again waits for the first call.
func (o *Output) Close(ctx context.Context) error {
	o.mu.Lock()
	if o.closing {
		o.mu.Unlock()
		<-o.done
		return nil
	}
	o.closing, o.closeCtx = true, ctx
	started := o.started
	o.room.Broadcast()
	o.mu.Unlock()
	stop := context.AfterFunc(ctx, o.cancel)
	defer stop()
	if !started {
		o.finish()
	} else {
		o.signal()
	}
	<-o.done
	o.mu.Lock()
	err := o.closeErr
	o.mu.Unlock()
	return err
}

// run is the worker: it owns the sink's Connect and Publish calls. It ends
// when the Output is closing and has nothing left, or when Close's context
// ends; finish then closes the sink and settles the rest.
func (o *Output) run() {
	defer o.finish()
	ctx := o.runCtx
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		o.mu.Lock()
		switch {
		case ctx.Err() != nil, o.closing && o.queue.n == 0 && o.window.n == 0:
			o.mu.Unlock()
			return
		case !o.connected:
			o.mu.Unlock()
			if !o.connect(ctx, timer) {
				return
			}
		case o.failedN > 0:
			if !o.inPass {
				if o.sentN > 0 {
					// Resend in order: first let every outstanding
					// confirmation come in (a lost connection fails them all).
					o.mu.Unlock()
					o.wait(ctx)
					continue
				}
				if o.backoffDue {
					o.backoffDue = false
					d, _ := o.backoff.Next(o.lastErr)
					o.mu.Unlock()
					if !o.sleep(ctx, timer, d) {
						return
					}
					continue
				}
				o.inPass, o.passFrom = true, o.headSeq
			}
			i := o.nextFailedLocked()
			if i < 0 {
				// The failures left are behind the pass (they failed while
				// it ran): start a new pass once the window settled.
				o.inPass = false
				o.mu.Unlock()
				continue
			}
			s := o.window.at(i)
			s.state = slotSent
			o.failedN--
			o.sentN++
			o.stats.Retries++
			o.passFrom = o.headSeq + uint64(i) + 1
			m := s.m
			o.mu.Unlock()
			o.publish(m)
		case o.queue.n > 0 && !o.window.full():
			o.inPass = false
			m := o.popLocked()
			o.window.push(slot{m: m, state: slotSent})
			o.sentN++
			o.room.Signal()
			o.mu.Unlock()
			o.publish(m)
		default:
			o.inPass = false
			o.mu.Unlock()
			o.wait(ctx)
		}
	}
}

// nextFailedLocked returns the window index of the first failed slot at or
// after passFrom, or -1.
func (o *Output) nextFailedLocked() int {
	start := 0
	if o.passFrom > o.headSeq {
		start = int(o.passFrom - o.headSeq)
	}
	for i := start; i < o.window.n; i++ {
		if o.window.at(i).state == slotFailed {
			return i
		}
	}
	return -1
}

// publish hands m, already in the window as slotSent, to the sink; a
// message past its fence is settled instead (undelivered at least once: the
// next holder of its group gets the data again).
func (o *Output) publish(m *Message) {
	n := uint64(m.Len()) // m may be settled and gone once Publish returns
	var err error
	fenced := m.Fence != nil && !m.Fence.Open(time.Now())
	if !fenced {
		err = o.sink.Publish(m, o)
	}
	o.mu.Lock()
	if fenced {
		o.stats.Fenced++
		o.settleSentLocked(m)
		return
	}
	if err == nil {
		o.stats.Sent++
		o.stats.SentBytes += n
		o.mu.Unlock()
		return
	}
	// Publish failed, so the sink will not confirm m: the slot is still ours.
	o.setErrLocked(err)
	if errors.Is(err, ErrNotConnected) {
		s := o.window.at(o.findSentLocked(m))
		o.sentN--
		s.state = slotFailed
		o.failedN++
		o.connected = false
		// After the reconnect a new pass starts from the window's head, so
		// this message keeps its place in the order.
		o.inPass = false
		o.mu.Unlock()
		return
	}
	o.stats.Errors++
	o.releaseSentLocked(m)
	o.mu.Unlock()
	o.refused(m, err)
}

// refused settles m, which the sink or its broker refused for good (err),
// out of the window already: kept in the dead-letter file when there is
// one (delivered as far as the pipeline is concerned: it holds nothing
// back), else undelivered at least once; o.mu not held.
func (o *Output) refused(m *Message, err error) {
	outcome := o.closedOutcome()
	if dl := o.opts.DeadLetters; dl != nil && dl.DeadLetter(o.stats.Name, m, err) {
		outcome = true
		o.mu.Lock()
		o.stats.DeadLettered++
		o.mu.Unlock()
	} else {
		o.log.Warn("sink refused a message", "err", err, "bytes", m.Len())
	}
	if !outcome {
		o.mu.Lock()
		o.stats.Undelivered++
		o.mu.Unlock()
	}
	m.Done(outcome)
}

// releaseSentLocked takes m, in the window as slotSent and not handed to
// the sink, out of the window; o.mu held.
func (o *Output) releaseSentLocked(m *Message) {
	s := o.window.at(o.findSentLocked(m))
	o.sentN--
	s.state, s.m = slotDone, nil
	o.compactLocked()
}

// settleSentLocked settles m, in the window as slotSent and not handed to
// the sink, as undelivered (at-most-once outputs: as done); o.mu held,
// released.
func (o *Output) settleSentLocked(m *Message) {
	o.releaseSentLocked(m)
	outcome := o.closedOutcome()
	if !outcome {
		o.stats.Undelivered++
	}
	o.mu.Unlock()
	m.Done(outcome)
}

// connect calls the sink's Connect until it succeeds (true) or ctx ends.
func (o *Output) connect(ctx context.Context, timer *time.Timer) bool {
	for {
		err := o.sink.Connect(ctx)
		o.mu.Lock()
		if err == nil {
			o.connected = true
			if o.everConn {
				o.stats.Reconnects++
			}
			o.everConn = true
			o.backoff.Reset()
			o.mu.Unlock()
			o.log.Info("sink connected")
			return true
		}
		if ctx.Err() != nil {
			o.mu.Unlock()
			return false
		}
		o.stats.ConnectFailures++
		o.setErrLocked(err)
		d, _ := o.backoff.Next(err)
		o.mu.Unlock()
		o.log.Warn("sink connect failed", "err", err, "retryIn", d.Round(time.Millisecond))
		if !o.sleep(ctx, timer, d) {
			return false
		}
	}
}

// wait blocks until something happened or ctx ended.
func (o *Output) wait(ctx context.Context) {
	select {
	case <-o.wake:
	case <-ctx.Done():
	}
}

// sleep waits d; false when ctx ended first.
func (o *Output) sleep(ctx context.Context, timer *time.Timer, d time.Duration) bool {
	timer.Reset(d)
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		timer.Stop()
		return false
	}
}

// finish closes the sink and settles what the Output still holds; it runs
// once, on the worker or (never started) on Close.
func (o *Output) finish() {
	o.mu.Lock()
	ctx := o.closeCtx
	o.connected = false
	o.mu.Unlock()
	// The sink's Close confirms everything it took, so after it the window
	// holds only failed slots (and settled ones).
	sinkErr := o.sink.Close(ctx)
	outcome := o.closedOutcome()
	var left, stuck int
	for {
		o.mu.Lock()
		var m *Message
		switch {
		case o.queue.n > 0:
			m = o.popLocked()
		case o.window.n > 0:
			s := o.window.pop()
			o.headSeq++
			switch s.state {
			case slotFailed:
				m = s.m
				o.failedN--
			case slotSent:
				// A sink that broke its Close contract still holds m: leave it
				// to the GC rather than free what may be in use.
				stuck++
				o.sentN--
			}
		}
		if m == nil && o.queue.n == 0 && o.window.n == 0 {
			o.mu.Unlock()
			break
		}
		if m != nil {
			left++
			if !outcome {
				o.stats.Undelivered++
			}
		}
		o.mu.Unlock()
		if m != nil {
			m.Done(outcome)
		}
	}
	var err error
	if sinkErr != nil {
		err = fmt.Errorf("sink %s: close: %w", o.stats.Name, sinkErr)
	}
	if stuck > 0 {
		o.log.Error("sink closed with messages unconfirmed", "messages", stuck)
	}
	if left > 0 {
		o.log.Warn("output closed with messages not sent", "messages", left, "delivered", outcome)
		if !outcome {
			err = errors.Join(err, fmt.Errorf("sink %s: %d messages undelivered at close", o.stats.Name, left))
		}
	}
	o.mu.Lock()
	o.closeErr = err
	o.mu.Unlock()
	o.cancel()
	close(o.done)
}
