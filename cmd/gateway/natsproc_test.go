package main

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
)

// natsNode is a nats-server (Debian's binary) child process on a loopback
// port, with JetStream; several form a cluster.
type natsNode struct {
	t       *testing.T
	name    string
	port    int
	cluster int
	dir     string
	conf    string
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

var natsBin string

func (nd *natsNode) bin(b string) { natsBin = b }

func (nd *natsNode) start() {
	nd.out = &lockedBuffer{}
	nd.cmd = exec.Command(natsBin, "-c", nd.conf)
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
