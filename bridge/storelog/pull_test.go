package storelog

import (
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
)

// pullAll pulls every record the reader has, keeping the counters, until
// f says stop after limit records (limit < 0: no limit).
func pullAll(t *testing.T, r *Reader, limit int) []int {
	t.Helper()
	var got []int
	_, err := r.Pull(func(m *sink.Message) bool {
		if limit >= 0 && len(got) == limit {
			return false
		}
		if m.Addr.Writer != "w" || m.Kind != sink.KindData || m.Created == 0 {
			t.Errorf("record %d: writer %q kind %v created %d", m.Token, m.Addr.Writer, m.Kind, m.Created)
		}
		got = append(got, counterOf(t, string(m.Payload())))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func counting(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A pull reader takes the committed records when its owner asks, in order;
// what its callback refused stays for the next Pull; its cursor survives a
// restart, and the records it took are deleted.
func TestPullReader(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	s, _ := l.Stream("sp")
	r, err := s.NewPullReader("node")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.NewPullReader("node"); err == nil {
		t.Fatal("a second reader of the same consumer")
	}
	other, _ := l.Stream("other")
	if _, err := startReader(t, other, &testQueue{name: "q", auto: true}).Pull(func(*sink.Message) bool { return true }); err != ErrNotPull {
		t.Fatalf("Pull of a queue's reader: %v", err)
	}
	up := newUpstream()
	for i := range 30 {
		s.Enqueue(message(up, i, "w"))
	}
	testutil.WaitFor(t, 10*time.Second, "committed", func() bool { d, _ := up.settled(); return d == 30 })
	if got := pullAll(t, r, 10); !equalInts(got, counting(0, 10)) {
		t.Fatalf("first pull %v", got)
	}
	if got := pullAll(t, r, 5); !equalInts(got, counting(10, 15)) {
		t.Fatalf("second pull %v", got)
	}
	if st := r.Stats(); st.Acked != 15 || st.BacklogMessages != 15 || st.Delivered != 15 {
		t.Fatalf("reader %+v", st)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openLog(t, dir, Options{})
	defer l.Close()
	s, _ = l.Stream("sp")
	r, err = s.NewPullReader("node")
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.FirstSeq != 16 || st.Records != 15 {
		t.Fatalf("reopened %+v: the 15 records taken are gone", st)
	}
	for i := 30; i < 40; i++ {
		s.Enqueue(message(up, i, "w"))
	}
	testutil.WaitFor(t, 10*time.Second, "committed", func() bool { d, _ := up.settled(); return d == 40 })
	if got := pullAll(t, r, -1); !equalInts(got, counting(15, 40)) {
		t.Fatalf("after the restart %v", got)
	}
	if got := pullAll(t, r, -1); len(got) != 0 {
		t.Fatalf("pulled again %v", got)
	}
	testutil.WaitFor(t, 10*time.Second, "taken records deleted", func() bool { return s.Stats().Records == 0 })
	if err := r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Pull(func(*sink.Message) bool { return true }); err != ErrClosed {
		t.Fatalf("Pull after Close: %v", err)
	}
}

// A pull reader made before the stream's first record starts at it after
// a restart, though it had taken nothing (its cursor was saved with the
// records).
func TestPullReaderNewConsumerSaved(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	s, _ := l.Stream("sp")
	if _, err := s.NewPullReader("node"); err != nil {
		t.Fatal(err)
	}
	up := newUpstream()
	for i := range 5 {
		s.Enqueue(message(up, i, "w"))
	}
	testutil.WaitFor(t, 10*time.Second, "committed", func() bool { d, _ := up.settled(); return d == 5 })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, Options{})
	defer l.Close()
	s, _ = l.Stream("sp")
	r, err := s.NewPullReader("node")
	if err != nil {
		t.Fatal(err)
	}
	if got := pullAll(t, r, -1); !equalInts(got, counting(0, 5)) {
		t.Fatalf("after the restart %v", got)
	}
}

// A give-way stream in a log whose policy is block: it never waits for
// room, and when the log is full its oldest records go (counted as dropped
// and skipped by its reader), for its own appends and for a block stream's,
// which counts them as room. Once the give-way stream holds nothing, the
// block stream waits as before.
func TestGiveWay(t *testing.T) {
	const maxBytes = 8192
	l := openLog(t, t.TempDir(), Options{MaxBytes: maxBytes, ClaimWindow: 4})
	defer l.Close()
	sp, err := l.OpenStream("sp", StreamOptions{GiveWay: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sp.NewPullReader("node")
	if err != nil {
		t.Fatal(err)
	}
	up := newUpstream()
	const n = 400
	for i := range n {
		sp.Enqueue(message(up, i, "w"))
	}
	testutil.WaitFor(t, 10*time.Second, "committed", func() bool { d, _ := up.settled(); return d == n })
	st := sp.Stats()
	if st.Waits != 0 || st.Dropped == 0 || st.Bytes > maxBytes || !st.GiveWay {
		t.Fatalf("give-way stream %+v: want no waits, drops, at most %d bytes", st, maxBytes)
	}
	kept := st.Records

	// A block stream with a consumer that settles nothing: its records
	// take the give-way stream's room.
	g, _ := l.Stream("g")
	q := &testQueue{name: "q", guarantee: config.AtLeastOnce}
	startReader(t, g, q)
	for i := range 20 {
		g.Enqueue(message(up, 1000+i, "w"))
	}
	testutil.WaitFor(t, 10*time.Second, "the block stream's records committed", func() bool { d, _ := up.settled(); return d == n+20 })
	if gs, ss := g.Stats(), sp.Stats(); gs.Waits != 0 || gs.Dropped != 0 || gs.Records != 20 || ss.Records >= kept || gs.Bytes+ss.Bytes > maxBytes {
		t.Fatalf("block stream %+v, give-way stream %+v (had %d records)", gs, ss, kept)
	}

	// The give-way stream's reader skips what was dropped and gets the
	// newest records in order.
	got := pullAll(t, r, -1)
	if len(got) == 0 || got[len(got)-1] != n-1 || !equalInts(got, counting(n-len(got), n)) {
		t.Fatalf("pulled %v", got)
	}
	if rs := r.Stats(); rs.Skipped+uint64(len(got)) != n {
		t.Fatalf("reader %+v: skipped + pulled = %d, want %d", rs, rs.Skipped+uint64(len(got)), n)
	}

	// Nothing left to give: the block stream waits for its consumer.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			g.Enqueue(message(up, 2000+i, "w"))
		}
	}()
	testutil.WaitFor(t, 10*time.Second, "the block stream waits", func() bool { return g.Stats().Waits > 0 })
	testutil.WaitFor(t, 20*time.Second, "everything through", func() bool {
		q.settle(-1, true)
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}

// After a restart, the records a consumer's durable cursor has not passed
// stay until its reader is made, though the log commits meanwhile (the
// readers are made one by one after Open), for loadGrace; a consumer that
// does not come back within it holds nothing.
func TestCursorsKeepRecordsUntilReaders(t *testing.T) {
	for _, grace := range []bool{true, false} {
		dir := t.TempDir()
		l := openLog(t, dir, Options{})
		s, _ := l.Stream("g")
		r, _ := s.NewPullReader("node")
		up := newUpstream()
		for i := range 10 {
			s.Enqueue(message(up, i, "w"))
		}
		testutil.WaitFor(t, 10*time.Second, "committed", func() bool { d, _ := up.settled(); return d == 10 })
		pullAll(t, r, 3)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if !grace {
			defer func(g time.Duration) { loadGrace = g }(loadGrace)
			loadGrace = 0
		}
		l = openLog(t, dir, Options{})
		s, _ = l.Stream("g")
		x, _ := l.Stream("x")
		x.Enqueue(message(up, 100, "w"))
		testutil.WaitFor(t, 10*time.Second, "a commit", func() bool { d, _ := up.settled(); return d == 11 })
		r, err := s.NewPullReader("node")
		if err != nil {
			t.Fatal(err)
		}
		got := pullAll(t, r, -1)
		if want := counting(3, 10); grace && !equalInts(got, want) || !grace && len(got) != 0 {
			t.Errorf("grace %v: pulled %v", grace, got)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
