package bridge

import (
	"cmp"
	"hash/maphash"
	"slices"
)

// The last values are read a page at a time, inside the group: a page walks
// the slots from its cursor on and costs its own size, never the group's.
// A cursor is a slot (FieldValue.Handle minus the group's first handle).
// Slots are never reused: a removed writer's stay (skipped), an added
// writer's come after the others, so a cursor stays good across changes of
// the writers.
//
// A node filter goes through an index: the slots sorted by (hash of the
// node id's text, slot), 4 bytes a field, built at the first query by node
// and dropped when the fields or their node ids change (AddWriter,
// RemoveWriter, the items' creation: idxGen counts the changes). The hashes
// are not kept: a lookup computes the log2(n) its binary search needs. Nothing
// of it is on the hot path, and the build holds the cache's lock only a
// chunk of slots at a time.

// ValueFilter selects fields of a group; empty members match every field.
type ValueFilter struct {
	Writer string // a dataset writer's name
	Node   string // a node id, as FieldValue.Node has it
}

// LastValues returns the state of at most limit fields that match f, in slot
// order from slot from on, and the slot of the next field that matches, -1
// when none is left: the cursor of the next page. from < 0 reads from the
// first slot; limit <= 0 returns no values, only where the first match is.
// It waits only for a cache update in progress, never for a sink.
func (g *WriterGroup) LastValues(f ValueFilter, from, limit int) ([]FieldValue, int) {
	var idx *nodeIndex
	for {
		if f.Node != "" {
			idx = g.nodeIndex()
		}
		g.vmu.RLock()
		if f.Node == "" || idx != nil && idx.gen == g.idxGen.Load() {
			break
		}
		// The writers changed while the index was built (a reload): build
		// it again, a chunk at a time, rather than at once under g.vmu,
		// which would hold the notification handlers up for the whole build.
		g.vmu.RUnlock()
	}
	defer g.vmu.RUnlock()
	it := g.matching(f, from, idx)
	var out []FieldValue
	if limit > 0 {
		out = make([]FieldValue, 0, min(limit, len(g.fields)))
	}
	for {
		w, s := it.next()
		if w == nil {
			return out, -1
		}
		if len(out) >= limit {
			return out, int(s)
		}
		out = append(out, g.fieldValue(w, s))
	}
}

// fieldIter walks the slots that match a filter, in order (g.vmu held).
type fieldIter struct {
	g  *WriterGroup
	ws []*writer // the writers left to walk; ws[0] holds s
	s  int32     // the next slot to look at

	// With a node filter: the candidates are idx[pos:] while their hash is
	// hash; only is the writer filter's writer (nil: any).
	node string
	only *writer
	idx  []int32
	pos  int
	hash uint32
	buf  []byte
}

// matching starts a walk of the slots from from on that match f; idx is
// the node index when f names a node (g.vmu held).
func (g *WriterGroup) matching(f ValueFilter, from int, idx *nodeIndex) *fieldIter {
	it := &fieldIter{g: g, node: f.Node}
	if from >= len(g.fields) {
		return it
	}
	from = max(from, 0)
	ws := g.writers
	if f.Writer != "" {
		i := slices.IndexFunc(ws, func(w *writer) bool { return !w.removed && w.name == f.Writer })
		if i < 0 {
			return it
		}
		ws = ws[i : i+1]
		it.only = ws[0]
	}
	if f.Node != "" {
		it.idx = idx.slots
		it.hash = nodeHash([]byte(f.Node))
		want := uint64(it.hash)<<32 | uint64(from)
		it.pos, _ = slices.BinarySearchFunc(it.idx, want, func(s int32, want uint64) int {
			return cmp.Compare(g.nodeKey(s, &it.buf), want)
		})
		return it
	}
	// The first writer whose slots end after from.
	i, _ := slices.BinarySearchFunc(ws, int32(from), func(w *writer, s int32) int {
		if w.end <= s {
			return -1
		}
		return 1
	})
	it.ws, it.s = ws[i:], int32(from)
	return it
}

// next returns the next matching slot and its writer; nil when none is left.
func (it *fieldIter) next() (*writer, int32) {
	if it.node != "" {
		return it.nextByNode()
	}
	for len(it.ws) > 0 {
		w := it.ws[0]
		if w.removed || it.s >= w.end {
			it.ws = it.ws[1:]
			continue
		}
		it.s = max(it.s, w.first)
		s := it.s
		it.s++
		return w, s
	}
	return nil, -1
}

func (it *fieldIter) nextByNode() (*writer, int32) {
	g := it.g
	for it.pos < len(it.idx) {
		s := it.idx[it.pos]
		w := g.writerOf(s)
		it.buf = g.appendFieldNode(it.buf[:0], w, s)
		if nodeHash(it.buf) != it.hash {
			it.pos = len(it.idx)
			break
		}
		it.pos++
		if !w.removed && (it.only == nil || w == it.only) && string(it.buf) == it.node {
			return w, s
		}
	}
	return nil, -1
}

var nodeSeed = maphash.MakeSeed()

func nodeHash(text []byte) uint32 { return uint32(maphash.Bytes(nodeSeed, text)) }

func nodeKey(s int32, text []byte) uint64 { return uint64(nodeHash(text))<<32 | uint64(uint32(s)) }

// nodeKey is slot s's sort key in the node index; buf is scratch.
func (g *WriterGroup) nodeKey(s int32, buf *[]byte) uint64 {
	*buf = g.appendFieldNode((*buf)[:0], g.writerOf(s), s)
	return nodeKey(s, *buf)
}

// nodeIndex is the index of a group's fields by node id: its slots sorted
// by nodeKey.
type nodeIndex struct {
	gen   uint64 // the group's idxGen it was built for
	slots []int32
}

// nodeIndexChunk is how many slots the build reads per hold of the cache's
// read lock, so that the handlers, which take its write lock, wait for
// one chunk at a time, not for the whole build (BenchmarkNodeIndex).
const nodeIndexChunk = 16384

// nodeIndex returns the node index, building it when there is none for
// the current fields; nil when they changed during the build (g.vmu not
// held).
func (g *WriterGroup) nodeIndex() *nodeIndex {
	if idx := g.nodeIdx.Load(); idx != nil && idx.gen == g.idxGen.Load() {
		return idx
	}
	g.idxMu.Lock()
	defer g.idxMu.Unlock()
	gen := g.idxGen.Load()
	if idx := g.nodeIdx.Load(); idx != nil && idx.gen == gen {
		return idx
	}
	g.vmu.RLock()
	n := len(g.fields)
	g.vmu.RUnlock()
	keys := make([]uint64, 0, n)
	var buf []byte
	for lo := 0; lo < n; lo += nodeIndexChunk {
		g.vmu.RLock()
		if g.idxGen.Load() != gen {
			g.vmu.RUnlock()
			return nil
		}
		keys, buf = g.appendNodeKeys(keys, buf, int32(lo), int32(min(lo+nodeIndexChunk, n)))
		g.vmu.RUnlock()
	}
	idx := sortedIndex(gen, keys)
	g.vmu.RLock()
	defer g.vmu.RUnlock()
	if g.idxGen.Load() != gen {
		return nil
	}
	g.nodeIdx.Store(idx)
	return idx
}

// appendNodeKeys appends the keys of the slots of writers not removed in
// [lo, hi) (g.vmu held).
func (g *WriterGroup) appendNodeKeys(keys []uint64, buf []byte, lo, hi int32) ([]uint64, []byte) {
	for s := lo; s < hi; {
		w := g.writerOf(s)
		end := min(w.end, hi)
		if w.removed {
			s = end
			continue
		}
		for ; s < end; s++ {
			buf = g.appendFieldNode(buf[:0], w, s)
			keys = append(keys, nodeKey(s, buf))
		}
	}
	return keys, buf
}

func sortedIndex(gen uint64, keys []uint64) *nodeIndex {
	slices.Sort(keys)
	idx := &nodeIndex{gen: gen, slots: make([]int32, len(keys))}
	for i, k := range keys {
		idx.slots[i] = int32(uint32(k))
	}
	return idx
}
