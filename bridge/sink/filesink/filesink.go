// Package filesink is the file output: every message as one line (its JSON
// payload, then '\n') appended to a file, or written to stdout for "-".
//
// It is at-most-once: a message counts as delivered once written to the
// file descriptor (one write call per line, so lines of a crash are whole or
// missing, never interleaved); it is not fsynced. The file is opened by
// Connect in append mode, created with mode 0644 when missing, and synced
// and closed by Close; stdout is never closed.
package filesink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
)

// Config of a file sink.
type Config struct {
	Name string // default "file:<path>"
	Path string // file to append to; "-" for stdout
}

// FromConfig maps the configuration model's file sink.
func FromConfig(c config.FileSink) Config { return Config{Name: c.Name, Path: c.Path} }

// Sink writes JSON lines. Publish and Connect are called by one Output only.
type Sink struct {
	name string
	path string

	mu     sync.Mutex // guards w against Close racing Publish
	w      io.Writer
	f      *os.File // nil for stdout or a caller's writer
	closed bool
	line   []byte // payload + '\n', reused
}

// New returns a file sink; nothing is opened before Connect.
func New(c Config) (*Sink, error) {
	if c.Path == "" {
		return nil, errors.New("filesink: path is empty (use \"-\" for stdout)")
	}
	name := c.Name
	if name == "" {
		name = "file:" + c.Path
	}
	return &Sink{name: name, path: c.Path}, nil
}

// NewWriter returns a sink writing to w (which it never closes).
func NewWriter(name string, w io.Writer) *Sink {
	return &Sink{name: name, path: "", w: w}
}

// Name implements sink.Sink.
func (s *Sink) Name() string { return s.name }

// Guarantee implements sink.Sink: at-most-once.
func (s *Sink) Guarantee() config.Guarantee { return config.AtMostOnce }

// Connect opens the file (once).
func (s *Sink) Connect(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return fmt.Errorf("filesink %s: closed", s.name)
	case s.w != nil:
		return nil
	case s.path == "-":
		s.w = os.Stdout
		return nil
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("filesink %s: %w", s.name, err)
	}
	s.f, s.w = f, f
	return nil
}

// Publish writes m's payload and a newline in one write and confirms at once.
func (s *Sink) Publish(m *sink.Message, ack sink.Acker) error {
	s.mu.Lock()
	if s.w == nil {
		s.mu.Unlock()
		return sink.ErrNotConnected
	}
	s.line = append(append(s.line[:0], m.Payload()...), '\n')
	_, err := s.w.Write(s.line)
	s.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("filesink %s: %w", s.name, err)
	}
	ack.Confirmed(m, err)
	return nil
}

// Close syncs and closes the file. Nothing is pending: Publish confirms
// before it returns.
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	f := s.f
	s.w, s.f = nil, nil
	if f == nil {
		return nil
	}
	return errors.Join(f.Sync(), f.Close())
}
