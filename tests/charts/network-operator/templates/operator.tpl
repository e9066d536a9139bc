{{- $image := printf "%s/%s:%s" .Values.operator.repository .Values.operator.image .Chart.AppVersion }}
{{- include "network-operator.deployment" (dict "root" . "name" (.Values.operator.fullnameOverride | default "network-operator") "image" $image "env" (list
  (dict "name" "POD_NAMESPACE" "value" .Release.Namespace)
  (dict "name" "USE_DTK" "value" (toString .Values.operator.useDTK))
  (dict "name" "CNI_BIN_DIR" "value" .Values.operator.cniBinDirectory)
  (dict "name" "MAINTENANCE_OPERATOR_ENABLED" "value" (toString .Values.maintenanceOperator.enabled)))) }}
