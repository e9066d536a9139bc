{{- if .Values.devicePlugin.enabled }}
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ include "nvdp.fullname" . }}
  namespace: {{ include "nvdp.namespace" . }}
  labels:
    {{- include "nvdp.labels" . | nindent 4 }}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .Chart.Name }}
      app.kubernetes.io/instance: {{ .Release.Name }}
  updateStrategy:
    {{- toYaml .Values.updateStrategy | nindent 4 }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ .Chart.Name }}
        app.kubernetes.io/instance: {{ .Release.Name }}
      {{- with .Values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
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
        - name: nvidia-device-plugin-ctr
          image: {{ include "nvdp.image" . }}
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          command: ["nvidia-device-plugin"]
          env:
            {{- include "nvdp.flagEnv" . | indent 12 }}
            {{- if .Values.config.map }}
            - name: CONFIG_FILE
              value: /available-configs/{{ .Values.config.default | default "default" }}
            {{- end }}
            - name: NVIDIA_MIG_MONITOR_DEVICES
              value: all
          securityContext:
            privileged: true
          volumeMounts:
            - name: device-plugin
              mountPath: /var/lib/kubelet/device-plugins
            {{- if .Values.config.map }}
            - name: config
              mountPath: /available-configs
            {{- end }}
      volumes:
        - name: device-plugin
          hostPath:
            path: /var/lib/kubelet/device-plugins
        {{- if .Values.config.map }}
        - name: config
          configMap:
            name: {{ include "nvdp.fullname" . }}-configs
        {{- end }}
{{- end }}
