package gateway_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/gateway"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/client"
)

// TestWriterGroupsShareSessions: the writer groups of an endpoint are
// subscriptions on one session (endpoints[].sessions, default 1), against
// the embedded simulation server, which counts the sessions it serves. A
// reload that removes and adds groups leaves the session (and the other
// groups' data) alone; sessions: 2 spreads the groups over two; the last
// group to leave a session closes it.
func TestWriterGroupsShareSessions(t *testing.T) {
	conf := func(sessions int, groups ...string) string {
		c := &config.Config{
			Endpoints: []config.Endpoint{{Name: "plc", URL: config.EmbeddedSimURL, Sessions: sessions}},
			Sinks:     embeddedMQTT(),
		}
		for _, g := range groups {
			c.WriterGroups = append(c.WriterGroups, config.WriterGroup{
				Name: g, PublishingInterval: dur(100 * time.Millisecond),
				Nodes:   config.NodeDefaults{SamplingInterval: ptr(dur(10 * time.Millisecond))},
				Writers: []config.DataSetWriter{counterWriter("w")},
			})
		}
		return marshalConfig(t, c)
	}
	g := startGateway(t, "gateway.yaml", conf(1, "g1", "g2", "g3"))
	sub := subscribeMQTT(t, g.gw.Addrs().MQTT, "", "", "", "opcua/json/#")
	for _, n := range []string{"g1", "g2", "g3"} {
		sub.waitCount(t, g, n, "w", 5)
	}
	sim := g.gw.Sim()
	if st := sim.Stats(); st.Sessions != 1 || st.SessionsCreated != 1 || st.Subscriptions != 3 {
		t.Fatalf("three writer groups of one endpoint: %d sessions (%d created), %d subscriptions at the server; want 1 (1), 3",
			st.Sessions, st.SessionsCreated, st.Subscriptions)
	}
	if n := g.sessionRefs(); fmt.Sprint(n) != "[3]" {
		t.Errorf("groups per session: %v, want [3]", n)
	}

	// Remove g2, add g4: g1 and g3 go on, on the same session.
	g.rewrite(conf(1, "g1", "g3", "g4"))
	g.waitLog("configuration change applied")
	sub.waitCount(t, g, "g4", "w", 5)
	for _, n := range []string{"g1", "g3"} {
		sub.waitCount(t, g, n, "w", sub.count(n, "w")+5)
	}
	if st := sim.Stats(); st.Sessions != 1 || st.SessionsCreated != 1 || st.Subscriptions != 3 {
		t.Errorf("after removing one group and adding another: %d sessions (%d created), %d subscriptions; want 1 (1), 3",
			st.Sessions, st.SessionsCreated, st.Subscriptions)
	}
	// Every group's stream is whole across the reload.
	msgs := sub.all(t)
	for _, n := range []string{"g1", "g3", "g4"} {
		checkStream(t, msgs, streamCheck{publisher: "uagate", group: n, writer: "w", field: "Counter"})
	}

	// Two sessions: the endpoint changed, its groups are recreated and
	// spread over both; the old session is closed.
	g.rewrite(conf(2, "g1", "g3", "g4"))
	g.waitLog("configuration change applied")
	waitUntil(t, g, e2eWait, "two sessions at the server", func() bool {
		st := sim.Stats()
		return st.Sessions == 2 && st.SessionsCreated == 3 && st.Subscriptions == 3
	})
	// The server's counts move before the apply has released the old
	// session (waitLog finds the first reload's line again): wait for the
	// gateway's own.
	if !testutil.Eventually(e2eWait, func() bool { return fmt.Sprint(g.sessionRefs()) == "[1 2]" }) {
		t.Errorf("groups per session: %v, want [1 2]", g.sessionRefs())
	}
	for _, n := range []string{"g1", "g3", "g4"} {
		sub.waitCount(t, g, n, "w", sub.count(n, "w")+5)
	}

	// The last group of a session leaves: the session is closed.
	g.rewrite(conf(2, "g1"))
	g.waitLog("configuration change applied")
	waitUntil(t, g, e2eWait, "one session left at the server", func() bool {
		st := sim.Stats()
		return st.Sessions == 1 && st.Subscriptions == 1
	})
	// The server's counts move before the apply has released the old
	// session (waitLog finds the first reload's line again): wait for the
	// gateway's own.
	if !testutil.Eventually(e2eWait, func() bool { return fmt.Sprint(g.sessionRefs()) == "[1]" }) {
		t.Errorf("groups per session: %v, want [1]", g.sessionRefs())
	}
	sub.waitCount(t, g, "g1", "w", sub.count("g1", "w")+5)
}

// sessionRefs is the number of writer groups on each of the runtime's
// sessions, ascending.
func (g *e2eGateway) sessionRefs() []int {
	var n []int
	for _, ss := range g.gw.Sessions() {
		n = append(n, ss.Groups)
	}
	slices.Sort(n)
	return n
}

// TestManyGroupsOnOneSession: 100 writer groups on the endpoint's one
// session all deliver, the session has no fault, and it keeps more Publish
// requests at the server than the client's default of 10
// (MaxPublishRequests): with 10, a session of 100 subscriptions under the
// load of their setup has responses ready for more subscriptions than it has
// requests, some go past their keep-alive window and the client recovers the
// session over and over. At this test's size 10 requests still keep up, so
// the test checks the number itself. The rate (100 groups every 100 ms) is
// one a loaded CI machine and the test's MQTT subscriber carry.
func TestManyGroupsOnOneSession(t *testing.T) {
	const groups = 100
	sampling := dur(20 * time.Millisecond)
	c := &config.Config{
		Endpoints: []config.Endpoint{{Name: "plc", URL: config.EmbeddedSimURL}},
		Sinks:     embeddedMQTT(),
	}
	for i := range groups {
		c.WriterGroups = append(c.WriterGroups, config.WriterGroup{
			Name: fmt.Sprintf("g%03d", i), Endpoint: "plc", PublishingInterval: dur(100 * time.Millisecond),
			KeepAlive: dur(500 * time.Millisecond), Nodes: config.NodeDefaults{SamplingInterval: &sampling},
			Writers: []config.DataSetWriter{counterWriter("w", "Sine")},
		})
	}
	g := startGateway(t, "gateway.yaml", marshalConfig(t, c))
	sub := subscribeMQTT(t, g.gw.Addrs().MQTT, "", "", "", "opcua/json/data/#")
	for i := range groups {
		sub.waitCount(t, g, fmt.Sprintf("g%03d", i), "w", 10)
	}
	// Two more seconds of all of them at once.
	before := make([]int, groups)
	for i := range groups {
		before[i] = sub.count(fmt.Sprintf("g%03d", i), "w")
	}
	for i := range groups {
		sub.waitCount(t, g, fmt.Sprintf("g%03d", i), "w", before[i]+20)
	}
	if st := g.gw.Sim().Stats(); st.Sessions != 1 || st.SessionsCreated != 1 || st.Subscriptions != groups {
		t.Errorf("%d sessions (%d created), %d subscriptions at the server; want 1 (1), %d", st.Sessions, st.SessionsCreated, st.Subscriptions, groups)
	}
	var ms client.ManagedStats
	for _, ss := range g.gw.Sessions() {
		ms = ss.Session.Stats()
	}
	if ms.Faults != 0 || ms.Reactivations != 0 || ms.Connects != 1 {
		t.Errorf("session: %d faults, %d reactivations, %d connects; want 0, 0, 1 (log: %q)", ms.Faults, ms.Reactivations, ms.Connects,
			logLine(g.log.String(), "session fault"))
	}
	if ms.PublishLimit != gateway.MaxPublishRequests {
		t.Errorf("the session's Publish request limit is %d, want %d", ms.PublishLimit, gateway.MaxPublishRequests)
	}
	most := 0
	waitUntil(t, g, e2eWait, fmt.Sprintf("more than %d Publish requests outstanding for %d groups", client.DefaultMaxPublishRequests, groups), func() bool {
		for _, ss := range g.gw.Sessions() {
			most = max(most, ss.Session.Stats().PublishRequests)
		}
		return most > client.DefaultMaxPublishRequests
	})
	t.Logf("session: up to %d Publish requests outstanding (limit %d)", most, ms.PublishLimit)
}
