package charttest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The release every test renders: its name and namespace appear in the
// expected resource names.
const (
	releaseName = "test"
	namespace   = "plant"
	fullname    = "test-gateway"
	// kubeVersion is the cluster version helm renders for. A helm built
	// with go install has no version stamped in and would assume v1.20,
	// older than the chart's kubeVersion.
	kubeVersion = "v1.33.0"
)

// chartDir is the chart under test, relative to this package.
var chartDir = filepath.Join("..", "gateway")

// valuesFiles are the chart's ci/<name>-values.yaml files; every one is
// linted, rendered and checked.
var valuesFiles = []string{"default", "publishednodes", "publishednodes-inline", "secrets-monitoring", "scaleout"}

func valuesPath(name string) string {
	return filepath.Join(chartDir, "ci", name+"-values.yaml")
}

// helmBinary is $HELM, else the binary scripts/test-deploy.sh builds once
// into the tool cache outside the repository.
func helmBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("HELM")
	if p == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("no $HELM and no home directory: %v", err)
		}
		p = filepath.Join(home, ".cache", "uagate-tools", "bin", "helm")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("helm not found at %s (set $HELM, or run scripts/test-deploy.sh, which builds it): %v", p, err)
	}
	return p
}

// runHelm runs helm with args and returns its standard output, and an error
// carrying its standard error when it fails.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmBinary(t), args...)
	// helm keeps caches and repository settings under these; point them at
	// the test's temporary directory so that nothing of the user's is read.
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(tmp, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(tmp, "config"),
		"HELM_DATA_HOME="+filepath.Join(tmp, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

func TestLintStrict(t *testing.T) {
	for _, name := range valuesFiles {
		t.Run(name, func(t *testing.T) {
			out, err := runHelm(t, "lint", "--strict", "--kube-version", kubeVersion, "--namespace", namespace, "--values", valuesPath(name), chartDir)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Fatalf("helm lint output:\n%s", out)
			}
		})
	}
}

// rendered is one helm template output, every document decoded strictly.
type rendered struct {
	sts            *appsv1.StatefulSet
	services       map[string]*corev1.Service
	configMaps     map[string]*corev1.ConfigMap
	secrets        map[string]*corev1.Secret
	serviceAccount *corev1.ServiceAccount
	pdb            *policyv1.PodDisruptionBudget
	netpol         *networkingv1.NetworkPolicy
	serviceMonitor map[string]any // no CRD types: unstructured
	testPod        *corev1.Pod    // the helm test hook
	objects        []metav1.Object
}

// render runs helm template with a values file and extra --set flags.
func render(t *testing.T, valuesFile string, sets ...string) *rendered {
	t.Helper()
	out, err := renderErr(t, valuesFile, sets...)
	if err != nil {
		t.Fatal(err)
	}
	return decodeAll(t, out)
}

func renderErr(t *testing.T, valuesFile string, sets ...string) (string, error) {
	t.Helper()
	args := []string{"template", releaseName, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
	if valuesFile != "" {
		args = append(args, "--values", valuesPath(valuesFile))
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return runHelm(t, args...)
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeAll splits a multi-document stream and decodes each document into
// its k8s.io/api type with unknown and duplicate fields as errors, so that a
// misspelt or misplaced key in a template fails here instead of being
// dropped silently by the API server's decoder.
func decodeAll(t *testing.T, stream string) *rendered {
	t.Helper()
	r := &rendered{
		services:   map[string]*corev1.Service{},
		configMaps: map[string]*corev1.ConfigMap{},
		secrets:    map[string]*corev1.Secret{},
	}
	seen := map[string]bool{}
	for i, doc := range docSeparator.Split(stream, -1) {
		if isBlank(doc) {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, doc)
		}
		strict := func(into any) {
			t.Helper()
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				t.Fatalf("document %d (%s %s): strict decoding: %v\n%s", i, tm.APIVersion, tm.Kind, err, doc)
			}
		}
		var obj metav1.Object
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 StatefulSet":
			if r.sts != nil {
				t.Fatal("two StatefulSets")
			}
			r.sts = new(appsv1.StatefulSet)
			strict(r.sts)
			obj = r.sts
		case "v1 Service":
			s := new(corev1.Service)
			strict(s)
			r.services[s.Name] = s
			obj = s
		case "v1 ConfigMap":
			c := new(corev1.ConfigMap)
			strict(c)
			r.configMaps[c.Name] = c
			obj = c
		case "v1 Secret":
			s := new(corev1.Secret)
			strict(s)
			r.secrets[s.Name] = s
			obj = s
		case "v1 ServiceAccount":
			r.serviceAccount = new(corev1.ServiceAccount)
			strict(r.serviceAccount)
			obj = r.serviceAccount
		case "policy/v1 PodDisruptionBudget":
			r.pdb = new(policyv1.PodDisruptionBudget)
			strict(r.pdb)
			obj = r.pdb
		case "networking.k8s.io/v1 NetworkPolicy":
			r.netpol = new(networkingv1.NetworkPolicy)
			strict(r.netpol)
			obj = r.netpol
		case "v1 Pod":
			if r.testPod != nil {
				t.Fatal("two Pods")
			}
			r.testPod = new(corev1.Pod)
			strict(r.testPod)
			obj = r.testPod
		case "monitoring.coreos.com/v1 ServiceMonitor":
			var m map[string]any
			strict(&m)
			r.serviceMonitor = m
			var meta struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("ServiceMonitor metadata: %v", err)
			}
			obj = &meta.Metadata
		default:
			t.Fatalf("document %d: unexpected %q %q\n%s", i, tm.APIVersion, tm.Kind, doc)
		}
		key := tm.Kind + "/" + obj.GetName()
		if seen[key] {
			t.Fatalf("%s rendered twice", key)
		}
		seen[key] = true
		r.objects = append(r.objects, obj)
	}
	if r.sts == nil {
		t.Fatalf("no StatefulSet rendered:\n%s", stream)
	}
	return r
}

// isBlank reports whether a document holds nothing but comments and space.
func isBlank(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}
