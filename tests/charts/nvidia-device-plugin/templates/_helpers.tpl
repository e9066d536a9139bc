{{- define "nvdp.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "nvdp.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "nvdp.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "nvdp.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- end -}}

{{/* env of the device plugin and GFD containers: the override flags that are set */}}
{{- define "nvdp.flagEnv" -}}
{{- if not (kindIs "invalid" .Values.migStrategy) }}
- name: MIG_STRATEGY
  value: {{ .Values.migStrategy | quote }}
{{- end }}
{{- if not (kindIs "invalid" .Values.failOnInitError) }}
- name: FAIL_ON_INIT_ERROR
  value: {{ .Values.failOnInitError | quote }}
{{- end }}
{{- if not (kindIs "invalid" .Values.nvidiaDriverRoot) }}
- name: NVIDIA_DRIVER_ROOT
  value: {{ .Values.nvidiaDriverRoot | quote }}
{{- end }}
{{- end -}}
