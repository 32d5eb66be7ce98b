{{/* The chart's name: nameOverride, else redislock. */}}
{{- define "redislock.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/*
The release's base name, at most 50 characters so suffixes fit in 63:
fullnameOverride, else the release name if it contains the chart's name,
else <release>-<name>.
*/}}
{{- define "redislock.fullname" -}}
{{- $name := include "redislock.name" . -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "redislock.labels" -}}
{{ include "redislock.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* global.imagePullSecrets (of a parent chart), then imagePullSecrets. */}}
{{- define "redislock.imagePullSecrets" -}}
{{- $all := concat (dig "imagePullSecrets" list (.Values.global | default dict)) .Values.imagePullSecrets -}}
{{- with $all }}
imagePullSecrets:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The labels that stay the same across upgrades: what selectors use. */}}
{{- define "redislock.selectorLabels" -}}
app.kubernetes.io/name: {{ include "redislock.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The controller's pods. */}}
{{- define "redislock.selector" -}}
{{ include "redislock.selectorLabels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{/* The controller's service account: serviceAccount.name, else <fullname>-controller. */}}
{{- define "redislock.serviceAccountName" -}}
{{- default (printf "%s-controller" (include "redislock.fullname" .)) .Values.serviceAccount.name -}}
{{- end -}}

{{/*
[registry/]repository@digest with image.digest, else [registry/]repository:tag
(tag defaults to appVersion).
*/}}
{{- define "redislock.image" -}}
{{- $repository := .Values.image.repository -}}
{{- with .Values.image.registry }}{{ $repository = printf "%s/%s" . $repository }}{{ end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The injected agent's image: the controller's, unless agent.image sets a part;
then the parts it leaves empty come from image (but not image.digest).
*/}}
{{- define "redislock.agentImage" -}}
{{- $a := .Values.agent.image -}}
{{- if or $a.repository $a.tag $a.digest -}}
{{- $image := dict "registry" .Values.image.registry "repository" (default .Values.image.repository $a.repository) "tag" (default .Values.image.tag $a.tag) "digest" $a.digest -}}
{{- include "redislock.image" (dict "Values" (dict "image" $image) "Chart" .Chart) -}}
{{- else -}}
{{- include "redislock.image" . -}}
{{- end -}}
{{- end -}}

{{- define "redislock.webhookService" -}}
{{- printf "%s-webhook" (include "redislock.fullname" .) -}}
{{- end -}}

{{- define "redislock.webhookConfiguration" -}}
{{- printf "%s-injector" (include "redislock.fullname" .) -}}
{{- end -}}

{{- define "redislock.webhookSecret" -}}
{{- printf "%s-webhook-cert" (include "redislock.fullname" .) -}}
{{- end -}}

{{- /*
The namespaces the controller watches, comma-separated; empty: all. With
leaderElection.mode=redislock the release namespace is one of them, for the
controller's own RedisLock.
*/}}
{{- define "redislock.watchNamespaces" -}}
{{- $ns := .Values.watchNamespaces -}}
{{- if and $ns (eq .Values.leaderElection.mode "redislock") (not (has .Release.Namespace $ns)) -}}
{{- $ns = append $ns .Release.Namespace -}}
{{- end -}}
{{- join "," $ns -}}
{{- end -}}

{{/*
Rules across values that the schema cannot explain: fail with the reason.
*/}}
{{- define "redislock.validate" -}}
{{- if and .Values.metrics.podMonitor.enabled .Values.metrics.serviceMonitor.enabled -}}
{{- fail "metrics.podMonitor.enabled and metrics.serviceMonitor.enabled: set one; both would scrape each controller pod twice (the PodMonitor takes the other settings of metrics.serviceMonitor)" -}}
{{- end -}}
{{- if and .Values.metrics.podMonitor.enabled .Values.metrics.secure (not .Values.metrics.podMonitor.authorization) -}}
{{- fail "metrics.podMonitor.enabled with metrics.secure needs metrics.podMonitor.authorization: a PodMonitor cannot send Prometheus's own token, so give one from a Secret, as in {type: Bearer, credentials: {name: prometheus-token, key: token}}; or use metrics.serviceMonitor, or metrics.secure=false" -}}
{{- end -}}
{{- if and (eq .Values.leaderElection.mode "none") (gt (int .Values.replicas) 1) -}}
{{- fail (printf "leaderElection.mode=none needs replicas=1, not %v: without an election every replica runs the controller, so several would reconcile each RedisLock at once; set replicas=1, or leaderElection.mode=lease or redislock" .Values.replicas) -}}
{{- end -}}
{{- if and .Values.networkPolicy.egress.enabled (not .Values.networkPolicy.egress.apiServer) -}}
{{- fail "networkPolicy.egress.enabled needs networkPolicy.egress.apiServer: without it the controller cannot reach the API server; list its endpoints' addresses (kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes) as in [{ipBlock: {cidr: 10.0.0.5/32}}]" -}}
{{- end -}}
{{- if and .Values.networkPolicy.egress.enabled (not .Values.networkPolicy.egress.redisCIDRs) -}}
{{- fail "networkPolicy.egress.enabled needs networkPolicy.egress.redisCIDRs: without it the controller reaches no Redis server at all; list the networks of the servers your RedisLocks and connections name" -}}
{{- end -}}
{{- $ports := dict "metrics.port" .Values.metrics.port -}}
{{- if .Values.webhook.enabled }}{{ $_ := set $ports "webhook.port" .Values.webhook.port }}{{ end -}}
{{- range $a, $pa := $ports }}{{ range $b, $pb := $ports }}{{ if and (lt $a $b) (eq (int $pa) (int $pb)) -}}
{{- fail (printf "%s and %s are both %v: the controller's pod serves each on a port of its own; choose another" $a $b $pa) -}}
{{- end }}{{ end }}{{ end -}}
{{- with .Values.agent.resources -}}
{{- $req := include "redislock.bytes" (dig "requests" "memory" "" .) | int64 -}}
{{- $lim := include "redislock.bytes" (dig "limits" "memory" "" .) | int64 -}}
{{- if and (gt $req 0) (gt $lim 0) (gt $req $lim) -}}
{{- fail (printf "agent.resources.requests.memory %v is above agent.resources.limits.memory %v: the API server would refuse every pod the webhook injects; raise the limit or lower the request" .requests.memory .limits.memory) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
redislock.bytes is the number of bytes of a memory quantity written as an
integer with an optional suffix (Ki, Mi, Gi, Ti, k, M, G, T); 0 for one it
cannot read (empty, or decimal: then nothing is compared, and the
controller's own check of -agent-memory-request against -agent-memory-limit
at start is what catches it).
*/}}
{{- define "redislock.bytes" -}}
{{- $q := toString . -}}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "" 1 -}}
{{- $n := regexFind "^[0-9]+" $q -}}
{{- $u := trimPrefix $n $q -}}
{{- if and $n (hasKey $units $u) }}{{ mul (atoi $n) (get $units $u) }}{{ else }}0{{ end -}}
{{- end -}}
