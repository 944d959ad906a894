{{/*
Objects of the Prometheus Operator (ServiceMonitor, PrometheusRule), both
called with (list $ .Values.serviceMonitor) or (list $ .Values.prometheusRule).
*/}}

{{/* "true" when the object renders: `enabled` is "auto" (only where the cluster serves monitoring.coreos.com/v1), true or false. */}}
{{- define "io-engine.operatorObject" -}}
{{- $root := index . 0 -}}
{{- $enabled := toString (index . 1).enabled -}}
{{- if or (eq $enabled "true") (and (eq $enabled "auto") ($root.Capabilities.APIVersions.Has "monitoring.coreos.com/v1")) -}}
true
{{- end -}}
{{- end -}}

{{/*
Its labels: the chart's, the `release` label kube-prometheus-stack selects
both kinds by (one value, prometheusRelease, for both: a Prometheus that
finds the ServiceMonitor but not the rules would silently alert on
nothing), and the user's.
*/}}
{{- define "io-engine.operatorLabels" -}}
{{ include "io-engine.labels" (index . 0) }}
{{- with (index . 0).Values.prometheusRelease }}
release: {{ . | quote }}
{{- end }}
{{- with (index . 1).labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}
