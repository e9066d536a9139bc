{{- if .Values.gfd.enabled }}
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ include "nvdp.fullname" . }}-gpu-feature-discovery
  namespace: {{ include "nvdp.namespace" . }}
  labels:
    {{- include "nvdp.labels" . | nindent 4 }}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: gpu-feature-discovery
      app.kubernetes.io/instance: {{ .Release.Name }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: gpu-feature-discovery
        app.kubernetes.io/instance: {{ .Release.Name }}
    spec:
      priorityClassName: {{ .Values.priorityClassName }}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: gpu-feature-discovery-ctr
          image: {{ include "nvdp.image" . }}
          command: ["gpu-feature-discovery"]
          env:
            {{- include "nvdp.flagEnv" . | indent 12 }}
            {{- with .Values.gfd.sleepInterval }}
            - name: GFD_SLEEP_INTERVAL
              value: {{ . | quote }}
            {{- end }}
          volumeMounts:
            - name: output-dir
              mountPath: /etc/kubernetes/node-feature-discovery/features.d
      volumes:
        - name: output-dir
          hostPath:
            path: /etc/kubernetes/node-feature-discovery/features.d
{{- end }}
