package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/gateway"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// startSimChild runs the simulation server in a child process (this test
// binary, see TestMain), so that its address space is not in the heap a
// test measures; it returns the endpoint URL. The child is interrupted when
// the test ends and dies with this process.
func startSimChild(t *testing.T, sim server.SimConfig) string {
	t.Helper()
	conf, err := json.Marshal(sim)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), simChildEnv+"="+string(conf))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	urlc := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), simChildReady); ok {
				urlc <- strings.TrimSpace(u)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	select {
	case u := <-urlc:
		return u
	case <-done:
		t.Fatalf("simulation server ended: %s", stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("simulation server not ready: %s", stderr.String())
	}
	return ""
}

// countSink discards every message and counts the ua-data ones.
type countSink struct {
	sink.Sink
	data atomic.Int64
}

func (c *countSink) Publish(m *sink.Message, ack sink.Acker) error {
	if m.Kind == sink.KindData {
		c.data.Add(1)
	}
	return c.Sink.Publish(m, ack)
}

// TestGatewayItemMemory guards the gateway's memory per monitored item: the
// whole runtime (browse selections expanded, writer groups, the client's item
// tables, the last-value cache) for 100,000 items of the simulation server
// in 10 writer groups, as the bench configures them. The live heap after the
// initial values arrived, minus the heap before, per item, must stay within
// a bound that the per-item structures meet with some room and that a
// duplicate copy of the node ids (≈ 50 B) or a second value cache would
// break; and the setup memory must have been given back to the OS
// (memory.go), so that what the process keeps mapped is close to what it
// uses. BENCHMARKS.md has the figures at 1,000,000 items.
func TestGatewayItemMemory(t *testing.T) {
	const perFolder = 1000
	folders := 100
	if raceEnabled {
		folders = 20 // 100,000 items take 45 s under the race detector
	}
	items := folders * perFolder
	url := startSimChild(t, server.SimConfig{Folders: folders, Variables: perFolder, Rates: []time.Duration{time.Hour},
		Types: []ua.TypeID{ua.TypeInt32}, Generators: []server.Generator{server.GeneratorCounter}, AlarmSources: -1})

	cfg := browseConfig(t, url, folders, perFolder, 10, config.WriterGroup{
		PublishingInterval: dur(100 * time.Millisecond), FieldEncoding: config.FieldDataValue,
	})

	heap := func() goruntime.MemStats {
		goruntime.GC()
		debug.FreeOSMemory()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		return ms
	}
	before := heap()
	var cs *countSink
	var lastRelease atomic.Pointer[[2]goruntime.MemStats]
	rt := startLibGateway(t, cfg, gateway.Options{
		Logger: quietLogger(),
		WrapSink: func(s sink.Sink) sink.Sink {
			cs = &countSink{Sink: s}
			return cs
		},
		OnMemReleased: func(before, after goruntime.MemStats) {
			lastRelease.Store(&[2]goruntime.MemStats{before, after})
		},
	})
	start := time.Now()
	waitUntil(t, nil, 3*time.Minute, "every item's initial value", func() bool {
		return runtimeNotifications(rt) >= uint64(items)
	})
	setup := time.Since(start)
	waitUntil(t, nil, time.Minute, "the setup memory given back", func() bool { return lastRelease.Load() != nil })
	rel := lastRelease.Load()
	after := heap()
	per := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(items)
	t.Logf("%d items in %d groups subscribed in %v; heap %.1f MB → %.1f MB: %.0f B/item live; at the release: mapped %.1f MB → %.1f MB, live %.1f MB",
		items, len(cfg.WriterGroups), setup.Round(time.Millisecond), float64(before.HeapAlloc)/1e6, float64(after.HeapAlloc)/1e6, per,
		float64(rel[0].HeapSys-rel[0].HeapReleased)/1e6, float64(rel[1].HeapSys-rel[1].HeapReleased)/1e6, float64(rel[1].HeapAlloc)/1e6)
	// The bound leaves some room over the per-item structures (the client's
	// item entries and node-id arena, the bridge's compact fields) and is
	// broken by a second copy of the node ids or of the value cache. About
	// 2 MB do not grow with the items (pooled message buffers, the encoders'
	// scratch): they weigh more per item at the race detector's 20,000.
	bound := 185 + float64(2<<20)/float64(items)
	if per > bound {
		t.Errorf("%.0f bytes of live heap per monitored item, want ≤ %.0f", per, bound)
	}
	if mapped, live := rel[1].HeapSys-rel[1].HeapReleased, rel[1].HeapAlloc; float64(mapped) > 1.25*float64(live)+16<<20 {
		t.Errorf("after the release %d bytes of heap stay mapped for %d live", mapped, live)
	}
	if cs.data.Load() == 0 {
		t.Error("no ua-data message reached the sink")
	}
}

// browseConfig is the configuration of the memory tests: the simulation
// server at url (its folders Load.F000 … of perFolder variables each), a
// file sink to /dev/null, and writer groups of perGroup writers, one per
// folder, each browsing its folder; settings holds the groups' other keys
// (its name, endpoint and writers are replaced). It is parsed as a file is.
func browseConfig(t *testing.T, url string, folders, perFolder, perGroup int, settings config.WriterGroup) *config.Config {
	t.Helper()
	c := standalone(url)
	c.Gateway = config.Gateway{StateDir: t.TempDir(), ShutdownTimeout: dur(5 * time.Second)}
	c.Sinks = config.Sinks{File: []config.FileSink{{Path: "/dev/null"}}}
	for g := 0; g*perGroup < folders; g++ {
		wg := settings
		wg.Name, wg.Endpoint, wg.Writers = fmt.Sprintf("g%03d", g), "sim", nil
		for f := g * perGroup; f < min((g+1)*perGroup, folders); f++ {
			wg.Writers = append(wg.Writers, config.DataSetWriter{
				ID: uint16(f + 1), Name: fmt.Sprintf("F%03d", f),
				Browse: []config.BrowseSelect{{Root: fmt.Sprintf("ns=1;s=Load.F%03d", f), Depth: 1, MaxNodes: perFolder}},
			})
		}
		c.WriterGroups = append(c.WriterGroups, wg)
	}
	cfg, _, err := config.Parse([]byte(marshalConfig(t, c)), "memory test")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runtimeNotifications is the notifications gw's writer groups received.
func runtimeNotifications(gw *gateway.Gateway) uint64 {
	n := uint64(0)
	for _, wg := range gw.Config().WriterGroups {
		if st, ok := gw.GroupStats(wg.Name); ok {
			n += st.Notifications
		}
	}
	return n
}

// startLibGateway starts a gateway on cfg and stops it when the test ends.
func startLibGateway(t *testing.T, cfg *config.Config, opts gateway.Options) *gateway.Gateway {
	t.Helper()
	gw, err := gateway.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := gw.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return gw
}
