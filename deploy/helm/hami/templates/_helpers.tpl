{{- define "hami.fullname" -}}
{{- if .Values.fullnameOverride -}}{{ .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}
{{- define "hami.namespace" -}}{{ default .Release.Namespace .Values.namespaceOverride }}{{- end -}}
{{- define "hami.image" -}}{{ .root.Values.global.imageRegistry }}/{{ .image }}:{{ .root.Values.global.imageTag }}{{- end -}}
