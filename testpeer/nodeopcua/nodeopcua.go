// Package nodeopcua starts the node-opcua test peer (testpeer/server.mjs) as a child
// process for interop tests. It is imported only by tests.
//
// The peer needs Node.js and the npm packages of testpeer/, installed by
// scripts/install-node-opcua.sh. When they are missing, Start fails the test: an
// interop test that silently skips proves nothing.
//
// Each Server is owned by the test that started it: Start registers a cleanup that
// stops it (SIGTERM, then SIGKILL after a grace period) and waits for the process, and
// the child also exits by itself when the test binary dies, because its stdin is a
// pipe from this process.
package nodeopcua

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Node ids of the peer's address space (namespace 1, the server's own).
const (
	NodeDemo        = "ns=1;s=Demo"
	NodeCounter     = "ns=1;s=Demo.Counter"     // Double, +1 every CounterInterval
	NodeInt32       = "ns=1;s=Demo.Int32"       // Int32 -42
	NodeString      = "ns=1;s=Demo.String"      // String "Hello, gateway"
	NodeBoolean     = "ns=1;s=Demo.Boolean"     // Boolean true
	NodeDoubleArray = "ns=1;s=Demo.DoubleArray" // Double[] {1.5, 2.5, 3.5, 4.5}
	NodeSetpoint    = "ns=1;s=Demo.Setpoint"    // Double, writable, initially 0
	NodeLevel       = "ns=1;s=Demo.Level"       // Int16, writable, initially 0
	NodeAdd         = "ns=1;s=Demo.Add"         // method Add(a Double, b Double) -> Double, on NodeDemo
	NodeLarge       = "ns=1;s=Demo.Large"       // folder of LargeCount Int32 variables

	// DefaultLargeCount is the number of variables in NodeLarge by default.
	DefaultLargeCount = 5000

	// ApplicationURI is the peer's application URI (also in its certificate).
	ApplicationURI = "urn:uagate:testpeer:node-opcua"
	// ResourcePath is the path of the endpoint URL.
	ResourcePath = "/UA/TestServer"
)

// LargeNode returns the node id of variable i of NodeLarge; its value is i.
func LargeNode(i int) string { return fmt.Sprintf("ns=1;s=Demo.Large.V%05d", i) }

// CounterNode returns the node id of counter i of the folder Demo.Counters
// (Env "COUNTERS=N"): an Int32 that counts the ticks of CounterInterval, all
// counters with the same value and source timestamp at each tick, reported
// at every change (MinimumSamplingInterval 0). With "HISTORY_VALUES=N" the
// counters and NodeCounter are Historizing, their last N values kept.
func CounterNode(i int) string { return fmt.Sprintf("ns=1;s=Demo.Counters.V%05d", i) }

// Users the peer accepts with a UserName token. Any other name or password is
// refused with BadUserAccessDenied.
var Users = map[string]string{
	"user1": "password1",
	"admin": "admin-secret",
}

// OperationLimits are the server's OperationLimits; zero fields keep node-opcua's
// defaults.
type OperationLimits struct {
	MaxNodesPerRead                          int
	MaxNodesPerWrite                         int
	MaxNodesPerBrowse                        int
	MaxNodesPerMethodCall                    int
	MaxMonitoredItemsPerCall                 int
	MaxNodesPerRegisterNodes                 int
	MaxNodesPerTranslateBrowsePathsToNodeIds int
}

func (l OperationLimits) env() []string {
	var env []string
	add := func(name string, v int) {
		if v > 0 {
			env = append(env, name+"="+strconv.Itoa(v))
		}
	}
	add("MAX_NODES_PER_READ", l.MaxNodesPerRead)
	add("MAX_NODES_PER_WRITE", l.MaxNodesPerWrite)
	add("MAX_NODES_PER_BROWSE", l.MaxNodesPerBrowse)
	add("MAX_NODES_PER_METHOD_CALL", l.MaxNodesPerMethodCall)
	add("MAX_MONITORED_ITEMS_PER_CALL", l.MaxMonitoredItemsPerCall)
	add("MAX_NODES_PER_REGISTER_NODES", l.MaxNodesPerRegisterNodes)
	add("MAX_NODES_PER_TRANSLATE_BROWSE_PATHS_TO_NODE_IDS", l.MaxNodesPerTranslateBrowsePathsToNodeIds)
	return env
}

// Options configure a peer. The zero value is a complete configuration.
type Options struct {
	// Port is the TCP port on 127.0.0.1; 0 picks a free one.
	Port int
	// PKIDir holds the server's PKI (server/ and user/ stores); "" means a new
	// directory from t.TempDir(). Client certificates are accepted automatically.
	PKIDir string
	// LargeCount is the number of variables in NodeLarge: 0 means
	// DefaultLargeCount, a negative value none (a faster start).
	LargeCount int
	// CounterInterval is the period of NodeCounter; 0 means 100 ms.
	CounterInterval time.Duration
	// Limits sets the server's OperationLimits, to test request splitting.
	Limits OperationLimits
	// Env holds extra KEY=VALUE settings for server.mjs.
	Env []string
	// StartTimeout bounds the wait for READY; 0 means 2 minutes (loading
	// node-opcua and the standard nodeset takes seconds on a busy machine).
	StartTimeout time.Duration
	// Verbose forwards the server's stderr to t.Log as it comes. Without it the
	// output is kept (the last 64 KiB) and shown when the start fails or the test
	// has failed.
	Verbose bool
}

// Server is a running node-opcua peer.
type Server struct {
	// URL is the endpoint URL, opc.tcp://127.0.0.1:<Port>/UA/TestServer.
	URL string
	// Port is the TCP port the server listens on; it stays the same across Restart.
	Port int
	// PKIDir is the server's PKI directory; it stays the same across Restart.
	PKIDir string

	t    testing.TB
	opts Options
	dir  string // testpeer/
	node string // node executable

	mu   sync.Mutex
	proc *process // nil when stopped
}

// process is one run of node server.mjs.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File      // our end of the child's stdin pipe; closing it stops the child
	ready  chan string   // receives the URL from the READY line
	exited chan struct{} // closed when Wait returned
	err    error         // from Wait, valid after exited is closed
	out    *tail
}

const (
	defaultStartTimeout = 2 * time.Minute
	stopGrace           = 10 * time.Second
	tailSize            = 64 << 10
)

// Dir returns the testpeer directory (the one holding server.mjs), or an error
// saying why it cannot be found. UAGATE_TESTPEER_DIR overrides the lookup.
func Dir() (string, error) {
	if d := os.Getenv("UAGATE_TESTPEER_DIR"); d != "" {
		return d, nil
	}
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		d := filepath.Dir(filepath.Dir(file))
		if fileExists(filepath.Join(d, "server.mjs")) {
			return d, nil
		}
		tried = append(tried, d)
	}
	// Built with -trimpath: walk up from the working directory (a test runs in
	// its package directory) to the module root.
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		c := filepath.Join(d, "testpeer")
		if fileExists(filepath.Join(c, "server.mjs")) {
			return c, nil
		}
		tried = append(tried, c)
		if fileExists(filepath.Join(d, "go.mod")) || filepath.Dir(d) == d {
			break
		}
	}
	return "", fmt.Errorf("testpeer/server.mjs not found (looked in %s)", strings.Join(tried, ", "))
}

// Installed reports whether node and the node-opcua package are installed, and if not,
// why.
func Installed() error {
	dir, err := Dir()
	if err != nil {
		return err
	}
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("node (Node.js) not found in PATH: %w", err)
	}
	if !fileExists(filepath.Join(dir, "node_modules", "node-opcua", "package.json")) {
		return fmt.Errorf("%s missing", filepath.Join(dir, "node_modules", "node-opcua"))
	}
	return nil
}

// Start starts a peer and waits until it accepts connections. It fails the test when
// the peer is not installed or does not become ready in time, dumping its output.
// The server is stopped when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if err := Installed(); err != nil {
		t.Fatalf("node-opcua not installed: run scripts/install-node-opcua.sh (%v)", err)
	}
	dir, _ := Dir()
	node, _ := exec.LookPath("node")
	s := &Server{t: t, opts: opts, dir: dir, node: node, Port: opts.Port, PKIDir: opts.PKIDir}
	if s.PKIDir == "" {
		s.PKIDir = t.TempDir()
	}
	t.Cleanup(func() {
		if t.Failed() {
			s.mu.Lock()
			if s.proc != nil {
				t.Logf("node-opcua peer output (last %d KiB):\n%s", tailSize>>10, s.proc.out.String())
			}
			s.mu.Unlock()
		}
		s.Stop()
	})

	// A port picked free can be taken by someone else before node binds it; when
	// the port was ours to choose, try another.
	for attempt := 1; ; attempt++ {
		port := opts.Port
		if port == 0 {
			port = freePort(t)
		}
		err := s.start(port)
		if err == nil {
			return s
		}
		if opts.Port == 0 && errors.Is(err, errAddrInUse) && attempt < 3 {
			t.Logf("node-opcua peer: port %d taken, trying another", port)
			continue
		}
		t.Fatalf("node-opcua peer did not start: %v", err)
	}
}

var errAddrInUse = errors.New("address in use")

// start runs node server.mjs on port and waits for READY. On failure the process is
// gone and the error carries its output.
func (s *Server) start(port int) error {
	args := []string{filepath.Join(s.dir, "server.mjs"), "--port", strconv.Itoa(port), "--pki", s.PKIDir}
	cmd := exec.Command(s.node, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), s.opts.Limits.env()...)
	switch {
	case s.opts.LargeCount < 0:
		cmd.Env = append(cmd.Env, "LARGE_COUNT=0")
	case s.opts.LargeCount > 0:
		cmd.Env = append(cmd.Env, "LARGE_COUNT="+strconv.Itoa(s.opts.LargeCount))
	default:
		cmd.Env = append(cmd.Env, "LARGE_COUNT="+strconv.Itoa(DefaultLargeCount))
	}
	if s.opts.CounterInterval > 0 {
		cmd.Env = append(cmd.Env, "COUNTER_INTERVAL_MS="+strconv.FormatInt(s.opts.CounterInterval.Milliseconds(), 10))
	}
	cmd.Env = append(cmd.Env, s.opts.Env...)
	// A grandchild holding the output pipes must not make Wait hang.
	cmd.WaitDelay = 5 * time.Second

	p := &process{cmd: cmd, ready: make(chan string, 1), exited: make(chan struct{})}
	var logf func(string)
	if s.opts.Verbose {
		t := s.t
		logf = func(line string) { t.Log("node-opcua: " + line) }
	}
	p.out = &tail{max: tailSize, logf: logf}
	cmd.Stdout = &readyWriter{ready: p.ready, out: p.out}
	cmd.Stderr = p.out

	// stdin is a pipe that we hold open: when this process dies, the child sees EOF
	// and shuts down instead of outliving the test.
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd.Stdin = r
	p.stdin = w
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("starting %s: %w", s.node, err)
	}
	r.Close()
	go func() {
		p.err = cmd.Wait()
		p.stdin.Close()
		close(p.exited)
	}()

	timeout := s.opts.StartTimeout
	if timeout <= 0 {
		timeout = defaultStartTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case url := <-p.ready:
		s.mu.Lock()
		s.proc = p
		s.URL = url
		s.Port = port
		s.mu.Unlock()
		return nil
	case <-p.exited:
		out := p.out.String()
		if strings.Contains(out, "EADDRINUSE") {
			return fmt.Errorf("%w: port %d: %v\n%s", errAddrInUse, port, p.err, out)
		}
		return fmt.Errorf("exited before READY (%v); output:\n%s", p.err, out)
	case <-timer.C:
		p.stop(stopGrace)
		return fmt.Errorf("no READY line within %v; output:\n%s", timeout, p.out.String())
	}
}

// stop sends SIGTERM, waits up to grace, then kills. It returns the Wait error.
func (p *process) stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return p.err
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
		return p.err
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("did not stop within %v after SIGTERM, killed", grace)
	}
}

// Stop stops the server (SIGTERM, SIGKILL after 10 s) and waits for it to exit. It
// reports an unclean exit with t.Errorf. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	if err := p.stop(stopGrace); err != nil {
		s.t.Errorf("node-opcua peer on port %d: unclean stop: %v\n%s", s.Port, err, p.out.String())
	}
}

// Kill stops the server abruptly with SIGKILL, as a crash would: connections are cut
// without a goodbye. It waits for the process to be gone.
func (s *Server) Kill() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Restart stops the server if it runs and starts it again on the same port with the
// same PKI (so the same certificate), for reconnect tests. It must be called from the
// test goroutine; it fails the test when the server does not come back.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	// The port was just released; node sets SO_REUSEADDR, but a client still
	// connecting can hold it for a moment, so retry EADDRINUSE for a few seconds.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.start(s.Port)
		if err == nil {
			return
		}
		if errors.Is(err, errAddrInUse) && time.Now().Before(deadline) {
			continue
		}
		s.t.Fatalf("node-opcua peer did not restart on port %d: %v", s.Port, err)
	}
}

// Running reports whether the server process is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Output returns the last 64 KiB of the current run's stdout and stderr.
func (s *Server) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return ""
	}
	return s.proc.out.String()
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("node-opcua peer: finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// readyWriter receives the child's stdout: the first "READY <url>" line is sent on
// ready, every line is also kept in out.
type readyWriter struct {
	ready chan string
	out   *tail
	buf   []byte
	seen  bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := string(bytes.TrimRight(w.buf[:i], "\r"))
		w.buf = w.buf[i+1:]
		w.out.Write([]byte(line + "\n"))
		if !w.seen && strings.HasPrefix(line, "READY ") {
			w.seen = true
			w.ready <- strings.TrimSpace(strings.TrimPrefix(line, "READY "))
		}
	}
	if len(w.buf) > 4096 { // a line that long is no READY line
		w.out.Write(w.buf)
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

// tail keeps the last max bytes written to it, for failure reports, and optionally
// forwards complete lines to logf.
type tail struct {
	mu      sync.Mutex
	max     int
	b       []byte
	logf    func(string)
	partial []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	if t.logf != nil {
		t.partial = append(t.partial, p...)
		for {
			i := bytes.IndexByte(t.partial, '\n')
			if i < 0 {
				break
			}
			t.logf(string(t.partial[:i]))
			t.partial = t.partial[i+1:]
		}
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
