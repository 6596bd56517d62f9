package bridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
)

// checkWriterStream checks the DataSetMessages of one writer: sequence
// numbers from 1 without gaps (keep-alives carry the next one), a key frame
// every keyFrames data messages with every field, MetaDataVersion as
// announced. It returns the data messages.
func checkWriterStream(t *testing.T, ms []dsm, keyFrames int, fields []string, version jsonenc.ConfigurationVersion) []dsm {
	t.Helper()
	var data []dsm
	next := uint32(1)
	for i, m := range ms {
		if m.MetaDataVersion != version {
			t.Fatalf("DataSetMessage %d: MetaDataVersion %+v, want %+v", i, m.MetaDataVersion, version)
		}
		if m.Type == jsonenc.KeepAlive {
			if m.SequenceNumber != next {
				t.Fatalf("keep-alive %d: SequenceNumber %d, want the next expected %d", i, m.SequenceNumber, next)
			}
			if len(m.Fields) != 0 {
				t.Fatalf("keep-alive with fields: %+v", m.Fields)
			}
			continue
		}
		if m.SequenceNumber != next {
			t.Fatalf("DataSetMessage %d: SequenceNumber %d, want %d (no gaps)", i, m.SequenceNumber, next)
		}
		next++
		wantType := jsonenc.DeltaFrame
		if len(data)%keyFrames == 0 {
			wantType = jsonenc.KeyFrame
		}
		if m.Type != wantType {
			t.Fatalf("data DataSetMessage %d (seq %d): %v, want %v", len(data), m.SequenceNumber, m.Type, wantType)
		}
		if m.Type == jsonenc.KeyFrame {
			var names []string
			for _, f := range m.Fields {
				names = append(names, f.Name)
			}
			if !slices.Equal(names, fields) {
				t.Fatalf("key frame seq %d has fields %v, want %v", m.SequenceNumber, names, fields)
			}
		}
		data = append(data, m)
	}
	return data
}

// metaDataOf returns the metadata messages of writer in arrival order, and
// the index of the first.
func metaDataOf(msgs []received, writer string) (mds []*jsonenc.MetaDataMessage, first int) {
	first = -1
	for i, r := range msgs {
		if r.kind == sink.KindMetaData && r.addr.Writer == writer {
			if first < 0 {
				first = i
			}
			if !r.retained {
				panic("metadata not retained")
			}
			mds = append(mds, r.md)
		}
	}
	return mds, first
}

func TestWriterGroupSingle(t *testing.T) {
	srv := startSim(t, 50*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	q := newTestQueue(t, "q")
	cfg := config.WriterGroup{
		Name:               "wg1",
		PublishingInterval: config.Duration(200 * time.Millisecond),
		KeyFrameCount:      3,
		KeepAlive:          config.Duration(400 * time.Millisecond),
		// Sampling ten times faster than the Counter moves: every value is
		// seen; the computed queue size (200/5 = 40) keeps all of them.
		Nodes: config.NodeDefaults{SamplingInterval: dur(5 * time.Millisecond)},
		Writers: []config.DataSetWriter{
			{ID: 7, Name: "demo", Fields: []config.Field{{Name: "Counter", Node: server.NodeCounter}, {Name: "Step", Node: server.NodeStep}}},
			{ID: 8, Name: "static", Fields: []config.Field{{Name: "Double", Node: server.StaticNode(ua.TypeDouble, false)}}},
		},
	}
	// What the client delivered for the Counter (handle 1: the first field
	// created), to compare with what was published.
	var inMu sync.Mutex
	var in []float64
	g := startGroupWith(t, m, cfg, Options{Queues: []sink.Queue{q}}, func(g *WriterGroup) {
		g.testTap = func(_ uint32, items []ua.MonitoredItemNotification) {
			inMu.Lock()
			defer inMu.Unlock()
			for i := range items {
				if items[i].ClientHandle == g.base {
					in = append(in, items[i].Value.Value.Double())
				}
			}
		}
	})

	testutil.WaitFor(t, 20*time.Second, "30 demo data messages and 2 keep-alives of static", func() bool {
		st := g.Stats()
		var demo, static WriterStats
		for _, w := range st.Writers {
			switch w.Name {
			case "demo":
				demo = w
			case "static":
				static = w
			}
		}
		return demo.DataSetMessages >= 30 && static.KeepAlives >= 2
	})
	inMu.Lock()
	msgs := q.all()
	delivered := slices.Clone(in)
	inMu.Unlock()

	// Every data message: a ua-data NetworkMessage of one DataSetMessage, of
	// the writer its address names.
	for i, r := range msgs {
		if r.kind != sink.KindData {
			continue
		}
		nm := r.nm
		if nm.MessageType != "ua-data" || nm.PublisherID != "test-pub" || nm.WriterGroupName != "wg1" || nm.MessageID == "" {
			t.Fatalf("message %d header: %+v", i, nm)
		}
		if len(nm.Messages) != 1 {
			t.Fatalf("message %d: %d DataSetMessages, want 1 (single shape)", i, len(nm.Messages))
		}
		d := nm.Messages[0]
		if r.addr != (sink.Addr{Publisher: "test-pub", Group: "wg1", Writer: d.DataSetWriterName}) || r.retained {
			t.Fatalf("message %d: addr %+v retained %v for writer %q", i, r.addr, r.retained, d.DataSetWriterName)
		}
		if (d.DataSetWriterName == "demo") != (d.DataSetWriterID == 7) {
			t.Fatalf("message %d: writer %q has id %d", i, d.DataSetWriterName, d.DataSetWriterID)
		}
		if d.Type != jsonenc.KeepAlive && r.token == 0 {
			t.Fatalf("message %d: data without its sequence number as token", i)
		}
	}

	for _, w := range []struct {
		name   string
		fields []string
	}{{"demo", []string{"Counter", "Step"}}, {"static", []string{"Double"}}} {
		mds, first := metaDataOf(msgs, w.name)
		if len(mds) != 1 {
			t.Fatalf("%s: %d metadata messages, want 1", w.name, len(mds))
		}
		md := mds[0]
		ms := dataSetMessages(msgs, w.name)
		if len(ms) == 0 || ms[0].msg < first {
			t.Fatalf("%s: data before its metadata", w.name)
		}
		var names []string
		for _, f := range md.MetaData.Fields {
			names = append(names, f.Name)
		}
		if !slices.Equal(names, w.fields) || md.PublisherID != "test-pub" || md.DataSetWriterName != w.name {
			t.Fatalf("%s: metadata %+v fields %v", w.name, md, names)
		}
		if w.name == "demo" {
			if bt := md.MetaData.Fields[0].BuiltInType; bt != byte(ua.TypeDouble) {
				t.Fatalf("Counter BuiltInType %d, want Double", bt)
			}
			if bt := md.MetaData.Fields[1].BuiltInType; bt != byte(ua.TypeInt32) {
				t.Fatalf("Step BuiltInType %d, want Int32", bt)
			}
		}
		cv := md.MetaData.ConfigurationVersion
		data := checkWriterStream(t, ms, 3, w.fields, jsonenc.ConfigurationVersion{MajorVersion: cv.MajorVersion, MinorVersion: cv.MinorVersion})
		if w.name != "demo" {
			continue
		}
		// The Counter is published in order, without loss or duplication:
		// exactly the values the client delivered (a key frame repeats the
		// cached value of a field that did not change: not a new value).
		var out []float64
		perToken := map[uint64]int{}
		for _, d := range data {
			perToken[d.token]++
			v, ok := fieldValue(&d.DataSetMessage, "Counter")
			if !ok {
				continue
			}
			c := v.Value.Double()
			if d.Type == jsonenc.KeyFrame && len(out) > 0 && out[len(out)-1] == c {
				continue
			}
			out = append(out, c)
		}
		if len(out) < 20 || len(out) > len(delivered) || !slices.Equal(out, delivered[:len(out)]) || len(delivered)-len(out) > 50 {
			t.Fatalf("published Counter values %v\nclient delivered %v", out, delivered)
		}
		// Several values of the Counter per publishing interval became
		// consecutive DataSetMessages of one notification message.
		most := 0
		for _, n := range perToken {
			most = max(most, n)
		}
		if most < 2 {
			t.Fatalf("no notification message gave more than one DataSetMessage (queue size > 1): %v", perToken)
		}
	}
	st := g.Stats()
	if st.EncodeErrors != 0 || st.UnknownHandles != 0 || st.Gaps != 0 || st.MetaData != 2 {
		t.Fatalf("stats %+v", st)
	}
	// The last-value cache.
	fv, ok := g.LastValue("demo", "Counter")
	if !ok || !fv.HasValue || fv.Value.Value.Type() != ua.TypeDouble || fv.Status != ua.StatusGood || fv.Node != server.NodeCounter {
		t.Fatalf("LastValue(demo, Counter) = %+v, %v", fv, ok)
	}
	if _, ok := g.LastValue("demo", "Nope"); ok {
		t.Fatal("LastValue of an unknown field")
	}
	if all := allValues(g, ""); len(all) != 3 || all[2].Field != "Double" || !all[2].HasValue {
		t.Fatalf("LastValues = %+v", all)
	}
}

func TestWriterGroupBatched(t *testing.T) {
	srv := startSim(t, 50*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	q := newTestQueue(t, "q")
	cfg := config.WriterGroup{
		Name:               "wg2",
		PublishingInterval: config.Duration(100 * time.Millisecond),
		KeyFrameCount:      4,
		MessageShape:       config.ShapeBatched,
		Encoding:           "verbose",
		FieldEncoding:      config.FieldDataValue,
		Writers: []config.DataSetWriter{
			{Name: "a", Fields: []config.Field{{Name: "Counter", Node: server.NodeCounter}}},
			{Name: "b", Fields: []config.Field{{Name: "Step", Node: server.NodeStep}, {Name: "Sine", Node: server.NodeSine}}},
		},
	}
	q.types = jsonenc.FieldTypes{"Counter": ua.TypeDouble, "Step": ua.TypeInt32, "Sine": ua.TypeDouble}
	g := startGroup(t, m, cfg, Options{Queues: []sink.Queue{q}})
	testutil.WaitFor(t, 20*time.Second, "12 DataSetMessages of each writer", func() bool {
		st := g.Stats()
		return len(st.Writers) == 2 && st.Writers[0].DataSetMessages >= 12 && st.Writers[1].DataSetMessages >= 12
	})
	msgs := q.all()
	both := 0
	for i, r := range msgs {
		if r.kind != sink.KindData {
			continue
		}
		if r.addr.Writer != "" {
			t.Fatalf("message %d: batched message addressed to writer %q", i, r.addr.Writer)
		}
		writers := map[string]bool{}
		for _, d := range r.nm.Messages {
			writers[d.DataSetWriterName] = true
			for _, f := range d.Fields {
				// dataValue fields carry their timestamps.
				if f.Value.SourceTimestamp == 0 || f.Value.ServerTimestamp == 0 {
					t.Fatalf("message %d: field %s without timestamps: %+v", i, f.Name, f.Value)
				}
			}
		}
		if len(writers) == 2 {
			both++
		}
	}
	if both == 0 {
		t.Fatal("no NetworkMessage carried the DataSetMessages of both writers")
	}
	for _, w := range []struct {
		name   string
		fields []string
	}{{"a", []string{"Counter"}}, {"b", []string{"Step", "Sine"}}} {
		mds, _ := metaDataOf(msgs, w.name)
		if len(mds) != 1 {
			t.Fatalf("%s: %d metadata messages", w.name, len(mds))
		}
		cv := mds[0].MetaData.ConfigurationVersion
		checkWriterStream(t, dataSetMessages(msgs, w.name), 4, w.fields, jsonenc.ConfigurationVersion{MajorVersion: cv.MajorVersion, MinorVersion: cv.MinorVersion})
	}
	// Verbose: the DataSetMessage header fields are all written.
	var raw map[string]any
	for _, r := range msgs {
		if r.kind == sink.KindData {
			if err := json.Unmarshal(r.payload, &raw); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if _, ok := raw["Messages"].([]any); !ok {
		t.Fatalf("batched Messages is not an array: %v", raw)
	}
}

// TestWriterGroupFieldContent: fieldContent picks the members of dataValue
// fields: with sourceTimestamp alone the fields carry their Value and
// SourceTimestamp, and no ServerTimestamp.
func TestWriterGroupFieldContent(t *testing.T) {
	srv := startSim(t, 50*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	q := newTestQueue(t, "q")
	cfg := config.WriterGroup{
		Name:               "wgc",
		PublishingInterval: config.Duration(100 * time.Millisecond),
		FieldEncoding:      config.FieldDataValue,
		FieldContent:       []string{config.ContentSourceTimestamp},
		Writers: []config.DataSetWriter{
			{Name: "a", Fields: []config.Field{{Name: "Counter", Node: server.NodeCounter}, {Name: "Step", Node: server.NodeStep}}},
		},
	}
	q.types = jsonenc.FieldTypes{"Counter": ua.TypeDouble, "Step": ua.TypeInt32}
	g := startGroup(t, m, cfg, Options{Queues: []sink.Queue{q}})
	testutil.WaitFor(t, 20*time.Second, "5 DataSetMessages", func() bool {
		st := g.Stats()
		return len(st.Writers) == 1 && st.Writers[0].DataSetMessages >= 5
	})
	fields := 0
	for i, r := range q.all() {
		if r.kind != sink.KindData {
			continue
		}
		if bytes.Contains(r.payload, []byte("ServerTimestamp")) {
			t.Fatalf("message %d carries a ServerTimestamp: %s", i, r.payload)
		}
		for _, d := range r.nm.Messages {
			for _, f := range d.Fields {
				if f.Value.SourceTimestamp == 0 || f.Value.ServerTimestamp != 0 {
					t.Fatalf("message %d: field %s: %+v, want a SourceTimestamp and no ServerTimestamp", i, f.Name, f.Value)
				}
				fields++
			}
		}
	}
	if fields == 0 {
		t.Fatal("no field written")
	}
}

// TestWriterGroupSplit: a key frame larger than MaxMessageSize is split into
// several messages, each within the limit, that together hold every field.
func TestWriterGroupSplit(t *testing.T) {
	const n, limit = 300, 4000
	srv := startSim(t, 50*time.Millisecond, n)
	m := startSession(t, srv.URL())
	for _, shape := range []string{config.ShapeBatched, config.ShapeSingle} {
		t.Run(shape, func(t *testing.T) {
			q := newTestQueue(t, "q")
			var fields []config.Field
			var names []string
			for v := range n {
				name := strings.TrimPrefix(server.LoadNode(0, v), "ns=1;s=Load.")
				fields = append(fields, config.Field{Name: name, Node: server.LoadNode(0, v)})
				names = append(names, name)
			}
			cfg := config.WriterGroup{
				Name: "split", PublishingInterval: config.Duration(100 * time.Millisecond),
				MaxMessageSize: limit, MessageShape: shape,
				Writers: []config.DataSetWriter{{Name: "load", Fields: fields}},
			}
			g := startGroup(t, m, cfg, Options{Queues: []sink.Queue{q}})
			testutil.WaitFor(t, 20*time.Second, "every field's first value", func() bool {
				seen := map[string]bool{}
				for _, d := range dataSetMessages(q.all(), "load") {
					for _, f := range d.Fields {
						seen[f.Name] = true
					}
				}
				return len(seen) == n
			})
			msgs := q.all()
			data := 0
			for i, r := range msgs {
				if r.kind != sink.KindData {
					continue
				}
				data++
				if len(r.payload) > limit {
					t.Fatalf("message %d has %d bytes, above MaxMessageSize %d", i, len(r.payload), limit)
				}
			}
			// The first key frame, split: parts with consecutive sequence
			// numbers from 1, every one a ua-deltaframe (ua-keyframe always
			// means a complete one); together all fields, each once, in
			// order.
			var got []string
			next := uint32(1)
			for _, d := range dataSetMessages(msgs, "load") {
				// A keep-alive (a busy machine's first values late) carries the
				// next number without taking it.
				if d.SequenceNumber != next || len(got) == n || d.Type == jsonenc.KeepAlive {
					continue
				}
				if d.Type != jsonenc.DeltaFrame {
					t.Fatalf("part %d of the split key frame is %q, want ua-deltaframe", next, d.Type)
				}
				next++
				for _, f := range d.Fields {
					got = append(got, f.Name)
				}
			}
			if data < 2 || next < 3 {
				t.Fatalf("%d data messages, key frame in %d parts: want it split", data, next-1)
			}
			if !slices.Equal(got, names) {
				t.Fatalf("key frame pieces hold %d fields, want all %d in order", len(got), n)
			}
			if st := g.Stats(); st.EncodeErrors != 0 {
				t.Fatalf("encode errors: %d", st.EncodeErrors)
			}
		})
	}
}

// TestWriterGroupUnknownNode: a field whose node does not exist is reported
// with its status while the others flow.
func TestWriterGroupUnknownNode(t *testing.T) {
	srv := startSim(t, 50*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	q := newTestQueue(t, "q")
	cfg := config.WriterGroup{
		Name: "wg", PublishingInterval: config.Duration(100 * time.Millisecond), KeyFrameCount: 5,
		Writers: []config.DataSetWriter{{Name: "w", Fields: []config.Field{
			{Name: "Counter", Node: server.NodeCounter},
			{Name: "Missing", Node: "ns=1;s=Does.Not.Exist"},
			{Name: "NoNamespace", Node: "nsu=urn:nobody;s=X"},
		}}},
	}
	g := startGroup(t, m, cfg, Options{Queues: []sink.Queue{q}})
	testutil.WaitFor(t, 20*time.Second, "10 data messages", func() bool { return len(dataSetMessages(q.all(), "w")) >= 10 })
	for _, name := range []string{"Missing", "NoNamespace"} {
		testutil.WaitFor(t, 10*time.Second, name+" reported", func() bool {
			fv, ok := g.LastValue("w", name)
			return ok && fv.Status.IsBad() && !fv.HasValue
		})
	}
	fv, _ := g.LastValue("w", "Missing")
	if fv.Status != ua.StatusBadNodeIdUnknown {
		t.Fatalf("Missing: status %v, want BadNodeIdUnknown", fv.Status)
	}
	ms := dataSetMessages(q.all(), "w")
	counters := 0
	for _, d := range ms {
		if _, ok := fieldValue(&d.DataSetMessage, "Counter"); ok {
			counters++
		}
		if d.Type == jsonenc.KeyFrame {
			// Fields without a value are in the key frame with the status
			// that says why: the server's refusal (in the Variant encoding
			// a Bad status is the field's value).
			v, ok := fieldValue(&d.DataSetMessage, "Missing")
			if !ok || v.Value.Type() != ua.TypeStatusCode || v.Value.StatusCode() != ua.StatusBadNodeIdUnknown {
				t.Fatalf("key frame field Missing = %+v, %v", v, ok)
			}
		} else if _, ok := fieldValue(&d.DataSetMessage, "Missing"); ok {
			t.Fatal("delta frame carries the missing field")
		}
	}
	if counters < 10 {
		t.Fatalf("Counter in %d of %d DataSetMessages", counters, len(ms))
	}
	if st := g.Stats(); st.RefusedItems == 0 {
		t.Fatalf("refused items not counted: %+v", st)
	}
}

// TestWriterGroupPerField: field queues get one retained message per value,
// addressed by field.
func TestWriterGroupPerField(t *testing.T) {
	srv := startSim(t, 50*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	for _, payload := range []string{config.PayloadValue, config.PayloadDataValue} {
		t.Run(payload, func(t *testing.T) {
			q, fq := newTestQueue(t, "data"), newTestQueue(t, "fields")
			cfg := config.WriterGroup{
				Name: "uns", PublishingInterval: config.Duration(100 * time.Millisecond),
				Nodes: config.NodeDefaults{SamplingInterval: dur(10 * time.Millisecond)},
				Writers: []config.DataSetWriter{{Name: "demo", Fields: []config.Field{
					{Name: "Counter", Node: server.NodeCounter}, {Name: "Step", Node: server.NodeStep}}}},
			}
			g := startGroup(t, m, cfg, Options{Queues: []sink.Queue{q}, FieldQueues: []sink.Queue{fq}, FieldPayload: payload})
			testutil.WaitFor(t, 20*time.Second, "20 Counter values", func() bool {
				n := 0
				for _, r := range fq.all() {
					if r.addr.Field == "Counter" {
						n++
					}
				}
				return n >= 20
			})
			prev := -1.0
			d := jsonenc.NewDecoder(jsonenc.DecoderOptions{})
			for _, r := range fq.all() {
				if r.kind != sink.KindField || !r.retained || r.addr.Writer != "demo" || r.addr.Group != "uns" || r.token == 0 {
					t.Fatalf("field message %+v", r)
				}
				if r.addr.Field != "Counter" {
					continue
				}
				var c float64
				if payload == config.PayloadValue {
					if err := json.Unmarshal(r.payload, &c); err != nil {
						t.Fatalf("value payload %s: %v", r.payload, err)
					}
				} else {
					dv, err := d.DecodeDataValue(r.payload)
					if err != nil || dv.SourceTimestamp == 0 {
						t.Fatalf("dataValue payload %s: %v", r.payload, err)
					}
					c = dv.Value.Double()
				}
				// In order, each value once (the server may skip a tick
				// under load; the bridge must not reorder or repeat).
				if prev >= 0 && c <= prev {
					t.Fatalf("Counter %v after %v", c, prev)
				}
				prev = c
			}
			for _, r := range q.all() {
				if r.kind == sink.KindField {
					t.Fatal("a per-field message reached a data queue")
				}
			}
			if st := g.Stats(); st.FieldMessages == 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestWriterGroupReload: writers added, replaced and removed while the group
// runs; the replaced writer's metadata gets a newer version.
func TestWriterGroupReload(t *testing.T) {
	srv := startSim(t, 50*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	q := newTestQueue(t, "q")
	cfg := config.WriterGroup{
		Name: "wg", PublishingInterval: config.Duration(100 * time.Millisecond),
		Writers: []config.DataSetWriter{{Name: "a", Fields: []config.Field{{Name: "Counter", Node: server.NodeCounter}}}},
	}
	g := startGroup(t, m, cfg, Options{Queues: []sink.Queue{q}})
	ctx := ctxT(t)
	if err := g.AddWriter(ctx, writerFor(cfg, config.DataSetWriter{Name: "b", Fields: []config.Field{{Name: "Step", Node: server.NodeStep}}})); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "data of b", func() bool { return len(dataSetMessages(q.all(), "b")) >= 3 })
	if err := g.ReplaceWriter(ctx, writerFor(cfg, config.DataSetWriter{Name: "b", Fields: []config.Field{
		{Name: "Step", Node: server.NodeStep}, {Name: "Sine", Node: server.NodeSine}}})); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "Sine in b", func() bool {
		for _, d := range dataSetMessages(q.all(), "b") {
			if _, ok := fieldValue(&d.DataSetMessage, "Sine"); ok {
				return true
			}
		}
		return false
	})
	mds, _ := metaDataOf(q.all(), "b")
	if len(mds) != 2 || len(mds[1].MetaData.Fields) != 2 {
		t.Fatalf("b: %d metadata messages", len(mds))
	}
	if v0, v1 := mds[0].MetaData.ConfigurationVersion, mds[1].MetaData.ConfigurationVersion; v1.MajorVersion <= v0.MajorVersion {
		t.Fatalf("replaced writer's version %+v not newer than %+v", v1, v0)
	}
	if err := g.RemoveWriter(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	before := len(dataSetMessages(q.all(), "a"))
	testutil.WaitFor(t, 20*time.Second, "more data of b", func() bool { return len(dataSetMessages(q.all(), "b")) >= 20 })
	// A notification in flight when "a" was removed may still have been
	// written; nothing after that.
	if after := len(dataSetMessages(q.all(), "a")); after > before+1 {
		t.Fatalf("removed writer a still publishes: %d → %d", before, after)
	}
	if _, ok := g.LastValue("a", "Counter"); ok {
		t.Fatal("LastValue of a removed writer")
	}
	if err := g.RemoveWriter(ctx, "a"); err == nil {
		t.Fatal("removing a twice succeeded")
	}
	if st := g.Stats(); len(st.Writers) != 1 || st.Writers[0].Name != "b" {
		t.Fatalf("writers %+v", st.Writers)
	}
}

// TestWriterGroupEvents: an event field becomes ua-event DataSetMessages
// with the selected fields.
func TestWriterGroupEvents(t *testing.T) {
	srv := startSim(t, 50*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	q := newTestQueue(t, "q")
	cfg := config.WriterGroup{
		Name: "ev", PublishingInterval: config.Duration(100 * time.Millisecond),
		Writers: []config.DataSetWriter{{Name: "alarms", Fields: []config.Field{
			{Name: "Alarms", Node: server.NodeAlarms, Events: &config.EventSelect{Select: []string{"Severity", "Message", "SourceName"}}}}}},
	}
	startGroup(t, m, cfg, Options{Queues: []sink.Queue{q}})
	testutil.WaitFor(t, 20*time.Second, "3 events", func() bool {
		n := 0
		for _, d := range dataSetMessages(q.all(), "alarms") {
			if d.Type == jsonenc.Event {
				n++
			}
		}
		return n >= 3
	})
	next := uint32(1)
	for _, d := range dataSetMessages(q.all(), "alarms") {
		if d.Type == jsonenc.KeepAlive {
			continue
		}
		if d.Type != jsonenc.Event || d.SequenceNumber != next {
			t.Fatalf("DataSetMessage %v seq %d, want ua-event seq %d", d.Type, d.SequenceNumber, next)
		}
		next++
		var names []string
		for _, f := range d.Fields {
			names = append(names, f.Name)
		}
		if !slices.Equal(names, []string{"Severity", "Message", "SourceName"}) {
			t.Fatalf("event fields %v", names)
		}
		if sev, _ := fieldValue(&d.DataSetMessage, "Severity"); sev.Value.Type() != ua.TypeUInt16 {
			t.Fatalf("Severity %v", sev.Value)
		}
	}
}

// TestWriterGroupAckTracking: with an at-least-once queue the subscription
// acknowledges manually: a sequence number once all its messages were
// delivered, never one with a message settled undelivered.
func TestWriterGroupAckTracking(t *testing.T) {
	srv := startSim(t, 50*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	alo, amo := newTestQueue(t, "alo"), newTestQueue(t, "amo")
	alo.guarantee = config.AtLeastOnce
	alo.undeliver = func(m *sink.Message) bool { return m.Kind == sink.KindData && m.Token%5 == 0 }
	cfg := config.WriterGroup{
		Name: "ack", PublishingInterval: config.Duration(100 * time.Millisecond), MaxUnacked: 1000,
		Writers: []config.DataSetWriter{{Name: "w", Fields: []config.Field{{Name: "Counter", Node: server.NodeCounter}}}},
	}
	g := startGroup(t, m, cfg, Options{Queues: []sink.Queue{alo, amo}})
	if g.tr == nil {
		t.Fatal("no tracker with an at-least-once queue")
	}
	testutil.WaitFor(t, 20*time.Second, "20 data messages and some undelivered", func() bool {
		return len(dataSetMessages(alo.all(), "w")) >= 20 && g.Stats().Undelivered >= 2
	})
	// Both queues got the same messages.
	if a, b := len(alo.all()), len(amo.all()); a == 0 || a > b+1 || b > a+1 {
		t.Fatalf("queues got %d and %d messages", a, b)
	}
	st := g.Stats()
	sub := g.Subscription()
	// What the client still waits for is what was not delivered (plus what
	// is in flight right now).
	if u := sub.Unacked(); u < int(st.Undelivered) || u > int(st.Undelivered)+st.Unacked+3 {
		t.Fatalf("client has %d unacknowledged, tracker: %d undelivered, %d pending", u, st.Undelivered, st.Unacked)
	}
	if st.Acked == 0 || st.AckErrors != 0 {
		t.Fatalf("stats %+v", st)
	}
	if bad := sub.Stats().BadAcks; bad != 0 {
		t.Fatalf("client saw %d bad acknowledgements", bad)
	}
}

// TestWriterGroupBackpressure: an at-least-once queue that holds its
// messages stops the subscription at MaxUnacked; once it confirms them the
// data resumes, and nothing was lost meanwhile (the server kept it).
func TestWriterGroupBackpressure(t *testing.T) {
	srv := startSim(t, 50*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	q := newTestQueue(t, "alo")
	q.guarantee = config.AtLeastOnce
	q.hold = true
	const maxUnacked = 3
	cfg := config.WriterGroup{
		Name: "bp", PublishingInterval: config.Duration(50 * time.Millisecond), MaxUnacked: maxUnacked,
		KeyFrameCount: 1000,
		Nodes:         config.NodeDefaults{SamplingInterval: dur(10 * time.Millisecond), QueueSize: 200},
		Writers:       []config.DataSetWriter{{Name: "w", Fields: []config.Field{{Name: "Counter", Node: server.NodeCounter}}}},
	}
	var inMu sync.Mutex
	var in []float64
	g := startGroupWith(t, m, cfg, Options{Queues: []sink.Queue{q}}, func(g *WriterGroup) {
		g.testTap = func(seq uint32, items []ua.MonitoredItemNotification) {
			inMu.Lock()
			defer inMu.Unlock()
			for i := range items {
				in = append(in, items[i].Value.Value.Double())
			}
		}
	})
	tokens := func() int {
		seen := map[uint64]bool{}
		for _, r := range q.all() {
			if r.kind == sink.KindData && r.token != 0 {
				seen[r.token] = true
			}
		}
		return len(seen)
	}
	testutil.WaitFor(t, 20*time.Second, "MaxUnacked notification messages", func() bool { return tokens() >= maxUnacked })
	// Held: for half a second (ten publishing intervals) nothing more.
	if !testutil.Consistently(500*time.Millisecond, func() bool { return tokens() <= maxUnacked }) {
		t.Fatalf("%d notification messages delivered with %d unacknowledged allowed", tokens(), maxUnacked)
	}
	if u := g.Stats().Unacked; u != maxUnacked {
		t.Fatalf("tracker has %d pending, want %d", u, maxUnacked)
	}
	q.mu.Lock()
	q.hold = false
	q.mu.Unlock()
	q.release()
	testutil.WaitFor(t, 20*time.Second, "data after the release", func() bool { return tokens() >= maxUnacked+5 })
	// Nothing lost across the hold: the values the client delivered once the
	// hold ended (the server kept them) continue the Counter, and the
	// group published exactly what it was given, in order.
	inMu.Lock()
	delivered := slices.Clone(in)
	msgs := q.all()
	inMu.Unlock()
	var out []float64
	for _, d := range dataSetMessages(msgs, "w") {
		if v, ok := fieldValue(&d.DataSetMessage, "Counter"); ok {
			out = append(out, v.Value.Double())
		}
	}
	// (A message being written right now may be delivered, not yet
	// published.)
	if len(out) > len(delivered) || !slices.Equal(out, delivered[:len(out)]) || len(delivered)-len(out) > 20 {
		t.Fatalf("published %v\nclient delivered %v", out, delivered)
	}
	// The messages held at the server came in one burst of consecutive
	// values: the first message after the release spans the hold.
	if len(out) <= maxUnacked+5 || out[len(out)-1]-out[0] < 10 {
		t.Fatalf("Counter values %v do not span the hold", out)
	}
	if st := g.Stats(); st.Acked < maxUnacked {
		t.Fatalf("stats %+v", st)
	}
}

// TestWriterGroupSamples: the legacy OPC Publisher samples format, one
// sample per value, with node id and display name.
func TestWriterGroupSamples(t *testing.T) {
	srv := startSim(t, 50*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	q := newTestQueue(t, "q")
	q.samples, q.types = true, jsonenc.FieldTypes{"Counter": ua.TypeDouble}
	cfg := config.WriterGroup{
		Name: "legacy", PublishingInterval: config.Duration(100 * time.Millisecond),
		Format: config.FormatSamples, MessageShape: config.ShapeBatched, FieldEncoding: config.FieldDataValue,
		Writers: []config.DataSetWriter{{Name: "w", Fields: []config.Field{{Name: "Counter", Node: server.NodeCounter}}}},
	}
	startGroup(t, m, cfg, Options{Queues: []sink.Queue{q}})
	var samples []jsonenc.Sample
	testutil.WaitFor(t, 20*time.Second, "10 samples", func() bool {
		samples = samples[:0]
		d := jsonenc.NewDecoder(jsonenc.DecoderOptions{})
		for _, r := range q.all() {
			if r.kind != sink.KindData {
				continue
			}
			s, err := d.DecodeSamples(r.payload, jsonenc.FieldTypes{"Counter": ua.TypeDouble})
			if err != nil {
				t.Fatalf("samples %s: %v", r.payload, err)
			}
			samples = append(samples, s...)
		}
		return len(samples) >= 10
	})
	prev := -1.0
	for _, s := range samples {
		// The node id in its nsu= form (the namespace URI, not the index).
		if !strings.HasPrefix(s.NodeID, "nsu=") || !strings.HasSuffix(s.NodeID, ";s=Demo.Counter") || s.DisplayName != "Counter" || s.EndpointURL != srv.URL() || s.Value.SourceTimestamp == 0 {
			t.Fatalf("sample %+v", s)
		}
		if c := s.Value.Value.Double(); prev >= 0 && c <= prev {
			t.Fatalf("Counter %v after %v", c, prev)
		}
		prev = s.Value.Value.Double()
	}
}

// TestWriterGroupStop: Stop ends the delivery and is safe to repeat; the
// group cannot be restarted or changed afterwards.
func TestWriterGroupStop(t *testing.T) {
	srv := startSim(t, 20*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	q := newTestQueue(t, "q")
	cfg := config.WriterGroup{
		Name: "stop", PublishingInterval: config.Duration(50 * time.Millisecond), KeepAlive: config.Duration(100 * time.Millisecond),
		Writers: []config.DataSetWriter{{Name: "w", Fields: []config.Field{{Name: "Counter", Node: server.NodeCounter}}}},
	}
	g := startGroup(t, m, cfg, Options{Queues: []sink.Queue{q}})
	testutil.WaitFor(t, 20*time.Second, "data", func() bool { return len(q.all()) >= 5 })
	ctx := ctxT(t)
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	n := len(q.all())
	if !testutil.Consistently(300*time.Millisecond, func() bool { return len(q.all()) == n }) {
		t.Fatalf("messages after Stop: %d → %d", n, len(q.all()))
	}
	if err := g.Start(ctx); err == nil {
		t.Fatal("Start after Stop succeeded")
	}
	if err := g.AddWriter(ctx, writerFor(cfg, config.DataSetWriter{Name: "x", Fields: []config.Field{{Node: server.NodeStep}}})); err == nil || !strings.Contains(err.Error(), "after Stop") {
		t.Fatalf("AddWriter after Stop: %v", err)
	}
	if len(m.Subscriptions()) != 0 {
		t.Fatalf("%d subscriptions left on the session", len(m.Subscriptions()))
	}
}

// TestNewWriterGroupErrors: a configuration without config's defaults is
// refused (ErrNotDefaulted) with the setting named, and the same one with
// them applied is taken; checking the settings' values is config's
// (Validate), not repeated here. An unknown per-field payload (an Option,
// not configuration) is refused.
func TestNewWriterGroupErrors(t *testing.T) {
	w := func(fs ...config.Field) []config.DataSetWriter {
		return []config.DataSetWriter{{Name: "w", Fields: fs}}
	}
	for _, c := range []struct {
		cfg  config.WriterGroup
		want string
	}{
		{config.WriterGroup{}, `writer group "": name`},
		{config.WriterGroup{Name: "g", Writers: w(config.Field{Name: "a", Node: "i=2258"})}, `writer group "g": publishingInterval`},
		{config.WriterGroup{Name: "g", PublishingInterval: config.Duration(time.Second), KeyFrameCount: 1}, "keepAlive"},
		{config.WriterGroup{Name: "g", PublishingInterval: config.Duration(time.Second), KeyFrameCount: 1, KeepAlive: -1, MaxMessageSize: 1 << 16,
			MaxUnacked: 1, MaxNotificationsPerPublish: -1, MessageShape: config.ShapeSingle, Encoding: config.EncodingCompact, FieldEncoding: config.FieldVariant}, "format"},
	} {
		_, err := NewWriterGroup(c.cfg, Options{Logger: quietLog})
		if !errors.Is(err, ErrNotDefaulted) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want ErrNotDefaulted about %q", c.cfg, err, c.want)
		}
		if c.cfg.Name == "" {
			continue // a name is the configuration's, not a default
		}
		g, err := NewWriterGroup(defaulted(c.cfg), Options{Logger: quietLog})
		if err != nil {
			t.Errorf("%+v with defaults: %v", c.cfg, err)
			continue
		}
		g.Stop(t.Context())
	}
	// Defaults applied to the group, then a writer and a field added by hand.
	cfg := defaulted(config.WriterGroup{Name: "g", Writers: w(config.Field{Name: "a", Node: "i=2258"})})
	for _, c := range []struct {
		edit func(*config.WriterGroup)
		want string
	}{
		{func(g *config.WriterGroup) { g.Writers = append(g.Writers, config.DataSetWriter{Name: "x"}) }, `writer "x" (id 0): id or name`},
		{func(g *config.WriterGroup) {
			g.Writers[0].Fields = append(g.Writers[0].Fields, config.Field{Name: "b", Node: "i=2259"})
		}, `writer "w": field 2: queueSize`},
		{func(g *config.WriterGroup) {
			f := g.Writers[0].Fields[0]
			f.Name, f.SamplingInterval = "b", nil
			g.Writers[0].Fields = append(g.Writers[0].Fields, f)
		}, `writer "w": field 2: samplingInterval`},
		{func(g *config.WriterGroup) {
			g.Writers[0].Fields = append(g.Writers[0].Fields, config.Field{Name: "ev", Node: "i=2253", QueueSize: 10, Events: &config.EventSelect{}})
		}, `writer "w": field 2: events.select`},
	} {
		bad := cfg
		bad.Writers = slices.Clone(cfg.Writers)
		bad.Writers[0].Fields = slices.Clone(cfg.Writers[0].Fields)
		c.edit(&bad)
		_, err := NewWriterGroup(bad, Options{Logger: quietLog})
		if !errors.Is(err, ErrNotDefaulted) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want ErrNotDefaulted about %q", err, c.want)
		}
	}
	if _, err := NewWriterGroup(cfg, Options{Logger: quietLog, FieldPayload: "xml"}); err == nil || !strings.Contains(err.Error(), `per-field payload "xml"`) {
		t.Errorf("FieldPayload xml: error %v", err)
	}
}

// TestWriterGroupRaw: the raw field encoding writes bare values.
func TestWriterGroupRaw(t *testing.T) {
	srv := startSim(t, 50*time.Millisecond, 0)
	m := startSession(t, srv.URL())
	q := newTestQueue(t, "q")
	q.types = jsonenc.FieldTypes{"Counter": ua.TypeDouble, "Step": ua.TypeInt32}
	cfg := config.WriterGroup{
		Name: "raw", PublishingInterval: config.Duration(100 * time.Millisecond), FieldEncoding: config.FieldRaw,
		Writers: []config.DataSetWriter{{Name: "w", Fields: []config.Field{{Name: "Counter", Node: server.NodeCounter}, {Name: "Step", Node: server.NodeStep}}}},
	}
	startGroup(t, m, cfg, Options{Queues: []sink.Queue{q}})
	testutil.WaitFor(t, 20*time.Second, "5 data messages", func() bool { return len(dataSetMessages(q.all(), "w")) >= 5 })
	for _, r := range q.all() {
		if r.kind != sink.KindData {
			continue
		}
		var nm struct {
			Messages struct {
				MessageType string
				Payload     map[string]any
			}
		}
		if err := json.Unmarshal(r.payload, &nm); err != nil {
			t.Fatal(err)
		}
		if nm.Messages.MessageType == "ua-keepalive" {
			continue
		}
		for name, v := range nm.Messages.Payload {
			if _, ok := v.(float64); !ok {
				t.Fatalf("raw field %s = %#v in %s, want a bare number", name, v, r.payload)
			}
		}
	}
}
