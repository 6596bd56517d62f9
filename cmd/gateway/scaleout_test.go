package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Scale-out on loopback: a 3-node JetStream cluster of Debian's nats-server
// (each a process), the simulation server with a fast Counter in the test,
// and three gateway processes (this test binary) sharing four writer groups
// through leases in the cluster, each publishing at-least-once to a
// 3-replica stream. One gateway is killed with SIGKILL: its groups resume on
// the others within 15 s, through the restart path (TransferSubscriptions +
// Republish). Then a NATS node is killed: everything goes on. At the end the
// stream must hold every Counter value of every group (duplicates allowed),
// and no group may have been served by two replicas at once: each holder's
// writer numbers its DataSetMessages from 1, so two holders at once would
// interleave two sequences.
//
// UAGATE_SCALEOUT_GROUPS=n runs n writer groups instead of 4.

const scaleLeaseTTL = 5 * time.Second

func scaleConfig(simURL, natsURL string, groups int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `gateway:
  publisherId: gw
  shutdownTimeout: 8s
embedded:
  sim: {enabled: false}
  mqtt: {enabled: false}
  nats: {enabled: false}
http:
  disabled: true
endpoints:
  - name: sim
    url: %q
    securityPolicy: None
    securityMode: None
    autoAccept: true
sinks:
  nats:
    - name: js
      url: %q
      delivery: {guarantee: at-least-once, queueSize: 4096}
      jetStream: {stream: UAGATE}
writerGroups:
`, simURL, natsURL)
	for g := range groups {
		// The server's queues must hold what the Counter makes while nobody
		// serves the group (a takeover after a kill: about 1.2 TTL).
		fmt.Fprintf(&b, `  - name: g%d
    endpoint: sim
    publishingInterval: 100ms
    maxUnacked: 32
    nodes: {samplingInterval: 0, queueSize: 1000}
    writers:
      - name: w
        fields:
          - {name: Counter, node: "ns=1;s=Demo.Counter"}
          - {name: Sine, node: %q}
`, g, demoNodes[0])
	}
	return b.String()
}

// streamMsg is a NetworkMessage of the stream, as the ownership check sees it.
type streamMsg struct {
	sinkMsg
	Seq       uint64 // stream sequence
	MessageID string
	DSMs      []dsmSeq
}

type dsmSeq struct {
	Type string // ua-keyframe, ua-deltaframe, ua-keepalive
	Seq  uint32
}

func readScaleStream(t *testing.T, url string) []streamMsg {
	t.Helper()
	var last error
	for range 5 {
		out, err := tryReadScaleStream(url)
		if err == nil {
			return out
		}
		last = err
		pollPause()
	}
	t.Fatalf("reading the stream: %v", last)
	return nil
}

// tryReadScaleStream reads the stream's data messages through an ephemeral
// pull consumer (an ordered consumer's resets stall while a node is down).
func tryReadScaleStream(url string) ([]streamMsg, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := js.CreateConsumer(ctx, "UAGATE", jetstream.ConsumerConfig{
		FilterSubject: "opcua.json.data.>", AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		MemoryStorage: true, Replicas: 1, InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = js.DeleteConsumer(context.Background(), "UAGATE", cons.CachedInfo().Name) }()
	var out []streamMsg
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			return nil, err
		}
		if info.NumPending == 0 {
			break
		}
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		for m := range batch.Messages() {
			out = append(out, parseStreamMsg(m))
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, err
		}
	}
	return out, nil
}

func parseStreamMsg(m jetstream.Msg) streamMsg {
	sm := streamMsg{sinkMsg: parseSinkMsgQuiet(m.Data())}
	if meta, _ := m.Metadata(); meta != nil {
		sm.At, sm.Seq = meta.Timestamp, meta.Sequence.Stream
	}
	type dsm struct {
		MessageType    string `json:"MessageType"`
		SequenceNumber uint32 `json:"SequenceNumber"`
	}
	var nm struct {
		MessageID string          `json:"MessageId"`
		Messages  json.RawMessage `json:"Messages"`
	}
	_ = json.Unmarshal(m.Data(), &nm)
	sm.MessageID = nm.MessageID
	var dsms []dsm
	if len(nm.Messages) > 0 && nm.Messages[0] == '[' {
		_ = json.Unmarshal(nm.Messages, &dsms)
	} else {
		var one dsm
		if json.Unmarshal(nm.Messages, &one) == nil {
			dsms = append(dsms, one)
		}
	}
	for _, d := range dsms {
		sm.DSMs = append(sm.DSMs, dsmSeq{Type: d.MessageType, Seq: d.SequenceNumber})
	}
	return sm
}

// parseSinkMsgQuiet is parseSinkMsg for a reader without a *testing.T: a
// message that is not JSON counts as carrying nothing.
func parseSinkMsgQuiet(data []byte) sinkMsg {
	var nm struct {
		MessageID string `json:"MessageId"`
	}
	if json.Unmarshal(data, &nm) != nil {
		return sinkMsg{}
	}
	return parseSinkMsg(nil, data)
}

// ownership walks a group's messages in stream order and returns where a
// writer's sequence does not follow from the message before: a message of a
// new holder starts at 1; anything else out of line means two holders
// interleaved (or a lost message). A message stored twice (same MessageId:
// a publish retried) is no violation. It also returns when each run began.
func ownership(msgs []streamMsg, group string) (violations []string, runs []time.Time) {
	next := uint32(0) // the next data sequence number expected; 0: none yet
	ids := map[string]bool{}
	for _, m := range msgs {
		if m.Group != group || len(m.DSMs) == 0 {
			continue
		}
		if ids[m.MessageID] {
			continue
		}
		ids[m.MessageID] = true
		for _, d := range m.DSMs {
			switch {
			case d.Seq == 1 && (d.Type != "ua-keepalive" || next != 1):
				// A new holder's writer (a keep-alive before any data also
				// carries 1, the next expected number).
				runs = append(runs, m.At)
				next = 1
			case next == 0:
				violations = append(violations, fmt.Sprintf("stream seq %d: first message has sequence %d", m.Seq, d.Seq))
				next = d.Seq
			case d.Seq != next:
				violations = append(violations, fmt.Sprintf("stream seq %d (%s): sequence %d, expected %d", m.Seq, m.At.Format("15:04:05.000"), d.Seq, next))
				next = d.Seq
			}
			if d.Type != "ua-keepalive" {
				next++
			}
		}
	}
	return violations, runs
}

type leaseView struct {
	Replica  string    `json:"replica"`
	Released bool      `json:"released"`
	Acquired time.Time `json:"acquired"`
}

// holders reads who holds each group's lease.
func holders(t *testing.T, url string, groups int) map[string]leaseView {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := map[string]leaseView{}
	kv, err := js.KeyValue(ctx, "uagate-leases")
	if err != nil {
		return out
	}
	for g := range groups {
		name := "g" + strconv.Itoa(g)
		e, err := kv.Get(ctx, "group."+name)
		if err != nil {
			continue
		}
		var v leaseView
		if json.Unmarshal(e.Value(), &v) == nil && !v.Released {
			out[name] = v
		}
	}
	return out
}

func TestScaleOut(t *testing.T) {
	groups := 4
	if s := os.Getenv("UAGATE_SCALEOUT_GROUPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 3 {
			t.Fatalf("UAGATE_SCALEOUT_GROUPS=%q: want a number ≥ 3", s)
		}
		groups = n
	}
	nodes := startNATSCluster(t, 3)
	url := clusterURL(nodes)
	// The data stream, replicated on the three nodes (the sink does not
	// create it: it would make it R1).
	func() {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "UAGATE", Subjects: []string{"opcua.json.>"}, Replicas: 3, Storage: jetstream.FileStorage})
			cancel()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("creating the stream: %v", err)
			}
			pollPause() // the cluster's meta leader is being elected
		}
	}()
	srv := startCounterSim(t, "", 50*time.Millisecond)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(scaleConfig(srv.URL(), url, groups)), 0o600); err != nil {
		t.Fatal(err)
	}
	gws := map[string]*gatewayChild{}
	ids := []string{"gw0", "gw1", "gw2"}
	for _, id := range ids {
		gws[id] = startGatewayChild(t, cfgPath,
			"UAGATE_STATE_DIR="+filepath.Join(dir, id),
			"UAGATE_SCALEOUT_ENABLED=true",
			"UAGATE_SCALEOUT_NATS_URL="+url,
			"UAGATE_SCALEOUT_LEASE_TTL="+scaleLeaseTTL.String(),
			"UAGATE_SCALEOUT_REPLICA_ID="+id)
	}
	logs := func() string {
		var b strings.Builder
		for _, id := range ids {
			fmt.Fprintf(&b, "=== %s\n%s\n", id, gws[id].stderr.String())
		}
		return b.String()
	}
	per := (groups + 2) / 3
	balanced := func(live []string) (map[string][]string, bool) {
		h := holders(t, url, groups)
		by := map[string][]string{}
		for g, v := range h {
			by[v.Replica] = append(by[v.Replica], g)
		}
		if len(h) != groups {
			return by, false
		}
		for _, id := range live {
			if n := len(by[id]); n == 0 || n > (groups+len(live)-1)/len(live) {
				return by, false
			}
		}
		return by, len(by) == len(live)
	}
	var by map[string][]string
	deadline := time.Now().Add(60 * time.Second)
	for {
		var ok bool
		if by, ok = balanced(ids); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the groups are not shared: %v\n%s", by, logs())
		}
		pollPause()
	}
	t.Logf("shared: %v", by)
	waitStream(t, url, uint64(groups*20), 30*time.Second, logs)

	// kill -9 the replica with the most groups.
	victim := ids[0]
	for _, id := range ids {
		if len(by[id]) == per {
			victim = id
		}
	}
	lost := by[victim]
	killed := time.Now()
	gws[victim].kill()
	var rest []string
	for _, id := range ids {
		if id != victim {
			rest = append(rest, id)
		}
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		var ok bool
		if by, ok = balanced(rest); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's groups %v not taken over: %v\n%s", victim, lost, by, logs())
		}
		pollPause()
	}
	// Resumed: the new holder's first message in the stream.
	resumed := map[string]time.Duration{}
	deadline = time.Now().Add(30 * time.Second)
	for len(resumed) < len(lost) {
		msgs := readScaleStream(t, url)
		for _, g := range lost {
			_, runs := ownership(msgs, g)
			for _, r := range runs {
				if r.After(killed) {
					resumed[g] = r.Sub(killed)
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message of a new holder of %v since the kill (resumed %v)\n%s", lost, resumed, logs())
		}
		if len(resumed) < len(lost) {
			pollPause()
		}
	}
	t.Logf("%s killed holding %v; resumed after %v; now %v", victim, lost, resumed, by)
	for g, d := range resumed {
		if d > 15*time.Second {
			t.Errorf("group %s resumed %v after the kill, want within 15 s", g, d)
		}
	}

	// A NATS node dies too: the leases and the stream have two of three.
	before := len(readScaleStream(t, url))
	nodes[0].kill()
	nodeKilled := time.Now()
	alive := clusterURL(nodes[1:])
	waitStream(t, alive, uint64(before+groups*30), 40*time.Second, logs)
	t.Logf("after the NATS node kill: %d more messages in %v", len(readScaleStream(t, alive))-before, time.Since(nodeKilled).Round(time.Millisecond))
	if by, ok := balanced(rest); !ok {
		t.Errorf("after the NATS node kill the groups are not served by the two replicas: %v", by)
	}

	for _, id := range rest {
		gws[id].stop(t)
	}
	msgs := readScaleStream(t, alive)
	t.Logf("stream: %d data messages", len(msgs))
	plain := make([]sinkMsg, len(msgs))
	for i := range msgs {
		plain[i] = msgs[i].sinkMsg
	}
	for g := range groups {
		name := "g" + strconv.Itoa(g)
		c := checkCounter(plain, name, 0)
		v, runs := ownership(msgs, name)
		t.Logf("%s: counter %v … %v, %d values, %d duplicates (%d unmarked), %d holders in turn", name, c.min, c.max, c.distinct, c.duplicates, c.unmarked, len(runs))
		if len(c.missing) > 0 {
			t.Errorf("%s: counter values lost: %v", name, head(c.missing, 20))
		}
		if c.distinct < 100 {
			t.Errorf("%s: only %d counter values", name, c.distinct)
		}
		if len(v) > 0 {
			t.Errorf("%s: served by two replicas at once, or a message lost: %v", name, head(v, 10))
		}
	}
	for _, id := range ids {
		if strings.Contains(gws[id].stderr.String(), "DATA RACE") {
			t.Errorf("data race in %s", id)
		}
	}
	if t.Failed() {
		t.Log(logs())
	}
}

func head[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}
