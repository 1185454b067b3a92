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

{{/*
NTH's own default image (its values.yaml as `helm show values` prints it: this repository, tag "")
means "the project's image", so it gives kubespot's; any other NTH image stops the render
("kubespot.validateImage").
*/}}
{{- define "kubespot.nthDefaultImage" -}}
{{- if and (eq (toString .Values.image.repository) "public.ecr.aws/aws-ec2/aws-node-termination-handler") (not (include "kubespot.isSet" .Values.image.tag)) -}}true{{- end -}}
{{- end -}}

{{/* The image .github/workflows/release.yml builds (tests check the two agree). */}}
{{- define "kubespot.defaultImageRepository" -}}ghcr.io/kubespot/kubespot{{- end -}}

{{- define "kubespot.image" -}}
{{- $repository := .Values.image.repository | default (include "kubespot.defaultImageRepository" .) -}}
{{- if include "kubespot.nthDefaultImage" . -}}{{- $repository = include "kubespot.defaultImageRepository" . -}}{{- end -}}
{{- printf "%s:%s" $repository (.Values.image.tag | default .Chart.AppVersion | toString) -}}
{{- end -}}

{{- define "kubespot.validateImage" -}}
{{- $repository := toString .Values.image.repository -}}
{{- $tag := toString (.Values.image.tag | default "") -}}
{{- if and (not (include "kubespot.nthDefaultImage" .)) (contains "aws-node-termination-handler" $repository) -}}
{{- fail (printf "image.repository: %q is aws-node-termination-handler's image, which cannot run `kubespot agent`; remove image.repository (kubespot's image is %s) or point it at your mirror of kubespot's image" $repository (include "kubespot.defaultImageRepository" .)) -}}
{{- end -}}
{{- if regexMatch "^v[0-9]" $tag -}}
{{- fail (printf "image.tag: %q is an aws-node-termination-handler-style tag; kubespot's images are tagged with the chart's appVersion without the v prefix (%s): remove image.tag or set a kubespot version" $tag .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/*
The name NTH's chart gives its objects and ServiceAccount (its "fullname" with its chart name): an
NTH queue-mode install's IAM role trusts system:serviceaccount:<ns>:<this>.
*/}}
{{- define "kubespot.nthFullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default "aws-node-termination-handler" .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Extra env vars, a list of EnvVar objects or a map name: value (NTH's older form), as a YAML list. */}}
{{- define "kubespot.envList" -}}
{{- if kindIs "map" . }}
{{- range $name, $value := . }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- else if . }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The probes server's port and path: NTH's probes.httpGet when set, else probesServerPort / Endpoint. */}}
{{- define "kubespot.probePort" -}}
{{- $port := dig "httpGet" "port" "" (.Values.probes | default dict) -}}
{{- include "kubespot.envText" (ternary $port .Values.probesServerPort (ne (toString $port) "")) -}}
{{- end -}}
{{- define "kubespot.probePath" -}}
{{- $path := dig "httpGet" "path" "" (.Values.probes | default dict) -}}
{{- ternary $path .Values.probesServerEndpoint (ne (toString $path) "") -}}
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
headers and proxy (secretKeyRef), template file (a ConfigMap), uptime file (a hostPath mount), the
notification targets and HTTP calls files (Secrets, "kubespot.outgoingEnv"), the load-balancer wait's
switch and kinds ("kubespot.loadBalancerWaitEnv"), and the probes / metrics servers (always
rendered, see the DaemonSet).
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
loggerLevels: KUBESPOT_OBSERVABILITY_LOGGER_LEVELS
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
kubeApiWatchIdleTimeout: KUBESPOT_KUBE_WATCH_IDLE_TIMEOUT
voluntaryTimeout: KUBESPOT_DRAIN_VOLUNTARY_TIMEOUT
probesStaleAfter: KUBESPOT_OBSERVABILITY_PROBES_STALE_AFTER
webhookTimeout: KUBESPOT_WEBHOOK_TIMEOUT
webhookAttempts: KUBESPOT_WEBHOOK_ATTEMPTS
webhookFormat: KUBESPOT_WEBHOOK_FORMAT
webhookStages: KUBESPOT_WEBHOOK_STAGES
webhookKinds: KUBESPOT_WEBHOOK_KINDS
notifyQueueSize: KUBESPOT_NOTIFY_QUEUE_SIZE
loadBalancerWaitMaxDelay: KUBESPOT_LOADBALANCER_WAIT_MAX_DELAY
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
{{- if and (include "kubespot.controllerEnabled" .) (not (include "kubespot.isSet" .Values.queueURL)) (not (include "kubespot.responseActions" .)) -}}
{{- if include "kubespot.queueMode" . -}}
{{- fail "enableSqsTerminationDraining: true runs the queue-processor (kubespot controller), which needs queueURL: set it to the SQS queue's URL (`kubespot aws bootstrap` prints it)" -}}
{{- else -}}
{{- fail "controller.enabled: the queue-processor (kubespot controller) needs queueURL: set it to the SQS queue's URL (`kubespot aws bootstrap` prints it), or turn on a response action (controller.loadBalancer.enabled, controller.isolation.enabled, controller.publish.snsTopicArn or eventBus) or controller.provisioning.enabled to run it without a queue" -}}
{{- end -}}
{{- end -}}
{{- if not (or (include "kubespot.daemonsetEnabled" .) (include "kubespot.controllerEnabled" .)) -}}
{{- fail "daemonset.enabled: false and the controller is off: the release would run nothing; set controller.enabled: true (with queueURL) or keep the DaemonSet" -}}
{{- end -}}
{{- if and (include "kubespot.controllerEnabled" .) .Values.serviceMonitor.create (not (include "kubespot.metricsEnabled" .)) -}}
{{- fail "serviceMonitor.create needs enablePrometheusServer: true (there is nothing to scrape otherwise)" -}}
{{- end -}}
{{- if and (include "kubespot.daemonsetEnabled" .) (include "kubespot.controllerEnabled" .) .Values.serviceAccount.create (include "kubespot.controllerServiceAccountCreate" .) (eq (include "kubespot.serviceAccountName" .) (include "kubespot.controllerServiceAccountName" .)) -}}
{{- fail "controller.serviceAccount.name: the agent's service account has the same name and both are created; give the controller its own (or set controller.serviceAccount.create: false to share it)" -}}
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
{{- if and (include "kubespot.metricsEnabled" .) (or (include "kubespot.probesEnabled" .) (include "kubespot.controllerEnabled" .)) (eq (toString .Values.prometheusServerPort) (include "kubespot.probePort" .)) -}}
{{- fail "prometheusServerPort and the probes port (probes.httpGet.port or probesServerPort) must differ" -}}
{{- end -}}
{{- include "kubespot.validateImage" . -}}
{{- if and (eq (toString .Values.rbac.pspEnabled | lower) "true") (semverCompare "<1.25-0" .Capabilities.KubeVersion.GitVersion) -}}
{{- fail (printf "rbac.pspEnabled: kubespot ships no PodSecurityPolicy, and this cluster (%s) still has the PSP API; set rbac.pspEnabled: false and grant the agent a policy yourself (hostNetwork, hostPath /proc/uptime when procUptimeFile is set); with helm template, pass the cluster's --kube-version" .Capabilities.KubeVersion.GitVersion) -}}
{{- end -}}
{{- with .Values.sqsMsgVisibilityTimeoutSec -}}
{{- if and (include "kubespot.controllerEnabled" $) (lt (float64 .) 3.0) -}}
{{- fail (printf "sqsMsgVisibilityTimeoutSec: %v is below kubespot's minimum of 3 seconds (the controller renews it while a node is handled, so a short timeout buys nothing)" .) -}}
{{- end -}}
{{- end -}}
{{- if and (eq (toString .Values.nodeRestrictionPolicy.enabled | lower) "true") (not (include "kubespot.daemonsetEnabled" .)) -}}
{{- fail "nodeRestrictionPolicy.enabled: it limits the agent DaemonSet's service account, and the DaemonSet is off" -}}
{{- end -}}
{{- end -}}

{{/* pods delete is needed unless pdbDeadlineAction is keep (the agent's default is delete). */}}
{{- define "kubespot.podDeleteNeeded" -}}
{{- if ne (toString .Values.pdbDeadlineAction | lower) "keep" -}}true{{- end -}}
{{- end -}}

{{/* --- Which workloads run ---------------------------------------------------------------- */}}

{{/* NTH's queue-processor switch: enableSqsTerminationDraining: true. */}}
{{- define "kubespot.queueMode" -}}
{{- if eq (toString .Values.enableSqsTerminationDraining | lower) "true" -}}true{{- end -}}
{{- end -}}

{{/* The controller Deployment: controller.enabled, or NTH's queue-processor switch. */}}
{{- define "kubespot.controllerEnabled" -}}
{{- if or (eq (toString .Values.controller.enabled | lower) "true") (include "kubespot.queueMode" .) -}}true{{- end -}}
{{- end -}}

{{/*
The agent DaemonSet: daemonset.enabled when set; unset, on unless NTH's queue-processor switch is on
(NTH runs either its DaemonSet, IMDS mode, or its Deployment, queue mode, never both).
*/}}
{{- define "kubespot.daemonsetEnabled" -}}
{{- if include "kubespot.isSet" .Values.daemonset.enabled -}}
{{- if eq (toString .Values.daemonset.enabled | lower) "true" -}}true{{- end -}}
{{- else if not (include "kubespot.queueMode" .) -}}true{{- end -}}
{{- end -}}

{{/* --- The controller's names and labels ------------------------------------------------------ */}}

{{- define "kubespot.controllerFullname" -}}
{{- printf "%s-controller" (include "kubespot.fullname" . | trunc 52 | trimSuffix "-") -}}
{{- end -}}

{{/* A name of its own, so the agent's selectors (DaemonSet, PodMonitor) never match its pods. */}}
{{- define "kubespot.controllerSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-controller" (include "kubespot.name" . | trunc 52 | trimSuffix "-") }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kubespot.controllerLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kubespot.controllerSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: controller
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.customLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The controller's service account. Unset controller.serviceAccount.create / .name follow NTH's
top-level serviceAccount when the DaemonSet is off (a queue-mode NTH values file: its IAM role's
trust policy names that account); else the controller gets <fullname>-controller.
*/}}
{{- define "kubespot.controllerServiceAccountCreate" -}}
{{- $create := .Values.controller.serviceAccount.create -}}
{{- if not (include "kubespot.isSet" $create) -}}
{{- if include "kubespot.daemonsetEnabled" . -}}{{- $create = true -}}{{- else -}}{{- $create = .Values.serviceAccount.create -}}{{- end -}}
{{- end -}}
{{- if eq (toString $create | lower) "true" -}}true{{- end -}}
{{- end -}}

{{- define "kubespot.controllerServiceAccountName" -}}
{{- $name := .Values.controller.serviceAccount.name -}}
{{- if and (not $name) (not (include "kubespot.daemonsetEnabled" .)) -}}
{{- $name = .Values.serviceAccount.name -}}
{{- end -}}
{{- if include "kubespot.controllerServiceAccountCreate" . -}}
{{- if $name -}}
{{- $name -}}
{{- else if and (include "kubespot.queueMode" .) (not (include "kubespot.daemonsetEnabled" .)) -}}
{{- /* NTH's queue mode: the account NTH's chart would have created (its IRSA trust policy names it). */ -}}
{{- include "kubespot.nthFullname" . -}}
{{- else -}}
{{- include "kubespot.controllerFullname" . -}}
{{- end -}}
{{- else -}}
{{- default "default" $name -}}
{{- end -}}
{{- end -}}

{{/* IRSA and other annotations: NTH's serviceAccount.annotations, then controller.serviceAccount.annotations. */}}
{{- define "kubespot.controllerServiceAccountAnnotations" -}}
{{- $a := mergeOverwrite (dict) (deepCopy (.Values.serviceAccount.annotations | default dict)) (deepCopy (.Values.controller.serviceAccount.annotations | default dict)) -}}
{{- with $a }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/* Replicas: NTH's replicas when set, else controller.replicas. */}}
{{- define "kubespot.controllerReplicas" -}}
{{- if include "kubespot.isSet" .Values.replicas -}}
{{- int64 .Values.replicas -}}
{{- else -}}
{{- int64 .Values.controller.replicas -}}
{{- end -}}
{{- end -}}

{{/*
Settings of the agent's (top-level) values the controller does not take: IMDS only, or replaced by
controller.* (the API rate limits of a cluster-wide controller are not a node agent's). The uptime
file is never rendered for the controller (it reads no IMDS).
*/}}
{{/*
Switches NTH reads in IMDS mode only ("Only used in IMDS mode", its values.yaml): its queue processor
acts on every spot, scheduled, ASG and rebalance message, and cordons and drains on a rebalance
(pkg/interruptionevent/draincordon/handler.go). In NTH's queue mode the controller is given exactly
that, whatever these say.
*/}}
{{- define "kubespot.nthImdsOnlySwitches" -}}
- enableSpotInterruptionDraining
- enableScheduledEventDraining
- enableRebalanceMonitoring
- enableRebalanceDraining
- enableASGLifecycleDraining
{{- end -}}

{{- define "kubespot.agentOnlySettings" -}}
- instanceMetadataURL
- metadataTries
- pollInterval
- requireIMDSv2
- imdsTokenTTL
- imdsTokenRefreshMargin
- imdsRequestTimeout
- imdsRetryBackoffBase
- imdsRetryBackoffCap
- kubeApiQps
- kubeApiBurst
{{- end -}}

{{/*
Controller chart value -> env var. Top level: NTH's queue-mode names (and its older ones, after the
newer name in the list, used when the newer one is unset). controller.*: kubespot's own.
*/}}
{{- define "kubespot.queueEnvNames" -}}
- [queueURL, KUBESPOT_QUEUE_URL]
- [awsRegion, KUBESPOT_AWS_REGION]
- [awsEndpoint, KUBESPOT_AWS_ENDPOINT_URL]
- [checkTagBeforeDraining, KUBESPOT_QUEUE_CHECK_TAG_BEFORE_DRAINING]
- [managedTag, KUBESPOT_QUEUE_MANAGED_TAG]
- [useProviderId, KUBESPOT_QUEUE_USE_PROVIDER_ID]
- [deleteSqsMsgIfNodeNotFound, KUBESPOT_QUEUE_DELETE_IF_NODE_NOT_FOUND]
- [completeLifecycleActionDelaySeconds, KUBESPOT_QUEUE_COMPLETE_LIFECYCLE_ACTION_DELAY]
- [heartbeatInterval, KUBESPOT_QUEUE_HEARTBEAT_INTERVAL]
- [heartbeatUntil, KUBESPOT_QUEUE_HEARTBEAT_UNTIL]
- [sqsMsgVisibilityTimeoutSec, KUBESPOT_QUEUE_VISIBILITY_TIMEOUT]
{{- end -}}

{{- define "kubespot.controllerEnvNames" -}}
kubeApiQps: KUBESPOT_KUBE_API_QPS
kubeApiBurst: KUBESPOT_KUBE_API_BURST
queueReceivers: KUBESPOT_QUEUE_RECEIVERS
maxInFlight: KUBESPOT_QUEUE_MAX_IN_FLIGHT
queueWaitTime: KUBESPOT_QUEUE_WAIT_TIME
malformedAction: KUBESPOT_QUEUE_MALFORMED_ACTION
foreignMaxReceives: KUBESPOT_QUEUE_FOREIGN_MAX_RECEIVES
heldMargin: KUBESPOT_QUEUE_HELD_MARGIN
describeCacheTTL: KUBESPOT_QUEUE_DESCRIBE_CACHE_TTL
awsMaxConcurrency: KUBESPOT_AWS_MAX_CONCURRENCY
awsMaxAttempts: KUBESPOT_AWS_MAX_ATTEMPTS
leaderElection.enabled: KUBESPOT_LEADER_ELECTION_ENABLED
leaderElection.namespace: KUBESPOT_LEADER_ELECTION_NAMESPACE
leaderElection.leaseDuration: KUBESPOT_LEADER_ELECTION_LEASE_DURATION
leaderElection.renewDeadline: KUBESPOT_LEADER_ELECTION_RENEW_DEADLINE
leaderElection.retryPeriod: KUBESPOT_LEADER_ELECTION_RETRY_PERIOD
nodeCleanup.enabled: KUBESPOT_NODE_CLEANUP_ENABLED
nodeCleanup.interval: KUBESPOT_NODE_CLEANUP_INTERVAL
nodeCleanup.notReadyFor: KUBESPOT_NODE_CLEANUP_NOT_READY_FOR
loadBalancer.enabled: KUBESPOT_LOADBALANCER_ENABLED
loadBalancer.kinds: KUBESPOT_LOADBALANCER_KINDS
loadBalancer.targetGroupTagKey: KUBESPOT_LOADBALANCER_TARGET_GROUP_TAG_KEY
loadBalancer.targetGroupTagValue: KUBESPOT_LOADBALANCER_TARGET_GROUP_TAG_VALUE
loadBalancer.classic: KUBESPOT_LOADBALANCER_CLASSIC
loadBalancer.settle: KUBESPOT_LOADBALANCER_SETTLE
loadBalancer.maxDelay: KUBESPOT_LOADBALANCER_MAX_DELAY
loadBalancer.indexTTL: KUBESPOT_LOADBALANCER_INDEX_TTL
isolation.enabled: KUBESPOT_ISOLATION_ENABLED
isolation.quarantineGroup: KUBESPOT_ISOLATION_QUARANTINE_GROUP
isolation.kinds: KUBESPOT_ISOLATION_KINDS
publish.snsTopicArn: KUBESPOT_PUBLISH_SNS_TOPIC_ARN
publish.eventBus: KUBESPOT_PUBLISH_EVENT_BUS
publish.kinds: KUBESPOT_PUBLISH_KINDS
publish.source: KUBESPOT_PUBLISH_SOURCE
publish.detailType: KUBESPOT_PUBLISH_DETAIL_TYPE
pricing.refreshInterval: KUBESPOT_PRICING_REFRESH_INTERVAL
pricing.usePricingApi: KUBESPOT_PRICING_USE_PRICING_API
pricing.ondemandDiscounts: KUBESPOT_PRICING_ONDEMAND_DISCOUNTS
provisioning.enabled: KUBESPOT_PROVISIONING_ENABLED
provisioning.nodeclassResyncInterval: KUBESPOT_PROVISIONING_NODECLASS_RESYNC_INTERVAL
provisioning.retryBase: KUBESPOT_PROVISIONING_RETRY_BASE
provisioning.retryCap: KUBESPOT_PROVISIONING_RETRY_CAP
provisioning.stuckAfter: KUBESPOT_PROVISIONING_STUCK_AFTER
provisioning.kubernetesVersion: KUBESPOT_PROVISIONING_KUBERNETES_VERSION
provisioning.statusConfigMap: KUBESPOT_PROVISIONING_STATUS_CONFIGMAP
launch.clusterName: KUBESPOT_CLUSTER_NAME
launch.clusterEndpoint: KUBESPOT_CLUSTER_ENDPOINT
launch.clusterCaBundle: KUBESPOT_CLUSTER_CA_BUNDLE
launch.clusterCidr: KUBESPOT_CLUSTER_CIDR
launch.batchIdleDuration: KUBESPOT_LAUNCH_BATCH_IDLE_DURATION
launch.batchMaxDuration: KUBESPOT_LAUNCH_BATCH_MAX_DURATION
launch.unavailableOfferingsTtl: KUBESPOT_LAUNCH_UNAVAILABLE_OFFERINGS_TTL
launch.spotRiskHalfLife: KUBESPOT_LAUNCH_SPOT_RISK_HALF_LIFE
launch.spotRiskWeight: KUBESPOT_LAUNCH_SPOT_RISK_WEIGHT
launch.learnFromInterruptions: KUBESPOT_LAUNCH_LEARN_FROM_INTERRUPTIONS
launch.launchTimeout: KUBESPOT_LAUNCH_LAUNCH_TIMEOUT
launch.registrationTimeout: KUBESPOT_LAUNCH_REGISTRATION_TIMEOUT
launch.garbageCollectionInterval: KUBESPOT_LAUNCH_GARBAGE_COLLECTION_INTERVAL
launch.garbageCollectionMinAge: KUBESPOT_LAUNCH_GARBAGE_COLLECTION_MIN_AGE
{{- end -}}

{{/* A controller value by its dotted path under .Values.controller ("leaderElection.enabled"). */}}
{{- define "kubespot.controllerValue" -}}
{{- $value := .root.Values.controller -}}
{{- range (splitList "." .path) -}}
{{- if kindIs "map" $value -}}{{- $value = index $value . -}}{{- else -}}{{- $value = "" -}}{{- end -}}
{{- end -}}
{{- if include "kubespot.isSet" $value }}{{ include "kubespot.envText" $value }}{{ end -}}
{{- end -}}

{{/* Whether an AWS response action (or the provisioning controller) is on: then the controller
     may run without a queue. */}}
{{- define "kubespot.responseActions" -}}
{{- $on := list (include "kubespot.controllerValue" (dict "root" . "path" "loadBalancer.enabled")) (include "kubespot.controllerValue" (dict "root" . "path" "isolation.enabled")) (include "kubespot.controllerValue" (dict "root" . "path" "provisioning.enabled")) -}}
{{- if or (has "true" $on) (include "kubespot.controllerValue" (dict "root" . "path" "publish.snsTopicArn")) (include "kubespot.controllerValue" (dict "root" . "path" "publish.eventBus")) -}}true{{- end -}}
{{- end -}}

{{/* Leader election is on unless controller.leaderElection.enabled is false. */}}
{{- define "kubespot.leaderElection" -}}
{{- if ne (include "kubespot.controllerValue" (dict "root" . "path" "leaderElection.enabled")) "false" -}}true{{- end -}}
{{- end -}}

{{/* The Lease's name and namespace (the chart always names the Lease, so the Role can too). */}}
{{- define "kubespot.leaseName" -}}
{{- default (include "kubespot.controllerFullname" .) (include "kubespot.controllerValue" (dict "root" . "path" "leaderElection.leaseName")) -}}
{{- end -}}
{{- define "kubespot.leaseNamespace" -}}
{{- default .Release.Namespace (include "kubespot.controllerValue" (dict "root" . "path" "leaderElection.namespace")) -}}
{{- end -}}

{{/* --- Pieces both workloads render ------------------------------------------------------ */}}

{{/* Container securityContext with NTH's runAsUserID / runAsGroupID mapped. */}}
{{- define "kubespot.containerSecurityContext" -}}
{{- $securityContext := omit (deepCopy (.Values.securityContext | default dict)) "runAsUserID" "runAsGroupID" -}}
{{- with .Values.securityContext -}}
{{- if hasKey . "runAsUserID" }}{{ $_ := set $securityContext "runAsUser" .runAsUserID }}{{ end -}}
{{- if hasKey . "runAsGroupID" }}{{ $_ := set $securityContext "runAsGroup" .runAsGroupID }}{{ end -}}
{{- end -}}
{{- with $securityContext }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{- define "kubespot.pullSecrets" -}}
{{- range (concat (.Values.imagePullSecrets | default list) (.Values.image.pullSecrets | default list)) }}
{{- if kindIs "map" . }}
- {{ toYaml . | nindent 2 | trim }}
{{- else }}
- name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The webhook's env entries (the URL as a file, headers and proxy from the chart's Secret). */}}
{{- define "kubespot.webhookEnv" -}}
{{- if include "kubespot.webhookSecretName" . }}
- name: KUBESPOT_WEBHOOK_URL_FILE
  value: "/etc/kubespot/webhook-url/url"
{{- end }}
{{- if include "kubespot.isSet" .Values.webhookHeaders }}
- name: KUBESPOT_WEBHOOK_HEADERS
  valueFrom:
    secretKeyRef:
      name: {{ include "kubespot.chartSecretName" . }}
      key: webhookheaders
{{- end }}
{{- if include "kubespot.isSet" .Values.webhookProxy }}
- name: KUBESPOT_WEBHOOK_PROXY
  valueFrom:
    secretKeyRef:
      name: {{ include "kubespot.chartSecretName" . }}
      key: webhookproxy
{{- end }}
{{- if and .Values.webhookTemplateConfigMapName .Values.webhookTemplateConfigMapKey }}
- name: KUBESPOT_WEBHOOK_TEMPLATE_FILE
  value: {{ printf "/etc/kubespot/webhook-template/%s" .Values.webhookTemplateConfigMapKey | quote }}
{{- end }}
{{- end -}}

{{- define "kubespot.webhookVolumeMounts" -}}
{{- if include "kubespot.webhookSecretName" . }}
- name: webhook-url
  mountPath: /etc/kubespot/webhook-url
  readOnly: true
{{- end }}
{{- if and .Values.webhookTemplateConfigMapName .Values.webhookTemplateConfigMapKey }}
- name: webhook-template
  mountPath: /etc/kubespot/webhook-template
  readOnly: true
{{- end }}
{{- end -}}

{{- define "kubespot.webhookVolumes" -}}
{{- with include "kubespot.webhookSecretName" . }}
- name: webhook-url
  secret:
    secretName: {{ . }}
    defaultMode: 0440
    items:
      - key: {{ include "kubespot.webhookSecretKey" $ }}
        path: url
{{- end }}
{{- if and .Values.webhookTemplateConfigMapName .Values.webhookTemplateConfigMapKey }}
- name: webhook-template
  configMap:
    name: {{ .Values.webhookTemplateConfigMapName }}
{{- end }}
{{- end -}}

{{/* --- Notification targets, outgoing HTTP calls, the load-balancer wait (both workloads) --- */}}

{{/*
The targets and calls files, each mounted from an existing Secret (they may hold URLs and header
values inline, which are credentials). No suffix: the content says whether it is JSON or YAML.
*/}}
{{- define "kubespot.outgoingEnv" -}}
{{- if .Values.notifyTargetsSecretName }}
- name: KUBESPOT_NOTIFY_TARGETS_FILE
  value: "/etc/kubespot/notify/targets"
{{- end }}
{{- if .Values.httpCallsSecretName }}
- name: KUBESPOT_HTTP_CALLS_FILE
  value: "/etc/kubespot/http-calls/calls"
{{- end }}
{{- end -}}

{{- define "kubespot.outgoingVolumeMounts" -}}
{{- if .Values.notifyTargetsSecretName }}
- name: notify-targets
  mountPath: /etc/kubespot/notify
  readOnly: true
{{- end }}
{{- if .Values.httpCallsSecretName }}
- name: http-calls
  mountPath: /etc/kubespot/http-calls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "kubespot.outgoingVolumes" -}}
{{- with .Values.notifyTargetsSecretName }}
- name: notify-targets
  secret:
    secretName: {{ . }}
    defaultMode: 0440
    items:
      - key: {{ $.Values.notifyTargetsSecretKey | default "targets" }}
        path: targets
{{- end }}
{{- with .Values.httpCallsSecretName }}
- name: http-calls
  secret:
    secretName: {{ . }}
    defaultMode: 0440
    items:
      - key: {{ $.Values.httpCallsSecretKey | default "calls" }}
        path: calls
{{- end }}
{{- end -}}

{{/*
The drain's wait for load-balancer deregistration: loadBalancerWaitEnabled / loadBalancerWaitKinds
when set. For the agent ("derive": true), unset, it follows the controller of the same release: on,
for controller.loadBalancer.kinds, when the controller deregisters (controller.loadBalancer.enabled),
so that one value switches both. The controller derives the same by itself from its own settings.
*/}}
{{- define "kubespot.loadBalancerWaitEnv" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $lb := "" -}}
{{- if and .derive (include "kubespot.controllerEnabled" $root) (eq (include "kubespot.controllerValue" (dict "root" $root "path" "loadBalancer.enabled")) "true") -}}
{{- $lb = "true" -}}
{{- end -}}
{{- if include "kubespot.isSet" $v.loadBalancerWaitEnabled }}
- name: KUBESPOT_LOADBALANCER_WAIT_ENABLED
  value: {{ include "kubespot.envText" $v.loadBalancerWaitEnabled | quote }}
{{- else if $lb }}
- name: KUBESPOT_LOADBALANCER_WAIT_ENABLED
  value: "true"
{{- end }}
{{- if include "kubespot.isSet" $v.loadBalancerWaitKinds }}
- name: KUBESPOT_LOADBALANCER_WAIT_KINDS
  value: {{ include "kubespot.envText" $v.loadBalancerWaitKinds | quote }}
{{- else if and $lb (not (include "kubespot.isSet" $v.loadBalancerWaitEnabled)) }}
{{- with (include "kubespot.controllerValue" (dict "root" $root "path" "loadBalancer.kinds")) }}
- name: KUBESPOT_LOADBALANCER_WAIT_KINDS
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}
