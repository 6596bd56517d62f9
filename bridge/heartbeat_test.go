package bridge

import (
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// TestWriterGroupHeartbeat: a field that does not change is sent again every
// heartbeat interval with its last value (and its own timestamps); a field
// that changes all the time gets no extra messages, and neither does a field
// without a heartbeat.
func TestWriterGroupHeartbeat(t *testing.T) {
	srv := startSim(t, 50*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	q := newTestQueue(t, "q")
	cfg := config.WriterGroup{
		Name: "hb", PublishingInterval: config.Duration(100 * time.Millisecond), KeyFrameCount: 1000,
		KeepAlive: config.Duration(-1),
		Writers: []config.DataSetWriter{
			{Name: "beat", Fields: []config.Field{{Name: "Double", Node: server.StaticNode(ua.TypeDouble, false), Heartbeat: config.Duration(300 * time.Millisecond)}}},
			{Name: "quiet", Fields: []config.Field{{Name: "Int32", Node: server.StaticNode(ua.TypeInt32, false)}}},
		},
	}
	g := startGroup(t, m, cfg, Options{Queues: []sink.Queue{q}})
	testutil.WaitFor(t, 20*time.Second, "4 heartbeats", func() bool { return g.Stats().Heartbeats >= 4 })
	beats := dataSetMessages(q.all(), "beat")
	if len(beats) < 5 { // the first value, then the heartbeats
		t.Fatalf("%d DataSetMessages of the heartbeat writer, want the first value and at least 4 heartbeats", len(beats))
	}
	first := beats[0]
	for i, d := range beats[1:] {
		if d.Type != jsonenc.DeltaFrame || len(d.Fields) != 1 || d.Fields[0].Name != "Double" {
			t.Fatalf("heartbeat %d: %+v, want a delta frame with the field", i+1, d.DataSetMessage)
		}
		if d.SequenceNumber != beats[i].SequenceNumber+1 {
			t.Fatalf("heartbeat %d: SequenceNumber %d after %d", i+1, d.SequenceNumber, beats[i].SequenceNumber)
		}
		if !d.Fields[0].Value.Value.Equal(&first.Fields[0].Value.Value) {
			t.Fatalf("heartbeat %d carries %v, not the last value %v", i+1, d.Fields[0].Value.Value, first.Fields[0].Value.Value)
		}
	}
	if quiet := dataSetMessages(q.all(), "quiet"); len(quiet) != 1 {
		t.Fatalf("the writer without a heartbeat sent %d DataSetMessages, want its first value only", len(quiet))
	}
}
