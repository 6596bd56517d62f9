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

// verdictLine returns the verdict line of one bridge.
func verdictLine(t *testing.T, out, bridge string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "verdict bridge="+bridge+" ") {
			return l
		}
	}
	t.Fatalf("no verdict of %s in\n%s", bridge, out)
	return ""
}

// runBench runs gateway bench with args (this binary as the sim, the gateway
// and the subscriber) and returns its output.
func runBench(t *testing.T, args ...string) string {
	t.Helper()
	t.Setenv(benchChildEnv, "1")
	var out, errb bytes.Buffer
	code := run(append(append([]string{"bench"}, args...), "-gateway-bin", os.Args[0]), strings.NewReader(""), &out, &errb)
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	return out.String()
}

// TestBenchEndToEnd runs the whole harness at CI size for each bridge: real
// processes (this binary as sim, gateway and subscriber; the baseline built
// with the go tool; Debian's nats-server), 1,000 items at 100 ms for 2 s;
// and the gateway with node-opcua's counters upstream.
func TestBenchEndToEnd(t *testing.T) {
	for _, bridge := range []string{"baseline", "gateway", "nodeopcua"} {
		t.Run(bridge, func(t *testing.T) {
			args := []string{"-items", "1000", "-variables", "500", "-rate", "100ms",
				"-duration", "2s", "-warmup", "1s", "-setup-timeout", "2m", "-per-group", "500", "-bridge", bridge}
			if bridge == "nodeopcua" {
				bridge = "gateway"
				args = []string{"-upstream", "nodeopcua", "-items", "100", "-rate", "10ms",
					"-duration", "2s", "-warmup", "1s", "-setup-timeout", "2m"}
			}
			outs := runBench(t, args...)
			kv := benchLine(t, outs, bridge)
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
			for _, k := range []string{"lost", "dup", "unknown", "bad", "sub_cut", "nats_slow_consumers"} {
				if kv[k] != 0 {
					t.Errorf("%s=%v, want 0", k, kv[k])
				}
			}
			for _, k := range []string{"bridge_cores", "bridge_wakeups_per_s", "sub_cores", "machine_cpus", "machine_busy_cores", "others_cores"} {
				if _, ok := kv[k]; !ok {
					t.Errorf("no %s in the line", k)
				}
			}
			// The verdict names the bridge and the rate, sustained or not
			// (a loaded CI machine may not sustain it: it then says why).
			if v := verdictLine(t, outs, bridge); !strings.Contains(v, "/s") {
				t.Errorf("verdict %q names no rate", v)
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
			t.Log(strings.TrimSpace(outs))
		})
	}
}

// TestBenchFindMax: the steps from 100 items (1,000/s) to 500, then the
// summary line with the highest sustained rate and the cost at a tenth of
// it (a step of its own, 50 items).
func TestBenchFindMax(t *testing.T) {
	out := runBench(t, "-find-max", "-items", "100", "-max-items", "500", "-variables", "500", "-rate", "100ms",
		"-duration", "2s", "-warmup", "1s", "-setup-timeout", "2m", "-bridge", "gateway", "-max-p99", "5s")
	for _, want := range []string{"bridge=gateway ", "offered_per_s=1000 ", "max_sustained_per_s="} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "max_sustained_per_s=5000 ") && !strings.Contains(out, "tenth_per_s=500 ") {
		t.Errorf("no run at a tenth of the highest rate:\n%s", out)
	}
	t.Log(strings.TrimSpace(out))
}

// TestBenchIdle: the gateway at rest is measured and stated (CPU, wake-ups,
// allocations), with no notifications.
func TestBenchIdle(t *testing.T) {
	out := runBench(t, "-idle", "-duration", "2s", "-warmup", "1s", "-setup-timeout", "2m")
	kv := benchLine(t, out, "gateway")
	if kv["notifications"] != 0 || kv["lost"] != 0 {
		t.Errorf("notifications=%v lost=%v at rest", kv["notifications"], kv["lost"])
	}
	if !strings.Contains(out, "idle bridge=gateway cpu_percent_of_core=") || !strings.Contains(out, "allocs_per_s=") {
		t.Errorf("no idle line in\n%s", out)
	}
	t.Log(strings.TrimSpace(out))
}

func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-bridge", "nope"},
		{"-items", "0"},
		{"-items", "1500", "-variables", "1000"},
		{"-type", "String"},
		{"-rate", "10ms", "-sampling", "10ms"},
		{"-fields", "some"},
		{"-upstream", "other"},
		{"-upstream", "nodeopcua", "-bridge", "both"},
		{"-idle", "-find-max"},
		{"-find-max", "-items", "1000", "-max-items", "500"},
		{"extra"},
	} {
		var errb bytes.Buffer
		if code := run(append([]string{"bench"}, args...), nil, &bytes.Buffer{}, &errb); code != 2 {
			t.Errorf("%q: exit code %d, want 2 (usage); stderr %q", args, code, errb.String())
		}
	}
}
