package gateway_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/internal/testutil"
)

// epochOf is the lease epoch in a MessageId ("epoch-<n>-…", after a
// redelivered- mark), 0 when there is none.
func epochOf(id string) uint64 {
	id = strings.TrimPrefix(id, bridge.RedeliveredPrefix)
	rest, ok := strings.CutPrefix(id, bridge.EpochPrefix)
	if !ok {
		return 0
	}
	n, _ := strconv.ParseUint(rest[:max(strings.IndexByte(rest, '-'), 0)], 10, 64)
	return n
}

// overlaps walks a group's data messages in stream order, each recorded
// with its holder (the epoch in its MessageId), and returns where a holder
// published after a later one had begun: two holders at once.
func overlaps(msgs []streamMsg, group string) (bad []string, holders []uint64) {
	var top uint64
	for _, m := range msgs {
		if m.Group != group || len(m.DSMs) == 0 {
			continue
		}
		e := epochOf(m.MessageID)
		switch {
		case e == 0:
			bad = append(bad, fmt.Sprintf("stream seq %d: MessageId %q without an epoch", m.Seq, m.MessageID))
		case e < top:
			bad = append(bad, fmt.Sprintf("stream seq %d (%s): holder %d after holder %d began", m.Seq, m.At.Format("15:04:05.000"), e, top))
		case e > top:
			top = e
			holders = append(holders, e)
		}
	}
	return bad, holders
}

// TestScaleOutPausedReplica: of two replicas serving two writer groups
// each, one is frozen (SIGSTOP) for three lease TTLs, its sessions' Publish
// requests outstanding and its sinks with messages in flight; the other
// takes its groups over; then the frozen one is thawed (SIGCONT). Its
// fences passed while it slept, so it publishes nothing of those groups
// when it wakes — not the notifications the server sent meanwhile — before any of its timers has noticed: a consumer
// that records the holder of every message of the stream (the lease epoch
// in its MessageId) sees the holders one after the other, never two at
// once, and no Counter value is lost (what the frozen replica held is
// republished by the next holder).
func TestScaleOutPausedReplica(t *testing.T) {
	const ttl = 3 * time.Second
	nodes := startNATSCluster(t, 1)
	url := nodes[0].URL()
	createDataStream(t, url, 1)
	srv := startCounterSim(t, "", 50*time.Millisecond)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "gateway.yaml")
	const groups = 4
	if err := os.WriteFile(cfgPath, []byte(scaleConfig(t, srv.URL(), url, groups)), 0o600); err != nil {
		t.Fatal(err)
	}
	ids := []string{"gw0", "gw1"}
	gws, logs := startReplicasTTL(t, cfgPath, url, dir, ids, ttl)
	shared := func() map[string]string {
		out := map[string]string{}
		for g, v := range holders(t, url, groups) {
			out[g] = v.Replica
		}
		return out
	}
	// balanced: every group held, two each.
	balanced := func() bool {
		h := shared()
		n := map[string]int{}
		for _, r := range h {
			n[r]++
		}
		return len(h) == groups && n["gw0"] == groups/2 && n["gw1"] == groups/2
	}
	if !testutil.Eventually(60*time.Second, balanced) {
		t.Fatalf("the groups are not shared: %v\n%s", shared(), logs())
	}
	waitStream(t, url, 20*groups, 30*time.Second, logs)
	sr := newStreamReader(t, url)
	victim := shared()["g0"]
	other := "gw0"
	if victim == other {
		other = "gw1"
	}

	var lost []string // the victim's groups
	for g, r := range shared() {
		if r == victim {
			lost = append(lost, g)
		}
	}

	// Freeze the holder of g0 for three TTLs.
	p := gws[victim].cmd.Process
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = p.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw)
	if !testutil.Eventually(3*ttl, func() bool {
		h := shared()
		for _, g := range lost {
			if h[g] != other {
				return false
			}
		}
		return true
	}) {
		thaw()
		t.Fatalf("%v not taken over by %s while %s was frozen: %v\n%s", lost, other, victim, shared(), logs())
	}
	for time.Since(frozen) < 3*ttl {
		pollPause()
	}
	thaw()
	woke := time.Now()
	t.Logf("%s frozen for %v; %v taken over by %s", victim, woke.Sub(frozen).Round(time.Millisecond), lost, other)

	// Both replicas go on; the thawed one serves again in time (balance).
	if !testutil.Eventually(10*ttl, func() bool { return balanced() && time.Since(woke) > 2*ttl }) {
		t.Errorf("not shared again after the thaw: %v", shared())
	}
	for _, id := range ids {
		gws[id].stop(t)
	}
	msgs := sr.read(t)
	plain := make([]sinkMsg, len(msgs))
	for i := range msgs {
		plain[i] = msgs[i].sinkMsg
	}
	for i := range groups {
		g := "g" + strconv.Itoa(i)
		bad, hs := overlaps(msgs, g)
		c := checkCounter(plain, g, 0)
		t.Logf("%s: holders %v; counter %v … %v, %d values, %d duplicates", g, hs, c.min, c.max, c.distinct, c.duplicates)
		if len(bad) > 0 {
			t.Errorf("%s: two holders at once: %v", g, head(bad, 10))
		}
		if v, _ := ownership(msgs, g); len(v) > 0 {
			t.Errorf("%s: sequence runs interleaved: %v", g, head(v, 10))
		}
		if len(c.missing) > 0 {
			t.Errorf("%s: counter values lost: %v", g, head(c.missing, 20))
		}
	}
	for _, g := range lost {
		if _, hs := overlaps(msgs, g); len(hs) < 2 {
			t.Errorf("%s had %d holders, want the takeover to show", g, len(hs))
		}
	}
	if !strings.Contains(gws[victim].stderr.String(), "lease") {
		t.Errorf("the thawed replica logged nothing about its lease")
	}
	if t.Failed() {
		t.Log(logs())
	}
}

// TestScaleOutDuplicateReplicaID: a second gateway process started with
// the replicaId of a running one (the default, the host name, makes that
// easy) finds the first through the lease bucket, refuses to serve and
// exits with the error; the first goes on serving every group, and no
// group is published by both.
func TestScaleOutDuplicateReplicaID(t *testing.T) {
	const ttl = 3 * time.Second
	nodes := startNATSCluster(t, 1)
	url := nodes[0].URL()
	createDataStream(t, url, 1)
	srv := startCounterSim(t, "", 50*time.Millisecond)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(scaleConfig(t, srv.URL(), url, 2)), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(state string) *gatewayChild {
		return startGatewayChild(t, cfgPath,
			"UAGATE_STATE_DIR="+filepath.Join(dir, state),
			"UAGATE_SCALEOUT_ENABLED=true",
			"UAGATE_SCALEOUT_NATS_URL="+url,
			"UAGATE_SCALEOUT_LEASE_TTL="+ttl.String(),
			"UAGATE_SCALEOUT_REPLICA_ID=plant-gw")
	}
	first := start("first")
	if !testutil.Eventually(30*time.Second, func() bool { return len(holders(t, url, 2)) == 2 }) {
		t.Fatalf("the groups are not held: %s", first.stderr.String())
	}
	waitStream(t, url, 20, 30*time.Second, first.stderr.String)
	sr := newStreamReader(t, url)
	second := start("second")
	select {
	case <-second.done:
	case <-time.After(10 * ttl):
		t.Fatalf("the second process with the same replicaId still runs:\n%s\nfirst:\n%s", second.stderr.String(), first.stderr.String())
	}
	if code := second.cmd.ProcessState.ExitCode(); code != 3 || !strings.Contains(second.stderr.String(), "another running replica has this replica id") {
		t.Errorf("the second process exited with %d:\n%s", code, second.stderr.String())
	}
	n := len(sr.read(t))
	if !testutil.Eventually(20*time.Second, func() bool { return len(sr.read(t)) > n+20 }) {
		t.Errorf("the first process stopped publishing:\n%s", first.stderr.String())
	}
	first.stop(t)
	msgs := sr.read(t)
	for _, g := range []string{"g0", "g1"} {
		if bad, hs := overlaps(msgs, g); len(bad) > 0 || len(hs) != 1 {
			t.Errorf("%s: holders %v; %v", g, hs, head(bad, 10))
		}
	}
}
