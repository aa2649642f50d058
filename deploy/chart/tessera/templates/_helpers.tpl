{{/*
The chart's shared definitions. The object names are the upstream operator's and fixed; every
object carries the standard app.kubernetes.io labels.
*/}}

{{- define "tessera.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: tessera
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* A component's labels: (dict "ctx" $ "name" NAME "component" COMPONENT). */}}
{{- define "tessera.componentLabels" -}}
{{ include "tessera.labels" .ctx }}
{{ include "tessera.selectorLabels" . }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* What a component's selector matches: (dict "ctx" $ "name" NAME). */}}
{{- define "tessera.selectorLabels" -}}
app.kubernetes.io/name: {{ .name }}
{{- end -}}

{{- define "tessera.image" -}}
{{- $repo := .Values.image.repository -}}
{{- if .Values.image.registry }}{{ $repo = printf "%s/%s" .Values.image.registry $repo }}{{ end -}}
{{- if .Values.image.digest -}}
{{ printf "%s@%s" $repo .Values.image.digest }}
{{- else -}}
{{ printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) }}
{{- end -}}
{{- end -}}

{{- define "tessera.webhookName" -}}gpustack-worker-webhook{{- end -}}
{{- define "tessera.controllerName" -}}gpustack-worker-controller{{- end -}}
{{- define "tessera.webhookSecret" -}}gpustack-worker-webhook-tls{{- end -}}
{{- define "tessera.mutationName" -}}gpustack-worker-mutation{{- end -}}
{{- define "tessera.validationName" -}}gpustack-worker-validation{{- end -}}

{{/* The certificate provider in effect: cert-manager or tessera. */}}
{{- define "tessera.certProvider" -}}
{{- $p := .Values.certificates.provider -}}
{{- if eq $p "auto" -}}
{{- if .Capabilities.APIVersions.Has "cert-manager.io/v1" }}cert-manager{{ else }}tessera{{ end -}}
{{- else -}}
{{ $p }}
{{- end -}}
{{- end -}}

{{/* The Pod-level fields every component shares: pull secrets and the scheduling values of
(dict "ctx" $ "v" COMPONENT-VALUES). */}}
{{- define "tessera.podScheduling" -}}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The preferred spread of a Deployment's replicas over nodes, unless affinity is given:
(dict "v" COMPONENT-VALUES "name" NAME). */}}
{{- define "tessera.affinity" -}}
affinity:
{{- if .v.affinity }}
  {{- toYaml .v.affinity | nindent 2 }}
{{- else }}
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              app.kubernetes.io/name: {{ .name }}
{{- end }}
{{- end -}}

{{/* The restricted container security context of the webhook and the controller. */}}
{{- define "tessera.restrictedSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities: {drop: [ALL]}
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{/* A webhook's clientConfig.service: the webhook Service at path: (dict "ctx" $ "path" PATH). */}}
{{- define "tessera.webhookService" -}}
service:
  namespace: {{ .ctx.Release.Namespace }}
  name: {{ include "tessera.webhookName" .ctx }}
  path: {{ .path }}
  port: 443
{{- end -}}

{{/* The controller's flags for tessera's own webhook certificates (certificates.provider). */}}
{{- define "tessera.certArgs" -}}
- --webhook-cert-secret={{ .Release.Namespace }}/{{ include "tessera.webhookSecret" . }}
- --webhook-service={{ .Release.Namespace }}/{{ include "tessera.webhookName" . }}
- --webhook-configurations={{ include "tessera.mutationName" . }},{{ include "tessera.validationName" . }}
- --webhook-cert-validity={{ .Values.certificates.servingValidity }}
{{- end -}}

{{/* Value combinations the schema cannot express, refused with the value named. */}}
{{- define "tessera.validate" -}}
{{- if and .Values.webhook.enabled (eq (include "tessera.certProvider" .) "tessera") (not .Values.controller.enabled) }}
{{- fail "certificates.provider=tessera (or auto without cert-manager) needs controller.enabled=true: the controller issues the webhook's certificate; set certificates.provider=cert-manager or enable the controller" }}
{{- end }}
{{- end -}}
