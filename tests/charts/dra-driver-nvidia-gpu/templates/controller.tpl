{{- if and (eq .Release.Namespace "default") (not .Values.allowDefaultNamespace) }}
{{- fail "Running in the 'default' namespace is not recommended. Set 'allowDefaultNamespace=true' to bypass this error." }}
{{- end }}
{{- if .Values.resources.computeDomains.enabled }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Chart.Name }}-controller
  namespace: {{ .Release.Namespace }}
spec:
  replicas: 1
  selector:
    matchLabels:
      {{ .Chart.Name }}-component: controller
  template:
    metadata:
      labels:
        {{ .Chart.Name }}-component: controller
    spec:
      priorityClassName: system-node-critical
      {{- with .Values.controller.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.controller.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: compute-domain
          image: "{{ .Values.image.repository }}:v{{ .Chart.AppVersion }}"
{{- end }}
