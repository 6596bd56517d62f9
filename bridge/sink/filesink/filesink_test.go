package filesink

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
)

type countTracker struct{ delivered, failed chan uint64 }

func (c countTracker) Settled(tok uint64, delivered bool) {
	if delivered {
		c.delivered <- tok
	} else {
		c.failed <- tok
	}
}

func run(t *testing.T, s *Sink, from, n int) {
	t.Helper()
	o, err := sink.NewOutput(s, sink.OutputOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o.Start()
	tr := countTracker{make(chan uint64, n), make(chan uint64, n)}
	for i := from; i < from+n; i++ {
		m := sink.NewMessage(32)
		m.SetPayload(fmt.Appendf(nil, `{"counter":%d}`, i))
		m.Tracker, m.Token = tr, uint64(i)
		o.Enqueue(m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(tr.delivered) != n || len(tr.failed) != 0 {
		t.Fatalf("%d delivered, %d undelivered, want %d delivered", len(tr.delivered), len(tr.failed), n)
	}
}

// One JSON line per message, appended across runs.
func TestFileSinkAppendsLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	s, err := New(FromConfig(config.FileSink{Path: path}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != "file:"+path || s.Guarantee() != config.AtMostOnce {
		t.Fatalf("name %q guarantee %v", s.Name(), s.Guarantee())
	}
	run(t, s, 0, 100)
	s2, _ := New(Config{Path: path})
	run(t, s2, 100, 50)

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	i := 0
	for sc.Scan() {
		var body struct{ Counter int }
		if err := json.Unmarshal(sc.Bytes(), &body); err != nil || body.Counter != i {
			t.Fatalf("line %d: %q (%v)", i+1, sc.Text(), err)
		}
		i++
	}
	if i != 150 {
		t.Fatalf("%d lines, want 150", i)
	}
}

func TestFileSinkErrors(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "path is empty") {
		t.Fatalf("empty path: %v", err)
	}
	s, _ := New(Config{Path: filepath.Join(t.TempDir(), "missing", "out.jsonl")})
	if err := s.Connect(context.Background()); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("Connect into a missing directory: %v", err)
	}
	if err := s.Publish(sink.NewMessage(1), nil); err != sink.ErrNotConnected {
		t.Fatalf("Publish before Connect: %v", err)
	}
	_ = s.Close(context.Background())
	if err := s.Connect(context.Background()); err == nil {
		t.Fatal("Connect after Close")
	}
}
