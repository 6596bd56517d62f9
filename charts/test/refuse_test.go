package charttest

import (
	"strings"
	"testing"
)

// TestRefuses checks that values which would deploy something broken fail
// the rendering with a message that says why, and that the neighbouring valid
// values render.
func TestRefuses(t *testing.T) {
	const nats = "scaleOut.natsUrl=nats://nats:4222"
	for _, tc := range []struct {
		name string
		sets []string
		want string // in the error; "" renders fine
	}{
		{"replicas without scale-out", []string{"replicaCount=3"}, "replicaCount is 3 but scaleOut.enabled is false"},
		{"replicas with scale-out", []string{"replicaCount=3", "scaleOut.enabled=true", nats}, ""},
		{"one replica with scale-out", []string{"scaleOut.enabled=true", nats}, ""},
		{"zero replicas", []string{"replicaCount=0"}, ""},
		{"scale-out without NATS", []string{"scaleOut.enabled=true"}, "scaleOut.enabled needs scaleOut.natsUrl"},
		// values.schema.json: misspelt keys and wrong types.
		{"unknown format", []string{"config.format=json"}, "at '/config/format': value must be one of 'yaml', 'publishedNodes'"},
		{"misspelt key", []string{"replicaCont=2"}, "additional properties 'replicaCont' not allowed"},
		{"misspelt nested key", []string{"scaleOut.natsURL=nats://n:4222"}, "at '/scaleOut': additional properties 'natsURL' not allowed"},
		{"string for a number", []string{"service.port=http"}, "at '/service/port': got string, want integer"},
		{"bad lease time", []string{"scaleOut.leaseTTL=15"}, "at '/scaleOut/leaseTTL'"},
		{"bad percentage", []string{"podDisruptionBudget.maxUnavailable=half"}, "at '/podDisruptionBudget/maxUnavailable'"},
		{"percentage", []string{"podDisruptionBudget.enabled=true", "podDisruptionBudget.maxUnavailable=50%"}, ""},
		{"publishedNodes without nodes", []string{"config.format=publishedNodes"}, "config.publishedNodes is empty"},
		{"publishedNodes from a ConfigMap", []string{"config.format=publishedNodes", "config.existingConfigMap=pn"}, ""},
		{"key without ConfigMap", []string{"config.existingConfigMapKey=x.yaml"}, "existingConfigMapKey is set without"},
		{"two secrets", []string{"secrets.existingSecret=creds", "secrets.values.a=b"}, "choose one"},
		{"env of a missing key", []string{"secrets.values.a=b", "secrets.env.X=c"}, `secrets.env.X refers to key "c"`},
		{"env without a secret", []string{"secrets.env.X=c"}, "there is no secret"},
		{"env of an existing secret", []string{"secrets.existingSecret=creds", "secrets.env.X=c"}, ""},
		{"shared claim for replicas", []string{"persistence.existingClaim=c", "replicaCount=2", "scaleOut.enabled=true", nats}, "each replica needs a state directory of its own"},
		{"shared claim without persistence", []string{"persistence.enabled=false", "persistence.existingClaim=c", "replicaCount=2", "scaleOut.enabled=true", nats}, ""},
		{"budget with both", []string{"podDisruptionBudget.enabled=true", "podDisruptionBudget.minAvailable=1"}, "not both"},
		// The chart never installs a gateway that anyone can drive.
		{"no keys at all", []string{"api.generateKeys=false"}, "api: no API keys"},
		{"no keys, opened on purpose", []string{"api.generateKeys=false", "api.allowUnauthenticated=true"}, ""},
		{"a keys file of one's own", []string{"api.generateKeys=false", "secrets.values.keys=x", "api.keysSecretKey=keys"}, ""},
		{"inline keys", []string{"api.generateKeys=false", "config.yaml.http.apiKeys[0].role=admin", "config.yaml.http.apiKeys[0].token.env=K"}, ""},
		{"monitor without a token", []string{"metrics.serviceMonitor.enabled=true", "secrets.values.keys=x", "api.keysSecretKey=keys"}, "needs a read key"},
		{"monitor with a token", []string{"metrics.serviceMonitor.enabled=true", "secrets.values.keys=x", "api.keysSecretKey=keys",
			"metrics.serviceMonitor.tokenSecret.name=prom", "metrics.serviceMonitor.tokenSecret.key=read"}, ""},
		{"monitor of public metrics", []string{"metrics.serviceMonitor.enabled=true", "api.generateKeys=false", "api.allowUnauthenticated=true"}, ""},
		{"own certificate without its URI", []string{"pki.ownSecret=gw-cert"}, "pki.ownSecret needs pki.applicationUri"},
		{"bad readiness", []string{"ready.endpoints=some"}, "at '/ready/endpoints'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderErr(t, "", tc.sets...)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want it rendered: %v", err)
				}
				decodeAll(t, out)
				return
			}
			if err == nil {
				t.Fatalf("rendered; want an error with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// TestChecksumRollsOut checks that a change of the configuration or of the
// chart's secret changes the pod template (so the pods restart), and that
// rolloutOnChange=false leaves the template alone.
func TestChecksumRollsOut(t *testing.T) {
	anno := func(r *rendered, key string) string { return r.sts.Spec.Template.Annotations[key] }
	base := render(t, "scaleout")
	changedConfig := render(t, "scaleout", "config.yaml.gateway.publisherId=plant2")
	changedSecret := render(t, "scaleout", "secrets.values.api-key=another")
	if anno(base, "checksum/config") == "" || anno(base, "checksum/config") == anno(changedConfig, "checksum/config") {
		t.Errorf("checksum/config %q did not change with the configuration (%q)", anno(base, "checksum/config"), anno(changedConfig, "checksum/config"))
	}
	if anno(base, "checksum/secrets") != anno(changedConfig, "checksum/secrets") {
		t.Errorf("checksum/secrets changed with the configuration")
	}
	if anno(base, "checksum/secrets") == "" || anno(base, "checksum/secrets") == anno(changedSecret, "checksum/secrets") {
		t.Errorf("checksum/secrets did not change with the secret")
	}
	off := render(t, "scaleout", "config.rolloutOnChange=false")
	if anno(off, "checksum/config") != "" || anno(off, "checksum/secrets") != "" {
		t.Errorf("checksums with rolloutOnChange=false: %v", off.sts.Spec.Template.Annotations)
	}
}
