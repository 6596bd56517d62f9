package api

import (
	"context"
	"errors"
	"time"

	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/command"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sparkplug"
	"github.com/uagate/gateway/bridge/sink/wssink"
	"github.com/uagate/gateway/bridge/storelog"
	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
)

// Backend is the gateway's runtime as the API sees it. The wiring in
// cmd/gateway implements it over the session pool, the pipeline and the
// configuration store. Its methods are called concurrently, from request
// goroutines and from the metrics scrape; they must not block for long
// (Session may wait for a connection until ctx ends).
//
// Errors: a method wraps one of the problem kinds (ErrNotFound,
// ErrConflict, ErrInvalid, ErrUnavailable, …) to choose the HTTP status;
// its text becomes the problem's detail. Any other error is a 500 whose
// text is logged, not sent.
type Backend interface {
	// Config returns the running configuration. The API does not modify
	// it; the Backend must not modify it afterwards either (return a copy,
	// or replace the whole value on change).
	Config() *config.Config
	// ApplyConfig changes the configuration: change runs on a deep copy of
	// the running one; the Backend validates the result and applies the
	// difference (only what changed is touched), writer group by writer
	// group: a group whose change fails keeps running as it was (a new one
	// stays absent). What then runs becomes the running configuration and
	// is persisted so that a restart keeps it. Errors: change's own
	// (nothing changed); ErrInvalid for a configuration that does not
	// validate and ErrConflict for one that needs a restart (nothing
	// changed); ErrConflict naming the writer groups whose change failed
	// (the others applied; the failed part is pending for a retry, see
	// ConfigReporter); ErrUnavailable while the gateway stops. change does
	// not call the Backend (ApplyConfig runs one at a time).
	ApplyConfig(ctx context.Context, change func(*config.Config) error) error

	// Endpoints returns the state of every configured endpoint, in
	// configuration order (NewEndpointStatus builds one from a
	// ManagedSession).
	Endpoints() []EndpointStatus
	// LastValues returns the last values of at most limit fields of writer
	// group group that match f, in the group's field order from position
	// from on, and the position of the next field that matches, -1 when none
	// is left: a page of the group's last-value cache
	// (bridge.WriterGroup.LastValues), which costs its own size, not the
	// group's. limit <= 0 asks only where the first match is. ErrNotFound
	// when there is no such group, ErrUnavailable when it does not run here
	// (still starting, or served by another replica). The values are the
	// Backend's copies: the API reads them after the call returns.
	LastValues(group string, f bridge.ValueFilter, from, limit int) ([]bridge.FieldValue, int, error)
	// Metadata returns the DataSetMetaData of a writer (ErrNotFound when the
	// group or writer does not exist; ErrUnavailable when it exists but its
	// metadata is not known yet).
	Metadata(group, writer string) (*ua.DataSetMetaDataType, error)
	// Session returns a connected client of the endpoint for an on-demand
	// call (ErrNotFound for an unknown endpoint, ErrUnavailable when it is
	// not connected within ctx). The client belongs to the Backend; the API
	// only calls services on it.
	Session(ctx context.Context, endpoint string) (*client.Client, error)
	// Store returns the certificate store of an endpoint; "" names the
	// gateway's default store.
	Store(endpoint string) (*pki.Store, error)
	// Stats returns counters for /metrics and /api/v1/status. It is called
	// at every scrape and must be cheap (snapshots of atomic counters).
	Stats() Stats
}

// Retrier is implemented by a Backend whose sessions can be told to retry
// connecting at once (after a certificate was trusted through the API).
type Retrier interface {
	RetryNow()
}

// Stats are the runtime's counters as its parts report them, in their own
// types: /metrics and /api/v1/status read every member.
type Stats struct {
	// Groups are the writer groups that run here, in configuration order.
	Groups []bridge.GroupStats
	// Sinks are the sink outputs (mqtt, nats, file).
	Sinks []SinkStats
	// WebSocket is the WebSocket stream's hub; nil when there is none.
	WebSocket *wssink.Stats
	// Pools and BufferPools are the process's registered pools
	// (pooling.Registered, pooling.RegisteredBuffers).
	Pools       []pooling.NamedPoolStats
	BufferPools []pooling.NamedBufferPoolStats
	// ScaleOut is nil unless scale-out is enabled.
	ScaleOut *ScaleOutStatus
	// Sparkplug are the Sparkplug B nodes (MQTT sinks in sparkplug mode),
	// whose queues are in Sinks as well.
	Sparkplug []sparkplug.Stats
	// Commands are the command counters, per transport.
	Commands []command.Stats
	// Store is the store-and-forward log; nil when it is off.
	Store *storelog.Stats
}

// ScaleOutStatus is this replica's view of the writer groups' leases.
type ScaleOutStatus struct {
	ReplicaID string `json:"replicaId"`
	// Groups lists every configured writer group with the replica holding
	// its lease ("" while nobody does), as the lease bucket's watcher last
	// saw it.
	Groups []LeaseHolder `json:"groups"`
}

// LeaseHolder is one writer group's lease.
type LeaseHolder struct {
	Group  string `json:"name"`
	Holder string `json:"holder"`
	// Local: this replica serves the group.
	Local bool `json:"local"`
}

// SinkStats are one sink's counters, as /api/v1/status lists them.
type SinkStats struct {
	sink.OutputStats
	Kind string `json:"kind,omitempty"` // mqtt, nats, file, websocket
}

// EndpointStatus is the state of one upstream endpoint and its session.
type EndpointStatus struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// State is Disconnected, Connecting, Connected, Reconnecting, Closing or
	// Closed.
	State     string `json:"state"`
	Connected bool   `json:"connected"`
	// SecurityPolicy and SecurityMode of the current session.
	SecurityPolicy string `json:"securityPolicy,omitempty"`
	SecurityMode   string `json:"securityMode,omitempty"`
	SessionID      string `json:"sessionId,omitempty"`
	// Reconnects counts the recoveries started (faults) since the start.
	Reconnects uint64           `json:"reconnects"`
	Counters   EndpointCounters `json:"counters"`
	// LastError is the error of the last failure ("" while connected and
	// healthy).
	LastError string `json:"lastError,omitempty"`
	// PermanentFailure is why the session gave up and will not retry by
	// itself (the endpoint needs attention: a refused certificate, a
	// rejected identity, a configuration error).
	PermanentFailure string `json:"permanentFailure,omitempty"`
	// FailureReason classifies a permanent failure: identity-rejected,
	// certificate-untrusted, certificate-rejected, no-matching-endpoint or
	// endpoint-url-invalid (the session retries slowly meanwhile).
	FailureReason string               `json:"failureReason,omitempty"`
	Subscriptions []SubscriptionStatus `json:"subscriptions"`
	// OperationLimits the client works with (the server's, lowered where it
	// enforced smaller ones); absent while disconnected.
	OperationLimits *OperationLimits `json:"operationLimits,omitempty"`
}

// EndpointCounters count a session's recoveries (client.ManagedStats).
type EndpointCounters struct {
	Connects      uint64 `json:"connects"`
	Reactivations uint64 `json:"reactivations"`
	Transfers     uint64 `json:"transfers"`
	Recreations   uint64 `json:"recreations"`
	Faults        uint64 `json:"faults"`
}

// SubscriptionStatus is the state of one subscription.
type SubscriptionStatus struct {
	ID                 uint32    `json:"id"`
	PublishingInterval Duration  `json:"publishingInterval"`
	KeepAliveCount     uint32    `json:"keepAliveCount"`
	LifetimeCount      uint32    `json:"lifetimeCount"`
	LastActivity       time.Time `json:"lastActivity"`
	Messages           uint64    `json:"messages"`
	KeepAlives         uint64    `json:"keepAlives"`
	DataChanges        uint64    `json:"dataChanges"`
	Events             uint64    `json:"events"`
	Republished        uint64    `json:"republished"`
	Lost               uint64    `json:"lost"`
	Duplicates         uint64    `json:"duplicates"`
	HandlerPanics      uint64    `json:"handlerPanics"`
	Recreated          uint64    `json:"recreated"`
	Transferred        uint64    `json:"transferred"`
	Items              int       `json:"items"`
	FailedItems        int       `json:"failedItems"`
}

// OperationLimits are a server's limits on the operations of one request;
// 0 means none.
type OperationLimits struct {
	MaxNodesPerRead                          uint32 `json:"maxNodesPerRead"`
	MaxNodesPerWrite                         uint32 `json:"maxNodesPerWrite"`
	MaxNodesPerBrowse                        uint32 `json:"maxNodesPerBrowse"`
	MaxNodesPerMethodCall                    uint32 `json:"maxNodesPerMethodCall"`
	MaxNodesPerRegisterNodes                 uint32 `json:"maxNodesPerRegisterNodes"`
	MaxNodesPerTranslateBrowsePathsToNodeIds uint32 `json:"maxNodesPerTranslateBrowsePathsToNodeIds"`
	MaxMonitoredItemsPerCall                 uint32 `json:"maxMonitoredItemsPerCall"`
	MaxBrowseContinuationPoints              uint32 `json:"maxBrowseContinuationPoints"`
}

// NewEndpointStatus describes a managed session (nil: an endpoint that has
// none yet, reported Disconnected).
func NewEndpointStatus(name, url string, m *client.ManagedSession) EndpointStatus {
	st := EndpointStatus{Name: name, URL: url, State: client.StateDisconnected.String(), Subscriptions: []SubscriptionStatus{}}
	if m == nil {
		return st
	}
	state := m.State()
	st.State = state.String()
	st.Connected = state == client.StateConnected
	ms := m.Stats()
	st.Counters = EndpointCounters{ms.Connects, ms.Reactivations, ms.Transfers, ms.Recreations, ms.Faults}
	st.Reconnects = ms.Faults
	if err := m.Err(); err != nil {
		st.LastError = err.Error()
		if state == client.StateDisconnected || state == client.StateFailed || errors.Is(err, client.ErrClosed) {
			st.PermanentFailure = err.Error()
		}
		if r := m.FailureReason(); state == client.StateFailed && r != 0 {
			st.FailureReason = r.String()
		}
	}
	if c := m.Client(); c != nil {
		st.SecurityPolicy = c.SecurityPolicy().URI
		st.SecurityMode = c.SecurityMode().String()
		st.SessionID = c.SessionID().String()
		l := c.OperationLimits()
		st.OperationLimits = &OperationLimits{l.MaxNodesPerRead, l.MaxNodesPerWrite, l.MaxNodesPerBrowse,
			l.MaxNodesPerMethodCall, l.MaxNodesPerRegisterNodes, l.MaxNodesPerTranslateBrowsePathsToNodeIds,
			l.MaxMonitoredItemsPerCall, l.MaxBrowseContinuationPoints}
	}
	for _, s := range m.Subscriptions() {
		ss := s.Stats()
		st.Subscriptions = append(st.Subscriptions, SubscriptionStatus{
			ID: s.ID(), PublishingInterval: Duration(s.PublishingInterval()),
			KeepAliveCount: s.KeepAliveCount(), LifetimeCount: s.LifetimeCount(), LastActivity: s.LastActivity(),
			Messages: ss.Messages, KeepAlives: ss.KeepAlives, DataChanges: ss.DataChanges, Events: ss.Events,
			Republished: ss.Republished, Lost: ss.Lost, Duplicates: ss.Duplicates, HandlerPanics: ss.HandlerPanics,
			Recreated: ss.Recreated, Transferred: ss.Transferred, Items: ss.Items, FailedItems: ss.FailedItems,
		})
	}
	return st
}
