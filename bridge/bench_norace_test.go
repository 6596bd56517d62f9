//go:build !race

package bridge

import (
	"testing"

	"github.com/uagate/gateway/bridge/config"
)

// Allocation tests: the race detector allocates on its own account, so they
// are built without it only (scripts/test.sh runs them in a step of their own).

// TestWriterGroupHotPathAllocs: in steady state a notification message of
// 100 numeric fields costs at most one allocation (≤ 0.01 per notification),
// key frames included.
// With marks (a restart's continuation points, stored into a mapped file
// per notification message) too.
func TestWriterGroupHotPathAllocs(t *testing.T) {
	for _, c := range []struct {
		shape string
		marks bool
	}{{config.ShapeSingle, false}, {config.ShapeBatched, false}, {config.ShapeSingle, true}} {
		shape := c.shape
		q := &discardQueue{}
		g, items := hotPathGroup(t, 100, q)
		g.single = shape == config.ShapeSingle
		g.configureWriter()
		if c.marks {
			withMarks(t, g, 72)
		}
		seq := uint32(1)
		for ; seq <= 20; seq++ {
			step(g, items, seq)
		}
		allocs := testing.AllocsPerRun(200, func() {
			step(g, items, seq)
			seq++
		})
		if per := allocs / float64(len(items)); per > 0.01 {
			t.Errorf("%s: %.2f allocations per message of %d notifications (%.4f per notification), want ≤ 0.01", shape, allocs, len(items), per)
		}
		if q.messages == 0 || g.Stats().KeyFrames < 20 {
			t.Fatalf("%s: nothing written: %d messages, %+v", shape, q.messages, g.Stats())
		}
		if c.marks {
			if _, h, _ := g.marks.Previous(); h != 0 {
				t.Fatalf("a new marks file says %d was handled before", h)
			}
			if wm := g.marks.Writer(int(g.writers[0].mark)); wm.Seq != g.writers[0].seq || wm.Seq < 200 {
				t.Fatalf("marks: writer at %+v, the writer at %d", wm, g.writers[0].seq)
			}
		}
	}
}

// TestWriterGroupValueSinkAllocs: handing the values to a ValueSink adds no
// allocation to the hot path.
func TestWriterGroupValueSinkAllocs(t *testing.T) {
	q := &discardQueue{}
	g, items := hotPathGroup(t, 100, q)
	vs := &countingValues{}
	g.vsinks = []ValueSink{vs}
	seq := uint32(1)
	for ; seq <= 20; seq++ {
		step(g, items, seq)
	}
	allocs := testing.AllocsPerRun(200, func() {
		step(g, items, seq)
		seq++
	})
	if per := allocs / float64(len(items)); per > 0.01 {
		t.Errorf("%.2f allocations per message of %d notifications, want ≤ 0.01 per notification", allocs, len(items))
	}
	if vs.values < 200*len(items) {
		t.Fatalf("the ValueSink got %d values in %d batches", vs.values, vs.batches)
	}
}

// TestWriterGroupRoundsAllocs: a message carrying ten queued values of
// each of ten fields, the fields in turn (as node-opcua sends them), is
// sorted into ten DataSetMessages without allocating in steady state.
func TestWriterGroupRoundsAllocs(t *testing.T) {
	q := &discardQueue{}
	g, items := roundsGroup(t, 10, 10, q)
	seq := uint32(1)
	for ; seq <= 20; seq++ {
		step(g, items, seq)
	}
	dsm := g.Stats().DataSetMessages
	if allocs := testing.AllocsPerRun(200, func() {
		step(g, items, seq)
		seq++
	}); allocs != 0 {
		t.Errorf("%.2f allocations per message", allocs)
	}
	if n := g.Stats().DataSetMessages - dsm; n != 201*10 {
		t.Errorf("%d DataSetMessages for 201 messages, want ten each", n)
	}
}
