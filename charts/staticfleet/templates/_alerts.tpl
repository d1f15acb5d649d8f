{{/* The alert rules of the PrometheusRule (monitoring.yaml): `groups:` as Prometheus reads a rules file.
A fleet is its `group` label everywhere; each description asks Prometheus for the fleet's namespace and
name (staticfleet_fleet_info). docs/observability.md explains each alert. */}}
{{- define "staticfleet.fleetWhere" -}}
{{ `{{ with printf "staticfleet_fleet_info{group=\"%s\"}" $labels.group | query }}{{ with first . }}StaticConsumerGroup {{ .Labels.fleet_namespace }}/{{ .Labels.fleet_name }}{{ end }}{{ else }}a group no fleet of this operator names{{ end }}` }}
{{- end -}}

{{- define "staticfleet.alertRules" -}}
{{- $a := .Values.monitoring.prometheusRule.alerts -}}
groups:
  - name: staticfleet
    rules:
      {{- with $a.fleetNotReady }}
      {{- if .enabled }}
      - alert: StaticfleetFleetNotReady
        expr: staticfleet_fleet_ready == 0
        for: {{ .for }}
        labels:
          severity: {{ .severity }}
        annotations:
          summary: A fleet of consumers has not been Ready for {{ .for }}.
          description: >-
            Group {{ `{{ $labels.group }}` }} ({{ include "staticfleet.fleetWhere" $ }}) is not Ready:
            {{ `{{ with printf "staticfleet_fleet_condition{group=\"%s\",type=\"Ready\"}" $labels.group | query }}{{ with first . }}{{ .Labels.reason }}{{ end }}{{ end }}` }}.
            kubectl describe scg says why.
      {{- end }}
      {{- end }}
      {{- with $a.rebalanceStorm }}
      {{- if .enabled }}
      - alert: StaticfleetRebalanceStorm
        expr: |-
          (sum by (group) (increase(staticfleet_rebalances_total[{{ .window }}])) > {{ .rebalances }})
          or
          (max by (group) (increase(staticfleet_fleet_rebalances_total[{{ .window }}])) > {{ .rebalances }})
        for: {{ .for }}
        labels:
          severity: {{ .severity }}
        annotations:
          summary: A consumer group rebalanced more than {{ .rebalances }} times in {{ .window }}.
          description: >-
            Group {{ `{{ $labels.group }}` }} ({{ include "staticfleet.fleetWhere" $ }}) rebalanced
            {{ `{{ $value | printf "%.0f" }}` }} times in {{ .window }}: consumers that keep leaving and
            joining (crashing pods, a session timeout below a pod's restart time, polls slower than the
            rebalance timeout). The coordinator's event log says which members and why.
      {{- end }}
      {{- end }}
      {{- with $a.lagGrowing }}
      {{- if .enabled }}
      - alert: StaticfleetLagGrowing
        # The lag first, so that the alert's value is the lag (and's left side), not its slope.
        expr: |-
          staticfleet_fleet_lag_messages > {{ .minimumMessages }}
          and
          deriv(staticfleet_fleet_lag_messages[{{ .window }}]) > 0
        for: {{ .for }}
        labels:
          severity: {{ .severity }}
        annotations:
          summary: A fleet's lag has grown for {{ .for }}.
          description: >-
            Group {{ `{{ $labels.group }}` }} ({{ include "staticfleet.fleetWhere" $ }}) is
            {{ `{{ $value | printf "%.0f" }}` }} messages behind and falling further behind: its consumers
            do not keep up (scale the fleet, or look at the consumers).
      {{- end }}
      {{- end }}
      {{- with $a.removalBlocked }}
      {{- if .enabled }}
      - alert: StaticfleetRemovalBlocked
        expr: |-
          max by (group, type, reason) (staticfleet_fleet_condition{type="ScaleDownBlocked"} == 1)
          or
          max by (group, type, reason) (staticfleet_fleet_condition{type="Degraded", reason="MemberRemovalFailed"} == 1)
        for: {{ .for }}
        labels:
          severity: {{ .severity }}
        annotations:
          summary: A scale-down cannot finish removing the departed members.
          description: >-
            Group {{ `{{ $labels.group }}` }} ({{ include "staticfleet.fleetWhere" $ }}):
            {{ `{{ $labels.type }} {{ $labels.reason }}` }}. The departed members stay in the group until
            their session timeout; the condition's message says what waits (pods that do not stop, a
            coordinator that refuses LeaveGroup).
      {{- end }}
      {{- end }}
      {{- with $a.coordinatorStorage }}
      {{- if .enabled }}
      - alert: StaticfleetCoordinatorStorageErrors
        expr: |-
          staticfleet_log_writable == 0
          or
          increase(staticfleet_log_append_failures_total[5m]) > 0
          or
          increase(staticfleet_log_fsync_failures_total[5m]) > 0
          or
          increase(staticfleet_snapshot_failures_total[15m]) > 0
        for: {{ .for }}
        labels:
          severity: {{ .severity }}
        annotations:
          summary: The embedded coordinator cannot write its log.
          description: >-
            {{ `{{ $labels.namespace }}/{{ $labels.pod }}` }}: appends, fsyncs or snapshots of the
            coordinator's log fail (a full or failing volume). Requests that must be persisted are
            answered with a storage error until it can write again (docs/reliability.md).
      {{- end }}
      {{- end }}
      {{- with $a.authenticationFailures }}
      {{- if .enabled }}
      - alert: StaticfleetAuthenticationFailures
        expr: |-
          sum without (reason) (rate(staticfleet_connections_closed_total{reason="authentication"}[5m])) * 60
          > {{ .perMinute }}
        for: {{ .for }}
        labels:
          severity: {{ .severity }}
        annotations:
          summary: Clients keep failing to authenticate to the embedded coordinator.
          description: >-
            {{ `{{ $labels.namespace }}/{{ $labels.pod }}` }} closes {{ `{{ $value | printf "%.1f" }}` }}
            connections a minute that failed SASL authentication: a wrong or rotated password, or someone
            trying. The coordinator's log names the clients' addresses.
      {{- end }}
      {{- end }}
{{- end -}}
