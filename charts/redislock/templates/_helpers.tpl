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
