package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// noEnv is an empty environment, so that the tests do not depend on the
// machine's.
func noEnv(string) (string, bool) { return "", false }

// parseWith parses with a fixed environment.
func parseWith(t *testing.T, yaml string, env map[string]string) (*Config, []Warning, error) {
	t.Helper()
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	return parse([]byte(yaml), "test.yaml", lookup, environ)
}

func mustParse(t *testing.T, yaml string) (*Config, []Warning) {
	t.Helper()
	c, w, err := parseWith(t, yaml, nil)
	if err != nil {
		t.Fatalf("parse:\n%v", err)
	}
	return c, w
}

// issueLines returns the String of each issue of err.
func issueLines(t *testing.T, err error) []string {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *config.Error", err, err)
	}
	var out []string
	for _, is := range e.Issues {
		out = append(out, is.String())
	}
	return out
}

const minimal = `
endpoints:
  - name: plc
    url: opc.tcp://plc.example:4840
writerGroups:
  - name: line1
    writers:
      - name: temps
        fields:
          - node: ns=2;s=T1
`

// TestEventFieldDefaults: an event field gets the default select clauses
// and its own queue size, not the data fields' from nodes; one it sets is
// kept.
func TestEventFieldDefaults(t *testing.T) {
	c, _ := mustParse(t, minimal+`          - {name: ev, node: i=2253, events: {}}
          - {name: ev2, node: i=2253, queueSize: 5, events: {select: [Message]}}
`)
	fs := c.WriterGroups[0].Writers[0].Fields
	if ev := fs[1]; ev.QueueSize != DefaultEventQueueSize || strings.Join(ev.Events.Select, ",") != DefaultEventSelectClauses {
		t.Errorf("event field defaults: queue %d, select %v", ev.QueueSize, ev.Events.Select)
	}
	if ev2 := fs[2]; ev2.QueueSize != 5 || len(ev2.Events.Select) != 1 {
		t.Errorf("event field's own settings: queue %d, select %v", ev2.QueueSize, ev2.Events.Select)
	}
}

func TestParseMinimal(t *testing.T) {
	c, w := mustParse(t, minimal)
	if len(w) != 0 {
		t.Errorf("warnings: %v", w)
	}
	wg := c.WriterGroups[0]
	if wg.Endpoint != "plc" || wg.PublishingInterval.D() != time.Second || wg.Writers[0].ID != writerHome("line1", "temps") {
		t.Errorf("defaults not applied: %+v", wg)
	}
	f := wg.Writers[0].Fields[0]
	if f.Name != "T1" || f.SamplingInterval == nil || f.SamplingInterval.D() != 100*time.Millisecond || f.QueueSize != 20 { // two publishing intervals of 100 ms samples
		t.Errorf("field defaults: %+v", f)
	}
	if c.Endpoints[0].PKI != filepath.Join("state", "pki") || c.Endpoints[0].SecurityPolicy != "best" {
		t.Errorf("endpoint defaults: %+v", c.Endpoints[0])
	}
	if c.Embedded.Sim.On() || !c.Embedded.MQTT.On() || !c.Embedded.NATS.On() {
		t.Errorf("embedded: sim %v mqtt %v nats %v", c.Embedded.Sim.On(), c.Embedded.MQTT.On(), c.Embedded.NATS.On())
	}
}

func TestParseErrorsAllWithPositions(t *testing.T) {
	_, _, err := parseWith(t, `gateway:
  publisherId: plant1
  bogus: 1
endpoints:
  - name: plc
    url: opc.tcp://plc:4840
    securityPolicy: Basic256Sha256
    Identity: {}
writerGroups:
  - name: g1
    publishingInterval: soon
    writers:
      - name: w
        fields:
          - node: ns=2;s=A
          - node: "ns=x;s=B"
            queueSize: -1
sinks:
  mqtt:
    - url: tcp://broker:1883
      qos: 3
`, nil)
	want := []string{
		`test.yaml:3:3: gateway.bogus: unknown key "bogus"`,
		`test.yaml:8:5: endpoints[0].Identity: unknown key "Identity" (did you mean "identity"?)`,
		`test.yaml:11:25: writerGroups[0].publishingInterval: "soon" is not a duration (want e.g. "1s", "250ms", or a number of milliseconds)`,
		`test.yaml:16:13: writerGroups[0].writers[0].fields[1].node: "ns=x;s=B" is not a node id (want e.g. ns=1;s=Demo.Counter, i=2258 or nsu=<uri>;s=Name)`,
		`test.yaml:17:24: writerGroups[0].writers[0].fields[1].queueSize: -1 is negative; want 0 or more`,
		`test.yaml:21:7: sinks.mqtt[0].qos: 3: want 0, 1 or 2`,
	}
	got := issueLines(t, err)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err.Error() != strings.Join(want, "\n") {
		t.Errorf("Error() is not one issue per line:\n%s", err)
	}
}

func TestParseTypeErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"gateway: [1]", "test.yaml:1:10: gateway: want a mapping, got a sequence"},
		{"endpoints: {name: x}", "test.yaml:1:13: endpoints: want a sequence, got a mapping"},
		{"http: {disabled: 1}", "test.yaml:1:18: http.disabled: want true or false, got an integer"},
		{"writerGroups: [{name: g, maxUnacked: x}]", "test.yaml:1:38: writerGroups[0].maxUnacked: want an integer, got a string"},
		{"writerGroups: [{name: g, writers: [{id: 70000}]}]", "test.yaml:1:41: writerGroups[0].writers[0].id: 70000 is out of range (at most 65535)"},
		{"gateway: {publisherId: a}\ngateway: {}", `test.yaml:2:1: mapping key "gateway" already defined at [1:1]`},
		{"gateway: *nope", "test.yaml:1:10: gateway: alias names no anchor"},
		{"gateway: {\n", ""}, // a syntax error: position and message from the parser
		{"a: 1\n---\nb: 2\n", "test.yaml:3:2: more than one YAML document; want one"},
		{"0\n---", "test.yaml:2:1: more than one YAML document; want one"}, // a second document with no body (found by FuzzParse)
	} {
		_, _, err := parseWith(t, tc.yaml, nil)
		if err == nil {
			t.Errorf("%q: no error", tc.yaml)
			continue
		}
		got := issueLines(t, err)
		if tc.want == "" {
			if !strings.HasPrefix(got[0], "test.yaml:") {
				t.Errorf("%q: %q has no position", tc.yaml, got[0])
			}
			continue
		}
		if !strings.Contains(strings.Join(got, "\n"), tc.want) {
			t.Errorf("%q:\n got %q\nwant %q", tc.yaml, got, tc.want)
		}
	}
}

func TestParseAnchorsAndMerge(t *testing.T) {
	c, _ := mustParse(t, `
x-fast: &fast
  samplingInterval: 50ms
  queueSize: 7
endpoints:
  - {name: plc, url: "opc.tcp://plc:4840"}
writerGroups:
  - name: g
    nodes:
      <<: *fast
      queueSize: 9
    writers:
      - name: w
        fields:
          - node: ns=2;s=A
          - {<<: *fast, node: ns=2;s=B}
`)
	nd := c.WriterGroups[0].Nodes
	if nd.SamplingInterval.D() != 50*time.Millisecond || nd.QueueSize != 9 {
		t.Errorf("merged node defaults: si %v queue %d, want 50ms and 9 (own key wins)", nd.SamplingInterval, nd.QueueSize)
	}
	if b := c.WriterGroups[0].Writers[0].Fields[1]; b.QueueSize != 7 {
		t.Errorf("flow merge: %+v", b)
	}
}

func TestParseAliasBomb(t *testing.T) {
	var b strings.Builder
	// Each level merges the one below four times: 4^15 entries if expanded.
	b.WriteString("x-0: &a0 {queueSize: 1}\n")
	for i := 1; i < 16; i++ {
		fmt.Fprintf(&b, "x-%d: &a%d {<<: [*a%d, *a%d, *a%d, *a%d]}\n", i, i, i-1, i-1, i-1, i-1)
	}
	b.WriteString("writerGroups: [{name: g, nodes: *a15}]\n")
	start := time.Now()
	_, _, err := parseWith(t, b.String(), nil)
	if err == nil || !strings.Contains(err.Error(), "aliases expanding") {
		t.Fatalf("err = %.300v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestDurations(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{`"1s"`, time.Second}, {`250ms`, 250 * time.Millisecond}, {`1500`, 1500 * time.Millisecond},
		{`0.5`, 500 * time.Microsecond}, {`"1m30s"`, 90 * time.Second}, {`"00:00:02.5"`, 2500 * time.Millisecond},
		{`"1.02:00:00"`, 26 * time.Hour},
	} {
		c, _ := mustParse(t, "gateway: {shutdownTimeout: "+tc.in+"}")
		if got := c.Gateway.ShutdownTimeout.D(); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.in, got, tc.want)
		}
	}
	for _, in := range []string{`"1 s"`, `true`, `"25:00:00"`, `[1]`} {
		if _, _, err := parseWith(t, "gateway: {shutdownTimeout: "+in+"}", nil); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
	var d Duration
	if err := d.UnmarshalJSON([]byte(`"2s"`)); err != nil || d.D() != 2*time.Second {
		t.Errorf("UnmarshalJSON string: %v %v", d, err)
	}
	if err := d.UnmarshalJSON([]byte(`20`)); err != nil || d.D() != 20*time.Millisecond {
		t.Errorf("UnmarshalJSON number: %v %v", d, err)
	}
	if b, _ := d.MarshalJSON(); string(b) != `"20ms"` {
		t.Errorf("MarshalJSON %s", b)
	}
}

const secretYAML = `
endpoints:
  - name: plc
    url: opc.tcp://plc:4840
    identity:
      username: op
      password: %s
writerGroups:
  - {name: g, writers: [{name: w, fields: [{node: ns=2;s=A}]}]}
`

func TestSecrets(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(state, "secrets") // gateway.secretsDir by default
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("from-file-s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(state, "pw")
	if err := os.WriteFile(outside, []byte("not-a-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PLC_PW": "from-env-s3cr3t", "UAGATE_STATE_DIR": state}

	c, w, err := parseWith(t, fmt.Sprintf(secretYAML, "inline-s3cr3t"), env)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Endpoints[0].Identity.Password.Reveal(); got != "inline-s3cr3t" {
		t.Errorf("inline: %q", got)
	}
	if len(w) != 1 || w[0].String() != "test.yaml:7:17: endpoints[0].identity.password: inline secret; prefer {file: …} or {env: …} so that it stays out of the configuration file" {
		t.Errorf("warnings %v", w)
	}
	checkNoSecret(t, c, "inline-s3cr3t")

	c, w, err = parseWith(t, fmt.Sprintf(secretYAML, "{file: "+pwFile+"}"), env)
	if err != nil || len(w) != 0 {
		t.Fatal(err, w)
	}
	if got := c.Endpoints[0].Identity.Password.Reveal(); got != "from-file-s3cr3t" {
		t.Errorf("file: %q", got)
	}
	checkNoSecret(t, c, "from-file-s3cr3t")

	c, _, err = parseWith(t, fmt.Sprintf(secretYAML, "{env: PLC_PW}"), env)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Endpoints[0].Identity.Password.Reveal(); got != "from-env-s3cr3t" {
		t.Errorf("env: %q", got)
	}
	checkNoSecret(t, c, "from-env-s3cr3t")

	for _, tc := range []struct{ secret, want string }{
		{"{file: " + filepath.Join(dir, "missing") + "}", "test.yaml:7:7: endpoints[0].identity.password: secret file " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{"{env: NOT_SET}", "test.yaml:7:7: endpoints[0].identity.password: secret environment variable NOT_SET is not set"},
		// Only from the secret directories: anything readable could be
		// sent as the password otherwise.
		{"{file: " + outside + "}", "test.yaml:7:7: endpoints[0].identity.password: secret file " + outside + " is outside the secret directories (" +
			dir + ", /run/secrets, /etc/uagate/secrets); put it in one of them, or set gateway.secretsDir"},
		{"{file: " + dir + "/../pw}", "test.yaml:7:7: endpoints[0].identity.password: secret file " + dir + "/../pw is outside the secret directories (" +
			dir + ", /run/secrets, /etc/uagate/secrets); put it in one of them, or set gateway.secretsDir"},
		{"{file: /etc/passwd}", "test.yaml:7:7: endpoints[0].identity.password: secret file /etc/passwd is outside the secret directories (" +
			dir + ", /run/secrets, /etc/uagate/secrets); put it in one of them, or set gateway.secretsDir"},
		{"{env: A, file: B}", "test.yaml:7:18: endpoints[0].identity.password: give one of value, file, env, not 2"},
		{"{vault: x}", "test.yaml:7:18: endpoints[0].identity.password.vault: unknown key \"vault\" (want one of value, file, env)"},
		{"[hunter2]", "test.yaml:7:17: endpoints[0].identity.password: want a string or a mapping with one of value, file, env; got a sequence"},
	} {
		_, _, err := parseWith(t, fmt.Sprintf(secretYAML, tc.secret), env)
		if err == nil {
			t.Errorf("%s: no error", tc.secret)
			continue
		}
		if got := issueLines(t, err); len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.secret, got, tc.want)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
	_, _, err = parseWith(t, fmt.Sprintf(secretYAML, "{file: "+filepath.Join(dir, "missing")+"}"), map[string]string{"UAGATE_STATE_DIR": state})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("errors.Is(err, os.ErrNotExist) is false for %v", err)
	}
}

// checkNoSecret fails when the secret shows in any printed form of c.
func checkNoSecret(t *testing.T, c *Config, secret string) {
	t.Helper()
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("cfg", "password", c.Endpoints[0].Identity.Password, "endpoint", c.Endpoints[0])
	for name, s := range map[string]string{
		"String": c.String(), "%v": fmt.Sprintf("%v", *c), "%+v": fmt.Sprintf("%+v", c.Endpoints), "%#v": fmt.Sprintf("%#v", c.Endpoints[0]),
		"slog": logged.String(),
	} {
		if strings.Contains(s, secret) {
			t.Errorf("%s shows the secret:\n%s", name, s)
		}
	}
	if !strings.Contains(c.String(), "password:") {
		t.Errorf("String has no password entry at all:\n%s", c)
	}
}

func TestEnvOverrides(t *testing.T) {
	env := map[string]string{
		"UAGATE_PUBLISHER_ID":            "plant9",
		"UAGATE_STATE_DIR":               "/var/lib/uagate",
		"UAGATE_HTTP_LISTEN":             ":9090",
		"UAGATE_MQTT_LISTEN":             "0.0.0.0:1884",
		"UAGATE_NATS_LISTEN":             "", // empty: unset
		"UAGATE_ENDPOINT_PLC_1_URL":      "opc.tcp://other:4841",
		"UAGATE_ENDPOINT_PLC_1_USERNAME": "op",
		"UAGATE_ENDPOINT_PLC_1_PASSWORD": "env-pw",
		"UAGATE_ENDPOINT_NOSUCH_URL":     "opc.tcp://x:1",
	}
	yaml := strings.Replace(minimal, "name: plc\n", "name: plc-1\n", 1) + "http: {listen: ':8081'}\n"
	c, w, err := parseWith(t, yaml, env)
	if err != nil {
		t.Fatal(err)
	}
	e := c.Endpoints[0]
	if c.Gateway.PublisherID != "plant9" || c.Gateway.StateDir != "/var/lib/uagate" || c.HTTP.Listen != ":9090" ||
		c.Embedded.MQTT.Listen != "0.0.0.0:1884" || c.Embedded.NATS.Listen != DefaultNATSListen {
		t.Errorf("top-level overrides: %+v %+v %+v", c.Gateway, c.HTTP, c.Embedded)
	}
	if e.URL != "opc.tcp://other:4841" || e.Identity.Type != IdentityUsername || e.Identity.Username != "op" ||
		e.Identity.Password.Reveal() != "env-pw" || e.PKI != "/var/lib/uagate/pki" {
		t.Errorf("endpoint overrides: %+v", e)
	}
	if len(w) != 1 || w[0].String() != "$UAGATE_ENDPOINT_NOSUCH_URL: names no configured endpoint; ignored" {
		t.Errorf("warnings %q", w)
	}
	if strings.Contains(c.String(), "env-pw") {
		t.Errorf("String shows the password")
	}

	_, _, err = parseWith(t, yaml, map[string]string{"UAGATE_HTTP_LISTEN": "nowhere", "UAGATE_ENDPOINT_PLC_1_URL": "http://x"})
	want := []string{
		`$UAGATE_HTTP_LISTEN: http.listen: "nowhere": want host:port (e.g. 127.0.0.1:8080, :8080)`,
		`$UAGATE_ENDPOINT_PLC_1_URL: endpoints[0].url: "http://x": want opc.tcp://host:port[/path] or embedded:sim`,
	}
	if got := issueLines(t, err); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(p, []byte(minimal), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _, err := Load(p)
	if err != nil || c.Endpoints[0].Name != "plc" {
		t.Fatalf("Load: %v %v", c, err)
	}
	_, _, err = Load(filepath.Join(dir, "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) || Issues(err)[0].File != filepath.Join(dir, "nope.yaml") {
		t.Errorf("missing file: %v", err)
	}
	// An empty file is the default configuration.
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c, _, err = Load(p)
	if err != nil || c.Endpoints[0].URL != EmbeddedSimURL || len(c.WriterGroups[0].Writers[0].Fields) != 4 {
		t.Fatalf("empty file: %v %v", c, err)
	}
}

// TestParseFormat: a registered Format reads its files, and what validation
// finds in them is reported at the line the Format says the part came
// from; a JSON array without the format's package says which to import.
func TestParseFormat(t *testing.T) {
	_, _, err := parse([]byte(`[{"EndpointUrl": "opc.tcp://a:1"}]`), "pn.json", noEnv, nil)
	if got := issueLines(t, err); len(got) != 1 || !strings.Contains(got[0], "pn.json: a JSON array, not a YAML mapping") || !strings.Contains(got[0], "bridge/config/publishednodes") {
		t.Errorf("without the format: %q", got)
	}
	formats.Lock()
	saved := formats.list
	formats.Unlock()
	t.Cleanup(func() {
		formats.Lock()
		formats.list = saved
		formats.Unlock()
	})
	RegisterFormat(Format{Name: "test", Detect: func(b []byte) bool { return strings.HasPrefix(string(b), "#test\n") },
		Decode: func(data []byte, file string, c *Config) Decoded {
			c.Endpoints = []Endpoint{{Name: "e", URL: "opc.tcp://a:1"}}
			c.WriterGroups = []WriterGroup{{Name: "g", Endpoint: "e", Writers: []DataSetWriter{{Name: "w", Fields: []Field{{Node: "ns=x"}}}}}}
			return Decoded{Warnings: []Issue{{File: file, Line: 2, Column: 1, Message: "a warning"}},
				Origins: map[string]Position{"writerGroups[0].writers[0].fields[0]": {Line: 3, Column: 5}}}
		}})
	_, w, err := parse([]byte("#test\n"), "t.txt", noEnv, nil)
	if len(w) != 1 || w[0].String() != "t.txt:2:1: a warning" {
		t.Errorf("warnings %v", w)
	}
	if got := issueLines(t, err); len(got) != 1 || !strings.HasPrefix(got[0], `t.txt:3:5: writerGroups[0].writers[0].fields[0].node: "ns=x" is not a node id`) {
		t.Errorf("errors %q", got)
	}
}
