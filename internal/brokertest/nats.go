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
	// Users (user → password), or Token, require authentication.
	Users map[string]string
	Token string
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
	case o.Users != nil:
		b.WriteString("authorization {\n  users: [\n")
		for u, pw := range o.Users {
			fmt.Fprintf(&b, "    {user: %s, password: %s}\n", strconv.Quote(u), strconv.Quote(pw))
		}
		b.WriteString("  ]\n}\n")
	}
	writeFile(t, n.conf, b.String())
}

// URL is nats://127.0.0.1:port.
func (n *NATS) URL() string { return "nats://" + n.Addr() }

// SetAuth replaces the authorization (users, or a token) and makes the
// running server reload it (SIGHUP); clients whose credentials no longer
// pass are disconnected by the server.
func (n *NATS) SetAuth(t testing.TB, users map[string]string, token string) {
	t.Helper()
	n.mu.Lock()
	n.opts.Users, n.opts.Token = users, token
	n.mu.Unlock()
	n.writeConf(t)
	if err := n.reload(); err != nil {
		t.Fatalf("brokertest: reload nats-server: %v", err)
	}
}
