package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestRunDefaultEmbedded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := cmdRunGateway(ctx, []string{"-count", "3", "-interval", "100ms"}, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, errOut.String())
	}
	if ctx.Err() != nil {
		t.Fatalf("timed out before 3 messages; stderr:\n%s", errOut.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), out.String())
	}
	last := -1.0
	for i, line := range lines {
		var nm struct {
			MessageType string
			Messages    []struct {
				Payload map[string]struct{ Value json.RawMessage }
			}
		}
		if err := json.Unmarshal([]byte(line), &nm); err != nil {
			t.Fatalf("line %d: %v\n%s", i+1, err, line)
		}
		if nm.MessageType != "ua-data" || len(nm.Messages) != 1 {
			t.Fatalf("line %d: not a ua-data message with one DataSetMessage:\n%s", i+1, line)
		}
		f, ok := nm.Messages[0].Payload["Counter"]
		if !ok {
			t.Fatalf("line %d: no Counter field:\n%s", i+1, line)
		}
		var v float64
		if err := json.Unmarshal(f.Value, &v); err != nil {
			t.Fatalf("line %d: Counter value %s: %v", i+1, f.Value, err)
		}
		if v <= last {
			t.Fatalf("line %d: Counter %v after %v", i+1, v, last)
		}
		last = v
	}
	if !strings.Contains(errOut.String(), "session Connected") {
		t.Errorf("no connected status on stderr:\n%s", errOut.String())
	}
}

func TestRunUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-nodes", "ns=x;;"},
		{"-nodes", " , "},
		{"-interval", "0s"},
		{"extra"},
	} {
		err := cmdRunGateway(context.Background(), args, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"run", "-nodes", "ns=x;;"}, nil, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "-nodes") {
		t.Errorf("exit code %d, stderr %q; want 2 and a message naming -nodes", code, stderr.String())
	}
}
