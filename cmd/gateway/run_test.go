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

// isolate keeps a run of the gateway off the default ports and out of the
// working directory.
func isolate(t *testing.T) {
	t.Setenv("UAGATE_STATE_DIR", t.TempDir())
	t.Setenv("UAGATE_HTTP_LISTEN", "127.0.0.1:0")
	t.Setenv("UAGATE_SIM_LISTEN", "127.0.0.1:0")
	t.Setenv("UAGATE_MQTT_LISTEN", "127.0.0.1:0")
	t.Setenv("UAGATE_NATS_LISTEN", "127.0.0.1:0")
}

func TestRunDefaultEmbedded(t *testing.T) {
	isolate(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := cmdRunGateway(ctx, []string{"-out", "-", "-count", "3", "-interval", "100ms"}, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, errOut.String())
	}
	if ctx.Err() != nil {
		t.Fatalf("timed out before 3 messages; stderr:\n%s", errOut.String())
	}
	var data []string
	meta := 0
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var head struct{ MessageType string }
		if err := json.Unmarshal([]byte(line), &head); err != nil {
			t.Fatalf("%v\n%s", err, line)
		}
		switch head.MessageType {
		case "ua-data":
			data = append(data, line)
		case "ua-metadata":
			if len(data) > 0 {
				t.Fatalf("ua-metadata after data:\n%s", out.String())
			}
			meta++
		}
	}
	if meta != 1 || len(data) < 3 {
		t.Fatalf("%d metadata and %d data lines, want 1 and at least 3:\n%s", meta, len(data), out.String())
	}
	last := -1.0
	for i, line := range data {
		var nm struct {
			Messages struct { // one DataSetMessage per NetworkMessage: an object
				SequenceNumber int
				Payload        map[string]struct{ Value json.RawMessage }
			}
		}
		if err := json.Unmarshal([]byte(line), &nm); err != nil {
			t.Fatalf("line %d: %v\n%s", i+1, err, line)
		}
		if nm.Messages.SequenceNumber != i+1 {
			t.Fatalf("line %d: SequenceNumber %d, want %d", i+1, nm.Messages.SequenceNumber, i+1)
		}
		f, ok := nm.Messages.Payload["Counter"]
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
	if !strings.Contains(errOut.String(), "managed session Connected") {
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
