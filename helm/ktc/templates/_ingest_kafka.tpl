{{/*
Layout scaleOut: how the ingest reaches the landing topic's cluster, with the security
settings the nodes land with, as a JSON object:

  args         `--kafka-property KEY=VALUE` pairs (the Java client's names)
  env          environment entries of the ingest container the values refer to
  secrets      true: mount secrets.files at the same path as on the nodes
  upstreamTls  true: mount gateway.upstream.tls.secretName as on the nodes

Where the settings come from, as for the nodes (collector/app/landing_topic.py): with
config."landing.kafka.bootstrap.servers", config."landing.kafka.security.protocol",
".sasl.*" and ".ssl.*"; without it (gateway mode), the fronted cluster's:
gateway.upstream.securityProtocol, gateway.upstream.tls and config."gateway.upstream.sasl.*".

A password never lands on the ingest's command line: the property says ${env:NAME} and
`ktc ingest` reads the variable.  NAME is the password's own reference when config holds
${env:NAME} (the variable then comes from secrets.env, or extraEnvs), else the key's
KTC_ override when extraEnvs sets it (KTC_LANDING_KAFKA_SASL_PASSWORD), else a variable
of the ingest holding the value config holds.  Values the nodes could not use together
fail the render in one line.
*/}}
{{- define "ktc.ingestKafkaSecurity" -}}
{{- $cfg := .Values.config | default dict }}
{{- $out := dict "args" (list) "env" (dict) "secrets" false "upstreamTls" false }}
{{- $s := dict }}
{{- if index $cfg "landing.kafka.bootstrap.servers" }}
{{- $_ := set $s "prefix" "landing.kafka." }}
{{- $_ := set $s "protocol" (index $cfg "landing.kafka.security.protocol" | default "PLAINTEXT" | upper) }}
{{- $_ := set $s "truststore" (index $cfg "landing.kafka.ssl.truststore.location" | default "") }}
{{- $_ := set $s "keystore" (index $cfg "landing.kafka.ssl.keystore.location" | default "") }}
{{- $_ := set $s "checkHost" true }}
{{- if hasKey $cfg "landing.kafka.ssl.endpoint.identification.algorithm" }}
{{- $_ := set $s "checkHost" (ne (index $cfg "landing.kafka.ssl.endpoint.identification.algorithm") "") }}
{{- end }}
{{- else }}
{{- $tls := .Values.gateway.upstream.tls }}
{{- $_ := set $s "prefix" "gateway.upstream." }}
{{- $_ := set $s "protocol" (upper .Values.gateway.upstream.securityProtocol) }}
{{- $_ := set $s "truststore" (ternary (printf "%s/%s" (include "ktc.gatewayTlsDir" .) $tls.caKey) "" (and (not (empty $tls.secretName)) (not (empty $tls.caKey)))) }}
{{- $_ := set $s "keystore" (ternary (printf "%s/%s" (include "ktc.gatewayTlsDir" .) $tls.keystoreKey) "" (and (not (empty $tls.secretName)) (not (empty $tls.keystoreKey)))) }}
{{- $_ := set $s "checkHost" $tls.endpointIdentification }}
{{- $_ := set $out "upstreamTls" (not (empty $tls.secretName)) }}
{{- end }}
{{- $p := $s.prefix }}
{{- $protocol := $s.protocol }}
{{- if not (has $protocol (list "PLAINTEXT" "SSL" "SASL_PLAINTEXT" "SASL_SSL")) }}
{{- fail (printf "%ssecurity.protocol %s: one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL" $p $protocol) }}
{{- end }}
{{- $sasl := hasPrefix "SASL_" $protocol }}
{{- $ssl := hasSuffix "SSL" $protocol }}
{{- $mechanism := index $cfg (printf "%ssasl.mechanism" $p) | default "" }}
{{- $username := include "ktc.ingestSecretRef" (dict "root" . "key" (printf "%ssasl.username" $p) "inline" true) | fromJson }}
{{- $password := include "ktc.ingestSecretRef" (dict "root" . "key" (printf "%ssasl.password" $p)) | fromJson }}
{{- if ne $protocol "PLAINTEXT" }}
{{- $_ := set $out "args" (append $out.args (printf "security.protocol=%s" $protocol)) }}
{{- end }}
{{- if $sasl }}
{{- if not (and $mechanism $username.text $password.text) }}
{{- fail (printf "the ingest reads the landing topic over %s: set config.\"%ssasl.mechanism\", \"%ssasl.username\" and \"%ssasl.password\" (the nodes' login; the password as ${env:NAME} from secrets.env)" $protocol $p $p $p) }}
{{- end }}
{{- $modules := dict "PLAIN" "org.apache.kafka.common.security.plain.PlainLoginModule" "SCRAM-SHA-256" "org.apache.kafka.common.security.scram.ScramLoginModule" "SCRAM-SHA-512" "org.apache.kafka.common.security.scram.ScramLoginModule" }}
{{- if not (hasKey $modules $mechanism) }}
{{- fail (printf "config.\"%ssasl.mechanism\" %s: one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" $p $mechanism) }}
{{- end }}
{{- if regexMatch "[\"\\\\]" $username.text }}
{{- fail (printf "config.\"%ssasl.username\" holds a quote or a backslash: the ingest's JAAS line cannot carry it" $p) }}
{{- end }}
{{- $jaas := printf "sasl.jaas.config=%s required username=\"%s\" password=\"%s\";" (get $modules $mechanism) $username.text $password.text }}
{{- $_ := set $out "args" (concat $out.args (list (printf "sasl.mechanism=%s" $mechanism) $jaas)) }}
{{- range $ref := list $username $password }}
{{- with $ref.env }}
{{- $_ := set $out.env .name . }}
{{- end }}
{{- end }}
{{- else if or $mechanism $username.text $password.text }}
{{- fail (printf "config.\"%ssasl.*\" is a login for a SASL listener, but %ssecurity.protocol is %s" $p $p $protocol) }}
{{- end }}
{{- $keyPassword := dict }}
{{- if eq $p "landing.kafka." }}
{{- $keyPassword = include "ktc.ingestSecretRef" (dict "root" . "key" "landing.kafka.ssl.key.password") | fromJson }}
{{- else if and .Values.gateway.upstream.tls.secretName .Values.gateway.upstream.tls.keyPasswordKey }}
{{- $keyPassword = dict "text" "${env:KTC_GATEWAY_UPSTREAM_SSL_KEY_PASSWORD}" "env" (dict "name" "KTC_GATEWAY_UPSTREAM_SSL_KEY_PASSWORD" "valueFrom" (dict "secretKeyRef" (dict "name" .Values.gateway.upstream.tls.secretName "key" .Values.gateway.upstream.tls.keyPasswordKey))) }}
{{- end }}
{{- if $ssl }}
{{- range $kind := list "truststore" "keystore" }}
{{- $path := get $s $kind }}
{{- if $path }}
{{- $secretsDir := printf "%s/" (include "ktc.secretsDir" $) }}
{{- if hasPrefix $secretsDir $path }}
{{- if not (has (trimPrefix $secretsDir $path) ($.Values.secrets.files | default list)) }}
{{- fail (printf "config.\"%sssl.%s.location\" %s is not one of secrets.files: the ingest mounts only those" $p $kind $path) }}
{{- end }}
{{- $_ := set $out "secrets" true }}
{{- end }}
{{- $_ := set $out "args" (concat $out.args (list (printf "ssl.%s.type=PEM" $kind) (printf "ssl.%s.location=%s" $kind $path))) }}
{{- end }}
{{- end }}
{{- if $keyPassword.text }}
{{- if not $s.keystore }}
{{- fail (printf "config.\"%sssl.key.password\" is the password of the keystore's private key: set \"%sssl.keystore.location\"" $p $p) }}
{{- end }}
{{- $_ := set $out "args" (append $out.args (printf "ssl.key.password=%s" $keyPassword.text)) }}
{{- with $keyPassword.env }}
{{- $_ := set $out.env .name . }}
{{- end }}
{{- end }}
{{- if not $s.checkHost }}
{{- $_ := set $out "args" (append $out.args "ssl.endpoint.identification.algorithm=") }}
{{- end }}
{{- else if or $s.truststore $s.keystore $keyPassword.text }}
{{- fail (printf "config.\"%sssl.*\" is TLS material, but %ssecurity.protocol is %s (SSL or SASL_SSL use it)" $p $p $protocol) }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/*
One value of config `key` as the ingest's property refers to it: {"text": what the
property holds, "env": the container's environment entry it needs, if any}; {} when the
nodes get no such value.  "inline": a value that is no reference is written out (a user
name); otherwise (a password) it is handed over in a variable.
*/}}
{{- define "ktc.ingestSecretRef" -}}
{{- $root := .root }}
{{- $override := printf "KTC_%s" (.key | upper | replace "." "_") }}
{{- $value := index ($root.Values.config | default dict) .key | default "" | toString }}
{{- $entries := dict }}
{{- range $root.Values.extraEnvs | default list }}
{{- $_ := set $entries .name . }}
{{- end }}
{{- $ingestNames := list }}
{{- range $root.Values.ingest.extraEnvs | default list }}
{{- $ingestNames = append $ingestNames .name }}
{{- end }}
{{- $name := "" }}
{{- if hasKey $entries $override }}
{{- $name = $override }}
{{- else if regexMatch "^\\$\\{env::?[A-Za-z_][A-Za-z0-9_]*\\}$" $value }}
{{- $name = regexReplaceAll "^\\$\\{env::?([A-Za-z_][A-Za-z0-9_]*)\\}$" $value "${1}" }}
{{- else if contains "${" $value }}
{{- fail (printf "config.\"%s\": the ingest takes a whole ${env:NAME} reference here, not one inside a longer value" .key) }}
{{- end }}
{{- if $name }}
{{- $ref := dict "text" (printf "${env:%s}" $name) }}
{{- if has $name $ingestNames }}
{{- /* the ingest's own extraEnvs set it */}}
{{- else if hasKey ($root.Values.secrets.env | default dict) $name }}
{{- $_ := set $ref "env" (dict "name" $name "valueFrom" (dict "secretKeyRef" (dict "name" $root.Values.secrets.secretName "key" (get $root.Values.secrets.env $name)))) }}
{{- else if hasKey $entries $name }}
{{- $_ := set $ref "env" (get $entries $name) }}
{{- else }}
{{- fail (printf "config.\"%s\" is ${env:%s}, but %s is in neither secrets.env nor extraEnvs: the ingest needs it too" .key $name $name) }}
{{- end }}
{{- toJson $ref }}
{{- else if and $value .inline }}
{{- toJson (dict "text" $value) }}
{{- else if $value }}
{{- $env := printf "KTC_INGEST_%s" (.key | upper | replace "." "_") }}
{{- toJson (dict "text" (printf "${env:%s}" $env) "env" (dict "name" $env "value" $value)) }}
{{- else }}
{{- toJson dict }}
{{- end }}
{{- end }}
