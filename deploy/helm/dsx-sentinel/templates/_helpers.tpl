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

{{/* The policy the sentinel runs: the shipped default (files/policy.yaml) with the values' `policy` over it. */}}
{{- define "dsx-sentinel.policy" -}}
{{- mustMergeOverwrite (fromYaml (.Files.Get "files/policy.yaml")) (deepCopy .Values.policy) | toJson -}}
{{- end -}}

{{- define "dsx-sentinel.leaseName" -}}
{{- default (include "dsx-sentinel.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{/* The namespaces where the drain may delete pods: the policy's DeleteAfterTimeout namespaces
     named literally (a pattern names no namespace RBAC can hold) and rbac.podDeleteNamespaces,
     never a system namespace (the drain leaves their pods alone). As JSON: {"namespaces": [...]}. */}}
{{- define "dsx-sentinel.podDeleteNamespaces" -}}
{{- $policy := include "dsx-sentinel.policy" . | fromJson -}}
{{- $drain := $policy.drain | default dict -}}
{{- if eq (toString $drain.defaultMode) "DeleteAfterTimeout" -}}
{{- fail "policy drain.defaultMode DeleteAfterTimeout would need pod deletion in every namespace: name the namespaces in drain.namespaces (mode DeleteAfterTimeout) and list them in rbac.podDeleteNamespaces" -}}
{{- end -}}
{{- $system := $drain.systemNamespaces | default list -}}
{{- $found := list -}}
{{- range $drain.namespaces | default list -}}
{{- if and (eq (toString .mode) "DeleteAfterTimeout") (not (regexMatch "[*?\\[]" (toString .match))) -}}
{{- $found = append $found (toString .match) -}}
{{- end -}}
{{- end -}}
{{- range $.Values.rbac.podDeleteNamespaces -}}
{{- $found = append $found (toString .) -}}
{{- end -}}
{{- $kept := list -}}
{{- range $found | uniq | sortAlpha -}}
{{- if not (has . $system) -}}
{{- $kept = append $kept . -}}
{{- end -}}
{{- end -}}
{{- dict "namespaces" $kept | toJson -}}
{{- end -}}

{{/* Taint keys the sentinel itself sets (its quarantine rules' and the joining-node taint): the
     monitor keeps running on a quarantined or not yet certified node. */}}
{{- define "dsx-sentinel.sentinelTaintKeys" -}}
{{- $policy := include "dsx-sentinel.policy" . | fromJson -}}
{{- $keys := list -}}
{{- range (($policy.quarantine | default dict).ruleSets | default list) -}}
{{- range (.taints | default list) -}}
{{- $keys = append $keys (toString .key) -}}
{{- end -}}
{{- end -}}
{{- with (($policy.certification | default dict).taint | default dict).key -}}
{{- $keys = append $keys (toString .) -}}
{{- end -}}
{{- dict "keys" ($keys | uniq | sortAlpha) | toJson -}}
{{- end -}}

{{- /* What each Secret the pods need holds, as annotations (dsx.run/secret.<name>): bundle READMEs
list the Secrets a component needs and does not ship, with these words. */}}
{{- define "dsx-sentinel.secretAnnotations" -}}
{{- if not .Values.store.url }}
dsx.run/secret.{{ include "dsx-sentinel.storeSecret" . }}: {{ printf "key %s: the event store, a PostgreSQL URL (postgresql://USER:PASSWORD@HOST:5432/DATABASE); the database must exist and USER may create tables in it (dsx creates and checks its own at start)" .Values.store.key | quote }}
{{- end }}
dsx.run/secret.{{ .Values.tokens.existingSecret }}: "key tokens: bearer tokens for /v1/events, /v1/status and /metrics, one a line (openssl rand -hex 32)"
{{- end }}
