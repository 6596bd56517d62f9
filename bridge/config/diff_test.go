package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const diffOld = `
endpoints:
  - {name: plc, url: "opc.tcp://plc:4840"}
  - {name: old, url: "opc.tcp://old:4840"}
writerGroups:
  - name: g
    endpoint: plc
    writers:
      - name: a
        fields: [{name: x, node: ns=2;s=X}, {name: y, node: ns=2;s=Y}, {name: z, node: ns=2;s=Z}]
      - name: b
        fields: [{name: x, node: ns=2;s=X}, {name: y, node: ns=2;s=Y}]
      - name: gone
        fields: [{node: ns=2;s=G}]
  - name: dropped
    endpoint: old
    writers: [{name: w, fields: [{node: ns=2;s=D}]}]
sinks:
  mqtt: [{url: "tcp://broker:1883"}]
  file: [{name: archive, path: a.jsonl}]
`

const diffNew = `
gateway: {publisherId: plant2}
endpoints:
  - {name: plc, url: "opc.tcp://plc:4840", requestTimeout: 5s}
  - {name: new, url: "opc.tcp://new:4840"}
writerGroups:
  - name: g
    endpoint: plc
    maxUnacked: 10
    writers:
      - name: a
        fields: [{name: x, node: ns=2;s=X}, {name: y, node: ns=2;s=Y2}, {name: w, node: ns=2;s=W}]
      - name: b
        fields: [{name: y, node: ns=2;s=Y}, {name: x, node: ns=2;s=X}]
      - name: fresh
        fields: [{node: ns=2;s=F}]
  - name: added
    endpoint: new
    writers: [{name: w, fields: [{node: ns=2;s=N}]}]
sinks:
  mqtt: [{url: "tcp://broker:1883", qos: 2}]
  nats: [{url: "nats://n:4222"}]
`

func TestDiff(t *testing.T) {
	old, _ := mustParse(t, diffOld)
	new, _ := mustParse(t, diffNew)
	ch := Diff(old, new)
	want := `settings: changed
endpoints: +new ~plc -old
writer groups: +added ~g -dropped
writers: +g/fresh ~g/b -g/gone
fields: +g/a/w ~g/a/y -g/a/z
sinks: +nats ~mqtt -archive
`
	if got := ch.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if ch.Empty() {
		t.Error("Empty")
	}
	if same := Diff(old, old); !same.Empty() || same.String() != "" {
		t.Errorf("a configuration against itself: %v", same)
	}
	again, _ := mustParse(t, diffOld)
	if d := Diff(old, again); !d.Empty() {
		t.Errorf("the same file parsed twice: %v", d)
	}
	if all := Diff(nil, old); len(all.Endpoints.Added) != 2 || len(all.WriterGroups.Added) != 2 || !all.Writers.Empty() {
		t.Errorf("from nothing: %v", all)
	}
}

func TestDiffSecretRotation(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("one"), 0o600)
	yaml := "gateway: {secretsDir: " + dir + "}\n" +
		"endpoints: [{name: plc, url: 'opc.tcp://plc:4840', identity: {username: u, password: {file: " + pw + "}}}]\n" +
		"writerGroups: [{name: g, writers: [{name: w, fields: [{node: i=2258}]}]}]\n"
	a, _ := mustParse(t, yaml)
	os.WriteFile(pw, []byte("two"), 0o600)
	b, _ := mustParse(t, yaml)
	if d := Diff(a, b); strings.Join(d.Endpoints.Changed, ",") != "plc" {
		t.Errorf("a rotated password file does not change the endpoint: %v", d)
	}
	if strings.Contains(Diff(a, b).String(), "two") {
		t.Error("the secret shows")
	}
}

// watchEvents collects Watch's callbacks.
type watchEvents struct {
	configs chan *Config
	errs    chan error
}

func startWatch(t *testing.T, path string) (*watchEvents, context.CancelFunc, <-chan struct{}) {
	t.Helper()
	ev := &watchEvents{configs: make(chan *Config, 16), errs: make(chan error, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	done, err := Watch(ctx, path, func(c *Config, _ []Warning) error { ev.configs <- c; return nil }, func(err error) { ev.errs <- err })
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	return ev, cancel, done
}

func (ev *watchEvents) nextConfig(t *testing.T) *Config {
	t.Helper()
	select {
	case c := <-ev.configs:
		return c
	case err := <-ev.errs:
		t.Fatalf("error instead of a configuration: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no configuration within 10s")
	}
	return nil
}

func (ev *watchEvents) nextError(t *testing.T) error {
	t.Helper()
	select {
	case c := <-ev.configs:
		t.Fatalf("a configuration instead of an error: %v", c.Gateway)
	case err := <-ev.errs:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no error within 10s")
	}
	return nil
}

func TestWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	write := func(publisher string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("gateway: {publisherId: "+publisher+"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	ev, cancel, done := startWatch(t, path)

	// Rewritten in place.
	write("two")
	if c := ev.nextConfig(t); c.Gateway.PublisherID != "two" {
		t.Fatalf("publisher %q", c.Gateway.PublisherID)
	}

	// The same content again calls nothing: the next callback is the next change.
	write("two")
	write("three")
	if c := ev.nextConfig(t); c.Gateway.PublisherID != "three" {
		t.Fatalf("publisher %q, want three (the rewrite with equal content must not call)", c.Gateway.PublisherID)
	}

	// Invalid: the errors, with the file's line; the running config stays.
	if err := os.WriteFile(path, []byte("gateway: {publisherId: a/b}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := ev.nextError(t)
	var ce *Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), path+":1:11: gateway.publisherId:") {
		t.Fatalf("error %v", err)
	}

	// An editor's save: a new file renamed over the old one.
	tmp := filepath.Join(dir, ".gateway.yaml.swp")
	if err := os.WriteFile(tmp, []byte("gateway: {publisherId: four}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if c := ev.nextConfig(t); c.Gateway.PublisherID != "four" {
		t.Fatalf("after rename: publisher %q", c.Gateway.PublisherID)
	}

	// Removed, then written again.
	os.Remove(path)
	write("five")
	if c := ev.nextConfig(t); c.Gateway.PublisherID != "five" {
		t.Fatalf("after re-create: publisher %q", c.Gateway.PublisherID)
	}

	// Writes to other files of the directory are not reloads.
	os.WriteFile(filepath.Join(dir, "other.yaml"), []byte("x: 1"), 0o644)
	write("six")
	if c := ev.nextConfig(t); c.Gateway.PublisherID != "six" {
		t.Fatalf("publisher %q", c.Gateway.PublisherID)
	}

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not stop after cancel")
	}
}

func TestWatchSymlinkSwap(t *testing.T) {
	// Kubernetes mounts a ConfigMap as dir/gateway.yaml → ..data/gateway.yaml,
	// and updates it by pointing the ..data symlink at a new directory.
	dir := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		os.Mkdir(filepath.Join(dir, v), 0o755)
		os.WriteFile(filepath.Join(dir, v, "gateway.yaml"), []byte("gateway: {publisherId: "+v+"}\n"), 0o644)
	}
	if err := os.Symlink("v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.Symlink(filepath.Join("..data", "gateway.yaml"), path); err != nil {
		t.Fatal(err)
	}
	ev, _, _ := startWatch(t, path)
	os.Symlink("v2", filepath.Join(dir, "..data_tmp"))
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if c := ev.nextConfig(t); c.Gateway.PublisherID != "v2" {
		t.Fatalf("publisher %q", c.Gateway.PublisherID)
	}
}

func TestWatchMissingDir(t *testing.T) {
	_, err := Watch(context.Background(), filepath.Join(t.TempDir(), "nope", "gateway.yaml"), func(*Config, []Warning) error { return nil }, func(error) {})
	if err == nil {
		t.Fatal("no error for a directory that does not exist")
	}
}
