package config

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// URLs that stand for the embedded parts. The pipeline replaces them with the
// embedded server's real address once it listens (its port may be chosen by
// the OS).
const (
	EmbeddedSimURL  = "embedded:sim"
	EmbeddedMQTTURL = "embedded:mqtt"
	EmbeddedNATSURL = "embedded:nats"
)

// Defaults.
const (
	DefaultPublisherID        = "uagate"
	DefaultStateDir           = "./state"
	DefaultShutdownTimeout    = 10 * time.Second
	DefaultSimListen          = "127.0.0.1:0" // any free port: the URL is known at runtime
	DefaultMQTTListen         = "127.0.0.1:1883"
	DefaultNATSListen         = "127.0.0.1:4222"
	DefaultHTTPListen         = "127.0.0.1:8080"
	DefaultRequestTimeout     = 30 * time.Second
	DefaultPublishingInterval = time.Second
	DefaultKeyFrameCount      = 10
	DefaultKeepAliveFactor    = 10 // KeepAlive = DefaultKeepAliveFactor × PublishingInterval
	DefaultGroupMessageSize   = 256 << 10
	DefaultMaxUnacked         = 64
	// DefaultMaxNotificationsPerPublish keeps one decoded message of a
	// subscription near 80 KB (80 bytes per value) and its JSON within one
	// NetworkMessage of the default maxMessageSize. The client decodes every
	// response that arrives while the previous one is being handled, so what
	// a session holds decoded at a burst is its outstanding Publish requests
	// times this: a burst that a blocked sink holds back then waits at the
	// server, not in the gateway's memory. At 1000 values a message and the
	// publish pipeline's 2–10 requests, a session still takes 10,000 values
	// per round trip.
	DefaultMaxNotificationsPerPublish = 1000
	DefaultSamplingDivisor            = 10 // SamplingInterval = PublishingInterval / DefaultSamplingDivisor
	DefaultBrowseDepth                = 5
	DefaultBrowseMaxNodes             = 100000
	DefaultSinkQueueSize              = 1024
	// DefaultSinkQueueBytes bounds the bytes waiting in a sink's queue: 1024
	// key frames of 128–256 KiB held 200 MB at a million items, most of the
	// gateway's memory (BENCHMARKS.md). 8 MiB is some 80 ms of what one NATS
	// connection takes at a million notifications a second, enough to keep
	// it busy; what does not fit waits at the OPC UA server (block) instead
	// of in the gateway's memory. 32 MiB cost some 50 MB more at a million
	// items with no gain in throughput.
	DefaultSinkQueueBytes = 8 << 20
	DefaultMQTTQoS        = 1
	// MQTT protocol versions (sinks.mqtt[].protocolVersion).
	MQTTv311              = 4
	MQTTv5                = 5
	DefaultWebSocketPath  = "/ws"
	DefaultWebSocketQueue = 256
	DefaultSimWriterGroup = "demo"
	DefaultSimWriter      = "demo"
	DefaultSimEndpoint    = "sim"

	DefaultMQTTDataTopic       = "opcua/json/data/{PublisherId}/{WriterGroup}/{DataSetWriter}"
	DefaultMQTTMetaDataTopic   = "opcua/json/metadata/{PublisherId}/{WriterGroup}/{DataSetWriter}"
	DefaultMQTTStatusTopic     = "opcua/json/status/{PublisherId}"
	DefaultPerFieldTopic       = "{PublisherId}/{WriterGroup}/{DataSetWriter}/{Field}"
	DefaultNATSDataSubject     = "opcua.json.data.{PublisherId}.{WriterGroup}.{DataSetWriter}"
	DefaultNATSMetaSubject     = "opcua.json.metadata.{PublisherId}.{WriterGroup}.{DataSetWriter}"
	DefaultNATSStatusSubject   = "opcua.json.status.{PublisherId}"
	DefaultScaleOutBucket      = "uagate-leases"
	DefaultStoreMaxBytes       = 1 << 30
	DefaultStoreCommitInterval = 20 * time.Millisecond
	MinStoreMaxBytes           = 1 << 20
	MinGroupStoreBytes         = 64 << 10
	DefaultLeaseTTL            = 10 * time.Second
	MinLeaseTTL                = 3 * time.Second
	DefaultEventSelectClauses  = "EventId,EventType,SourceNode,SourceName,Time,ReceiveTime,Message,Severity"
	DefaultEventQueueSize      = 1000 // the queue of an event field's monitored item
)

// Values of the string settings.
const (
	IdentityAnonymous = "anonymous"
	IdentityUsername  = "username"
	IdentityX509      = "x509"

	SecurityBest = "best" // securityPolicy and securityMode: the best the server offers

	EncodingCompact = "compact"
	EncodingVerbose = "verbose"

	DeadbandNone     = "none"
	DeadbandAbsolute = "absolute"
	DeadbandPercent  = "percent"

	TriggerStatus               = "status"
	TriggerStatusValue          = "statusValue"
	TriggerStatusValueTimestamp = "statusValueTimestamp"

	PayloadValue     = "value"
	PayloadDataValue = "dataValue"

	SparkplugDevicesWriter   = "writer"
	SparkplugDevicesEndpoint = "endpoint"
)

const (
	// DefaultSparkplugStoreBytes bounds what a Sparkplug node holds while it
	// is not online.
	DefaultSparkplugStoreBytes = 16 << 20
	// MaxSparkplugStoreBytes is the largest sparkplug.storeBytes.
	MaxSparkplugStoreBytes = 1 << 30
)

// The simulation server's Demo variables the default configuration publishes.
// They are the node ids of uastack/server (NodeCounter …), written out here
// because bridge does not import the server; a test checks they agree.
var simDemoNodes = []struct{ Name, Node string }{
	{"Counter", "ns=1;s=Demo.Counter"},
	{"Sine", "ns=1;s=Demo.Sine"},
	{"Random", "ns=1;s=Demo.Random"},
	{"Step", "ns=1;s=Demo.Step"},
}

// Default returns the configuration of a gateway started without one: the
// embedded simulation server as the upstream with a writer group over its
// Demo variables, the embedded MQTT broker and NATS server with a sink each,
// and the WebSocket stream on the HTTP listener. Defaults are applied.
func Default() *Config {
	c := &Config{}
	c.ApplyDefaults()
	return c
}

// ApplyDefaults fills every setting left unset with its default (see
// the README's Configuration section), including the embedded parts: with no endpoint configured,
// endpoint "sim" (URL EmbeddedSimURL) and a writer group "demo" over the
// simulation server's Demo variables; with no sink configured, an MQTT and a
// NATS sink on the embedded broker and server, and the WebSocket stream.
// Embedded.*.Enabled are resolved to true or false. Calling it twice changes
// nothing.
func (c *Config) ApplyDefaults() {
	g := &c.Gateway
	setString(&g.PublisherID, DefaultPublisherID)
	setString(&g.StateDir, DefaultStateDir)
	setString(&g.SecretsDir, filepath.Join(g.StateDir, "secrets"))
	setDuration(&g.ShutdownTimeout, DefaultShutdownTimeout)
	setString(&c.Embedded.Sim.Listen, DefaultSimListen)
	setString(&c.Embedded.MQTT.Listen, DefaultMQTTListen)
	setString(&c.Embedded.NATS.Listen, DefaultNATSListen)
	if !c.HTTP.Disabled {
		setString(&c.HTTP.Listen, DefaultHTTPListen)
	}

	if len(c.Endpoints) == 0 {
		c.Endpoints = []Endpoint{{Name: DefaultSimEndpoint, URL: EmbeddedSimURL}}
	}
	if len(c.WriterGroups) == 0 && len(c.Endpoints) == 1 && c.Endpoints[0].URL == EmbeddedSimURL {
		w := DataSetWriter{Name: DefaultSimWriter}
		for _, n := range simDemoNodes {
			w.Fields = append(w.Fields, Field{Name: n.Name, Node: n.Node})
		}
		c.WriterGroups = []WriterGroup{{Name: DefaultSimWriterGroup, Endpoint: c.Endpoints[0].Name, Writers: []DataSetWriter{w}}}
	}
	for i := range c.Endpoints {
		c.Endpoints[i].applyDefaults(g.StateDir)
	}
	groups := make([]*WriterGroup, len(c.WriterGroups))
	for i := range c.WriterGroups {
		groups[i] = &c.WriterGroups[i]
	}
	assignWriterIDs(groups) // across the configuration: one PublisherId
	for _, wg := range groups {
		if wg.Endpoint == "" && len(c.Endpoints) == 1 {
			wg.Endpoint = c.Endpoints[0].Name
		}
		wg.ApplyDefaults()
	}

	s := &c.Sinks
	if len(s.MQTT) == 0 && len(s.NATS) == 0 && len(s.File) == 0 && s.WebSocket == nil {
		s.MQTT = []MQTTSink{{URL: EmbeddedMQTTURL}}
		s.NATS = []NATSSink{{URL: EmbeddedNATSURL}}
		if !c.HTTP.Disabled {
			s.WebSocket = &WebSocketSink{}
		}
	}
	for i := range s.MQTT {
		s.MQTT[i].applyDefaults(i, g.PublisherID)
	}
	for i := range s.NATS {
		s.NATS[i].applyDefaults(i)
	}
	for i := range s.File {
		f := &s.File[i]
		setString(&f.Name, numbered("file", i))
		f.Delivery.applyDefaults()
	}
	if ws := s.WebSocket; ws != nil {
		setString(&ws.Path, DefaultWebSocketPath)
		setInt(&ws.ClientQueue, DefaultWebSocketQueue)
	}

	if sf := &c.StoreAndForward; c.StoreOn() {
		if sf.MaxBytes == 0 {
			sf.MaxBytes = DefaultStoreMaxBytes
		}
		if sf.Policy == "" {
			sf.Policy = Block
		}
		setBool(&sf.Fsync, true)
		setDuration(&sf.CommitInterval, DefaultStoreCommitInterval)
	}
	if so := &c.ScaleOut; so.Enabled {
		setString(&so.Bucket, DefaultScaleOutBucket)
		setDuration(&so.LeaseTTL, DefaultLeaseTTL)
		if so.ReplicaID == "" {
			so.ReplicaID, _ = os.Hostname()
		}
	}

	c.Commands.applyDefaults()

	// The embedded parts run when something uses them, unless set explicitly.
	uses := func(url string) bool {
		for _, e := range c.Endpoints {
			if e.URL == url {
				return true
			}
		}
		for _, m := range s.MQTT {
			if m.URL == url {
				return true
			}
		}
		for _, n := range s.NATS {
			if n.URL == url {
				return true
			}
		}
		return false
	}
	setBool(&c.Embedded.Sim.Enabled, uses(EmbeddedSimURL))
	setBool(&c.Embedded.MQTT.Enabled, uses(EmbeddedMQTTURL))
	setBool(&c.Embedded.NATS.Enabled, uses(EmbeddedNATSURL))
}

// On reports whether the embedded part runs (after ApplyDefaults).
func (p EmbeddedPart) On() bool { return p.Enabled != nil && *p.Enabled }

func (e *Endpoint) applyDefaults(stateDir string) {
	if e.URL == EmbeddedSimURL {
		// The embedded server runs in this process on loopback: no security
		// to negotiate, and its certificate is ours to trust.
		setString(&e.SecurityPolicy, "None")
		setString(&e.SecurityMode, "None")
		e.AutoAccept = true
	}
	setString(&e.SecurityPolicy, SecurityBest)
	setString(&e.SecurityMode, SecurityBest)
	id := &e.Identity
	switch {
	case id.Type != "":
	case id.CertFile != "" || id.KeyFile != "":
		id.Type = IdentityX509
	case id.Username != "":
		id.Type = IdentityUsername
	default:
		id.Type = IdentityAnonymous
	}
	setString(&e.PKI, filepath.Join(stateDir, "pki"))
	setDuration(&e.RequestTimeout, DefaultRequestTimeout)
	setInt(&e.Sessions, 1)
}

// ApplyDefaults fills the unset settings of one writer group, its writers
// and their fields (Config.ApplyDefaults does it for every group, and gives
// a group without an endpoint the only one configured). Browse selections
// get their defaults; the fields they select get theirs from
// ExpandWriterGroup. Calling it twice changes nothing.
func (wg *WriterGroup) ApplyDefaults() {
	setDuration(&wg.PublishingInterval, DefaultPublishingInterval)
	pi := wg.PublishingInterval.D()
	setInt(&wg.KeyFrameCount, DefaultKeyFrameCount)
	setDuration(&wg.KeepAlive, DefaultKeepAliveFactor*pi)
	setInt(&wg.MaxMessageSize, DefaultGroupMessageSize)
	setString(&wg.MessageShape, ShapeSingle)
	setString(&wg.FieldEncoding, FieldVariant)
	setString(&wg.Encoding, EncodingCompact)
	setString(&wg.Format, FormatPart14)
	setInt(&wg.MaxUnacked, DefaultMaxUnacked)
	setInt(&wg.MaxNotificationsPerPublish, DefaultMaxNotificationsPerPublish)

	nd := &wg.Nodes
	if nd.SamplingInterval == nil {
		si := Duration(pi / DefaultSamplingDivisor)
		nd.SamplingInterval = &si
	}
	if nd.QueueSize == 0 {
		nd.QueueSize = queueFor(pi, nd.SamplingInterval.D())
	}
	setBool(&nd.DiscardOldest, true)
	setString(&nd.Deadband.Type, DeadbandNone)
	setString(&nd.Trigger, TriggerStatusValue)

	assignWriterIDs([]*WriterGroup{wg})
	for i := range wg.Writers {
		w := &wg.Writers[i]
		setString(&w.Name, "writer"+strconv.Itoa(int(w.ID)))
		for j := range w.Fields {
			w.Fields[j].applyDefaults(nd, pi)
		}
		for j := range w.Browse {
			b := &w.Browse[j]
			setInt(&b.Depth, DefaultBrowseDepth)
			setString(&b.Name, "*")
			setInt(&b.MaxNodes, DefaultBrowseMaxNodes)
		}
	}
}

// assignWriterIDs gives the writers of groups without a DataSetWriterId
// one of their own. Part 14 §6.2.4.1 wants a DataSetWriterId unique across
// all the writers of a PublisherId, so the defaults are assigned across the
// whole configuration (Config.ApplyDefaults passes every group; a group
// defaulted alone, only its own writers), and they must not move when
// another writer is added or removed, nor between runs: a writer's id
// follows from its group's and its own name (writerHome, an FNV-1a hash onto
// 1 … 65535), taken unless a writer with an id given by hand has it or
// another default took it first; then the next free one. Writers are served
// in the order of their home ids (then group and writer name), so that only
// writers whose names hash to the same id can move one another. A writer
// without a name (it gets "writer<id>") hashes its position in the group.
func assignWriterIDs(groups []*WriterGroup) {
	used := map[uint16]bool{}
	type pending struct {
		w     *DataSetWriter
		home  uint16
		group string
		name  string
	}
	var todo []pending
	for _, wg := range groups {
		for i := range wg.Writers {
			w := &wg.Writers[i]
			if w.ID != 0 {
				used[w.ID] = true
				continue
			}
			name := w.Name
			if name == "" {
				name = "#" + strconv.Itoa(i)
			}
			todo = append(todo, pending{w: w, home: writerHome(wg.Name, name), group: wg.Name, name: name})
		}
	}
	if len(todo) == 0 {
		return
	}
	slices.SortFunc(todo, func(a, b pending) int {
		return cmp.Or(cmp.Compare(a.home, b.home), strings.Compare(a.group, b.group), strings.Compare(a.name, b.name))
	})
	for _, p := range todo {
		id := p.home
		for n := 0; used[id] && n < 0xFFFF; n++ {
			id = id%0xFFFF + 1 // 1 … 65535, wrapping
		}
		p.w.ID = id // with all 65535 taken, a duplicate validation reports
		used[id] = true
	}
}

// writerHome is the DataSetWriterId a writer named name in the group named
// group gets by default, unless taken.
func writerHome(group, name string) uint16 {
	h := fnv.New32a()
	h.Write([]byte(group))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return uint16(h.Sum32()%0xFFFF) + 1
}

// queueFor is a monitored-item queue that holds two publishing intervals of
// samples: nothing is lost between two publishes when the value changes at
// every sample, even when a publish comes late or the server samples one
// interval more than the division says (one interval exactly overflowed
// under ordinary timing jitter). Bounded by MaxQueueSize.
func queueFor(pi, si time.Duration) uint32 {
	if si <= 0 {
		si = pi / DefaultSamplingDivisor
	}
	if si <= 0 {
		return 2
	}
	n := 2 * ((pi + si - 1) / si)
	return uint32(min(max(n, 2), MaxQueueSize))
}

func (f *Field) applyDefaults(nd *NodeDefaults, pi time.Duration) {
	if f.Name == "" {
		f.Name = defaultFieldName(f.Node)
	}
	if f.Events != nil {
		if f.Events.Select == nil {
			f.Events.Select = strings.Split(DefaultEventSelectClauses, ",")
		}
		if f.QueueSize == 0 {
			f.QueueSize = DefaultEventQueueSize
		}
		return // the data change settings do not apply to events
	}
	own := f.SamplingInterval != nil
	if !own {
		si := *nd.SamplingInterval
		f.SamplingInterval = &si
	}
	if f.QueueSize == 0 {
		f.QueueSize = nd.QueueSize
		if own && *f.SamplingInterval != *nd.SamplingInterval {
			f.QueueSize = queueFor(pi, f.SamplingInterval.D()) // sized for its own sampling
		}
	}
	if f.DiscardOldest == nil {
		b := *nd.DiscardOldest
		f.DiscardOldest = &b
	}
	if f.Deadband.Type == "" {
		f.Deadband = nd.Deadband
	}
	setString(&f.Trigger, nd.Trigger)
	setDuration(&f.Heartbeat, nd.Heartbeat.D())
}

// defaultFieldName is the name of a field given only by its node: the
// identifier of a string node id ("Demo.Counter" for ns=1;s=Demo.Counter),
// else the node id as written. The pipeline may replace it by the node's
// DisplayName.
func defaultFieldName(node string) string {
	if x, err := ua.ParseExpandedNodeID(node); err == nil && x.Type == ua.IDString && x.Text != "" {
		return x.Text
	}
	return node
}

func (m *MQTTSink) applyDefaults(i int, publisher string) {
	setString(&m.Name, numbered("mqtt", i))
	setString(&m.ClientID, publisher+"-"+m.Name)
	if m.QoS == nil {
		q := DefaultMQTTQoS
		m.QoS = &q
	}
	setBool(&m.CleanSession, true)
	if m.ProtocolVersion == 0 {
		m.ProtocolVersion = MQTTv311
	}
	m.Delivery.applyDefaults()
	setString(&m.DataTopic, DefaultMQTTDataTopic)
	setString(&m.MetaDataTopic, DefaultMQTTMetaDataTopic)
	setString(&m.StatusTopic, DefaultMQTTStatusTopic)
	if p := m.PerField; p != nil {
		setString(&p.Topic, DefaultPerFieldTopic)
		setString(&p.Payload, PayloadValue)
		setBool(&p.Retain, true)
	}
	if sp := m.Sparkplug; sp != nil {
		setString(&sp.EdgeNodeID, publisher)
		setString(&sp.Devices, SparkplugDevicesWriter)
		setInt(&sp.StoreBytes, DefaultSparkplugStoreBytes)
	}
}

func (n *NATSSink) applyDefaults(i int) {
	setString(&n.Name, numbered("nats", i))
	n.Delivery.applyDefaults()
	setString(&n.DataSubject, DefaultNATSDataSubject)
	setString(&n.MetaDataSubject, DefaultNATSMetaSubject)
	setString(&n.StatusSubject, DefaultNATSStatusSubject)
}

func (d *Delivery) applyDefaults() {
	if d.Guarantee == "" {
		d.Guarantee = AtMostOnce
	}
	setInt(&d.QueueSize, DefaultSinkQueueSize)
	setInt(&d.QueueBytes, DefaultSinkQueueBytes)
	if d.Policy == "" {
		d.Policy = Block
	}
}

// numbered is base for the first of a kind, base2, base3 … for the others.
func numbered(base string, i int) string {
	if i == 0 {
		return base
	}
	return base + strconv.Itoa(i+1)
}

func setString(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func setInt(p *int, v int) {
	if *p == 0 {
		*p = v
	}
}

func setDuration(p *Duration, v time.Duration) {
	if *p == 0 {
		*p = Duration(v)
	}
}

func setBool(p **bool, v bool) {
	if *p == nil {
		*p = &v
	}
}

// Undefaulted names the first setting of wg, its writers or their fields
// that ApplyDefaults fills in and that is unset ("" when none is): a
// consumer that relies on the defaults (bridge.NewWriterGroup) refuses a
// group that did not get them.
func (wg *WriterGroup) Undefaulted() string {
	switch {
	case wg.Name == "":
		return "name"
	case wg.PublishingInterval <= 0:
		return "publishingInterval"
	case wg.KeyFrameCount == 0:
		return "keyFrameCount"
	case wg.KeepAlive == 0:
		return "keepAlive"
	case wg.MaxMessageSize <= 0:
		return "maxMessageSize"
	case wg.MaxUnacked <= 0:
		return "maxUnacked"
	case wg.MaxNotificationsPerPublish == 0:
		return "maxNotificationsPerPublish"
	case wg.MessageShape == "":
		return "messageShape"
	case wg.Encoding == "":
		return "encoding"
	case wg.FieldEncoding == "":
		return "fieldEncoding"
	case wg.Format == "":
		return "format"
	}
	for i := range wg.Writers {
		if unset := wg.Writers[i].Undefaulted(); unset != "" {
			return unset
		}
	}
	return ""
}

// Undefaulted is WriterGroup.Undefaulted for one writer and its fields.
func (w *DataSetWriter) Undefaulted() string {
	if w.ID == 0 || w.Name == "" {
		return fmt.Sprintf("writer %q (id %d): id or name", w.Name, w.ID)
	}
	for k := range w.Fields {
		fc := &w.Fields[k]
		unset := ""
		switch ev := fc.Events; {
		case fc.Name == "":
			unset = "name"
		case fc.QueueSize == 0:
			unset = "queueSize"
		case ev != nil:
			if len(ev.Select) == 0 {
				unset = "events.select"
			}
		case fc.SamplingInterval == nil:
			unset = "samplingInterval"
		case fc.DiscardOldest == nil:
			unset = "discardOldest"
		case fc.Trigger == "":
			unset = "trigger"
		case fc.Deadband.Type == "":
			unset = "deadband.type"
		}
		if unset != "" {
			return fmt.Sprintf("writer %q: field %d: %s", w.Name, k+1, unset)
		}
	}
	return ""
}
