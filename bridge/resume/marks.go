package resume

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"
)

// Marks are what a writer group must know, to the last notification, when
// it starts again after its process died: the SequenceNumber each dataset
// writer is at (so that they go on, never used twice), the last upstream
// notification message the group handed to its queues (so that a message
// the server republishes is not sent again to a sink that had it), and, per
// writer, where each recent notification message began (so that a message
// replayed to the at-least-once sinks gets the SequenceNumbers it had).
//
// A resume record is written once a second; marks change with every
// notification message, so they live in a small file the process maps into
// its memory (one per group, <dir>/<group>.marks): a store into the mapping
// is a store into the kernel's page cache, which outlives the process, so
// a kill -9 loses none of them, and the hot path pays no system call for
// them. Sync (msync) makes them durable against a machine crash too; the
// group calls it with every resume record. Where the platform cannot map
// files, the marks are kept in memory and written at Sync.
//
// Layout (little endian): a header (magic, ring length, writer slots,
// subscription id, handled sequence number, the mark of the last resume
// record saved beside them), then one slot per writer: the
// FNV-64a hash of its name, its next SequenceNumber and data
// DataSetMessage count, and a ring of (notification message, SequenceNumber
// and count at its first DataSetMessage of the writer) entries.
//
// Concurrency: the setters and Slot are called by one goroutine at a time
// (the writer group's, under its lock); Sync may run beside them.

const (
	marksMagic  = "UAGMARK1"
	headerSize  = 32
	slotHead    = 24
	ringEntry   = 16
	maxRing     = 1 << 16
	maxSlots    = 1 << 20
	marksSuffix = ".marks"
)

// WriterMark is a writer's continuation point: the SequenceNumber of its
// next DataSetMessage and the data DataSetMessages it wrote (the key frame
// schedule).
type WriterMark struct {
	Seq    uint32
	Frames uint64
}

// RingMark is where a writer's DataSetMessages of one notification message
// began.
type RingMark struct {
	Seq    uint32
	Frames uint64
}

// Marks is one writer group's marks file.
type Marks struct {
	mapped // mu: write: Slot (remapping); read: Sync, Writer
	ring   int
	slots  int
	used   int            // slots handed out
	index  map[uint64]int // slot by name hash

	prev marksImage // what the file held when it was opened
}

// marksImage is a parsed marks file.
type marksImage struct {
	ok      bool
	sub     uint32
	handled uint32
	record  uint64
	ring    int
	writers map[uint64]prevWriter
}

type prevWriter struct {
	mark WriterMark
	ring []byte // its ring entries as they were
}

// MarksPath is the marks file of group in dir.
func MarksPath(dir, group string) string {
	return filepath.Join(dir, url.PathEscape(group)+marksSuffix)
}

// OpenMarks opens (or creates) the marks file of group in dir, keeping for
// Previous what it held, and lays it out anew for writers slots (more are
// added by Slot) with rings of ring entries (0: none: the group has no
// at-least-once sink to replay to).
func OpenMarks(dir, group string, writers, ring int) (*Marks, error) {
	if ring < 0 || ring > maxRing {
		return nil, fmt.Errorf("resume: marks ring of %d entries (at most %d)", ring, maxRing)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("resume: the state directory: %w", err)
	}
	m := &Marks{mapped: mapped{path: MarksPath(dir, group)}, ring: ring}
	old, err := os.ReadFile(m.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("resume: %w", err)
	default:
		m.prev = parseMarks(old)
	}
	// The new layout, with every writer the file knew at its continuation
	// point, replaces the file at once: a process killed now leaves the
	// old file or the new one.
	m.slots = max(writers, len(m.prev.writers), 4)
	img := make([]byte, headerSize+m.slots*m.slotSize())
	copy(img, marksMagic)
	binary.LittleEndian.PutUint32(img[8:], uint32(ring))
	binary.LittleEndian.PutUint32(img[12:], uint32(m.slots))
	// Until the group handles something, the file says what it said.
	binary.LittleEndian.PutUint32(img[16:], m.prev.sub)
	binary.LittleEndian.PutUint32(img[20:], m.prev.handled)
	binary.LittleEndian.PutUint64(img[24:], m.prev.record)
	m.index = make(map[uint64]int, m.slots)
	for h, w := range m.prev.writers {
		m.index[h] = m.used
		s := img[headerSize+m.used*m.slotSize():]
		binary.LittleEndian.PutUint64(s, h)
		binary.LittleEndian.PutUint64(s[8:], w.mark.Frames)
		binary.LittleEndian.PutUint32(s[16:], w.mark.Seq)
		binary.LittleEndian.PutUint32(s[20:], 1)
		m.used++
	}
	if err := writeAtomic(m.path, img); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(m.path, os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	m.file = f
	if err := m.remap(); err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

// remap sizes the file for m.slots and maps it (again); m.mu held for
// writing, or the marks not shared yet.
func (m *Marks) remap() error { return m.resize(headerSize + m.slots*m.slotSize()) }

// parseMarks reads a marks file; a file it cannot read is no marks (the
// group starts its writers at 1, as without one).
func parseMarks(b []byte) marksImage {
	var img marksImage
	if len(b) < headerSize || string(b[:8]) != marksMagic {
		return img
	}
	ring := int(binary.LittleEndian.Uint32(b[8:]))
	slots := int(binary.LittleEndian.Uint32(b[12:]))
	if ring > maxRing || slots > maxSlots {
		return img
	}
	size := slotHead + ring*ringEntry
	if len(b) < headerSize+slots*size {
		return img
	}
	img.ok, img.ring = true, ring
	img.sub = binary.LittleEndian.Uint32(b[16:])
	img.handled = binary.LittleEndian.Uint32(b[20:])
	img.record = binary.LittleEndian.Uint64(b[24:])
	img.writers = map[uint64]prevWriter{}
	for i := range slots {
		s := b[headerSize+i*size : headerSize+(i+1)*size]
		h := binary.LittleEndian.Uint64(s)
		if h == 0 || binary.LittleEndian.Uint32(s[20:]) == 0 {
			continue
		}
		img.writers[h] = prevWriter{
			mark: WriterMark{Frames: binary.LittleEndian.Uint64(s[8:]), Seq: binary.LittleEndian.Uint32(s[16:])},
			ring: append([]byte(nil), s[slotHead:]...),
		}
	}
	return img
}

func (m *Marks) slotSize() int { return slotHead + m.ring*ringEntry }

// Previous reports what the file held when it was opened: the subscription
// and the last notification message handed to the queues; ok is false
// without a readable file.
func (m *Marks) Previous() (sub, handled uint32, ok bool) {
	return m.prev.sub, m.prev.handled, m.prev.ok
}

// PreviousRecord is the mark of the last resume record saved beside these
// marks (SetRecord): a record that carries another one was saved by
// someone else since (another replica that held the group), and the marks
// no longer tell where the group stopped.
func (m *Marks) PreviousRecord() uint64 { return m.prev.record }

// SetRecord notes that a resume record marked r was saved beside these
// marks (the group marks its records, Record.Marks).
func (m *Marks) SetRecord(r uint64) {
	m.mu.RLock() // from the resume loop, beside Slot
	binary.LittleEndian.PutUint64(m.mem[24:], r)
	m.mu.RUnlock()
}

// PreviousRing is where the writer named name began its DataSetMessages of
// notification message n in the previous run, when the file still held it.
func (m *Marks) PreviousRing(name string, n uint32) (RingMark, bool) {
	w, ok := m.prev.writers[nameHash(name)]
	if !ok || m.prev.ring == 0 {
		return RingMark{}, false
	}
	e := w.ring[int(n%uint32(m.prev.ring))*ringEntry:]
	if binary.LittleEndian.Uint32(e[8:]) != n {
		return RingMark{}, false
	}
	return RingMark{Frames: binary.LittleEndian.Uint64(e), Seq: binary.LittleEndian.Uint32(e[12:])}, true
}

// Slot returns the slot of the writer named name and the continuation
// point it holds: the one the previous run left, or the one set in this
// run (a writer removed and added again); zero for a writer the file never
// knew. The file grows when needed.
func (m *Marks) Slot(name string) (int, WriterMark, error) {
	h := nameHash(name)
	if i, ok := m.index[h]; ok {
		s := m.mem[headerSize+i*m.slotSize():]
		return i, WriterMark{Frames: binary.LittleEndian.Uint64(s[8:]), Seq: binary.LittleEndian.Uint32(s[16:])}, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.used == m.slots {
		if m.slots >= maxSlots {
			return -1, WriterMark{}, fmt.Errorf("resume: %s: more than %d writers", m.path, maxSlots)
		}
		m.slots *= 2
		if err := m.remap(); err != nil {
			m.slots /= 2
			return -1, WriterMark{}, err
		}
		binary.LittleEndian.PutUint32(m.mem[12:], uint32(m.slots))
	}
	i := m.used
	m.used++
	m.index[h] = i
	s := m.mem[headerSize+i*m.slotSize():]
	binary.LittleEndian.PutUint64(s, h)
	binary.LittleEndian.PutUint32(s[20:], 1)
	return i, WriterMark{}, nil
}

// Writer reads writer slot i's continuation point; safe beside the
// setters (a value being stored reads as before or after).
func (m *Marks) Writer(i int) WriterMark {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.mem == nil || i < 0 || i >= m.used {
		return WriterMark{}
	}
	s := m.mem[headerSize+i*m.slotSize():]
	return WriterMark{Frames: binary.LittleEndian.Uint64(s[8:]), Seq: binary.LittleEndian.Uint32(s[16:])}
}

// SetHandled records that the notification messages of subscription sub up
// to seq were handed to the queues.
func (m *Marks) SetHandled(sub, seq uint32) {
	binary.LittleEndian.PutUint32(m.mem[16:], sub)
	binary.LittleEndian.PutUint32(m.mem[20:], seq)
}

// SetWriter records writer slot i's continuation point.
func (m *Marks) SetWriter(i int, wm WriterMark) {
	s := m.mem[headerSize+i*m.slotSize():]
	binary.LittleEndian.PutUint64(s[8:], wm.Frames)
	binary.LittleEndian.PutUint32(s[16:], wm.Seq)
}

// SetRing records where writer slot i's DataSetMessages of notification
// message n begin; nothing without a ring.
func (m *Marks) SetRing(i int, n uint32, rm RingMark) {
	if m.ring == 0 {
		return
	}
	e := m.mem[headerSize+i*m.slotSize()+slotHead+int(n%uint32(m.ring))*ringEntry:]
	binary.LittleEndian.PutUint64(e, rm.Frames)
	binary.LittleEndian.PutUint32(e[8:], n)
	binary.LittleEndian.PutUint32(e[12:], rm.Seq)
}

// RemoveMarks deletes a group's marks file (the group was removed).
func RemoveMarks(dir, group string) error {
	err := os.Remove(MarksPath(dir, group))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func nameHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	if s := h.Sum64(); s != 0 {
		return s
	}
	return 1
}

// mapped is a file mapped into memory (mapFile): the stores into mem reach
// the page cache, which outlives the process.
type mapped struct {
	path string
	mu   sync.RWMutex // write: remapping, Close; read: Sync
	file *os.File
	mem  []byte // the mapping (or, unmapped, the memory written at Sync)
}

// resize sizes the file and maps it (again); mu held for writing, or the
// file not shared yet.
func (m *mapped) resize(size int) error {
	mem, err := mapFile(m.file, m.mem, size, m.path)
	if err != nil {
		return err
	}
	m.mem = mem
	return nil
}

// Sync makes what was stored durable against a machine crash (a process
// that dies leaves it in the page cache anyway).
func (m *mapped) Sync() error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.mem == nil {
		return nil
	}
	return syncMapped(m.file, m.mem, m.path)
}

// Close syncs and releases the file.
func (m *mapped) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mem == nil {
		return nil
	}
	err := syncMapped(m.file, m.mem, m.path)
	if uerr := unmapMem(m.mem, m.path); err == nil {
		err = uerr
	}
	m.mem = nil
	if cerr := m.file.Close(); err == nil {
		err = cerr
	}
	return err
}
