{{/* The objects' base name: fullnameOverride, else the release name (dsx-sentinel when installed as such). */}}
{{- define "dsx-sentinel.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 56 | trimSuffix "-" -}}
{{- end -}}

{{- define "dsx-sentinel.monitorName" -}}
{{- printf "%s-monitor" (include "dsx-sentinel.fullname" .) -}}
{{- end -}}

{{- define "dsx-sentinel.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "dsx-sentinel.storeSecret" -}}
{{- if .Values.store.url -}}{{ printf "%s-store" (include "dsx-sentinel.fullname" .) }}{{- else -}}{{ required "store.existingSecret or store.url is required" .Values.store.existingSecret }}{{- end -}}
{{- end -}}

{{/* Labels of every object. The selector is the name alone: it is unique per release (the
     release name is in it) and stays what the plain manifests always selected, so applying a
     new rendering over an old Deployment never meets the immutable selector. */}}
{{- define "dsx-sentinel.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dsx-sentinel.fullname" . }}
{{- end -}}

{{- define "dsx-sentinel.labels" -}}
{{ include "dsx-sentinel.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: dsx
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "dsx-sentinel.monitorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "dsx-sentinel.monitorName" . }}
{{- end -}}

{{- define "dsx-sentinel.monitorLabels" -}}
{{ include "dsx-sentinel.monitorSelectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: dsx
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}
