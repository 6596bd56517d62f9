package bridge

import (
	"slices"
	"testing"

	"github.com/uagate/gateway/uastack/ua"
)

// recordingValues keeps what a ValueSink is given.
type recordingValues struct {
	batches []ValueBatch
	values  [][]float64
}

func (r *recordingValues) Values(b *ValueBatch) {
	c := *b
	c.Fields = slices.Clone(b.Fields)
	c.Values = nil
	var vs []float64
	for _, v := range b.Values {
		vs = append(vs, v.Value.Double())
	}
	r.batches = append(r.batches, c)
	r.values = append(r.values, vs)
}

// countingValues counts what a ValueSink is given, allocating nothing.
type countingValues struct{ batches, values int }

func (c *countingValues) Values(b *ValueBatch) { c.batches++; c.values += len(b.Values) }

// TestValueSink: a ValueSink gets one batch per DataSetMessage's worth of a
// writer's values, after the cache took them: the changed fields in field
// order, and a field the server sent twice in one message in two batches,
// in order.
func TestValueSink(t *testing.T) {
	g, items := hotPathGroup(t, 4, &discardQueue{})
	rec := &recordingValues{}
	g.vsinks = []ValueSink{rec}
	step(g, items, 1)
	if len(rec.batches) != 1 {
		t.Fatalf("%d batches, want 1", len(rec.batches))
	}
	b := rec.batches[0]
	if b.Group != g || b.Writer != "w" || b.WriterIndex != 0 || b.Created == 0 ||
		!slices.Equal(b.Fields, []int32{0, 1, 2, 3}) || !slices.Equal(rec.values[0], []float64{1, 1.5, 2, 2.5}) {
		t.Fatalf("batch %+v values %v", b, rec.values[0])
	}
	if infos := g.WriterInfos(); len(infos) != 1 || infos[0] != (WriterInfo{Name: "w", Index: 0, Fields: 4}) {
		t.Errorf("WriterInfos %+v", infos)
	}

	// Field 2 twice, field 0 once, out of order.
	two := []ua.MonitoredItemNotification{items[2], items[0], items[2]}
	two[0].Value.Value.SetDouble(10)
	two[1].Value.Value.SetDouble(20)
	two[2].Value.Value.SetDouble(30)
	rec.batches, rec.values = nil, nil
	g.onDataChange(nil, 2, two)
	if len(rec.batches) != 2 || !slices.Equal(rec.batches[0].Fields, []int32{0, 2}) || !slices.Equal(rec.values[0], []float64{20, 10}) ||
		!slices.Equal(rec.batches[1].Fields, []int32{2}) || !slices.Equal(rec.values[1], []float64{30}) {
		t.Fatalf("batches %+v values %v", rec.batches, rec.values)
	}
	if v, ok := g.LastValue("w", "Field00002"); !ok || v.Value.Value.Double() != 30 {
		t.Errorf("cache: %+v", v)
	}
}
