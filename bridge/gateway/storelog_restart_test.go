package gateway_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/internal/brokertest"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// outageEnv sets the length of TestStoreOutageAndKill's broker outage (a
// Go duration): the size is 10m; CI runs 3s.
const outageEnv = "UAGATE_TEST_OUTAGE"

// TestStoreOutageAndKill: the store-and-forward log carries an at-most-once
// sink across its broker's outage and the gateway's kill -9 during the
// drain. 1,000 counters changing every 100 ms (10,000 changes/s) with a
// server queue of 10 samples; the core NATS sink's broker is unreachable
// for the outage (a proxy in front of it cuts and refuses the gateway's
// connections: the subscriber, connected to nats-server itself, stays
// subscribed, as core NATS keeps nothing for a subscriber that is not),
// and the gateway is killed (SIGKILL) while it drains the backlog and
// started again at once. The subscriber checks
// every counter: nothing reaches it twice, and nothing is lost but what
// the killed gateway had handed to the sink and not written (the
// at-most-once claim, logged and counted as abandoned). The drain rate is
// logged, and checked (at least 5× the ingest) at the size.
func TestStoreOutageAndKill(t *testing.T) {
	outage := 3 * time.Second
	full := false
	if v := os.Getenv(outageEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("$%s: %v", outageEnv, err)
		}
		outage, full = d, true
	}
	const folders, perFolder = 10, 100
	url := startSimChild(t, server.SimConfig{Folders: folders, Variables: perFolder, Rates: []time.Duration{100 * time.Millisecond},
		Types: []ua.TypeID{ua.TypeInt32}, Generators: []server.Generator{server.GeneratorCounter}, AlarmSources: -1})
	ns := brokertest.StartNATS(t, brokertest.NATSOptions{})
	sub := subscribeCounters(t, ns.URL())

	dir := t.TempDir()
	c := standalone(url)
	c.Gateway = config.Gateway{PublisherID: "gw", StateDir: filepath.Join(dir, "state"), ShutdownTimeout: dur(5 * time.Second)}
	proxy := brokertest.StartProxy(t, strings.TrimPrefix(ns.URL(), "nats://"))
	c.Sinks = config.Sinks{NATS: []config.NATSSink{{Name: "amo", URL: "nats://" + proxy.Addr()}}}
	wg := config.WriterGroup{Name: "g", Endpoint: "sim", PublishingInterval: dur(50 * time.Millisecond),
		Nodes: config.NodeDefaults{SamplingInterval: ptr(dur(20 * time.Millisecond)), QueueSize: 10}}
	for f := range folders {
		wg.Writers = append(wg.Writers, config.DataSetWriter{ID: uint16(f + 1), Name: fmt.Sprintf("F%03d", f),
			Browse: []config.BrowseSelect{{Root: fmt.Sprintf("ns=1;s=Load.F%03d", f), Depth: 1, MaxNodes: perFolder}}})
	}
	c.WriterGroups = []config.WriterGroup{wg}
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(marshalConfig(t, c)), 0o600); err != nil {
		t.Fatal(err)
	}
	first := startGatewayChild(t, cfgPath, "GORACE=atexit_sleep_ms=0")
	waitUntil(t, nil, 2*time.Minute, "every counter at the subscriber", func() bool { return sub.counters() == folders*perFolder })

	proxy.Down()
	down := time.Now()
	<-time.After(outage) // the outage: its length is the test's parameter, not a wait for a condition
	atRestart := sub.values()
	proxy.Up()
	up := time.Now()
	ingest := float64(folders*perFolder) / 0.1 // changes per second
	backlog := ingest * time.Since(down).Seconds()
	// The sink reconnects with its backoff; the drain starts with the
	// first value it delivers, and the gateway is killed in its middle.
	waitUntil(t, nil, 2*time.Minute, "the sink reconnected", func() bool { return sub.values() > atRestart })
	drainFrom, drainStart := time.Now(), sub.values()
	waitUntil(t, nil, 2*time.Minute, "a third of the backlog delivered", func() bool {
		return float64(sub.values()-atRestart) >= backlog/3
	})
	first.kill()
	killedAt := sub.values() - atRestart
	drainRate := float64(sub.values()-drainStart) / time.Since(drainFrom).Seconds()
	second := startGatewayChild(t, cfgPath, "GORACE=atexit_sleep_ms=0")
	logs := func() string { return first.stderr.String() + "\n--- after the kill ---\n" + second.stderr.String() }
	waitUntil(t, nil, 2*time.Minute, "the backlog delivered", func() bool {
		return float64(sub.values()-atRestart) >= backlog+ingest // and a second of new values
	})
	drained := time.Since(up)
	second.stop(t)

	r := sub.report()
	abandoned := 0
	if m := regexp.MustCompile(`does not get again what it was handed before the stop and had not written.* messages=(\d+)`).FindStringSubmatch(second.stderr.String()); m != nil {
		abandoned, _ = strconv.Atoi(m[1])
	}
	t.Logf("outage %v: backlog %.0f values (%.0f/s ingest); drained at %.0f values/s (%.1f× the ingest) until the kill -9 after %d values, all in %v with the restart; %d values (%d key frame restatements), %d lost, %d twice; %d messages abandoned by the at-most-once claim",
		outage, backlog, ingest, drainRate, drainRate/ingest, killedAt, drained.Round(time.Millisecond), r.values, r.restated, r.lost, r.dups, abandoned)
	if r.dups != 0 {
		t.Errorf("%d counter values reached the at-most-once sink twice:\n%s", r.dups, logs())
	}
	// One message carries at most a publishing interval's samples of one
	// writer's 100 counters.
	if r.lost > abandoned*perFolder*3 {
		t.Errorf("%d counter values lost, beyond the %d messages the kill abandoned:\n%s", r.lost, abandoned, logs())
	}
	if full && drainRate < 5*ingest {
		t.Errorf("the backlog drained at %.0f values/s, %.1f× the ingest: want at least 5×", drainRate, drainRate/ingest)
	}
}

// counterSub checks every counter of the Load folders a NATS subscriber
// receives: each value must be the previous one plus one.
type counterSub struct {
	mu   sync.Mutex
	last map[string]float64 // by writer/field
	n    int                // values received
	lost int
	dups int
	// restated: key frame values restating their field's last value
	restated int
}

type counterReport struct{ values, lost, dups, restated int }

func subscribeCounters(t *testing.T, url string) *counterSub {
	t.Helper()
	s := &counterSub{last: map[string]float64{}}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.Subscribe("opcua.json.data.>", func(m *nats.Msg) { s.add(t, m.Data) })
	if err != nil {
		t.Fatal(err)
	}
	// The drain runs at tens of times the ingest, faster than this parses:
	// the client buffers what its handler has not taken yet instead of
	// dropping it as a slow consumer (nats.go's default: 65,536 messages).
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *counterSub) add(t *testing.T, data []byte) {
	var nm struct {
		MessageId string
		Messages  struct {
			SequenceNumber    int
			DataSetWriterName string
			MessageType       string
			Payload           map[string]json.RawMessage
		}
	}
	if err := json.Unmarshal(data, &nm); err != nil {
		t.Errorf("message %.200s: %v", data, err)
		return
	}
	d := nm.Messages
	if d.MessageType == "ua-keepalive" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, raw := range d.Payload {
		v, err := counterValue(raw)
		if err != nil {
			continue // BadWaitingForInitialData before a field's first value
		}
		k := d.DataSetWriterName + "/" + name
		prev, seen := s.last[k]
		switch {
		case !seen:
		case v == prev && d.MessageType == "ua-keyframe":
			// A key frame states every field, also one that did not change
			// (the first of a writer in a process, or after a gap): not a
			// value sent twice (checkValues counts these apart too).
			s.restated++
			continue
		case v <= prev:
			s.dups++
			if s.dups <= 5 {
				t.Logf("twice: %s = %v (had %v) in %s %s seq %d", k, v, prev, nm.MessageId, d.MessageType, d.SequenceNumber)
			}
			continue
		case v > prev+1:
			s.lost += int(v - prev - 1)
		}
		s.last[k] = v
		s.n++
	}
}

func (s *counterSub) counters() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.last)
}

func (s *counterSub) values() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *counterSub) report() counterReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return counterReport{s.n, s.lost, s.dups, s.restated}
}
