package server

import (
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uacp"
	"github.com/uagate/gateway/uastack/uasc"
)

// Defaults of Config.
const (
	DefaultAddress                          = "127.0.0.1:4840"
	DefaultApplicationURI                   = "urn:uagate:sim"
	DefaultProductURI                       = "https://github.com/uagate/gateway/sim"
	DefaultApplicationName                  = "uagate simulation server"
	DefaultNamespaceURI                     = "urn:uagate:sim:nodes"
	DefaultMaxSessionCount                  = 1000
	DefaultMaxSubscriptionCount             = 10000
	DefaultMaxSubscriptionsPerSession       = 100
	DefaultMaxMonitoredItemsPerSubscription = 1 << 20
	DefaultMaxMonitoredItems                = 2_000_000
	DefaultMinSessionTimeout                = 10 * time.Second
	DefaultMaxSessionTimeout                = time.Hour
	DefaultMaxPublishRequestsPerSession     = 64
	DefaultMaxRetransmissionQueue           = 64
	DefaultMinPublishingInterval            = 10 * time.Millisecond
	DefaultMaxPublishingInterval            = time.Hour
	DefaultMinSamplingInterval              = time.Millisecond
	DefaultMaxQueueSize                     = 10000
	DefaultMaxNotificationsPerPublish       = 4096
	DefaultMaxKeepAliveCount                = 10000
	DefaultMaxLifetimeCount                 = 100000
	DefaultPublishResolution                = 10 * time.Millisecond
	DefaultMaxQueuedRequests                = 4096
	DefaultMaxBrowseContinuationPoints      = 16
	DefaultMaxNodesPerOperation             = 10000
	DefaultMaxMonitoredItemsPerCall         = 100000
	DefaultMaxReferencesPerNode             = 1000
	DefaultMaxChannelsAboveSessions         = 16
	DefaultMaxWorkersPerCPU                 = 16
	DefaultMaxPendingHandshakes             = 256
)

// Internal limits and sizes.
const (
	defaultEventQueueSize           = 1000
	parallelSweepThreshold          = 256
	maxSampleDuration               = 24 * time.Hour
	maxContinuationPointsPerSession = 1 << 10
	defaultSimArrayLength           = 10
	defaultSimTableSize             = 64
	defaultNonceLength              = 32
	maxUsers                        = 1 << 16
)

// Config configures a Server. Zero fields take the defaults named by the
// Default… constants; Validate names the first field that cannot work.
type Config struct {
	// Address is the TCP address to listen on, "host:port"; port 0 picks a free
	// one (see Server.Addr). Default DefaultAddress.
	Address string
	// EndpointURL is the URL advertised in the endpoints; default
	// opc.tcp://<host>:<port> of the listener (the host name when listening on
	// all interfaces).
	EndpointURL string

	ApplicationURI  string
	ProductURI      string
	ApplicationName string
	// NamespaceURI is the URI of namespace 1, where the simulation lives.
	NamespaceURI string
	// ExtraNamespaces are more namespace URIs, at indexes 2, 3 … of the
	// NamespaceArray, with no nodes in them: a server restarted with other
	// ones (or with NamespaceURI among them) lets tests check that clients
	// resolve namespace URIs again.
	ExtraNamespaces []string

	// Policies are the security policy and mode pairs offered, one endpoint
	// each. Empty means DefaultPolicies(): None and every policy that is not
	// deprecated, with Sign and SignAndEncrypt.
	Policies []uasc.EndpointSecurity
	// Certificate (DER, optionally followed by its issuers) and Key are the
	// server's application instance certificate. When nil a self-signed one is
	// created in memory for ApplicationURI (the gateway's sim command keeps one
	// in a pki.Store instead).
	Certificate []byte
	Key         *rsa.PrivateKey
	// ValidateClientCert vets the certificate (chain) a client opens a secure
	// channel with; an error refuses it. Nil accepts every certificate: this is
	// a simulation server.
	ValidateClientCert func(chain []byte) error

	// SessionEndpoints, when set, gets a copy of the endpoints and returns those
	// CreateSession lists as ServerEndpoints (GetEndpoints still lists them
	// all). For tests of clients only: it plays the server end of a discovery
	// answer altered on the way (a stripped or changed list), which a client
	// must detect by comparing the two lists (Part 4 §5.6.2). The copy is
	// shallow: change the elements, not the slices they hold (replace
	// UserIdentityTokens instead of writing into it).
	SessionEndpoints func(eps []ua.EndpointDescription) []ua.EndpointDescription

	// DisableAnonymous refuses anonymous sessions.
	DisableAnonymous bool
	// Users are the accepted user names and passwords. Empty offers no user
	// name token.
	Users map[string]string
	// DisableX509Users refuses X.509 user identity tokens.
	DisableX509Users bool
	// ValidateUserCert vets an X.509 user certificate after its signature was
	// verified; nil accepts any certificate whose key signed the token.
	ValidateUserCert func(cert *x509.Certificate) error

	// MaxSessionCount bounds the open sessions (Bad_TooManySessions beyond).
	MaxSessionCount int
	// MaxChannelCount bounds the open secure channels; default MaxSessionCount
	// + DefaultMaxChannelsAboveSessions.
	MaxChannelCount int
	// MaxSubscriptionCount bounds the subscriptions of the server, and
	// MaxSubscriptionsPerSession those of one session (Bad_TooManySubscriptions).
	MaxSubscriptionCount       int
	MaxSubscriptionsPerSession int
	// MaxMonitoredItemsPerSubscription bounds the items of one subscription,
	// MaxMonitoredItems those of the server (Bad_TooManyMonitoredItems).
	MaxMonitoredItemsPerSubscription int
	MaxMonitoredItems                int
	// MinSessionTimeout and MaxSessionTimeout bound the revised session timeout.
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// MaxPublishRequestsPerSession bounds the parked Publish requests of a
	// session; the oldest is answered with Bad_TooManyPublishRequests beyond.
	MaxPublishRequestsPerSession int
	// MaxRetransmissionQueue bounds the unacknowledged notification messages a
	// subscription keeps for Republish; the oldest is dropped beyond.
	MaxRetransmissionQueue int
	// MinPublishingInterval, MaxPublishingInterval and MinSamplingInterval bound
	// the revised intervals.
	MinPublishingInterval time.Duration
	MaxPublishingInterval time.Duration
	MinSamplingInterval   time.Duration
	// MaxQueueSize bounds the queue size of a monitored item.
	MaxQueueSize uint32
	// MaxNotificationsPerPublish bounds the notifications of one response
	// (also bounded by the response size the client accepts).
	MaxNotificationsPerPublish uint32
	// MaxKeepAliveCount and MaxLifetimeCount bound the revised counts.
	MaxKeepAliveCount uint32
	MaxLifetimeCount  uint32
	// PublishResolution is the longest wait between two publishing sweeps;
	// a sweep also runs when a session's next publishing timer or deadline
	// falls due (at most one per millisecond), so publishing intervals need
	// not be multiples of it. Default 10 ms.
	PublishResolution time.Duration

	// MinWorkers and MaxWorkers bound the goroutines that process requests
	// (default GOMAXPROCS and DefaultMaxWorkersPerCPU×GOMAXPROCS); parked
	// Publish requests hold none. MaxQueuedRequests bounds the requests waiting
	// for a worker; a request beyond it is answered with Bad_ServerTooBusy.
	MinWorkers        int
	MaxWorkers        int
	MaxQueuedRequests int

	// Operation limits, published in ServerCapabilities/OperationLimits (unless
	// HideOperationLimits) and enforced (Bad_TooManyOperations beyond). Default
	// DefaultMaxNodesPerOperation.
	MaxNodesPerRead                          uint32
	MaxNodesPerWrite                         uint32
	MaxNodesPerBrowse                        uint32
	MaxNodesPerMethodCall                    uint32
	MaxNodesPerRegisterNodes                 uint32
	MaxNodesPerTranslateBrowsePathsToNodeIDs uint32
	MaxMonitoredItemsPerCall                 uint32
	MaxNodesPerHistoryReadData               uint32
	// HideOperationLimits leaves the OperationLimits object out of
	// ServerCapabilities (it is optional, Part 5 §6.3.11), so that clients find
	// no limits to read; the limits are still enforced. It plays a server that
	// enforces limits it does not publish, for testing how a client learns them
	// from Bad_TooManyOperations.
	HideOperationLimits bool
	// MaxBrowseContinuationPoints bounds the continuation points of a session.
	MaxBrowseContinuationPoints int
	// MaxHistoryContinuationPoints bounds a session's HistoryRead
	// continuation points (default DefaultMaxBrowseContinuationPoints).
	MaxHistoryContinuationPoints int
	// MaxReferencesPerNode bounds the references of one Browse result when the
	// client asks for more (or for all).
	MaxReferencesPerNode int

	// Transport configures the connections (nil: uacp defaults, with
	// MaxPendingHandshakes raised to DefaultMaxPendingHandshakes).
	Transport *uacp.Config
	// MaxTokenLifetime bounds the secure channel token lifetime (uasc default).
	MaxTokenLifetime time.Duration

	// Sim configures the simulated address space.
	Sim SimConfig

	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
}

// DefaultPolicies returns None and every policy that is not deprecated, each
// secure one with Sign and SignAndEncrypt.
func DefaultPolicies() []uasc.EndpointSecurity {
	return policies(false)
}

// AllPolicies returns DefaultPolicies and the deprecated policies
// (Basic128Rsa15, Basic256), for interop tests with old peers.
func AllPolicies() []uasc.EndpointSecurity {
	return policies(true)
}

func policies(deprecated bool) []uasc.EndpointSecurity {
	var out []uasc.EndpointSecurity
	for _, p := range uasc.Policies() {
		switch {
		case p.IsNone():
			out = append(out, uasc.EndpointSecurity{PolicyURI: p.URI, Mode: ua.MessageSecurityModeNone})
		case p.Deprecated && !deprecated:
		default:
			out = append(out,
				uasc.EndpointSecurity{PolicyURI: p.URI, Mode: ua.MessageSecurityModeSign},
				uasc.EndpointSecurity{PolicyURI: p.URI, Mode: ua.MessageSecurityModeSignAndEncrypt})
		}
	}
	return out
}

// Validate reports the first setting that cannot work, naming the field.
func (c *Config) Validate() error {
	_, err := c.resolve()
	return err
}

// resolve returns a copy of c with the defaults filled in.
func (c *Config) resolve() (Config, error) {
	var cfg Config
	if c != nil {
		cfg = *c
	}
	if cfg.Address == "" {
		cfg.Address = DefaultAddress
	}
	if _, _, err := net.SplitHostPort(cfg.Address); err != nil {
		return cfg, fmt.Errorf("server: Config.Address %q: %w", cfg.Address, err)
	}
	if cfg.EndpointURL != "" {
		u, err := url.Parse(cfg.EndpointURL)
		if err != nil || u.Scheme != "opc.tcp" || u.Host == "" {
			return cfg, fmt.Errorf("server: Config.EndpointURL %q: want opc.tcp://host:port[/path]", cfg.EndpointURL)
		}
	}
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&cfg.ApplicationURI, DefaultApplicationURI)
	def(&cfg.ProductURI, DefaultProductURI)
	def(&cfg.ApplicationName, DefaultApplicationName)
	def(&cfg.NamespaceURI, DefaultNamespaceURI)
	for i, u := range cfg.ExtraNamespaces {
		if u == "" || u == cfg.NamespaceURI || u == "http://opcfoundation.org/UA/" {
			return cfg, fmt.Errorf("server: Config.ExtraNamespaces[%d] %q is empty or names namespace 0 or 1", i, u)
		}
		for _, v := range cfg.ExtraNamespaces[:i] {
			if u == v {
				return cfg, fmt.Errorf("server: Config.ExtraNamespaces[%d] %q is there twice", i, u)
			}
		}
	}
	if len(cfg.Policies) == 0 {
		cfg.Policies = DefaultPolicies()
	}
	for i, e := range cfg.Policies {
		p, err := uasc.PolicyByURI(e.PolicyURI)
		if err != nil {
			return cfg, fmt.Errorf("server: Config.Policies[%d]: %w", i, err)
		}
		if p.IsNone() != (e.Mode == ua.MessageSecurityModeNone) ||
			(e.Mode != ua.MessageSecurityModeNone && e.Mode != ua.MessageSecurityModeSign && e.Mode != ua.MessageSecurityModeSignAndEncrypt) {
			return cfg, fmt.Errorf("server: Config.Policies[%d]: mode %s does not fit %s", i, e.Mode, p.Name)
		}
	}
	if (cfg.Certificate == nil) != (cfg.Key == nil) {
		return cfg, errors.New("server: Config.Certificate and Config.Key go together")
	}
	if len(cfg.Users) > maxUsers {
		return cfg, fmt.Errorf("server: Config.Users: %d users, at most %d", len(cfg.Users), maxUsers)
	}
	for u := range cfg.Users {
		if u == "" {
			return cfg, errors.New("server: Config.Users: empty user name")
		}
	}
	if cfg.DisableAnonymous && len(cfg.Users) == 0 && cfg.DisableX509Users {
		return cfg, errors.New("server: Config: anonymous, user name and X.509 identities all disabled")
	}
	pos := func(v *int, d int, name string) error {
		if *v < 0 {
			return fmt.Errorf("server: Config.%s %d is negative", name, *v)
		}
		if *v == 0 {
			*v = d
		}
		return nil
	}
	procs := runtime.GOMAXPROCS(0)
	for _, f := range []struct {
		v    *int
		d    int
		name string
	}{
		{&cfg.MaxSessionCount, DefaultMaxSessionCount, "MaxSessionCount"},
		{&cfg.MaxSubscriptionCount, DefaultMaxSubscriptionCount, "MaxSubscriptionCount"},
		{&cfg.MaxSubscriptionsPerSession, DefaultMaxSubscriptionsPerSession, "MaxSubscriptionsPerSession"},
		{&cfg.MaxMonitoredItemsPerSubscription, DefaultMaxMonitoredItemsPerSubscription, "MaxMonitoredItemsPerSubscription"},
		{&cfg.MaxMonitoredItems, DefaultMaxMonitoredItems, "MaxMonitoredItems"},
		{&cfg.MaxPublishRequestsPerSession, DefaultMaxPublishRequestsPerSession, "MaxPublishRequestsPerSession"},
		{&cfg.MaxRetransmissionQueue, DefaultMaxRetransmissionQueue, "MaxRetransmissionQueue"},
		{&cfg.MinWorkers, procs, "MinWorkers"},
		{&cfg.MaxWorkers, DefaultMaxWorkersPerCPU * procs, "MaxWorkers"},
		{&cfg.MaxQueuedRequests, DefaultMaxQueuedRequests, "MaxQueuedRequests"},
		{&cfg.MaxBrowseContinuationPoints, DefaultMaxBrowseContinuationPoints, "MaxBrowseContinuationPoints"},
		{&cfg.MaxHistoryContinuationPoints, DefaultMaxBrowseContinuationPoints, "MaxHistoryContinuationPoints"},
		{&cfg.MaxReferencesPerNode, DefaultMaxReferencesPerNode, "MaxReferencesPerNode"},
	} {
		if err := pos(f.v, f.d, f.name); err != nil {
			return cfg, err
		}
	}
	if err := pos(&cfg.MaxChannelCount, cfg.MaxSessionCount+DefaultMaxChannelsAboveSessions, "MaxChannelCount"); err != nil {
		return cfg, err
	}
	if cfg.MaxWorkers < cfg.MinWorkers {
		return cfg, fmt.Errorf("server: Config.MaxWorkers %d below MinWorkers %d", cfg.MaxWorkers, cfg.MinWorkers)
	}
	cfg.MaxBrowseContinuationPoints = min(cfg.MaxBrowseContinuationPoints, maxContinuationPointsPerSession)
	cfg.MaxHistoryContinuationPoints = min(cfg.MaxHistoryContinuationPoints, maxContinuationPointsPerSession)
	dur := func(v *time.Duration, d time.Duration, name string) error {
		if *v < 0 {
			return fmt.Errorf("server: Config.%s %v is negative", name, *v)
		}
		if *v == 0 {
			*v = d
		}
		return nil
	}
	for _, f := range []struct {
		v    *time.Duration
		d    time.Duration
		name string
	}{
		{&cfg.MinSessionTimeout, DefaultMinSessionTimeout, "MinSessionTimeout"},
		{&cfg.MaxSessionTimeout, DefaultMaxSessionTimeout, "MaxSessionTimeout"},
		{&cfg.MinPublishingInterval, DefaultMinPublishingInterval, "MinPublishingInterval"},
		{&cfg.MaxPublishingInterval, DefaultMaxPublishingInterval, "MaxPublishingInterval"},
		{&cfg.MinSamplingInterval, DefaultMinSamplingInterval, "MinSamplingInterval"},
		{&cfg.PublishResolution, DefaultPublishResolution, "PublishResolution"},
	} {
		if err := dur(f.v, f.d, f.name); err != nil {
			return cfg, err
		}
	}
	if cfg.MinSessionTimeout > cfg.MaxSessionTimeout {
		return cfg, fmt.Errorf("server: Config.MinSessionTimeout %v above MaxSessionTimeout %v", cfg.MinSessionTimeout, cfg.MaxSessionTimeout)
	}
	if cfg.MinPublishingInterval > cfg.MaxPublishingInterval {
		return cfg, fmt.Errorf("server: Config.MinPublishingInterval %v above MaxPublishingInterval %v", cfg.MinPublishingInterval, cfg.MaxPublishingInterval)
	}
	u32 := func(v *uint32, d uint32) {
		if *v == 0 {
			*v = d
		}
	}
	u32(&cfg.MaxQueueSize, DefaultMaxQueueSize)
	u32(&cfg.MaxNotificationsPerPublish, DefaultMaxNotificationsPerPublish)
	u32(&cfg.MaxKeepAliveCount, DefaultMaxKeepAliveCount)
	u32(&cfg.MaxLifetimeCount, DefaultMaxLifetimeCount)
	for _, v := range []*uint32{&cfg.MaxNodesPerRead, &cfg.MaxNodesPerWrite, &cfg.MaxNodesPerBrowse,
		&cfg.MaxNodesPerMethodCall, &cfg.MaxNodesPerRegisterNodes, &cfg.MaxNodesPerTranslateBrowsePathsToNodeIDs,
		&cfg.MaxNodesPerHistoryReadData} {
		u32(v, DefaultMaxNodesPerOperation)
	}
	u32(&cfg.MaxMonitoredItemsPerCall, DefaultMaxMonitoredItemsPerCall)
	if cfg.Transport == nil {
		cfg.Transport = &uacp.Config{MaxPendingHandshakes: DefaultMaxPendingHandshakes}
	} else {
		t := *cfg.Transport
		cfg.Transport = &t
	}
	if err := cfg.Transport.Validate(); err != nil {
		return cfg, fmt.Errorf("server: Config.Transport: %w", err)
	}
	if err := cfg.Sim.resolve(); err != nil {
		return cfg, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// needsCertificate reports whether the server needs a certificate: for a secure
// policy, or to let clients encrypt passwords and sign X.509 user tokens.
func (c *Config) needsCertificate() bool {
	for _, e := range c.Policies {
		if e.PolicyURI != uasc.SecurityPolicyNone {
			return true
		}
	}
	return len(c.Users) > 0 || !c.DisableX509Users
}

// advertisedURL is the endpoint URL for a listener bound to addr.
func advertisedURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "opc.tcp://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		} else {
			host = "localhost"
		}
	}
	p, _ := strconv.Atoi(port)
	return "opc.tcp://" + net.JoinHostPort(host, strconv.Itoa(p))
}
