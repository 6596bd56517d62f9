package resume

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
)

// Times are, per field of a writer group (by slot), the source timestamp
// of the last value the group handed to its queues: where a backfill from
// the server's history starts after values were lost, also when the process
// that delivered them died (a restart after the session's timeout, whose
// subscription is created anew). Like Marks, a small file mapped into
// memory: one store per notification, no system call, nothing a kill -9
// loses. Unlike the marks they are not synced with every resume record (a
// million fields would write 8 MB a second): the kernel writes them back
// in its own time, Close syncs them.
//
// Layout (little endian): magic, the number of slots, then one int64
// (UA DateTime) per slot.
//
// Concurrency: Set and Grow are called by one goroutine at a time (the
// writer group's, under its lock); Sync may run beside them.
type Times struct {
	mapped // mu: write: Grow; read: Sync
	n      int
	prev   []int64 // what the file held when it was opened
}

const (
	timesMagic  = "UAGTIME1"
	timesHeader = 16
	timesSuffix = ".times"
	maxTimes    = 1 << 26
)

// OpenTimes opens (or creates) the times of group in dir for n slots,
// keeping for Previous what the file held.
func OpenTimes(dir, group string, n int) (*Times, error) {
	if n < 0 || n > maxTimes {
		return nil, fmt.Errorf("resume: times of %d fields (at most %d)", n, maxTimes)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("resume: the state directory: %w", err)
	}
	t := &Times{mapped: mapped{path: filepath.Join(dir, url.PathEscape(group)+timesSuffix)}}
	old, err := os.ReadFile(t.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("resume: %w", err)
	default:
		t.prev = parseTimes(old)
	}
	t.n = max(n, len(t.prev))
	img := make([]byte, timesHeader+8*t.n)
	copy(img, timesMagic)
	binary.LittleEndian.PutUint64(img[8:], uint64(t.n))
	for i, v := range t.prev {
		binary.LittleEndian.PutUint64(img[timesHeader+8*i:], uint64(v))
	}
	if err := writeAtomic(t.path, img); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(t.path, os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	t.file = f
	if err := t.mapFile(); err != nil {
		f.Close()
		return nil, err
	}
	return t, nil
}

func parseTimes(b []byte) []int64 {
	if len(b) < timesHeader || string(b[:8]) != timesMagic {
		return nil
	}
	n := binary.LittleEndian.Uint64(b[8:])
	if n > maxTimes || uint64(len(b)) < timesHeader+8*n {
		return nil
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[timesHeader+8*i:]))
	}
	return out
}

// Previous is slot i's timestamp as the file held it when opened (0:
// none).
func (t *Times) Previous(i int) int64 {
	if i < 0 || i >= len(t.prev) {
		return 0
	}
	return t.prev[i]
}

// Set records slot i's last delivered source timestamp; a slot beyond the
// file is ignored (Grow first).
func (t *Times) Set(i int, v int64) {
	if i >= 0 && i < t.n {
		binary.LittleEndian.PutUint64(t.mem[timesHeader+8*i:], uint64(v))
	}
}

// Grow makes room for n slots.
func (t *Times) Grow(n int) error {
	if n <= t.n {
		return nil
	}
	if n > maxTimes {
		return fmt.Errorf("resume: times of %d fields (at most %d)", n, maxTimes)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.n
	t.n = max(n, 2*old)
	if err := t.mapFile(); err != nil {
		t.n = old
		return err
	}
	binary.LittleEndian.PutUint64(t.mem[8:], uint64(t.n))
	return nil
}

// mapFile sizes the file for t.n slots and maps it (again).
func (t *Times) mapFile() error { return t.resize(timesHeader + 8*t.n) }
