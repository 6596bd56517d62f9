package sparkplug

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/uastack/client"
)

// Namespace is the first level of every Sparkplug B topic.
const Namespace = "spBv1.0"

// Defaults of Config.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultKeepAlive      = 30 * time.Second
	DefaultWriteTimeout   = 10 * time.Second
	DefaultCheckInterval  = time.Second
	// DefaultDeviceWait is how long held data waits for its device's
	// DBIRTH after the node's (Config.DeviceWait).
	DefaultDeviceWait = 10 * time.Second
	// DefaultMaxMessageSize is where a DDATA is split: the writer groups'
	// default maxMessageSize.
	DefaultMaxMessageSize = config.DefaultGroupMessageSize
	// commandQueue bounds the DCMDs waiting for the Commander.
	commandQueue = 64
)

// Config of a Sparkplug node. Zero fields take the defaults.
type Config struct {
	Name     string // the sink's name; default "sparkplug"
	URL      string // tcp://host:1883, ssl://, ws://, wss://
	ClientID string // default "<EdgeNodeID>-<Name>"
	Username string
	Password string
	TLS      *sink.TLSOptions

	GroupID    string // required
	EdgeNodeID string // required
	// Devices is config.SparkplugDevicesWriter (default) or
	// config.SparkplugDevicesEndpoint.
	Devices string
	// PrimaryHostID, when set, makes the node wait for the host's STATE to
	// be online before its births and leave the broker when it goes
	// offline (3.0 §5.4, §5.6).
	PrimaryHostID string
	// Store holds the data while the node is not online; default a
	// MemStore of StoreBytes (default config.DefaultSparkplugStoreBytes).
	// The gateway gives a LogStore when the store-and-forward log is on
	// (StoreBytes then does not apply).
	Store      Store
	StoreBytes int
	// DeviceWait is how long, after the node's birth, held data of a
	// device whose sessions are not up yet (the gateway just started)
	// waits for its DBIRTH before it is left out (counted as stale); the
	// data after it, new data included, waits with it, so that the host
	// gets every metric's values in order. Default DefaultDeviceWait.
	DeviceWait time.Duration

	// Source returns the writer groups that run now, in configuration
	// order: the node's devices and their metrics are made from their
	// writers and fields, their births from their last values.
	Source func() []*bridge.WriterGroup
	// Commands carries out DCMD writes; nil refuses every DCMD.
	Commands Commander

	MaxMessageSize int           // DDATA larger than this is split; default DefaultMaxMessageSize
	CheckInterval  time.Duration // how often devices and sessions are checked; default 1 s
	ConnectTimeout time.Duration
	KeepAlive      time.Duration
	WriteTimeout   time.Duration // bound on writing one message to the broker
	// Backoff paces reconnections; the zero value goes from 1 s to 30 s.
	Backoff client.Backoff
	Logger  *slog.Logger // default slog.Default()
}

// FromConfig maps an MQTT sink whose Sparkplug mode is set; the password
// is passed resolved.
func FromConfig(c config.MQTTSink, password string) Config {
	sp := c.Sparkplug
	if sp == nil {
		sp = &config.Sparkplug{}
	}
	return Config{
		Name: c.Name, URL: c.URL, ClientID: c.ClientID, Username: c.Username, Password: password,
		TLS:     sink.TLSFromConfig(c.TLS),
		GroupID: sp.GroupID, EdgeNodeID: sp.EdgeNodeID, Devices: sp.Devices, PrimaryHostID: sp.PrimaryHostID,
		StoreBytes: sp.StoreBytes,
	}
}

func (c *Config) setDefaults() {
	if c.Name == "" {
		c.Name = "sparkplug"
	}
	if c.ClientID == "" {
		c.ClientID = c.EdgeNodeID + "-" + c.Name
	}
	if c.Devices == "" {
		c.Devices = config.SparkplugDevicesWriter
	}
	if c.StoreBytes <= 0 {
		c.StoreBytes = config.DefaultSparkplugStoreBytes
	}
	if c.Store == nil {
		c.Store = NewMemStore(c.StoreBytes)
	}
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{{&c.DeviceWait, DefaultDeviceWait}, {&c.CheckInterval, DefaultCheckInterval}, {&c.ConnectTimeout, DefaultConnectTimeout}, {&c.KeepAlive, DefaultKeepAlive}, {&c.WriteTimeout, DefaultWriteTimeout}} {
		if *d.p <= 0 {
			*d.p = d.v
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Source == nil {
		c.Source = func() []*bridge.WriterGroup { return nil }
	}
}

// Node is a Sparkplug B Edge Node. It is the sink.Sink of its Output (the
// data of the writer groups arrive through Feed's ValueSinks, which encode
// and enqueue them) and runs the Sparkplug session itself: see the package
// comment.
type Node struct {
	cfg    Config
	log    *slog.Logger
	topics nodeTopics

	ctx    context.Context
	cancel context.CancelFunc
	start  sync.Once
	done   chan struct{} // closed when the session loop ended (or never started)
	wake   chan struct{} // cap 1: something for the session loop to look at
	cmds   chan command  // DCMDs for the command worker
	closed atomic.Bool

	// pubMu is the session lock: held for every publish, the births and
	// deaths and the device table's changes, so that seq follows publish
	// order. Lock order: pubMu → mu.
	pubMu   sync.Mutex
	conn    *connection // nil while not connected
	live    bool        // NBIRTH sent in this MQTT session (and the host online)
	seq     uint8       // of the next message
	bdSeq   uint64      // of the current (or last) MQTT CONNECT
	dialed  bool        // a CONNECT was sent: the next takes the next bdSeq
	hist    []byte      // scratch of historical payloads
	named   []byte      // scratch of records for a durable store
	durable bool        // the store's records outlive the process: they are named
	// backlog: the store may hold data this session has not sent; new
	// data then joins it (publishData).
	backlog bool
	liveAt  time.Time   // of the last NBIRTH
	tmr     *time.Timer // bounds a publish
	aliases uint64      // the last alias given out
	devs    []*device   // every device the node ever had, by index (m.Token)
	byID    map[string]*device

	// devices is devs as readers without pubMu see it.
	devices atomic.Pointer[[]*device]

	mu        sync.Mutex
	host      hostState
	lastErr   string
	lastErrAt time.Time

	rebirth atomic.Bool // an NCMD asked for a rebirth
	refresh atomic.Bool // the writer groups changed
	st      counters
}

// hostState is what the node knows of its primary host (n.mu).
type hostState struct {
	known     bool  // a STATE was received
	online    bool  // the last valid STATE said online
	timestamp int64 // of the last valid STATE (ms)
	onlineTS  int64 // of the last online STATE (ms)
}

type nodeTopics struct {
	nbirth, ndeath, ncmd, dcmd, state string
}

type counters struct {
	connects, connectFailures, nodeBirths, rebirths, deviceBirths, deviceDeaths atomic.Uint64
	dataMessages, metrics, historical, typeMismatches, unmapped, stale          atomic.Uint64
	staleMetrics                                                                atomic.Uint64
	commands, commandsDenied, commandsFailed, commandsBusy, stateMessages       atomic.Uint64
	bdSeq, seq                                                                  atomic.Uint64
	connected, online                                                           atomic.Bool
}

// New validates c; nothing connects before Connect.
func New(c Config) (*Node, error) {
	c.setDefaults()
	switch {
	case c.URL == "":
		return nil, fmt.Errorf("sparkplug %s: url is empty", c.Name)
	case c.GroupID == "" || c.EdgeNodeID == "":
		return nil, fmt.Errorf("sparkplug %s: group id and edge node id are required", c.Name)
	case c.Devices != config.SparkplugDevicesWriter && c.Devices != config.SparkplugDevicesEndpoint:
		return nil, fmt.Errorf("sparkplug %s: devices %q: want %s or %s", c.Name, c.Devices, config.SparkplugDevicesWriter, config.SparkplugDevicesEndpoint)
	}
	if c.TLS != nil {
		if _, err := c.TLS.Config(); err != nil {
			return nil, fmt.Errorf("sparkplug %s: %w", c.Name, err)
		}
	}
	base := Namespace + "/" + c.GroupID + "/"
	n := &Node{
		cfg: c,
		log: c.Logger.With("sink", c.Name, "sparkplugGroup", c.GroupID, "edgeNode", c.EdgeNodeID),
		topics: nodeTopics{
			nbirth: base + "NBIRTH/" + c.EdgeNodeID,
			ndeath: base + "NDEATH/" + c.EdgeNodeID,
			ncmd:   base + "NCMD/" + c.EdgeNodeID,
			dcmd:   base + "DCMD/" + c.EdgeNodeID + "/",
		},
		done: make(chan struct{}),
		wake: make(chan struct{}, 1),
		cmds: make(chan command, commandQueue),
		tmr:  time.NewTimer(time.Hour),
		byID: map[string]*device{},
		// What an earlier process left in a durable store is sent after
		// the first birth.
		backlog: true,
		durable: c.Store.Durable(),
	}
	n.tmr.Stop()
	if c.PrimaryHostID != "" {
		n.topics.state = Namespace + "/STATE/" + c.PrimaryHostID
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	empty := []*device{}
	n.devices.Store(&empty)
	return n, nil
}

// Name implements sink.Sink.
func (n *Node) Name() string { return n.cfg.Name }

// Guarantee implements sink.Sink: Sparkplug B sends its data with QoS 0.
func (n *Node) Guarantee() config.Guarantee { return config.AtMostOnce }

// Connected implements sink.ConnState: connected to the broker.
func (n *Node) Connected() bool { return n.st.connected.Load() }

// Connect implements sink.Sink: it starts the node's session (connecting,
// births, reconnecting on its own) the first time and returns at once; data
// that cannot be sent meanwhile goes to the store.
func (n *Node) Connect(context.Context) error {
	if n.closed.Load() {
		return fmt.Errorf("sparkplug %s: closed", n.cfg.Name)
	}
	n.start.Do(func() {
		go n.run()
		go n.commandWorker()
	})
	return nil
}

// Refresh tells the node that the writer groups changed (a reload): it
// looks at its devices at once rather than at its next check.
func (n *Node) Refresh() {
	n.refresh.Store(true)
	n.poke()
}

func (n *Node) poke() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Publish implements sink.Sink: m is a data message a Feed encoded. Online,
// it goes out with the session's next seq; otherwise into the store. It is
// confirmed at once either way (QoS 0: at-most-once).
func (n *Node) Publish(m *sink.Message, ack sink.Acker) error {
	n.pubMu.Lock()
	n.publishData(m)
	n.pubMu.Unlock()
	ack.Confirmed(m, nil)
	return nil
}

// Close implements sink.Sink: it ends the session, publishing NDEATH before
// a clean disconnect (3.0 §5.5), waits for the session loop until ctx ends,
// and drops what the store still holds (logged).
func (n *Node) Close(ctx context.Context) error {
	if !n.closed.CompareAndSwap(false, true) {
		<-n.done
		return nil
	}
	started := false
	n.start.Do(func() { close(n.done) }) // never started: nothing runs
	select {
	case <-n.done:
	default:
		started = true
	}
	n.cancel()
	if started {
		select {
		case <-n.done:
		case <-ctx.Done():
		}
	}
	n.pubMu.Lock()
	defer n.pubMu.Unlock()
	var err error
	if c := n.conn; c != nil {
		// Before the DISCONNECT, which keeps the broker from publishing the
		// will (3.0 §5.5); also when no NBIRTH went out on this connection
		// (waiting for the host): a host ignores an NDEATH of a bdSeq it
		// has not seen born.
		if perr := n.publishWait(ctx, c, n.topics.ndeath, n.ndeath(), 1); perr != nil {
			err = fmt.Errorf("sparkplug %s: NDEATH at close: %w", n.cfg.Name, perr)
		}
		c.client.Disconnect(250)
		c.lost.Mark(fmt.Errorf("sparkplug %s: closed: %w", n.cfg.Name, sink.ErrNotConnected))
		n.setConn(nil)
	}
	if st := n.cfg.Store.Stats(); st.Messages > 0 && n.durable {
		n.log.Info("sparkplug node closed with data held for the host: kept, for the next start's births", "messages", st.Messages, "bytes", st.Bytes, "stream", st.Stream)
	} else if st.Messages > 0 {
		n.log.Warn("sparkplug node closed with data held for the host, not sent", "messages", st.Messages, "bytes", st.Bytes)
		n.cfg.Store.Drain(func(Record) bool { return true })
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && started {
		select {
		case <-n.done:
		default:
			err = errors.Join(err, fmt.Errorf("sparkplug %s: the session did not end in time", n.cfg.Name))
		}
	}
	return err
}

// setConn sets the connection (pubMu held) and the connected state.
func (n *Node) setConn(c *connection) {
	n.conn = c
	n.st.connected.Store(c != nil)
	if c == nil {
		n.live = false
		n.st.online.Store(false)
	}
}

func (n *Node) setErr(err error) {
	n.mu.Lock()
	n.lastErr, n.lastErrAt = err.Error(), time.Now()
	n.mu.Unlock()
}

// Stats are a node's state and counters (with the JSON names of the REST
// API's status).
type Stats struct {
	Name          string `json:"name"`
	GroupID       string `json:"groupId"`
	EdgeNodeID    string `json:"edgeNodeId"`
	PrimaryHostID string `json:"primaryHostId,omitempty"`
	// State is offline (no broker connection), waiting (connected, the
	// primary host not online) or online (NBIRTH sent).
	State     string `json:"state"`
	Connected bool   `json:"connected"`
	Online    bool   `json:"online"`
	// HostOnline is what the primary host's last STATE said (false without
	// one); HostTimestamp its timestamp.
	HostOnline    bool      `json:"hostOnline"`
	HostTimestamp time.Time `json:"hostTimestamp"`
	// BdSeq is the birth/death sequence number of the current connection;
	// Seq the seq of the last message sent.
	BdSeq         uint64 `json:"bdSeq"`
	Seq           uint64 `json:"seq"`
	Devices       int    `json:"devices"`       // devices of the node
	DevicesOnline int    `json:"devicesOnline"` // with a DBIRTH in this session
	Metrics       int    `json:"metrics"`       // metrics of the devices
	// Connects counts MQTT connections made, ConnectFailures the failed
	// attempts.
	Connects        uint64 `json:"connects"`
	ConnectFailures uint64 `json:"connectFailures"`
	NodeBirths      uint64 `json:"nodeBirths"`     // NBIRTHs sent
	Rebirths        uint64 `json:"rebirths"`       // rebirth requests (NCMD) honoured
	DeviceBirths    uint64 `json:"deviceBirths"`   // DBIRTHs sent
	DeviceDeaths    uint64 `json:"deviceDeaths"`   // DDEATHs sent
	DataMessages    uint64 `json:"dataMessages"`   // DDATA sent
	MetricsEncoded  uint64 `json:"metricsEncoded"` // metrics the feeds encoded
	// Historical counts data messages sent after a later birth, their
	// metrics older than the birth's marked is_historical.
	Historical uint64 `json:"historical"`
	// TypeMismatches counts values whose type was not their metric's
	// datatype (left out; the device is born again with the new type).
	TypeMismatches uint64 `json:"typeMismatches"`
	// Unmapped counts values of writers the node had no device for yet (a
	// reload; the next DBIRTH carries them); Stale data messages left out
	// because their device died or its metrics changed before they went
	// (or, held, it did not come back within DeviceWait after the birth);
	// StaleMetrics the metrics left out of held data because their device
	// no longer has a metric of that name and datatype (a restart with
	// another configuration).
	Unmapped     uint64 `json:"unmapped"`
	Stale        uint64 `json:"stale"`
	StaleMetrics uint64 `json:"staleMetrics"`
	// Store is what is held for the next birth.
	Store StoreStats `json:"store"`
	// Commands counts DCMD writes asked for; CommandsDenied those refused
	// (no command handler, not allowed, unknown metric, wrong type),
	// CommandsFailed those that failed, CommandsBusy DCMDs dropped because
	// the command queue was full. StateMessages counts STATE messages
	// received.
	Commands       uint64    `json:"commands"`
	CommandsDenied uint64    `json:"commandsDenied"`
	CommandsFailed uint64    `json:"commandsFailed"`
	CommandsBusy   uint64    `json:"commandsBusy"`
	StateMessages  uint64    `json:"stateMessages"`
	LastError      string    `json:"lastError,omitempty"`
	LastErrorAt    time.Time `json:"lastErrorAt"`
}

// Node states of Stats.State.
const (
	StateOffline = "offline"
	StateWaiting = "waiting"
	StateOnline  = "online"
)

// Stats returns a snapshot; it never waits for the session.
func (n *Node) Stats() Stats {
	s := Stats{
		Name: n.cfg.Name, GroupID: n.cfg.GroupID, EdgeNodeID: n.cfg.EdgeNodeID, PrimaryHostID: n.cfg.PrimaryHostID,
		Connected: n.st.connected.Load(), Online: n.st.online.Load(),
		BdSeq: n.st.bdSeq.Load(), Seq: n.st.seq.Load(),
		Connects: n.st.connects.Load(), ConnectFailures: n.st.connectFailures.Load(),
		NodeBirths: n.st.nodeBirths.Load(), Rebirths: n.st.rebirths.Load(),
		DeviceBirths: n.st.deviceBirths.Load(), DeviceDeaths: n.st.deviceDeaths.Load(),
		DataMessages: n.st.dataMessages.Load(), MetricsEncoded: n.st.metrics.Load(), Historical: n.st.historical.Load(),
		TypeMismatches: n.st.typeMismatches.Load(), Unmapped: n.st.unmapped.Load(), Stale: n.st.stale.Load(),
		StaleMetrics: n.st.staleMetrics.Load(),
		Store:        n.cfg.Store.Stats(),
		Commands:     n.st.commands.Load(), CommandsDenied: n.st.commandsDenied.Load(),
		CommandsFailed: n.st.commandsFailed.Load(), CommandsBusy: n.st.commandsBusy.Load(),
		StateMessages: n.st.stateMessages.Load(),
	}
	switch {
	case s.Online:
		s.State = StateOnline
	case s.Connected:
		s.State = StateWaiting
	default:
		s.State = StateOffline
	}
	for _, d := range *n.devices.Load() {
		if d.removed.Load() {
			continue
		}
		s.Devices++
		if d.online.Load() {
			s.DevicesOnline++
		}
		if dm := d.metrics.Load(); dm != nil {
			for i := range dm.defs {
				if !dm.defs[i].event {
					s.Metrics++
				}
			}
		}
	}
	n.mu.Lock()
	s.HostOnline = n.host.online
	if n.host.known {
		s.HostTimestamp = time.UnixMilli(n.host.timestamp)
	}
	s.LastError, s.LastErrorAt = n.lastErr, n.lastErrAt
	n.mu.Unlock()
	return s
}
