{{- /* The workloads of the sub-charts the values switch on (node-feature-discovery, sriov-network-operator). */ -}}
{{- if .Values.nfd.enabled }}
{{- include "network-operator.deployment" (dict "root" . "name" (printf "%s-node-feature-discovery-master" .Release.Name) "image" "registry.k8s.io/nfd/node-feature-discovery:v0.17.3" "env" (list (dict "name" "NODE_NAME" "value" "master"))) }}
{{- end }}
{{- if .Values.sriovNetworkOperator.enabled }}
---
{{ include "network-operator.deployment" (dict "root" . "name" "sriov-network-operator" "image" "nvcr.io/nvidia/mellanox/sriov-network-operator:network-operator-v25.10.0" "env" (list (dict "name" "NAMESPACE" "value" .Release.Namespace))) }}
{{- end }}
