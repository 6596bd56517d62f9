package storelog

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
)

// testQueue is a consumer's queue the test drives: it keeps what it is
// given, in order, and settles it when the test says (or at once, with
// auto).
type testQueue struct {
	name      string
	guarantee config.Guarantee
	auto      bool
	discard   bool // with auto: keep no payloads

	mu   sync.Mutex
	got  []*sink.Message
	seen []string // payloads, in arrival order
}

func (q *testQueue) Name() string                { return q.name }
func (q *testQueue) Guarantee() config.Guarantee { return q.guarantee }

func (q *testQueue) Enqueue(m *sink.Message) {
	if q.discard {
		m.Done(true)
		return
	}
	q.mu.Lock()
	q.seen = append(q.seen, string(m.Payload()))
	if q.auto {
		q.mu.Unlock()
		m.Done(true)
		return
	}
	q.got = append(q.got, m)
	q.mu.Unlock()
}

// settle settles the first n messages kept (all when n < 0).
func (q *testQueue) settle(n int, delivered bool) {
	q.mu.Lock()
	if n < 0 || n > len(q.got) {
		n = len(q.got)
	}
	ms := q.got[:n]
	q.got = append([]*sink.Message(nil), q.got[n:]...)
	q.mu.Unlock()
	for _, m := range ms {
		m.Done(delivered)
	}
}

func (q *testQueue) payloads() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.seen...)
}

func (q *testQueue) count() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.seen)
}

// upstream records what the log settled of the producer's messages.
type upstream struct {
	mu        sync.Mutex
	delivered map[uint64]int
	failed    map[uint64]int
}

func newUpstream() *upstream {
	return &upstream{delivered: map[uint64]int{}, failed: map[uint64]int{}}
}

func (u *upstream) Settled(token uint64, delivered bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if delivered {
		u.delivered[token]++
	} else {
		u.failed[token]++
	}
}

func (u *upstream) settled() (d, f int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.delivered), len(u.failed)
}

func message(tr sink.Tracker, i int, writer string) *sink.Message {
	p := fmt.Appendf(nil, `{"MessageId":"m%d","Messages":[{"counter":%d}]}`, i, i)
	m := sink.NewMessage(len(p))
	m.SetPayload(p)
	m.Kind = sink.KindData
	m.Addr = sink.Addr{Publisher: "pub", Group: "g", Writer: writer}
	m.Tracker, m.Token = tr, uint64(i)
	m.Created = time.Now().UnixNano()
	return m
}

func counterOf(t *testing.T, payload string) int {
	t.Helper()
	i := strings.Index(payload, `"counter":`)
	if i < 0 {
		t.Fatalf("no counter in %s", payload)
	}
	n, err := strconv.Atoi(strings.TrimSuffix(payload[i+len(`"counter":`):], "}]}"))
	if err != nil {
		t.Fatalf("%s: %v", payload, err)
	}
	return n
}

func openLog(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	opts.Dir = dir
	if opts.Logger == nil {
		opts.Logger = testutil.Logger(t)
	}
	if opts.Publisher == "" {
		opts.Publisher = "pub"
	}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func startReader(t *testing.T, s *Stream, q *testQueue) *Reader {
	t.Helper()
	r, err := s.NewReader(q.name, q, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return r
}

func closeReader(t *testing.T, r *Reader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRedeliveredPrefixIsTheBridges(t *testing.T) {
	if RedeliveredPrefix != bridge.RedeliveredPrefix {
		t.Fatalf("storelog marks %q, bridge %q", RedeliveredPrefix, bridge.RedeliveredPrefix)
	}
}

// Messages are settled upstream once committed, and every consumer gets
// every record in order, each at its own pace: a consumer that settles
// nothing holds neither the producer nor the other consumer.
func TestAppendAndReadAtOwnPace(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{ClaimWindow: 16})
	defer l.Close()
	s, err := l.Stream("g")
	if err != nil {
		t.Fatal(err)
	}
	fast := &testQueue{name: "fast", auto: true}
	stuck := &testQueue{name: "stuck", guarantee: config.AtLeastOnce}
	startReader(t, s, fast)
	startReader(t, s, stuck)
	up := newUpstream()
	const n = 500
	for i := range n {
		s.Enqueue(message(up, i, "w"))
	}
	testutil.WaitFor(t, 10*time.Second, "all settled upstream", func() bool { d, _ := up.settled(); return d == n })
	testutil.WaitFor(t, 10*time.Second, "the fast consumer has everything", func() bool { return fast.count() == n })
	for i, p := range fast.payloads() {
		if c := counterOf(t, p); c != i {
			t.Fatalf("fast consumer: message %d carries counter %d", i, c)
		}
	}
	// The stuck one got its claim window and waits.
	testutil.WaitFor(t, 10*time.Second, "the stuck consumer has its window", func() bool { return stuck.count() == 16 })
	if st := s.Stats(); st.Records != n || st.Appended != n {
		t.Fatalf("stream %+v", st)
	}
	// It settles: it gets the rest, and the records everyone had go.
	for stuck.count() < n {
		stuck.settle(-1, true)
		testutil.WaitFor(t, 10*time.Second, "more", func() bool {
			stuck.mu.Lock()
			defer stuck.mu.Unlock()
			return len(stuck.got) > 0 || len(stuck.seen) == n
		})
	}
	stuck.settle(-1, true)
	testutil.WaitFor(t, 10*time.Second, "consumed records deleted", func() bool { return s.Stats().Records == 0 })
	for i, p := range stuck.payloads() {
		if c := counterOf(t, p); c != i {
			t.Fatalf("stuck consumer: message %d carries counter %d", i, c)
		}
	}
	if _, f := up.settled(); f != 0 {
		t.Fatalf("%d settled undelivered", f)
	}
}

// A restart continues every consumer from its cursor: an at-least-once one
// after what it settled, what it had been handed marked redelivered; an
// at-most-once one after its claim, nothing twice.
func TestRestartContinuesFromCursors(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{ClaimWindow: 8})
	s, _ := l.Stream("g")
	alo := &testQueue{name: "alo", guarantee: config.AtLeastOnce}
	amo := &testQueue{name: "amo"} // at-most-once: a window of 8/4 = 2
	ra, rm := startReader(t, s, alo), startReader(t, s, amo)
	up := newUpstream()
	const n = 40
	for i := range n {
		s.Enqueue(message(up, i, "w"))
	}
	testutil.WaitFor(t, 10*time.Second, "handed out", func() bool { return alo.count() == 8 && amo.count() == 2 })
	alo.settle(5, true) // 0..4 confirmed, 5..7 outstanding
	for range 7 {
		amo.settle(-1, true)
		testutil.WaitFor(t, 10*time.Second, "amo handed more", func() bool {
			amo.mu.Lock()
			defer amo.mu.Unlock()
			return len(amo.got) == 2
		})
	}
	amo.settle(1, true) // 0..14 written, 15 handed: the window is 15..16
	testutil.WaitFor(t, 10*time.Second, "amo's window", func() bool { return amo.count() == 17 })
	closeReader(t, ra)
	closeReader(t, rm)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	alo.settle(-1, false) // the queue closed with them unconfirmed
	amo.settle(-1, false)

	l = openLog(t, dir, Options{ClaimWindow: 8})
	defer l.Close()
	s, _ = l.Stream("g")
	if st := s.Stats(); st.LastSeq != n || st.FirstSeq != 6 { // 1..5 every consumer settled
		t.Fatalf("reopened stream %+v", st)
	}
	alo2 := &testQueue{name: "alo", guarantee: config.AtLeastOnce, auto: true}
	amo2 := &testQueue{name: "amo", auto: true}
	startReader(t, s, alo2)
	r2 := startReader(t, s, amo2)
	testutil.WaitFor(t, 10*time.Second, "alo continues", func() bool { return alo2.count() == n-5 })
	// Marked: at least what it had been handed and not confirmed (5..7),
	// at most its claim (the window past what it confirmed: up to 12), as
	// one prefix.
	marked := 0
	for i, p := range alo2.payloads() {
		want := i + 5
		if c := counterOf(t, p); c != want {
			t.Fatalf("alo after restart: message %d carries %d, want %d", i, c, want)
		}
		if strings.HasPrefix(p, `{"MessageId":"`+RedeliveredPrefix) {
			if marked != i {
				t.Fatalf("alo after restart: %s marked after unmarked ones", p)
			}
			marked++
		}
	}
	if marked < 3 || marked > 8 {
		t.Fatalf("alo after restart: %d marked redelivered, want 3 to 8", marked)
	}
	testutil.WaitFor(t, 10*time.Second, "amo continues", func() bool { return amo2.count() == n-17 })
	if c := counterOf(t, amo2.payloads()[0]); c != 17 {
		t.Fatalf("amo after restart starts at %d, want 17 (after its claim)", c)
	}
	if st := r2.Stats(); st.Abandoned != 2 {
		t.Fatalf("amo stats %+v: want 2 abandoned (handed, not written)", st)
	}
}

// Block: a full log makes the producer wait until the consumers free room.
func TestFullLogBlocks(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{MaxBytes: 4096, ClaimWindow: 4})
	defer l.Close()
	s, _ := l.Stream("g")
	q := &testQueue{name: "q", guarantee: config.AtLeastOnce}
	startReader(t, s, q)
	const n = 200
	done := produce(s, n)
	testutil.WaitFor(t, 10*time.Second, "the producer waits", func() bool { return s.Stats().Waits > 0 })
	select {
	case <-done:
		t.Fatal("the producer did not wait on a full log")
	default:
	}
	if st := s.Stats(); st.Bytes > 4096+512 {
		t.Fatalf("log holds %d bytes, bound 4096", st.Bytes)
	}
	// Settling lets it through, all of it, in order.
	settleAllInOrder(t, q, n, done)
}

// produce enqueues n messages to s from a goroutine; the channel closes
// when the last was taken.
func produce(s *Stream, n int) <-chan struct{} {
	up := newUpstream()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			s.Enqueue(message(up, i, "w"))
		}
	}()
	return done
}

// settleAllInOrder settles what q gets until it has n messages and the
// producer is done, and checks they came in order.
func settleAllInOrder(t *testing.T, q *testQueue, n int, done <-chan struct{}) {
	t.Helper()
	testutil.WaitFor(t, 20*time.Second, "everything through", func() bool {
		q.settle(-1, true)
		return q.count() == n
	})
	<-done
	for i, p := range q.payloads() {
		if c := counterOf(t, p); c != i {
			t.Fatalf("message %d carries %d", i, c)
		}
	}
}

// Drop-oldest: a full log removes its oldest records (counted); the
// consumer that did not have them skips them, and the producer never waits.
func TestFullLogDropsOldest(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{MaxBytes: 4096, Policy: config.DropOldest, ClaimWindow: 4})
	defer l.Close()
	s, _ := l.Stream("g")
	q := &testQueue{name: "q", guarantee: config.AtLeastOnce}
	startReader(t, s, q)
	up := newUpstream()
	const n = 200
	for i := range n {
		s.Enqueue(message(up, i, "w"))
	}
	testutil.WaitFor(t, 10*time.Second, "all settled upstream", func() bool { d, _ := up.settled(); return d == n })
	st := s.Stats()
	if st.Dropped == 0 || st.Bytes > 4096 || st.Waits != 0 {
		t.Fatalf("stream %+v: want drops, at most 4096 bytes, no waits", st)
	}
	testutil.WaitFor(t, 20*time.Second, "the newest arrives", func() bool {
		q.settle(-1, true)
		p := q.payloads()
		return len(p) > 0 && counterOf(t, p[len(p)-1]) == n-1
	})
	rs := s.Stats().Readers[0]
	if rs.Skipped == 0 || uint64(q.count())+rs.Skipped != n {
		t.Fatalf("reader %+v got %d: got + skipped must be %d", rs, q.count(), n)
	}
}

// MaxAge removes records older than it, read or not.
func TestMaxAge(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{MaxAge: 200 * time.Millisecond})
	defer l.Close()
	s, _ := l.Stream("g")
	q := &testQueue{name: "q", guarantee: config.AtLeastOnce}
	r, err := s.NewReader("q", q, ReaderOptions{}) // never started: reads nothing
	if err != nil {
		t.Fatal(err)
	}
	defer closeReader(t, r)
	up := newUpstream()
	for i := range 10 {
		s.Enqueue(message(up, i, "w"))
	}
	testutil.WaitFor(t, 10*time.Second, "expired", func() bool { st := s.Stats(); return st.Expired == 10 && st.Records == 0 })
}

// A message is settled upstream only once its record is in the file: when
// the log closes before the commit could run, it is settled undelivered.
func TestSettledOnlyWhenCommitted(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	s, _ := l.Stream("g")
	up := newUpstream()
	for i := range 50 {
		s.Enqueue(message(up, i, "w"))
	}
	testutil.WaitFor(t, 10*time.Second, "settled", func() bool { d, _ := up.settled(); return d == 50 })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	s.Enqueue(message(up, 50, "w"))
	if _, f := up.settled(); f != 1 {
		t.Fatalf("a message enqueued after Close: %d settled undelivered, want 1", f)
	}
	// Without a consumer nothing holds the records: they went at once.
	l = openLog(t, dir, Options{})
	defer l.Close()
	s, _ = l.Stream("g")
	if st := s.Stats(); st.LastSeq != 50 || st.Records != 0 {
		t.Fatalf("reopened: %+v", st)
	}
}

// A message its producer marked redelivered (an OPC UA notification the
// server republished after a restart) is not appended again when the log
// holds every message of its token: the previous process appended it.
func TestRedeliveredNotAppendedTwice(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	s, _ := l.Stream("g")
	up := newUpstream()
	for i := 1; i <= 5; i++ { // tokens 1..5: 1..4 whole, 5 may go on
		s.Enqueue(message(up, i, "w"))
	}
	for i := 6; i <= 7; i++ { // 6 handed over whole, 7 not
		s.Enqueue(message(up, i, "w"))
		if i == 6 {
			s.Handed(6)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "settled", func() bool { d, _ := up.settled(); return d == 7 })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, Options{})
	defer l.Close()
	s, _ = l.Stream("g")
	q := &testQueue{name: "q", auto: true}
	startReader(t, s, q)
	for i := 3; i <= 8; i++ {
		m := message(up, i, "w")
		m.SetPayload([]byte(strings.Replace(string(m.Payload()), `"MessageId":"`, `"MessageId":"`+RedeliveredPrefix, 1)))
		s.Enqueue(m)
	}
	m := message(up, 9, "w") // not marked: appended whatever its token
	m.Token = 2
	s.Enqueue(m)
	testutil.WaitFor(t, 10*time.Second, "appended", func() bool { return q.count() == 3 })
	var got []int
	for _, p := range q.payloads() {
		got = append(got, counterOf(t, p))
	}
	if fmt.Sprint(got) != "[7 8 9]" {
		t.Fatalf("after the restart the consumer got %v, want [7 8 9] (3 to 6 were in the log whole)", got)
	}
	if st := s.Stats(); st.Duplicates != 4 {
		t.Fatalf("stream %+v: want 4 duplicates", st)
	}
}

// Kinds a consumer does not take are passed over, its cursor moving past
// them.
func TestReaderAccept(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	s, _ := l.Stream("g")
	q := &testQueue{name: "fields", auto: true}
	r, err := s.NewReader("fields", q, ReaderOptions{Accept: func(k sink.Kind) bool { return k == sink.KindField }})
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	defer closeReader(t, r)
	up := newUpstream()
	for i := range 20 {
		m := message(up, i, "w")
		if i%2 == 1 {
			m.Kind, m.Addr.Field = sink.KindField, "f"
		}
		s.Enqueue(m)
	}
	testutil.WaitFor(t, 10*time.Second, "passed over", func() bool { return r.Stats().Acked == 20 })
	if q.count() != 10 {
		t.Fatalf("got %d, want the 10 field messages", q.count())
	}
}

// twoStreams opens a log of 1 MiB with policy and in it the stream
// "small" of 4 KiB and "other" without a bound of its own, each read by a
// started reader; q is small's reader's queue.
func twoStreams(t *testing.T, policy config.Policy) (small, other *Stream, q *testQueue) {
	t.Helper()
	l := openLog(t, t.TempDir(), Options{MaxBytes: 1 << 20, Policy: policy, ClaimWindow: 4})
	t.Cleanup(func() { l.Close() })
	small, err := l.OpenStream("small", StreamOptions{MaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	other, _ = l.Stream("other")
	q = &testQueue{name: "q", guarantee: config.AtLeastOnce}
	startReader(t, small, q)
	startReader(t, other, &testQueue{name: "q", guarantee: config.AtLeastOnce})
	return small, other, q
}

// A stream's own MaxBytes (a writer group's bound), block policy: its
// producer waits at its bound while another stream of the same log goes on;
// settling lets everything through, in order.
func TestStreamMaxBytesBlocks(t *testing.T) {
	s, other, q := twoStreams(t, config.Block)
	const n = 200
	done := produce(s, n)
	testutil.WaitFor(t, 10*time.Second, "the producer waits at the stream's bound", func() bool { return s.Stats().Waits > 0 })
	if st := s.Stats(); st.Bytes > 4096+512 {
		t.Fatalf("stream holds %d bytes, its bound 4096", st.Bytes)
	}
	// The other stream is not held: 200 messages go in without a wait.
	up2 := newUpstream()
	for i := range n {
		other.Enqueue(message(up2, i, "w"))
	}
	testutil.WaitFor(t, 10*time.Second, "the other stream appended", func() bool { d, _ := up2.settled(); return d == n })
	if w := other.Stats().Waits; w != 0 {
		t.Errorf("the other stream waited %d times", w)
	}
	settleAllInOrder(t, q, n, done)
}

// A stream's own MaxBytes with drop-oldest: its oldest records go
// (counted), the other stream keeps all of its own.
func TestStreamMaxBytesDropsOldest(t *testing.T) {
	s, other, q := twoStreams(t, config.DropOldest)
	up, up2 := newUpstream(), newUpstream()
	const n = 200
	for i := range n {
		s.Enqueue(message(up, i, "w"))
		other.Enqueue(message(up2, i, "w"))
	}
	testutil.WaitFor(t, 10*time.Second, "all settled upstream", func() bool {
		d, _ := up.settled()
		d2, _ := up2.settled()
		return d == n && d2 == n
	})
	st, ost := s.Stats(), other.Stats()
	if st.Dropped == 0 || st.Bytes > 4096 || st.Waits != 0 {
		t.Fatalf("stream %+v: want drops, at most 4096 bytes, no waits", st)
	}
	if ost.Dropped != 0 || ost.Records != n {
		t.Fatalf("the other stream %+v: want its %d records, none dropped", ost, n)
	}
	testutil.WaitFor(t, 20*time.Second, "the newest arrives", func() bool {
		q.settle(-1, true)
		p := q.payloads()
		return len(p) > 0 && counterOf(t, p[len(p)-1]) == n-1
	})
	if rs := s.Stats().Readers[0]; rs.Skipped == 0 || uint64(q.count())+rs.Skipped != n {
		t.Fatalf("reader %+v got %d: got + skipped must be %d", rs, q.count(), n)
	}
}

// A stream's own MaxAge removes its records older than it, not another
// stream's.
func TestStreamMaxAge(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	s, err := l.OpenStream("young", StreamOptions{MaxAge: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := l.Stream("other")
	var readers []*Reader
	for _, x := range []*Stream{s, other} {
		r, err := x.NewReader("q", &testQueue{name: "q", guarantee: config.AtLeastOnce}, ReaderOptions{}) // never started
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, r)
	}
	defer func() {
		for _, r := range readers {
			closeReader(t, r)
		}
	}()
	up := newUpstream()
	for i := range 10 {
		s.Enqueue(message(up, i, "w"))
		other.Enqueue(message(up, i, "w"))
	}
	testutil.WaitFor(t, 10*time.Second, "expired", func() bool { st := s.Stats(); return st.Expired == 10 && st.Records == 0 })
	if st := other.Stats(); st.Expired != 0 || st.Records != 10 {
		t.Errorf("the other stream %+v: want its 10 records", st)
	}
	if _, err := l.OpenStream("bad", StreamOptions{MaxBytes: -1}); err == nil {
		t.Error("a negative bound accepted")
	}
}

func keepAlive(i int) *sink.Message {
	p := fmt.Appendf(nil, `{"MessageId":"k%d","Messages":[{"MessageType":"ua-keepalive"}]}`, i)
	m := sink.NewMessage(len(p))
	m.SetPayload(p)
	m.Kind, m.Live = sink.KindData, true
	m.Addr = sink.Addr{Publisher: "pub", Group: "g", Writer: "w"}
	return m
}

// A keep-alive (a Live message) is not logged: a consumer that had every
// record before it gets it at once, after those records; one that is
// behind gets the records, not the stale keep-alive; and nothing of it is
// in the file, so a restart hands none out again.
func TestKeepAlivesPassTheLog(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{ClaimWindow: 4})
	s, err := l.Stream("g")
	if err != nil {
		t.Fatal(err)
	}
	fast := &testQueue{name: "fast", auto: true}
	stuck := &testQueue{name: "stuck", guarantee: config.AtLeastOnce}
	rf := startReader(t, s, fast)
	rs := startReader(t, s, stuck)
	up := newUpstream()
	for i := range 8 {
		s.Enqueue(message(up, i, "w"))
	}
	testutil.WaitFor(t, 10*time.Second, "the fast consumer has the records", func() bool { return fast.count() == 8 })
	testutil.WaitFor(t, 10*time.Second, "the stuck consumer has its window", func() bool { return stuck.count() == 4 })
	s.Enqueue(keepAlive(1))
	testutil.WaitFor(t, 10*time.Second, "the fast consumer has the keep-alive", func() bool { return fast.count() == 9 })
	if p := fast.payloads()[8]; !strings.Contains(p, `"k1"`) {
		t.Fatalf("the fast consumer's 9th message is %s", p)
	}
	// The stuck consumer had 4 of 8: it gets the other records as it
	// settles, and never the keep-alive.
	for n := stuck.count(); n < 8; n = stuck.count() {
		stuck.settle(-1, true)
		testutil.WaitFor(t, 10*time.Second, "more", func() bool { return stuck.count() > n })
	}
	stuck.settle(-1, true)
	for i, p := range stuck.payloads() {
		if c := counterOf(t, p); c != i {
			t.Fatalf("stuck consumer: message %d is %s", i, p)
		}
	}
	// Now caught up, it gets the next keep-alive too.
	s.Enqueue(keepAlive(2))
	testutil.WaitFor(t, 10*time.Second, "both have the second keep-alive", func() bool {
		return fast.count() == 10 && stuck.count() == 9
	})
	if p := stuck.payloads()[8]; !strings.Contains(p, `"k2"`) {
		t.Fatalf("the stuck consumer's last message is %s", p)
	}
	if st := rs.Stats(); st.KeepAlives != 1 || st.KeepAlivesDropped != 1 {
		t.Fatalf("stuck reader's keep-alives: %+v", st)
	}
	if st := rf.Stats(); st.KeepAlives != 2 || st.KeepAlivesDropped != 0 {
		t.Fatalf("fast reader's keep-alives: %+v", st)
	}
	if st := s.Stats(); st.Appended != 8 {
		t.Fatalf("appended %d, want the 8 records only", st.Appended)
	}
	// A keep-alive behind data that is not committed yet is dropped for
	// everyone: the data says more and comes first.
	stuck.auto = true
	fast.mu.Lock()
	fast.seen = nil
	fast.mu.Unlock()
	s.mu.Lock()
	s.committing = true // as while a commit runs
	s.mu.Unlock()
	s.Enqueue(keepAlive(3))
	s.mu.Lock()
	s.committing = false
	s.mu.Unlock()
	s.Enqueue(message(up, 8, "w"))
	testutil.WaitFor(t, 10*time.Second, "the record", func() bool { return fast.count() == 1 })
	if p := fast.payloads(); strings.Contains(p[0], `"k3"`) {
		t.Fatalf("the keep-alive came: %q", p)
	}
	closeReader(t, rf)
	closeReader(t, rs)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// After a restart the consumers continue with the next record: no
	// keep-alive is in the file.
	l = openLog(t, dir, Options{})
	defer l.Close()
	s, err = l.Stream("g")
	if err != nil {
		t.Fatal(err)
	}
	again := &testQueue{name: "fast", auto: true}
	startReader(t, s, again)
	s.Enqueue(message(up, 9, "w"))
	testutil.WaitFor(t, 10*time.Second, "the next record", func() bool { return again.count() >= 1 })
	for _, p := range again.payloads() {
		if strings.Contains(p, "keepalive") {
			t.Fatalf("a keep-alive came out of the file: %s", p)
		}
	}
}
