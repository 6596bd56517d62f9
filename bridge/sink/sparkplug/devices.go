package sparkplug

import (
	"cmp"
	"slices"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/uastack/ua"
)

// The devices: a Sparkplug Device per dataset writer (device id
// <writerGroup>.<writer>, metrics named as the fields) or per endpoint
// (device id the endpoint's name, metrics <writerGroup>/<writer>/<field>).
// They are made from the running writer groups (Config.Source) by the
// session loop, and kept for the node's life: a device's index never
// changes (messages carry it), and its metrics keep their aliases, given
// out in the order the node first sees them, across reconnects, rebirths
// and reloads. A device's metrics (names, aliases, datatypes) are made
// anew at each of its DBIRTHs from the last values, and replaced, never
// changed, so that the feeds read them without a lock.

// rebirthEvery bounds how often a device is born again because values
// came in a type other than its metrics' datatypes.
const rebirthEvery = time.Second

// device is a Sparkplug Device.
type device struct {
	index                 int
	id                    string
	dbirth, ddata, ddeath string // topics

	removed atomic.Bool
	online  atomic.Bool // DBIRTH sent in this session (Stats)
	retype  atomic.Bool // a value did not fit its metric's datatype
	metrics atomic.Pointer[devMetrics]

	// pubMu:
	parts      []part            // the writers it is made of now
	dirty      bool              // parts changed since metrics were made
	born       bool              // DBIRTH sent in this session
	aliases    map[string]uint64 // by metric name, for the node's life
	birthAt    int64             // UnixNano of the last DBIRTH, before it read the values
	birthTS    map[uint64]uint64 // alias → timestamp of the value the last DBIRTH carried
	lastRetype time.Time
}

// part is a dataset writer of a device.
type part struct {
	group  *bridge.WriterGroup
	writer string
	index  int // bridge.WriterInfo.Index
	fields int
}

// devMetrics are a device's metrics as of its last DBIRTH.
type devMetrics struct {
	version uint32
	parts   []part
	offsets []int // first metric of each part
	defs    []metricDef
	// byAlias are the indexes of defs in alias order, byName by name: the
	// held records' names and aliases (index).
	byAlias []int32
	byName  map[string]int32
}

// index makes byAlias and byName.
func (dm *devMetrics) index() {
	dm.byAlias = make([]int32, len(dm.defs))
	dm.byName = make(map[string]int32, len(dm.defs))
	for i := range dm.defs {
		dm.byAlias[i] = int32(i)
		if !dm.defs[i].event {
			dm.byName[dm.defs[i].name] = int32(i)
		}
	}
	slices.SortFunc(dm.byAlias, func(a, b int32) int { return cmp.Compare(dm.defs[a].alias, dm.defs[b].alias) })
}

// aliasIndex returns the index of the metric of alias (-1: none, or an
// event field), trying hint first.
func (dm *devMetrics) aliasIndex(alias uint64, hint int) int {
	if hint < len(dm.defs) && dm.defs[hint].alias == alias && !dm.defs[hint].event {
		return hint
	}
	i, ok := slices.BinarySearchFunc(dm.byAlias, alias, func(k int32, a uint64) int { return cmp.Compare(dm.defs[k].alias, a) })
	if !ok || dm.defs[dm.byAlias[i]].event {
		return -1
	}
	return int(dm.byAlias[i])
}

// nameIndex returns the index of the metric named name (-1: none, or an
// event field), trying hint first.
func (dm *devMetrics) nameIndex(name []byte, hint int) int {
	if hint < len(dm.defs) && dm.defs[hint].name == string(name) && !dm.defs[hint].event {
		return hint
	}
	i, ok := dm.byName[string(name)]
	if !ok {
		return -1
	}
	return int(i)
}

// metricDef is one metric of a device.
type metricDef struct {
	name   string
	alias  uint64
	dtype  DataType
	uaType ua.TypeID // the built-in type its values have (for writes)
	array  bool
	event  bool // an event field: no metric of the device, its place kept
	part   int
	field  string
	node   string
}

// token packs what a data message was encoded for: the device and the
// version of its metrics.
func token(d *device, dm *devMetrics) uint64 { return uint64(d.index)<<32 | uint64(dm.version) }

func untoken(t uint64) (index int, version uint32) { return int(t >> 32), uint32(t) }

// up reports whether every writer of d has its session connected.
func (d *device) up() bool {
	if len(d.parts) == 0 {
		return false
	}
	for _, p := range d.parts {
		if !p.group.Connected() {
			return false
		}
	}
	return true
}

// deviceOf returns the device of index i (nil: none); no lock.
func (n *Node) deviceOf(i int) *device {
	ds := *n.devices.Load()
	if i < 0 || i >= len(ds) {
		return nil
	}
	return ds[i]
}

// deviceID names the device of writer w of group g.
func (n *Node) deviceID(g *bridge.WriterGroup, w string) string {
	if n.cfg.Devices == config.SparkplugDevicesEndpoint {
		return g.Endpoint()
	}
	return g.Name() + "." + w
}

// metricName names field f of writer w of group g in its device.
func (n *Node) metricName(g *bridge.WriterGroup, w, f string) string {
	if n.cfg.Devices == config.SparkplugDevicesEndpoint {
		return g.Name() + "/" + w + "/" + f
	}
	return f
}

// refreshLocked makes the devices what the running writer groups say
// (pubMu held): new ones are added, those whose writers changed are marked
// for a DBIRTH, those left without writers die (DDEATH).
func (n *Node) refreshLocked() {
	want := map[string][]part{}
	var order []string
	for _, g := range n.cfg.Source() {
		for _, w := range g.WriterInfos() {
			id := n.deviceID(g, w.Name)
			if _, ok := want[id]; !ok {
				order = append(order, id)
			}
			want[id] = append(want[id], part{group: g, writer: w.Name, index: w.Index, fields: w.Fields})
		}
	}
	byID := make(map[string]*device, len(n.devs))
	for _, d := range n.devs {
		byID[d.id] = d
	}
	added := false
	for _, id := range order {
		d := byID[id]
		if d == nil {
			base := Namespace + "/" + n.cfg.GroupID + "/"
			d = &device{
				index: len(n.devs), id: id, aliases: map[string]uint64{},
				dbirth: base + "DBIRTH/" + n.cfg.EdgeNodeID + "/" + id,
				ddata:  base + "DDATA/" + n.cfg.EdgeNodeID + "/" + id,
				ddeath: base + "DDEATH/" + n.cfg.EdgeNodeID + "/" + id,
			}
			n.devs = append(n.devs, d)
			n.byID[id] = d
			added = true
		}
		d.removed.Store(false)
		if !slices.Equal(d.parts, want[id]) {
			d.parts, d.dirty = want[id], true
		}
		if d.dirty && !d.born || (!n.live && d.retype.Load()) {
			// Metrics before the birth: the feeds encode, and the store
			// holds, what the node is not online for. The birth makes them
			// again from the values of then.
			dm, _ := n.makeMetrics(d)
			d.metrics.Store(dm)
			d.retype.Store(false)
			d.dirty = false
		}
	}
	if added {
		ds := slices.Clone(n.devs)
		n.devices.Store(&ds)
	}
	for _, d := range n.devs {
		if _, ok := want[d.id]; ok || d.removed.Load() {
			continue
		}
		d.parts, d.dirty = nil, true
		if d.born {
			n.ddeathLocked(d)
		}
		d.removed.Store(true)
	}
}

// checkDevicesLocked births and kills devices as their sessions come and
// go, and births again those whose writers or types changed (pubMu held,
// the node online).
func (n *Node) checkDevicesLocked() {
	for _, d := range n.devs {
		if d.removed.Load() || !n.live {
			continue
		}
		up := d.up()
		switch {
		case d.born && !up:
			n.ddeathLocked(d)
		case !d.born && up:
			n.dbirthLocked(d)
		case d.born && d.dirty:
			n.dbirthLocked(d)
		case d.born && d.retype.Load() && time.Since(d.lastRetype) >= rebirthEvery:
			n.dbirthLocked(d)
		}
	}
}

// makeMetrics reads the last values of d's writers and returns its metrics
// (a new version when they differ from its current ones) and the values.
func (n *Node) makeMetrics(d *device) (*devMetrics, []bridge.FieldValue) {
	old := d.metrics.Load()
	dm := &devMetrics{parts: d.parts, offsets: make([]int, len(d.parts))}
	var values []bridge.FieldValue
	for pi, p := range d.parts {
		dm.offsets[pi] = len(dm.defs)
		fvs, _ := p.group.LastValues(bridge.ValueFilter{Writer: p.writer}, 0, p.fields)
		for _, fv := range fvs {
			name := n.metricName(p.group, p.writer, fv.Field)
			alias, ok := d.aliases[name]
			if !ok {
				n.aliases++
				alias = n.aliases
				d.aliases[name] = alias
			}
			t, array := fv.BuiltInType, fv.ValueRank >= 0
			if v := &fv.Value.Value; fv.HasValue && !v.IsNull() {
				t, array = v.Type(), v.IsArray()
			}
			dm.defs = append(dm.defs, metricDef{name: name, alias: alias, dtype: DataTypeOf(t, array),
				uaType: t, array: array, event: fv.Event, part: pi, field: fv.Field, node: fv.Node})
		}
		values = append(values, fvs...)
	}
	if old != nil && slices.Equal(old.defs, dm.defs) && slices.Equal(old.parts, dm.parts) {
		return old, values
	}
	if old != nil {
		dm.version = old.version + 1
	}
	dm.index()
	return dm, values
}

// dbirthLocked publishes d's DBIRTH with every metric's name, alias,
// datatype and last value (pubMu held, the node online).
func (n *Node) dbirthLocked(d *device) {
	d.birthAt = time.Now().UnixNano()
	dm, values := n.makeMetrics(d)
	d.metrics.Store(dm)
	d.dirty = false
	d.retype.Store(false)
	d.lastRetype = time.Now()
	now := uint64(time.Now().UnixMilli())
	p := beginPayload(n.hist, now)
	d.birthTS = make(map[uint64]uint64, len(dm.defs))
	var e encoder
	for i := range dm.defs {
		md := &dm.defs[i]
		if md.event {
			continue // events are not Sparkplug metrics
		}
		var dv *ua.DataValue
		ts := now
		if fv := &values[i]; fv.HasValue {
			dv = &fv.Value
			ts = valueTime(dv, now)
		} else if fv.Status.IsBad() {
			// The server refused the monitored item: say why.
			dv = &ua.DataValue{Status: fv.Status}
		}
		d.birthTS[md.alias] = ts
		var err error
		p, err = e.appendMetric(p, &metric{name: md.name, alias: md.alias, hasAlias: true, dtype: md.dtype, ts: ts, nodeID: md.node}, dv, 0)
		if err != nil { // cannot happen: the datatype is the value's
			n.log.Error("sparkplug: DBIRTH metric", "device", d.id, "metric", md.name, "err", err)
		}
	}
	n.hist = p
	if err := n.publishLocked(d.dbirth, withSeq(p, n.seq)); err != nil {
		return
	}
	d.born = true
	d.online.Store(true)
	n.st.deviceBirths.Add(1)
}

// ddeathLocked publishes d's DDEATH (pubMu held).
func (n *Node) ddeathLocked(d *device) {
	d.born = false
	d.online.Store(false)
	if !n.live {
		return
	}
	p := beginPayload(n.hist, uint64(time.Now().UnixMilli()))
	n.hist = p
	if n.publishLocked(d.ddeath, withSeq(p, n.seq)) == nil {
		n.st.deviceDeaths.Add(1)
	}
}
