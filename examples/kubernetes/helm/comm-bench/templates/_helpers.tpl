{{- define "comm-bench.fullname" -}}
{{- printf "%s-comm-bench" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "comm-bench.labels" -}}
app.kubernetes.io/name: comm-bench
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
