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

{{/* The hugepages-2Mi quantity, or nothing when `hugepages` is 0, "0" or "" (no hugepages). */}}
{{- define "io-engine.hugepages" -}}
{{- $h := toString .Values.hugepages -}}
{{- if not (or (eq $h "") (eq $h "0")) -}}
{{- $h -}}
{{- end -}}
{{- end -}}

{{/* Requests, and the same as limits: whole cores, hugepages (unless none), memory (Guaranteed). */}}
{{- define "io-engine.resources" -}}
cpu: {{ .Values.cores | quote }}
memory: {{ .Values.resources.memory | quote }}
{{- with include "io-engine.hugepages" . }}
hugepages-2Mi: {{ . | quote }}
{{- end }}
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

{{/*
How the engines serve gRPC: "tls" (grpc.tls.enabled true; or "auto" with a
Secret of one's own, or where the cluster serves cert-manager.io/v1),
"insecure" (grpc.insecure: plaintext on the node's address) or "loopback"
(plaintext on the node's loopback only: everything else).
*/}}
{{- define "io-engine.grpcMode" -}}
{{- $tls := toString .Values.grpc.tls.enabled -}}
{{- if and (eq $tls "true") .Values.grpc.insecure -}}
{{- fail "grpc.insecure: true and grpc.tls.enabled: true: choose one (mutual TLS, or plaintext on every node's address)" -}}
{{- end -}}
{{- if eq $tls "true" -}}
tls
{{- else if .Values.grpc.insecure -}}
insecure
{{- else if and (eq $tls "auto") (or .Values.grpc.tls.secretName (.Capabilities.APIVersions.Has "cert-manager.io/v1")) -}}
tls
{{- else -}}
loopback
{{- end -}}
{{- end -}}

{{/*
"true" when the chart makes the engines' certificate with cert-manager: TLS
without a Secret of one's own. Fails where cert-manager's API is missing.
*/}}
{{- define "io-engine.chartCertificates" -}}
{{- if and (eq (include "io-engine.grpcMode" .) "tls") (not .Values.grpc.tls.secretName) -}}
{{- if not (.Capabilities.APIVersions.Has "cert-manager.io/v1") -}}
{{- fail "grpc.tls.enabled: true without grpc.tls.secretName needs cert-manager (API cert-manager.io/v1) to make the engines' certificate: install cert-manager, or name a Secret of your own in grpc.tls.secretName (helm template: --api-versions cert-manager.io/v1)" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/* The gRPC TLS Secret: grpc.tls.secretName, or the chart's Certificate's. */}}
{{- define "io-engine.grpcTlsSecret" -}}
{{- .Values.grpc.tls.secretName | default (printf "%s-grpc-tls" (include "io-engine.fullname" .)) -}}
{{- end -}}

{{/* The name io-engine-ctl checks the engine's certificate for: grpc.tls.serverName, or the Service's DNS name. */}}
{{- define "io-engine.grpcServerName" -}}
{{- .Values.grpc.tls.serverName | default (printf "%s.%s.svc" (include "io-engine.fullname" .) .Release.Namespace) -}}
{{- end -}}

{{/* The address gRPC listens on: the node's, or its loopback when plaintext is not allowed there. */}}
{{- define "io-engine.grpcHost" -}}
{{- if eq (include "io-engine.grpcMode" .) "loopback" -}}
127.0.0.1
{{- else -}}
$(POD_IP)
{{- end -}}
{{- end -}}

{{/* A probe's exec: io-engine-ctl asks the engine over the endpoint and TLS of the container's IO_ENGINE_* variables. */}}
{{- define "io-engine.ctlProbe" -}}
exec:
  command: ["io-engine-ctl", "--timeout", "1.5", "engine", "info"]
timeoutSeconds: 2
{{- end -}}
