package filesink

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sinktest"
)

// fileReceiver reads the lines of the file.
type fileReceiver struct {
	t    *testing.T
	path string
}

func (r fileReceiver) Received() [][]byte {
	b, err := os.ReadFile(r.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	return out
}

// TestConformance: a file in the test's directory; the receiver reads its
// lines, one message each.
func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Guarantee: config.AtMostOnce,
		Start: func(t *testing.T, _ sinktest.Options) *sinktest.Env {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			return &sinktest.Env{
				Sink: func(t *testing.T, _ sinktest.SinkOptions) sink.Sink {
					s, err := New(Config{Path: path})
					if err != nil {
						t.Fatal(err)
					}
					return s
				},
				Receive: func(t *testing.T) sinktest.Receiver { return fileReceiver{t, path} },
			}
		},
	})
}

// A second sink of the same file appends to it.
func TestFileSinkAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	s, err := New(FromConfig(config.FileSink{Path: path}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != "file:"+path {
		t.Fatalf("name %q", s.Name())
	}
	tr := sinktest.NewTracker()
	for _, from := range []int{0, 100} {
		s, err := New(Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		o := sinktest.StartOutput(t, s, sink.OutputOptions{})
		for i := from; i < from+100; i++ {
			o.Enqueue(sinktest.Message(tr, i, sink.KindData, sinktest.Addr))
		}
		sinktest.CloseQueue(t, o)
	}
	tr.Wait(t, 200, true)
	lines := fileReceiver{t, path}.Received()
	if len(lines) != 200 {
		t.Fatalf("%d lines, want 200", len(lines))
	}
	for i, l := range lines {
		if c, ok := sinktest.Counter(l); !ok || c != i {
			t.Fatalf("line %d: %q", i+1, l)
		}
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
	_ = s.Close(context.Background())
}
