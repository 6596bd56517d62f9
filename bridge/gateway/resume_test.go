package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// Restart without loss: the gateway (this test binary as a child process)
// publishes a fast Counter to NATS JetStream at-least-once; it is killed
// with SIGKILL mid-stream and started again with the same state directory.
// The stream must hold every counter value; duplicates are allowed, and each
// is in a message marked redelivered.

// gatewayChild is a gateway child process.
type gatewayChild struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
}

func startGatewayChild(t *testing.T, cfgPath string, env ...string) *gatewayChild {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), gatewayChildEnv+"="+cfgPath), env...)
	g := &gatewayChild{cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout = g.stderr
	cmd.Stderr = g.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		close(g.done)
	}()
	t.Cleanup(func() { g.kill() })
	return g
}

func (g *gatewayChild) kill() {
	select {
	case <-g.done:
		return
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGKILL)
	<-g.done
}

// stop ends it gracefully (SIGTERM) and waits.
func (g *gatewayChild) stop(t *testing.T) {
	t.Helper()
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
		if code := g.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("gateway exited with %d after SIGTERM:\n%s", code, g.stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Errorf("gateway did not stop on SIGTERM:\n%s", g.stderr.String())
		g.kill()
	}
	if strings.Contains(g.stderr.String(), "DATA RACE") {
		t.Errorf("data race in the gateway:\n%s", g.stderr.String())
	}
}

// The user the counter simulation servers accept.
const simUser, simPassword = "user1", "password1"

// startCounterSim starts a simulation server whose Demo.Counter ticks every
// rate, on addr ("" for a free port).
func startCounterSim(t *testing.T, addr string, rate time.Duration) *server.Server {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var srv *server.Server
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for {
		srv, err = server.New(&server.Config{
			Address:  addr,
			Policies: []uasc.EndpointSecurity{{PolicyURI: uasc.SecurityPolicyNone, Mode: ua.MessageSecurityModeNone}},
			Users:    map[string]string{simUser: simPassword},
			Logger:   quietLogger(),
			Sim:      server.SimConfig{DemoRate: rate, Folders: -1, Variables: -1, AlarmSources: -1},
		})
		if err == nil {
			err = srv.Start()
		}
		if err == nil || time.Now().After(deadline) {
			break
		}
		// The port just released by a stopped server may still be taken.
		pollPause()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// resumeConfig is a gateway configuration: groups writer groups of the
// Counter (one writer each, plus items-1 other demo nodes) to a JetStream
// stream, at-least-once.
func resumeConfig(t *testing.T, simURL, natsURL, stateDir, publisherID string, groups, items int) string {
	c := standalone(simURL)
	c.Gateway = config.Gateway{PublisherID: publisherID, StateDir: stateDir, ShutdownTimeout: dur(5 * time.Second)}
	c.Sinks = jetStreamSink(natsURL, true)
	w := writer("w", field("Counter", "ns=1;s=Demo.Counter"))
	for i := 1; i < items; i++ {
		w.Fields = append(w.Fields, field(fmt.Sprintf("X%02d", i), demoNodes[i%len(demoNodes)]))
	}
	for g := range groups {
		c.WriterGroups = append(c.WriterGroups, config.WriterGroup{
			Name: "g" + strconv.Itoa(g), Endpoint: "sim", PublishingInterval: dur(100 * time.Millisecond), MaxUnacked: 32,
			Nodes:   config.NodeDefaults{SamplingInterval: ptr(dur(0)), QueueSize: 200},
			Writers: []config.DataSetWriter{w},
		})
	}
	return marshalConfig(t, c)
}

// sinkMsg is what the test reads of one NetworkMessage in the stream.
type sinkMsg struct {
	Group       string
	Publisher   string
	Redelivered bool
	KeyFrame    bool      // it carries a ua-keyframe
	Counter     []float64 // the Counter values it carries
	At          time.Time // when the stream stored it
}

// jetStream is a JetStream context on a connection to url, closed when the
// test ends.
func jetStream(t *testing.T, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// readStream reads every message the stream holds.
func readStream(t *testing.T, natsURL string) []sinkMsg {
	t.Helper()
	js := jetStream(t, natsURL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "UAGATE")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := info.State.Msgs
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"opcua.json.data.>"}})
	if err != nil {
		t.Fatal(err)
	}
	var out []sinkMsg
	for {
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			meta, _ := m.Metadata()
			sm := parseSinkMsg(t, m.Data())
			if meta != nil {
				sm.At = meta.Timestamp
			}
			out = append(out, sm)
		}
		if n == 0 {
			break
		}
	}
	t.Logf("stream: %d messages, %d data messages read", total, len(out))
	return out
}

func parseSinkMsg(t *testing.T, data []byte) sinkMsg {
	var nm struct {
		MessageID       string          `json:"MessageId"`
		PublisherID     string          `json:"PublisherId"`
		WriterGroupName string          `json:"WriterGroupName"`
		Messages        json.RawMessage `json:"Messages"`
	}
	if err := json.Unmarshal(data, &nm); err != nil {
		t.Fatalf("message %s: %v", data, err)
	}
	sm := sinkMsg{Group: nm.WriterGroupName, Publisher: nm.PublisherID, Redelivered: strings.HasPrefix(nm.MessageID, bridge.RedeliveredPrefix)}
	type dsm struct {
		MessageType string                     `json:"MessageType"`
		Payload     map[string]json.RawMessage `json:"Payload"`
	}
	var dsms []dsm
	if len(nm.Messages) > 0 && nm.Messages[0] == '[' {
		_ = json.Unmarshal(nm.Messages, &dsms)
	} else {
		var one dsm
		_ = json.Unmarshal(nm.Messages, &one)
		dsms = []dsm{one}
	}
	for _, d := range dsms {
		if d.MessageType == "ua-keyframe" {
			sm.KeyFrame = true
		}
		raw, ok := d.Payload["Counter"]
		if !ok {
			continue
		}
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil {
			var obj struct {
				Value *float64 `json:"Value"`
				Body  *float64 `json:"Body"`
			}
			if json.Unmarshal(raw, &obj) != nil {
				continue
			}
			switch {
			case obj.Value != nil:
				v = *obj.Value
			case obj.Body != nil:
				v = *obj.Body
			default:
				continue // a Bad status (waiting for data)
			}
		}
		sm.Counter = append(sm.Counter, v)
	}
	return sm
}

// counterCheck sums up the Counter values of a group in the stream.
type counterCheck struct {
	min, max   float64
	distinct   int
	missing    []float64
	duplicates int
	unmarked   int // duplicates in messages not marked redelivered
}

func checkCounter(msgs []sinkMsg, group string, from float64) counterCheck {
	seen := map[float64]int{}
	var c counterCheck
	first := true
	for _, m := range msgs {
		if m.Group != group {
			continue
		}
		for _, v := range m.Counter {
			if v < from {
				continue
			}
			seen[v]++
			if seen[v] > 1 {
				c.duplicates++
				if !m.Redelivered {
					c.unmarked++
				}
			}
			if first || v < c.min {
				c.min = v
			}
			if first || v > c.max {
				c.max = v
			}
			first = false
		}
	}
	c.distinct = len(seen)
	for v := c.min; v <= c.max; v++ {
		if seen[v] == 0 {
			c.missing = append(c.missing, v)
		}
	}
	sort.Float64s(c.missing)
	return c
}

// waitStream waits until the stream holds at least n messages.
func waitStream(t *testing.T, natsURL string, n uint64, d time.Duration, why func() string) {
	t.Helper()
	js := jetStream(t, natsURL)
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := js.Stream(ctx, "UAGATE")
		var have uint64
		if err == nil {
			if info, err := st.Info(ctx); err == nil {
				have = info.State.Msgs
			}
		}
		cancel()
		if have >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream holds %d messages, want %d within %v\n%s", have, n, d, why())
		}
		pollPause()
	}
}

func TestRestartWithoutLoss(t *testing.T) {
	t.Run("kill", func(t *testing.T) { testRestartWithoutLoss(t, false) })
	// A graceful stop (SIGTERM: a rolling upgrade) keeps the subscription
	// at the server too (gateway.keepSubscriptionsOnStop, the default).
	t.Run("sigterm", func(t *testing.T) { testRestartWithoutLoss(t, true) })
}

func testRestartWithoutLoss(t *testing.T, graceful bool) {
	srv := startCounterSim(t, "", 20*time.Millisecond)
	ns := startNATSCluster(t, 1)[0]
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(resumeConfig(t, srv.URL(), ns.URL(), filepath.Join(dir, "state"), "gw", 1, 3)), 0o600); err != nil {
		t.Fatal(err)
	}
	first := startGatewayChild(t, cfgPath)
	waitStream(t, ns.URL(), 30, 30*time.Second, first.stderr.String)
	if graceful {
		first.stop(t)
		if log1 := first.stderr.String(); !strings.Contains(log1, "subscription kept at the server") {
			t.Errorf("the graceful stop did not keep the subscription:\n%s", log1)
		}
	} else {
		first.kill() // SIGKILL mid-stream: no drain, no CloseSession
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "resume", "g0.json")); err != nil {
		t.Fatalf("no resume state after the first run: %v", err)
	}
	// Down for a second on purpose (not waiting for a condition): the
	// server keeps the subscription, and queues what it samples, while
	// nobody asks for it.
	<-time.After(time.Second)
	second := startGatewayChild(t, cfgPath)
	before := uint64(len(readStream(t, ns.URL())))
	waitStream(t, ns.URL(), before+30, 30*time.Second, second.stderr.String)
	second.stop(t)
	log2 := second.stderr.String()
	if !strings.Contains(log2, "subscription resumed") {
		t.Errorf("the second run did not resume the subscription:\n%s", log2)
	}
	if strings.Contains(log2, "notification messages lost") || strings.Contains(log2, "notifications lost") {
		t.Errorf("the second run reported a gap:\n%s", log2)
	}

	msgs := readStream(t, ns.URL())
	c := checkCounter(msgs, "g0", 0)
	t.Logf("counter %v … %v: %d values, %d duplicates (%d unmarked), missing %v", c.min, c.max, c.distinct, c.duplicates, c.unmarked, c.missing)
	if len(c.missing) > 0 {
		t.Errorf("counter values lost across the restart: %v", c.missing)
	}
	if c.unmarked > 0 {
		t.Errorf("%d duplicates in messages not marked redelivered", c.unmarked)
	}
	if c.distinct < 50 {
		t.Errorf("only %d counter values", c.distinct)
	}
	// Duplicates are bounded: at most what MaxUnacked messages carry.
	if c.duplicates > 32*10 {
		t.Errorf("%d duplicates", c.duplicates)
	}
}

// TestRestartSubscriptionsGone: the server restarts too while the gateway
// is down: the subscription is recreated, the gap reported, and the first
// key frame carries current values.
func TestRestartSubscriptionsGone(t *testing.T) {
	srv := startCounterSim(t, "", 20*time.Millisecond)
	addr := strings.TrimPrefix(srv.URL(), "opc.tcp://")
	ns := startNATSCluster(t, 1)[0]
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(resumeConfig(t, srv.URL(), ns.URL(), filepath.Join(dir, "state"), "gw", 1, 3)), 0o600); err != nil {
		t.Fatal(err)
	}
	first := startGatewayChild(t, cfgPath)
	waitStream(t, ns.URL(), 20, 30*time.Second, first.stderr.String)
	first.kill()
	srv.Close()
	startCounterSim(t, addr, 20*time.Millisecond) // a new server: no subscriptions
	before := len(readStream(t, ns.URL()))
	second := startGatewayChild(t, cfgPath)
	waitStream(t, ns.URL(), uint64(before)+20, 30*time.Second, second.stderr.String)
	second.stop(t)
	log2 := second.stderr.String()
	if !strings.Contains(log2, "notification messages lost") {
		t.Errorf("the second run reported no gap:\n%s", log2)
	}
	msgs := readStream(t, ns.URL())
	if len(msgs) <= before {
		t.Fatal("nothing from the second run")
	}
	// The first message of the new subscription is a key frame with the
	// current value of the new server's counter (it started again near 0).
	// Before it the store-and-forward log may send again, marked, what the
	// first run had handed to the sink unconfirmed; after it nothing is
	// marked.
	var firstNew *sinkMsg
	at := 0
	for i := before; i < len(msgs); i++ {
		if msgs[i].Group == "g0" && len(msgs[i].Counter) > 0 && !msgs[i].Redelivered {
			firstNew, at = &msgs[i], i
			break
		}
	}
	if firstNew == nil {
		t.Fatal("no counter value from the second run")
	}
	if !firstNew.KeyFrame {
		t.Error("the first message after the recreation is not a key frame")
	}
	for _, m := range msgs[at:] {
		if m.Redelivered {
			t.Error("a recreated subscription's message is marked redelivered")
			break
		}
	}
	if v := firstNew.Counter[0]; v > 500 {
		t.Errorf("first value after the recreation %v: not the new server's current value", v)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// pollPause is the pause between two looks at a condition being polled.
func pollPause() { time.Sleep(50 * time.Millisecond) }

// demoNodes are the other nodes a writer group monitors beside the Counter.
var demoNodes = []string{server.NodeSine, server.NodeRandom, server.NodeStep, server.NodeSetpoint}
