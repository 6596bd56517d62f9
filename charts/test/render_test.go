package charttest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// TestRender renders every values file and checks what must hold for all of
// them, then what that file is about.
func TestRender(t *testing.T) {
	specific := map[string]func(*testing.T, *rendered){
		"default":               checkDefault,
		"publishednodes":        checkPublishedNodesExisting,
		"publishednodes-inline": checkPublishedNodesInline,
		"secrets-monitoring":    checkSecretsMonitoring,
		"scaleout":              checkScaleOut,
	}
	for _, name := range valuesFiles {
		t.Run(name, func(t *testing.T) {
			r := render(t, name)
			checkCommon(t, r)
			check, ok := specific[name]
			if !ok {
				t.Fatalf("no checks for values file %s", name)
			}
			check(t, r)
		})
	}
}

func gateway(t *testing.T, r *rendered) *corev1.Container {
	t.Helper()
	cs := r.sts.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "gateway" {
		t.Fatalf("containers: want one named gateway, got %+v", cs)
	}
	return &cs[0]
}

func envVar(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func wantEnv(t *testing.T, c *corev1.Container, name, value string) {
	t.Helper()
	e := envVar(c, name)
	if e == nil || e.Value != value || e.ValueFrom != nil {
		t.Errorf("env %s: want %q, got %+v", name, value, e)
	}
}

func wantEnvFromSecret(t *testing.T, c *corev1.Container, name, secret, key string) {
	t.Helper()
	e := envVar(c, name)
	if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		e.ValueFrom.SecretKeyRef.Name != secret || e.ValueFrom.SecretKeyRef.Key != key {
		t.Errorf("env %s: want secret %s key %s, got %+v", name, secret, key, e)
	}
}

func mount(c *corev1.Container, name string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == name {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func volume(r *rendered, name string) *corev1.Volume {
	vs := r.sts.Spec.Template.Spec.Volumes
	for i := range vs {
		if vs[i].Name == name {
			return &vs[i]
		}
	}
	return nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// checkCommon holds for every values file: names, namespace, labels and
// selectors, the security settings, probes, the listener, mounts.
func checkCommon(t *testing.T, r *rendered) {
	t.Helper()
	for _, o := range r.objects {
		if o.GetNamespace() != namespace {
			t.Errorf("%s: namespace %q, want %q", o.GetName(), o.GetNamespace(), namespace)
		}
		if o.GetLabels()["app.kubernetes.io/instance"] != releaseName {
			t.Errorf("%s: labels %v lack the release", o.GetName(), o.GetLabels())
		}
	}
	sts := r.sts
	if sts.Name != fullname {
		t.Errorf("StatefulSet name %q", sts.Name)
	}
	pod := &sts.Spec.Template
	podLabels := pod.Labels
	for k, v := range sts.Spec.Selector.MatchLabels {
		if podLabels[k] != v {
			t.Errorf("selector %s=%s does not match the pod labels %v", k, v, podLabels)
		}
	}
	if sts.Spec.PodManagementPolicy != "Parallel" {
		t.Errorf("podManagementPolicy %q", sts.Spec.PodManagementPolicy)
	}

	// The governing Service exists and is headless.
	headless := r.services[sts.Spec.ServiceName]
	if headless == nil || headless.Spec.ClusterIP != "None" || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("serviceName %q: no headless Service (%+v)", sts.Spec.ServiceName, headless)
	}
	svc := r.services[fullname]
	if svc == nil {
		t.Fatalf("no Service %s", fullname)
	}
	for _, s := range []*corev1.Service{svc, headless} {
		if s == nil {
			continue
		}
		if len(s.Spec.Selector) == 0 {
			t.Errorf("Service %s has no selector", s.Name)
		}
		for k, v := range s.Spec.Selector {
			if podLabels[k] != v {
				t.Errorf("Service %s selects %s=%s, which the pods do not have", s.Name, k, v)
			}
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http" || svc.Spec.Ports[0].Port != 8080 ||
		svc.Spec.Ports[0].TargetPort != intstr.FromString("http") || svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("Service %s: %+v", svc.Name, svc.Spec)
	}

	// Pod security: non-root, seccomp, the volumes' group; no API token.
	ps := pod.Spec.SecurityContext
	if ps == nil || !isTrue(ps.RunAsNonRoot) || ps.RunAsUser == nil || *ps.RunAsUser != 65532 ||
		ps.FSGroup == nil || *ps.FSGroup != 65532 ||
		ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext: %+v", ps)
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken: want false")
	}
	if r.serviceAccount == nil || pod.Spec.ServiceAccountName != r.serviceAccount.Name {
		t.Errorf("serviceAccountName %q does not name the rendered ServiceAccount", pod.Spec.ServiceAccountName)
	}
	if pod.Spec.TerminationGracePeriodSeconds == nil || *pod.Spec.TerminationGracePeriodSeconds <= 10 {
		t.Errorf("terminationGracePeriodSeconds must outlast the gateway's 10s drain: %v", pod.Spec.TerminationGracePeriodSeconds)
	}

	c := gateway(t, r)
	cs := c.SecurityContext
	if cs == nil || !isTrue(cs.ReadOnlyRootFilesystem) || cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation ||
		!isTrue(cs.RunAsNonRoot) || cs.Privileged == nil || *cs.Privileged ||
		cs.Capabilities == nil || !reflect.DeepEqual(cs.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(cs.Capabilities.Add) != 0 ||
		cs.SeccompProfile == nil || cs.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container securityContext: %+v", cs)
	}

	// The one listener: port "http", faced to the pod network, probed.
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("container ports: %+v", c.Ports)
	}
	wantEnv(t, c, "UAGATE_HTTP_LISTEN", "0.0.0.0:8080")
	wantEnv(t, c, "UAGATE_STATE_DIR", "/var/lib/uagate")
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}, {"startup", c.StartupProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path ||
			p.probe.HTTPGet.Port != intstr.FromString("http") {
			t.Errorf("%s probe: want GET %s on port http, got %+v", p.name, p.path, p.probe)
		}
	}

	// Resources: requests always, a memory limit always.
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources: %+v", c.Resources)
	}

	// Mounts: state writable at the state dir, config and secrets read-only,
	// /tmp on an emptyDir (the root filesystem is read-only).
	if m := mount(c, "state"); m == nil || m.MountPath != "/var/lib/uagate" || m.ReadOnly {
		t.Errorf("state mount: %+v", m)
	}
	if m := mount(c, "config"); m == nil || m.MountPath != "/etc/uagate/config" || !m.ReadOnly || m.SubPath != "" {
		t.Errorf("config mount (read-only, no subPath so that edits reach the pod): %+v", m)
	}
	if m := mount(c, "tmp"); m == nil || m.MountPath != "/tmp" {
		t.Errorf("tmp mount: %+v", m)
	} else if v := volume(r, "tmp"); v == nil || v.EmptyDir == nil {
		t.Errorf("tmp volume: %+v", v)
	}
	if m := mount(c, "secrets"); m != nil {
		v := volume(r, "secrets")
		if !m.ReadOnly || m.MountPath != "/etc/uagate/secrets" || v == nil || v.Secret == nil ||
			v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o440 {
			t.Errorf("secrets mount %+v, volume %+v", m, v)
		}
	}
	// Every mount has its volume (or its claim template).
	for _, m := range c.VolumeMounts {
		if volume(r, m.Name) == nil && !hasClaimTemplate(r, m.Name) {
			t.Errorf("mount %s has no volume", m.Name)
		}
	}
	if volume(r, "state") != nil && hasClaimTemplate(r, "state") {
		t.Errorf("state is both a volume and a claim template")
	}

	// The command line names the file the config volume holds.
	if len(c.Args) < 3 || c.Args[0] != "run" || c.Args[1] != "-config" || !strings.HasPrefix(c.Args[2], "/etc/uagate/config/") {
		t.Fatalf("args: %q", c.Args)
	}
	key := strings.TrimPrefix(c.Args[2], "/etc/uagate/config/")
	cv := volume(r, "config")
	if cv == nil || cv.ConfigMap == nil {
		t.Fatalf("config volume: %+v", cv)
	}
	if cm := r.configMaps[cv.ConfigMap.Name]; cm != nil {
		if _, ok := cm.Data[key]; !ok || len(cv.ConfigMap.Items) != 0 {
			t.Errorf("ConfigMap %s has keys %v and items %v; the gateway reads %s", cm.Name, keys(cm.Data), cv.ConfigMap.Items, key)
		}
	} else if len(cv.ConfigMap.Items) != 1 || cv.ConfigMap.Items[0].Path != key {
		t.Errorf("existing ConfigMap %s: items %+v, the gateway reads %s", cv.ConfigMap.Name, cv.ConfigMap.Items, key)
	}

	// The secret referenced by env and the volume is one secret.
	if v := volume(r, "secrets"); v != nil && v.Secret != nil {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != v.Secret.SecretName {
				t.Errorf("env %s reads secret %s, the volume mounts %s", e.Name, e.ValueFrom.SecretKeyRef.Name, v.Secret.SecretName)
			}
		}
	}
	if r.pdb != nil {
		for k, v := range r.pdb.Spec.Selector.MatchLabels {
			if podLabels[k] != v {
				t.Errorf("PodDisruptionBudget selects %s=%s, which the pods do not have", k, v)
			}
		}
	}
	if r.netpol != nil {
		for k, v := range r.netpol.Spec.PodSelector.MatchLabels {
			if podLabels[k] != v {
				t.Errorf("NetworkPolicy selects %s=%s, which the pods do not have", k, v)
			}
		}
	}
}

func hasClaimTemplate(r *rendered, name string) bool {
	for _, p := range r.sts.Spec.VolumeClaimTemplates {
		if p.Name == name {
			return true
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// gatewayConfig decodes the chart's config.yaml.
func gatewayConfig(t *testing.T, r *rendered) map[string]any {
	t.Helper()
	cm := r.configMaps[fullname+"-config"]
	if cm == nil {
		t.Fatalf("no ConfigMap %s-config", fullname)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatalf("config.yaml: %v\n%s", err, cm.Data["config.yaml"])
	}
	return cfg
}

// at walks a decoded YAML/JSON tree along keys (string) and indexes (int).
func at(t *testing.T, tree any, path ...any) any {
	t.Helper()
	v := tree
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: not a mapping at %q", path, p)
			}
			if v, ok = m[p]; !ok {
				t.Fatalf("%v: no key %q", path, p)
			}
		case int:
			l, ok := v.([]any)
			if !ok || p >= len(l) {
				t.Fatalf("%v: no element %d", path, p)
			}
			v = l[p]
		}
	}
	return v
}

func wantQuantity(t *testing.T, what string, got resource.Quantity, want string) {
	t.Helper()
	if got.Cmp(resource.MustParse(want)) != 0 {
		t.Errorf("%s: %s, want %s", what, got.String(), want)
	}
}

func checkDefault(t *testing.T, r *rendered) {
	sts := r.sts
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 {
		t.Errorf("replicas: %v", sts.Spec.Replicas)
	}
	// State on a claim per pod, kept when the release goes.
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("volumeClaimTemplates: %+v", sts.Spec.VolumeClaimTemplates)
	}
	pvc := sts.Spec.VolumeClaimTemplates[0]
	if pvc.Name != "state" || !reflect.DeepEqual(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) ||
		pvc.Spec.StorageClassName != nil {
		t.Errorf("claim template: %+v", pvc)
	}
	wantQuantity(t, "claim size", pvc.Spec.Resources.Requests[corev1.ResourceStorage], "1Gi")
	if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p == nil || p.WhenDeleted != "Retain" || p.WhenScaled != "Retain" {
		t.Errorf("persistentVolumeClaimRetentionPolicy: %+v", p)
	}
	c := gateway(t, r)
	if c.Image != "uagate/gateway:0.1.0" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %q %q", c.Image, c.ImagePullPolicy)
	}
	if !reflect.DeepEqual(c.Args, []string{"run", "-config", "/etc/uagate/config/config.yaml"}) {
		t.Errorf("args %q", c.Args)
	}
	wantQuantity(t, "cpu request", c.Resources.Requests[corev1.ResourceCPU], "100m")
	wantQuantity(t, "memory limit", c.Resources.Limits[corev1.ResourceMemory], "512Mi")
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Errorf("a CPU limit by default: %v", c.Resources.Limits)
	}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "UAGATE_SCALEOUT_") {
			t.Errorf("scale-out variable %s without scaleOut.enabled", e.Name)
		}
	}
	// The Go runtime's memory limit follows the container's (the gateway
	// takes 90% of the bytes the downward API gives).
	if e := envVar(c, "UAGATE_MEMORY_LIMIT"); e == nil || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil ||
		e.ValueFrom.ResourceFieldRef.Resource != "limits.memory" || e.ValueFrom.ResourceFieldRef.Divisor.String() != "1" {
		t.Errorf("UAGATE_MEMORY_LIMIT: want limits.memory in bytes from the downward API, got %+v", e)
	}
	if mount(c, "secrets") != nil {
		t.Errorf("a secret mounted without secrets configured")
	}
	if r.pdb != nil || r.serviceMonitor != nil {
		t.Errorf("optional objects rendered by default: pdb %v servicemonitor %v", r.pdb != nil, r.serviceMonitor != nil)
	}
	checkSafeDefaults(t, r)
	if sts.Spec.Template.Annotations["checksum/config"] == "" {
		t.Errorf("no checksum/config annotation: %v", sts.Spec.Template.Annotations)
	}
	// The embedded brokers are off; the WebSocket stream is the sink.
	cfg := gatewayConfig(t, r)
	if at(t, cfg, "embedded", "mqtt", "enabled") != false || at(t, cfg, "embedded", "nats", "enabled") != false {
		t.Errorf("embedded brokers not off: %v", cfg["embedded"])
	}
	if ws, ok := at(t, cfg, "sinks", "websocket").(map[string]any); !ok || len(ws) != 0 {
		t.Errorf("sinks.websocket: %v", at(t, cfg, "sinks"))
	}
}

func checkPublishedNodesExisting(t *testing.T, r *rendered) {
	c := gateway(t, r)
	if c.Args[2] != "/etc/uagate/config/pn.json" {
		t.Errorf("args %q", c.Args)
	}
	v := volume(r, "config")
	if v.ConfigMap.Name != "opc-publisher-nodes" || len(v.ConfigMap.Items) != 1 || v.ConfigMap.Items[0].Key != "pn.json" {
		t.Errorf("config volume: %+v", v.ConfigMap)
	}
	if len(r.configMaps) != 0 {
		t.Errorf("ConfigMaps rendered beside an existing one: %v", keys(r.configMaps))
	}
	if _, ok := r.sts.Spec.Template.Annotations["checksum/config"]; ok {
		t.Errorf("checksum of a ConfigMap the chart does not render")
	}
	if s := volume(r, "state"); s == nil || s.PersistentVolumeClaim == nil || s.PersistentVolumeClaim.ClaimName != "uagate-state" {
		t.Errorf("state volume: %+v", s)
	}
	if len(r.sts.Spec.VolumeClaimTemplates) != 0 || r.sts.Spec.PersistentVolumeClaimRetentionPolicy != nil {
		t.Errorf("claim templates beside an existing claim")
	}
}

func checkPublishedNodesInline(t *testing.T, r *rendered) {
	c := gateway(t, r)
	if c.Args[2] != "/etc/uagate/config/publishednodes.json" {
		t.Errorf("args %q", c.Args)
	}
	cm := r.configMaps[fullname+"-config"]
	if cm == nil {
		t.Fatal("no ConfigMap")
	}
	if _, ok := cm.Data["config.yaml"]; ok {
		t.Errorf("config.yaml beside publishednodes.json")
	}
	var entries []map[string]any
	if err := json.Unmarshal([]byte(cm.Data["publishednodes.json"]), &entries); err != nil {
		t.Fatalf("publishednodes.json is not a JSON array: %v\n%s", err, cm.Data["publishednodes.json"])
	}
	if len(entries) != 1 || entries[0]["EndpointUrl"] != "opc.tcp://plc1.plant.example:4840" ||
		at(t, entries[0], "OpcNodes", 1, "Id") != "ns=2;s=Line1.Temperature" {
		t.Errorf("publishednodes.json: %v", entries)
	}
	if s := volume(r, "state"); s == nil || s.EmptyDir == nil {
		t.Errorf("state volume with persistence off: %+v", s)
	}
	if len(r.sts.Spec.VolumeClaimTemplates) != 0 {
		t.Errorf("claim templates with persistence off")
	}
}

func checkSecretsMonitoring(t *testing.T, r *rendered) {
	c := gateway(t, r)
	pod := r.sts.Spec.Template.Spec
	if c.Image != "registry.example/uagate/gateway:1.2.3" || len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "regcred" {
		t.Errorf("image %q, pull secrets %v", c.Image, pod.ImagePullSecrets)
	}
	// The existing Secret is mounted and read by env; the chart makes none.
	if v := volume(r, "secrets"); v == nil || v.Secret == nil || v.Secret.SecretName != "uagate-credentials" {
		t.Errorf("secrets volume: %+v", v)
	}
	if len(r.secrets) != 1 || r.secrets[fullname+"-api-keys"] == nil {
		t.Errorf("Secrets rendered beside the existing one: %v (want only the generated API keys)", keys(r.secrets))
	}
	wantEnvFromSecret(t, c, "MQTT_PASSWORD", "uagate-credentials", "mqtt-password")
	cfg := gatewayConfig(t, r)
	if got := at(t, cfg, "endpoints", 0, "identity", "password", "file"); got != "/etc/uagate/secrets/plc1-password" {
		t.Errorf("password file %v", got)
	}
	// The chart's defaults are still merged under the user's configuration.
	if at(t, cfg, "embedded", "mqtt", "enabled") != false || at(t, cfg, "sinks", "mqtt", 0, "name") != "broker" {
		t.Errorf("merged config: %v", cfg)
	}
	pvc := r.sts.Spec.VolumeClaimTemplates[0]
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "fast-ssd" {
		t.Errorf("storageClassName: %v", pvc.Spec.StorageClassName)
	}
	wantQuantity(t, "claim size", pvc.Spec.Resources.Requests[corev1.ResourceStorage], "2Gi")

	// ServiceMonitor: the Service's http port, /metrics, the labels Prometheus selects.
	sm := r.serviceMonitor
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	if at(t, sm, "metadata", "labels", "release") != "prometheus" {
		t.Errorf("ServiceMonitor labels: %v", at(t, sm, "metadata", "labels"))
	}
	ep := at(t, sm, "spec", "endpoints", 0)
	if at(t, ep, "port") != "http" || at(t, ep, "path") != "/metrics" || at(t, ep, "interval") != "15s" || at(t, ep, "scrapeTimeout") != "10s" {
		t.Errorf("ServiceMonitor endpoint: %v", ep)
	}
	svc := r.services[fullname]
	sel, _ := at(t, sm, "spec", "selector", "matchLabels").(map[string]any)
	if len(sel) == 0 {
		t.Errorf("ServiceMonitor selects nothing")
	}
	for k, v := range sel {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%v, which Service %s lacks", k, v, svc.Name)
		}
	}
	if got := at(t, sm, "spec", "namespaceSelector", "matchNames", 0); got != namespace {
		t.Errorf("ServiceMonitor namespaceSelector: %v", got)
	}
	// It authenticates with the generated read key.
	if at(t, ep, "authorization", "type") != "Bearer" || at(t, ep, "authorization", "credentials", "name") != fullname+"-api-keys" ||
		at(t, ep, "authorization", "credentials", "key") != "read" {
		t.Errorf("ServiceMonitor authorization: %v", ep)
	}
	for k := range at(t, sm, "spec").(map[string]any) {
		if k != "selector" && k != "namespaceSelector" && k != "endpoints" {
			t.Errorf("ServiceMonitor spec: unexpected key %q", k)
		}
	}

	// PodDisruptionBudget: one pod may go.
	if r.pdb == nil || r.pdb.Spec.MaxUnavailable == nil || *r.pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || r.pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget: %+v", r.pdb)
	}

	// NetworkPolicy: the http port from two peers; out only DNS and the rules given.
	np := r.netpol
	if np == nil {
		t.Fatal("no NetworkPolicy")
	}
	if !reflect.DeepEqual(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		t.Errorf("policyTypes %v", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 2 || len(np.Spec.Ingress[0].Ports) != 1 ||
		*np.Spec.Ingress[0].Ports[0].Port != intstr.FromString("http") {
		t.Errorf("ingress: %+v", np.Spec.Ingress)
	}
	if len(np.Spec.Egress) != 3 {
		t.Fatalf("egress: want DNS + 2 rules, got %+v", np.Spec.Egress)
	}
	dns := np.Spec.Egress[0]
	if len(dns.Ports) != 2 || *dns.Ports[0].Port != intstr.FromInt32(53) || *dns.Ports[0].Protocol != corev1.ProtocolUDP ||
		*dns.Ports[1].Protocol != corev1.ProtocolTCP || len(dns.To) != 0 {
		t.Errorf("DNS egress: %+v", dns)
	}
	if plc := np.Spec.Egress[1]; len(plc.To) != 1 || plc.To[0].IPBlock == nil || plc.To[0].IPBlock.CIDR != "10.20.0.0/16" ||
		*plc.Ports[0].Port != intstr.FromInt32(4840) {
		t.Errorf("PLC egress: %+v", plc)
	}
}

func checkScaleOut(t *testing.T, r *rendered) {
	if r.sts.Spec.Replicas == nil || *r.sts.Spec.Replicas != 3 {
		t.Errorf("replicas: %v", r.sts.Spec.Replicas)
	}
	c := gateway(t, r)
	wantEnv(t, c, "UAGATE_SCALEOUT_ENABLED", "true")
	wantEnv(t, c, "UAGATE_SCALEOUT_NATS_URL", "nats://nats.messaging.svc:4222")
	wantEnv(t, c, "UAGATE_SCALEOUT_BUCKET", "plant1-leases")
	wantEnv(t, c, "UAGATE_SCALEOUT_LEASE_TTL", "10s")
	if e := envVar(c, "UAGATE_SCALEOUT_REPLICA_ID"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil ||
		e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("UAGATE_SCALEOUT_REPLICA_ID: %+v", e)
	}
	// The chart's own Secret: both keys, mounted and read by env.
	name := fullname + "-secrets"
	s := r.secrets[name]
	if s == nil {
		t.Fatalf("no Secret %s: %v", name, keys(r.secrets))
	}
	if string(s.Data["nats-token"]) != "not-a-real-token" || string(s.Data["api-key"]) != "not-a-real-key" || len(s.Data) != 2 {
		t.Errorf("Secret data: %v", s.Data)
	}
	if v := volume(r, "secrets"); v == nil || v.Secret.SecretName != name {
		t.Errorf("secrets volume: %+v", v)
	}
	wantEnvFromSecret(t, c, "UAGATE_API_KEY", name, "api-key")
	if r.sts.Spec.Template.Annotations["checksum/secrets"] == "" {
		t.Errorf("no checksum/secrets annotation")
	}
	if r.pdb == nil || r.pdb.Spec.MinAvailable == nil || *r.pdb.Spec.MinAvailable != intstr.FromInt32(2) || r.pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PodDisruptionBudget: %+v", r.pdb)
	}
	if len(r.sts.Spec.Template.Spec.TopologySpreadConstraints) != 1 {
		t.Errorf("topologySpreadConstraints: %+v", r.sts.Spec.Template.Spec.TopologySpreadConstraints)
	}
	wantQuantity(t, "cpu request", c.Resources.Requests[corev1.ResourceCPU], "250m")
	wantQuantity(t, "memory limit", c.Resources.Limits[corev1.ResourceMemory], "1Gi")
	// One claim per replica.
	if len(r.sts.Spec.VolumeClaimTemplates) != 1 || volume(r, "state") != nil {
		t.Errorf("state: want a claim template per replica")
	}
}

// TestMemoryLimitOnlyWithLimit: without a memory limit on the container the
// chart sets no UAGATE_MEMORY_LIMIT (the downward API would give the node's
// allocatable memory, which is no limit of the gateway's).
func TestMemoryLimitOnlyWithLimit(t *testing.T) {
	for name, sets := range map[string][]string{
		"no limits":       {"resources.limits=null"},
		"no memory limit": {"resources.limits.memory=null", "resources.limits.cpu=2"},
		"no resources":    {"resources=null"},
	} {
		t.Run(name, func(t *testing.T) {
			c := gateway(t, render(t, "default", sets...))
			if e := envVar(c, "UAGATE_MEMORY_LIMIT"); e != nil {
				t.Errorf("UAGATE_MEMORY_LIMIT without a memory limit: %+v", e)
			}
		})
	}
	c := gateway(t, render(t, "default", "resources.limits.memory=2Gi"))
	wantQuantity(t, "memory limit", c.Resources.Limits[corev1.ResourceMemory], "2Gi")
	if e := envVar(c, "UAGATE_MEMORY_LIMIT"); e == nil || e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil {
		t.Errorf("UAGATE_MEMORY_LIMIT with a 2Gi limit: %+v", e)
	}
}

// checkSafeDefaults: the chart as installed needs API keys — two generated
// into a Secret, mounted as the keys file — refuses other hosts than the
// Service's names, admits only the namespace's pods and Prometheus to the
// http port, stays ready while one PLC is unreachable, and has a helm test
// that runs gateway status against the Service with the read key.
func checkSafeDefaults(t *testing.T, r *rendered) {
	t.Helper()
	c := gateway(t, r)
	wantEnv(t, c, "UAGATE_HTTP_ALLOW_UNAUTHENTICATED", "false")
	wantEnv(t, c, "UAGATE_API_KEYS_FILE", "/etc/uagate/api-keys/keys")
	wantEnv(t, c, "UAGATE_HTTP_PUBLIC_METRICS", "false")
	wantEnv(t, c, "UAGATE_HTTP_READY_ENDPOINTS", "any")
	wantEnv(t, c, "UAGATE_HTTP_READY_SINKS", "all")
	wantEnv(t, c, "UAGATE_HTTP_ALLOWED_HOSTS", strings.Join([]string{fullname, fullname + "." + namespace, fullname + "." + namespace + ".svc",
		fullname + "." + namespace + ".svc.cluster.local", "." + fullname + "-headless." + namespace + ".svc",
		"." + fullname + "-headless." + namespace + ".svc.cluster.local"}, ","))
	s := r.secrets[fullname+"-api-keys"]
	if s == nil {
		t.Fatalf("no Secret %s-api-keys: %v", fullname, keys(r.secrets))
	}
	admin, read := string(s.Data["admin"]), string(s.Data["read"])
	if len(admin) < 32 || len(read) < 32 || admin == read {
		t.Errorf("generated keys: admin %d characters, read %d, equal %v", len(admin), len(read), admin == read)
	}
	if got, want := string(s.Data["keys"]), "admin "+admin+" admin\nread "+read+" read\n"; got != want {
		t.Errorf("keys file %q, want %q", got, want)
	}
	if m, v := mount(c, "api-keys"), volume(r, "api-keys"); m == nil || !m.ReadOnly || m.MountPath != "/etc/uagate/api-keys" ||
		v == nil || v.Secret == nil || v.Secret.SecretName != s.Name || len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "keys" {
		t.Errorf("api-keys mount %+v, volume %+v", m, v)
	}
	np := r.netpol
	if np == nil {
		t.Fatal("no NetworkPolicy by default")
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 2 {
		t.Fatalf("ingress: %+v", np.Spec.Ingress)
	}
	ns, prom := np.Spec.Ingress[0].From[0], np.Spec.Ingress[0].From[1]
	if ns.PodSelector == nil || len(ns.PodSelector.MatchLabels) != 0 || ns.NamespaceSelector != nil ||
		prom.NamespaceSelector == nil || prom.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
		t.Errorf("ingress peers: %+v", np.Spec.Ingress[0].From)
	}
	p := r.testPod
	if p == nil {
		t.Fatal("no helm test pod")
	}
	if p.Annotations["helm.sh/hook"] != "test" || len(p.Spec.Containers) != 1 {
		t.Fatalf("test pod: %+v", p.ObjectMeta)
	}
	tc := &p.Spec.Containers[0]
	if !reflect.DeepEqual(tc.Args, []string{"status", "-api", "http://" + fullname + ":8080"}) || tc.Image != c.Image {
		t.Errorf("test pod runs %s %q", tc.Image, tc.Args)
	}
	if e := envVar(tc, "UAGATE_API_TOKEN"); e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		e.ValueFrom.SecretKeyRef.Name != s.Name || e.ValueFrom.SecretKeyRef.Key != "read" {
		t.Errorf("test pod token: %+v", e)
	}
	if tc.SecurityContext == nil || !isTrue(tc.SecurityContext.ReadOnlyRootFilesystem) {
		t.Errorf("test pod securityContext: %+v", tc.SecurityContext)
	}
}

// TestPKISeed: the PKI Secrets are mounted under the seed directory the
// gateway imports into every replica's store, with the application URI of
// the shared certificate.
func TestPKISeed(t *testing.T) {
	r := render(t, "scaleout", "pki.applicationUri=urn:plant1:uagate:gateway", "pki.ownSecret=gw-cert",
		"pki.trustedSecret=plc-certs", "pki.trustedCrlSecret=plc-crls")
	c := gateway(t, r)
	wantEnv(t, c, "UAGATE_PKI_SEED", "/etc/uagate/pki-seed")
	wantEnv(t, c, "UAGATE_APPLICATION_URI", "urn:plant1:uagate:gateway")
	for dir, secret := range map[string]string{"own": "gw-cert", "trusted": "plc-certs", "trusted-crl": "plc-crls"} {
		m, v := mount(c, "pki-seed-"+dir), volume(r, "pki-seed-"+dir)
		if m == nil || m.MountPath != "/etc/uagate/pki-seed/"+dir || !m.ReadOnly || v == nil || v.Secret == nil || v.Secret.SecretName != secret {
			t.Errorf("%s: mount %+v, volume %+v", dir, m, v)
		}
	}
	if mount(c, "pki-seed-issuers") != nil {
		t.Error("an issuers seed without pki.issuersSecret")
	}
	if e := envVar(gateway(t, render(t, "default")), "UAGATE_PKI_SEED"); e != nil {
		t.Errorf("UAGATE_PKI_SEED without PKI Secrets: %+v", e)
	}
}

// TestPublicMetrics: with api.publicMetrics the ServiceMonitor scrapes
// without a token and the gateway serves /metrics without one.
func TestPublicMetrics(t *testing.T) {
	r := render(t, "secrets-monitoring", "api.publicMetrics=true")
	wantEnv(t, gateway(t, r), "UAGATE_HTTP_PUBLIC_METRICS", "true")
	ep := at(t, r.serviceMonitor, "spec", "endpoints", 0).(map[string]any)
	if _, ok := ep["authorization"]; ok {
		t.Errorf("ServiceMonitor with public metrics authenticates: %v", ep)
	}
}
