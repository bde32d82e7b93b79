{{/*
The collector's config.yaml: the operator's `config` plus the keys the chart owns.

Owned by the chart (derived, so the Services, probes and volumes always agree with
what the process binds):
  listeners      <listenerName>://0.0.0.0:<ports.kafka.containerPort>
  http.listener  0.0.0.0:<ports.metrics.containerPort>, or null when ports.metrics is off
  data.dir       dataDir
Per pod, through the environment (the file is shared by all pods, the environment is
not; KTC_<KEY> overrides the file, see collector/app/config.py):
  node.id               KTC_NODE_ID from the apps.kubernetes.io/pod-index label
  advertised.listeners  KTC_ADVERTISED_LISTENERS = the pod's own DNS name
Defaults the operator may override:
  cluster.id                ktc.clusterId (the same on every pod, stable across upgrades)
  shutdown.timeout.seconds  terminationGracePeriodSeconds - 5: the drain must end before
                            the kubelet's SIGKILL (30 s grace -> 25 s drain).
Owned by the chart when prometheus.clients.enabled (the default) or a ServiceMonitor scrapes
/metrics/clients (ktc.clientMetricsServed), so the monitor never scrapes a path that is not
served; otherwise a default the operator may override:
  prometheus.clients.enable  true (owned), or false (a default)
Added when secrets.env is set (its variables are referred to as ${env:NAME}):
  config.providers          env
Added when ingest.enabled in layout landingLog (in layout scaleOut the ingest reads the
landing topic, whose retention is the cluster's):
  landing.retention_required_consumers  + lakehouse-ingest (the ingest's consumer name)
Owned by the chart when gateway.enabled (from gateway.*; see ktc.gatewayNodePorts):
  gateway.upstream.bootstrap.servers     gateway.upstream.bootstrapServers
  gateway.broker.port.start              gateway.brokerPortStart
  gateway.min.node.id, gateway.max.nodes gateway.minNodeId, gateway.maxNodes
  gateway.advertised.host                gateway.advertisedHost, when set (otherwise the
                                         gateway sends clients to the pod's own
                                         advertised name)
  gateway.upstream.security.protocol     gateway.upstream.securityProtocol
  gateway.subscriptions.store            gateway.subscriptions.store
  gateway.subscriptions.refresh.ms       gateway.subscriptions.refreshMs
  gateway.upstream.ssl.*                 the files of gateway.upstream.tls.secretName at
                                         their mount path; the key password comes through
                                         the environment (KTC_GATEWAY_UPSTREAM_SSL_KEY_PASSWORD)
*/}}
{{- define "ktc.configData" -}}
{{- $owned := dict
  "listeners" (printf "%s://0.0.0.0:%d" .Values.listenerName (int .Values.ports.kafka.containerPort))
  "data.dir" .Values.dataDir
  "http.listener" nil
-}}
{{- if .Values.ports.metrics.enabled }}
{{- $_ := set $owned "http.listener" (printf "0.0.0.0:%d" (int .Values.ports.metrics.containerPort)) }}
{{- end }}
{{- if eq (include "ktc.clientMetricsServed" .) "true" }}
{{- $_ := set $owned "prometheus.clients.enable" true }}
{{- end }}
{{- if .Values.gateway.enabled }}
{{- $gw := .Values.gateway }}
{{- $_ := set $owned "gateway.upstream.bootstrap.servers" $gw.upstream.bootstrapServers }}
{{- $_ := set $owned "gateway.broker.port.start" (int $gw.brokerPortStart) }}
{{- $_ := set $owned "gateway.min.node.id" (int $gw.minNodeId) }}
{{- $_ := set $owned "gateway.max.nodes" (int $gw.maxNodes) }}
{{- $_ := set $owned "gateway.upstream.security.protocol" (upper $gw.upstream.securityProtocol) }}
{{- $_ := set $owned "gateway.subscriptions.store" $gw.subscriptions.store }}
{{- $_ := set $owned "gateway.subscriptions.refresh.ms" (int $gw.subscriptions.refreshMs) }}
{{- with $gw.advertisedHost }}
{{- $_ := set $owned "gateway.advertised.host" . }}
{{- end }}
{{- if has (upper $gw.upstream.securityProtocol) (list "SSL" "SASL_SSL") }}
{{- $tls := $gw.upstream.tls }}
{{- $_ := set $owned "gateway.upstream.ssl.endpoint.identification.algorithm" (ternary "https" "" $tls.endpointIdentification) }}
{{- if and $tls.secretName $tls.caKey }}
{{- $_ := set $owned "gateway.upstream.ssl.truststore.location" (printf "%s/%s" (include "ktc.gatewayTlsDir" .) $tls.caKey) }}
{{- end }}
{{- if and $tls.secretName $tls.keystoreKey }}
{{- $_ := set $owned "gateway.upstream.ssl.keystore.location" (printf "%s/%s" (include "ktc.gatewayTlsDir" .) $tls.keystoreKey) }}
{{- end }}
{{- end }}
{{- end }}
{{- $defaults := dict
  "cluster.id" (include "ktc.clusterId" .)
  "shutdown.timeout.seconds" (sub (int .Values.terminationGracePeriodSeconds) 5)
-}}
{{- if ne (include "ktc.clientMetricsServed" .) "true" }}
{{- $_ := set $defaults "prometheus.clients.enable" false }}
{{- end }}
{{- if .Values.secrets.env }}
{{- $_ := set $defaults "config.providers" "env" }}
{{- end }}
{{- $merged := merge (deepCopy $owned) (deepCopy (.Values.config | default dict)) $defaults }}
{{- /* Kafka's rule: every listener name needs a security protocol in the map. */}}
{{- $protocolMap := index $merged "listener.security.protocol.map" | default "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL" }}
{{- $mapped := list }}
{{- range $entry := splitList "," $protocolMap }}
{{- $mapped = append $mapped (splitList ":" $entry | first | trim | upper) }}
{{- end }}
{{- if not (has (upper .Values.listenerName) $mapped) }}
{{- fail (printf "listenerName %s has no entry in config.\"listener.security.protocol.map\" (%s); add %s:PLAINTEXT" .Values.listenerName $protocolMap .Values.listenerName) }}
{{- end }}
{{- if and .Values.ingest.enabled (ne (include "ktc.scaleOut" .) "true") }}
{{- /* The ingest is a consumer the collector cannot know about: until it has committed
       a position, landing retention must keep every segment for it. */}}
{{- $landing := index $merged "landing" | default dict }}
{{- $required := get $landing "retention_required_consumers" | default list }}
{{- if not (has "lakehouse-ingest" $required) }}
{{- $required = append $required "lakehouse-ingest" }}
{{- end }}
{{- $_ := set $landing "retention_required_consumers" $required }}
{{- $_ := set $merged "landing" $landing }}
{{- end }}
{{- if le (float64 (index $merged "shutdown.timeout.seconds")) 0.0 }}
{{- fail "terminationGracePeriodSeconds must be above 5: the collector needs a positive shutdown.timeout.seconds below it" }}
{{- end }}
{{- if ge (float64 (index $merged "shutdown.timeout.seconds")) (float64 .Values.terminationGracePeriodSeconds) }}
{{- fail (printf "config.\"shutdown.timeout.seconds\" (%v) must be below terminationGracePeriodSeconds (%v), or the kubelet kills the collector mid-drain" (index $merged "shutdown.timeout.seconds") .Values.terminationGracePeriodSeconds) }}
{{- end }}
{{- toYaml $merged }}
{{- end }}

{{/*
client-metrics.yaml and quotas.yaml in the config store's format (subscriptions/store.py):
one top-level key each, `subscriptions:` and `quotas:`.  Hot-reloaded by the collector.
*/}}
{{- define "ktc.subscriptionsData" -}}
{{- toYaml (dict "subscriptions" (.Values.subscriptions | default dict)) }}
{{- end }}

{{- define "ktc.quotasData" -}}
{{- toYaml (dict "quotas" (.Values.quotas | default dict)) }}
{{- end }}
