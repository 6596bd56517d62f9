package gateway_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// natsNode is a nats-server child process on a loopback port, with
// JetStream; several form a cluster. The server is the one this module
// builds in (github.com/nats-io/nats-server/v2, run by this test binary:
// natsChildEnv), not Debian's 2.9.10: that version lets two concurrent
// compare-and-set writes with the same expected revision both succeed on a
// clustered stream (nats-server#4320, fixed in 2.9.21), which breaks every
// lease built on KV Update — TestKVCompareAndSetClustered shows it.
// UAGATE_TEST_NATS_SERVER=debian runs Debian's binary instead.
type natsNode struct {
	t       *testing.T
	name    string
	port    int
	cluster int
	dir     string
	conf    string
	binary  string
	cmd     *exec.Cmd
	done    chan struct{}
	out     *lockedBuffer
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startNATSCluster starts n JetStream nodes (n == 1: a single server, no
// cluster) and waits until each accepts connections.
func startNATSCluster(t *testing.T, n int) []*natsNode {
	t.Helper()
	bin := os.Args[0]
	if os.Getenv("UAGATE_TEST_NATS_SERVER") == "debian" {
		bin = debianNATSServer(t)
	}
	return startNATSClusterOf(t, n, bin)
}

// debianNATSServer is the path of Debian's nats-server.
func debianNATSServer(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		for _, p := range []string{"/usr/sbin/nats-server", "/usr/bin/nats-server"} {
			if _, e := os.Stat(p); e == nil {
				bin, err = p, nil
			}
		}
	}
	if err != nil {
		t.Fatal("nats-server not installed (apt-get install nats-server; scripts/test.sh does)")
	}
	return bin
}

// startNATSClusterOf is startNATSCluster with the server binary given
// (os.Args[0]: the built-in one).
func startNATSClusterOf(t *testing.T, n int, bin string) []*natsNode {
	t.Helper()
	nodes := make([]*natsNode, n)
	for i := range nodes {
		nodes[i] = &natsNode{t: t, name: fmt.Sprintf("n%d", i), port: freeTCPPort(t), cluster: freeTCPPort(t), dir: t.TempDir()}
	}
	for _, nd := range nodes {
		var b strings.Builder
		fmt.Fprintf(&b, "server_name: %s\nlisten: \"127.0.0.1:%d\"\n", nd.name, nd.port)
		fmt.Fprintf(&b, "jetstream {\n  store_dir: %s\n}\n", strconv.Quote(filepath.Join(nd.dir, "js")))
		if n > 1 {
			fmt.Fprintf(&b, "cluster {\n  name: uagate\n  listen: \"127.0.0.1:%d\"\n  routes: [\n", nd.cluster)
			for _, o := range nodes {
				if o != nd {
					fmt.Fprintf(&b, "    \"nats-route://127.0.0.1:%d\"\n", o.cluster)
				}
			}
			b.WriteString("  ]\n}\n")
		}
		nd.conf = filepath.Join(nd.dir, "nats.conf")
		if err := os.WriteFile(nd.conf, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		nd.bin(bin)
		nd.start()
		t.Cleanup(nd.kill)
	}
	for _, nd := range nodes {
		nd.waitUp()
	}
	return nodes
}

func (nd *natsNode) bin(b string) { nd.binary = b }

func (nd *natsNode) start() {
	nd.out = &lockedBuffer{}
	nd.cmd = exec.Command(nd.binary, "-c", nd.conf)
	if nd.binary == os.Args[0] {
		nd.cmd.Env = append(os.Environ(), natsChildEnv+"="+nd.conf)
	}
	nd.cmd.Stdout, nd.cmd.Stderr = nd.out, nd.out
	nd.done = make(chan struct{})
	if err := nd.cmd.Start(); err != nil {
		nd.t.Fatal(err)
	}
	done := nd.done
	cmd := nd.cmd
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
}

func (nd *natsNode) waitUp() {
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", nd.addr(), time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-nd.done:
			nd.t.Fatalf("nats-server %s exited:\n%s", nd.name, nd.out.String())
		default:
		}
		if time.Now().After(deadline) {
			nd.t.Fatalf("nats-server %s not up: %v\n%s", nd.name, err, nd.out.String())
		}
		pollPause()
	}
}

func (nd *natsNode) addr() string { return "127.0.0.1:" + strconv.Itoa(nd.port) }
func (nd *natsNode) URL() string  { return "nats://" + nd.addr() }

// kill ends it with SIGKILL.
func (nd *natsNode) kill() {
	if nd.cmd == nil || nd.cmd.Process == nil {
		return
	}
	select {
	case <-nd.done:
		return
	default:
	}
	_ = nd.cmd.Process.Signal(syscall.SIGKILL)
	<-nd.done
}

// clusterURL lists every node's URL, for clients that fail over.
func clusterURL(nodes []*natsNode) string {
	var u []string
	for _, n := range nodes {
		u = append(u, n.URL())
	}
	return strings.Join(u, ",")
}

// natsChildEnv makes this test binary a nats-server: TestMain runs the
// built-in server with the configuration file it names (the nats-server
// file format) until the process is killed.
const natsChildEnv = "UAGATE_TEST_NATS_CONF"

// runNATSChild is the child's whole life; it returns only on an error.
func runNATSChild(conf string) int {
	opts, err := natsserver.ProcessConfigFile(conf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nats child:", err)
		return 2
	}
	opts.NoSigs = true
	s, err := natsserver.NewServer(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nats child:", err)
		return 2
	}
	s.ConfigureLogger()
	s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		fmt.Fprintln(os.Stderr, "nats child: not ready in 20 s")
		return 1
	}
	s.WaitForShutdown()
	return 0
}
