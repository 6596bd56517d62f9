package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCloneIsDeep(t *testing.T) {
	c, _, err := parse([]byte(`
endpoints:
  - name: plc
    url: opc.tcp://127.0.0.1:4840
    identity: {username: u, password: {value: secret-value}}
writerGroups:
  - name: g
    nodes: {samplingInterval: 100ms}
    writers:
      - name: w
        fields: [{name: a, node: "ns=1;s=A"}]
sinks:
  mqtt: [{url: "tcp://127.0.0.1:1883", perField: {}}]
`), "c.yaml", noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := c.Clone()
	if !Diff(c, d).Empty() {
		t.Fatalf("clone differs: %s", Diff(c, d))
	}
	if d.Endpoints[0].Identity.Password.Reveal() != "secret-value" {
		t.Fatal("the resolved secret was not copied")
	}
	d.WriterGroups[0].Writers[0].Fields[0].Node = "ns=1;s=B"
	*d.WriterGroups[0].Nodes.SamplingInterval = 0
	d.Sinks.MQTT[0].PerField.Topic = "x"
	d.Endpoints = append(d.Endpoints, Endpoint{Name: "more"})
	if c.WriterGroups[0].Writers[0].Fields[0].Node != "ns=1;s=A" || c.WriterGroups[0].Nodes.SamplingInterval.D() == 0 ||
		c.Sinks.MQTT[0].PerField.Topic == "x" || len(c.Endpoints) != 1 {
		t.Fatal("changing the clone changed the original")
	}
}

func TestSaveRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c, _, err := parse([]byte(`
gateway: {stateDir: `+dir+`}
endpoints:
  - name: plc
    url: opc.tcp://127.0.0.1:4840
    identity: {username: u, password: {value: inline-password}}
  - name: plc2
    url: opc.tcp://127.0.0.1:4841
    identity: {username: u, password: {env: PLC2_PW}}
writerGroups:
  - name: g
    endpoint: plc
    writers:
      - name: w
        fields: [{name: a, node: "ns=1;s=A", deadband: {type: absolute, value: 0.5}}]
`), "c.yaml", func(k string) (string, bool) { return "env-password", k == "PLC2_PW" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "saved.yaml")
	saved, err := Save(c, path, filepath.Join(dir, "secrets"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "inline-password") || strings.Contains(string(raw), "env-password") {
		t.Fatalf("a secret is in the saved YAML:\n%s", raw)
	}
	if c.Endpoints[0].Identity.Password.Value != "inline-password" {
		t.Fatal("Save changed the configuration it was given")
	}
	t.Setenv("PLC2_PW", "env-password")
	back, _, err := Load(path)
	if err != nil {
		t.Fatalf("the saved file does not load: %v\n%s", err, raw)
	}
	if ch := Diff(saved, back); !ch.Empty() {
		t.Fatalf("saved and loaded differ: %s\n%s", ch, raw)
	}
	if got := back.Endpoints[0].Identity.Password.Reveal(); got != "inline-password" {
		t.Fatalf("inline password read back as %q", got)
	}
	if got := back.Endpoints[1].Identity.Password; got.Env != "PLC2_PW" || got.Reveal() != "env-password" {
		t.Fatalf("env password read back as %+v", got)
	}
	if fi, err := os.Stat(back.Endpoints[0].Identity.Password.File); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v %v", fi, err)
	}
}

func TestEnvAllowUnauthenticated(t *testing.T) {
	env := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) { return v, k == "UAGATE_HTTP_ALLOW_UNAUTHENTICATED" }
	}
	c, _, err := parse([]byte("http: {listen: \"0.0.0.0:8080\"}\n"), "c.yaml", env("true"), nil)
	if err != nil || !c.HTTP.AllowUnauthenticated {
		t.Fatalf("true: %v %v", err, c != nil && c.HTTP.AllowUnauthenticated)
	}
	_, _, err = parse([]byte(""), "c.yaml", env("maybe"), nil)
	if err == nil || !strings.Contains(err.Error(), `$UAGATE_HTTP_ALLOW_UNAUTHENTICATED: http.allowUnauthenticated: "maybe": want true or false`) {
		t.Fatalf("maybe: %v", err)
	}
}
