package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/ua"
)

// ServeDebug serves the Go profiler (net/http/pprof under /debug/pprof/) and
// DebugPools (/debug/pools) on addr until ctx ends; wait waits for the
// server to stop. It never shares the API's listener and addr must be a
// loopback address: profiles show memory contents (strings, node ids), so
// only a process on the same host may read them. The address bound (for a
// port 0) is returned and logged.
func ServeDebug(ctx context.Context, addr string, logger *slog.Logger) (bound net.Addr, wait func(), err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, nil, errors.New("the profiler only listens on a loopback address (127.0.0.1, ::1 or localhost)")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pools", DebugPools)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Warn("profiler enabled (debug only)", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
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
	return ln.Addr(), wg.Wait, nil
}

// DebugPools writes, as JSON, the message buffer pool's counters per size
// class with the idle bytes of each, and the decoder's idle notification
// capacity: what the queues hold in flight at a burst and what the pools
// keep idle afterwards, which a heap profile shows only as one sum.
func DebugPools(w http.ResponseWriter, _ *http.Request) {
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
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(w, err)
	}
}
