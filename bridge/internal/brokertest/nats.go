package brokertest

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// NATSOptions configure a test nats-server.
type NATSOptions struct {
	// JetStream enables JetStream with its store in the test's directory,
	// which survives Kill and Stop.
	JetStream bool
	// User and Password, or Token, require authentication.
	User, Password string
	Token          string
}

// NATS is a nats-server on a loopback port.
type NATS struct {
	*process
	dir  string
	conf string

	mu   sync.Mutex
	opts NATSOptions
}

// StartNATS starts nats-server with a generated configuration file and waits
// until it accepts connections.
func StartNATS(t testing.TB, opts NATSOptions) *NATS {
	t.Helper()
	n := &NATS{opts: opts, dir: t.TempDir()}
	n.conf = filepath.Join(n.dir, "nats.conf")
	bin := binary(t, "nats-server")
	port := freePort(t)
	n.process = newProcess(t, "nats-server", bin, port, func() []string {
		return []string{"-c", n.conf}
	})
	n.writeConf(t)
	n.Start()
	return n
}

func (n *NATS) writeConf(t testing.TB) {
	t.Helper()
	n.mu.Lock()
	o := n.opts
	n.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "listen: \"127.0.0.1:%d\"\n", n.port)
	if o.JetStream {
		fmt.Fprintf(&b, "jetstream {\n  store_dir: %s\n}\n", strconv.Quote(filepath.Join(n.dir, "js")))
	}
	switch {
	case o.Token != "":
		fmt.Fprintf(&b, "authorization {\n  token: %s\n}\n", strconv.Quote(o.Token))
	case o.User != "":
		fmt.Fprintf(&b, "authorization {\n  user: %s\n  password: %s\n}\n", strconv.Quote(o.User), strconv.Quote(o.Password))
	}
	writeFile(t, n.conf, b.String())
}

// URL is nats://127.0.0.1:port.
func (n *NATS) URL() string { return "nats://" + n.Addr() }

// SetAuth replaces the authorization (user and password, or token) and
// makes the running server reload it (SIGHUP).
func (n *NATS) SetAuth(t testing.TB, user, password, token string) {
	t.Helper()
	n.mu.Lock()
	n.opts.User, n.opts.Password, n.opts.Token = user, password, token
	n.mu.Unlock()
	n.writeConf(t)
	if err := n.reload(); err != nil {
		t.Fatalf("brokertest: reload nats-server: %v", err)
	}
}
