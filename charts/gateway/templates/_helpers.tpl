{{/* Names, labels and the checks that refuse a values set that cannot work. */}}

{{- define "gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gateway.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gateway.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gateway.labels" -}}
helm.sh/chart: {{ include "gateway.chart" . }}
{{ include "gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ (default .Chart.AppVersion .Values.image.tag) | trunc 63 | quote }}
app.kubernetes.io/component: gateway
app.kubernetes.io/part-of: uagate
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gateway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gateway.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The ConfigMap the configuration comes from, and the key of the file in it. */}}
{{- define "gateway.configMapName" -}}
{{- default (printf "%s-config" (include "gateway.fullname" .)) .Values.config.existingConfigMap }}
{{- end }}

{{- define "gateway.configKey" -}}
{{- if and .Values.config.existingConfigMap .Values.config.existingConfigMapKey }}
{{- .Values.config.existingConfigMapKey }}
{{- else if eq .Values.config.format "publishedNodes" }}
{{- "publishednodes.json" }}
{{- else }}
{{- "config.yaml" }}
{{- end }}
{{- end }}

{{/* The Secret mounted under secrets.mountPath; empty when there is none. */}}
{{- define "gateway.secretName" -}}
{{- if .Values.secrets.existingSecret }}
{{- .Values.secrets.existingSecret }}
{{- else if .Values.secrets.values }}
{{- printf "%s-secrets" (include "gateway.fullname" .) }}
{{- end }}
{{- end }}

{{/* The Secret of the generated API keys; empty when keys are not generated. */}}
{{- define "gateway.apiKeysSecret" -}}
{{- if and .Values.api.generateKeys (not .Values.api.keysSecretKey) }}
{{- printf "%s-api-keys" (include "gateway.fullname" .) }}
{{- end }}
{{- end }}

{{/* The keys file the gateway reads; empty: none. */}}
{{- define "gateway.keysFile" -}}
{{- if .Values.api.keysSecretKey }}
{{- printf "%s/%s" .Values.secrets.mountPath .Values.api.keysSecretKey }}
{{- else if .Values.api.generateKeys }}
{{- "/etc/uagate/api-keys/keys" }}
{{- end }}
{{- end }}

{{/*
The names clients reach the gateway by (http.allowedHosts): the Service's
names, the pods' names under the headless Service, and api.allowedHosts.
*/}}
{{- define "gateway.allowedHosts" -}}
{{- $f := include "gateway.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $hosts := list $f (printf "%s.%s" $f $ns) (printf "%s.%s.svc" $f $ns) (printf "%s.%s.svc.cluster.local" $f $ns)
  (printf ".%s-headless.%s.svc" $f $ns) (printf ".%s-headless.%s.svc.cluster.local" $f $ns) }}
{{- join "," (concat $hosts .Values.api.allowedHosts) }}
{{- end }}

{{/* The PKI seed's sub-directories and the Secrets that fill them. */}}
{{- define "gateway.pkiSeeds" -}}
{{- $p := .Values.pki }}
{{- $out := dict }}
{{- range $dir, $secret := dict "own" $p.ownSecret "trusted" $p.trustedSecret "issuers" $p.issuersSecret "trusted-crl" $p.trustedCrlSecret "issuers-crl" $p.issuersCrlSecret }}
{{- if $secret }}{{- $_ := set $out $dir $secret }}{{- end }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/*
gateway.validate fails the rendering, with the reason and the way out, for
values that would deploy something broken. Called by the StatefulSet.
*/}}
{{- define "gateway.validate" -}}
{{- $v := .Values }}
{{- $replicas := int $v.replicaCount }}
{{- if lt $replicas 0 }}
{{- fail (printf "replicaCount %d: must not be negative" $replicas) }}
{{- end }}
{{- if and (gt $replicas 1) (not $v.scaleOut.enabled) }}
{{- fail (printf "replicaCount is %d but scaleOut.enabled is false: every replica would subscribe to every endpoint and publish the same data %d times. Set scaleOut.enabled=true with scaleOut.natsUrl (replicas then share the endpoints through NATS JetStream leases), or replicaCount=1." $replicas $replicas) }}
{{- end }}
{{- if and $v.scaleOut.enabled (not $v.scaleOut.natsUrl) }}
{{- fail "scaleOut.enabled needs scaleOut.natsUrl: the NATS server(s) with JetStream that hold the replicas' leases (nats://host:4222)." }}
{{- end }}
{{- if not (has $v.config.format (list "yaml" "publishedNodes")) }}
{{- fail (printf "config.format %q: must be yaml or publishedNodes" $v.config.format) }}
{{- end }}
{{- if and (eq $v.config.format "publishedNodes") (not $v.config.existingConfigMap) (not $v.config.publishedNodes) }}
{{- fail "config.format is publishedNodes but config.publishedNodes is empty and no config.existingConfigMap is given: the gateway would have nothing to publish." }}
{{- end }}
{{- if and $v.config.existingConfigMapKey (not $v.config.existingConfigMap) }}
{{- fail "config.existingConfigMapKey is set without config.existingConfigMap." }}
{{- end }}
{{- if and $v.secrets.existingSecret $v.secrets.values }}
{{- fail "secrets.existingSecret and secrets.values are both set: choose one (the chart mounts a single Secret under secrets.mountPath)." }}
{{- end }}
{{- if and $v.secrets.env (not (include "gateway.secretName" .)) }}
{{- fail "secrets.env names secret keys, but there is no secret: set secrets.existingSecret or secrets.values." }}
{{- end }}
{{- if $v.secrets.values }}
{{- range $name, $key := $v.secrets.env }}
{{- if not (hasKey $v.secrets.values $key) }}
{{- fail (printf "secrets.env.%s refers to key %q, which secrets.values does not have." $name $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and $v.persistence.enabled $v.persistence.existingClaim (gt $replicas 1) }}
{{- fail (printf "persistence.existingClaim %q is one volume, but replicaCount is %d: each replica needs a state directory of its own (its certificate, its subscriptions). Leave existingClaim empty for one claim per pod." $v.persistence.existingClaim $replicas) }}
{{- end }}
{{- $inlineKeys := and (eq $v.config.format "yaml") (dig "http" "apiKeys" list ($v.config.yaml | default dict)) }}
{{- if not (or $v.api.allowUnauthenticated $v.api.generateKeys $v.api.keysSecretKey $inlineKeys) }}
{{- fail "api: no API keys (api.generateKeys is false, no api.keysSecretKey, no http.apiKeys in the configuration) and api.allowUnauthenticated is false: the gateway would refuse to start. Keep api.generateKeys=true, or give a keys file in api.keysSecretKey." }}
{{- end }}
{{- if and $v.metrics.serviceMonitor.enabled (not $v.api.publicMetrics) (not $v.api.allowUnauthenticated) (not $v.metrics.serviceMonitor.tokenSecret.name) (not (include "gateway.apiKeysSecret" .)) }}
{{- fail "metrics.serviceMonitor: /metrics needs a read key, and there is none to give Prometheus: set metrics.serviceMonitor.tokenSecret (a Secret key with a read key), or api.publicMetrics=true, or keep api.generateKeys." }}
{{- end }}
{{- if and $v.pki.ownSecret (not $v.pki.applicationUri) }}
{{- fail "pki.ownSecret needs pki.applicationUri: the application URI of its certificate (the gateway presents it as its own)." }}
{{- end }}
{{- if and $v.podDisruptionBudget.enabled (ne (toString $v.podDisruptionBudget.minAvailable) "") (ne (toString $v.podDisruptionBudget.maxUnavailable) "") }}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both (set the other to \"\")." }}
{{- end }}
{{- end }}
