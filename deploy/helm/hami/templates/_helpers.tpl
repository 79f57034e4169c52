{{/* Names. Defaults (release "hami" or any, no overrides) match the kustomize base: hami-scheduler, ... */}}
{{- define "hami.fullname" -}}
{{- if .Values.fullnameOverride -}}{{ .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else -}}{{ default .Chart.Name .Values.nameOverride | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}
{{- define "hami.namespace" -}}{{ default .Release.Namespace .Values.namespaceOverride | trunc 63 }}{{- end -}}
{{- define "hami.scheduler" -}}{{ include "hami.fullname" . }}-scheduler{{- end -}}
{{- define "hami.nodeAgent" -}}{{ include "hami.fullname" . }}-node-agent{{- end -}}
{{- define "hami.tlsSecret" -}}{{ include "hami.scheduler" . }}-tls{{- end -}}

{{- define "hami.labels" -}}
app.kubernetes.io/part-of: hami
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.global.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Metadata lines every object carries: labels (app.kubernetes.io/name = .name, plus global.labels and
.labels) and annotations (global.annotations plus .annotations). */}}
{{- define "hami.metadata" -}}
labels:
  app.kubernetes.io/name: {{ .name }}
  {{- include "hami.labels" .root | nindent 2 }}
  {{- with .labels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- $ann := merge (dict) (.annotations | default dict) (.root.Values.global.annotations | default dict) }}
{{- with $ann }}
annotations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
An image reference from a string ("repo/name[:tag]", prefixed with global.imageRegistry unless its
first part names a registry) or upstream's map {registry, repository, tag}. Empty tag: .tag, then
global.imageTag, then the chart's appVersion.  Args: dict "root" . "image" <value> "tag" <default tag>.
*/}}
{{- define "hami.image" -}}
{{- $root := .root -}}
{{- $defTag := default (default $root.Chart.AppVersion $root.Values.global.imageTag) .tag -}}
{{- if kindIs "string" .image -}}
{{- $ref := .image -}}
{{- $first := first (splitList "/" $ref) -}}
{{- if and $root.Values.global.imageRegistry (not (or (contains "." $first) (contains ":" $first) (eq $first "localhost"))) -}}
{{- $ref = printf "%s/%s" $root.Values.global.imageRegistry $ref -}}
{{- end -}}
{{- if or (contains "@" $ref) (contains ":" (last (splitList "/" $ref))) -}}{{ $ref }}{{- else -}}{{ $ref }}:{{ $defTag }}{{- end -}}
{{- else if kindIs "map" .image -}}
{{- $reg := default $root.Values.global.imageRegistry .image.registry -}}
{{- $repo := required "an image map needs a repository" .image.repository -}}
{{- $tag := default $defTag (toString (default "" .image.tag)) -}}
{{- if $reg }}{{ $reg }}/{{ end }}{{ $repo }}{{ if hasPrefix "sha256:" $tag }}@{{ else }}:{{ end }}{{ $tag }}
{{- else -}}
{{- fail (printf "image must be a string or a map of registry/repository/tag, got %s" (kindOf .image)) -}}
{{- end -}}
{{- end -}}

{{- define "hami.pullPolicy" -}}
{{- if and (kindIs "map" .) .pullPolicy }}{{ .pullPolicy }}{{ else }}IfNotPresent{{ end -}}
{{- end -}}

{{/* kube-scheduler must match the cluster's minor version: tag from .Capabilities.KubeVersion unless set. */}}
{{- define "hami.kubeSchedulerImage" -}}
{{- $v := regexFind "v[0-9]+\\.[0-9]+\\.[0-9]+" .Capabilities.KubeVersion.Version -}}
{{- include "hami.image" (dict "root" . "image" .Values.scheduler.kubeScheduler.image "tag" $v) -}}
{{- end -}}

{{- define "hami.libPath" -}}{{ default (printf "%s/vgpu" .Values.global.gpuHookPath) .Values.devicePlugin.libPath }}{{- end -}}

{{/* Port of an ADDR:PORT or :PORT bind address. */}}
{{- define "hami.port" -}}{{ regexFind "[0-9]+$" (toString .) }}{{- end -}}

{{/* Replicas: one without leader election (two schedulers without a Lease would both bind). */}}
{{- define "hami.schedulerReplicas" -}}
{{- if .Values.scheduler.leaderElect }}{{ int .Values.scheduler.replicas }}{{ else }}1{{ end -}}
{{- end -}}

{{/* "true" when the extender places DRA pods (hami scheduler --dra-placement, docs/dra.md "Placement"):
dra.placement.enabled, in DRA mode only; "" otherwise. The flag, the prioritize verb and the RBAC follow it. */}}
{{- define "hami.draPlacement" -}}
{{- if and .Values.dra.enabled .Values.dra.placement.enabled }}true{{ end -}}
{{- end -}}

{{/* imagePullSecrets of a pod: global.imagePullSecrets, then each of its images' pullSecrets
(upstream's image maps carry them, #2976), names or {name: ...}, each once; nothing when none.
Args: dict "root" . "images" (list of image values). */}}
{{- define "hami.pullSecrets" -}}
{{- $names := list -}}
{{- $all := .root.Values.global.imagePullSecrets | default list -}}
{{- range .images }}{{ if and (kindIs "map" .) .pullSecrets }}{{ $all = concat $all .pullSecrets }}{{ end }}{{ end -}}
{{- range $all }}{{ $names = append $names (ternary . (dig "name" "" (ternary (dict) . (kindIs "string" .))) (kindIs "string" .)) }}{{ end -}}
{{- $s := list -}}
{{- range uniq (compact $names) }}{{ $s = append $s (dict "name" .) }}{{ end -}}
{{- with $s -}}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/*
Upstream HAMi values that have no meaning in hami-cpp, as "path=inert value" (a value other than the
inert one, or any value when none is given, is reported by NOTES.txt). docs/install.md lists why.
*/}}
{{- define "hami.notApplicable" -}}
{{- $keys := list
  "podSecurityPolicy.enabled=false" "global.managedNodeSelectorEnable=false"
  "scheduler.admissionWebhook.customURL.enabled=false"
  "scheduler.nodeLockExpire=5m" "scheduler.nodeLockRetryTimeout=" "scheduler.kubeTimeout="
  "scheduler.profilingBindAddress=127.0.0.1:6060"
  "devicePlugin.vgpuCache.gracePeriod=5m"
  "devicePlugin.gpuOperatorToolkitReady.enabled=false"
  "devicePlugin.passDeviceSpecsEnabled=true"
  "devicePlugin.nvidiaHookPath=" "devicePlugin.nvidiaDriverRoot=auto" "devicePlugin.gdrcopyEnabled="
  "devicePlugin.gdsEnabled=" "devicePlugin.mofedEnabled=" "devicePlugin.hostNetwork=false"
  "mockDevicePlugin.enabled=false" "legacyMetrics=false"
  "devices.ascend.enabled=false" "devices.iluvatar.enabled=false" "devices.vastai.enabled=false"
  "devices.biren.enabled=false" "devices.awsneuron.enabled=false"
  "devices.amd.enabled=false" "vastaiResourceName=" "birenResourceName="
-}}
{{- $set := list -}}
{{- range $keys -}}
{{- $path := first (splitList "=" .) -}}
{{- $inert := trimPrefix (printf "%s=" $path) . -}}
{{- $v := $.Values -}}{{- $found := true -}}
{{- range splitList "." $path -}}
{{- if and $found (kindIs "map" $v) (hasKey $v .) }}{{ $v = index $v . }}{{ else }}{{ $found = false }}{{ end -}}
{{- end -}}
{{- if and $found (ne (toString $v) $inert) (ne (toString $v) "") (ne (toString $v) "<nil>") -}}
{{- $set = append $set (printf "%s=%v" $path $v) -}}
{{- end -}}
{{- end -}}
{{- join "\n" $set -}}
{{- end -}}

{{/*
Vendor settings in either upstream layout: v2.10 (root keys such as resourceName and
devicePlugin.deviceSplitCount) or v2.11 (devices.<vendor>.*, upstream PR #3124). Rows are
"old path=new path=default"; a key is given when present and not null. The value is the new key's,
else the old key's, else the default; both given with different values fail the render naming both
(upstream v2.11 fails on any old key; docs/install.md, "Upstream values"). Returns YAML:
{<vendor>: {<key>: value}}, read with `include "hami.deviceValues" . | fromYaml`.
*/}}
{{- define "hami.deviceValues" -}}
{{- $rows := list
  "resourceName=devices.nvidia.resourceCountName=nvidia.com/gpu"
  "resourceMem=devices.nvidia.resourceMemoryName=nvidia.com/gpumem"
  "resourceMemPercentage=devices.nvidia.resourceMemoryPercentageName=nvidia.com/gpumem-percentage"
  "resourceCores=devices.nvidia.resourceCoreName=nvidia.com/gpucores"
  "resourcePriority=devices.nvidia.resourcePriorityName=nvidia.com/priority"
  "devicePlugin.deviceSplitCount=devices.nvidia.deviceSplitCount=10"
  "devicePlugin.deviceMemoryScaling=devices.nvidia.deviceMemoryScaling=1"
  "devicePlugin.deviceCoreScaling=devices.nvidia.deviceCoreScaling=1"
  "devicePlugin.preConfiguredDeviceMemory=devices.nvidia.preConfiguredDeviceMemory=0"
  "devicePlugin.enableNumaTopology=devices.nvidia.enableNumaTopology=false"
  "devicePlugin.runtimeClassName=devices.nvidia.runtimeClassName="
  "devicePlugin.createRuntimeClass=devices.nvidia.createRuntimeClass=false"
  "mluResourceName=devices.cambricon.resourceCountName=cambricon.com/vmlu"
  "mluResourceMem=devices.cambricon.resourceMemoryName=cambricon.com/mlu.smlu.vmemory"
  "mluResourceCores=devices.cambricon.resourceCoreName=cambricon.com/mlu.smlu.vcore"
  "hcuResourceName=devices.hygon.resourceCountName=hygon.com/dcunum"
  "hcuResourceMem=devices.hygon.resourceMemoryName=hygon.com/dcumem"
  "hcuResourceCores=devices.hygon.resourceCoreName=hygon.com/dcucores"
  "metaxResourceName=devices.metax.resourceVCountName=metax-tech.com/sgpu"
  "metaxResourceCore=devices.metax.resourceVCoreName=metax-tech.com/vcore"
  "metaxResourceMem=devices.metax.resourceVMemoryName=metax-tech.com/vmemory"
  "metaxsGPUTopologyAware=devices.metax.sgpuTopologyAware=false"
  "enflameResourceNameDRSGCU=devices.enflame.resourceNameDRSGCU=enflame.com/drs-gcu"
  "enflameResourceNameGCUMemory=devices.enflame.resourceNameGCUMemory=enflame.com/gcu-memory"
  "enflameResourceNameGCUCore=devices.enflame.resourceNameGCUCore=enflame.com/gcu-core"
  "kunlunResourceName=devices.kunlun.resourceCountName=kunlunxin.com/xpu"
  "kunlunResourceVCountName=devices.kunlun.resourceVCountName=kunlunxin.com/vxpu"
  "kunlunResourceVMemoryName=devices.kunlun.resourceVMemoryName=kunlunxin.com/vxpu-memory"
  "vastaiResourceName=devices.vastai.resourceCountName=vastaitech.com/va"
  "birenResourceName=devices.biren.resourceCountName=birentech.com/gpu"
-}}
{{- $out := dict -}}
{{- $errors := list -}}
{{- range $rows -}}
{{- $parts := splitList "=" . -}}
{{- $old := index $parts 0 -}}{{- $new := index $parts 1 -}}{{- $def := index $parts 2 -}}
{{- $given := dict -}}
{{- range $path := list $old $new -}}
{{- $v := $.Values -}}{{- $found := true -}}
{{- range splitList "." $path -}}
{{- if and $found (kindIs "map" $v) (hasKey $v .) }}{{ $v = index $v . }}{{ else }}{{ $found = false }}{{ end -}}
{{- end -}}
{{- if and $found (not (kindIs "invalid" $v)) }}{{ $_ := set $given $path $v }}{{ end -}}
{{- end -}}
{{- $value := $def -}}
{{- if hasKey $given $new }}{{ $value = index $given $new }}{{ else if hasKey $given $old }}{{ $value = index $given $old }}{{ end -}}
{{- if and (hasKey $given $old) (hasKey $given $new) (ne (toString (index $given $old)) (toString (index $given $new))) -}}
{{- $errors = append $errors (printf "%s (%v, upstream v2.10 layout) and %s (%v, v2.11 layout) disagree; set one of them" $old (index $given $old) $new (index $given $new)) -}}
{{- end -}}
{{- $vendor := index (splitList "." $new) 1 -}}{{- $key := index (splitList "." $new) 2 -}}
{{- if not (hasKey $out $vendor) }}{{ $_ := set $out $vendor (dict) }}{{ end -}}
{{- $_ := set (index $out $vendor) $key $value -}}
{{- end -}}
{{- if $errors -}}
{{- fail (printf "values in both upstream layouts:\n%s" (join "\n" $errors)) -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
Container env entries from extraEnvs: upstream's map (name: value, v2.10) or list of EnvVar objects
(v2.11, upstream PR #3205; valueFrom allowed). Indented for a container's env list.
*/}}
{{- define "hami.extraEnvs" -}}
{{- if kindIs "slice" . -}}
{{- range . }}
{{- if not (and (kindIs "map" .) .name) }}{{ fail (printf "extraEnvs: a list entry needs a name: %v" .) }}{{ end }}
{{- toYaml (list .) | nindent 12 }}
{{- end -}}
{{- else if kindIs "map" . -}}
{{- range $k, $v := . }}
            - name: {{ $k }}
              value: {{ $v | quote }}
{{- end -}}
{{- end -}}
{{- end -}}
