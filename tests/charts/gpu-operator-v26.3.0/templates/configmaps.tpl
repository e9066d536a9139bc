{{- /* The device plugin (time-slicing / MPS) and MIG Manager configs the values carry inline. */ -}}
{{- range $component := list .Values.devicePlugin .Values.migManager }}
{{- if and $component.config.create $component.config.data }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ required "config.name is required with config.create" $component.config.name }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "gpu-operator.labels" $ | nindent 4 }}
data: {{ toYaml $component.config.data | nindent 2 }}
{{- end }}
{{- end }}
