package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
)

// benchLine parses the key=value line of one bridge.
func benchLine(t *testing.T, out, bridge string) map[string]float64 {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "bridge="+bridge+" ") {
			continue
		}
		kv := map[string]float64{}
		for _, f := range strings.Fields(l)[1:] {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				t.Fatalf("%q in %q is not key=value", f, l)
			}
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s=%q in %q: %v", k, v, l, err)
			}
			kv[k] = x
		}
		return kv
	}
	t.Fatalf("no line bridge=%s in\n%s", bridge, out)
	return nil
}

// TestBenchEndToEnd runs the whole harness at CI size for each bridge: real
// processes (this binary as sim, gateway and subscriber; the baseline built
// with the go tool; Debian's nats-server), 1,000 items at 100 ms for 2 s.
func TestBenchEndToEnd(t *testing.T) {
	for _, bridge := range []string{"baseline", "gateway"} {
		t.Run(bridge, func(t *testing.T) {
			t.Setenv(benchChildEnv, "1")
			var out, errb bytes.Buffer
			code := run([]string{"bench", "-items", "1000", "-variables", "500", "-rate", "100ms",
				"-duration", "2s", "-warmup", "1s", "-setup-timeout", "2m", "-per-group", "500",
				"-bridge", bridge, "-gateway-bin", os.Args[0]}, strings.NewReader(""), &out, &errb)
			if code != 0 {
				t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
			}
			kv := benchLine(t, out.String(), bridge)
			for _, k := range []string{"notifications_per_s", "gateway_cpu_us_per_notification", "p50_ms", "p99_ms", "lost", "rss_mb", "bytes_per_item"} {
				if _, ok := kv[k]; !ok {
					t.Errorf("no %s in the line", k)
				}
			}
			// 10,000 notifications/s are offered; a loaded CI machine under
			// the race detector still delivers most of them.
			if n := kv["notifications_per_s"]; n < 5000 || n > 11000 {
				t.Errorf("notifications_per_s=%v, want about 10000", n)
			}
			for _, k := range []string{"lost", "dup", "unknown", "bad", "sub_dropped"} {
				if kv[k] != 0 {
					t.Errorf("%s=%v, want 0", k, kv[k])
				}
			}
			if kv["gateway_cpu_us_per_notification"] <= 0 || kv["rss_mb"] <= 0 || kv["bytes_per_item"] <= 0 {
				t.Errorf("CPU or memory not measured: %v", kv)
			}
			if kv["rss_peak_mb"] < kv["rss_mb"] {
				t.Errorf("rss_peak_mb=%v below rss_mb=%v", kv["rss_peak_mb"], kv["rss_mb"])
			}
			// The latency includes the sampling delay (≤ 20 ms) and is
			// bounded by the window.
			if p50, p99 := kv["p50_ms"], kv["p99_ms"]; p50 <= 0 || p99 < p50 || p99 > 2000 {
				t.Errorf("p50_ms=%v p99_ms=%v", p50, p99)
			}
			if bridge == "gateway" {
				// The stages add up to the latency: the gateway's messages
				// carry every timestamp.
				for _, k := range []string{"sample_p50_ms", "up_p50_ms", "down_p50_ms", "sub_queue_p50_ms"} {
					if _, ok := kv[k]; !ok {
						t.Errorf("no %s in the line", k)
					}
				}
				if sum := kv["sample_p50_ms"] + kv["up_p50_ms"] + kv["down_p50_ms"]; sum <= 0 || kv["up_p50_ms"] <= 0 || kv["down_p50_ms"] <= 0 {
					t.Errorf("stages sample %v up %v down %v ms, want positive", kv["sample_p50_ms"], kv["up_p50_ms"], kv["down_p50_ms"])
				}
			}
			t.Log(strings.TrimSpace(out.String()))
		})
	}
}

func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-bridge", "nope"},
		{"-items", "0"},
		{"-items", "1500", "-variables", "1000"},
		{"-type", "String"},
		{"-rate", "10ms", "-sampling", "10ms"},
		{"-fields", "some"},
		{"extra"},
	} {
		var errb bytes.Buffer
		if code := run(append([]string{"bench"}, args...), nil, &bytes.Buffer{}, &errb); code != 2 {
			t.Errorf("%q: exit code %d, want 2 (usage); stderr %q", args, code, errb.String())
		}
	}
}
