{{/* The name of every object: the release name, or "io-engine" for a release of that name. */}}
{{- define "io-engine.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels that select the engine's pods. */}}
{{- define "io-engine.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "io-engine.labels" -}}
{{ include "io-engine.selectorLabels" . }}
app.kubernetes.io/component: storage-engine
app.kubernetes.io/part-of: io-engine
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The pods' PriorityClass: priorityClassName, or the chart's own. */}}
{{- define "io-engine.priorityClassName" -}}
{{- .Values.priorityClassName | default (printf "%s-node-critical" (include "io-engine.fullname" .)) -}}
{{- end -}}

{{/* A TOML array of strings. */}}
{{- define "io-engine.tomlList" -}}
[{{ range $i, $v := . }}{{ if $i }}, {{ end }}{{ $v | quote }}{{ end }}]
{{- end -}}

{{/* Requests, and the same as limits: whole cores, hugepages, memory (Guaranteed). */}}
{{- define "io-engine.resources" -}}
cpu: {{ .Values.cores | quote }}
memory: {{ .Values.resources.memory | quote }}
hugepages-2Mi: {{ .Values.hugepages | quote }}
{{- with .Values.resources.extra }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
Reactors the engine runs: `reactors`, or `cores` when it is 0; more than
`cores` fails the rendering (the quota would throttle busy reactors).
*/}}
{{- define "io-engine.reactors" -}}
{{- $n := int .Values.reactors -}}
{{- if eq $n 0 -}}{{- $n = int .Values.cores -}}{{- end -}}
{{- if gt $n (int .Values.cores) -}}
{{- fail (printf "reactors (%d) must be at most cores (%d): each reactor needs a whole CPU of the pod" $n (int .Values.cores)) -}}
{{- end -}}
{{- $n -}}
{{- end -}}

{{/* Where the gRPC TLS Secret is mounted. */}}
{{- define "io-engine.grpcTlsDir" -}}
/etc/io-engine-tls/grpc
{{- end -}}

{{/* The address gRPC listens on: the node's, or its loopback when plaintext is not allowed there. */}}
{{- define "io-engine.grpcHost" -}}
{{- if or .Values.grpc.tls.enabled .Values.grpc.insecure -}}
$(POD_IP)
{{- else -}}
127.0.0.1
{{- end -}}
{{- end -}}

{{/* A probe's exec: io-engine-ctl asks the engine over the endpoint and TLS of the container's IO_ENGINE_* variables. */}}
{{- define "io-engine.ctlProbe" -}}
exec:
  command: ["io-engine-ctl", "--timeout", "1.5", "engine", "info"]
timeoutSeconds: 2
{{- end -}}
