package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/uastack/server"
)

// isolate keeps a run of the gateway off the default ports and out of the
// working directory.
func isolate(t *testing.T) {
	t.Setenv("UAGATE_STATE_DIR", t.TempDir())
	t.Setenv("UAGATE_HTTP_LISTEN", "127.0.0.1:0")
	t.Setenv("UAGATE_SIM_LISTEN", "127.0.0.1:0")
	t.Setenv("UAGATE_MQTT_LISTEN", "127.0.0.1:0")
	t.Setenv("UAGATE_NATS_LISTEN", "127.0.0.1:0")
}

func TestRunDefaultEmbedded(t *testing.T) {
	isolate(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := cmdRunGateway(ctx, []string{"-out", "-", "-count", "3", "-interval", "100ms"}, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, errOut.String())
	}
	if ctx.Err() != nil {
		t.Fatalf("timed out before 3 messages; stderr:\n%s", errOut.String())
	}
	var data []string
	meta := 0
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var head struct{ MessageType string }
		if err := json.Unmarshal([]byte(line), &head); err != nil {
			t.Fatalf("%v\n%s", err, line)
		}
		switch head.MessageType {
		case "ua-data":
			data = append(data, line)
		case "ua-metadata":
			if len(data) > 0 {
				t.Fatalf("ua-metadata after data:\n%s", out.String())
			}
			meta++
		}
	}
	if meta != 1 || len(data) < 3 {
		t.Fatalf("%d metadata and %d data lines, want 1 and at least 3:\n%s", meta, len(data), out.String())
	}
	last := -1.0
	for i, line := range data {
		var nm struct {
			Messages struct { // one DataSetMessage per NetworkMessage: an object
				SequenceNumber int
				Payload        map[string]struct{ Value json.RawMessage }
			}
		}
		if err := json.Unmarshal([]byte(line), &nm); err != nil {
			t.Fatalf("line %d: %v\n%s", i+1, err, line)
		}
		if nm.Messages.SequenceNumber != i+1 {
			t.Fatalf("line %d: SequenceNumber %d, want %d", i+1, nm.Messages.SequenceNumber, i+1)
		}
		f, ok := nm.Messages.Payload["Counter"]
		if !ok {
			t.Fatalf("line %d: no Counter field:\n%s", i+1, line)
		}
		var v float64
		if err := json.Unmarshal(f.Value, &v); err != nil {
			t.Fatalf("line %d: Counter value %s: %v", i+1, f.Value, err)
		}
		if v <= last {
			t.Fatalf("line %d: Counter %v after %v", i+1, v, last)
		}
		last = v
	}
	if !strings.Contains(errOut.String(), "managed session Connected") {
		t.Errorf("no connected status on stderr:\n%s", errOut.String())
	}
}

func TestRunUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-nodes", "ns=x;;"},
		{"-nodes", " , "},
		{"-interval", "0s"},
		{"extra"},
	} {
		err := cmdRunGateway(context.Background(), args, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"run", "-nodes", "ns=x;;"}, nil, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "-nodes") {
		t.Errorf("exit code %d, stderr %q; want 2 and a message naming -nodes", code, stderr.String())
	}
}

// TestFlagsConfig: the configuration the run flags make loads as a file does
// (config.Parse: environment overrides, defaults, validation) and carries
// every connection flag; -password reaches the session, $UAGATE_PASSWORD is
// named, not copied.
func TestFlagsConfig(t *testing.T) {
	parse := func(t *testing.T, upstream, nodes string, args ...string) *config.Config {
		t.Helper()
		var conn connFlags
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		conn.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		text, err := flagsConfig(&conn, upstream, nodes, 250*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := config.Parse(text, "(command line)")
		if err != nil {
			t.Fatalf("%v\n%s", err, text)
		}
		return cfg
	}
	group := func(t *testing.T, cfg *config.Config, endpoint string, fields ...string) {
		t.Helper()
		g := cfg.WriterGroups
		if len(g) != 1 || g[0].Name != "run" || g[0].Endpoint != endpoint || g[0].PublishingInterval.D() != 250*time.Millisecond ||
			len(g[0].Writers) != 1 || g[0].Writers[0].Name != "gateway" {
			t.Fatalf("writer groups %+v", g)
		}
		var got []string
		for _, f := range g[0].Writers[0].Fields {
			got = append(got, f.Name+"="+f.Node)
		}
		if !reflect.DeepEqual(got, fields) {
			t.Errorf("fields %q, want %q", got, fields)
		}
	}

	t.Run("Sim", func(t *testing.T) {
		cfg := parse(t, "", "")
		if len(cfg.Endpoints) != 1 || cfg.Endpoints[0].URL != config.EmbeddedSimURL || !cfg.Embedded.Sim.On() {
			t.Errorf("endpoints %+v", cfg.Endpoints)
		}
		group(t, cfg, "sim", "Counter="+server.NodeCounter, "Sine="+server.NodeSine, "Random="+server.NodeRandom, "Step="+server.NodeStep)
	})
	t.Run("Nodes", func(t *testing.T) {
		group(t, parse(t, "", " ns=1;s=A, ,ns=1;s=B"), "sim", "ns=1;s=A=ns=1;s=A", "ns=1;s=B=ns=1;s=B")
	})
	t.Run("Upstream", func(t *testing.T) {
		pki := t.TempDir()
		cfg := parse(t, "opc.tcp://plc:4840", "ns=2;i=7", "-user", "op", "-password", "pw: #1", "-policy", "Basic256Sha256",
			"-mode", "Sign", "-pki", pki, "-auto-accept", "-allow-deprecated", "-skip-hostname-check", "-timeout", "5s")
		ep := cfg.Endpoints[0]
		if len(cfg.Endpoints) != 1 || ep.Name != "upstream" || ep.URL != "opc.tcp://plc:4840" || ep.SecurityPolicy != "Basic256Sha256" ||
			ep.SecurityMode != "Sign" || ep.PKI != pki || !ep.AutoAccept || !ep.AllowDeprecated || !ep.SkipHostnameCheck ||
			ep.RequestTimeout.D() != 5*time.Second || cfg.Embedded.Sim.On() {
			t.Errorf("endpoint %+v", ep)
		}
		if id := ep.Identity; id.Type != config.IdentityUsername || id.Username != "op" || id.Password.Reveal() != "pw: #1" {
			t.Errorf("identity %+v (password %q)", id, id.Password.Reveal())
		}
		group(t, cfg, "upstream", "ns=2;i=7=ns=2;i=7")
	})
	t.Run("PasswordFromEnv", func(t *testing.T) {
		t.Setenv(passwordEnv, "from-env")
		t.Setenv("UAGATE_ENDPOINT_UPSTREAM_URL", "opc.tcp://other:4840") // an override, as for a file
		ep := parse(t, "opc.tcp://plc:4840", "", "-user", "op").Endpoints[0]
		if ep.URL != "opc.tcp://other:4840" || ep.Identity.Password.Env != passwordEnv || ep.Identity.Password.Reveal() != "from-env" {
			t.Errorf("endpoint %+v (password %q)", ep, ep.Identity.Password.Reveal())
		}
	})
	t.Run("X509", func(t *testing.T) {
		dir := t.TempDir()
		cert, key := filepath.Join(dir, "user.der"), filepath.Join(dir, "user.pem")
		id := parse(t, "opc.tcp://plc:4840", "", "-cert", cert, "-key", key).Endpoints[0].Identity
		if id.Type != config.IdentityX509 || id.CertFile != cert || id.KeyFile != key || id.Password.IsSet() {
			t.Errorf("identity %+v", id)
		}
	})
}
