package brokertest

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// TestBrokers starts, restarts and kills both brokers on their ports, and
// cuts a connection through the proxy.
func TestBrokers(t *testing.T) {
	n := StartNATS(t, NATSOptions{JetStream: true})
	line := func(addr string) string {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		s, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := line(n.Addr()); !strings.HasPrefix(s, "INFO ") || !strings.Contains(s, `"jetstream":true`) {
		t.Fatalf("nats INFO %q", s)
	}
	port := n.Port()
	n.Kill()
	if n.Running() {
		t.Fatal("running after Kill")
	}
	if _, err := net.DialTimeout("tcp", n.Addr(), time.Second); err == nil {
		t.Fatal("nats-server still listening after Kill")
	}
	n.Start()
	if n.Port() != port || !strings.HasPrefix(line(n.Addr()), "INFO ") {
		t.Fatal("nats-server not back on its port")
	}

	m := StartMosquitto(t, MosquittoOptions{Persistence: true})
	m.Restart()
	if !strings.HasPrefix(m.URL(), "tcp://127.0.0.1:") {
		t.Fatalf("URL %s", m.URL())
	}

	p := StartProxy(t, n.Addr())
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if s, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(s, "INFO ") {
		t.Fatalf("through the proxy: %q %v", s, err)
	}
	p.Cut()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("read after Cut: %v, want the connection closed", err)
	}
}
