package charttest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// gatewayBinary is $UAGATE_GATEWAY (scripts/test-deploy.sh passes the binary
// it put into the image), else the gateway built here from the root module.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("UAGATE_GATEWAY"); p != "" {
		return p
	}
	out := filepath.Join(t.TempDir(), "gateway")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/gateway")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gateway: %v\n%s", err, b)
	}
	return out
}

var secretFileRef = regexp.MustCompile(`/etc/uagate/secrets/([A-Za-z0-9._-]+)`)

// TestConfigAccepted runs the gateway's own check-config on the configuration
// that each values file renders, in the environment the pod would have: the
// chart's variables, the secrets' keys as files (their mount relocated to a
// temporary directory) and as variables. So a values file, or the chart's
// default configuration, that the gateway would refuse at start fails here.
func TestConfigAccepted(t *testing.T) {
	bin := gatewayBinary(t)
	for _, name := range valuesFiles {
		if name == "publishednodes" {
			continue // an existing ConfigMap: its content is not the chart's
		}
		t.Run(name, func(t *testing.T) {
			r := render(t, name)
			c := gateway(t, r)
			key := strings.TrimPrefix(c.Args[2], "/etc/uagate/config/")
			cm := r.configMaps[volume(r, "config").ConfigMap.Name]
			if cm == nil {
				t.Fatalf("no rendered ConfigMap for %s", name)
			}
			dir := t.TempDir()
			secretsDir := filepath.Join(dir, "secrets")
			if err := os.Mkdir(secretsDir, 0o700); err != nil {
				t.Fatal(err)
			}
			content := cm.Data[key]
			// The chart's own Secret provides the real values; an existing
			// Secret is the user's, so a placeholder stands for each key the
			// configuration reads.
			var chartSecret *corev1.Secret
			if v := volume(r, "secrets"); v != nil {
				chartSecret = r.secrets[v.Secret.SecretName]
			}
			for _, m := range secretFileRef.FindAllStringSubmatch(content, -1) {
				value := []byte("placeholder\n")
				if chartSecret != nil {
					var ok bool
					if value, ok = chartSecret.Data[m[1]]; !ok {
						t.Fatalf("the configuration reads secret key %s, which Secret %s lacks", m[1], chartSecret.Name)
					}
				} else if volume(r, "secrets") == nil {
					t.Fatalf("the configuration reads %s, but no secret is mounted", m[0])
				}
				if err := os.WriteFile(filepath.Join(secretsDir, m[1]), value, 0o400); err != nil {
					t.Fatal(err)
				}
			}
			file := filepath.Join(dir, key)
			content = strings.ReplaceAll(content, "/etc/uagate/secrets/", secretsDir+"/")
			if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}

			// The secrets' mount moved: the secret directory with it.
			env := append(environWithout("UAGATE_"), "UAGATE_SECRETS_DIR="+secretsDir)
			for _, e := range c.Env {
				switch {
				case e.Name == "UAGATE_SECRETS_DIR":
				case e.ValueFrom == nil:
					env = append(env, e.Name+"="+e.Value)
				case e.ValueFrom.SecretKeyRef != nil:
					value := "placeholder"
					if chartSecret != nil {
						value = string(chartSecret.Data[e.ValueFrom.SecretKeyRef.Key])
					}
					env = append(env, e.Name+"="+value)
				case e.ValueFrom.FieldRef != nil:
					env = append(env, e.Name+"="+fullname+"-0")
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "check-config", file)
			cmd.Env = env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				hint := ""
				if strings.Contains(stderr.String(), "unknown command") {
					hint = "\n(this gateway has no check-config subcommand yet)"
				}
				t.Fatalf("gateway check-config %s: %v\n%s%s%s\n--- %s:\n%s", key, err, stdout.String(), stderr.String(), hint, key, content)
			}
			if !strings.HasPrefix(lastLine(stdout.String()), "ok: ") {
				t.Fatalf("check-config output:\n%s", stdout.String())
			}
			t.Logf("%s", strings.TrimSpace(stdout.String()))
		})
	}
}

func environWithout(prefix string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, prefix) {
			env = append(env, e)
		}
	}
	return env
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
