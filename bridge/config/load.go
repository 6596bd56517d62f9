package config

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
)

// MaxFileSize bounds a configuration file.
const MaxFileSize = 16 << 20

// Environment variables that override settings of the file. They are applied
// after the file is read and before defaults, so check-config shows their
// effect and validation checks their values (an issue caused by one names the
// variable instead of a line):
//
//	UAGATE_PUBLISHER_ID              gateway.publisherId
//	UAGATE_STATE_DIR                 gateway.stateDir
//	UAGATE_HTTP_LISTEN               http.listen
//	UAGATE_API_KEYS_FILE             http.keysFile
//	UAGATE_HTTP_ALLOW_UNAUTHENTICATED http.allowUnauthenticated (true or false)
//	UAGATE_HTTP_ALLOWED_HOSTS        http.allowedHosts (comma-separated)
//	UAGATE_HTTP_PUBLIC_METRICS       http.publicMetrics (true or false)
//	UAGATE_HTTP_READY_ENDPOINTS      http.ready.endpoints (all, any, none)
//	UAGATE_HTTP_READY_SINKS          http.ready.sinks (all, any, none)
//	UAGATE_SECRETS_DIR               gateway.secretsDir
//	UAGATE_APPLICATION_URI           gateway.applicationUri
//	UAGATE_PKI_SEED                  gateway.pkiSeed
//	UAGATE_SIM_LISTEN                embedded.sim.listen
//	UAGATE_MQTT_LISTEN               embedded.mqtt.listen
//	UAGATE_NATS_LISTEN               embedded.nats.listen
//	UAGATE_SCALEOUT_ENABLED          scaleOut.enabled (true, false, 1, 0)
//	UAGATE_SCALEOUT_NATS_URL         scaleOut.natsUrl
//	UAGATE_SCALEOUT_BUCKET           scaleOut.bucket
//	UAGATE_SCALEOUT_LEASE_TTL        scaleOut.leaseTTL (a duration: 15s)
//	UAGATE_SCALEOUT_REPLICA_ID       scaleOut.replicaId
//	UAGATE_ENDPOINT_<NAME>_URL       url of the endpoint named NAME
//	UAGATE_ENDPOINT_<NAME>_USERNAME  identity.username of that endpoint
//	UAGATE_ENDPOINT_<NAME>_PASSWORD  identity.password of that endpoint (as {env: UAGATE_ENDPOINT_<NAME>_PASSWORD})
//
// <NAME> is the endpoint's name in upper case with every character other than
// A-Z and 0-9 replaced by '_' (endpoint "plc-1" → UAGATE_ENDPOINT_PLC_1_URL).
// A UAGATE_ENDPOINT_… variable that names no configured endpoint is a
// warning. An empty variable counts as unset.
const EnvPrefix = "UAGATE_"

// envSettings are the top-level overrides.
var envSettings = []struct {
	name, path string
	field      func(*Config) *string
}{
	{"UAGATE_PUBLISHER_ID", "gateway.publisherId", func(c *Config) *string { return &c.Gateway.PublisherID }},
	{"UAGATE_STATE_DIR", "gateway.stateDir", func(c *Config) *string { return &c.Gateway.StateDir }},
	{"UAGATE_HTTP_LISTEN", "http.listen", func(c *Config) *string { return &c.HTTP.Listen }},
	{"UAGATE_API_KEYS_FILE", "http.keysFile", func(c *Config) *string { return &c.HTTP.KeysFile }},
	{"UAGATE_HTTP_READY_ENDPOINTS", "http.ready.endpoints", func(c *Config) *string { return &c.HTTP.Ready.Endpoints }},
	{"UAGATE_HTTP_READY_SINKS", "http.ready.sinks", func(c *Config) *string { return &c.HTTP.Ready.Sinks }},
	{"UAGATE_SECRETS_DIR", "gateway.secretsDir", func(c *Config) *string { return &c.Gateway.SecretsDir }},
	{"UAGATE_APPLICATION_URI", "gateway.applicationUri", func(c *Config) *string { return &c.Gateway.ApplicationURI }},
	{"UAGATE_PKI_SEED", "gateway.pkiSeed", func(c *Config) *string { return &c.Gateway.PKISeed }},
	{"UAGATE_SIM_LISTEN", "embedded.sim.listen", func(c *Config) *string { return &c.Embedded.Sim.Listen }},
	{"UAGATE_MQTT_LISTEN", "embedded.mqtt.listen", func(c *Config) *string { return &c.Embedded.MQTT.Listen }},
	{"UAGATE_NATS_LISTEN", "embedded.nats.listen", func(c *Config) *string { return &c.Embedded.NATS.Listen }},
	{"UAGATE_SCALEOUT_NATS_URL", "scaleOut.natsUrl", func(c *Config) *string { return &c.ScaleOut.NATSURL }},
	{"UAGATE_SCALEOUT_BUCKET", "scaleOut.bucket", func(c *Config) *string { return &c.ScaleOut.Bucket }},
	{"UAGATE_SCALEOUT_REPLICA_ID", "scaleOut.replicaId", func(c *Config) *string { return &c.ScaleOut.ReplicaID }},
}

// EndpointEnvName returns the <NAME> part of the environment variables of an
// endpoint.
func EndpointEnvName(endpoint string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		}
		return '_'
	}, endpoint)
}

// Load reads a configuration file: YAML, or a registered Format such as OPC
// Publisher's publishednodes.json (recognised by its content). It applies the environment
// overrides and the defaults, resolves the secrets and validates. The error,
// when not nil, is an *Error listing every problem with file, line, field and
// reason; the warnings are worth showing either way.
func Load(path string) (*Config, []Warning, error) {
	return LoadWith(path, LoadOptions{})
}

// LoadOptions change what Load does.
type LoadOptions struct {
	// SkipSecrets leaves the secrets unresolved: their files and
	// environment variables are not read, so a configuration can be
	// checked where they do not exist (outside the pod that mounts them).
	// Where they may come from is still checked.
	SkipSecrets bool
}

// LoadWith is Load with options.
func LoadWith(path string, o LoadOptions) (*Config, []Warning, error) {
	data, err := readLimited(path, MaxFileSize)
	if err != nil {
		var pe *os.PathError
		msg := err.Error()
		if errors.As(err, &pe) {
			msg = pe.Op + ": " + pe.Err.Error()
		}
		return nil, nil, &Error{Issues: []Issue{{File: path, Message: msg, Err: err}}}
	}
	return parseOpts(data, path, os.LookupEnv, os.Environ(), o)
}

// Parse is Load on the file's content; filename names it in issues.
func Parse(data []byte, filename string) (*Config, []Warning, error) {
	return parse(data, filename, os.LookupEnv, os.Environ())
}

func parse(data []byte, filename string, lookup func(string) (string, bool), environ []string) (*Config, []Warning, error) {
	return parseOpts(data, filename, lookup, environ, LoadOptions{})
}

func parseOpts(data []byte, filename string, lookup func(string) (string, bool), environ []string, o LoadOptions) (*Config, []Warning, error) {
	d := newDecoder(filename)
	d.budget = nodeBudget(len(data))
	c := new(Config)
	if f, ok := formatOf(data); ok {
		d.decodeFormat(f, data, c)
	} else if unregisteredJSON(data) {
		d.errs = append(d.errs, Issue{File: filename, Message: "a JSON array, not a YAML mapping: OPC Publisher's publishednodes.json is read by programs that import " +
			"github.com/uagate/gateway/bridge/config/publishednodes"})
	} else if body, ok := d.parseYAML(data); ok && body != nil {
		d.decode(body, reflect.ValueOf(c).Elem(), "")
	}
	d.applyEnv(c, lookup, environ) // its errors count as decoding errors
	decodeErrs := d.errs
	c.ApplyDefaults()
	verrs, vwarns := c.validate()
	dirs := c.SecretDirs()
	for _, s := range c.secrets() {
		if o.SkipSecrets {
			break
		}
		if s.secret.File != "" && !inDirs(s.secret.File, dirs) {
			continue // refused by validate, and not read
		}
		if err := s.secret.Resolve(lookup); err != nil {
			verrs = append(verrs, Issue{Path: s.path, Message: err.Error(), Err: err})
		}
	}
	// A setting that did not decode is left at its default; what validation
	// says about it would only repeat the decoding error.
	errs := decodeErrs
	for _, is := range verrs {
		if !under(is.Path, decodeErrs) {
			errs = append(errs, is)
		}
	}
	warns := append(d.warns, vwarns...)
	for i := range errs {
		d.pos.locate(&errs[i])
	}
	for i := range warns {
		d.pos.locate(&warns[i])
	}
	sortIssues(errs)
	sortIssues(warns)
	if len(errs) > 0 {
		return nil, warns, &Error{Issues: errs}
	}
	return c, warns, nil
}

// sortIssues orders issues by file position; those without a line
// (environment variables, defaults) keep their order after the rest.
func sortIssues(issues []Issue) {
	slices.SortStableFunc(issues, func(a, b Issue) int {
		if (a.Line == 0) != (b.Line == 0) {
			if a.Line == 0 {
				return 1
			}
			return -1
		}
		if c := cmp.Compare(a.Line, b.Line); c != 0 {
			return c
		}
		return cmp.Compare(a.Column, b.Column)
	})
}

// under reports whether path is at or below the path of one of the issues.
func under(path string, issues []Issue) bool {
	for _, is := range issues {
		p := is.Path
		if p == "" {
			continue
		}
		if path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[") {
			return true
		}
	}
	return false
}

func (d *decoder) applyEnv(c *Config, lookup func(string) (string, bool), environ []string) {
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		return v, ok && v != ""
	}
	for _, s := range envSettings {
		if v, ok := get(s.name); ok {
			*s.field(c) = v
			d.pos[s.path] = origin{file: "$" + s.name}
		}
	}
	for _, b := range []struct {
		name, path string
		field      *bool
	}{
		{"HTTP_ALLOW_UNAUTHENTICATED", "http.allowUnauthenticated", &c.HTTP.AllowUnauthenticated},
		{"HTTP_PUBLIC_METRICS", "http.publicMetrics", &c.HTTP.PublicMetrics},
	} {
		v, ok := get(EnvPrefix + b.name)
		if !ok {
			continue
		}
		switch strings.ToLower(v) {
		case "1", "true", "yes":
			*b.field = true
		case "0", "false", "no":
			*b.field = false
		default:
			d.errs = append(d.errs, Issue{File: "$" + EnvPrefix + b.name, Path: b.path, Message: fmt.Sprintf("%q: want true or false", v)})
			continue
		}
		d.pos[b.path] = origin{file: "$" + EnvPrefix + b.name}
	}
	if v, ok := get(EnvPrefix + "HTTP_ALLOWED_HOSTS"); ok {
		c.HTTP.AllowedHosts = nil
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				c.HTTP.AllowedHosts = append(c.HTTP.AllowedHosts, h)
			}
		}
		d.pos["http.allowedHosts"] = origin{file: "$" + EnvPrefix + "HTTP_ALLOWED_HOSTS"}
	}
	if v, ok := get("UAGATE_SCALEOUT_ENABLED"); ok {
		const name = "UAGATE_SCALEOUT_ENABLED"
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true", "1", "yes", "on":
			c.ScaleOut.Enabled = true
			d.pos["scaleOut.enabled"] = origin{file: "$" + name}
		case "false", "0", "no", "off":
			c.ScaleOut.Enabled = false
			d.pos["scaleOut.enabled"] = origin{file: "$" + name}
		default:
			d.errs = append(d.errs, Issue{File: "$" + name, Path: "scaleOut.enabled", Message: strconv.Quote(v) + ": want true or false"})
		}
	}
	if v, ok := get("UAGATE_SCALEOUT_LEASE_TTL"); ok {
		const name = "UAGATE_SCALEOUT_LEASE_TTL"
		if ttl, err := ParseDuration(strings.TrimSpace(v)); err != nil {
			d.errs = append(d.errs, Issue{File: "$" + name, Path: "scaleOut.leaseTTL", Message: err.Error(), Err: err})
		} else {
			c.ScaleOut.LeaseTTL = ttl
			d.pos["scaleOut.leaseTTL"] = origin{file: "$" + name}
		}
	}
	known := map[string]bool{}
	for i := range c.Endpoints {
		e := &c.Endpoints[i]
		base := EnvPrefix + "ENDPOINT_" + EndpointEnvName(e.Name) + "_"
		p := "endpoints[" + strconv.Itoa(i) + "]"
		for _, suffix := range []string{"URL", "USERNAME", "PASSWORD"} {
			name := base + suffix
			known[name] = true
			v, ok := get(name)
			if !ok {
				continue
			}
			switch suffix {
			case "URL":
				e.URL = v
				d.pos[p+".url"] = origin{file: "$" + name}
			case "USERNAME":
				e.Identity.Username = v
				d.pos[p+".identity.username"] = origin{file: "$" + name}
			case "PASSWORD":
				e.Identity.Password = Secret{Env: name}
				d.pos[p+".identity.password"] = origin{file: "$" + name}
			}
		}
	}
	for _, kv := range environ {
		name, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix+"ENDPOINT_") || known[name] || v == "" {
			continue
		}
		for _, suffix := range []string{"_URL", "_USERNAME", "_PASSWORD"} {
			if strings.HasSuffix(name, suffix) {
				d.warns = append(d.warns, Issue{File: "$" + name, Message: "names no configured endpoint; ignored"})
				break
			}
		}
	}
}

type secretRef struct {
	path   string
	secret *Secret
}

// secrets lists every Secret of the configuration with its path.
func (c *Config) secrets() []secretRef {
	var out []secretRef
	add := func(p string, s *Secret) {
		if s.IsSet() {
			out = append(out, secretRef{p, s})
		}
	}
	for i := range c.Endpoints {
		add("endpoints["+strconv.Itoa(i)+"].identity.password", &c.Endpoints[i].Identity.Password)
	}
	for i := range c.Sinks.MQTT {
		add("sinks.mqtt["+strconv.Itoa(i)+"].password", &c.Sinks.MQTT[i].Password)
	}
	for i := range c.Sinks.NATS {
		add("sinks.nats["+strconv.Itoa(i)+"].password", &c.Sinks.NATS[i].Password)
		add("sinks.nats["+strconv.Itoa(i)+"].token", &c.Sinks.NATS[i].Token)
	}
	if ws := c.Sinks.WebSocket; ws != nil {
		add("sinks.websocket.token", &ws.Token)
	}
	add("scaleOut.password", &c.ScaleOut.Password)
	add("scaleOut.token", &c.ScaleOut.Token)
	for i := range c.HTTP.APIKeys {
		add("http.apiKeys["+strconv.Itoa(i)+"].token", &c.HTTP.APIKeys[i].Token)
	}
	return out
}

// String renders the configuration as YAML, with every secret shown as where
// it comes from (file, env) and inline values redacted.
func (c *Config) String() string {
	b, err := yaml.MarshalWithOptions(c, yaml.Indent(2), yaml.OmitEmpty())
	if err != nil {
		return "config: " + err.Error()
	}
	return string(b)
}
