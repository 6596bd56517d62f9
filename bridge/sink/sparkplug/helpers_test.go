package sparkplug

import (
	"fmt"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/uastack/ua"
)

// discardQueue takes every message and settles it at once, keeping the
// last payload.
type discardQueue struct {
	messages, bytes int
	last            []byte
	keep            bool
}

func (q *discardQueue) Name() string                { return "discard" }
func (q *discardQueue) Guarantee() config.Guarantee { return config.AtMostOnce }
func (q *discardQueue) Enqueue(m *sink.Message) {
	q.messages++
	q.bytes += m.Len()
	if q.keep {
		q.last = append(q.last[:0], m.Payload()...)
	}
	m.Done(true)
}

// feedFixture is a node whose one device is writer "w" of a writer group
// (without a session) of n Double fields, the feed of that group, and a
// batch of every field's value.
func feedFixture(tb testing.TB, n int) (*Node, *feed, *bridge.ValueBatch, *discardQueue) {
	tb.Helper()
	fields := make([]config.Field, n)
	for i := range fields {
		fields[i] = config.Field{Name: fmt.Sprintf("Field%05d", i), Node: fmt.Sprintf("ns=1;s=V%05d", i)}
	}
	wg := config.WriterGroup{Name: "g", Endpoint: "sim", PublishingInterval: config.Duration(time.Second),
		Writers: []config.DataSetWriter{{Name: "w", Fields: fields}}}
	wg.ApplyDefaults()
	g, err := bridge.NewWriterGroup(wg, bridge.Options{PublisherID: "p", Logger: testutil.Logger(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	node, err := New(Config{URL: "tcp://127.0.0.1:1", GroupID: "G", EdgeNodeID: "E", Logger: testutil.Logger(tb),
		Source: func() []*bridge.WriterGroup { return []*bridge.WriterGroup{g} }})
	if err != nil {
		tb.Fatal(err)
	}
	node.pubMu.Lock()
	node.refreshLocked()
	// The group has no session, so no DataType was read: declare Doubles.
	d := node.devs[0]
	dm := *d.metrics.Load()
	dm.defs = append([]metricDef(nil), dm.defs...)
	for i := range dm.defs {
		dm.defs[i].dtype, dm.defs[i].uaType = Double, ua.TypeDouble
	}
	d.metrics.Store(&dm)
	node.pubMu.Unlock()
	q := &discardQueue{}
	f := node.Feed(q).(*feed)
	b := &bridge.ValueBatch{Group: g, Writer: "w", WriterIndex: 0, Created: time.Now().UnixNano()}
	_, dvs := benchValues(n)
	for i := range dvs {
		b.Fields = append(b.Fields, int32(i))
		b.Values = append(b.Values, &dvs[i])
	}
	return node, f, b, q
}
