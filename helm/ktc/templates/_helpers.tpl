{{/*
Names.  Kubernetes names are DNS labels: at most 63 characters.  The StatefulSet's pods
are named <fullname>-<ordinal> and its controller-revision-hash label adds 11 more
characters, so the fullname is cut to 52 to leave room for both.
*/}}
{{- define "ktc.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ktc.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "ktc.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "ktc.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The headless Service that gives every pod a stable DNS name. */}}
{{- define "ktc.headlessServiceName" -}}
{{- printf "%s-headless" (include "ktc.fullname" .) }}
{{- end }}

{{- define "ktc.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ktc.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "ktc.configMapName" -}}
{{- if .Values.configMap.create }}
{{- include "ktc.fullname" . }}
{{- else }}
{{- required "configMap.existingName is required when configMap.create is false" .Values.configMap.existingName }}
{{- end }}
{{- end }}

{{- define "ktc.landingClaimName" -}}
{{- default (printf "%s-landing" (include "ktc.fullname" .)) .Values.persistence.landing.existingClaim }}
{{- end }}

{{- define "ktc.lakeClaimName" -}}
{{- default (printf "%s-lake" (include "ktc.fullname" .)) .Values.ingest.lake.existingClaim }}
{{- end }}

{{/* Labels.  component tells the collector pods from the ingest pod. */}}
{{- define "ktc.labels" -}}
helm.sh/chart: {{ include "ktc.chart" . }}
{{ include "ktc.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: {{ include "ktc.name" . }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "ktc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ktc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "ktc.collectorSelectorLabels" -}}
{{ include "ktc.selectorLabels" . }}
app.kubernetes.io/component: collector
{{- end }}

{{- define "ktc.clientMetricsSelectorLabels" -}}
{{ include "ktc.selectorLabels" . }}
app.kubernetes.io/component: client-metrics
{{- end }}

{{/*
Whether the release runs `ktc client-metrics` (the fleet's /metrics/clients): "true" in
layout scaleOut with prometheus.clients.fleet.enabled (and the metrics port on), else
"false".
*/}}
{{- define "ktc.clientMetricsFleet" -}}
{{- and (eq (include "ktc.scaleOut" .) "true") .Values.ports.metrics.enabled (dig "clients" "fleet" "enabled" true (.Values.prometheus | default dict)) -}}
{{- end }}

{{- define "ktc.ingestSelectorLabels" -}}
{{ include "ktc.selectorLabels" . }}
app.kubernetes.io/component: ingest
{{- end }}

{{- define "ktc.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The ingest's image: the collector image unless ingest.image says otherwise. */}}
{{- define "ktc.ingestImage" -}}
{{- if or .Values.ingest.image.repository .Values.ingest.image.tag }}
{{- $repository := default .Values.image.repository .Values.ingest.image.repository }}
{{- printf "%s:%s" $repository (default (default .Chart.AppVersion .Values.image.tag) .Values.ingest.image.tag) }}
{{- else }}
{{- include "ktc.image" . }}
{{- end }}
{{- end }}

{{/*
The advertised host of a pod: <pod>.<headless service>.<namespace>.svc[.<clusterDomain>].
$(POD_NAME) is expanded by the kubelet from the POD_NAME variable defined before it.
*/}}
{{- define "ktc.advertisedListener" -}}
{{- $host := printf "$(POD_NAME).%s.%s.svc" (include "ktc.headlessServiceName" .) (include "ktc.namespace" .) }}
{{- if .Values.clusterDomain }}
{{- $host = printf "%s.%s" $host .Values.clusterDomain }}
{{- end }}
{{- printf "%s://%s:%d" .Values.listenerName $host (int .Values.ports.kafka.containerPort) }}
{{- end }}

{{/*
Whether the chart turns /metrics/clients on: "true" when prometheus.clients.enabled (the
default), or when a ServiceMonitor scrapes it (serviceMonitor.enabled and
serviceMonitor.clientMetrics.enabled, so it never scrapes a path that is not served);
the config then carries prometheus.clients.enable: true. Else "false", and the config
carries prometheus.clients.enable: false unless the operator's config sets it.
*/}}
{{- define "ktc.clientMetricsServed" -}}
{{- $monitor := .Values.serviceMonitor | default dict }}
{{- $scraped := and (dig "enabled" false $monitor) (dig "clientMetrics" "enabled" false $monitor) }}
{{- or (dig "clients" "enabled" false (.Values.prometheus | default dict)) $scraped -}}
{{- end }}

{{/*
A stable Kafka cluster id derived from namespace and release: 16 bytes (the first 16
hex digits of a SHA-256) in Kafka's URL-safe unpadded base64, the 22-character shape
of `kafka-storage.sh random-uuid`.  Every pod reports the same id, and it survives
upgrades; set config."cluster.id" to choose another.
*/}}
{{- define "ktc.clusterId" -}}
{{- $seed := printf "%s/%s" (include "ktc.namespace" .) (include "ktc.fullname" .) }}
{{- sha256sum $seed | trunc 16 | b64enc | trimSuffix "=" | trimSuffix "=" | replace "+" "-" | replace "/" "_" }}
{{- end }}

{{/*
Gateway mode (gateway.enabled): where the upstream TLS Secret is mounted, and the
per-broker ports.  Upstream node id n is served on brokerPortStart + n - minNodeId (the
gateway's deterministic listeners), so every id of minNodeId .. minNodeId + maxNodes - 1
gets a container port and a port on both Services, named node-<id>.
*/}}
{{- define "ktc.gatewayTlsDir" -}}
/etc/ktc-upstream-tls
{{- end }}

{{/* Where the files of secrets.secretName are mounted (secrets.files). */}}
{{- define "ktc.secretsDir" -}}
/etc/ktc-secrets
{{- end }}

{{/* The per-broker ports as a JSON list of {name, port}; empty unless gateway.enabled. */}}
{{- define "ktc.gatewayNodePorts" -}}
{{- $ports := list }}
{{- if .Values.gateway.enabled }}
{{- $start := int .Values.gateway.brokerPortStart }}
{{- $min := int .Values.gateway.minNodeId }}
{{- range $i := until (int .Values.gateway.maxNodes) }}
{{- $ports = append $ports (dict "name" (printf "node-%d" (add $min $i)) "port" (add $start $i)) }}
{{- end }}
{{- end }}
{{- toJson $ports }}
{{- end }}

{{/* Values the schema cannot relate to each other; a failure names the fix. */}}
{{- define "ktc.gatewayChecks" -}}
{{- if .Values.gateway.enabled }}
{{- $gw := .Values.gateway }}
{{- $_ := required "gateway.upstream.bootstrapServers is required when gateway.enabled is true" $gw.upstream.bootstrapServers }}
{{- $start := int $gw.brokerPortStart }}
{{- $last := sub (add $start (int $gw.maxNodes)) 1 }}
{{- if gt $last 65535 }}
{{- fail (printf "gateway.brokerPortStart + gateway.maxNodes - 1 is %d: the per-broker ports must end at 65535 or below" $last) }}
{{- end }}
{{- $taken := dict "ports.kafka.containerPort" .Values.ports.kafka.containerPort "ports.kafka.servicePort" .Values.ports.kafka.servicePort }}
{{- if .Values.ports.metrics.enabled }}
{{- $_ := set $taken "ports.metrics.containerPort" .Values.ports.metrics.containerPort }}
{{- $_ := set $taken "ports.metrics.servicePort" .Values.ports.metrics.servicePort }}
{{- end }}
{{- range $key, $port := $taken }}
{{- if and (ge (int $port) $start) (le (int $port) $last) }}
{{- fail (printf "%s %d lies in the gateway's per-broker port range %d-%d (gateway.brokerPortStart, gateway.maxNodes); move one of them" $key (int $port) $start $last) }}
{{- end }}
{{- end }}
{{- $tls := $gw.upstream.tls }}
{{- if and $tls.secretName (not (has (upper $gw.upstream.securityProtocol) (list "SSL" "SASL_SSL"))) }}
{{- fail "gateway.upstream.tls.secretName needs gateway.upstream.securityProtocol SSL or SASL_SSL" }}
{{- end }}
{{- if and (or $tls.keystoreKey $tls.keyPasswordKey) (not $tls.secretName) }}
{{- fail "gateway.upstream.tls.keystoreKey and keyPasswordKey name keys of gateway.upstream.tls.secretName: set it" }}
{{- end }}
{{- if and $tls.secretName (not (or $tls.caKey $tls.keystoreKey)) }}
{{- fail "gateway.upstream.tls.secretName is set but neither caKey nor keystoreKey names a key of it" }}
{{- end }}
{{- if and $tls.keyPasswordKey (not $tls.keystoreKey) }}
{{- fail "gateway.upstream.tls.keyPasswordKey is the password of gateway.upstream.tls.keystoreKey's private key: set keystoreKey" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
"true" in the scale-out layout (layout: scaleOut): every node produces what it accepts to
the Kafka topic config."landing.kafka.topic" and keeps nothing durable, so no claim is
mounted on a node and the ingest reads the topic.  "" in the landing-log layout.
*/}}
{{- define "ktc.scaleOut" -}}
{{- if eq .Values.layout "scaleOut" }}true{{ end }}
{{- end }}

{{/*
The landing topic's cluster, as the ingest reaches it: config."landing.kafka.bootstrap.servers",
or in gateway mode (where that key defaults to it) the fronted cluster.
*/}}
{{- define "ktc.landingTopicBootstrap" -}}
{{- index .Values.config "landing.kafka.bootstrap.servers" | default (ternary .Values.gateway.upstream.bootstrapServers "" .Values.gateway.enabled) }}
{{- end }}

{{/*
Fails on a layout the nodes could not run: the scale-out layout needs the topic (and, for
`ktc serve`, its cluster) and no per-pod store; the landing-log layout has no topic.
*/}}
{{- define "ktc.layoutChecks" -}}
{{- $topic := index .Values.config "landing.kafka.topic" }}
{{- if eq (include "ktc.scaleOut" .) "true" }}
{{- if not $topic }}
{{- fail "layout scaleOut needs config.\"landing.kafka.topic\": the topic every node lands on and the ingest reads" }}
{{- end }}
{{- if not (include "ktc.landingTopicBootstrap" .) }}
{{- fail "layout scaleOut with ktc serve needs config.\"landing.kafka.bootstrap.servers\" (in gateway mode it defaults to the fronted cluster)" }}
{{- end }}
{{- if eq .Values.configStore.source "dataVolume" }}
{{- fail "layout scaleOut keeps nothing on a pod: configStore.source dataVolume would keep subscriptions and quotas per pod; keep subscriptions in the cluster (gateway.subscriptions.store cluster, or config.\"subscriptions.store\" kafka) and use configStore.source configMap" }}
{{- end }}
{{- else if $topic }}
{{- fail "config.\"landing.kafka.topic\" replaces the landing log: set layout scaleOut (then no landing claim is mounted and the ingest reads the topic)" }}
{{- end }}
{{- end }}
