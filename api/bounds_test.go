package api

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
)

// TestSlowBodyBounded: a client that sends its body a byte at a time holds
// a handler no longer than ReadTimeout (it held one for as long as it
// kept sending).
func TestSlowBodyBounded(t *testing.T) {
	_, c := serveReal(t, newTestBackend(t, baseConfig()), Options{ReadTimeout: time.Second})
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"name":"slow","endpoint":"plc1","writers":[]}`
	start := time.Now()
	_, err = io.WriteString(conn, "POST /api/v1/writer-groups HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < len(body); i++ {
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
			select {
			case <-time.After(300 * time.Millisecond):
			case <-done:
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	took := time.Since(start)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("the trickled body was taken: %d", resp.StatusCode)
		}
	}
	if took > 5*time.Second {
		t.Errorf("a trickled body held the request for %v (ReadTimeout 1s)", took)
	}
	conn.Close()
	<-done
}

// TestConnectionCap: past MaxConnections open connections, one more is
// answered 503 and closed at once (counted); once one closes, the next is
// served.
func TestConnectionCap(t *testing.T) {
	_, c := serveReal(t, newTestBackend(t, nil), Options{MaxConnections: 3})
	addr := strings.TrimPrefix(c.base, "http://")
	var held []net.Conn
	for range 3 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, conn)
	}
	// Accept runs in the background: the fourth is refused once the three
	// are counted.
	testutil.WaitFor(t, 5*time.Second, "a connection past the bound refused", func() bool {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		b, _ := io.ReadAll(conn)
		return strings.HasPrefix(string(b), "HTTP/1.1 503") && strings.Contains(string(b), "too many open connections")
	})
	held[0].Close()
	testutil.WaitFor(t, 5*time.Second, "a connection served after one closed", func() bool {
		resp, err := (&http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Get(c.base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	for _, h := range held[1:] {
		h.Close()
	}
	// The server counts a connection gone when it sees it closed: until then
	// the scrape itself may be refused (a busy machine).
	var v string
	testutil.WaitFor(t, 5*time.Second, "the metrics served", func() bool {
		resp, err := (&http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Get(c.base + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			return false
		}
		v = metricIn(body, `uagate_api_refused_total{reason="connections"}`)
		return true
	})
	if v == "" || v == "0" {
		t.Errorf(`uagate_api_refused_total{reason="connections"} %q`, v)
	}
}

// TestStrictJSON: a body with a member twice (decoders silently keep the
// last) is refused naming it; a value of the wrong type is named by its
// full JSON pointer, also deep in arrays (it was "/Node", "the body", or
// "malformed JSON … unexpected end").
func TestStrictJSON(t *testing.T) {
	b := newTestBackend(t, baseConfig())
	_, ts := newTestServer(t, b, Options{})
	for _, tc := range []struct{ body, field, detail string }{
		{`{"name":"a","name":"b","endpoint":"plc1"}`, "/name", `member "name" appears twice in the body`},
		{`{"name":"g2","endpoint":"plc1","writers":[{"name":"w","fields":[{"node":"i=1"},{"node":"i=2","node":"i=3"}]}]}`,
			"/writers/0/fields/1/node", `member "node" appears twice in /writers/0/fields/1`},
		{`{"name":"g2","endpoint":"plc1","writers":[{"name":"w","fields":[{"node":5}]}]}`,
			"/writers/0/fields/0/node", "/writers/0/fields/0/node: wrong JSON type (number), want string"},
		{`{"name":"g2","endpoint":"plc1","writers":[{"name":"w"},{"name":"v","id":"x"}]}`,
			"/writers/1/id", "/writers/1/id: wrong JSON type (string), want integer"},
		{`{"name":"g2","endpoint":"plc1","writers":{"name":"w"}}`, "/writers", "/writers: wrong JSON type (object), want array"},
		{`{"name":"g2","endpoint":"plc1","writers":[{"name":"w","id":70000}]}`, "/writers/0/id", "/writers/0/id: wrong JSON type (number 70000), want integer"},
	} {
		r := do(t, ts, "POST", "/api/v1/writer-groups", "", tc.body)
		p := r.problem(t)
		if p.Status != 400 || p.Field != tc.field || p.Detail != tc.detail {
			t.Errorf("%s:\n got %+v\nwant field %s, detail %q", tc.body, p, tc.field, tc.detail)
		}
	}
	if len(b.Config().WriterGroups) != 1 {
		t.Error("a refused body changed the configuration")
	}
}
