package mqtt5sink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"

	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sinktest"
	"github.com/uagate/gateway/internal/testutil"
)

// The PUBLISH packets the sink writes, read back with paho.golang's
// decoder: every field and property as written.
func TestPublishPacketDecodes(t *testing.T) {
	long := strings.Repeat("x", 70000)
	for _, c := range []struct {
		name    string
		kind    sink.Kind
		addr    sink.Addr
		samples bool
		qos     byte
		retain  bool
		expiry  uint32
		payload int
		user    [][2]string
		epoch   uint64
	}{
		{"data qos1", sink.KindData, addr, false, 1, false, 60, 10,
			[][2]string{{"UAMessageType", "ua-data"}, {"PublisherId", "pub"}, {"WriterGroup", "line1"}, {"DataSetWriter", "temps"}}, 0},
		{"samples qos0", sink.KindData, sink.Addr{Publisher: "p", Group: "g"}, true, 0, false, 0, 200,
			[][2]string{{"MessageSchema", SamplesSchema}, {"PublisherId", "p"}, {"WriterGroup", "g"}}, 0},
		{"metadata retained, no expiry", sink.KindMetaData, addr, false, 2, true, 60, 20000,
			[][2]string{{"UAMessageType", "ua-metadata"}, {"PublisherId", "pub"}, {"WriterGroup", "line1"}, {"DataSetWriter", "temps"}}, 0},
		{"status", sink.KindStatus, sink.Addr{Publisher: "pub"}, false, 1, true, 0, 100,
			[][2]string{{"UAMessageType", "ua-status"}, {"PublisherId", "pub"}}, 0},
		{"field, names cleaned and cut", sink.KindField, sink.Addr{Publisher: "pü", Group: "a\x00b\u0085c\xffd", Writer: "w", Field: long}, false, 1, true, 0, 3000000,
			[][2]string{{"PublisherId", "pü"}, {"WriterGroup", "a_b_c_d"}, {"DataSetWriter", "w"}, {"Field", long[:65535]}}, 0},
		{"field of a lease holding, retained", sink.KindField, sink.Addr{Publisher: "p", Group: "g", Writer: "w", Field: "f"}, false, 1, true, 0, 5,
			[][2]string{{"PublisherId", "p"}, {"WriterGroup", "g"}, {"DataSetWriter", "w"}, {"Field", "f"}, {"LeaseEpoch", "18446744073709551615"}}, 1<<64 - 1},
		{"data of a lease holding", sink.KindData, addr, false, 0, false, 0, 5,
			[][2]string{{"UAMessageType", "ua-data"}, {"PublisherId", "pub"}, {"WriterGroup", "line1"}, {"DataSetWriter", "temps"}, {"LeaseEpoch", "7"}}, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			props := appendProperties(nil, c.kind, &c.addr, c.samples, c.expiry, c.epoch)
			topic := "a/b/" + c.name
			payload := bytes.Repeat([]byte{'7'}, c.payload)
			size, err := publishSize(len(topic), c.qos, len(props), len(payload))
			if err != nil {
				t.Fatal(err)
			}
			pkt := appendPublishHeader(nil, topic, c.qos, c.retain, 4711, props, len(payload))
			pkt = append(pkt, payload...)
			if len(pkt) != size {
				t.Fatalf("%d bytes, publishSize said %d", len(pkt), size)
			}
			cp, err := packets.ReadPacket(bytes.NewReader(pkt))
			if err != nil {
				t.Fatal(err)
			}
			p, ok := cp.Content.(*packets.Publish)
			if !ok {
				t.Fatalf("decoded %T", cp.Content)
			}
			if p.Topic != topic || p.QoS != c.qos || p.Retain != c.retain || !bytes.Equal(p.Payload, payload) || (c.qos > 0 && p.PacketID != 4711) {
				t.Fatalf("decoded %s qos %d retain %v id %d, %d bytes", p.Topic, p.QoS, p.Retain, p.PacketID, len(p.Payload))
			}
			pr := p.Properties
			if pr.ContentType != ContentType || pr.PayloadFormat == nil || *pr.PayloadFormat != 1 {
				t.Errorf("content type %q, payload format %v", pr.ContentType, pr.PayloadFormat)
			}
			wantExpiry := c.expiry > 0 && c.kind == sink.KindData
			if (pr.MessageExpiry != nil) != wantExpiry || (wantExpiry && *pr.MessageExpiry != c.expiry) {
				t.Errorf("message expiry %v, want %d: %v", pr.MessageExpiry, c.expiry, wantExpiry)
			}
			if len(pr.User) != len(c.user) {
				t.Fatalf("user properties %d, want %d", len(pr.User), len(c.user))
			}
			for i, u := range c.user {
				if pr.User[i].Key != u[0] || pr.User[i].Value != u[1] {
					t.Errorf("user property %d: %.40q=%.40q, want %.40q=%.40q", i, pr.User[i].Key, pr.User[i].Value, u[0], u[1])
				}
			}
		})
	}
}

func TestPublishSizeLimits(t *testing.T) {
	if _, err := publishSize(65536, 1, 0, 0); err == nil || !strings.Contains(err.Error(), "65535") {
		t.Errorf("topic of 65536 bytes: %v", err)
	}
	if _, err := publishSize(10, 1, 0, maxRemaining); err == nil {
		t.Error("a packet over 256 MiB was taken")
	}
	for _, n := range []int{0, 127, 128, 16383, 16384, 2097151, 2097152, maxRemaining} {
		if b := appendVBI(nil, n); len(b) != vbiLen(n) {
			t.Errorf("VBI of %d: %d bytes, vbiLen %d", n, len(b), vbiLen(n))
		}
	}
}

// fakeBroker is a socket that speaks just enough MQTT 5 for the sink: it
// answers CONNECT with connack and hands each PUBLISH's packet id to
// onPublish (in its reading goroutine, with the connection to answer on).
type fakeBroker struct {
	ln net.Listener
	wg sync.WaitGroup
}

// startFakeBroker listens on loopback; its CONNACK has the reason code
// code and the properties props.
func startFakeBroker(t testing.TB, code byte, props []byte, onPublish func(c net.Conn, qos byte, id uint16)) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeBroker{ln: ln}
	var conns []net.Conn
	var mu sync.Mutex
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				f.serve(c, code, props, onPublish)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *fakeBroker) url() string { return "tcp://" + f.ln.Addr().String() }

func (f *fakeBroker) serve(c net.Conn, code byte, props []byte, onPublish func(net.Conn, byte, uint16)) {
	r := bufio.NewReader(c)
	var body []byte
	for first := true; ; first = false {
		h, err := r.ReadByte()
		if err != nil {
			return
		}
		n, mul := 0, 1
		for {
			b, err := r.ReadByte()
			if err != nil {
				return
			}
			n += int(b&0x7f) * mul
			mul *= 128
			if b&0x80 == 0 {
				break
			}
		}
		body = append(body[:0], make([]byte, n)...)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		switch {
		case first:
			ack := append([]byte{0x20, byte(3 + len(props)), 0, code, byte(len(props))}, props...)
			if _, err := c.Write(ack); err != nil {
				return
			}
		case h>>4 == 3 && onPublish != nil:
			qos := h >> 1 & 3
			tl := int(binary.BigEndian.Uint16(body))
			var id uint16
			if qos > 0 {
				id = binary.BigEndian.Uint16(body[2+tl:])
			}
			onPublish(c, qos, id)
		}
	}
}

// acks records the confirmations of Publish in order.
type acks struct {
	mu   sync.Mutex
	got  []int
	errs int
}

func (a *acks) Confirmed(m *sink.Message, err error) {
	c, _ := sinktest.Counter(m.Payload())
	a.mu.Lock()
	a.got = append(a.got, c)
	if err != nil {
		a.errs++
	}
	a.mu.Unlock()
}

func (a *acks) snapshot() ([]int, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.got...), a.errs
}

// A broker that acknowledges in reverse order and allows 4 publishes in
// flight (Receive Maximum in its CONNACK): the sink never has more than 4
// in flight, and confirms in publish order.
func TestWindowAndOrder(t *testing.T) {
	var mu sync.Mutex
	var held []uint16
	maxHeld := 0
	recvMax4 := []byte{0x21, 0, 4}
	f := startFakeBroker(t, 0, recvMax4, func(c net.Conn, _ byte, id uint16) {
		mu.Lock()
		defer mu.Unlock()
		held = append(held, id)
		maxHeld = max(maxHeld, len(held))
		if len(held) < 4 {
			return
		}
		for i := len(held) - 1; i >= 0; i-- {
			_, _ = c.Write([]byte{0x40, 2, byte(held[i] >> 8), byte(held[i])})
		}
		held = held[:0]
	})
	s := newSink(t, Config{URL: f.url(), QoS: 1, CleanSession: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	a := &acks{}
	const n = 12
	var ms []*sink.Message
	for i := range n {
		m := sinktest.Message(nil, i, sink.KindData, addr)
		ms = append(ms, m)
		if err := s.Publish(m, a); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "12 confirmations", func() bool { got, _ := a.snapshot(); return len(got) == n })
	got, errs := a.snapshot()
	for i, c := range got {
		if c != i {
			t.Fatalf("confirmed %v: not in publish order", got)
		}
	}
	if errs != 0 || maxHeld > 4 {
		t.Fatalf("%d errors, %d in flight at most (want ≤ 4)", errs, maxHeld)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		m.Done(true)
	}
}

// A broker that never acknowledges: the watchdog ends the connection after
// AckTimeout and the publishes in flight fail with ErrNotConnected.
func TestAckTimeout(t *testing.T) {
	f := startFakeBroker(t, 0, nil, nil)
	s := newSink(t, Config{URL: f.url(), QoS: 1, CleanSession: true, AckTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	a := &acks{}
	m := sinktest.Message(nil, 0, sink.KindData, addr)
	defer m.Done(true)
	if err := s.Publish(m, a); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the confirmation", func() bool { got, _ := a.snapshot(); return len(got) == 1 })
	if _, errs := a.snapshot(); errs != 1 || s.Connected() {
		t.Fatalf("%d errors, connected %v", errs, s.Connected())
	}
	if err := s.Publish(m, a); err != sink.ErrNotConnected {
		t.Fatalf("Publish after the timeout: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// What the broker says in its CONNACK refuses the sink with the reason: a
// refusal of the credentials (ErrUnauthorized, naming the user), a Maximum
// QoS below the sink's, no retained messages; nothing is left running.
func TestBrokerRefusals(t *testing.T) {
	for _, c := range []struct {
		name  string
		code  byte
		props []byte
		want  string
	}{
		{"bad credentials", 0x86, nil, `as "gw": sink: broker refused the credentials: refused: bad user name or password`},
		{"not authorized", 0x87, nil, "broker refused the credentials"},
		{"maximum qos 0", 0, []byte{0x24, 0}, "the broker takes qos 0 at most, the sink is configured for 1"},
		{"no retain", 0, []byte{0x25, 0}, "the broker has no retained messages"},
	} {
		t.Run(c.name, func(t *testing.T) {
			testutil.CheckLeaks(t)
			f := startFakeBroker(t, c.code, c.props, nil)
			s := newSink(t, Config{URL: f.url(), QoS: 1, CleanSession: true, Username: "gw", Password: "secret"})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := s.Connect(ctx)
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(c.want)) || strings.Contains(err.Error(), "secret") {
				t.Fatalf("Connect = %v, want %q", err, c.want)
			}
			if (c.code >= 0x80) != errors.Is(err, sink.ErrUnauthorized) {
				t.Errorf("Connect = %v: ErrUnauthorized %v", err, errors.Is(err, sink.ErrUnauthorized))
			}
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
