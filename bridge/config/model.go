package config

import "time"

// The configuration model: what a gateway publishes, from where, to where.
// This file holds the types only; loading (YAML, publishednodes.json,
// environment, flags), defaults, validation and diffing live beside it. The
// YAML keys are the lowerCamelCase names in the tags; the README's
// configuration reference lists them with their defaults.

// Config is a whole gateway configuration.
type Config struct {
	Gateway      Gateway       `yaml:"gateway"`
	Embedded     Embedded      `yaml:"embedded"`
	HTTP         HTTP          `yaml:"http"`
	Endpoints    []Endpoint    `yaml:"endpoints"`
	WriterGroups []WriterGroup `yaml:"writerGroups"`
	Sinks        Sinks         `yaml:"sinks"`
	ScaleOut     ScaleOut      `yaml:"scaleOut"`
	// Commands from the messaging side (commands.go).
	Commands Commands `yaml:"commands"`
	// StoreAndForward is the local durable log between the writer groups
	// and the sinks (bridge/storelog).
	StoreAndForward StoreAndForward `yaml:"storeAndForward"`
}

// StoreAndForward configures the local durable log under
// <stateDir>/log: every writer group appends its messages to it, its OPC
// UA notifications are acknowledged upstream once they are in it, and
// every sink (but the WebSocket stream) reads it through a durable cursor
// of its own. Changing these settings needs a restart.
//
//	storeAndForward:
//	  enabled: true        # default
//	  maxBytes: 1073741824 # default: 1 GiB of records over every group
//	  maxAge: 24h          # default 0: records stay until every sink had them
//	  policy: block        # or drop-oldest, when maxBytes is reached
//	  fsync: true          # default: one fdatasync per commit
//	  commitInterval: 20ms # default: the least time between two commits
type StoreAndForward struct {
	// Enabled: default true. Off, the sinks' queues are fed by the writer
	// groups directly, and only at-least-once sinks hold acknowledgements.
	Enabled *bool `yaml:"enabled"`
	// MaxBytes bounds the records' bytes in the log, over every writer
	// group; default DefaultStoreMaxBytes, at least 1 MiB.
	MaxBytes int64 `yaml:"maxBytes"`
	// MaxAge, when positive, removes records older than it whether every
	// sink had them or not (counted as expired).
	MaxAge Duration `yaml:"maxAge"`
	// Policy when maxBytes is reached: block (default: the writer groups
	// wait, and backpressure reaches the OPC UA servers) or drop-oldest (the
	// oldest records go, counted and logged).
	Policy Policy `yaml:"policy"`
	// Fsync: default true, one fdatasync per commit (a commit takes what
	// every group appended meanwhile). false leaves writing back to the
	// operating system: the log survives the gateway's crash, not the
	// machine's.
	Fsync *bool `yaml:"fsync"`
	// CommitInterval is the least time between two commits (group commit:
	// what every writer group appends meanwhile is one commit, one fsync);
	// default 20ms, at most 1s. It adds up to itself to the latency.
	CommitInterval Duration `yaml:"commitInterval"`
}

// GroupStore is a writer group's own bounds in the store-and-forward log.
type GroupStore struct {
	// MaxBytes, when positive, bounds the group's records' bytes (at most
	// the gateway's storeAndForward.maxBytes); the gateway's policy applies
	// at this bound too: block makes the group wait, drop-oldest removes
	// its oldest records.
	MaxBytes int64 `yaml:"maxBytes"`
	// MaxAge, when positive, removes the group's records older than it
	// (or than the gateway's maxAge, whichever is shorter).
	MaxAge Duration `yaml:"maxAge"`
}

// StoreOn reports whether the store-and-forward log is on: as
// storeAndForward.enabled says, and when it is unset, on unless scale-out is
// (a writer group moves between replicas with its subscription at the
// server: what one replica appended to its own disk would not move with it).
func (c *Config) StoreOn() bool {
	if e := c.StoreAndForward.Enabled; e != nil {
		return *e
	}
	return !c.ScaleOut.Enabled
}

// Gateway holds settings of the process as a whole.
type Gateway struct {
	// PublisherID is the PublisherId of every NetworkMessage and the
	// <PublisherId> level of the topic tree; default "uagate".
	PublisherID string `yaml:"publisherId"`
	// StateDir keeps what survives a restart (PKI default, subscription
	// state); default "./state".
	StateDir string `yaml:"stateDir"`
	// SecretsDir is where secrets given to the API are saved, and, with
	// SystemSecretDirs, the only place a secret's file may be read from
	// (a password file elsewhere could send any file to a server of the
	// caller's choosing); default <stateDir>/secrets.
	SecretsDir string `yaml:"secretsDir"`
	// ApplicationURI is the gateway's OPC UA application URI, the one its
	// certificate names; default urn:<hostname>:uagate:gateway. Replicas
	// that share one certificate (seeded into their PKI stores) set it to
	// that certificate's URI.
	ApplicationURI string `yaml:"applicationUri"`
	// PKISeed is a directory copied into every endpoint's certificate store
	// at start (pki.Store.Import): own/ (a certificate and its key, e.g. a
	// TLS Secret), trusted/, issuers/, trusted-crl/, issuers-crl/. Replicas
	// seeded alike share one application certificate and trust list.
	PKISeed string `yaml:"pkiSeed"`
	// ShutdownTimeout bounds the drain at shutdown; default 10s.
	ShutdownTimeout Duration `yaml:"shutdownTimeout"`
	// DeleteSubscriptionsOnStop deletes the upstream subscriptions at a
	// graceful stop. By default they are kept at the server (the session
	// closed with DeleteSubscriptions=false) for a restart within their
	// lifetime to resume them, as after a kill; the server drops them at
	// the end of their lifetime when no restart comes.
	DeleteSubscriptionsOnStop bool `yaml:"deleteSubscriptionsOnStop"`
}

// Embedded switches the embedded parts on or off. Each is on when the
// configuration names nothing to replace it: the simulation server when no
// endpoint is configured, the MQTT broker when no mqtt sink is, the NATS
// server when no nats sink is.
type Embedded struct {
	Sim  EmbeddedPart `yaml:"sim"`
	MQTT EmbeddedPart `yaml:"mqtt"` // default listen 127.0.0.1:1883
	NATS EmbeddedPart `yaml:"nats"` // default listen 127.0.0.1:4222
}

// EmbeddedPart is one embedded server.
type EmbeddedPart struct {
	// Enabled: nil means "when nothing external replaces it".
	Enabled *bool  `yaml:"enabled"`
	Listen  string `yaml:"listen"` // host:port
}

// HTTP is the one listener of WebSocket, REST, metrics, health and the
// dashboard.
type HTTP struct {
	Listen string `yaml:"listen"` // default 127.0.0.1:8080; "" with Disabled to switch it off
	// Disabled switches the listener off.
	Disabled bool `yaml:"disabled"`
	// APIKeys are the bearer tokens of the REST API (and of the WebSocket
	// stream and /metrics) with their roles.
	APIKeys []APIKey `yaml:"apiKeys"`
	// KeysFile is a mounted secret with more keys, one a line:
	// "<role> <token> [name]"; read again when it changes.
	KeysFile string `yaml:"keysFile"`
	// AllowUnauthenticated opens a listener without keys on a non-loopback
	// address (warned). Without keys and without it, only a loopback
	// address is accepted.
	AllowUnauthenticated bool `yaml:"allowUnauthenticated"`
	// PublicMetrics serves /metrics without credentials.
	PublicMetrics bool `yaml:"publicMetrics"`
	// TLS switches the listener to HTTPS (files read again when they change).
	TLS *ServerTLS `yaml:"tls"`
	// AllowedHosts are the names clients reach the listener by (the Host
	// header) besides IP addresses and loopback names; ".example.com"
	// allows the domain and its subdomains, "*" any. Requests naming
	// another host are refused (DNS rebinding).
	AllowedHosts []string `yaml:"allowedHosts"`
	// CORSOrigins may call the API from a browser ("*": any).
	CORSOrigins []string `yaml:"corsOrigins"`
	// Ready says what /readyz waits for: all (default), any or none of the
	// endpoints' sessions and of the sinks' connections.
	Ready ReadyPolicy `yaml:"ready"`
	// ShutdownDelay keeps serving with /readyz failing this long at
	// shutdown, so that load balancers take the instance out first.
	ShutdownDelay Duration `yaml:"shutdownDelay"`
}

// APIKey is one bearer token of the REST API.
type APIKey struct {
	Name  string `yaml:"name"`
	Role  string `yaml:"role"` // read or admin
	Token Secret `yaml:"token"`
}

// ServerTLS is the certificate of the HTTP listener.
type ServerTLS struct {
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
}

// ReadyPolicy is what /readyz waits for.
type ReadyPolicy struct {
	Endpoints string `yaml:"endpoints"` // all (default), any or none
	Sinks     string `yaml:"sinks"`     // all (default), any or none
}

// Endpoint is an upstream OPC UA server and how to connect to it.
type Endpoint struct {
	Name string `yaml:"name"` // unique; writer groups refer to it
	URL  string `yaml:"url"`  // opc.tcp://host:port/path
	// SecurityPolicy is None, Basic256Sha256, Aes128_Sha256_RsaOaep,
	// Aes256_Sha256_RsaPss, Basic128Rsa15, Basic256, a policy URI, or "best"
	// (the default: the best the server offers).
	SecurityPolicy string `yaml:"securityPolicy"`
	// SecurityMode is None, Sign, SignAndEncrypt or "best" (default).
	SecurityMode    string   `yaml:"securityMode"`
	Identity        Identity `yaml:"identity"`
	PKI             string   `yaml:"pki"` // certificate store directory; default <stateDir>/pki
	AutoAccept      bool     `yaml:"autoAccept"`
	AllowDeprecated bool     `yaml:"allowDeprecated"`
	// SkipHostnameCheck accepts a server certificate that does not name the
	// host of the URL (a PLC reached by an address its certificate lacks).
	SkipHostnameCheck bool `yaml:"skipHostnameCheck"`
	// RequestTimeout bounds connecting and each request; default 30s.
	RequestTimeout Duration `yaml:"requestTimeout"`
	// SessionTimeout asked of the server; default the client's.
	SessionTimeout Duration `yaml:"sessionTimeout"`
	// MaxMessageSize of the secure channel, bytes; default the client's.
	MaxMessageSize int `yaml:"maxMessageSize"`
	// Sessions is how many sessions the gateway opens to the endpoint; its
	// writer groups are subscriptions spread over them (a new group goes
	// to the session with the fewest). Default 1: PLCs allow few sessions,
	// and one carries many subscriptions. More let the groups' data be
	// handled on more cores (each session has one dispatch goroutine), and
	// a group blocked by a full Block queue holds only its own session's
	// groups. Under scale-out every group has a session of its own (a
	// replica hands a group over by detaching its session).
	Sessions int `yaml:"sessions"`
}

// Identity is the user a session is activated as.
type Identity struct {
	// Type is anonymous (default), username or x509.
	Type     string `yaml:"type"`
	Username string `yaml:"username"`
	Password Secret `yaml:"password"`
	CertFile string `yaml:"certFile"` // x509: DER or PEM
	KeyFile  string `yaml:"keyFile"`  // x509: PEM, PKCS#1 or PKCS#8
}

// Secret is a value given by a file or an environment variable (or inline,
// which check-config warns about). In YAML it is either a plain string
// (inline) or a mapping with one of value, file, env. Load resolves it (reads
// the file, looks the variable up) so that a missing one is a load error, not
// a surprise at connect time; Reveal returns the value. Its String, GoString,
// LogValue, MarshalYAML and MarshalJSON never show the value.
type Secret struct {
	Value string `yaml:"value"`
	File  string `yaml:"file"`
	Env   string `yaml:"env"`

	resolved string // the value read from File or Env by Resolve
	ok       bool   // resolved is valid
}

// Backfill of a writer group.
const (
	BackfillNone    = "none"
	BackfillHistory = "history"
)

// Message shapes of a writer group.
const (
	ShapeSingle  = "single"  // one DataSetMessage per NetworkMessage, topic per dataset writer
	ShapeBatched = "batched" // all DataSetMessages of a publish in one NetworkMessage, topic per writer group
)

// Field encodings (Part 14 §7.2.5.4 DataSetFieldContentMask).
const (
	FieldVariant   = "variant"   // the Variant only (default)
	FieldDataValue = "dataValue" // a DataValue with status and timestamps
	FieldRaw       = "raw"       // RawData: the value without type information
)

// Members of a dataValue field (FieldContent): Part 14
// DataSetFieldContentMask bits.
const (
	ContentStatusCode        = "statusCode"
	ContentSourceTimestamp   = "sourceTimestamp"
	ContentServerTimestamp   = "serverTimestamp"
	ContentSourcePicoSeconds = "sourcePicoSeconds"
	ContentServerPicoSeconds = "serverPicoSeconds"
)

// FieldContents lists what FieldContent may name.
var FieldContents = []string{ContentStatusCode, ContentSourceTimestamp, ContentServerTimestamp, ContentSourcePicoSeconds, ContentServerPicoSeconds}

// Message formats.
const (
	FormatPart14  = "part14"  // OPC UA Part 14 JSON (default)
	FormatSamples = "samples" // OPC Publisher's legacy samples format
)

// WriterGroup is one subscription's worth of dataset writers: same endpoint,
// same publishing interval, one NetworkMessage stream.
type WriterGroup struct {
	Name     string `yaml:"name"`     // unique; the <WriterGroup> topic level
	Endpoint string `yaml:"endpoint"` // an Endpoint's name
	// PublishingInterval of the subscription; default 1s.
	PublishingInterval Duration `yaml:"publishingInterval"`
	// KeyFrameCount: every KeyFrameCount-th DataSetMessage of a writer is a
	// key frame with all fields from the last-value cache; 1: every one.
	// 0 (unset) means the default, 10.
	KeyFrameCount int `yaml:"keyFrameCount"`
	// KeepAlive: a writer that had no change for this long sends a
	// ua-keepalive; default 10 × PublishingInterval; negative: never.
	KeepAlive Duration `yaml:"keepAlive"`
	// MaxMessageSize splits NetworkMessages above it, bytes; default 256 KiB.
	MaxMessageSize int    `yaml:"maxMessageSize"`
	MessageShape   string `yaml:"messageShape"`  // single (default) or batched
	FieldEncoding  string `yaml:"fieldEncoding"` // variant (default), dataValue or raw
	// FieldContent picks the members of a dataValue field beside its Value
	// (Part 14 DataSetFieldContentMask): statusCode, sourceTimestamp,
	// serverTimestamp, sourcePicoSeconds, serverPicoSeconds. Unset: the
	// first three.
	FieldContent []string `yaml:"fieldContent"`
	Encoding     string   `yaml:"encoding"` // compact (default) or verbose: Part 6 JSON mode
	Format       string   `yaml:"format"`   // part14 (default) or samples
	// MaxUnacked bounds the notification messages of the subscription not yet
	// confirmed by every at-least-once sink; at the limit Publish requests
	// stop (backpressure). Default 64.
	MaxUnacked int `yaml:"maxUnacked"`
	// MaxNotificationsPerPublish bounds the notifications the server puts
	// in one message of the subscription; default 1000; negative: no bound
	// but the server's own.
	MaxNotificationsPerPublish int `yaml:"maxNotificationsPerPublish"`
	// Backfill says what fills values lost upstream (the server's queue
	// overflowed, the subscription had to be created anew, notification
	// messages lost): "none" (default: the gap is reported) or "history":
	// the lost range of every field whose node is Historizing is read with
	// HistoryRead and published in order, marked as backfill.
	Backfill string `yaml:"backfill"`
	// StoreAndForward bounds the group's own part of the store-and-forward
	// log, within the gateway's (storeAndForward): a group that makes
	// much, or whose data ages fast, cannot fill the log for the others.
	StoreAndForward GroupStore `yaml:"storeAndForward"`
	// Defaults for the nodes of the group's writers.
	Nodes   NodeDefaults    `yaml:"nodes"`
	Writers []DataSetWriter `yaml:"writers"`
}

// NodeDefaults are the monitored-item settings nodes inherit.
type NodeDefaults struct {
	// SamplingInterval; default: the writer group's publishing interval ÷ 10
	// (at least 0: the server's fastest).
	SamplingInterval *Duration `yaml:"samplingInterval"`
	// QueueSize; default: enough for two publishing intervals of samples.
	QueueSize     uint32   `yaml:"queueSize"`
	DiscardOldest *bool    `yaml:"discardOldest"` // default true
	Deadband      Deadband `yaml:"deadband"`
	Trigger       string   `yaml:"trigger"` // status, statusValue (default), statusValueTimestamp
	Heartbeat     Duration `yaml:"heartbeat"`
}

// DataSetWriter is one DataSet: a named, ordered list of fields.
type DataSetWriter struct {
	ID     uint16  `yaml:"id"`   // DataSetWriterId; unique in the group; default its position (1-based)
	Name   string  `yaml:"name"` // unique in the group; the <DataSetWriter> topic level
	Fields []Field `yaml:"fields"`
	// Browse adds fields found by browsing (after the listed ones).
	Browse []BrowseSelect `yaml:"browse"`
}

// Field is one monitored node (a value, or events) and the DataSet field it
// is written as.
type Field struct {
	Name string `yaml:"name"` // unique in the writer; default the node's DisplayName or id
	// Node is the node id; nsu= forms are resolved against the server's
	// namespace array at every (re)creation.
	Node             string    `yaml:"node"`
	SamplingInterval *Duration `yaml:"samplingInterval"`
	QueueSize        uint32    `yaml:"queueSize"`
	DiscardOldest    *bool     `yaml:"discardOldest"`
	Deadband         Deadband  `yaml:"deadband"`
	Trigger          string    `yaml:"trigger"`
	Heartbeat        Duration  `yaml:"heartbeat"`
	// Events, when set, makes the field an event field: the node is an event
	// notifier and each event is a ua-event DataSetMessage.
	Events *EventSelect `yaml:"events"`
}

// Deadband of a data change filter.
type Deadband struct {
	Type  string  `yaml:"type"` // none (default), absolute or percent
	Value float64 `yaml:"value"`
}

// EventSelect is an EventFilter.
type EventSelect struct {
	// Select are browse paths relative to BaseEventType ("EventId",
	// "Message", "Severity", "SourceName", …); default a useful set.
	Select []string `yaml:"select"`
	// OfType restricts to events of this type node id (and subtypes).
	OfType string `yaml:"ofType"`
}

// BrowseSelect selects every Variable below a node.
type BrowseSelect struct {
	Root      string   `yaml:"root"`      // node id to start from
	Depth     int      `yaml:"depth"`     // levels below root; default 5; 1: direct children
	Name      string   `yaml:"name"`      // glob on the BrowseName (path.Match); default "*"
	DataTypes []string `yaml:"dataTypes"` // built-in type names (Double, Int32, …) or node ids; default any
	MaxNodes  int      `yaml:"maxNodes"`  // stop after this many; default 100000
}

// Sinks are the outputs. With none configured, the embedded MQTT broker and
// NATS server get one sink each.
type Sinks struct {
	MQTT      []MQTTSink     `yaml:"mqtt"`
	NATS      []NATSSink     `yaml:"nats"`
	WebSocket *WebSocketSink `yaml:"websocket"`
	File      []FileSink     `yaml:"file"`
}

// Delivery is the guarantee and queue of one sink.
type Delivery struct {
	Guarantee Guarantee `yaml:"guarantee"` // at-most-once (default) or at-least-once
	QueueSize int       `yaml:"queueSize"` // messages; default DefaultSinkQueueSize
	Policy    Policy    `yaml:"policy"`    // block (default) or drop-oldest
	// QueueBytes bounds the queue's payload bytes too; default 8 MiB.
	QueueBytes int `yaml:"queueBytes"`
}

// TLS of a client connection.
type TLS struct {
	CAFile             string `yaml:"caFile"`
	CertFile           string `yaml:"certFile"`
	KeyFile            string `yaml:"keyFile"`
	InsecureSkipVerify bool   `yaml:"insecureSkipVerify"`
}

// MQTTSink is an MQTT broker connection.
type MQTTSink struct {
	Name     string `yaml:"name"`
	URL      string `yaml:"url"` // tcp://host:1883, ssl://host:8883, ws://…
	ClientID string `yaml:"clientId"`
	// QoS 0, 1 or 2; nil (unset) means 1. A pointer because 0 is a valid
	// choice that must not be mistaken for "unset".
	QoS *int `yaml:"qos"`
	// CleanSession false keeps the broker's session across connections;
	// under scale-out it is then the writer group's: a connection per group
	// as <clientId>-<group>, moving with the group (package gateway,
	// groupsink.go). Default true.
	CleanSession *bool    `yaml:"cleanSession"`
	Username     string   `yaml:"username"`
	Password     Secret   `yaml:"password"`
	TLS          *TLS     `yaml:"tls"`
	Delivery     Delivery `yaml:"delivery"`
	// Topic templates; placeholders {PublisherId} {WriterGroup} {DataSetWriter} {Field}.
	DataTopic     string    `yaml:"dataTopic"`     // default opcua/json/data/{PublisherId}/{WriterGroup}/{DataSetWriter}
	MetaDataTopic string    `yaml:"metaDataTopic"` // default opcua/json/metadata/{PublisherId}/{WriterGroup}/{DataSetWriter}
	StatusTopic   string    `yaml:"statusTopic"`   // default opcua/json/status/{PublisherId}
	PerField      *PerField `yaml:"perField"`
	// ProtocolVersion is 4 (MQTT 3.1.1, the default) or 5 (MQTT 5.0:
	// content type and user properties on every message, the broker's
	// limits honoured, commands answered on the response topic).
	ProtocolVersion int `yaml:"protocolVersion"`
	// MessageExpiry, with protocolVersion 5, is the lifetime the broker
	// gives a data message it holds for a subscriber (MQTT 5 Message
	// Expiry Interval, whole seconds); 0: none.
	MessageExpiry Duration `yaml:"messageExpiry"`
	// Sparkplug, when set, makes the sink a Sparkplug B Edge Node: it
	// publishes the values as Sparkplug B instead of Part 14 JSON, and the
	// topic templates, qos and perField do not apply.
	Sparkplug *Sparkplug `yaml:"sparkplug"`
}

// Sparkplug is the Sparkplug B 3.0 mode of an MQTT sink: the gateway is an
// Edge Node, its writers (or endpoints) its Devices.
type Sparkplug struct {
	GroupID    string `yaml:"groupId"`    // required
	EdgeNodeID string `yaml:"edgeNodeId"` // default gateway.publisherId
	// Devices is what a Sparkplug Device is: SparkplugDevicesWriter (a
	// dataset writer, device id <writerGroup>.<writer>, metrics named as its
	// fields; the default) or SparkplugDevicesEndpoint (an endpoint, device
	// id its name, metrics <writerGroup>/<writer>/<field>).
	Devices string `yaml:"devices"`
	// PrimaryHostID, when set, makes the node wait for that Primary Host
	// Application's STATE to be online before its births, and hold its
	// data while the host is offline.
	PrimaryHostID string `yaml:"primaryHostId"`
	// StoreBytes bounds the data held in memory while the node is not
	// online (the host offline, the broker away), sent after the next
	// birth as historical metrics; beyond it the oldest is dropped
	// (counted). With the store-and-forward log on, held data is in the
	// log, bounded by its maxBytes and maxAge, and StoreBytes does not
	// apply.
	StoreBytes int `yaml:"storeBytes"`
}

// PerField publishes each field on a topic of its own (unified namespace).
type PerField struct {
	Topic   string `yaml:"topic"`   // default {PublisherId}/{WriterGroup}/{DataSetWriter}/{Field}
	Payload string `yaml:"payload"` // value (default) or dataValue
	Retain  *bool  `yaml:"retain"`  // default true
}

// NATSSink is a NATS server connection.
type NATSSink struct {
	Name      string   `yaml:"name"`
	URL       string   `yaml:"url"` // nats://host:4222[,nats://…]
	Username  string   `yaml:"username"`
	Password  Secret   `yaml:"password"`
	Token     Secret   `yaml:"token"`
	CredsFile string   `yaml:"credsFile"`
	NKeyFile  string   `yaml:"nkeyFile"`
	TLS       *TLS     `yaml:"tls"`
	Delivery  Delivery `yaml:"delivery"`
	// Subject templates, as the MQTT topics with '.' for '/'.
	DataSubject     string     `yaml:"dataSubject"`
	MetaDataSubject string     `yaml:"metaDataSubject"`
	StatusSubject   string     `yaml:"statusSubject"`
	JetStream       *JetStream `yaml:"jetStream"`
}

// JetStream publishing: every message acknowledged by the stream.
type JetStream struct {
	Stream string `yaml:"stream"` // stream name; created when Create is set
	Create bool   `yaml:"create"`
	// MaxAge and MaxBytes of a stream created here.
	MaxAge   Duration `yaml:"maxAge"`
	MaxBytes int64    `yaml:"maxBytes"`
}

// WebSocketSink is the WebSocket stream on the HTTP listener.
type WebSocketSink struct {
	Path           string   `yaml:"path"` // default /ws
	AllowedOrigins []string `yaml:"allowedOrigins"`
	Token          Secret   `yaml:"token"` // bearer token required when set
	// ClientQueue bounds each client's queue (messages); a client that falls
	// behind is closed. Default 256.
	ClientQueue int `yaml:"clientQueue"`
}

// FileSink writes JSON lines to a file or stdout.
type FileSink struct {
	Name     string   `yaml:"name"`
	Path     string   `yaml:"path"` // "-" for stdout
	Delivery Delivery `yaml:"delivery"`
}

// Duration is a time.Duration written as "1s", "250ms", "2m" in YAML and
// JSON, or as a number of milliseconds.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// ScaleOut shares the writer groups among several replicas of the gateway
// through leases in a NATS JetStream key-value bucket (bridge/lease): each
// writer group is served by the one replica that holds its lease; a replica
// that stops renewing (it died, or lost NATS) stops serving before its leases
// expire, and another takes the groups over the way a restart resumes them
// (the upstream subscriptions transferred, what was not acknowledged
// republished). Every replica runs the same configuration. Changing these
// settings needs a restart.
//
//	scaleOut:
//	  enabled: true
//	  natsUrl: nats://nats-0:4222,nats://nats-1:4222,nats://nats-2:4222
//	  bucket: uagate-leases   # default
//	  leaseTTL: 10s           # default; at least 3s
//	  replicaId: gateway-0    # default: the host name (a StatefulSet's pod name)
//
// Environment: UAGATE_SCALEOUT_ENABLED (true/false), UAGATE_SCALEOUT_NATS_URL,
// UAGATE_SCALEOUT_BUCKET, UAGATE_SCALEOUT_LEASE_TTL, UAGATE_SCALEOUT_REPLICA_ID.
type ScaleOut struct {
	Enabled bool `yaml:"enabled"`
	// NATSURL names the NATS server(s) of the bucket: nats://host:4222[,…]
	// (tls:// for TLS); required when enabled.
	NATSURL string `yaml:"natsUrl"`
	// Credentials: at most one of username/password, token, credsFile,
	// nkeyFile (as for a NATS sink).
	Username  string `yaml:"username"`
	Password  Secret `yaml:"password"`
	Token     Secret `yaml:"token"`
	CredsFile string `yaml:"credsFile"`
	NKeyFile  string `yaml:"nkeyFile"`
	TLS       *TLS   `yaml:"tls"`
	// Bucket is the key-value bucket of the leases, created when missing
	// (history 1); default "uagate-leases".
	Bucket string `yaml:"bucket"`
	// Replicas is the bucket's number of stream replicas when it is created:
	// 0 (default) takes 3 when the NATS cluster has at least 3 servers, else
	// 1.
	Replicas int `yaml:"replicas"`
	// LeaseTTL is how long a lease outlives its holder's last renewal; the
	// holder renews every LeaseTTL/3 and stops serving after 2/3 of it
	// without a renewal. A replica that dies has its groups taken over
	// after about LeaseTTL × 1.2. Default 10s, at least 3s.
	LeaseTTL Duration `yaml:"leaseTTL"`
	// ReplicaID names this replica in the leases; unique among the replicas,
	// and stable across restarts so that a restarted replica takes its own
	// leases back at once. Default: the host name.
	ReplicaID string `yaml:"replicaId"`
}
