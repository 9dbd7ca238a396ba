{{/*
Names, labels and the values every template derives from: the settings map with its
prefix, the shared-store choices, and the checks that fail a render with a clear message.
*/}}

{{- define "ragblend.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ragblend.fullname" -}}
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

{{- define "ragblend.postgresql.fullname" -}}
{{- printf "%s-postgresql" (include "ragblend.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ragblend.redis.fullname" -}}
{{- printf "%s-redis" (include "ragblend.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The variable Kubernetes injects into every later pod of the namespace with a Service's
ClusterIP: NAME_SERVICE_HOST, the name upper case with "-" as "_". With no cluster DNS this is
how the server finds the bundled stores. */}}
{{- define "ragblend.serviceHostVar" -}}
{{- printf "%s_SERVICE_HOST" (. | upper | replace "-" "_") }}
{{- end }}

{{- define "ragblend.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "ragblend.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "ragblend.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ragblend.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Selector of the server pods (not the bundled stores'). */}}
{{- define "ragblend.serverSelectorLabels" -}}
{{ include "ragblend.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end }}

{{- define "ragblend.image" -}}
{{- printf "%s:%s" .repository (toString .tag) }}
{{- end }}

{{/* Settings the chart sets itself, each with what to set instead. */}}
{{- define "ragblend.reservedSettings" -}}
HOST: "the server listens on every interface of its pod"
PORT: "the container listens on 8000; service.port sets the Service's port"
DATA_DIR: "it is /data, kept as persistence says"
DATABASE_URL: "set postgresql.enabled or externalLibrary.dsnSecret.name"
CHUNK_CACHE_REDIS_URL: "set redis.enabled or externalRedis.urlSecret.name"
CHUNK_CACHE_SECRET: "set chunkCacheSecret.existingSecret, or let the chart generate it"
API_KEYS: "set apiKeys or apiKeysSecret.name"
{{- end }}

{{/* One setting value as the text of an environment variable: integral numbers without an
exponent, lists comma-separated, booleans lower case. */}}
{{- define "ragblend.settingText" -}}
{{- $v := . }}
{{- if kindIs "slice" $v }}
{{- $parts := list }}
{{- range $v }}{{ $parts = append $parts (include "ragblend.settingText" .) }}{{ end }}
{{- join "," $parts }}
{{- else if and (kindIs "float64" $v) (eq $v (floor $v)) }}
{{- $v | int64 | toString }}
{{- else if kindIs "invalid" $v }}
{{- else }}
{{- toString $v }}
{{- end }}
{{- end }}

{{/* The settings map as RAGBLEND_* environment variables (a YAML map of strings), after
checking every key: upper case, no prefix, not one the chart sets. */}}
{{- define "ragblend.settingsEnv" -}}
{{- $reserved := include "ragblend.reservedSettings" . | fromYaml }}
{{- $env := dict }}
{{- range $key, $value := .Values.settings }}
{{- if hasPrefix "RAGBLEND_" $key }}
{{- fail (printf "settings.%s: write the setting without the RAGBLEND_ prefix (settings.%s)" $key (trimPrefix "RAGBLEND_" $key)) }}
{{- end }}
{{- if not (regexMatch "^[A-Z][A-Z0-9_]*$" $key) }}
{{- fail (printf "settings.%s: setting names are upper case as in the README's settings table without RAGBLEND_ (e.g. KV_CACHE_GIB)" $key) }}
{{- end }}
{{- if hasKey $reserved $key }}
{{- fail (printf "settings.%s: the chart sets RAGBLEND_%s itself (%s)" $key $key (get $reserved $key)) }}
{{- end }}
{{- $_ := set $env (printf "RAGBLEND_%s" $key) (include "ragblend.settingText" $value) }}
{{- end }}
{{- toYaml $env }}
{{- end }}

{{/* A numeric setting (by name without prefix) or its default. */}}
{{- define "ragblend.settingNumber" -}}
{{- $value := index .root.Values.settings .name }}
{{- if kindIs "invalid" $value }}{{ .default }}{{ else }}{{ include "ragblend.settingText" $value }}{{ end }}
{{- end }}

{{- define "ragblend.sharedLibrary" -}}
{{- if or .Values.postgresql.enabled .Values.externalLibrary.dsnSecret.name }}true{{ end }}
{{- end }}

{{- define "ragblend.sharedRedis" -}}
{{- if or .Values.redis.enabled .Values.externalRedis.urlSecret.name }}true{{ end }}
{{- end }}

{{/* The most replicas this release can run: replicaCount, or maxReplicas when autoscaled. */}}
{{- define "ragblend.maxReplicas" -}}
{{- if .Values.autoscaling.enabled }}{{ .Values.autoscaling.maxReplicas | int }}{{ else }}{{ .Values.replicaCount | int }}{{ end }}
{{- end }}

{{/* The data dir on a PersistentVolumeClaim: single replica with its library in SQLite. */}}
{{- define "ragblend.persistentDataDir" -}}
{{- if and .Values.persistence.enabled (not (include "ragblend.sharedLibrary" .)) }}true{{ end }}
{{- end }}

{{/* Values that cannot work together, refused before anything is installed. */}}
{{- define "ragblend.validate" -}}
{{- $replicas := include "ragblend.maxReplicas" . | int }}
{{- if and .Values.postgresql.enabled .Values.externalLibrary.dsnSecret.name }}
{{- fail "postgresql.enabled and externalLibrary.dsnSecret.name both name a library: set postgresql.enabled=false to use the external one" }}
{{- end }}
{{- if and .Values.redis.enabled .Values.externalRedis.urlSecret.name }}
{{- fail "redis.enabled and externalRedis.urlSecret.name both name a chunk-KV tier: set redis.enabled=false to use the external one" }}
{{- end }}
{{- if gt $replicas 1 }}
{{- $missing := list }}
{{- if not (include "ragblend.sharedLibrary" .) }}
{{- $missing = append $missing "a shared document library (postgresql.enabled=true or externalLibrary.dsnSecret.name): without it each replica keeps its own SQLite library, and a document ingested through one pod is unknown to the others" }}
{{- end }}
{{- if not (include "ragblend.sharedRedis" .) }}
{{- $missing = append $missing "a shared chunk-KV tier (redis.enabled=true or externalRedis.urlSecret.name): without it every replica computes every chunk again" }}
{{- end }}
{{- if $missing }}
{{- fail (printf "%d replicas need %s. Add what is missing, or run 1 replica." $replicas (join "; and " $missing)) }}
{{- end }}
{{- end }}
{{- if and .Values.autoscaling.enabled (lt (.Values.autoscaling.maxReplicas | int) (.Values.autoscaling.minReplicas | int)) }}
{{- fail "autoscaling.maxReplicas is below autoscaling.minReplicas" }}
{{- end }}
{{- end }}

{{/* autoscaling/v2 from Kubernetes 1.23 on, else v2beta2; policy/v1 PDBs from 1.21, else
v1beta1. The version check also covers `helm template --kube-version`, whose API list is Helm's
own and not the named version's. */}}
{{- define "ragblend.hpaApiVersion" -}}
{{- if and (.Capabilities.APIVersions.Has "autoscaling/v2") (semverCompare ">=1.23-0" .Capabilities.KubeVersion.Version) }}autoscaling/v2{{ else }}autoscaling/v2beta2{{ end }}
{{- end }}

{{- define "ragblend.pdbApiVersion" -}}
{{- if and (.Capabilities.APIVersions.Has "policy/v1") (semverCompare ">=1.21-0" .Capabilities.KubeVersion.Version) }}policy/v1{{ else }}policy/v1beta1{{ end }}
{{- end }}
