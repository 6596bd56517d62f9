package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// Limits that Validate enforces.
const (
	MaxQueueSize      = 10000   // monitored item queue
	MaxSinkQueueSize  = 1 << 20 // messages in a sink's queue
	MinSinkQueueBytes = 1 << 10 // payload bytes in a sink's queue
	MaxSinkQueueBytes = 1 << 30
	MaxWebSocketQueue = 1 << 16
	MaxUnackedLimit   = 1 << 16
	// MaxNotificationsPerPublishLimit bounds maxNotificationsPerPublish.
	MaxNotificationsPerPublishLimit = 1 << 20
	MinGroupMessageSize             = 1 << 10
	MaxGroupMessageSize             = 64 << 20
	MinEndpointMessage              = 8192
	MaxEndpointMessage              = 1 << 30
	MaxEndpointSessions             = 64
	MaxBrowseDepth                  = 32
	MaxBrowseNodes                  = 1000000
	MaxFieldsPerWriter              = 65535
	MinPublishingInterval           = time.Millisecond
)

// validator collects validation issues; every message names the field by its
// path and says why.
type validator struct {
	errs  []Issue
	warns []Issue
}

func (v *validator) errorf(path, format string, args ...any) {
	v.errs = append(v.errs, Issue{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) warnf(path, format string, args ...any) {
	v.warns = append(v.warns, Issue{Path: path, Message: fmt.Sprintf(format, args...)})
}

// Validate checks a configuration with defaults applied (ApplyDefaults) and
// returns every problem as an *Error; nil when it can be used. Issues carry
// field paths but no positions: Load and Parse add file and line.
func (c *Config) Validate() error {
	errs, _ := c.validate()
	return asError(errs)
}

// validate returns the errors and the warnings.
func (c *Config) validate() (errs, warns []Issue) {
	v := &validator{}
	c.validateGateway(v)
	endpoints := map[string]bool{}
	for i := range c.Endpoints {
		p := "endpoints[" + strconv.Itoa(i) + "]"
		e := &c.Endpoints[i]
		e.validate(v, p)
		if e.Name != "" {
			if endpoints[e.Name] {
				v.errorf(p+".name", "endpoint %q is defined twice", e.Name)
			}
			endpoints[e.Name] = true
		}
		if e.URL == EmbeddedSimURL && c.Embedded.Sim.Enabled != nil && !*c.Embedded.Sim.Enabled {
			v.errorf(p+".url", "%s needs the embedded simulation server, which embedded.sim.enabled switches off", EmbeddedSimURL)
		}
	}
	groups := map[string]bool{}
	// Part 14 §6.2.4.1: a DataSetWriterId is unique across all the writers
	// of a PublisherId, that is of the whole configuration.
	type place struct{ g, w int }
	writerIDs := map[uint16]place{}
	for i := range c.WriterGroups {
		p := "writerGroups[" + strconv.Itoa(i) + "]"
		wg := &c.WriterGroups[i]
		wg.validate(v, p)
		for j := range wg.Writers {
			w := &wg.Writers[j]
			if w.ID == 0 {
				continue
			}
			if o, dup := writerIDs[w.ID]; !dup {
				writerIDs[w.ID] = place{i, j}
			} else if og := &c.WriterGroups[o.g]; o.g != i && og.Name != wg.Name { // else said already
				v.errorf(fmt.Sprintf("%s.writers[%d].id", p, j), "%d is also the DataSetWriterId of writerGroups[%d].writers[%d] (writer %q of group %q): DataSetWriterIds are unique per PublisherId",
					w.ID, o.g, o.w, og.Writers[o.w].Name, og.Name)
			}
		}
		if wg.Name != "" {
			if groups[wg.Name] {
				v.errorf(p+".name", "writer group %q is defined twice", wg.Name)
			}
			groups[wg.Name] = true
		}
		switch {
		case wg.Endpoint == "":
			v.errorf(p+".endpoint", "missing: name the endpoint the group subscribes to")
		case !endpoints[wg.Endpoint]:
			v.errorf(p+".endpoint", "no endpoint is named %q", wg.Endpoint)
		}
	}
	c.validateSinks(v)
	c.ScaleOut.validate(v)
	c.validateCommands(v)
	if c.StoreOn() {
		c.StoreAndForward.validate(v)
	}
	for i := range c.WriterGroups {
		wg := &c.WriterGroups[i]
		p := fmt.Sprintf("writerGroups[%d].storeAndForward", i)
		gs := wg.StoreAndForward
		switch {
		case gs == GroupStore{}:
		case !c.StoreOn():
			v.errorf(p, "the store-and-forward log is off (storeAndForward.enabled false, or scale-out): a group's bounds in it mean nothing")
		default:
			if gs.MaxBytes != 0 && (gs.MaxBytes < MinGroupStoreBytes || gs.MaxBytes > c.StoreAndForward.MaxBytes) {
				v.errorf(p+".maxBytes", "%d: want %d (64 KiB) to storeAndForward.maxBytes (%d), or 0 for the gateway's bound", gs.MaxBytes, MinGroupStoreBytes, c.StoreAndForward.MaxBytes)
			}
			if gs.MaxAge < 0 {
				v.errorf(p+".maxAge", "%v: must not be negative", gs.MaxAge)
			}
		}
	}
	if c.ScaleOut.Enabled && c.StoreOn() {
		v.errorf("storeAndForward.enabled", "not with scaleOut: a writer group moves between replicas with its subscription at the server, and what one replica appended to its own disk would not move with it (leave it unset: it is off under scale-out)")
	}
	return v.errs, v.warns
}

// validate checks the log's settings (when it is on).
func (sf *StoreAndForward) validate(v *validator) {
	const p = "storeAndForward"
	if sf.MaxBytes < MinStoreMaxBytes {
		v.errorf(p+".maxBytes", "%d: at least %d (1 MiB)", sf.MaxBytes, MinStoreMaxBytes)
	}
	if sf.MaxAge < 0 {
		v.errorf(p+".maxAge", "%v: must not be negative", sf.MaxAge)
	}
	if sf.CommitInterval < 0 || sf.CommitInterval.D() > time.Second {
		v.errorf(p+".commitInterval", "%v: want 0 to 1s", sf.CommitInterval)
	}
	if _, err := ParsePolicy(string(sf.Policy)); err != nil {
		v.errorf(p+".policy", "%v", err)
	}
}

// validate checks the scale-out settings (only when enabled: a disabled
// section may be left half-filled).
func (so *ScaleOut) validate(v *validator) {
	if !so.Enabled {
		return
	}
	const p = "scaleOut"
	if strings.TrimSpace(so.NATSURL) == "" {
		v.errorf(p+".natsUrl", "missing: the NATS server(s) that keep the leases (nats://host:4222[,…])")
	} else {
		for _, u := range strings.Split(so.NATSURL, ",") {
			checkURL(v, p+".natsUrl", strings.TrimSpace(u), "a list of them", "nats", "tls", "ws", "wss")
		}
	}
	if !validBucket(so.Bucket) {
		v.errorf(p+".bucket", "%q: want letters, digits, - and _ only (a JetStream key-value bucket)", so.Bucket)
	}
	if so.Replicas < 0 || so.Replicas > 5 {
		v.errorf(p+".replicas", "%d: want 0 (automatic) to 5", so.Replicas)
	}
	if so.LeaseTTL.D() < MinLeaseTTL {
		v.errorf(p+".leaseTTL", "%v: at least %v (a holder renews every third of it)", so.LeaseTTL, Duration(MinLeaseTTL))
	} else if so.LeaseTTL.D() > time.Hour {
		v.errorf(p+".leaseTTL", "%v: at most 1h (a dead replica's groups wait that long)", so.LeaseTTL)
	}
	if so.ReplicaID == "" {
		v.errorf(p+".replicaId", "missing, and the host name is unknown")
	} else if i := strings.IndexFunc(so.ReplicaID, func(r rune) bool { return r <= ' ' || r == 0x7f }); i >= 0 {
		v.errorf(p+".replicaId", "%q: no white space or control characters", so.ReplicaID)
	} else if len(so.ReplicaID) > 200 {
		v.errorf(p+".replicaId", "%d bytes: at most 200", len(so.ReplicaID))
	}
	auth := 0
	for _, set := range []bool{so.Username != "" || so.Password.IsSet(), so.Token.IsSet(), so.CredsFile != "", so.NKeyFile != ""} {
		if set {
			auth++
		}
	}
	if auth > 1 {
		v.errorf(p, "give one of username/password, token, credsFile, nkeyFile")
	}
	if so.Password.IsSet() && so.Username == "" {
		v.errorf(p+".password", "a password needs a username")
	}
	checkTLS(v, p+".tls", so.TLS)
}

func validBucket(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func (c *Config) validateGateway(v *validator) {
	g := &c.Gateway
	checkName(v, "gateway.publisherId", g.PublisherID)
	if g.StateDir == "" {
		v.errorf("gateway.stateDir", "missing")
	}
	if g.ShutdownTimeout <= 0 {
		v.errorf("gateway.shutdownTimeout", "%v: must be positive", g.ShutdownTimeout)
	}
	for _, p := range []struct {
		path string
		part EmbeddedPart
	}{{"embedded.sim", c.Embedded.Sim}, {"embedded.mqtt", c.Embedded.MQTT}, {"embedded.nats", c.Embedded.NATS}} {
		if p.part.On() {
			checkListen(v, p.path+".listen", p.part.Listen)
		}
	}
	c.validateSecretFiles(v)
	if !c.HTTP.Disabled {
		checkListen(v, "http.listen", c.HTTP.Listen)
		c.HTTP.validate(v)
	} else if c.Sinks.WebSocket != nil {
		v.errorf("sinks.websocket", "the WebSocket stream needs the HTTP listener, which http.disabled switches off")
	}
}

// SystemSecretDirs are where secret files may be read from besides
// gateway.secretsDir: Docker's and the Helm chart's mounts.
var SystemSecretDirs = []string{"/run/secrets", "/etc/uagate/secrets"}

// SecretDirs are the directories a secret file of c may be in.
func (c *Config) SecretDirs() []string {
	return append([]string{c.Gateway.SecretsDir}, SystemSecretDirs...)
}

// validateSecretFiles refuses a secret file outside the secret
// directories: whoever may change the configuration (the API's admin role)
// must not be able to have any readable file sent as a password.
func (c *Config) validateSecretFiles(v *validator) {
	dirs := c.SecretDirs()
	for _, s := range c.secrets() {
		if f := s.secret.File; f != "" && !inDirs(f, dirs) {
			v.errorf(s.path, "secret file %s is outside the secret directories (%s); put it in one of them, or set gateway.secretsDir",
				f, strings.Join(dirs, ", "))
		}
	}
}

// inDirs reports whether path names a file below one of dirs (lexically:
// "..", relative paths and repeated separators resolved).
func inDirs(path string, dirs []string) bool {
	p, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		ad, err := filepath.Abs(d)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(ad, p); err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// checkName checks a name that becomes a topic level or subject token: MQTT
// and NATS wildcards and separators would change the topic's meaning.
func checkName(v *validator, p, name string) {
	if name == "" {
		v.errorf(p, "missing")
		return
	}
	if i := strings.IndexFunc(name, func(r rune) bool { return !NameRune(r) }); i >= 0 {
		v.errorf(p, "%q: %q is not allowed in a name (it is a topic level: no / + # * > or white space)", name, name[i:i+1])
	}
}

// NameRune reports whether r may be part of a name that becomes a topic
// level or subject token (the publisher id, writer groups, writers): not an
// MQTT or NATS wildcard or separator, white space or a control character.
func NameRune(r rune) bool {
	return !strings.ContainsRune("/+#*>", r) && r > ' ' && r != 0x7f
}

// UniqueName returns name, or name_2, name_3 … whichever is not taken: how
// a name given twice is told apart (fields found by browsing, the parts OPC
// Publisher's format names).
func UniqueName(name string, taken func(string) bool) string {
	if !taken(name) {
		return name
	}
	for i := 2; ; i++ {
		if n := name + "_" + strconv.Itoa(i); !taken(n) {
			return n
		}
	}
}

func checkListen(v *validator, p, addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.errorf(p, "%q: want host:port (e.g. 127.0.0.1:8080, :8080)", addr)
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		v.errorf(p, "%q: port %q is not a number from 0 to 65535", addr, port)
	}
}

// validate checks one endpoint.
func (e *Endpoint) validate(v *validator, p string) {
	if e.Name == "" {
		v.errorf(p+".name", "missing")
	}
	switch {
	case e.URL == "":
		v.errorf(p+".url", "missing")
	case e.URL == EmbeddedSimURL:
	default:
		u, err := url.Parse(e.URL)
		if err != nil || u.Scheme != "opc.tcp" || u.Host == "" {
			v.errorf(p+".url", "%q: want opc.tcp://host:port[/path] or %s", e.URL, EmbeddedSimURL)
		}
	}
	e.validateConnection(v, p)
	if e.AutoAccept && e.URL != EmbeddedSimURL {
		v.warnf(p+".autoAccept", "trusts any server certificate: for development only")
	}
}

// validateConnection checks the settings that make the client.Config (all
// but name and URL): what ClientConfig relies on.
func (e *Endpoint) validateConnection(v *validator, p string) {
	var pol *uasc.Policy
	if e.SecurityPolicy != "" && !strings.EqualFold(e.SecurityPolicy, SecurityBest) {
		uri, err := client.ParseSecurityPolicy(e.SecurityPolicy)
		if err != nil {
			v.errorf(p+".securityPolicy", "%q is not a security policy (want best, or one of %s, or a policy URI)", e.SecurityPolicy, policyNames())
		} else {
			pol, _ = uasc.PolicyByURI(uri)
			if pol != nil && pol.Deprecated && !e.AllowDeprecated {
				v.errorf(p+".securityPolicy", "%s is deprecated; set allowDeprecated: true to use it", pol.Name)
			}
		}
	}
	mode := ua.MessageSecurityModeInvalid
	if e.SecurityMode != "" && !strings.EqualFold(e.SecurityMode, SecurityBest) {
		m, err := client.ParseSecurityMode(e.SecurityMode)
		if err != nil {
			v.errorf(p+".securityMode", "%q is not a security mode (want best, None, Sign or SignAndEncrypt)", e.SecurityMode)
		}
		mode = m
	}
	if pol != nil {
		if pol.IsNone() && (mode == ua.MessageSecurityModeSign || mode == ua.MessageSecurityModeSignAndEncrypt) {
			v.errorf(p+".securityMode", "%s does not go with securityPolicy None", e.SecurityMode)
		}
		if !pol.IsNone() && mode == ua.MessageSecurityModeNone {
			v.errorf(p+".securityMode", "None does not go with securityPolicy %s", pol.Name)
		}
	}
	id := &e.Identity
	ip := p + ".identity"
	switch id.Type {
	case IdentityAnonymous:
		if id.Username != "" || id.Password.IsSet() || id.CertFile != "" || id.KeyFile != "" {
			v.errorf(ip+".type", "anonymous takes no username, password, certFile or keyFile")
		}
	case IdentityUsername:
		if id.Username == "" {
			v.errorf(ip+".username", "missing: type username needs a username")
		}
		if id.CertFile != "" || id.KeyFile != "" {
			v.errorf(ip+".type", "username takes no certFile or keyFile (they are for type x509)")
		}
	case IdentityX509:
		if id.CertFile == "" || id.KeyFile == "" {
			v.errorf(ip, "type x509 needs certFile and keyFile")
		}
		if id.Username != "" || id.Password.IsSet() {
			v.errorf(ip+".type", "x509 takes no username or password")
		}
	default:
		v.errorf(ip+".type", "%q is not an identity type (want anonymous, username or x509)", id.Type)
	}
	if e.PKI == "" {
		v.errorf(p+".pki", "missing")
	}
	if e.RequestTimeout <= 0 {
		v.errorf(p+".requestTimeout", "%v: must be positive", e.RequestTimeout)
	}
	if e.SessionTimeout < 0 {
		v.errorf(p+".sessionTimeout", "%v: must not be negative", e.SessionTimeout)
	}
	if e.MaxMessageSize != 0 && (e.MaxMessageSize < MinEndpointMessage || e.MaxMessageSize > MaxEndpointMessage) {
		v.errorf(p+".maxMessageSize", "%d: want 0 (the default) or %d to %d bytes", e.MaxMessageSize, MinEndpointMessage, MaxEndpointMessage)
	}
	if e.Sessions < 1 || e.Sessions > MaxEndpointSessions {
		v.errorf(p+".sessions", "%d: want 1 to %d", e.Sessions, MaxEndpointSessions)
	}
}

func policyNames() string {
	var names []string
	for _, p := range uasc.Policies() {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

func (wg *WriterGroup) validate(v *validator, p string) {
	checkName(v, p+".name", wg.Name)
	if wg.PublishingInterval < Duration(MinPublishingInterval) {
		v.errorf(p+".publishingInterval", "%v: must be at least %v", wg.PublishingInterval, MinPublishingInterval)
	}
	if wg.KeyFrameCount < 0 {
		v.errorf(p+".keyFrameCount", "%d: must not be negative (1: every message is a key frame)", wg.KeyFrameCount)
	}
	if wg.MaxMessageSize < MinGroupMessageSize || wg.MaxMessageSize > MaxGroupMessageSize {
		v.errorf(p+".maxMessageSize", "%d: want %d to %d bytes", wg.MaxMessageSize, MinGroupMessageSize, MaxGroupMessageSize)
	}
	oneOf(v, p+".messageShape", wg.MessageShape, ShapeSingle, ShapeBatched)
	oneOf(v, p+".fieldEncoding", wg.FieldEncoding, FieldVariant, FieldDataValue, FieldRaw)
	switch {
	case len(wg.FieldContent) == 0:
	case wg.FieldEncoding != FieldDataValue:
		v.errorf(p+".fieldContent", "applies to fieldEncoding %s, not %s", FieldDataValue, wg.FieldEncoding)
	case wg.Format == FormatSamples:
		v.errorf(p+".fieldContent", "applies to format %s: %s messages carry OPC Publisher's fixed members", FormatPart14, FormatSamples)
	}
	for i, m := range wg.FieldContent {
		oneOf(v, fmt.Sprintf("%s.fieldContent[%d]", p, i), m, FieldContents...)
		if slices.Contains(wg.FieldContent[:i], m) {
			v.errorf(fmt.Sprintf("%s.fieldContent[%d]", p, i), "%s named twice", m)
		}
	}
	oneOf(v, p+".encoding", wg.Encoding, EncodingCompact, EncodingVerbose)
	oneOf(v, p+".format", wg.Format, FormatPart14, FormatSamples)
	if wg.Backfill != "" {
		oneOf(v, p+".backfill", wg.Backfill, BackfillNone, BackfillHistory)
	}
	if wg.MaxUnacked < 1 || wg.MaxUnacked > MaxUnackedLimit {
		v.errorf(p+".maxUnacked", "%d: want 1 to %d", wg.MaxUnacked, MaxUnackedLimit)
	}
	if wg.MaxNotificationsPerPublish > MaxNotificationsPerPublishLimit {
		v.errorf(p+".maxNotificationsPerPublish", "%d: want 1 to %d, or negative for the server's own bound", wg.MaxNotificationsPerPublish, MaxNotificationsPerPublishLimit)
	}
	nd := &wg.Nodes
	checkMonitoring(v, p+".nodes", nd.SamplingInterval, nd.QueueSize, nd.Deadband, nd.Trigger, nd.Heartbeat)
	if len(wg.Writers) == 0 {
		v.errorf(p+".writers", "none: a writer group needs at least one writer")
	}
	ids := map[uint16]int{}
	names := map[string]bool{}
	for i := range wg.Writers {
		wp := p + ".writers[" + strconv.Itoa(i) + "]"
		w := &wg.Writers[i]
		if w.ID == 0 {
			v.errorf(wp+".id", "0 is the null DataSetWriterId; want 1 to 65535")
		} else if j, dup := ids[w.ID]; dup {
			v.errorf(wp+".id", "%d is also the id of writers[%d]", w.ID, j)
		} else {
			ids[w.ID] = i
		}
		checkName(v, wp+".name", w.Name)
		if w.Name != "" {
			if names[w.Name] {
				v.errorf(wp+".name", "writer %q is defined twice in the group", w.Name)
			}
			names[w.Name] = true
		}
		w.validate(v, wp)
	}
}

func oneOf(v *validator, p, s string, allowed ...string) {
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	v.errorf(p, "%q: want %s", s, orList(allowed))
}

func orList(s []string) string {
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// checkMonitoring checks the monitored item settings shared by node defaults
// and fields.
func checkMonitoring(v *validator, p string, si *Duration, queue uint32, db Deadband, trigger string, hb Duration) {
	if si != nil && *si < 0 {
		v.errorf(p+".samplingInterval", "%v: must not be negative (0: the server's fastest)", *si)
	}
	if queue > MaxQueueSize {
		v.errorf(p+".queueSize", "%d: at most %d", queue, MaxQueueSize)
	}
	switch db.Type {
	case DeadbandNone, "":
		if db.Value != 0 {
			v.errorf(p+".deadband.value", "%v without a deadband type: set type absolute or percent", db.Value)
		}
	case DeadbandAbsolute:
		if db.Value < 0 {
			v.errorf(p+".deadband.value", "%v: must not be negative", db.Value)
		}
	case DeadbandPercent:
		if db.Value < 0 || db.Value > 100 {
			v.errorf(p+".deadband.value", "%v: a percentage from 0 to 100", db.Value)
		}
	default:
		v.errorf(p+".deadband.type", "%q: want none, absolute or percent", db.Type)
	}
	if trigger != "" {
		oneOf(v, p+".trigger", trigger, TriggerStatus, TriggerStatusValue, TriggerStatusValueTimestamp)
	}
	if hb < 0 {
		v.errorf(p+".heartbeat", "%v: must not be negative (0: no heartbeat)", hb)
	}
}

func (w *DataSetWriter) validate(v *validator, p string) {
	if len(w.Fields) == 0 && len(w.Browse) == 0 {
		v.errorf(p, "no fields and no browse: a writer needs at least one")
	}
	if len(w.Fields) > MaxFieldsPerWriter {
		v.errorf(p+".fields", "%d fields: at most %d", len(w.Fields), MaxFieldsPerWriter)
	}
	names := map[string]int{}
	for i := range w.Fields {
		fp := p + ".fields[" + strconv.Itoa(i) + "]"
		f := &w.Fields[i]
		if f.Name == "" {
			v.errorf(fp+".name", "missing")
		} else if j, dup := names[f.Name]; dup {
			v.errorf(fp+".name", "%q is also the name of fields[%d]", f.Name, j)
		} else {
			names[f.Name] = i
		}
		checkNode(v, fp+".node", f.Node)
		checkMonitoring(v, fp, f.SamplingInterval, f.QueueSize, f.Deadband, f.Trigger, f.Heartbeat)
		if ev := f.Events; ev != nil {
			if f.Deadband.Type != "" && f.Deadband.Type != DeadbandNone {
				v.errorf(fp+".deadband", "an event field has no deadband")
			}
			if len(ev.Select) == 0 {
				v.errorf(fp+".events.select", "empty: select at least one event field (e.g. Message)")
			}
			for j, s := range ev.Select {
				if s == "" || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "//") {
					v.errorf(fp+".events.select["+strconv.Itoa(j)+"]", "%q: want a browse path such as Message or 2:Cycle/2:Step", s)
				}
			}
			if ev.OfType != "" {
				checkNode(v, fp+".events.ofType", ev.OfType)
			}
		}
	}
	for i := range w.Browse {
		bp := p + ".browse[" + strconv.Itoa(i) + "]"
		b := &w.Browse[i]
		if b.Root == "" {
			v.errorf(bp+".root", "missing: the node to browse from")
		} else {
			checkNode(v, bp+".root", b.Root)
		}
		if b.Depth < 1 || b.Depth > MaxBrowseDepth {
			v.errorf(bp+".depth", "%d: want 1 to %d", b.Depth, MaxBrowseDepth)
		}
		if _, err := path.Match(b.Name, ""); err != nil {
			v.errorf(bp+".name", "%q is not a valid pattern (path.Match syntax: * ? [a-z] \\)", b.Name)
		}
		for j, dt := range b.DataTypes {
			if _, err := ParseDataType(dt); err != nil {
				v.errorf(bp+".dataTypes["+strconv.Itoa(j)+"]", "%v", err)
			}
		}
		if b.MaxNodes < 1 || b.MaxNodes > MaxBrowseNodes {
			v.errorf(bp+".maxNodes", "%d: want 1 to %d", b.MaxNodes, MaxBrowseNodes)
		}
	}
}

func checkNode(v *validator, p, node string) {
	if err := CheckNodeID(node); err != nil {
		v.errorf(p, "%v", err)
	}
}

// CheckNodeID checks the node id of a field; the error says what is wrong
// with it.
func CheckNodeID(node string) error {
	if node == "" {
		return errors.New("missing: a node id such as ns=1;s=Demo.Counter")
	}
	x, err := ua.ParseExpandedNodeID(node)
	if err != nil {
		return fmt.Errorf("%q is not a node id (want e.g. ns=1;s=Demo.Counter, i=2258 or nsu=<uri>;s=Name)", node)
	}
	if x.ServerIndex != 0 {
		return fmt.Errorf("%q is on another server (svr=): not supported", node)
	}
	return nil
}

// ParseDataType parses a data type filter of BrowseSelect: a built-in type
// name (Double, Int32 …, case-insensitive) or a DataType node id.
func ParseDataType(s string) (ua.ExpandedNodeID, error) {
	for t := ua.TypeBoolean; t <= ua.TypeDiagnosticInfo; t++ {
		if strings.EqualFold(s, t.String()) {
			return ua.NewExpandedNodeID(ua.NewNumericNodeID(0, uint32(t))), nil
		}
	}
	x, err := ua.ParseExpandedNodeID(s)
	if err != nil || s == "" {
		return ua.ExpandedNodeID{}, fmt.Errorf("%q is neither a built-in type name (Double, Int32, String …) nor a node id", s)
	}
	return x, nil
}

func (c *Config) validateSinks(v *validator) {
	names := map[string]string{}
	if c.Sinks.WebSocket != nil {
		names["websocket"] = "sinks.websocket" // its name in logs, metrics and Diff
	}
	name := func(p, n string) {
		if n == "" {
			v.errorf(p+".name", "missing")
			return
		}
		if other, dup := names[n]; dup {
			v.errorf(p+".name", "%q is also the name of %s", n, other)
			return
		}
		names[n] = p
	}
	for i := range c.Sinks.MQTT {
		p := "sinks.mqtt[" + strconv.Itoa(i) + "]"
		m := &c.Sinks.MQTT[i]
		name(p, m.Name)
		if m.URL != EmbeddedMQTTURL {
			checkURL(v, p+".url", m.URL, EmbeddedMQTTURL, "tcp", "mqtt", "ssl", "tls", "mqtts", "ws", "wss")
		} else if !c.Embedded.MQTT.On() {
			v.errorf(p+".url", "%s needs the embedded MQTT broker, which embedded.mqtt.enabled switches off", EmbeddedMQTTURL)
		}
		if m.QoS != nil && (*m.QoS < 0 || *m.QoS > 2) {
			v.errorf(p+".qos", "%d: want 0, 1 or 2", *m.QoS)
		}
		switch m.ProtocolVersion {
		case 0, MQTTv311:
			if m.MessageExpiry != 0 {
				v.errorf(p+".messageExpiry", "needs protocolVersion 5 (MQTT 3.1.1 has no message expiry)")
			}
		case MQTTv5:
			if e := m.MessageExpiry.D(); e < 0 || e > math.MaxUint32*time.Second {
				v.errorf(p+".messageExpiry", "%s: want 0 (none) up to %d seconds", e, uint32(math.MaxUint32))
			}
		default:
			v.errorf(p+".protocolVersion", "%d: want 4 (MQTT 3.1.1) or 5 (MQTT 5.0)", m.ProtocolVersion)
		}
		g := checkDelivery(v, p+".delivery", m.Delivery)
		if g == AtLeastOnce && m.QoS != nil && *m.QoS == 0 {
			v.errorf(p+".qos", "0 has no acknowledgement: at-least-once needs qos 1 or 2")
		}
		if m.Password.IsSet() && m.Username == "" {
			v.errorf(p+".password", "a password needs a username")
		}
		checkTemplate(v, p+".dataTopic", m.DataTopic, false)
		checkTemplate(v, p+".metaDataTopic", m.MetaDataTopic, false)
		checkTemplate(v, p+".statusTopic", m.StatusTopic, false)
		if pf := m.PerField; pf != nil {
			checkTemplate(v, p+".perField.topic", pf.Topic, true)
			oneOf(v, p+".perField.payload", pf.Payload, PayloadValue, PayloadDataValue)
		}
		if m.Sparkplug != nil {
			c.validateSparkplug(v, p, m, g)
		}
		checkTLS(v, p+".tls", m.TLS)
	}
	for i := range c.Sinks.NATS {
		p := "sinks.nats[" + strconv.Itoa(i) + "]"
		n := &c.Sinks.NATS[i]
		name(p, n.Name)
		if n.URL != EmbeddedNATSURL {
			for _, u := range strings.Split(n.URL, ",") {
				checkURL(v, p+".url", strings.TrimSpace(u), EmbeddedNATSURL, "nats", "tls", "ws", "wss")
			}
		} else if !c.Embedded.NATS.On() {
			v.errorf(p+".url", "%s needs the embedded NATS server, which embedded.nats.enabled switches off", EmbeddedNATSURL)
		}
		g := checkDelivery(v, p+".delivery", n.Delivery)
		if g == AtLeastOnce && n.JetStream == nil {
			v.errorf(p+".delivery.guarantee", "at-least-once needs jetStream: core NATS does not acknowledge")
		}
		auth := 0
		for _, set := range []bool{n.Username != "" || n.Password.IsSet(), n.Token.IsSet(), n.CredsFile != "", n.NKeyFile != ""} {
			if set {
				auth++
			}
		}
		if auth > 1 {
			v.errorf(p, "give one of username/password, token, credsFile, nkeyFile")
		}
		if n.Password.IsSet() && n.Username == "" {
			v.errorf(p+".password", "a password needs a username")
		}
		checkTemplate(v, p+".dataSubject", n.DataSubject, false)
		checkTemplate(v, p+".metaDataSubject", n.MetaDataSubject, false)
		checkTemplate(v, p+".statusSubject", n.StatusSubject, false)
		if js := n.JetStream; js != nil {
			if js.Stream == "" {
				v.errorf(p+".jetStream.stream", "missing: the stream to publish to")
			}
			if js.MaxAge < 0 || js.MaxBytes < 0 {
				v.errorf(p+".jetStream", "maxAge and maxBytes must not be negative")
			}
		}
		checkTLS(v, p+".tls", n.TLS)
	}
	if ws := c.Sinks.WebSocket; ws != nil {
		p := "sinks.websocket"
		if !strings.HasPrefix(ws.Path, "/") {
			v.errorf(p+".path", "%q: must start with /", ws.Path)
		}
		if ws.ClientQueue < 1 || ws.ClientQueue > MaxWebSocketQueue {
			v.errorf(p+".clientQueue", "%d: want 1 to %d", ws.ClientQueue, MaxWebSocketQueue)
		}
	}
	for i := range c.Sinks.File {
		p := "sinks.file[" + strconv.Itoa(i) + "]"
		f := &c.Sinks.File[i]
		name(p, f.Name)
		if f.Path == "" {
			v.errorf(p+".path", "missing: a file name, or - for stdout")
		}
		checkDelivery(v, p+".delivery", f.Delivery)
	}
}

func checkURL(v *validator, p, s, embedded string, schemes ...string) {
	u, err := url.Parse(s)
	if err == nil && u.Host != "" {
		for _, sc := range schemes {
			if u.Scheme == sc {
				return
			}
		}
	}
	list := make([]string, len(schemes))
	for i, sc := range schemes {
		list[i] = sc + "://"
	}
	v.errorf(p, "%q: want a URL with scheme %s (host:port), or %s", s, strings.Join(list, " "), embedded)
}

func checkTLS(v *validator, p string, t *TLS) {
	if t == nil {
		return
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		v.errorf(p, "certFile and keyFile go together")
	}
	if t.InsecureSkipVerify {
		v.warnf(p+".insecureSkipVerify", "the broker's certificate is not verified: for development only")
	}
}

// checkDelivery checks a sink's delivery settings and returns its guarantee.
func checkDelivery(v *validator, p string, d Delivery) Guarantee {
	g, err := ParseGuarantee(string(d.Guarantee))
	if err != nil {
		v.errorf(p+".guarantee", "%v", err)
	}
	pol, err := ParsePolicy(string(d.Policy))
	if err != nil {
		v.errorf(p+".policy", "%v", err)
	}
	if d.QueueSize < 1 || d.QueueSize > MaxSinkQueueSize {
		v.errorf(p+".queueSize", "%d: want 1 to %d messages", d.QueueSize, MaxSinkQueueSize)
	}
	if d.QueueBytes < MinSinkQueueBytes || d.QueueBytes > MaxSinkQueueBytes {
		v.errorf(p+".queueBytes", "%d: want %d to %d bytes", d.QueueBytes, MinSinkQueueBytes, MaxSinkQueueBytes)
	}
	if g == AtLeastOnce && pol == DropOldest {
		v.warnf(p+".policy", "drop-oldest with at-least-once: a message dropped from a full queue is acknowledged upstream all the same, so at-least-once holds only while the queue has room")
	}
	return g
}

// Placeholders of topic and subject templates.
const (
	PlaceholderPublisherID   = "{PublisherId}"
	PlaceholderWriterGroup   = "{WriterGroup}"
	PlaceholderDataSetWriter = "{DataSetWriter}"
	PlaceholderField         = "{Field}"
)

// checkTemplate checks that a topic template uses only known placeholders
// ({Field} only in per-field topics) and no wildcard.
func checkTemplate(v *validator, p, tmpl string, perField bool) {
	if tmpl == "" {
		v.errorf(p, "missing")
		return
	}
	rest := tmpl
	for {
		i := strings.IndexByte(rest, '{')
		j := strings.IndexByte(rest, '}')
		if i < 0 {
			if j >= 0 {
				v.errorf(p, "%q: } without {", tmpl)
			}
			break
		}
		if j < i {
			v.errorf(p, "%q: unclosed or stray brace", tmpl)
			break
		}
		ph := rest[i : j+1]
		switch ph {
		case PlaceholderPublisherID, PlaceholderWriterGroup, PlaceholderDataSetWriter:
		case PlaceholderField:
			if !perField {
				v.errorf(p, "%q: {Field} is only known in perField.topic", tmpl)
			}
		default:
			v.errorf(p, "%q: unknown placeholder %s (want {PublisherId}, {WriterGroup}, {DataSetWriter}%s)", tmpl, ph, map[bool]string{true: " or {Field}", false: ""}[perField])
		}
		rest = rest[j+1:]
	}
	if strings.ContainsAny(tmpl, "#+*>") {
		v.errorf(p, "%q: a wildcard (# + * >) cannot be published to", tmpl)
	}
}

// validate checks the API settings of the HTTP listener.
func (h *HTTP) validate(v *validator) {
	names := map[string]bool{}
	for i, k := range h.APIKeys {
		p := "http.apiKeys[" + strconv.Itoa(i) + "]"
		if k.Role != "read" && k.Role != "admin" {
			v.errorf(p+".role", "%q: want read or admin", k.Role)
		}
		if !k.Token.IsSet() {
			v.errorf(p+".token", "missing")
		}
		if k.Name != "" {
			if names[k.Name] {
				v.errorf(p+".name", "key %q is defined twice", k.Name)
			}
			names[k.Name] = true
		}
	}
	if t := h.TLS; t != nil && (t.CertFile == "" || t.KeyFile == "") {
		v.errorf("http.tls", "certFile and keyFile go together")
	}
	for _, r := range []struct{ path, val string }{{"http.ready.endpoints", h.Ready.Endpoints}, {"http.ready.sinks", h.Ready.Sinks}} {
		switch r.val {
		case "", "all", "any", "none":
		default:
			v.errorf(r.path, "%q: want all, any or none", r.val)
		}
	}
	if h.ShutdownDelay < 0 {
		v.errorf("http.shutdownDelay", "%v: must not be negative", h.ShutdownDelay)
	}
	for i, host := range h.AllowedHosts {
		if host == "" || strings.ContainsAny(host, "/:@ \t") || (strings.Contains(host, "*") && host != "*") {
			v.errorf("http.allowedHosts["+strconv.Itoa(i)+"]", "%q: want a host name (no scheme, port or path), \".domain\" for its subdomains, or \"*\"", host)
		}
	}
}

// validateSparkplug checks the Sparkplug B mode of MQTT sink m (at p) whose
// delivery guarantee is g.
func (c *Config) validateSparkplug(v *validator, p string, m *MQTTSink, g Guarantee) {
	sp, base := m.Sparkplug, p
	p += ".sparkplug"
	checkSparkplugID(v, p+".groupId", sp.GroupID, true)
	checkSparkplugID(v, p+".edgeNodeId", sp.EdgeNodeID, true)
	checkSparkplugID(v, p+".primaryHostId", sp.PrimaryHostID, false)
	oneOf(v, p+".devices", sp.Devices, SparkplugDevicesWriter, SparkplugDevicesEndpoint)
	if sp.StoreBytes < 1024 || sp.StoreBytes > MaxSparkplugStoreBytes {
		v.errorf(p+".storeBytes", "%d: want 1024 to %d", sp.StoreBytes, MaxSparkplugStoreBytes)
	}
	if g == AtLeastOnce {
		v.errorf(base+".delivery.guarantee", "Sparkplug B publishes its data with QoS 0: at-most-once (what the node cannot send is held in its store and sent after the next birth)")
	}
	if m.CleanSession != nil && !*m.CleanSession {
		v.errorf(base+".cleanSession", "Sparkplug B needs a clean session (3.0 §5.2)")
	}
	if m.PerField != nil {
		v.errorf(base+".perField", "not with sparkplug: the metrics are the fields")
	}
	if m.ProtocolVersion == 5 {
		v.errorf(base+".protocolVersion", "5: the Sparkplug B node speaks MQTT 3.1.1 (protocolVersion 4)")
	}
	if c.ScaleOut.Enabled {
		// Every replica would be the same Edge Node, each with a part of
		// its devices.
		v.errorf(p, "not with scaleOut: the replicas would share one edge node id")
	}
	if sp.Devices != SparkplugDevicesWriter {
		return
	}
	// Device ids are <writerGroup>.<writer>: they must not meet.
	seen := map[string]string{}
	for _, wg := range c.WriterGroups {
		for _, w := range wg.Writers {
			id := wg.Name + "." + w.Name
			if other, dup := seen[id]; dup {
				v.errorf(p+".devices", "writer %s of group %s and %s make the same device id %q", w.Name, wg.Name, other, id)
			}
			seen[id] = "writer " + w.Name + " of group " + wg.Name
		}
	}
}

// checkSparkplugID checks a Sparkplug id (group, edge node, host): UTF-8
// without + / # (3.0 §4.1.1).
func checkSparkplugID(v *validator, p, id string, required bool) {
	switch {
	case id == "" && required:
		v.errorf(p, "missing")
	case strings.ContainsAny(id, "+/#"):
		v.errorf(p, "%q: + / and # are not allowed", id)
	case !utf8.ValidString(id):
		v.errorf(p, "not UTF-8")
	}
}
