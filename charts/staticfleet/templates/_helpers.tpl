{{/* Names and labels. */}}
{{- define "staticfleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's base name; children append -operator or -coordinator (StatefulSet pod names and
their revision labels must stay within 63 characters). */}}
{{- define "staticfleet.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "staticfleet.operatorName" -}}{{ include "staticfleet.fullname" . }}-operator{{- end -}}
{{- define "staticfleet.coordinatorName" -}}{{ include "staticfleet.fullname" . }}-coordinator{{- end -}}

{{- define "staticfleet.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "staticfleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component (operator or coordinator); they never change across upgrades. */}}
{{- define "staticfleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "staticfleet.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "staticfleet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "staticfleet.operatorName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "staticfleet.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Where the embedded coordinator is reached: the advertised host, by default the pod's stable DNS name
under the headless Service. */}}
{{- define "staticfleet.coordinatorHost" -}}
{{- $c := .Values.coordinator -}}
{{- if $c.advertisedHost -}}
{{- $c.advertisedHost -}}
{{- else -}}
{{- $name := include "staticfleet.coordinatorName" . -}}
{{- printf "%s-0.%s.%s.svc.%s" $name $name .Release.Namespace $c.clusterDomain -}}
{{- end -}}
{{- end -}}

{{/* The operator's default bootstrap servers: the embedded coordinator, or the external Kafka cluster. */}}
{{- define "staticfleet.bootstrapServers" -}}
{{- if .Values.coordinator.enabled -}}
{{- if .Values.externalKafka.bootstrapServers -}}
{{- fail "externalKafka.bootstrapServers is set while coordinator.enabled is true: set coordinator.enabled=false to use an external Kafka cluster" -}}
{{- end -}}
{{- printf "%s:%d" (include "staticfleet.coordinatorHost" .) (int .Values.coordinator.ports.kafka) -}}
{{- else -}}
{{- required "externalKafka.bootstrapServers is required when coordinator.enabled is false" .Values.externalKafka.bootstrapServers -}}
{{- end -}}
{{- end -}}

{{- define "staticfleet.coordinatorApi" -}}
{{- if .Values.coordinator.enabled -}}
{{- printf "http://%s:%d" (include "staticfleet.coordinatorHost" .) (int .Values.coordinator.ports.http) -}}
{{- end -}}
{{- end -}}

{{/* A URL host: IPv6 addresses in brackets. */}}
{{- define "staticfleet.urlHost" -}}
{{- if contains ":" . -}}[{{ . }}]{{- else -}}{{ . }}{{- end -}}
{{- end -}}

{{/* Kafka's super.users for the secured coordinator: the listed ones, and the operator's user when asked. */}}
{{- define "staticfleet.superUsers" -}}
{{- $sec := .Values.coordinator.security -}}
{{- $users := $sec.superUsers -}}
{{- if $sec.operatorSuperUser -}}
{{- $users = append $users (printf "User:%s" .Values.operator.kafka.user) -}}
{{- end -}}
{{- join ";" (uniq $users) -}}
{{- end -}}

{{/* A secured coordinator needs its users file, its certificate for SASL_SSL, and an operator that can
log in. */}}
{{- define "staticfleet.checkSecurity" -}}
{{- $sec := .Values.coordinator.security -}}
{{- if and .Values.coordinator.enabled $sec.enabled -}}
{{- if not $sec.usersSecret -}}
{{- fail "coordinator.security.enabled needs coordinator.security.usersSecret: a Secret whose key `users` lists the bootstrap users (at least the operator's)" -}}
{{- end -}}
{{- if and (eq $sec.protocol "SASL_SSL") (not $sec.tlsSecret) -}}
{{- fail "coordinator.security.protocol SASL_SSL needs coordinator.security.tlsSecret: a kubernetes.io/tls Secret with the coordinator's certificate" -}}
{{- end -}}
{{- if not .Values.operator.kafka.configSecret -}}
{{- fail "coordinator.security.enabled needs operator.kafka.configSecret: the operator's own Kafka login (a Secret with client.properties)" -}}
{{- end -}}
{{- end -}}
{{- end -}}
