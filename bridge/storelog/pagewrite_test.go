package storelog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/internal/testutil"
	bolt "go.etcd.io/bbolt"
)

// page builds a page of bbolt's format: header, then the elements' headers,
// then their keys and values (leaf: key, value; branch: key).
func page(size int, flags uint16, overflow uint32, kv ...[2]int) []byte {
	b := make([]byte, size)
	binary.LittleEndian.PutUint16(b[8:], flags)
	binary.LittleEndian.PutUint16(b[10:], uint16(len(kv)))
	binary.LittleEndian.PutUint32(b[12:], overflow)
	data := pageHeaderSize + len(kv)*pageElementSize
	for i, e := range kv {
		h := pageHeaderSize + i*pageElementSize
		pos := uint32(data - h)
		if flags == leafPageFlag {
			binary.LittleEndian.PutUint32(b[h+4:], pos)
			binary.LittleEndian.PutUint32(b[h+8:], uint32(e[0]))
			binary.LittleEndian.PutUint32(b[h+12:], uint32(e[1]))
		} else {
			binary.LittleEndian.PutUint32(b[h:], pos)
			binary.LittleEndian.PutUint32(b[h+4:], uint32(e[0]))
		}
		data += e[0] + e[1]
	}
	return b
}

func TestUsedLen(t *testing.T) {
	const ps = 32 << 10
	bad := page(ps, leafPageFlag, 0, [2]int{8, 100})
	binary.LittleEndian.PutUint32(bad[pageHeaderSize+4:], ps) // a value past the page
	tooMany := page(ps, branchPageFlag, 0)
	binary.LittleEndian.PutUint16(tooMany[10:], 0xffff) // more element headers than fit
	for _, c := range []struct {
		name string
		buf  []byte
		want int
	}{
		{"meta", page(ps, metaPageFlag, 0), 4 << 10},
		{"empty leaf", page(ps, leafPageFlag, 0), 4 << 10},
		{"leaf of small values", page(ps, leafPageFlag, 0, [2]int{8, 100}, [2]int{8, 100}), 4 << 10},
		// 16 + 3×16 + 3×(10+7680) = 23,134 bytes: six blocks.
		{"leaf of three parts", page(ps, leafPageFlag, 0, [2]int{10, 7680}, [2]int{10, 7680}, [2]int{10, 7680}), 24 << 10},
		{"leaf ending on a block", page(ps, leafPageFlag, 0, [2]int{8, 4096 - 16 - 16 - 8}), 4 << 10},
		{"leaf filled", page(ps, leafPageFlag, 0, [2]int{8, ps - 16 - 16 - 8}), ps},
		{"branch", page(ps, branchPageFlag, 0, [2]int{10, 0}, [2]int{10, 0}), 4 << 10},
		{"overflowing leaf", page(2*ps, leafPageFlag, 1, [2]int{8, ps}), 2 * ps},
		{"freelist", page(ps, 0x10, 0), ps},
		{"unknown flags", page(ps, 0x03, 0), ps},
		{"a value past the page", bad, ps},
		{"more elements than fit", tooMany, ps},
		{"not one page", page(ps/2, leafPageFlag, 0), ps / 2},
		{"short", make([]byte, 8), 8},
	} {
		if got := usedLen(c.buf, ps); got != c.want {
			t.Errorf("%s: usedLen %d, want %d", c.name, got, c.want)
		}
	}
}

// TestTrimmedPageWrites: the log's commits write their pages as far as
// they are used. A commit of one small record changes about five pages
// (the record's leaf, the stream's and the root bucket's leaves, the
// cursors, the meta page), 32 KiB each when written whole; trimmed, a
// block each. It fails when trimPageWrites no longer finds bbolt's writer
// (WrittenBytes stays 0).
func TestTrimmedPageWrites(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	s, _ := l.Stream("g")
	q := &testQueue{name: "q", guarantee: config.AtLeastOnce, auto: true}
	startReader(t, s, q)
	up := newUpstream()
	for i := range 20 {
		before := l.Stats()
		s.Enqueue(message(up, i, "w"))
		testutil.WaitFor(t, 10*time.Second, "settled", func() bool { d, _ := up.settled(); return d == i+1 })
		after := l.Stats()
		if after.WrittenBytes == 0 {
			t.Fatal("nothing counted as written: bbolt's page writer was not replaced")
		}
		commits, written := after.Commits-before.Commits, after.WrittenBytes-before.WrittenBytes
		if commits == 0 {
			t.Fatalf("record %d settled without a commit", i)
		}
		if per := written / commits; per > 6*writeBlock {
			t.Fatalf("record %d: %d bytes written in %d commits (%d each), want at most %d: pages written whole",
				i, written, commits, per, 6*writeBlock)
		}
	}
}

// TestTrimmedPagesReopen: pages reused again and again with less in them
// than before (records of 100 B to 100 KiB appended, read and deleted
// over many commits) leave stale bytes past what they hold; the file
// passes bbolt's consistency check, and a reopened log hands out every
// record it kept, intact.
func TestTrimmedPagesReopen(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{CommitInterval: -1})
	s, _ := l.Stream("g")
	q := &testQueue{name: "q", guarantee: config.AtLeastOnce}
	r := startReader(t, s, q)
	up := newUpstream()
	sizes := []int{100, 7000, 20 << 10, 3000, 100 << 10, 500}
	payload := func(i int) []byte {
		p := fmt.Appendf(nil, `{"MessageId":"m%d","Messages":[{"counter":%d,"pad":"`, i, i)
		p = append(p, bytes.Repeat([]byte{byte('a' + i%26)}, sizes[i%len(sizes)])...)
		return append(p, `"}]}`...)
	}
	const n, kept = 300, 40
	for i := range n {
		m := message(up, i, "w")
		m.SetPayload(payload(i))
		s.Enqueue(m)
		if i%7 == 6 && i < n-kept { // settle in bursts: pages emptied and refilled
			testutil.WaitFor(t, 10*time.Second, "handed", func() bool { return q.count() == i+1 })
			q.settle(-1, true)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "committed", func() bool { d, _ := up.settled(); return d == n })
	testutil.WaitFor(t, 10*time.Second, "handed", func() bool { return q.count() == n })
	q.mu.Lock()
	unsettled := len(q.got)
	q.mu.Unlock()
	q.settle(unsettled-kept, true) // all but the last kept
	testutil.WaitFor(t, 10*time.Second, "cursor", func() bool { return r.Stats().Acked == n-kept })
	closeReader(t, r)
	q.settle(-1, false)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt check: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	l = openLog(t, dir, Options{})
	defer l.Close()
	s, _ = l.Stream("g")
	q2 := &testQueue{name: "q", guarantee: config.AtLeastOnce, auto: true}
	startReader(t, s, q2)
	testutil.WaitFor(t, 10*time.Second, "the kept records", func() bool { return q2.count() >= kept })
	got := q2.payloads()
	if len(got) != kept {
		t.Fatalf("reopened: %d records handed out, want %d", len(got), kept)
	}
	for j, p := range got {
		i := n - kept + j
		want := string(payload(i))
		if p != want && p != redelivered(want) {
			t.Fatalf("reopened: record %d is %q…, want %q…", i, p[:min(len(p), 60)], want[:60])
		}
	}
}

// redelivered is want with its MessageId marked as sent again.
func redelivered(want string) string {
	const start = `{"MessageId":"`
	return start + RedeliveredPrefix + want[len(start):]
}
