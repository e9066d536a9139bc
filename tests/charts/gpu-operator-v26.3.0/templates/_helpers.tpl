{{- define "gpu-operator.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* an operand's enabled flag and optional env: "component" is the values block */}}
{{- define "gpu-operator.operand" -}}
enabled: {{ .enabled }}
{{- with .version }}
version: {{ . | quote }}
{{- end }}
{{- with .env }}
env: {{ toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
