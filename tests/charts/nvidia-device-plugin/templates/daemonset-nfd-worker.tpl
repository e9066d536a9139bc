{{- /* the upstream chart pulls node-feature-discovery in as a subchart when gfd is enabled */}}
{{- if and .Values.gfd.enabled .Values.nfd.enabled }}
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ .Release.Name }}-node-feature-discovery-worker
  namespace: {{ include "nvdp.namespace" . }}
  labels:
    {{- include "nvdp.labels" . | nindent 4 }}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: node-feature-discovery
      app.kubernetes.io/instance: {{ .Release.Name }}
      role: worker
  template:
    metadata:
      labels:
        app.kubernetes.io/name: node-feature-discovery
        app.kubernetes.io/instance: {{ .Release.Name }}
        role: worker
    spec:
      {{- with .Values.nfd.worker.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: worker
          image: registry.k8s.io/nfd/node-feature-discovery:v0.17.3
          command: ["nfd-worker"]
{{- end }}
