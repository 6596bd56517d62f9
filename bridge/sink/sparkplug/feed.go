package sparkplug

import (
	"time"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/sink"
)

// A feed is the node's bridge.ValueSink in one writer group: it runs on the
// group's dispatch path and writes each batch of a writer's changed values
// as one DDATA payload (split at MaxMessageSize) with aliases only, into a
// pooled sink.Message for the node's Output. The seq room stays empty: the
// node fills it when it publishes. Nothing is allocated per value: the
// payload goes into the feed's buffer, which keeps its capacity, and the
// writer's device and metrics are found through a slice by writer index,
// checked against the device's current metrics by pointer.

// feedSlot is what a feed knows of a writer: its device, the metrics it
// was found in and the first metric of the writer among them.
type feedSlot struct {
	d      *device
	dm     *devMetrics
	offset int
}

type feed struct {
	n     *Node
	q     sink.Queue
	enc   encoder
	buf   []byte
	slots []feedSlot // by bridge.ValueBatch.WriterIndex
}

// Feed returns a ValueSink for one writer group (bridge.Options.ValueSinks)
// that encodes its values as DDATA and hands them to q, the Output in front
// of the node. Each writer group needs a feed of its own.
func (n *Node) Feed(q sink.Queue) bridge.ValueSink { return &feed{n: n, q: q} }

// Values implements bridge.ValueSink.
func (f *feed) Values(b *bridge.ValueBatch) {
	s := f.slot(b)
	if s == nil {
		f.n.st.unmapped.Add(uint64(len(b.Values)))
		f.n.Refresh()
		return
	}
	defs := s.dm.defs
	created := uint64(b.Created / int64(time.Millisecond))
	buf := beginPayload(f.buf, created)
	empty := len(buf)
	var m metric
	m.hasAlias = true
	mismatch, written := false, 0
	for i, pos := range b.Fields {
		k := s.offset + int(pos)
		if pos < 0 || k >= len(defs) || defs[k].part >= len(s.dm.parts) {
			f.n.st.unmapped.Add(1)
			continue
		}
		dv := b.Values[i]
		m.alias, m.ts = defs[k].alias, valueTime(dv, created)
		var err error
		if buf, err = f.enc.appendMetric(buf, &m, dv, defs[k].dtype); err != nil {
			mismatch = true
			continue
		}
		written++
		if len(buf) >= f.n.cfg.MaxMessageSize {
			f.flush(buf, b, s, written)
			buf, written = beginPayload(buf, created), 0
		}
	}
	if len(buf) > empty {
		f.flush(buf, b, s, written)
	}
	f.buf = buf
	if mismatch {
		f.n.st.typeMismatches.Add(1)
		s.d.retype.Store(true)
		f.n.poke()
	}
}

// slot returns the device and metrics of the batch's writer, nil when the
// node has none (yet).
func (f *feed) slot(b *bridge.ValueBatch) *feedSlot {
	i := b.WriterIndex
	if i < len(f.slots) {
		if s := &f.slots[i]; s.dm != nil && s.d.metrics.Load() == s.dm && !s.d.removed.Load() {
			return s
		}
	}
	// The writer is new to the feed, or its device was born again: find it
	// among the devices (a scan, once per change).
	for _, d := range *f.n.devices.Load() {
		dm := d.metrics.Load()
		if dm == nil || d.removed.Load() {
			continue
		}
		for pi, p := range dm.parts {
			if p.group == b.Group && p.index == i {
				for len(f.slots) <= i {
					f.slots = append(f.slots, feedSlot{})
				}
				f.slots[i] = feedSlot{d: d, dm: dm, offset: dm.offsets[pi]}
				return &f.slots[i]
			}
		}
	}
	return nil
}

// flush hands the payload in buf (metrics values) to the node's queue.
func (f *feed) flush(buf []byte, b *bridge.ValueBatch, s *feedSlot, metrics int) {
	if r, ok := f.q.(sink.RoomWaiter); ok {
		r.WaitRoom(len(buf))
	}
	m := sink.NewMessage(len(buf))
	m.SetPayload(buf)
	m.Kind = sink.KindData
	m.Addr = sink.Addr{Group: b.Group.Name(), Writer: b.Writer}
	m.Token = token(s.d, s.dm)
	m.Created = b.Created
	f.n.st.metrics.Add(uint64(metrics))
	f.q.Enqueue(m)
}
