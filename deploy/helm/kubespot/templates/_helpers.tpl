{{/* Names and labels. */}}
{{- define "kubespot.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kubespot.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kubespot.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubespot.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kubespot.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kubespot.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: agent
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.customLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "kubespot.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kubespot.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kubespot.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) -}}
{{- end -}}

{{/*
A value counts as set unless it is null or the empty string: false, 0 and [] are values. NTH's chart
writes "" for "use the default", and so does a values file copied from it.
*/}}
{{- define "kubespot.isSet" -}}
{{- if and (not (kindIs "invalid" .)) (ne (toString .) "") -}}true{{- end -}}
{{- end -}}

{{/* A value as the agent reads it from its environment: maps and lists as JSON, the rest as text. */}}
{{- define "kubespot.envText" -}}
{{- if or (kindIs "map" .) (kindIs "slice" .) -}}
{{- toJson . -}}
{{- else if kindIs "float64" . -}}
{{- /* YAML numbers arrive as float64: 120 must not become 1.2e+02. */ -}}
{{- if eq (floor .) . -}}{{- int64 . -}}{{- else -}}{{- . -}}{{- end -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{/*
Chart value -> agent environment variable, for every setting rendered as a plain env value. Names
come from src/kubespot/config (each setting's env); the chart tests check every one against it.
Settings handled elsewhere: the Downward API identity, the webhook URL (a file from a Secret),
headers and proxy (secretKeyRef), template file (a ConfigMap), uptime file (a hostPath mount), and
the probes / metrics servers (always rendered, see the DaemonSet).
*/}}
{{- define "kubespot.settingEnvNames" -}}
enableSpotInterruptionDraining: KUBESPOT_IMDS_SPOT_INTERRUPTION_DRAINING
enableScheduledEventDraining: KUBESPOT_IMDS_SCHEDULED_EVENT_DRAINING
enableRebalanceMonitoring: KUBESPOT_IMDS_REBALANCE_MONITORING
enableRebalanceDraining: KUBESPOT_IMDS_REBALANCE_DRAINING
enableASGLifecycleDraining: KUBESPOT_IMDS_ASG_LIFECYCLE_DRAINING
instanceMetadataURL: KUBESPOT_IMDS_URL
metadataTries: KUBESPOT_IMDS_TRIES
dryRun: KUBESPOT_NODE_ACTIONS_DRY_RUN
cordonOnly: KUBESPOT_NODE_ACTIONS_CORDON_ONLY
taintNode: KUBESPOT_NODE_ACTIONS_TAINT_NODE
taintEffect: KUBESPOT_NODE_ACTIONS_TAINT_EFFECT
enableOutOfServiceTaint: KUBESPOT_NODE_ACTIONS_ENABLE_OUT_OF_SERVICE_TAINT
excludeFromLoadBalancers: KUBESPOT_NODE_ACTIONS_EXCLUDE_FROM_LOAD_BALANCERS
deleteLocalData: KUBESPOT_DRAIN_DELETE_LOCAL_DATA
ignoreDaemonSets: KUBESPOT_DRAIN_IGNORE_DAEMON_SETS
nodeTerminationGracePeriod: KUBESPOT_DRAIN_NODE_TERMINATION_GRACE_PERIOD
kubeApiQps: KUBESPOT_KUBE_API_QPS
kubeApiBurst: KUBESPOT_KUBE_API_BURST
jsonLogging: KUBESPOT_OBSERVABILITY_JSON_LOGGING
logLevel: KUBESPOT_OBSERVABILITY_LOG_LEVEL
emitKubernetesEvents: KUBESPOT_OBSERVABILITY_EMIT_KUBERNETES_EVENTS
kubernetesEventsExtraAnnotations: KUBESPOT_OBSERVABILITY_KUBERNETES_EVENTS_EXTRA_ANNOTATIONS
webhookTemplate: KUBESPOT_WEBHOOK_TEMPLATE
pollInterval: KUBESPOT_IMDS_POLL_INTERVAL
requireIMDSv2: KUBESPOT_IMDS_REQUIRE_V2
imdsTokenTTL: KUBESPOT_IMDS_TOKEN_TTL
imdsTokenRefreshMargin: KUBESPOT_IMDS_TOKEN_REFRESH_MARGIN
imdsRequestTimeout: KUBESPOT_IMDS_REQUEST_TIMEOUT
imdsRetryBackoffBase: KUBESPOT_IMDS_RETRY_BACKOFF_BASE
imdsRetryBackoffCap: KUBESPOT_IMDS_RETRY_BACKOFF_CAP
scheduledLeadTime: KUBESPOT_IMDS_SCHEDULED_LEAD_TIME
rebalanceUndoAfter: KUBESPOT_NODE_ACTIONS_REBALANCE_UNDO_AFTER
pdbDeadlineAction: KUBESPOT_DRAIN_PDB_DEADLINE_ACTION
safetyMargin: KUBESPOT_DRAIN_SAFETY_MARGIN
evictionConcurrency: KUBESPOT_DRAIN_EVICTION_CONCURRENCY
evictionRetryBackoffBase: KUBESPOT_DRAIN_RETRY_BACKOFF_BASE
evictionRetryBackoffCap: KUBESPOT_DRAIN_RETRY_BACKOFF_CAP
criticalLast: KUBESPOT_DRAIN_CRITICAL_LAST
kubeApiRequestTimeout: KUBESPOT_KUBE_REQUEST_TIMEOUT
kubeApiRetryAttempts: KUBESPOT_KUBE_RETRY_ATTEMPTS
probesStaleAfter: KUBESPOT_OBSERVABILITY_PROBES_STALE_AFTER
webhookTimeout: KUBESPOT_WEBHOOK_TIMEOUT
webhookAttempts: KUBESPOT_WEBHOOK_ATTEMPTS
{{- end -}}

{{- define "kubespot.podTerminationGracePeriod" -}}
{{- if include "kubespot.isSet" .Values.podTerminationGracePeriod -}}
{{- include "kubespot.envText" .Values.podTerminationGracePeriod -}}
{{- else if include "kubespot.isSet" .Values.gracePeriod -}}
{{- include "kubespot.envText" .Values.gracePeriod -}}
{{- end -}}
{{- end -}}

{{- define "kubespot.uptimeFile" -}}
{{- if include "kubespot.isSet" .Values.uptimeFromFile -}}
{{- .Values.uptimeFromFile -}}
{{- else if include "kubespot.isSet" .Values.procUptimeFile -}}
{{- .Values.procUptimeFile -}}
{{- end -}}
{{- end -}}

{{/* The webhook URL's Secret: the user's, or the chart's when webhookURL is given inline. */}}
{{- define "kubespot.webhookSecretName" -}}
{{- if .Values.webhookURLSecretName -}}
{{- .Values.webhookURLSecretName -}}
{{- else if .Values.webhookURL -}}
{{- printf "%s-webhook" (include "kubespot.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "kubespot.webhookSecretKey" -}}
{{- if .Values.webhookURLSecretName -}}{{- .Values.webhookURLSecretKey | default "webhookurl" -}}{{- else -}}webhookurl{{- end -}}
{{- end -}}

{{/* Whether the chart creates its own webhook Secret (inline URL, headers or proxy). */}}
{{- define "kubespot.chartSecret" -}}
{{- if or (and .Values.webhookURL (not .Values.webhookURLSecretName)) (include "kubespot.isSet" .Values.webhookHeaders) (include "kubespot.isSet" .Values.webhookProxy) -}}true{{- end -}}
{{- end -}}

{{- define "kubespot.chartSecretName" -}}
{{- printf "%s-webhook" (include "kubespot.fullname" .) -}}
{{- end -}}

{{- define "kubespot.probesEnabled" -}}
{{- if include "kubespot.isSet" .Values.enableProbesServer -}}
{{- if eq (toString .Values.enableProbesServer | lower) "true" -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kubespot.metricsEnabled" -}}
{{- if include "kubespot.isSet" .Values.enablePrometheusServer -}}
{{- if eq (toString .Values.enablePrometheusServer | lower) "true" -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* Checks that stop a release before it installs something that cannot work. */}}
{{- define "kubespot.validate" -}}
{{- if eq (toString .Values.enableSqsTerminationDraining | lower) "true" -}}
{{- fail "enableSqsTerminationDraining: queue-processor (SQS) mode is not part of the kubespot agent chart, which replaces NTH's IMDS mode only; remove it (and queueURL) from your values" -}}
{{- end -}}
{{- if contains "windows" (toString .Values.targetNodeOs | lower) -}}
{{- fail "targetNodeOs: the kubespot agent runs on Linux nodes only; set targetNodeOs: linux" -}}
{{- end -}}
{{- if and .Values.podMonitor.create (not (include "kubespot.metricsEnabled" .)) -}}
{{- fail "podMonitor.create needs enablePrometheusServer: true (there is nothing to scrape otherwise)" -}}
{{- end -}}
{{- if and .Values.webhookTemplateConfigMapName (not .Values.webhookTemplateConfigMapKey) -}}
{{- fail "webhookTemplateConfigMapName needs webhookTemplateConfigMapKey (the key holding the template)" -}}
{{- end -}}
{{- if and (include "kubespot.metricsEnabled" .) (include "kubespot.probesEnabled" .) (eq (toString .Values.prometheusServerPort) (toString .Values.probesServerPort)) -}}
{{- fail "prometheusServerPort and probesServerPort must differ" -}}
{{- end -}}
{{- end -}}
