// Package brokertest runs real brokers for tests: Debian's mosquitto and
// nats-server as child processes on loopback ports chosen by the OS, with a
// generated configuration in the test's temporary directory, and a TCP proxy
// that can cut connections as a broken network would.
//
// A broker dies with its test (t.Cleanup); Kill, Stop, Start and Restart
// keep its port, so clients reconnect to the same URL. Every wait polls with
// a deadline. A missing binary fails the test (scripts/test.sh installs the
// packages); it never skips. The broker's output is kept and written to the
// test log when the test fails.
package brokertest

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
)

// StartTimeout bounds the wait for a broker to accept connections.
const StartTimeout = 10 * time.Second

// Binary returns the path of a broker's program (mosquitto_sub, nats, …),
// failing the test when it is not installed.
func Binary(t testing.TB, name string) string {
	t.Helper()
	return binary(t, name)
}

// binary finds name on PATH or in the sbin directories Debian installs
// daemons to (which a non-root PATH may lack).
func binary(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/bin", "/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	pkg := name
	if p, ok := debianPackage[name]; ok {
		pkg = p
	}
	t.Fatalf("brokertest: %s not found (scripts/test.sh installs it: apt-get install -y %s)", name, pkg)
	return ""
}

// debianPackage names the Debian package of a program whose package is
// named otherwise.
var debianPackage = map[string]string{
	"mosquitto_sub":    "mosquitto-clients",
	"mosquitto_pub":    "mosquitto-clients",
	"mosquitto_passwd": "mosquitto",
	"stdbuf":           "coreutils",
}

// freePort returns a loopback port the OS just handed out.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("brokertest: free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// process is a broker child process restartable on the same port.
type process struct {
	t    testing.TB
	name string
	bin  string
	args func() []string
	port int
	log  testutil.LockedBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan struct{} // closed when cmd was reaped
}

func newProcess(t testing.TB, name, bin string, port int, args func() []string) *process {
	p := &process{t: t, name: name, bin: bin, port: port, args: args}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.log.String())
		}
	})
	return p
}

// Addr is host:port.
func (p *process) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// Port is the broker's port.
func (p *process) Port() int { return p.port }

// Log returns what the broker wrote so far.
func (p *process) Log() string { return p.log.String() }

// Start starts the broker (again) and waits until it accepts connections.
// It fails the test when the broker does not come up.
func (p *process) Start() {
	p.t.Helper()
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		p.t.Fatalf("brokertest: %s already running", p.name)
	}
	cmd := exec.Command(p.bin, p.args()...)
	cmd.Stdout, cmd.Stderr = &p.log, &p.log
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		p.t.Fatalf("brokertest: start %s: %v", p.name, err)
	}
	exit := make(chan struct{})
	p.cmd, p.exit = cmd, exit
	p.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(exit)
	}()
	deadline := time.Now().Add(StartTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exit:
			p.mu.Lock()
			p.cmd = nil
			p.mu.Unlock()
			p.t.Fatalf("brokertest: %s exited at start (%v):\n%s", p.name, cmd.ProcessState, p.log.String())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			p.Kill()
			p.t.Fatalf("brokertest: %s not listening on %s after %v: %v\n%s", p.name, p.Addr(), StartTimeout, err, p.log.String())
		}
	}
}

// signal sends sig and waits for the process to end (SIGKILL after
// StartTimeout). It does nothing when the broker is not running.
func (p *process) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd, exit := p.cmd, p.exit
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exit:
	case <-time.After(StartTimeout):
		_ = cmd.Process.Kill()
		<-exit
	}
}

// Kill ends the broker with SIGKILL: no goodbye to clients, no state saved
// beyond what the broker already wrote.
func (p *process) Kill() { p.signal(syscall.SIGKILL) }

// Stop ends the broker with SIGTERM: it closes its connections and saves
// its state (mosquitto writes its persistence file only then or at
// autosave).
func (p *process) Stop() { p.signal(syscall.SIGTERM) }

// Restart stops the broker (SIGTERM) and starts it on the same port.
func (p *process) Restart() {
	p.t.Helper()
	p.Stop()
	p.Start()
}

// reload sends SIGHUP: both brokers re-read their configuration (mosquitto
// its password file, nats-server its authorization).
func (p *process) reload() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return errors.New("not running")
	}
	return p.cmd.Process.Signal(syscall.SIGHUP)
}

// Running reports whether the broker process is up.
func (p *process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
}
