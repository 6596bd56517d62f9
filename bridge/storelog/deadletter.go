package storelog

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/bridge/sink"
)

// DefaultDeadLetterBytes bounds a dead-letter file.
const DefaultDeadLetterBytes = 64 << 20

// deadLetterLogInterval throttles the dead-letter log line.
const deadLetterLogInterval = 10 * time.Second

// DeadLetterFile keeps the messages brokers refused for good
// (sink.DeadLetters): one JSON line each, with the time, the sink, where
// the message was going, the reason and the payload. It is bounded: past
// MaxBytes the file becomes <path>.1 (replacing the previous one) and a
// new one starts, so the two hold at most twice the bound. Every message
// is counted and the refusals are logged with their reason (throttled).
type DeadLetterFile struct {
	path string
	max  int64
	log  *slog.Logger

	mu      sync.Mutex
	f       *os.File
	size    int64
	lastLog time.Time
	logged  uint64

	count, failed atomic.Uint64
}

// OpenDeadLetters opens (or creates) the dead-letter file at path, mode
// 0600, bounded by maxBytes (0: DefaultDeadLetterBytes).
func OpenDeadLetters(path string, maxBytes int64, log *slog.Logger) (*DeadLetterFile, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultDeadLetterBytes
	}
	if log == nil {
		log = slog.Default()
	}
	d := &DeadLetterFile{path: path, max: maxBytes, log: log}
	if err := d.open(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *DeadLetterFile) open() error {
	f, err := os.OpenFile(d.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("storelog: dead letters: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("storelog: dead letters: %w", err)
	}
	d.f, d.size = f, fi.Size()
	return nil
}

// Path is the file's path.
func (d *DeadLetterFile) Path() string { return d.path }

// Count is the number of messages kept since the file was opened.
func (d *DeadLetterFile) Count() uint64 { return d.count.Load() }

// deadLetter is one line of the file.
type deadLetter struct {
	Time    time.Time `json:"time"`
	Sink    string    `json:"sink"`
	Kind    string    `json:"kind"`
	Group   string    `json:"group"`
	Writer  string    `json:"writer,omitempty"`
	Field   string    `json:"field,omitempty"`
	Reason  string    `json:"reason"`
	Bytes   int       `json:"bytes"`
	Payload string    `json:"payload"`
}

// DeadLetter implements sink.DeadLetters.
func (d *DeadLetterFile) DeadLetter(sinkName string, m *sink.Message, refusal error) bool {
	reason := "refused"
	if refusal != nil {
		reason = refusal.Error()
	}
	line, err := json.Marshal(deadLetter{
		Time: time.Now().UTC(), Sink: sinkName, Kind: m.Kind.String(), Group: m.Addr.Group, Writer: m.Addr.Writer,
		Field: m.Addr.Field, Reason: reason, Bytes: m.Len(), Payload: string(m.Payload()),
	})
	if err != nil {
		d.failed.Add(1)
		return false
	}
	line = append(line, '\n')
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		d.failed.Add(1)
		return false
	}
	if d.size > 0 && d.size+int64(len(line)) > d.max {
		if err := d.rotate(); err != nil {
			d.failed.Add(1)
			d.log.Error("storelog: dead letters: rotating the file failed", "path", d.path, "err", err)
			return false
		}
	}
	n, err := d.f.Write(line)
	d.size += int64(n)
	if err != nil {
		d.failed.Add(1)
		d.log.Error("storelog: dead letters: writing failed", "path", d.path, "err", err)
		return false
	}
	total := d.count.Add(1)
	if now := time.Now(); now.Sub(d.lastLog) >= deadLetterLogInterval {
		d.log.Warn("a broker refused a message for good: kept in the dead-letter file and acknowledged",
			"sink", sinkName, "group", m.Addr.Group, "writer", m.Addr.Writer, "bytes", m.Len(), "reason", reason,
			"deadLetters", total-d.logged, "deadLettersTotal", total, "file", d.path)
		d.lastLog, d.logged = now, total
	}
	return true
}

// rotate moves the full file to <path>.1 and starts a new one (d.mu held).
func (d *DeadLetterFile) rotate() error {
	if err := d.f.Close(); err != nil {
		d.f = nil
		return err
	}
	d.f = nil
	if err := os.Rename(d.path, d.path+".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return d.open()
}

// Close closes the file.
func (d *DeadLetterFile) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	return err
}
