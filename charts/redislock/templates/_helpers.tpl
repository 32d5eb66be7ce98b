{{/* The release's base name, at most 50 characters so suffixes fit in 63. */}}
{{- define "redislock.fullname" -}}
{{- if contains "redislock" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-redislock" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "redislock.labels" -}}
app.kubernetes.io/name: redislock
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "redislock.selector" -}}
app.kubernetes.io/name: redislock
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "redislock.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
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
