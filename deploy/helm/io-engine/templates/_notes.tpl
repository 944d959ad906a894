{{/*
The install notes (NOTES.txt is this template, so that the tests can render
it with `helm template`): where each engine listens, how a node attaches
each share (NBD URI, or `nvme connect` with the share's subsystem NQN; never
a DH-HMAC-CHAP secret), how gRPC is served, and loud warnings.
*/}}
{{- define "io-engine.notes" -}}
{{- $name := include "io-engine.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $mode := include "io-engine.grpcMode" . -}}
{{- $ports := .Values.ports -}}
{{- $selector := list -}}
{{- range $k, $v := .Values.nodeSelector }}{{ $selector = append $selector (printf "%s=%s" $k $v) }}{{ end -}}
io-engine runs on every node labelled {{ join " " $selector }} in namespace {{ $ns }}.

  kubectl -n {{ $ns }} get pods -l app.kubernetes.io/instance={{ .Release.Name }} -o wide
  kubectl -n {{ $ns }} exec ds/{{ $name }} -- io-engine-ctl engine info
  kubectl -n {{ $ns }} exec ds/{{ $name }} -- io-engine-ctl export list

Each engine listens on its node's address (NODE below: a storage node's
INTERNAL-IP in `kubectl get nodes -l {{ join "," $selector }} -o wide`):
metrics :{{ $ports.metrics }}/metrics, NBD :{{ $ports.nbd }}, NVMe/TCP :{{ $ports.nvmf }}
{{- if eq $mode "tls" }}, gRPC over TLS :{{ $ports.grpc }}{{ end }}
{{- if eq $mode "insecure" }}, gRPC IN PLAINTEXT :{{ $ports.grpc }}{{ end }}.
{{- if .Values.shares }}

Shares, as a node attaches them (a node that reaches NODE; NVMe/TCP: modprobe nvme-tcp):
{{- range .Values.shares }}
{{- $head := regexReplaceAll ":(nqn|host|dhchap|dhchap-ctrl)=.*$" . "" }}
{{- $ro := hasSuffix ":ro" $head }}
{{- $device := trimSuffix ":ro" $head }}
{{- $nvmf := hasSuffix ":nvmf" $device }}
{{- $device = trimSuffix ":nbd" (trimSuffix ":nvmf" $device) }}
{{- if $nvmf }}
{{- $nqn := printf "nqn.2024-12.io.io-engine:%s" $device }}
{{- if contains ":nqn=" . }}
{{- $nqn = regexReplaceAll ":(nqn|host|dhchap|dhchap-ctrl)=.*$" (regexReplaceAll "^.*?:nqn=" . "") "" }}
{{- end }}
  {{ $device }}: NVMe/TCP{{ if $ro }}, read-only{{ end }}{{ if contains ":host=" . }}, its allowed hosts only (--hostnqn{{ if contains ":dhchap=" . }} and the host's --dhchap-secret{{ end }}){{ end }}
    nvme connect -t tcp -a NODE -s {{ $ports.nvmf }} -n {{ $nqn }}
{{- else }}
  {{ $device }}: NBD{{ if $ro }}, read-only{{ end }}, nbd://NODE:{{ $ports.nbd }}/{{ $device }}
    fio --name=check --ioengine=nbd --uri=nbd://NODE:{{ $ports.nbd }}/{{ $device }} --rw=randread --bs=4k --iodepth=32 --runtime=10 --time_based
{{- end }}
{{- end }}
{{- end }}

{{ if eq $mode "tls" -}}
gRPC: TLS on NODE:{{ $ports.grpc }} with the Secret {{ include "io-engine.grpcTlsSecret" . }}
{{- if include "io-engine.chartCertificates" . }} (cert-manager makes it: Certificate {{ include "io-engine.grpcTlsSecret" . }}, issuer {{ .Values.grpc.tls.issuerRef.name | default (printf "%s-ca" $name) }}){{ end }}
{{- if .Values.grpc.tls.clientAuth }}; clients need a certificate of its ca.crt (mutual TLS)
{{- if and (include "io-engine.chartCertificates" .) (not .Values.grpc.tls.issuerRef) }}: a cert-manager Certificate in {{ $ns }} with issuerRef {name: {{ $name }}-ca, kind: Issuer} and usages [client auth]{{ end }}
{{- end }}.
Clients check the name {{ include "io-engine.grpcServerName" . }}:
  io-engine-ctl --endpoint https://NODE:{{ $ports.grpc }} --tls-server-name {{ include "io-engine.grpcServerName" . }} --tls-ca ca.crt --tls-cert client.crt --tls-key client.key engine info
{{- else if eq $mode "insecure" -}}
################################################################################
WARNING: gRPC is PLAINTEXT on every node's address, NODE:{{ $ports.grpc }}
(grpc.insecure: true, --grpc-insecure). Anyone who reaches that port can
create, share and destroy devices and read and overwrite their data, with
no credentials. Serve mutual TLS instead (grpc.insecure: false: the default
where cert-manager is installed; docs/operations.md, "gRPC over TLS"), or
set grpc.insecure: false to keep gRPC on each node's loopback.
################################################################################
{{- else -}}
gRPC: plaintext on each node's loopback only, 127.0.0.1:{{ $ports.grpc }} (kubectl exec ... io-engine-ctl).
{{- if eq (toString .Values.grpc.tls.enabled) "auto" }}
The cluster does not serve cert-manager's API (cert-manager.io/v1): install
cert-manager and `helm upgrade` for mutual TLS on the node's address, or
name a Secret of your own (grpc.tls.secretName).
{{- end }}
{{- end }}
{{- if not (include "io-engine.hugepages" .) }}

hugepages: 0: no hugepages. Malloc devices and IO buffers come from normal
pages inside the memory limit (resources.memory: {{ .Values.resources.memory }}), which must hold them.
{{- end }}
{{- if eq .Values.updateStrategy.type "OnDelete" }}

Updates are OnDelete: a new image or config reaches a node's engine when its pod is deleted
(an engine restart loses its malloc devices and NBD sessions), e.g.
  kubectl -n {{ $ns }} delete pod -l app.kubernetes.io/instance={{ .Release.Name }} --field-selector spec.nodeName=NODE
{{- end }}
{{- if .Values.ioat.enabled }}

ioat.enabled: the container is privileged and passes --ioat (the I/OAT driver's flag).
{{- end }}
{{- end -}}
