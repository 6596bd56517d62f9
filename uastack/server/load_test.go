package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
	"github.com/uagate/gateway/uastack/uasc"
)

// The many-sessions load test mirrors the .NET stack's
// ServerManySessionsLoadTest: N sessions, each on its own secure channel with
// one subscription (1000 ms) and one monitored item on a shared node that a
// writer session changes every 500 ms; connects are throttled and retried (5
// attempts); it reports the establishment rate, the errors and the sessions
// that received notifications in a steady-state window, and fails unless every
// session was established and notified.
//
// Settings (environment):
//
//	UAGATE_LOAD_SESSIONS         sessions with security None (default 500; 0 skips)
//	UAGATE_LOAD_SECURE_SESSIONS  sessions with Basic256Sha256 SignAndEncrypt (default 100; 0 skips)
//	UAGATE_LOAD_CONNECTS         concurrent connects (default 4 × GOMAXPROCS)
//	UAGATE_LOAD_STEADY           steady-state window (default 3s; .NET uses 60s)
//	UAGATE_LOAD_EXTERNAL         1: the server runs in a child process (automatic
//	                             when the sessions need more file descriptors
//	                             than one process may open)
//
// For example, 10,000 sessions (without -race: the race detector allows at
// most 8128 goroutines):
//
//	UAGATE_LOAD_SESSIONS=10000 UAGATE_LOAD_SECURE_SESSIONS=0 \
//	  go test -run TestServerManySessions -v -timeout 30m ./uastack/server/

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

func TestServerManySessions(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	for _, c := range []struct {
		name   string
		n      int
		policy string
		mode   ua.MessageSecurityMode
	}{
		{"None", envInt("UAGATE_LOAD_SESSIONS", 500), uasc.SecurityPolicyNone, ua.MessageSecurityModeNone},
		{"Basic256Sha256_SignAndEncrypt", envInt("UAGATE_LOAD_SECURE_SESSIONS", 100), uasc.SecurityPolicyBasic256Sha256, ua.MessageSecurityModeSignAndEncrypt},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.n == 0 {
				t.Skip("0 sessions")
			}
			r := runManySessions(t, c.n, c.policy, c.mode)
			line := fmt.Sprintf("load %s: %d sessions, %d established in %.1f s (%.0f sessions/s, %.1f ms CPU each in the test process), %d connect errors, %d retries, %d/%d notified in %v, server %s\n",
				c.name, c.n, r.established, r.connect.Seconds(), float64(r.established)/r.connect.Seconds(),
				float64(r.connectCPU.Microseconds())/1000/float64(max(r.established, 1)), r.failed, r.retries,
				r.notified, r.established, r.steady, r.where)
			t.Log(line)
			loadReport += line
			if r.established != c.n {
				t.Errorf("%d of %d sessions established; last error: %v", r.established, c.n, r.lastErr)
			}
			if r.notified != r.established {
				t.Errorf("%d of %d sessions received no notification in %v", r.established-r.notified, r.established, r.steady)
			}
		})
	}
}

type loadResult struct {
	established, failed, retries, notified int
	connect, steady, connectCPU            time.Duration
	lastErr                                error
	where                                  string
}

// loadServerConfig is the server configuration of the load test, in this
// process or in the child.
func loadServerConfig(n int) *Config {
	return &Config{
		Address:                      "127.0.0.1:0",
		Policies:                     DefaultPolicies(),
		MaxSessionCount:              n + 16,
		MaxSubscriptionCount:         n + 16,
		MaxChannelCount:              n + 64,
		MaxPublishRequestsPerSession: 8,
		Sim:                          SimConfig{Folders: -1, AlarmInterval: -1},
		Transport:                    &uacp.Config{MaxPendingHandshakes: 1024},
	}
}

// needFiles reports whether n sessions in one process (two sockets each) need
// more file descriptors than the process may open.
func needFiles(n int) bool {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return false
	}
	return uint64(2*n+256) > lim.Max
}

func runManySessions(t *testing.T, n int, policy string, mode ua.MessageSecurityMode) loadResult {
	testCerts(t)
	var res loadResult
	url := ""
	if os.Getenv("UAGATE_LOAD_EXTERNAL") == "1" || needFiles(n) {
		url = startChildServer(t, n)
		res.where = "in a child process"
	} else {
		cfg := loadServerConfig(n)
		cfg.Certificate, cfg.Key = serverPair.der, serverPair.key
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		url = s.URL()
		res.where = "in process"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	small := &uacp.Config{ReceiveBufferSize: 8192, SendBufferSize: 8192}
	eps, err := uasc.GetEndpoints(ctx, url, small)
	if err != nil {
		t.Fatal(err)
	}
	// The writer changes the shared node every 500 ms.
	writer, err := dialSession(ctx, url, dialOpts{endpoints: eps, transport: small})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.ch.Close()
	stopWriter := make(chan struct{})
	var writerWG sync.WaitGroup
	writerWG.Add(1)
	go func() {
		defer writerWG.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for v := 1.0; ; v++ {
			select {
			case <-stopWriter:
				return
			case <-tick.C:
				_, _ = writer.writeValue(ctx, NodeSetpoint, ua.NewDoubleVariant(v))
			}
		}
	}()
	defer func() { close(stopWriter); writerWG.Wait() }()

	type loadSession struct {
		ts       *testSession
		pub      *publisher
		notified atomic.Bool
		counting atomic.Bool
	}
	sessions := make([]*loadSession, n)
	connects := envInt("UAGATE_LOAD_CONNECTS", 4*runtime.GOMAXPROCS(0))
	sem := make(chan struct{}, max(1, connects))
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	cpu0 := cpuTime()
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var last error
			for attempt := 0; attempt < 5; attempt++ {
				if attempt > 0 {
					mu.Lock()
					res.retries++
					mu.Unlock()
					time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
				}
				ls, err := openLoadSession(ctx, url, policy, mode, eps, small)
				if err != nil {
					last = err
					continue
				}
				s := &loadSession{ts: ls}
				s.pub = ls.startPublishing(2, func(r *ua.PublishResponse) {
					if s.counting.Load() && len(r.NotificationMessage.NotificationData) > 0 {
						s.notified.Store(true)
					}
				})
				sessions[i] = s
				return
			}
			mu.Lock()
			res.failed++
			res.lastErr = last
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.connect = time.Since(start)
	res.connectCPU = cpuTime() - cpu0
	for _, s := range sessions {
		if s != nil {
			res.established++
		}
	}
	defer func() {
		// Closing the channels is enough: the server drops the sessions on
		// Close (or the child exits).
		for _, s := range sessions {
			if s != nil {
				s.pub.halt()
				s.ts.ch.Close()
			}
		}
	}()
	// Steady state: every session must see a data change in the window;
	// res.steady is how long that took (the window when some did not).
	window := envDuration("UAGATE_LOAD_STEADY", 3*time.Second)
	for _, s := range sessions {
		if s != nil {
			s.counting.Store(true)
		}
	}
	notified := func() int {
		n := 0
		for _, s := range sessions {
			if s != nil && s.notified.Load() {
				n++
			}
		}
		return n
	}
	start = time.Now()
	testutil.Eventually(window, func() bool { return notified() == res.established })
	res.steady = time.Since(start)
	res.notified = notified()
	return res
}

// openLoadSession opens one session of the load test: channel, session,
// subscription at 1000 ms, one item on the shared node.
func openLoadSession(ctx context.Context, url, policy string, mode ua.MessageSecurityMode, eps []ua.EndpointDescription, tr *uacp.Config) (*testSession, error) {
	ts, err := dialSession(ctx, url, dialOpts{policy: policy, mode: mode, endpoints: eps, transport: tr, timeout: 10 * time.Minute})
	if err != nil {
		return nil, err
	}
	var cs ua.CreateSubscriptionResponse
	if _, err := ts.send(ctx, &ua.CreateSubscriptionRequest{RequestedPublishingInterval: 1000, RequestedLifetimeCount: 600,
		RequestedMaxKeepAliveCount: 10, PublishingEnabled: true}, &cs); err != nil {
		ts.ch.Close()
		return nil, err
	}
	r, err := ts.monitor(ctx, cs.SubscriptionID, 500, 1, nil, NodeSetpoint)
	if err != nil || r[0].StatusCode != ua.StatusGood {
		ts.ch.Close()
		if err == nil {
			err = r[0].StatusCode
		}
		return nil, err
	}
	return ts, nil
}

// startChildServer runs the load test's server in a child process (this test
// binary, see TestMain) and returns its URL. The child exits when its stdin
// closes.
func startChildServer(t *testing.T, n int) string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "UAGATE_SIM_CHILD="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if url, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return url
		}
	}
	t.Fatalf("child server did not start: %v", sc.Err())
	return ""
}

// runChildServer is the child's side: a load test server until stdin closes.
func runChildServer(n int) {
	cfg := loadServerConfig(n)
	s, err := New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child server:", err)
		os.Exit(1)
	}
	if err := s.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "child server:", err)
		os.Exit(1)
	}
	fmt.Println("READY " + s.URL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	st := s.Stats()
	fmt.Fprintf(os.Stderr, "child server: %d sessions, %d notifications, %d publish responses, %d too busy\n",
		st.Sessions, st.Notifications, st.PublishResponses, st.TooBusy)
	_ = s.Close()
}
