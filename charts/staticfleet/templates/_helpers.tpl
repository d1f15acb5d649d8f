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
{{- $scheme := ternary "https" "http" (eq (include "staticfleet.coordinatorSecured" .) "true") -}}
{{- printf "%s://%s:%d" $scheme (include "staticfleet.coordinatorHost" .) (int .Values.coordinator.ports.http) -}}
{{- end -}}
{{- end -}}

{{/* Security: what is on, and where each secret comes from (given, or made at install). */}}
{{- define "staticfleet.coordinatorSecured" -}}
{{- and .Values.coordinator.enabled .Values.coordinator.security.enabled -}}
{{- end -}}

{{- define "staticfleet.dashboardSecured" -}}
{{- and .Values.dashboard.enabled .Values.dashboard.secure -}}
{{- end -}}

{{/* Certificates made at install come from cert-manager when asked, or when its API is served (auto). */}}
{{- define "staticfleet.certManager" -}}
{{- $source := .Values.coordinator.security.certificates.source -}}
{{- or (eq $source "certManager") (and (eq $source "auto") (.Capabilities.APIVersions.Has "cert-manager.io/v1/Certificate")) -}}
{{- end -}}

{{- define "staticfleet.coordinatorTlsSecret" -}}
{{- default (printf "%s-coordinator-tls" (include "staticfleet.fullname" .)) .Values.coordinator.security.tlsSecret -}}
{{- end -}}

{{- define "staticfleet.dashboardTlsSecret" -}}
{{- default (printf "%s-dashboard-tls" (include "staticfleet.fullname" .)) .Values.dashboard.tlsSecret -}}
{{- end -}}

{{- define "staticfleet.dashboardTokenSecret" -}}
{{- if eq (include "staticfleet.dashboardSecured" .) "true" -}}
{{- default (printf "%s-dashboard-token" (include "staticfleet.fullname" .)) .Values.dashboard.tokenSecret -}}
{{- end -}}
{{- end -}}

{{- define "staticfleet.departureSigningKeySecret" -}}
{{- default (printf "%s-departure-signing-key" (include "staticfleet.fullname" .)) .Values.operator.departureSigningKeySecret -}}
{{- end -}}

{{- define "staticfleet.httpTokenSecret" -}}
{{- if eq (include "staticfleet.coordinatorSecured" .) "true" -}}
{{- default (printf "%s-coordinator-http-token" (include "staticfleet.fullname" .)) .Values.coordinator.httpTokenSecret -}}
{{- else if .Values.coordinator.enabled -}}
{{- .Values.coordinator.httpTokenSecret -}}
{{- end -}}
{{- end -}}

{{/* The users file, the operator's login and the admin's login are made at install unless usersSecret is
given. */}}
{{- define "staticfleet.generatedUsers" -}}
{{- and (eq (include "staticfleet.coordinatorSecured" .) "true") (not .Values.coordinator.security.usersSecret) -}}
{{- end -}}

{{- define "staticfleet.usersSecret" -}}
{{- default (printf "%s-coordinator-users" (include "staticfleet.fullname" .)) .Values.coordinator.security.usersSecret -}}
{{- end -}}

{{- define "staticfleet.operatorKafkaSecret" -}}
{{- if .Values.operator.kafka.configSecret -}}
{{- .Values.operator.kafka.configSecret -}}
{{- else if eq (include "staticfleet.generatedUsers" .) "true" -}}
{{- printf "%s-operator-kafka" (include "staticfleet.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "staticfleet.adminSecret" -}}
{{- if eq (include "staticfleet.generatedUsers" .) "true" -}}
{{- printf "%s-kafka-admin" (include "staticfleet.fullname" .) -}}
{{- else if eq (include "staticfleet.coordinatorSecured" .) "true" -}}
{{- .Values.coordinator.security.adminConfigSecret -}}
{{- end -}}
{{- end -}}

{{/* Where the operator finds the CA of the coordinator's certificate: the coordinator's own Secret's
ca.crt when the install made the logins, else the ca.crt of operator.kafka.configSecret. */}}
{{- define "staticfleet.operatorCaFile" -}}
{{- if eq (include "staticfleet.generatedUsers" .) "true" -}}
/etc/staticfleet/kafka-ca/ca.crt
{{- else -}}
/etc/staticfleet/kafka/ca.crt
{{- end -}}
{{- end -}}

{{/* The SCRAM mechanism of the logins made at install (a fleet's own user is a SCRAM user too). */}}
{{- define "staticfleet.scramMechanism" -}}
{{- $mechanisms := .Values.coordinator.security.saslMechanisms -}}
{{- ternary "SCRAM-SHA-512" "SCRAM-SHA-256" (has "SCRAM-SHA-512" $mechanisms) -}}
{{- end -}}

{{/* A Kafka client properties file for the embedded coordinator; dict: root, user, password. */}}
{{- define "staticfleet.clientProperties" -}}
{{- $sec := .root.Values.coordinator.security -}}
security.protocol={{ $sec.protocol }}
sasl.mechanism={{ include "staticfleet.scramMechanism" .root }}
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="{{ .user }}" password="{{ .password }}";
{{- if eq $sec.protocol "SASL_SSL" }}
ssl.truststore.type=PEM
ssl.truststore.location=/etc/staticfleet/kafka-ca/ca.crt
{{- end }}
{{ end -}}

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
{{- if eq (include "staticfleet.generatedUsers" .) "true" -}}
{{- $users = append $users (printf "User:%s" $sec.adminUser) -}}
{{- end -}}
{{- join ";" (uniq $users) -}}
{{- end -}}

{{/* Settings that cannot work together fail the install with what to set. */}}
{{- define "staticfleet.checkSecurity" -}}
{{- $sec := .Values.coordinator.security -}}
{{- if and .Values.coordinator.enabled $sec.enabled -}}
{{- if and $sec.usersSecret (not .Values.operator.kafka.configSecret) -}}
{{- fail "coordinator.security.usersSecret needs operator.kafka.configSecret: the operator's own Kafka login (a Secret with client.properties) for a user of that file; or leave both empty to have them made at install" -}}
{{- end -}}
{{- if and .Values.operator.kafka.configSecret (not $sec.usersSecret) -}}
{{- fail "operator.kafka.configSecret needs coordinator.security.usersSecret naming its user; or leave both empty to have them made at install" -}}
{{- end -}}
{{- if not (or (has "SCRAM-SHA-512" $sec.saslMechanisms) (has "SCRAM-SHA-256" $sec.saslMechanisms)) -}}
{{- fail "coordinator.security.saslMechanisms needs SCRAM-SHA-512 or SCRAM-SHA-256: the operator gives each fleet its own SCRAM user" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.rbac.create .Values.rbac.aggregateToDefaultRoles .Values.rbac.editorsManageFleets (not .Values.tenancy.enforced) -}}
{{- fail "tenancy.enforced=false with rbac.editorsManageFleets: anyone who may edit a namespace could then obtain READ on every topic through a StaticConsumerGroup. Set rbac.editorsManageFleets=false too (and grant fleet rights yourself), or keep tenancy enforced" -}}
{{- end -}}
{{- end -}}
