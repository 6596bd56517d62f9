package bridge

import (
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/ua"
)

// ValueSink is an output that takes the values themselves rather than Part
// 14 messages, to write them in a format of its own (the Sparkplug B node
// writes a writer's changes as one DDATA). It is at-most-once: the group
// acknowledges upstream without waiting for it.
//
// Values runs on the session's dispatch goroutine with the group's lock
// held, once per DataSetMessage's worth of a writer's values (the values of
// one notification message, or its k-th values of fields the server sent
// several of), after the last-value cache took them. It must not block,
// except on a full Block queue of its own, and must copy what it keeps: the
// batch and the values are borrowed for the call.
type ValueSink interface {
	Values(b *ValueBatch)
}

// ValueBatch is what a ValueSink is given: changed values of one writer, in
// field order.
type ValueBatch struct {
	Group  *WriterGroup // the writer group
	Writer string       // the dataset writer's name
	// WriterIndex tells the writer apart from another of its name (a reload
	// that replaced it): WriterInfo.Index.
	WriterIndex int
	// Created is the UnixNano of the cycle (sink.Message.Created).
	Created int64
	// Fields[i] is the position in the writer of the field whose value is
	// Values[i].
	Fields []int32
	Values []*ua.DataValue
}

// WriterInfo is a dataset writer of a running group, for outputs that
// follow its fields.
type WriterInfo struct {
	Name string
	// Index is the ValueBatch.WriterIndex of its values; a writer that a
	// reload replaced gets a new one.
	Index  int
	Fields int
}

// WriterInfos lists the group's writers in their order; it never waits for
// the dispatch path.
func (g *WriterGroup) WriterInfos() []WriterInfo {
	ws := g.snapshot.Load()
	if ws == nil {
		return nil
	}
	out := make([]WriterInfo, len(*ws))
	for i, w := range *ws {
		out[i] = WriterInfo{Name: w.name, Index: int(w.index), Fields: int(w.end - w.first)}
	}
	return out
}

// Endpoint returns the name of the group's configured endpoint.
func (g *WriterGroup) Endpoint() string { return g.endpointName }

// Connected reports whether the group's session is connected.
func (g *WriterGroup) Connected() bool {
	return g.session != nil && g.session.State() == client.StateConnected
}

// sendValues hands the values of round r of w's entries to the ValueSinks
// (g.mu held).
func (g *WriterGroup) sendValues(w *writer, ents []entry, rounds int, r int32, items []ua.MonitoredItemNotification) {
	b := &g.vbatch
	b.Fields, b.Values = b.Fields[:0], b.Values[:0]
	rk := int32(0)
	for k := range ents {
		if rounds > 0 {
			if rk = nextRound(ents, k, rk); rk != r {
				continue
			}
		}
		b.Fields = append(b.Fields, ents[k].slot-w.first)
		b.Values = append(b.Values, &items[ents[k].item].Value)
	}
	b.Group, b.Writer, b.WriterIndex, b.Created = g, w.name, int(w.index), g.now
	for _, s := range g.vsinks {
		s.Values(b)
	}
	clear(b.Values) // the notifications go back to their pool
}
