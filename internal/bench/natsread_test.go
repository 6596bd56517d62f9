package bench

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uagate/gateway/internal/brokertest"
)

// TestNATSSub: the subscriber's own NATS client against Debian's
// nats-server: it receives what nats.go publishes, in order and whole
// (large, with headers, empty), stamps each
// on receipt and recycles the buffers.
func TestNATSSub(t *testing.T) {
	srv := brokertest.StartNATS(t, brokertest.NATSOptions{})
	sub, err := dialNATS(srv.URL(), "bench.>")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.close()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	payloads := [][]byte{[]byte("a"), bytes.Repeat([]byte("x"), 900<<10), {}, []byte("with headers")}
	before := time.Now().UnixNano()
	for i, p := range payloads {
		m := &nats.Msg{Subject: fmt.Sprintf("bench.%d", i), Data: p}
		if i == 3 {
			m.Header = nats.Header{"K": []string{"v"}}
		}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Publish("other", []byte("not subscribed")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, want := range payloads {
		select {
		case m := <-sub.rx:
			if !bytes.Equal(m.b, want) {
				t.Errorf("message %d: %d bytes %.20q, want %d bytes %.20q", i, len(m.b), m.b, len(want), want)
			}
			if m.at < before || m.at > time.Now().UnixNano() {
				t.Errorf("message %d stamped %d, outside the test", i, m.at)
			}
			sub.release(m)
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d not received", i)
		}
	}
	if q := sub.queue.Load(); q != 0 {
		t.Errorf("%d bytes still counted as queued", q)
	}
	if err := sub.ended(); err != nil {
		t.Errorf("reader ended: %v", err)
	}
	srv.Stop()
	select {
	case <-sub.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not end with the server")
	}
	if sub.ended() == nil {
		t.Error("no reason given for the end of the connection")
	}
}

func TestMsgSizes(t *testing.T) {
	for _, c := range []struct {
		line       string
		hdr, total int
		ok         bool
	}{
		{"MSG a.b 1 12\r\n", 0, 12, true},
		{"MSG a.b 1 reply 0\r\n", 0, 0, true},
		{"HMSG a.b 1 10 30\r\n", 10, 30, true},
		{"HMSG a.b 1 r 10 30\r\n", 10, 30, true},
		{"HMSG a.b 1 40 30\r\n", 0, 0, false},
		{"MSG a.b 12\r\n", 0, 0, false},
		{"MSG a.b 1 -3\r\n", 0, 0, false},
		{"MSG a.b 1 999999999999\r\n", 0, 0, false},
	} {
		hdr, total, ok := msgSizes([]byte(c.line))
		if ok != c.ok || (ok && (hdr != c.hdr || total != c.total)) {
			t.Errorf("%q: %d %d %v, want %d %d %v", c.line, hdr, total, ok, c.hdr, c.total, c.ok)
		}
	}
}

// TestTimestampMemo: the memo gives parseUTCTimestamp's values whatever
// the order, within a minute, across minutes and for other forms.
func TestTimestampMemo(t *testing.T) {
	var m tsMemo
	for _, s := range []string{
		"2024-05-01T10:15:30.1234567Z", "2024-05-01T10:15:30.1234567Z", "2024-05-01T10:15:31Z",
		"2024-05-01T10:15:59.9Z", "2024-05-01T10:16:00.0000001Z", "2024-05-01T10:15:30.5+01:00",
		"2024-05-01T10:15:30.5-01:00", "2024-05-01T10:15:30.1234567Z", "2024-05-01T10:15:3x.1Z",
		"2024-05-01T10:15:30.Z", "2024-05-01T10:15:30.1234567890Z", "", "x",
	} {
		if got, want := m.parse([]byte(s)), parseUTCTimestamp([]byte(s)); got != want {
			t.Errorf("%q: %d, want %d", s, got, want)
		}
	}
}
