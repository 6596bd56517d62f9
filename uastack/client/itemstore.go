package client

import (
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/uagate/gateway/uastack/ua"
)

// What an item keeps outside its 32-byte entry (monitored.go): its node id's
// text, Guid or long text, its template and an attribute id above 254.
//
// The identifier of a node is one uint32 of the entry: the number of a
// numeric id, or where the rest is. String and opaque identifiers up to
// maxArenaText bytes (all real ones) are copied into an append-only arena of
// byte chunks the table owns, and the entry keeps the offset and the length:
// no string header, no allocation per item. The arena hands out strings over
// its bytes (unsafe.String), which is safe because bytes once written are
// never written again: chunks only grow into their spare capacity, and a
// compaction copies the live texts into new chunks and lets the old ones go
// (strings handed out keep theirs alive). Guids (16 bytes, rare) and longer
// texts are in side slices the entry indexes.
//
// Deleted items leave their bytes behind until the dead ones outweigh the
// live ones (and a chunk): then compact rewrites the side storage, so a
// subscription whose items come and go does not grow without bound.

const (
	arenaChunkShift = 16
	arenaChunkMax   = 1 << arenaChunkShift // bytes per chunk at most; offsets within it fit 16 bits
	arenaChunkMin   = 256                  // the first chunk of a table; each next one doubles
	arenaMaxChunks  = 1 << (32 - arenaChunkShift)
	// maxArenaText is the longest identifier kept in the arena; longer ones
	// go to itemTable.long (a node id of more than 1 KiB is a curiosity).
	maxArenaText = 1024
)

// textArena is an append-only store of byte strings, addressed by
// chunk<<arenaChunkShift | offset.
type textArena struct {
	chunks [][]byte
}

// add copies s (1 … maxArenaText bytes) into the arena; false when the arena
// has no room (4 GiB).
func (a *textArena) add(s string, hint int) (uint32, bool) {
	n := len(a.chunks)
	if n == 0 || len(a.chunks[n-1])+len(s) > cap(a.chunks[n-1]) {
		if n == arenaMaxChunks {
			return 0, false
		}
		size := arenaChunkMin
		if n > 0 {
			size = 2 * cap(a.chunks[n-1])
		}
		// A large batch announced by reserve goes straight to big chunks.
		size = min(max(size, hint, len(s)), arenaChunkMax)
		a.chunks = append(a.chunks, make([]byte, 0, size))
		n++
	}
	c := &a.chunks[n-1]
	off := len(*c)
	*c = append(*c, s...)
	return uint32(n-1)<<arenaChunkShift | uint32(off), true
}

// at returns the n bytes at ref as a string sharing the arena's memory.
func (a *textArena) at(ref uint32, n int) string {
	c := a.chunks[ref>>arenaChunkShift]
	return unsafe.String(&c[ref&(arenaChunkMax-1)], n)
}

func (a *textArena) size() int {
	n := 0
	for _, c := range a.chunks {
		n += cap(c)
	}
	return n
}

// Item bits (item.bits).
const (
	itemDeleted  = 1 << iota
	itemHasRange // its index range is in itemTable.ranges
	itemLongText // its text is itemTable.long[ref]
	_
	itemTypeShift = 4 // ua.IDType, 2 bits
	itemModeShift = 6 // MonitoringMode, 2 bits
)

// attrOther in item.attr: the attribute id is in itemTable.attrs.
const attrOther = math.MaxUint8

func (it *item) deleted() bool { return it.bits&itemDeleted != 0 }

func (it *item) idType() ua.IDType { return ua.IDType(it.bits>>itemTypeShift) & 3 }

func (it *item) mode() MonitoringMode { return MonitoringMode(it.bits>>itemModeShift) & 3 }

func (it *item) setMode(m MonitoringMode) {
	it.bits = it.bits&^(3<<itemModeShift) | uint8(m&3)<<itemModeShift
}

// setNode stores n's identifier and namespace in it and the side storage; t.mu
// must be held. The text is copied: a node id is usually a substring of a
// longer string (a configuration's "nsu=…;s=…", a decoded response), and a
// million items must not pin those.
func (t *itemTable) setNode(it *item, n ua.NodeID) {
	it.ns = n.Namespace
	it.bits = it.bits&^(3<<itemTypeShift) | uint8(n.Type&3)<<itemTypeShift
	switch n.Type {
	case ua.IDNumeric:
		it.ref = n.Numeric
		return
	case ua.IDGuid:
		if len(t.guids) == cap(t.guids) && t.reserved > 0 {
			t.guids = slices.Grow(t.guids, t.reserved) // a batch of Guid nodes: one allocation
		}
		it.ref = uint32(len(t.guids))
		t.guids = append(t.guids, n.Guid)
		t.sideLive += int(unsafe.Sizeof(n.Guid))
		return
	}
	s := n.Text
	if s == "" {
		it.ref, it.tlen = 0, 0
		return
	}
	if len(s) <= maxArenaText {
		hint := 0
		if t.reserved > 0 {
			hint = t.reserved * len(s)
		}
		if ref, ok := t.text.add(s, hint); ok {
			it.ref, it.tlen = ref, uint16(len(s))
			t.sideLive += len(s)
			return
		}
	}
	it.bits |= itemLongText
	it.ref = uint32(len(t.long))
	t.long = append(t.long, strings.Clone(s))
	t.sideLive += len(s)
}

// node returns the node id of it; its text shares the table's memory.
func (t *itemTable) node(it *item) ua.NodeID { return it.nodeIn(&t.text, t.guids, t.long) }

func (it *item) nodeIn(text *textArena, guids []ua.Guid, long []string) ua.NodeID {
	n := ua.NodeID{Namespace: it.ns, Type: it.idType()}
	switch {
	case n.Type == ua.IDNumeric:
		n.Numeric = it.ref
	case n.Type == ua.IDGuid:
		n.Guid = guids[it.ref]
	case it.bits&itemLongText != 0:
		n.Text = long[it.ref]
	case it.tlen > 0:
		n.Text = text.at(it.ref, int(it.tlen))
	}
	return n
}

// nodeBytes is what it keeps in the side storage.
func (t *itemTable) nodeBytes(it *item) int {
	switch {
	case it.idType() == ua.IDNumeric:
		return 0
	case it.idType() == ua.IDGuid:
		return int(unsafe.Sizeof(ua.Guid{}))
	case it.bits&itemLongText != 0:
		return len(t.long[it.ref])
	}
	return int(it.tlen)
}

// forget clears the item of handle h and what it keeps outside its entry,
// leaving a deleted entry; t.mu must be held.
func (t *itemTable) forget(h uint32, it *item) {
	b := t.nodeBytes(it)
	t.sideLive -= b
	t.sideDead += b
	if it.bits&itemLongText != 0 {
		t.long[it.ref] = ""
	}
	t.releaseTmpl(it.tmpl)
	if it.bits&itemHasRange != 0 {
		delete(t.ranges, h)
	}
	if it.attr == attrOther {
		delete(t.attrs, h)
	}
	*it = item{bits: itemDeleted}
	if t.sideDead > arenaChunkMax && t.sideDead > t.sideLive {
		t.compact()
	}
}

// compact copies the side storage of the live items anew, leaving the dead
// items' bytes to the GC; t.mu must be held.
func (t *itemTable) compact() {
	text, guids, long := t.text, t.guids, t.long
	t.text, t.guids, t.long, t.sideLive, t.sideDead = textArena{}, nil, nil, 0, 0
	for h := uint32(1); int(h) <= t.n; h++ {
		it := t.at(h)
		if it.deleted() {
			continue
		}
		n := it.nodeIn(&text, guids, long)
		it.bits &^= itemLongText
		t.setNode(it, n)
	}
}

// tmplSlot is an entry of itemTable.tmpls: a template and how many items use it.
type tmplSlot struct {
	tm   *itemTemplate
	refs int
}

// tmplIndex returns the index of tm in t.tmpls, adding it; t.mu must be held.
// The caller takes a reference with holdTmpl for every item it gives it.
func (t *itemTable) tmplIndex(tm *itemTemplate) uint32 {
	if i, ok := t.tmplIdx[tm]; ok {
		return i
	}
	if t.tmplIdx == nil {
		t.tmplIdx = map[*itemTemplate]uint32{}
	}
	var i uint32
	if k := len(t.tmplFree); k > 0 {
		i = t.tmplFree[k-1]
		t.tmplFree = t.tmplFree[:k-1]
		t.tmpls[i] = tmplSlot{tm: tm}
	} else {
		i = uint32(len(t.tmpls))
		t.tmpls = append(t.tmpls, tmplSlot{tm: tm})
	}
	t.tmplIdx[tm] = i
	return i
}

func (t *itemTable) holdTmpl(i uint32) { t.tmpls[i].refs++ }

// releaseTmpl drops a reference to template i, freeing its slot with the
// last one; t.mu must be held.
func (t *itemTable) releaseTmpl(i uint32) {
	s := &t.tmpls[i]
	if s.refs--; s.refs > 0 {
		return
	}
	delete(t.tmplIdx, s.tm)
	*s = tmplSlot{}
	t.tmplFree = append(t.tmplFree, i)
}

// setTmpl gives it template tm; t.mu must be held.
func (t *itemTable) setTmpl(it *item, tm *itemTemplate) {
	if it.deleted() {
		return
	}
	i := t.tmplIndex(tm)
	if i == it.tmpl {
		return
	}
	t.holdTmpl(i)
	t.releaseTmpl(it.tmpl)
	it.tmpl = i
}

func (t *itemTable) tmplOf(it *item) *itemTemplate { return t.tmpls[it.tmpl].tm }

// attrOf returns the attribute id of the item of handle h.
func (t *itemTable) attrOf(h uint32, it *item) uint32 {
	if it.attr == attrOther {
		return t.attrs[h]
	}
	return uint32(it.attr)
}
