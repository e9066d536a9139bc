apiVersion: apps/v1
kind: Deployment
metadata:
  name: gpu-operator
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "gpu-operator.labels" . | nindent 4 }}
    app.kubernetes.io/component: gpu-operator
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/component: gpu-operator
  template:
    metadata:
      labels:
        app.kubernetes.io/component: gpu-operator
        app: gpu-operator
    spec:
      priorityClassName: {{ .Values.operator.priorityClassName }}
      {{- with .Values.operator.tolerations }}
      tolerations: {{ toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: gpu-operator
          image: {{ .Values.operator.repository }}/{{ .Values.operator.image }}:{{ .Chart.AppVersion }}
          imagePullPolicy: {{ .Values.operator.imagePullPolicy }}
          command: ["gpu-operator"]
          env:
            - name: OPERATOR_NAMESPACE
              value: {{ .Release.Namespace | quote }}
