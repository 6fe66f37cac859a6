{{/*
Names. The chart's name is "kgpu" (nameOverride changes it); objects are "<fullname>-agent",
"<fullname>-scheduler", ... where fullname is the release name when it already contains the chart's
name ("kgpu", "kgpu-prod"), else "<release>-<name>". fullnameOverride replaces it.
*/}}
{{- define "kgpu.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "kgpu.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "kgpu.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kgpu.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "kgpu.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; "component" is passed as .component. */}}
{{- define "kgpu.labels" -}}
helm.sh/chart: {{ include "kgpu.chart" .root }}
app.kubernetes.io/name: {{ include "kgpu.name" .root }}-{{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: kgpu
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end -}}

{{/* Selector labels (immutable on a DaemonSet or Deployment: never add to them in an upgrade). */}}
{{- define "kgpu.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kgpu.name" .root }}-{{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{- define "kgpu.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The agent runs when any of its parts is enabled. */}}
{{- define "kgpu.agentEnabled" -}}
{{- if or .Values.devicePlugin.enabled .Values.gfd.enabled .Values.dcgmExporter.enabled .Values.draDriver.enabled -}}true{{- end -}}
{{- end -}}

{{/*
The ConfigMap of named sharing configs the agent chooses from: config.name (an existing ConfigMap)
or config.map (built by this chart); empty when neither is set.
*/}}
{{- define "kgpu.configMapName" -}}
{{- if and .Values.config.name (not (empty .Values.config.map)) -}}
{{- fail "config.name and config.map are exclusive: name an existing ConfigMap, or give the configs in config.map" -}}
{{- end -}}
{{- if .Values.config.name -}}
{{- .Values.config.name -}}
{{- else if not (empty .Values.config.map) -}}
{{- include "kgpu.fullname" . }}-configs
{{- end -}}
{{- end -}}

{{/*
The agent's node rule, as nodeSelectorTerms (ORed):
1. GPU nodes (nvidia.com/gpu.present=true) minus the opt-outs: kgpu.io/agent=false, the GPU
   Operator's nvidia.com/gpu.deploy.operands=false, and for each enabled part (device-plugin,
   gpu-feature-discovery, dcgm-exporter) its nvidia.com/gpu.deploy.<part> label "false" or
   "paused-for-mig-change" (NVIDIA's MIG manager, while it repartitions). One pod serves the three
   parts, so opting a node out of any enabled part removes the agent from it.
2. Nodes labelled kgpu.io/agent=true, whatever the GPU Operator's "false" labels say (a node moving
   from NVIDIA's components to kgpu's: docs/migrating.md), still paused by the MIG manager.
*/}}
{{- define "kgpu.agentNodeTerms" -}}
{{- $parts := list }}
{{- range $part, $on := dict "device-plugin" .Values.devicePlugin.enabled "gpu-feature-discovery" .Values.gfd.enabled "dcgm-exporter" .Values.dcgmExporter.enabled }}
{{- if $on }}{{ $parts = append $parts $part }}{{ end }}
{{- end }}
- matchExpressions:
    - {key: nvidia.com/gpu.present, operator: In, values: ["true"]}
    - {key: kgpu.io/agent, operator: NotIn, values: ["false"]}
    - {key: nvidia.com/gpu.deploy.operands, operator: NotIn, values: ["false"]}
    {{- range $parts }}
    - {key: nvidia.com/gpu.deploy.{{ . }}, operator: NotIn, values: ["false", "paused-for-mig-change"]}
    {{- end }}
- matchExpressions:
    - {key: kgpu.io/agent, operator: In, values: ["true"]}
    {{- range $parts }}
    - {key: nvidia.com/gpu.deploy.{{ . }}, operator: NotIn, values: ["paused-for-mig-change"]}
    {{- end }}
{{- end -}}
