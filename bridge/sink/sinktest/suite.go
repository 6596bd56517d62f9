package sinktest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/internal/testutil"
)

// Harness is one sink under test: how to start what it publishes to, and
// what that can do. The suite runs the cases the flags allow.
type Harness struct {
	// Guarantee is what the sink promises; the suite runs its Outputs at it.
	Guarantee config.Guarantee
	// OwnQueue: the sink is a queue of its own (Env.Queue, the WebSocket
	// hub), not the Sink of an Output; only the cases of a Queue run.
	OwnQueue bool
	// Start starts a fresh environment for one test (a broker, a hub on a
	// loopback listener, a file in the test's directory) as o asks; it is
	// torn down when the test ends.
	Start func(t *testing.T, o Options) *Env

	// Restart: Env.Stop and Env.Start are set.
	Restart bool
	// Persistent: Options.Persistent is honoured: the broker keeps its
	// state across Stop and Start, and a receiver gets what reached the
	// broker while the receiver was cut off by the restart (a persistent
	// session, a stream).
	Persistent bool
	// Auth: Options.Users is honoured and Env.SetUsers is set.
	Auth bool
	// TLS: Options.TLS is honoured.
	TLS bool
	// MaxPayload, when positive, is the largest payload the broker takes;
	// a larger message must be refused with an error, settled once, and
	// not hold the messages behind it.
	MaxPayload int
}

// Options ask Harness.Start for an environment.
type Options struct {
	// Persistent: state survives Env.Stop and Env.Start (Harness.Persistent).
	Persistent bool
	// Users, when not nil, makes the broker require a user name and
	// password, allowing these; they include ReceiverUser, whose
	// credentials the harness's receivers use.
	Users map[string]string
	// TLS, when set, makes the broker accept only TLS with these files and
	// require a client certificate of TLS.CA; receivers use TLS.ClientCert.
	TLS *brokertest.TLSFiles
}

// Env is what Harness.Start started.
type Env struct {
	// Sink returns a new sink publishing to the environment, not yet
	// connected, with the credentials of c. Nil for a harness of a Queue.
	Sink func(t *testing.T, c SinkOptions) sink.Sink
	// Queue returns a started queue that is not an Output (the WebSocket
	// hub); when nil the suite builds Outputs over Sink.
	Queue func(t *testing.T) Queue
	// Receive starts a consumer of the messages the sink publishes to
	// Addr, subscribed when it returns; it ends with the test.
	Receive func(t *testing.T) Receiver
	// Stop makes the broker go away (its connections end); Start brings it
	// back on the same address (Harness.Restart).
	Stop, Start func()
	// SetUsers replaces the broker's users (as Options.Users) while it
	// runs (Harness.Auth).
	SetUsers func(t *testing.T, users map[string]string)
}

// SinkOptions are the credentials of a sink of Env.Sink.
type SinkOptions struct {
	Username, Password string
	TLS                *sink.TLSOptions
}

// Receiver is a consumer of the environment.
type Receiver interface {
	// Received returns the payloads that arrived so far, in order of
	// arrival, repeats included.
	Received() [][]byte
}

// The credentials of the receivers in an environment with Options.Users.
const ReceiverUser, ReceiverPassword = "receiver", "receiver"

// n is the number of messages of the ordinary cases.
const n = 200

// Run runs the suite's cases for h as subtests of t.
func Run(t *testing.T, h Harness) {
	run := func(name string, f func(*testing.T, Harness)) {
		t.Run(name, func(t *testing.T) {
			testutil.CheckLeaks(t)
			f(t, h)
		})
	}
	run("Delivers", delivers)
	run("EnqueueAfterClose", enqueueAfterClose)
	if h.OwnQueue {
		return
	}
	run("Contract", contract)
	run("CloseDrains", closeDrains)
	if h.Restart {
		run("BrokerDownUp", brokerDownUp)
		run("CloseWhileBrokerDown", closeWhileBrokerDown)
		run("DropOldestWhileBrokerDown", dropOldestWhileBrokerDown)
		if h.Persistent && h.Guarantee == config.AtLeastOnce {
			run("AtLeastOnceAcrossRestart", atLeastOnceAcrossRestart)
		}
	}
	if h.Auth {
		run("RefusedCredentials", refusedCredentials)
	}
	if h.TLS {
		run("TLSClientCert", tlsClientCert)
	}
	if h.MaxPayload > 0 {
		run("Oversized", oversized)
	}
}

// queue returns the environment's queue: its own, or a started Output of
// h.Guarantee over a new sink.
func (h Harness) queue(t *testing.T, env *Env) Queue {
	if env.Queue != nil {
		return env.Queue(t)
	}
	return StartOutput(t, env.Sink(t, SinkOptions{}), sink.OutputOptions{Guarantee: h.Guarantee})
}

// givenUp is the outcome (delivered or not) of a message the queue gave
// up on: undelivered only at-least-once.
func (h Harness) givenUp() bool { return h.Guarantee != config.AtLeastOnce }

// delivers: n messages in order; each settled delivered exactly once and
// received once, in order; an Output's counters agree.
func delivers(t *testing.T, h Harness) {
	env := h.Start(t, Options{})
	rcv := env.Receive(t)
	q := h.queue(t, env)
	if q.Guarantee() != h.Guarantee || q.Name() == "" {
		t.Fatalf("queue %q is %v, want a name and %v", q.Name(), q.Guarantee(), h.Guarantee)
	}
	tr := NewTracker()
	for i := range n {
		q.Enqueue(Message(tr, i, sink.KindData, Addr))
	}
	tr.Wait(t, n, true)
	order, seen := waitReceived(t, rcv, span(0, n))
	for i, c := range order {
		if c != i {
			t.Fatalf("received %d as message %d: out of order", c, i)
		}
		if seen[c] != 1 {
			t.Errorf("message %d received %d times", c, seen[c])
		}
	}
	if o, ok := q.(*sink.Output); ok {
		st := o.Stats()
		if st.Enqueued != n || st.Sent != n || st.Confirmed != n || st.Errors != 0 || st.Retries != 0 ||
			st.Queued != 0 || st.InFlight != 0 || !st.Connected || st.Reconnects != 0 || st.LastError != "" {
			t.Fatalf("stats %+v", st)
		}
	}
}

// enqueueAfterClose: a closed queue settles what it is given at once, as
// its guarantee says; closing again is harmless.
func enqueueAfterClose(t *testing.T, h Harness) {
	env := h.Start(t, Options{})
	q := h.queue(t, env)
	CloseQueue(t, q)
	tr := NewTracker()
	q.Enqueue(Message(tr, 0, sink.KindData, Addr))
	q.Enqueue(Message(tr, 1, sink.KindMetaData, Addr))
	if tr.Count() != 2 {
		t.Fatalf("%d of 2 messages settled by Enqueue after Close", tr.Count())
	}
	tr.Wait(t, 2, h.givenUp())
	CloseQueue(t, q)
	if o, ok := q.(*sink.Output); ok && h.Guarantee == config.AtLeastOnce {
		if st := o.Stats(); st.Undelivered != 2 {
			t.Errorf("stats %+v: want 2 undelivered", st)
		}
	}
}

// contract: the Sink interface's lifecycle, without an Output. Publish
// before Connect answers ErrNotConnected without confirming; a Publish
// after it is confirmed exactly once, without error; Connect after Close
// fails; Close twice is harmless. An at-most-once sink refuses an
// at-least-once Output.
func contract(t *testing.T, h Harness) {
	env := h.Start(t, Options{})
	s := env.Sink(t, SinkOptions{})
	if s.Guarantee() != h.Guarantee || s.Name() == "" {
		t.Fatalf("sink %q is %v, want a name and %v", s.Name(), s.Guarantee(), h.Guarantee)
	}
	if h.Guarantee == config.AtMostOnce {
		if _, err := sink.NewOutput(s, sink.OutputOptions{Guarantee: config.AtLeastOnce}); err == nil {
			t.Error("an at-least-once Output over an at-most-once sink was accepted")
		}
	}
	ack := &acker{}
	m := Message(nil, 0, sink.KindData, Addr)
	defer m.Done(true)
	if err := s.Publish(m, ack); !errors.Is(err, sink.ErrNotConnected) {
		t.Fatalf("Publish before Connect: %v, want ErrNotConnected", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(m, ack); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	testutil.WaitFor(t, Timeout, "the confirmation", func() bool { return ack.count() > 0 })
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if k, err := ack.result(); k != 1 || err != nil {
		t.Fatalf("confirmed %d times, with %v; want once, nil", k, err)
	}
	if err := s.Connect(ctx); err == nil {
		t.Error("Connect after Close succeeded")
	}
	if err := s.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// closeDrains: Close right after Enqueue delivers everything queued before
// it returns.
func closeDrains(t *testing.T, h Harness) {
	env := h.Start(t, Options{})
	rcv := env.Receive(t)
	o := StartOutput(t, env.Sink(t, SinkOptions{}), sink.OutputOptions{Guarantee: h.Guarantee})
	tr := NewTracker()
	for i := range n {
		o.Enqueue(Message(tr, i, sink.KindData, Addr))
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := o.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if tr.Count() != n {
		t.Fatalf("Close returned with %d of %d messages settled", tr.Count(), n)
	}
	tr.Wait(t, n, true)
	waitReceived(t, rcv, span(0, n))
	if st := o.Stats(); st.Confirmed != n || st.Undelivered != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// brokerDownUp: the Output notices a broker gone, holds what comes
// meanwhile (nothing settles), reconnects once the broker is back and
// delivers it all, exactly once.
func brokerDownUp(t *testing.T, h Harness) {
	env := h.Start(t, Options{Persistent: h.Persistent})
	rcv := env.Receive(t)
	o := StartOutput(t, env.Sink(t, SinkOptions{}), sink.OutputOptions{Guarantee: h.Guarantee})
	tr := NewTracker()
	o.Enqueue(Message(tr, 0, sink.KindData, Addr))
	tr.Wait(t, 1, true)
	env.Stop()
	testutil.WaitFor(t, Timeout, "the output to notice", func() bool { return !o.Stats().Connected })
	for i := 1; i <= 5; i++ {
		o.Enqueue(Message(tr, i, sink.KindData, Addr))
	}
	testutil.WaitFor(t, Timeout, "a failed reconnection", func() bool { return o.Stats().ConnectFailures > 0 })
	if k := tr.Count(); k != 1 {
		t.Fatalf("%d messages settled with the broker down", k-1)
	}
	env.Start()
	tr.Wait(t, 6, true)
	if st := o.Stats(); st.Reconnects != 1 || !st.Connected || st.LastError == "" {
		t.Fatalf("stats %+v: want one reconnect, connected, the last error kept", st)
	}
	if h.Persistent {
		waitReceived(t, rcv, span(0, 6))
	}
}

// closeWhileBrokerDown: Close with the broker gone gives up at its
// deadline and settles what it holds exactly once: undelivered
// at-least-once (and says so), delivered at-most-once.
func closeWhileBrokerDown(t *testing.T, h Harness) {
	env := h.Start(t, Options{})
	o := StartOutput(t, env.Sink(t, SinkOptions{}), sink.OutputOptions{Guarantee: h.Guarantee})
	testutil.WaitFor(t, Timeout, "connected", func() bool { return o.Stats().Connected })
	env.Stop()
	testutil.WaitFor(t, Timeout, "the output to notice", func() bool { return !o.Stats().Connected })
	tr := NewTracker()
	for i := range 3 {
		o.Enqueue(Message(tr, i, sink.KindData, Addr))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := o.Close(ctx)
	if tr.Count() != 3 {
		t.Fatalf("Close returned with %d of 3 messages settled", tr.Count())
	}
	tr.Wait(t, 3, h.givenUp())
	st := o.Stats()
	if h.Guarantee == config.AtLeastOnce {
		if err == nil || !strings.Contains(err.Error(), "3 messages undelivered") || st.Undelivered != 3 {
			t.Fatalf("Close = %v, stats %+v: want 3 undelivered", err, st)
		}
	} else if err != nil || st.Undelivered != 0 {
		t.Fatalf("Close = %v, stats %+v", err, st)
	}
}

// dropOldestWhileBrokerDown: with the broker away a drop-oldest queue keeps
// the newest, drops (counted, settled delivered) the rest, and delivers
// what it kept once the broker is back.
func dropOldestWhileBrokerDown(t *testing.T, h Harness) {
	env := h.Start(t, Options{})
	o := StartOutput(t, env.Sink(t, SinkOptions{}), sink.OutputOptions{Policy: config.DropOldest, QueueSize: 10})
	testutil.WaitFor(t, Timeout, "connected", func() bool { return o.Stats().Connected })
	env.Stop()
	testutil.WaitFor(t, Timeout, "the output to notice", func() bool { return !o.Stats().Connected })
	tr := NewTracker()
	const n = 100
	for i := range n {
		o.Enqueue(Message(tr, i, sink.KindData, Addr))
	}
	st := o.Stats()
	// One message may have reached the window before the worker saw the
	// connection gone; the queue keeps the 10 newest.
	if st.Dropped < n-11 || st.Dropped > n-10 || st.Queued != 10 {
		t.Fatalf("with the broker down: %+v", st)
	}
	env.Start()
	tr.Wait(t, n, true)
	st = o.Stats()
	if st.Confirmed+st.Errors+st.Dropped != n {
		t.Fatalf("confirmed %d + errors %d + dropped %d != %d", st.Confirmed, st.Errors, st.Dropped, n)
	}
}

// atLeastOnceAcrossRestart: the broker goes away and comes back in the
// middle of a stream; every message arrives (repeats allowed, counted) and
// is settled delivered exactly once.
func atLeastOnceAcrossRestart(t *testing.T, h Harness) {
	env := h.Start(t, Options{Persistent: true})
	rcv := env.Receive(t)
	o := StartOutput(t, env.Sink(t, SinkOptions{}), sink.OutputOptions{Guarantee: config.AtLeastOnce, QueueSize: 64, MaxInFlight: 32})
	tr := NewTracker()
	const n = 3000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			o.Enqueue(Message(tr, i, sink.KindData, Addr))
		}
	}()
	testutil.WaitFor(t, Timeout, "a third through", func() bool { return o.Stats().Confirmed >= n/3 })
	env.Stop()
	testutil.WaitFor(t, Timeout, "the output to notice", func() bool { return !o.Stats().Connected })
	env.Start()
	<-done
	tr.Wait(t, n, true)
	_, seen := waitReceived(t, rcv, span(0, n))
	repeats := 0
	for _, k := range seen {
		repeats += k - 1
	}
	st := o.Stats()
	t.Logf("%d messages, %d received twice or more, %d resends, %d reconnects, last error %q", n, repeats, st.Retries, st.Reconnects, st.LastError)
	if st.Reconnects < 1 {
		t.Fatalf("no reconnect: %+v", st)
	}
}

// refusedCredentials: a clear error wrapping sink.ErrUnauthorized, naming
// the user and not the password; the Output retries with backoff and shows
// it in Stats; once the broker accepts the credentials it connects and
// delivers.
func refusedCredentials(t *testing.T, h Harness) {
	env := h.Start(t, Options{Users: map[string]string{"gw": "right", ReceiverUser: ReceiverPassword}})
	bad := SinkOptions{Username: "gw", Password: "wrong"}
	direct := env.Sink(t, bad)
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	err := direct.Connect(ctx)
	if !errors.Is(err, sink.ErrUnauthorized) || !strings.Contains(err.Error(), `"gw"`) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("Connect = %v, want ErrUnauthorized naming the user, not the password", err)
	}
	if err := direct.Close(ctx); err != nil {
		t.Fatal(err)
	}

	rcv := env.Receive(t)
	o := StartOutput(t, env.Sink(t, bad), sink.OutputOptions{Guarantee: h.Guarantee})
	tr := NewTracker()
	o.Enqueue(Message(tr, 0, sink.KindData, Addr))
	testutil.WaitFor(t, Timeout, "repeated refusals", func() bool { return o.Stats().ConnectFailures >= 3 })
	if st := o.Stats(); st.Connected || !strings.Contains(st.LastError, "refused the credentials") || tr.Count() != 0 {
		t.Fatalf("while refused: %+v", st)
	}
	env.SetUsers(t, map[string]string{"gw": "wrong", ReceiverUser: ReceiverPassword})
	tr.Wait(t, 1, true)
	waitReceived(t, rcv, []int{0})
	if st := o.Stats(); !st.Connected {
		t.Fatalf("not connected: %+v", st)
	}
}

// tlsClientCert: a broker that requires TLS and a client certificate of
// its CA takes the sink with the CA and such a certificate; without a
// certificate, with one of another CA, or without the CA to check the
// broker, the sink is refused and the error says why.
func tlsClientCert(t *testing.T, h Harness) {
	tf := brokertest.NewTLSFiles(t)
	env := h.Start(t, Options{TLS: tf})
	rcv := env.Receive(t)
	good := &sink.TLSOptions{CAFile: tf.CA, CertFile: tf.ClientCert, KeyFile: tf.ClientKey}
	o := StartOutput(t, env.Sink(t, SinkOptions{TLS: good}), sink.OutputOptions{Guarantee: h.Guarantee})
	tr := NewTracker()
	for i := range 5 {
		o.Enqueue(Message(tr, i, sink.KindData, Addr))
	}
	tr.Wait(t, 5, true)
	waitReceived(t, rcv, span(0, 5))

	for _, c := range []struct {
		name string
		tls  *sink.TLSOptions
		why  string
	}{
		{"no client certificate", &sink.TLSOptions{CAFile: tf.CA}, "require a client certificate"},
		{"a certificate of another CA", &sink.TLSOptions{CAFile: tf.CA, CertFile: tf.OtherCert, KeyFile: tf.OtherKey}, "require a client certificate"},
		{"no CA for the broker", &sink.TLSOptions{CertFile: tf.ClientCert, KeyFile: tf.ClientKey}, "certificate signed by unknown authority"},
	} {
		s := env.Sink(t, SinkOptions{TLS: c.tls})
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		err := s.Connect(ctx)
		_ = s.Close(ctx)
		cancel()
		t.Logf("%s: %v", c.name, err)
		if err == nil {
			t.Errorf("%s: connected", c.name)
		} else if !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.why)
		}
	}
}

// oversized: a message over the broker's limit is refused with an error,
// counted and settled once (undelivered at-least-once), and the message
// behind it is delivered.
func oversized(t *testing.T, h Harness) {
	env := h.Start(t, Options{})
	rcv := env.Receive(t)
	o := StartOutput(t, env.Sink(t, SinkOptions{}), sink.OutputOptions{Guarantee: h.Guarantee, QueueBytes: 4 * h.MaxPayload})
	tr := NewTracker()
	o.Enqueue(PaddedMessage(tr, 0, sink.KindData, Addr, h.MaxPayload+1))
	o.Enqueue(Message(tr, 1, sink.KindData, Addr))
	testutil.WaitFor(t, Timeout, "both messages settled", func() bool { return tr.Count() == 2 })
	if d, u := tr.Outcome(0); d+u != 1 || (d == 1) != h.givenUp() {
		t.Errorf("the oversized message settled delivered %d, undelivered %d times; want once, delivered=%v", d, u, h.givenUp())
	}
	if d, u := tr.Outcome(1); d != 1 || u != 0 {
		t.Errorf("the message behind it settled delivered %d, undelivered %d times", d, u)
	}
	order, _ := waitReceived(t, rcv, []int{1})
	if len(order) != 1 {
		t.Errorf("received %v, want only message 1", order)
	}
	st := o.Stats()
	t.Logf("refused: %s", st.LastError)
	if st.Errors != 1 || st.LastError == "" || st.Confirmed != 1 || st.Reconnects != 0 {
		t.Fatalf("stats %+v: want one error, one confirmed, no reconnect", st)
	}
}

// acker records a sink's confirmations.
type acker struct {
	mu  sync.Mutex
	k   int
	err error
}

func (a *acker) Confirmed(_ *sink.Message, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.k++
	if a.err == nil {
		a.err = err
	}
}

func (a *acker) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.k
}

func (a *acker) result() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.k, a.err
}
