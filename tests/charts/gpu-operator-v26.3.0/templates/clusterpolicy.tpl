{{- /* What the operator is told: ClusterPolicy cluster-policy, its spec built from the values our roles set. */ -}}
{{- if and .Values.gds.enabled (eq .Values.driver.kernelModuleType "proprietary") }}
{{- fail "gds.enabled needs the open kernel modules: driver.kernelModuleType must be open or auto" }}
{{- end }}
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata:
  name: cluster-policy
  labels:
    {{- include "gpu-operator.labels" . | nindent 4 }}
spec:
  hostPaths:
    rootFS: {{ .Values.hostPaths.rootFS }}
    driverInstallDir: {{ .Values.hostPaths.driverInstallDir }}
  operator:
    {{- with .Values.operator.runtimeClass }}
    runtimeClass: {{ . }}
    {{- end }}
  daemonsets:
    priorityClassName: {{ .Values.daemonsets.priorityClassName }}
    tolerations: {{ toYaml .Values.daemonsets.tolerations | nindent 6 }}
    updateStrategy: {{ .Values.daemonsets.updateStrategy }}
    rollingUpdate:
      maxUnavailable: {{ .Values.daemonsets.rollingUpdate.maxUnavailable | quote }}
  mig:
    strategy: {{ .Values.mig.strategy }}
  cdi:
    enabled: {{ .Values.cdi.enabled }}
  psa:
    enabled: {{ .Values.psa.enabled }}
  driver:
    {{- include "gpu-operator.operand" .Values.driver | nindent 4 }}
    useNvidiaDriverCRD: {{ .Values.driver.nvidiaDriverCRD.enabled }}
    kernelModuleType: {{ .Values.driver.kernelModuleType }}
    usePrecompiled: {{ .Values.driver.usePrecompiled }}
    repository: {{ .Values.driver.repository }}
    image: {{ .Values.driver.image }}
    rdma:
      enabled: {{ .Values.driver.rdma.enabled }}
      useHostMofed: {{ .Values.driver.rdma.useHostMofed }}
  toolkit:
    {{- include "gpu-operator.operand" .Values.toolkit | nindent 4 }}
    installDir: {{ .Values.toolkit.installDir }}
  devicePlugin:
    {{- include "gpu-operator.operand" .Values.devicePlugin | nindent 4 }}
    {{- if .Values.devicePlugin.config.name }}
    config:
      name: {{ .Values.devicePlugin.config.name }}
      default: {{ .Values.devicePlugin.config.default | quote }}
    {{- end }}
  dcgm:
    enabled: {{ .Values.dcgm.enabled }}
  dcgmExporter:
    enabled: {{ .Values.dcgmExporter.enabled }}
    {{- if .Values.dcgmExporter.serviceMonitor.enabled }}
    serviceMonitor: {{ toYaml .Values.dcgmExporter.serviceMonitor | nindent 6 }}
    {{- end }}
  gfd:
    enabled: {{ .Values.gfd.enabled }}
  migManager:
    {{- include "gpu-operator.operand" .Values.migManager | nindent 4 }}
    config:
      {{- with .Values.migManager.config.name }}
      name: {{ . }}
      {{- end }}
      default: {{ .Values.migManager.config.default | quote }}
  nodeStatusExporter:
    enabled: {{ .Values.nodeStatusExporter.enabled }}
  gds:
    {{- include "gpu-operator.operand" .Values.gds | nindent 4 }}
  gdrcopy:
    {{- include "gpu-operator.operand" .Values.gdrcopy | nindent 4 }}
  sandboxWorkloads:
    enabled: {{ .Values.sandboxWorkloads.enabled }}
    defaultWorkload: {{ .Values.sandboxWorkloads.defaultWorkload }}
