package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestScaleOutDefaults(t *testing.T) {
	c, _ := mustParse(t, minimal+"scaleOut: {enabled: true, natsUrl: 'nats://a:4222, nats://b:4222'}\n")
	so := c.ScaleOut
	host, _ := os.Hostname()
	if so.Bucket != DefaultScaleOutBucket || so.LeaseTTL.D() != DefaultLeaseTTL || so.ReplicaID != host || so.Replicas != 0 {
		t.Errorf("defaults: %+v", so)
	}
	// Off: nothing is filled in (nor checked).
	c, _ = mustParse(t, minimal+"scaleOut: {natsUrl: 'not a url'}\n")
	if c.ScaleOut.Bucket != "" || c.ScaleOut.ReplicaID != "" {
		t.Errorf("disabled section got defaults: %+v", c.ScaleOut)
	}
}

func TestScaleOutEnv(t *testing.T) {
	env := map[string]string{
		"UAGATE_SCALEOUT_ENABLED":    "true",
		"UAGATE_SCALEOUT_NATS_URL":   "nats://n1:4222,nats://n2:4222",
		"UAGATE_SCALEOUT_BUCKET":     "leases_2",
		"UAGATE_SCALEOUT_LEASE_TTL":  "15s",
		"UAGATE_SCALEOUT_REPLICA_ID": "gateway-1",
	}
	c, _, err := parseWith(t, minimal, env)
	if err != nil {
		t.Fatal(err)
	}
	so := c.ScaleOut
	if !so.Enabled || so.NATSURL != "nats://n1:4222,nats://n2:4222" || so.Bucket != "leases_2" || so.LeaseTTL.D() != 15*time.Second || so.ReplicaID != "gateway-1" {
		t.Errorf("overrides: %+v", so)
	}
	// The variable switches a section of the file off, too.
	c, _, err = parseWith(t, minimal+"scaleOut: {enabled: true}\n", map[string]string{"UAGATE_SCALEOUT_ENABLED": "false"})
	if err != nil || c.ScaleOut.Enabled {
		t.Errorf("UAGATE_SCALEOUT_ENABLED=false: %+v %v", c, err)
	}

	_, _, err = parseWith(t, minimal, map[string]string{"UAGATE_SCALEOUT_ENABLED": "maybe", "UAGATE_SCALEOUT_LEASE_TTL": "soon"})
	want := []string{
		`$UAGATE_SCALEOUT_ENABLED: scaleOut.enabled: "maybe": want true or false`,
		`$UAGATE_SCALEOUT_LEASE_TTL: scaleOut.leaseTTL: "soon" is not a duration (want e.g. "1s", "250ms", or a number of milliseconds)`,
	}
	if got := issueLines(t, err); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A value from a variable that fails validation names the variable.
	_, _, err = parseWith(t, minimal, map[string]string{"UAGATE_SCALEOUT_ENABLED": "1", "UAGATE_SCALEOUT_NATS_URL": "nats://n:4222", "UAGATE_SCALEOUT_LEASE_TTL": "1s"})
	want = []string{`$UAGATE_SCALEOUT_LEASE_TTL: scaleOut.leaseTTL: 1s: at least 3s (a holder renews every third of it)`}
	if got := issueLines(t, err); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestScaleOutValidate(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"scaleOut: {enabled: true}", "scaleOut.natsUrl: missing: the NATS server(s) that keep the leases"},
		{"scaleOut: {enabled: true, natsUrl: 'http://x:1'}", `scaleOut.natsUrl: "http://x:1": want a URL with scheme nats:// tls:// ws:// wss://`},
		{"scaleOut: {enabled: true, natsUrl: 'nats://x:1', leaseTTL: 2s}", "scaleOut.leaseTTL: 2s: at least 3s"},
		{"scaleOut: {enabled: true, natsUrl: 'nats://x:1', leaseTTL: 2h}", "scaleOut.leaseTTL: 2h0m0s: at most 1h"},
		{"scaleOut: {enabled: true, natsUrl: 'nats://x:1', bucket: 'a.b'}", `scaleOut.bucket: "a.b": want letters, digits`},
		{"scaleOut: {enabled: true, natsUrl: 'nats://x:1', replicas: 7}", "scaleOut.replicas: 7: want 0 (automatic) to 5"},
		{"scaleOut: {enabled: true, natsUrl: 'nats://x:1', replicaId: 'a b'}", `scaleOut.replicaId: "a b": no white space`},
		{"scaleOut: {enabled: true, natsUrl: 'nats://x:1', token: {value: t}, credsFile: /c}", "scaleOut: give one of username/password, token, credsFile, nkeyFile"},
		{"scaleOut: {enabled: true, natsUrl: 'nats://x:1', password: {value: p}}", "scaleOut.password: a password needs a username"},
	} {
		_, _, err := parseWith(t, minimal+tc.yaml+"\n", nil)
		if err == nil {
			t.Errorf("%s: no error", tc.yaml)
			continue
		}
		if got := strings.Join(issueLines(t, err), "\n"); !strings.Contains(got, tc.want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.yaml, got, tc.want)
		}
	}
	// A change of the section is a settings change: a restart applies it.
	a, _ := mustParse(t, minimal+"scaleOut: {enabled: true, natsUrl: 'nats://x:1'}\n")
	b, _ := mustParse(t, minimal+"scaleOut: {enabled: true, natsUrl: 'nats://y:1'}\n")
	if ch := Diff(a, b); !ch.Settings {
		t.Errorf("scaleOut change not a settings change: %s", ch)
	}
	// Secrets are resolved and never printed.
	c, _, err := parseWith(t, minimal+"scaleOut: {enabled: true, natsUrl: 'nats://x:1', token: {env: T}}\n", map[string]string{"T": "s3cret"})
	if err != nil || c.ScaleOut.Token.Reveal() != "s3cret" || strings.Contains(c.String(), "s3cret") {
		t.Errorf("token: %v %q", err, c.String())
	}
}
