package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/internal/testutil"
)

// TestRemoteCommands runs the default gateway and drives it with status and
// nodes add|list|remove through its REST API; the change is saved in the
// state directory and a second run picks it up.
func TestRemoteCommands(t *testing.T) {
	isolate(t)
	addr := testutil.FreeAddr(t)
	t.Setenv("UAGATE_HTTP_LISTEN", addr)
	state := os.Getenv("UAGATE_STATE_DIR")
	base := "http://" + addr

	start := func() (stop func() string) {
		ctx, cancel := context.WithCancel(context.Background())
		var errOut testutil.LockedBuffer // the log goes on being written from other goroutines
		done := make(chan error, 1)
		go func() { done <- cmdRunGateway(ctx, nil, io.Discard, &errOut) }()
		testutil.WaitFor(t, 20*time.Second, "the gateway ready", func() bool {
			resp, err := http.Get(base + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
		return func() string {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
			return errOut.String()
		}
	}
	remote := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		n := 1 // the command, and for nodes its verb, before the flags
		if args[0] == "nodes" {
			n = 2
		}
		code := run(append(args[:n:n], append([]string{"-api", base}, args[n:]...)...), nil, &out, &errOut)
		return out.String() + errOut.String(), code
	}

	healthcheck := func() (string, int) {
		var out bytes.Buffer
		code := run([]string{"healthcheck"}, nil, &out, &out) // the port from $UAGATE_HTTP_LISTEN
		return out.String(), code
	}
	if out, code := healthcheck(); code != 1 || !strings.Contains(out, "not healthy") {
		t.Fatalf("healthcheck without a gateway: exit %d\n%s", code, out)
	}
	stop := start()
	if out, code := healthcheck(); code != 0 || !strings.Contains(out, `healthy: {"ready":true`) {
		t.Fatalf("healthcheck: exit %d\n%s", code, out)
	}
	if out, code := remote("status"); code != 0 || !strings.Contains(out, "Connected") || !strings.Contains(out, "mqtt") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	if out, code := remote("nodes", "add", "-group", "demo", "-writer", "demo", "Load1=ns=1;s=Load.F000.V00001"); code != 0 {
		t.Fatalf("nodes add: exit %d\n%s", code, out)
	}
	testutil.WaitFor(t, 10*time.Second, "Load1 to have a value", func() bool {
		resp, err := http.Get(base + "/api/v1/writer-groups/demo/writers/demo/values")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		i := strings.Index(string(b), `"field":"Load1"`)
		return i >= 0 && strings.Contains(string(b[i:]), `"Value"`)
	})
	list := filepath.Join(t.TempDir(), "nodes.txt")
	if err := os.WriteFile(list, []byte("# two more\nLoad2=ns=1;s=Load.F000.V00002\n\nLoad3=ns=1;s=Load.F000.V00003\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := remote("nodes", "add", "-group", "demo", "-writer", "demo", "-file", list); code != 0 || !strings.Contains(out, "added 2 node(s)") {
		t.Fatalf("nodes add -file: exit %d\n%s", code, out)
	}
	if out, code := remote("nodes", "remove", "-group", "demo", "-writer", "demo", "-file", filepath.Join(t.TempDir(), "missing")); code != 2 {
		t.Fatalf("nodes remove with a missing -file: exit %d\n%s", code, out)
	}
	if out, code := remote("nodes", "remove", "-group", "demo", "-writer", "demo", "Load2", "Load3"); code != 0 {
		t.Fatalf("nodes remove: exit %d\n%s", code, out)
	}
	if out, code := remote("nodes", "add", "-group", "nope", "-writer", "x", "ns=1;s=X"); code != 1 || !strings.Contains(out, "404") {
		t.Fatalf("nodes add to an unknown group: exit %d\n%s", code, out)
	}
	// A node the server does not have: taken by the gateway, refused by the
	// server; the command says so and exits non-zero.
	if out, code := remote("nodes", "add", "-group", "demo", "-writer", "demo", "Ghost=ns=1;s=No.Such.Node"); code != 1 ||
		!strings.Contains(out, "refused by the server: Ghost (ns=1;s=No.Such.Node): BadNodeIdUnknown") {
		t.Fatalf("nodes add of an unknown node: exit %d\n%s", code, out)
	}
	if out, code := remote("nodes", "remove", "-group", "demo", "-writer", "demo", "Ghost"); code != 0 {
		t.Fatalf("nodes remove Ghost: exit %d\n%s", code, out)
	}
	logs := stop()
	saved, err := os.ReadFile(filepath.Join(state, config.SavedName))
	if err != nil || !strings.Contains(string(saved), "Load.F000.V00001") {
		t.Fatalf("the change was not saved (%v):\n%s\nlogs:\n%s", err, saved, logs)
	}

	stop = start()
	out, code := remote("nodes", "list", "-group", "demo", "-writer", "demo")
	if code != 0 || !strings.Contains(out, "Load1") {
		t.Fatalf("after a restart the added node is gone: exit %d\n%s", code, out)
	}
	if out, code := remote("nodes", "remove", "-group", "demo", "-writer", "demo", "Load1"); code != 0 {
		t.Fatalf("nodes remove: exit %d\n%s", code, out)
	}
	out, _ = remote("nodes", "list", "-group", "demo", "-writer", "demo")
	if strings.Contains(out, "Load1") {
		t.Fatalf("removed node still listed:\n%s", out)
	}
	stop()
}

// TestMetricsLatencies: the default gateway's /metrics has the publish
// round-trip histogram of its endpoint and the source-to-sink latency of its
// sinks, fed while it streams; and the counters of the runtime's own parts:
// its writer groups', its sinks' bytes, the WebSocket hub's, and the
// registered pools' (the decoder's notifications, the sinks' messages).
func TestMetricsLatencies(t *testing.T) {
	isolate(t)
	addr := testutil.FreeAddr(t)
	t.Setenv("UAGATE_HTTP_LISTEN", addr)
	ctx, cancel := context.WithCancel(context.Background())
	var errOut testutil.LockedBuffer
	done := make(chan error, 1)
	go func() { done <- cmdRunGateway(ctx, []string{"-interval", "100ms"}, io.Discard, &errOut) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v\n%s", err, errOut.String())
		}
	}()
	count := func(body, series string) float64 {
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, series) {
				var v float64
				if _, err := fmt.Sscan(strings.TrimSpace(line[strings.LastIndexByte(line, ' '):]), &v); err == nil {
					return v
				}
			}
		}
		return -1
	}
	testutil.WaitFor(t, 20*time.Second, "both latency histograms counting", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body := string(b)
		return count(body, `uagate_publish_round_trip_seconds_count{endpoint="sim"}`) > 3 &&
			count(body, `uagate_sink_latency_seconds_count{sink="mqtt"}`) > 3 &&
			count(body, `uagate_sink_latency_seconds_count{sink="nats"}`) > 3
	})
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	for _, c := range []struct {
		series string
		min    float64 // at least
	}{
		{`uagate_group_data_changes_total{endpoint="sim",`, 1},
		{`uagate_group_overflows_total{endpoint="sim",`, 0},
		{`uagate_writer_dataset_messages_total{`, 1},
		{`uagate_sink_sent_bytes_total{kind="mqtt",sink="mqtt"}`, 1},
		{`uagate_websocket_clients `, 0},
		{`uagate_pool_misses_total{pool="ua.DataChangeNotification"}`, 1},
		{`uagate_pool_hits_total{pool="sink.Message"}`, 1},
		{`uagate_bufferpool_oversize_total{pool="sink.messages"}`, 0},
	} {
		if v := count(body, c.series); v < c.min {
			t.Errorf("%s: %v, want at least %v (-1: no such series)", c.series, v, c.min)
		}
	}
}

// TestAPIEndpointSaved: an endpoint added through the API is applied and
// saved in the state directory. (The API has no route that changes what the
// runtime cannot apply — gateway, http, sink settings —; ApplyConfig refuses
// such a change before saving all the same.)
func TestAPIEndpointSaved(t *testing.T) {
	isolate(t)
	addr := testutil.FreeAddr(t)
	t.Setenv("UAGATE_HTTP_LISTEN", addr)
	state := os.Getenv("UAGATE_STATE_DIR")
	ctx, cancel := context.WithCancel(context.Background())
	var errOut testutil.LockedBuffer
	done := make(chan error, 1)
	go func() { done <- cmdRunGateway(ctx, nil, io.Discard, &errOut) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	base := "http://" + addr
	testutil.WaitFor(t, 20*time.Second, "the API", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	req, _ := http.NewRequest("POST", base+"/api/v1/endpoints", strings.NewReader(`{"name":"plc2","url":"opc.tcp://127.0.0.1:1"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 && resp.StatusCode != 200 {
		t.Fatalf("add endpoint: %d", resp.StatusCode)
	}
	saved, err := os.ReadFile(filepath.Join(state, config.SavedName))
	if err != nil || !strings.Contains(string(saved), "plc2") {
		t.Fatalf("the applied change was not saved: %v\n%s", err, saved)
	}
}
