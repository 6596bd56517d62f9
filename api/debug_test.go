package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestServeDebug: the profiler and the pool counters on a loopback address
// of their own, refused anywhere else, stopped with the context.
func TestServeDebug(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:6060", "example.com:6060", "no-port"} {
		if _, _, err := ServeDebug(context.Background(), addr, quiet); err == nil {
			t.Errorf("%s: served", addr)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	bound, wait, err := ServeDebug(ctx, "127.0.0.1:0", quiet)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + bound.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/: %d\n%.300s", code, body)
	}
	code, body := get("/debug/pools")
	var pools struct {
		Classes                          []struct{ Size, IdleBytes int }
		IdleBytes, NotificationIdleBytes int
	}
	if err := json.Unmarshal([]byte(body), &pools); code != 200 || err != nil {
		t.Errorf("/debug/pools: %d %v\n%s", code, err, body)
	}
	cancel()
	wait()
	if _, err := http.Get("http://" + bound.String() + "/debug/pools"); err == nil {
		t.Error("still serving after the context ended")
	}
}
