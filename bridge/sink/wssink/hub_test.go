package wssink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sinktest"
	"github.com/uagate/gateway/internal/testutil"
)

func TestHubSelectByQuery(t *testing.T) {
	testutil.CheckLeaks(t)
	h, url := serve(t, Options{}, nil)
	byGroup := dial(t, url+"?group=g1", nil)
	byWriter := dial(t, url+"?writer=w2&writer=w9&kind=data", nil)
	byKind := dial(t, url+"?kind=status,metadata", nil)
	byField := dial(t, url+"?group=g2&field=temp,speed", nil)
	waitClients(t, h, 4, true)

	tr := sinktest.NewTracker()
	type in struct {
		kind          sink.Kind
		group, writer string
		field         string
	}
	ins := []in{
		{sink.KindData, "g1", "w1", ""},
		{sink.KindData, "g1", "w2", ""},
		{sink.KindData, "g2", "w2", ""},
		{sink.KindData, "g2", "", ""}, // batched: no writer level
		{sink.KindMetaData, "g1", "w1", ""},
		{sink.KindStatus, "", "", ""},
		{sink.KindField, "g2", "w2", "temp"},
		{sink.KindField, "g2", "w2", "pressure"},
		{sink.KindData, "g3", "w3", ""},
	}
	for i, x := range ins {
		m := msg(tr, uint64(i+1), x.kind, x.group, x.writer, fmt.Sprintf("m%d", i))
		m.Addr.Field = x.field
		h.Enqueue(m)
	}
	want := map[*websocket.Conn][]string{
		byGroup:  {"m0", "m1", "m4", "m5"}, // g1 (status has no group level)
		byWriter: {"m1", "m2", "m3"},       // data of w2, and the batched message of g2
		byKind:   {"m4", "m5"},             // metadata and status
		byField:  {"m2", "m3", "m5", "m6"}, // g2 data, status, field temp
	}
	total := 0
	for c, w := range want {
		if got := readN(t, c, len(w)); !slices.Equal(got, w) {
			t.Errorf("%s: got %v, want %v", c.LocalAddr(), got, w)
		}
		total += len(w)
	}
	tr.Wait(t, len(ins)-2, true) // the metadata and status messages stay cached
	// A client can read a message before its writer counted it sent.
	if !testutil.Eventually(5*time.Second, func() bool { s := h.Stats(); return s.Sent == uint64(total) && s.Bytes == uint64(2*total) }) {
		t.Errorf("stats %+v: want Sent %d, Bytes %d", h.Stats(), total, 2*total)
	}
}

func TestHubSelectionRefused(t *testing.T) {
	testutil.CheckLeaks(t)
	h, url := serve(t, Options{}, nil)
	for _, q := range []string{"?kind=events", "?group=" + strings.Repeat("g", maxSelectName+1), "?writer=" + strings.Repeat("w,", maxSelectNames+1)} {
		if status, _ := dialStatus(t, url+q, nil); status != http.StatusBadRequest {
			t.Errorf("%.40s: HTTP %d, want 400", q, status)
		}
	}
	if s := h.Stats(); s.Rejected != 3 || s.Accepted != 0 {
		t.Errorf("stats %+v: want 3 rejected, none accepted", s)
	}
}

func TestHubSelectByMessage(t *testing.T) {
	testutil.CheckLeaks(t)
	h, url := serve(t, Options{}, nil)
	c := dial(t, url, nil)
	waitClients(t, h, 1, false)

	// Not subscribed yet: receives nothing, and the message is settled.
	tr := sinktest.NewTracker()
	h.Enqueue(msg(tr, 1, sink.KindData, "g1", "w1", "before"))
	tr.Wait(t, 1, true)

	sub := `{"subscribe":{"groups":["g1"],"writers":["w2"],"kinds":["data"]}}`
	if err := c.WriteMessage(websocket.TextMessage, []byte(sub)); err != nil {
		t.Fatal(err)
	}
	waitClients(t, h, 1, true)
	h.Enqueue(msg(tr, 2, sink.KindData, "g1", "w1", "other writer"))
	h.Enqueue(msg(tr, 3, sink.KindData, "g1", "w2", "selected"))
	h.Enqueue(msg(tr, 4, sink.KindStatus, "", "", "status: not a selected kind"))
	h.Enqueue(msg(tr, 5, sink.KindData, "g2", "w2", "other group"))
	h.Enqueue(msg(tr, 6, sink.KindData, "g1", "w2", "selected too"))
	if got := readN(t, c, 2); !slices.Equal(got, []string{"selected", "selected too"}) {
		t.Errorf("got %v", got)
	}
	tr.Wait(t, 5, true) // the status message stays cached
	if s := h.Stats(); s.Sent != 2 {
		t.Errorf("sent %d, want 2", s.Sent)
	}

	// A later subscription replaces the selection.
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"subscribe":{"groups":["g2"]}}`)); err != nil {
		t.Fatal(err)
	}
	// The replay of the cached status message says the new selection is in place.
	if got := readN(t, c, 1); got[0] != "status: not a selected kind" {
		t.Fatalf("got %q, want the cached status", got[0])
	}
	h.Enqueue(msg(tr, 7, sink.KindData, "g1", "w2", "old selection"))
	h.Enqueue(msg(tr, 8, sink.KindData, "g2", "w7", "new selection"))
	if got := readN(t, c, 1); got[0] != "new selection" {
		t.Errorf("got %q", got[0])
	}
}

func TestHubBadSubscribe(t *testing.T) {
	testutil.CheckLeaks(t)
	h, url := serve(t, Options{}, nil)
	for _, tc := range []struct {
		send   string
		binary bool
		code   int
		reason string
	}{
		{send: `{"subscribe":{"kinds":["everything"]}}`, code: websocket.ClosePolicyViolation, reason: `bad subscribe message: kind "everything"`},
		{send: `{"subscribe":{"groups":"g1"}}`, code: websocket.ClosePolicyViolation, reason: "bad subscribe message: want"},
		{send: `{"unsubscribe":{}}`, code: websocket.ClosePolicyViolation, reason: "bad subscribe message: want"},
		{send: `not json`, code: websocket.ClosePolicyViolation, reason: "bad subscribe message: want"},
		{send: `{}`, binary: true, code: websocket.CloseUnsupportedData, reason: "binary messages are not supported"},
	} {
		c := dial(t, url, nil)
		mt := websocket.TextMessage
		if tc.binary {
			mt = websocket.BinaryMessage
		}
		if err := c.WriteMessage(mt, []byte(tc.send)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _, err := c.ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != tc.code || !strings.HasPrefix(ce.Text, tc.reason) {
			t.Errorf("%s: %v, want close %d %q…", tc.send, err, tc.code, tc.reason)
		}
	}
	if !testutil.Eventually(5*time.Second, func() bool { return h.Stats().Clients == 0 }) {
		t.Errorf("%d clients left", h.Stats().Clients)
	}
}

func TestHubMetaDataReplay(t *testing.T) {
	testutil.CheckLeaks(t)
	h, url := serve(t, Options{MaxMetaData: 3}, nil)
	tr := sinktest.NewTracker()
	h.Enqueue(msg(tr, 1, sink.KindMetaData, "g1", "w1", "meta w1 v1"))
	h.Enqueue(msg(tr, 2, sink.KindMetaData, "g1", "w2", "meta w2"))
	h.Enqueue(msg(tr, 3, sink.KindStatus, "", "", "status v1"))
	h.Enqueue(msg(tr, 4, sink.KindMetaData, "g1", "w1", "meta w1 v2"))
	h.Enqueue(msg(tr, 5, sink.KindStatus, "", "", "status v2"))
	h.Enqueue(msg(tr, 6, sink.KindMetaData, "g2", "w1", "meta g2 w1"))
	h.Enqueue(msg(tr, 7, sink.KindMetaData, "g3", "w3", "meta g3: cache full"))
	// The replaced messages were given up at once; the full cache kept nothing of 7.
	for _, tok := range []uint64{1, 3, 7} {
		if !testutil.Eventually(5*time.Second, func() bool { return settled(tr, tok) }) {
			t.Errorf("message %d not settled", tok)
		}
	}
	for _, tok := range []uint64{2, 4, 5, 6} {
		if settled(tr, tok) {
			t.Errorf("cached message %d settled", tok)
		}
	}
	if s := h.Stats(); s.MetaData != 3 || s.MetaFull != 1 {
		t.Errorf("stats %+v: want 3 cached, 1 not cached", s)
	}

	// Query subscription: status, then the selected writers' latest metadata, then live.
	c := dial(t, url+"?group=g1&writer=w1", nil)
	if got := readN(t, c, 2); !slices.Equal(got, []string{"status v2", "meta w1 v2"}) {
		t.Errorf("replay %v", got)
	}
	waitClients(t, h, 1, true)
	h.Enqueue(msg(tr, 8, sink.KindMetaData, "g1", "w1", "meta w1 v3"))
	if got := readN(t, c, 1); got[0] != "meta w1 v3" {
		t.Errorf("live %q", got[0])
	}

	// Message subscription: its own replay.
	c2 := dial(t, url, nil)
	if err := c2.WriteMessage(websocket.TextMessage, []byte(`{"subscribe":{"writers":["w2"],"kinds":["metadata"]}}`)); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, c2, 1); got[0] != "meta w2" {
		t.Errorf("replay %q", got[0])
	}

	// Close gives up the cache: every message settles once.
	_ = c.Close()
	_ = c2.Close()
	waitClients(t, h, 0, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	tr.Wait(t, 8, true)
}

// TestHubSlowConsumer: a client that stops reading fills its socket, then its
// queue; the Enqueue that finds the queue full returns at once and closes
// it with 1008, while a client that reads gets every message in order.
func TestHubSlowConsumer(t *testing.T) {
	testutil.CheckLeaks(t)
	const queue = 8
	h, url := serve(t, Options{ClientQueue: queue}, func(l net.Listener) net.Listener { return smallBuffers{l} })

	fast := dial(t, url+"?kind=data", nil)
	d := *websocket.DefaultDialer
	d.ReadBufferSize = 1024
	d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			err = c.(*net.TCPConn).SetReadBuffer(4096)
		}
		return c, err
	}
	slow, _, err := d.Dial(url+"?kind=data", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	waitClients(t, h, 2, true)
	var slowClient *client
	for _, c := range *h.clients.Load() {
		if c.remote == slow.LocalAddr().String() {
			slowClient = c
		}
	}
	if slowClient == nil {
		t.Fatal("the slow client is not among the hub's")
	}

	got := make(chan string, 64)
	readErr := make(chan error, 1)
	go func() {
		for {
			_, p, err := fast.ReadMessage()
			if err != nil {
				readErr <- err
				close(got)
				return
			}
			got <- string(p)
		}
	}()
	var received []string
	receive := func() {
		t.Helper()
		select {
		case s := <-got:
			received = append(received, s)
		case <-time.After(5 * time.Second): // a bound on a wait, not a sleep
			t.Fatalf("fast client: nothing after %d messages", len(received))
		}
	}

	tr := sinktest.NewTracker()
	pad := strings.Repeat("x", 2048)
	n, closedAt := 0, -1
	for n < 10000 && (closedAt < 0 || n < closedAt+20) {
		full := len(slowClient.send) == cap(slowClient.send)
		h.Enqueue(msg(tr, uint64(n+1), sink.KindData, "g", "w", fmt.Sprintf("%05d %s", n, pad)))
		n++
		if full && closedAt < 0 {
			// The Enqueue that found the queue full has returned, and the
			// slow client is condemned already.
			if s := h.Stats().SlowClosed; s != 1 {
				t.Fatalf("queue was full at message %d, but SlowClosed is %d", n-1, s)
			}
			closedAt = n - 1
		}
		// Lockstep with the fast client, so that only the slow one can fall behind.
		receive()
	}
	if closedAt < 0 {
		t.Fatalf("the slow client's queue never filled in %d messages", n)
	}
	t.Logf("slow client closed at message %d", closedAt)
	for i, s := range received {
		if want := fmt.Sprintf("%05d ", i); !strings.HasPrefix(s, want) {
			t.Fatalf("fast client: message %d is %.6q, want %q", i, s, want)
		}
	}

	// The slow client reads now: a prefix of the stream, in order, then the close.
	_ = slow.SetReadDeadline(time.Now().Add(10 * time.Second))
	i := 0
	for {
		_, p, err := slow.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != CloseSlowConsumer || ce.Text != ReasonSlowConsumer {
				t.Errorf("slow client after %d messages: %v, want close %d %q", i, err, CloseSlowConsumer, ReasonSlowConsumer)
			}
			break
		}
		if want := fmt.Sprintf("%05d ", i); !strings.HasPrefix(string(p), want) {
			t.Fatalf("slow client: message %d is %.6q, want %q", i, p, want)
		}
		i++
	}
	if i > closedAt {
		t.Errorf("slow client read %d messages, more than were sent before it was closed", i)
	}
	tr.Wait(t, n, true)
	testutil.Eventually(5*time.Second, func() bool { return h.Stats().Clients == 1 }) // the slow one unregistering
	s := h.Stats()
	if s.Clients != 1 || s.SlowClosed != 1 {
		t.Errorf("stats %+v: want 1 client left, 1 slow closed", s)
	}
	_ = fast.Close()
	<-readErr
}

func TestHubVanishedClient(t *testing.T) {
	testutil.CheckLeaks(t)
	h, url := serve(t, Options{PingInterval: 50 * time.Millisecond}, nil)

	// The socket closed without a close frame.
	c := dial(t, url+"?kind=data", nil)
	waitClients(t, h, 1, true)
	_ = c.NetConn().Close()
	if !testutil.Eventually(5*time.Second, func() bool { return h.Stats().Clients == 0 }) {
		t.Fatal("client with a closed socket not reaped")
	}

	// A client that answers no ping (its socket stays open): dropped after
	// about two ping intervals.
	silent := dial(t, url+"?kind=data", nil)
	waitClients(t, h, 1, true)
	start := time.Now()
	if !testutil.Eventually(5*time.Second, func() bool { return h.Stats().Clients == 0 }) {
		t.Fatal("silent client not reaped")
	}
	t.Logf("silent client reaped after %v", time.Since(start))
	_ = silent

	// A client that reads answers the pings and stays.
	alive := dial(t, url+"?kind=data", nil)
	waitClients(t, h, 1, true)
	var pings atomic.Int32
	alive.SetPingHandler(func(s string) error {
		pings.Add(1)
		return alive.WriteControl(websocket.PongMessage, []byte(s), time.Now().Add(time.Second))
	})
	readErr := make(chan error, 1)
	go func() {
		_, _, err := alive.ReadMessage()
		readErr <- err
	}()
	// Ten ping intervals: it would have been dropped after two without its pongs.
	if !testutil.Eventually(5*time.Second, func() bool { return pings.Load() >= 10 }) {
		t.Fatalf("%d pings in 5 s at a 50 ms interval", pings.Load())
	}
	if n := h.Stats().Clients; n != 1 {
		t.Fatalf("a client that answers pings was dropped (%d clients)", n)
	}
	tr := sinktest.NewTracker()
	h.Enqueue(msg(tr, 1, sink.KindData, "g", "w", "still here"))
	if err := <-readErr; err != nil {
		t.Fatalf("alive client: %v", err)
	}
	tr.Wait(t, 1, true)
}

func TestHubOrigin(t *testing.T) {
	testutil.CheckLeaks(t)
	origin := func(o string) http.Header { return http.Header{"Origin": {o}} }
	for _, tc := range []struct {
		allowed []string
		origin  string
		want    int
	}{
		{nil, "http://evil.example", http.StatusForbidden},
		{nil, "", http.StatusSwitchingProtocols},
		{nil, "SELF", http.StatusSwitchingProtocols},
		{[]string{"https://app.example"}, "https://app.example", http.StatusSwitchingProtocols},
		{[]string{"https://app.example/"}, "https://APP.example", http.StatusSwitchingProtocols},
		{[]string{"app.example:8443"}, "https://app.example:8443", http.StatusSwitchingProtocols},
		{[]string{"https://app.example"}, "http://app.example", http.StatusForbidden},
		{[]string{"https://app.example"}, "http://evil.example", http.StatusForbidden},
		{[]string{"https://app.example"}, "SELF", http.StatusSwitchingProtocols},
		{[]string{"*"}, "http://evil.example", http.StatusSwitchingProtocols},
	} {
		h, url := serve(t, Options{AllowedOrigins: tc.allowed}, nil)
		o := tc.origin
		if o == "SELF" {
			o = "http://" + strings.TrimSuffix(strings.TrimPrefix(url, "ws://"), "/ws")
		}
		var hdr http.Header
		if o != "" {
			hdr = origin(o)
		}
		if got, _ := dialStatus(t, url+"?kind=data", hdr); got != tc.want {
			t.Errorf("allowed %q, origin %q: HTTP %d, want %d", tc.allowed, o, got, tc.want)
		}
		if tc.want == http.StatusForbidden && h.Stats().Rejected != 1 {
			t.Errorf("allowed %q, origin %q: refusal not counted", tc.allowed, o)
		}
	}
}

func TestHubToken(t *testing.T) {
	testutil.CheckLeaks(t)
	_, url := serve(t, Options{Token: "s3cret"}, nil)
	bearer := func(s string) http.Header { return http.Header{"Authorization": {s}} }
	for _, tc := range []struct {
		query string
		hdr   http.Header
		want  int
	}{
		{"", nil, http.StatusUnauthorized},
		{"", bearer("Bearer wrong"), http.StatusUnauthorized},
		{"", bearer("Bearer s3cre"), http.StatusUnauthorized},
		{"", bearer("Basic s3cret"), http.StatusUnauthorized},
		{"&token=wrong", nil, http.StatusUnauthorized},
		{"&token=", nil, http.StatusUnauthorized},
		{"", bearer("Bearer s3cret"), http.StatusSwitchingProtocols},
		{"", bearer("bearer s3cret"), http.StatusSwitchingProtocols},
		{"&token=s3cret", nil, http.StatusSwitchingProtocols},
	} {
		got, hdr := dialStatus(t, url+"?kind=data"+tc.query, tc.hdr)
		if got != tc.want {
			t.Errorf("%q %v: HTTP %d, want %d", tc.query, tc.hdr, got, tc.want)
		}
		if got == http.StatusUnauthorized && !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("401 without a WWW-Authenticate: Bearer challenge")
		}
	}
}

func TestHubMaxClients(t *testing.T) {
	testutil.CheckLeaks(t)
	h, url := serve(t, Options{MaxClients: 1}, nil)
	dial(t, url+"?kind=data", nil)
	waitClients(t, h, 1, true)
	if got, _ := dialStatus(t, url+"?kind=data", nil); got != http.StatusServiceUnavailable {
		t.Errorf("HTTP %d, want 503", got)
	}
}

func TestHubClose(t *testing.T) {
	testutil.CheckLeaks(t)
	h, url := serve(t, Options{}, nil)
	cs := []*websocket.Conn{dial(t, url+"?kind=data", nil), dial(t, url, nil)}
	waitClients(t, h, 2, false)
	tr := sinktest.NewTracker()
	h.Enqueue(msg(tr, 1, sink.KindMetaData, "g", "w", "meta"))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- h.Close(ctx) }()
	for i, c := range cs {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			_, _, err := c.ReadMessage()
			if err == nil {
				continue // the metadata message, for the first client
			}
			if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
				t.Errorf("client %d: %v, want close 1001", i, err)
			}
			break
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if n := h.Stats().Clients; n != 0 {
		t.Errorf("%d clients after Close", n)
	}
	// After Close: refused; the cached message was given up. (That later
	// messages settle at once is sinktest's EnqueueAfterClose.)
	if got, _ := dialStatus(t, url, nil); got != http.StatusServiceUnavailable {
		t.Errorf("after Close: HTTP %d, want 503", got)
	}
	tr.Wait(t, 1, true)
}

// TestHubCloseDeadline: a client that never reads and never answers the close
// cannot hold Close beyond its context.
func TestHubCloseDeadline(t *testing.T) {
	testutil.CheckLeaks(t)
	h, url := serve(t, Options{}, nil)
	dial(t, url+"?kind=data", nil) // never reads: the close reply never comes
	waitClients(t, h, 1, true)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := h.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v, want a deadline error", err)
	}
	if n := h.Stats().Clients; n != 0 {
		t.Errorf("%d clients after Close", n)
	}
}

// TestHubConcurrent: producers on several goroutines while clients come and
// go, subscribe again and fall behind; every reference is given up exactly
// once by the end.
func TestHubConcurrent(t *testing.T) {
	testutil.CheckLeaks(t)
	h, url := serve(t, Options{ClientQueue: 16, MaxMetaData: 8}, nil)
	tr := sinktest.NewTracker()
	const producers, clientRounds, maxPerProducer = 4, 30, 200000
	var rounds atomic.Int32
	stopClients := make(chan struct{})
	clientsDone := make(chan struct{})
	go func() {
		defer close(clientsDone)
		for i := 0; ; i++ {
			select {
			case <-stopClients:
				return
			default:
			}
			c, _, err := websocket.DefaultDialer.Dial(url+"?group=g"+fmt.Sprint(i%3), nil)
			if err != nil {
				select {
				case <-stopClients: // refused by the closed hub
				default:
					t.Errorf("dial: %v", err)
				}
				return
			}
			if i%2 == 0 {
				_ = c.WriteMessage(websocket.TextMessage, []byte(`{"subscribe":{"kinds":["data","metadata","status"]}}`))
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			for range i % 40 { // read a few, then vanish; some read nothing and fall behind
				if _, _, err := c.ReadMessage(); err != nil {
					break
				}
			}
			_ = c.Close()
			rounds.Add(1)
		}
	}()
	var wg sync.WaitGroup
	var produced [producers]int
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < maxPerProducer && rounds.Load() < clientRounds; i++ {
				tok := uint64(p*maxPerProducer + i + 1)
				kind := []sink.Kind{sink.KindData, sink.KindData, sink.KindMetaData, sink.KindStatus, sink.KindField}[i%5]
				h.Enqueue(msg(tr, tok, kind, "g"+fmt.Sprint(i%3), "w"+fmt.Sprint(i%4), fmt.Sprintf("%d", tok)))
				produced[p]++
			}
		}()
	}
	wg.Wait()
	close(stopClients)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Close(ctx); err != nil { // also ends the last client's read
		t.Fatal(err)
	}
	<-clientsDone
	total := 0
	for _, n := range produced {
		total += n
	}
	tr.Wait(t, total, true)
	t.Logf("stats %+v", h.Stats())
}

// TestHubSubscribeTimeout: a client that connects without a selection and
// never subscribes is closed (1008) after SubscribeTimeout, so idle
// connections cannot hold the MaxClients slots; one that subscribes in
// time stays, as does one that selected in its URL and one that sends
// commands instead.
func TestHubSubscribeTimeout(t *testing.T) {
	commands := func(_ string, req []byte, reply func([]byte)) { reply(req) }
	h, url := serve(t, Options{SubscribeTimeout: 300 * time.Millisecond, MaxClients: 4, Commands: commands}, nil)
	idle := dial(t, url, nil)
	subscribed := dial(t, url, nil)
	if err := subscribed.WriteMessage(websocket.TextMessage, []byte(`{"subscribe":{}}`)); err != nil {
		t.Fatal(err)
	}
	byURL := dial(t, url+"?kind=data", nil)
	commander := dial(t, url, nil)
	command := func(id string) {
		t.Helper()
		if err := commander.WriteMessage(websocket.TextMessage, []byte(`{"command":{"requestId":"`+id+`"}}`)); err != nil {
			t.Fatal(err)
		}
		_ = commander.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, p, err := commander.ReadMessage(); err != nil || !strings.Contains(string(p), `"requestId":"`+id+`"`) {
			t.Fatalf("command %s: %q, %v", id, p, err)
		}
	}
	command("1")
	_ = idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err := idle.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, "no subscription") {
		t.Fatalf("the idle client: %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, "the idle client counted and gone", func() bool {
		st := h.Stats()
		return st.IdleClosed == 1 && st.Clients == 3
	})
	command("2") // past the timeout: the command client is still served
	// The others stay past the timeout: a message reaches both.
	h.Enqueue(msg(nil, 0, sink.KindData, "g", "w", `{"x":1}`))
	for _, c := range []*websocket.Conn{subscribed, byURL} {
		if got := readN(t, c, 1); len(got) != 1 {
			t.Errorf("a subscribed client got %v", got)
		}
	}
	// The freed slot takes a new client.
	dial(t, url+"?kind=data", nil).Close()
}
