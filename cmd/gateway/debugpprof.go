package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync"
	"time"

	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/ua"
)

// debugPprofEnv names the environment variable that opts into the Go
// profiler of `gateway run`: a loopback address (127.0.0.1:6060, [::1]:0)
// where /debug/pprof/ is served. It is off by default and never shares the
// API's listener: profiles show memory contents (strings, node ids), so only
// a process on the same host may read them, and a non-loopback address is
// refused rather than exposed. It exists to measure the gateway's memory per
// item (BENCHMARKS.md, issue 10) on a real deployment-sized configuration.
// Beside /debug/pprof/ it serves /debug/pools: the message buffer pool per
// size class and the decoder's idle notification capacity, as JSON.
const debugPprofEnv = "UAGATE_DEBUG_PPROF"

// startDebugPprof serves net/http/pprof on addr (which must be a loopback
// address) until ctx ends; the returned function waits for the server to
// stop. The address really bound is logged (for a port 0).
func startDebugPprof(ctx context.Context, addr string, logger *slog.Logger) (wait func(), err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", debugPprofEnv, addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%s=%q: the profiler only listens on a loopback address (127.0.0.1, ::1 or localhost)", debugPprofEnv, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", debugPprofEnv, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pools", servePoolStats)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Warn("profiler enabled (debug only)", "env", debugPprofEnv, "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("profiler stopped", "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return wg.Wait, nil
}

// debugPprofAddr is the opted-in profiler address, or "".
func debugPprofAddr() string { return os.Getenv(debugPprofEnv) }

// servePoolStats writes the message buffer pool's counters per size class,
// with the idle and counted-out bytes of each, as JSON: what the queues hold
// in flight at a burst and what the pool keeps idle afterwards, which the
// heap profile shows only as one sum (BufferPool.Get).
func servePoolStats(w http.ResponseWriter, _ *http.Request) {
	type class struct {
		Size      int
		IdleBytes int
		pooling.PoolStats
	}
	st := sink.MessageBufferStats()
	out := struct {
		Classes   []class
		IdleBytes int
		Oversize  uint64
		// The decoder's pooled notification slices (ua.MaxIdlePooledBytes).
		NotificationIdleBytes    int
		NotificationRefused      uint64
		NotificationRefusedBytes uint64
	}{Oversize: st.Oversize, NotificationIdleBytes: ua.IdlePooledBytes()}
	out.NotificationRefused, out.NotificationRefusedBytes = ua.IdlePooledRefused()
	for _, c := range st.Classes {
		if c.Hits+c.Misses == 0 {
			continue
		}
		out.Classes = append(out.Classes, class{Size: c.Size, IdleBytes: c.Idle * c.Size, PoolStats: c.PoolStats})
		out.IdleBytes += c.Idle * c.Size
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}
