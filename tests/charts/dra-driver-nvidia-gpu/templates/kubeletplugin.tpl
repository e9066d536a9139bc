{{- if or .Values.resources.computeDomains.enabled .Values.resources.gpus.enabled }}
{{- if and .Values.resources.gpus.enabled (not .Values.gpuResourcesEnabledOverride) }}
{{- fail "GPU allocation is not ready yet: set gpuResourcesEnabledOverride=true to enable it anyway" }}
{{- end }}
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ .Chart.Name }}-kubelet-plugin
  namespace: {{ .Release.Namespace }}
spec:
  selector:
    matchLabels:
      {{ .Chart.Name }}-component: kubelet-plugin
  template:
    metadata:
      labels:
        {{ .Chart.Name }}-component: kubelet-plugin
    spec:
      priorityClassName: system-node-critical
      {{- with .Values.kubeletPlugin.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.kubeletPlugin.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: compute-domains
          image: "{{ .Values.image.repository }}:v{{ .Chart.AppVersion }}"
          env:
            - name: NVIDIA_DRIVER_ROOT
              value: {{ .Values.nvidiaDriverRoot | quote }}
{{- end }}
