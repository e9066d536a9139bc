{{- if and (eq (include "nvdp.namespace" .) "default") (not .Values.allowDefaultNamespace) }}
{{- fail "Running in the 'default' namespace is not recommended. Set 'allowDefaultNamespace=true' to bypass this error. Otherwise, use --namespace (with --create-namespace as necessary) to run in a specific namespace." }}
{{- end }}
{{- if .Values.config.map }}
{{- if and (gt (len .Values.config.map) 1) (not .Values.config.default) (not (hasKey .Values.config.map "default")) }}
{{- fail "config.default must be set (or a config named 'default' given) when config.map holds several configs" }}
{{- end }}
{{- if and .Values.config.default (not (hasKey .Values.config.map .Values.config.default)) }}
{{- fail (printf "config.default %q names no config in config.map" .Values.config.default) }}
{{- end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "nvdp.fullname" . }}-configs
  namespace: {{ include "nvdp.namespace" . }}
  labels:
    {{- include "nvdp.labels" . | nindent 4 }}
data:
  {{- range $name, $config := .Values.config.map }}
  {{ $name }}: {{ $config | quote }}
  {{- end }}
{{- end }}
