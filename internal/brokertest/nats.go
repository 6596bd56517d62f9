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
	// NKeys, when not empty, are the public keys of the users allowed in
	// (nkey authentication; with Users too, either way works).
	NKeys []string
	// Operator switches the server to operator mode (JWT authentication,
	// as a .creds file carries): the operator's JWT file and the accounts'
	// JWTs by public key, preloaded into a memory resolver.
	Operator *Operator
	// TLS makes the server require TLS (URL tls://…) with these files; with
	// VerifyClients a client must present a certificate of TLS.CA.
	TLS           *TLSFiles
	VerifyClients bool
	// MaxPayload, when positive, is the server's max_payload (default 1 MiB).
	MaxPayload int
}

// Operator is the trust of a server in operator mode.
type Operator struct {
	JWTFile  string
	Accounts map[string]string // public key → account JWT
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
	if o.MaxPayload > 0 {
		fmt.Fprintf(&b, "max_payload: %d\n", o.MaxPayload)
	}
	if o.JetStream {
		fmt.Fprintf(&b, "jetstream {\n  store_dir: %s\n}\n", strconv.Quote(filepath.Join(n.dir, "js")))
	}
	if o.TLS != nil {
		fmt.Fprintf(&b, "tls {\n  cert_file: %s\n  key_file: %s\n  ca_file: %s\n  verify: %v\n  timeout: 2\n}\n",
			strconv.Quote(o.TLS.ServerCert), strconv.Quote(o.TLS.ServerKey), strconv.Quote(o.TLS.CA), o.VerifyClients)
	}
	if o.Operator != nil {
		fmt.Fprintf(&b, "operator: %s\nresolver: MEMORY\nresolver_preload: {\n", strconv.Quote(o.Operator.JWTFile))
		for pub, jwt := range o.Operator.Accounts {
			fmt.Fprintf(&b, "  %s: %s\n", pub, strconv.Quote(jwt))
		}
		b.WriteString("}\n")
	}
	switch {
	case o.Token != "":
		fmt.Fprintf(&b, "authorization {\n  token: %s\n}\n", strconv.Quote(o.Token))
	case o.Users != nil || len(o.NKeys) > 0:
		b.WriteString("authorization {\n  users: [\n")
		for u, pw := range o.Users {
			fmt.Fprintf(&b, "    {user: %s, password: %s}\n", strconv.Quote(u), strconv.Quote(pw))
		}
		for _, k := range o.NKeys {
			fmt.Fprintf(&b, "    {nkey: %s}\n", k)
		}
		b.WriteString("  ]\n}\n")
	}
	writeFile(t, n.conf, b.String())
}

// URL is nats://127.0.0.1:port, or tls://127.0.0.1:port with TLS.
func (n *NATS) URL() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.opts.TLS != nil {
		return "tls://" + n.Addr()
	}
	return "nats://" + n.Addr()
}

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
