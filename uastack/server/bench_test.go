package server

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// publishFixture is one server and one subscribed session, shared by the
// rounds of BenchmarkServerPublish (the setup takes seconds).
type publishFixture struct {
	srv      *Server
	ts       *testSession
	pub      *publisher
	received atomic.Int64
	items    int
}

var (
	benchMu      sync.Mutex
	benchFixture *publishFixture
)

// benchItems is the number of monitored items of BenchmarkServerPublish:
// UAGATE_BENCH_ITEMS, default 5,000; benchRate their period, UAGATE_BENCH_RATE,
// default 1 ms: Double counters sampled as fast as they move, so that 5 M
// changes/s are generated and the benchmark measures what is delivered.
func benchItems() int {
	if n, err := strconv.Atoi(os.Getenv("UAGATE_BENCH_ITEMS")); err == nil && n > 0 {
		return n
	}
	return 5000
}

func benchRate() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("UAGATE_BENCH_RATE")); err == nil && d >= time.Millisecond {
		return d
	}
	return time.Millisecond
}

func getPublishFixture(b *testing.B) *publishFixture {
	benchMu.Lock()
	defer benchMu.Unlock()
	if benchFixture != nil {
		return benchFixture
	}
	items := benchItems()
	const perFolder = 1000
	folders := (items + perFolder - 1) / perFolder
	testCerts(b)
	s, err := New(&Config{
		Address:     "127.0.0.1:0",
		Certificate: serverPair.der, Key: serverPair.key,
		Policies: []uasc.EndpointSecurity{{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}},
		Sim: SimConfig{Folders: folders, Variables: perFolder, Types: []ua.TypeID{ua.TypeDouble},
			Generators: []Generator{GeneratorCounter}, Rates: []time.Duration{benchRate()}, AlarmInterval: -1},
		MaxPublishRequestsPerSession: 64,
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ts, err := dialSession(ctx, s.URL(), dialOpts{})
	if err != nil {
		b.Fatal(err)
	}
	var cs ua.CreateSubscriptionResponse
	if _, err := ts.send(ctx, &ua.CreateSubscriptionRequest{RequestedPublishingInterval: 10, RequestedLifetimeCount: 10000,
		RequestedMaxKeepAliveCount: 100, PublishingEnabled: true}, &cs); err != nil {
		b.Fatal(err)
	}
	f := &publishFixture{srv: s, ts: ts, items: items}
	// Enough queue for the samples of one publishing interval (10 ms).
	queue := uint32(max(1, (10*time.Millisecond+benchRate()-1)/benchRate()))
	const batch = 10000
	for start := 0; start < items; start += batch {
		req := &ua.CreateMonitoredItemsRequest{SubscriptionID: cs.SubscriptionID, TimestampsToReturn: ua.TimestampsToReturnBoth}
		for i := start; i < min(start+batch, items); i++ {
			req.ItemsToCreate = append(req.ItemsToCreate, ua.MonitoredItemCreateRequest{
				ItemToMonitor:       ua.ReadValueID{NodeID: ua.MustParseNodeID(LoadNode(i/perFolder, i%perFolder)), AttributeID: attrValue},
				MonitoringMode:      ua.MonitoringModeReporting,
				RequestedParameters: ua.MonitoringParameters{ClientHandle: uint32(i), SamplingInterval: float64(benchRate()) / 1e6, QueueSize: queue, DiscardOldest: true},
			})
		}
		var resp ua.CreateMonitoredItemsResponse
		if _, err := ts.send(ctx, req, &resp); err != nil {
			b.Fatal(err)
		}
		for _, r := range resp.Results {
			if r.StatusCode != ua.StatusGood {
				b.Fatalf("create: %v", r.StatusCode)
			}
		}
	}
	f.pub = ts.startPublishing(32, func(r *ua.PublishResponse) {
		n := 0
		for _, eo := range r.NotificationMessage.NotificationData {
			if dcn, ok := eo.Value.(*ua.DataChangeNotification); ok {
				n += len(dcn.MonitoredItems)
			}
		}
		f.received.Add(int64(n))
	})
	benchFixture = f
	return f
}

// BenchmarkServerPublish measures the data change notifications the server
// delivers to one session on loopback (security None): b.N counts
// notifications received and decoded by the client, notifs/s is the rate.
// UAGATE_BENCH_ITEMS sets the number of items (default 50,000).
func BenchmarkServerPublish(b *testing.B) {
	f := getPublishFixture(b)
	b.ReportAllocs()
	// Let the pipeline fill before measuring.
	testutil.WaitFor(b, time.Minute, "the initial values", func() bool { return f.received.Load() >= int64(f.items) })
	b.ResetTimer()
	start := time.Now()
	cpu0 := cpuTime()
	base := f.received.Load()
	for f.received.Load()-base < int64(b.N) {
		time.Sleep(200 * time.Microsecond)
	}
	el := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	got := f.received.Load() - base
	// CPU time of the whole process (server and client) per notification:
	// less sensitive than the rate to what else runs on a shared machine.
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(got), "cpu-ns/notif")
	b.ReportMetric(float64(got)/el.Seconds(), "notifs/s")
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(el.Nanoseconds())/float64(got), "ns/notif")
}

func TestMain(m *testing.M) {
	if n, err := strconv.Atoi(os.Getenv("UAGATE_SIM_CHILD")); err == nil {
		runChildServer(n)
		os.Exit(0)
	}
	code := m.Run()
	benchMu.Lock()
	if f := benchFixture; f != nil {
		f.pub.halt()
		f.ts.ch.Close()
		_ = f.srv.Close()
	}
	benchMu.Unlock()
	if code == 0 && loadReport != "" {
		fmt.Print(loadReport)
	}
	os.Exit(code)
}

// cpuTime returns the user and system CPU time of the process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadReport is printed after the tests (the load test's figures).
var loadReport string
