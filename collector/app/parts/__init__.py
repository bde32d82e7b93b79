"""The parts a node is composed of, one job each; ``collector.app.node.Node`` wires them
and starts them in order (docs/architecture.md, "One node, two modes").

| part | its job |
|---|---|
| ``tasks.BackgroundTasks`` | the node's tasks: started by name, periodic work on the clock, ended at shutdown |
| ``connections.Connections`` | every open Kafka connection: ids, the handler of a new one, the host each connection reports to, the drain at shutdown |
| ``listeners.Listeners`` | the listeners: planned from the config, bound (TLS on SSL and SASL_SSL, connection quotas), accepting, advertised, closed |
| ``authentication.Authentication`` | SASL: SCRAM credentials, OAUTHBEARER's keys and validator, the gate in front of a SASL listener's connections |
| ``landing.Landing`` | where accepted pushes go (the landing log or topic), what answers wait for, its readiness, the OTLP forwarder |
| ``watchers.ConfigWatchers`` | one watcher per durable config store, and SIGHUP's reload of them all |
| ``cluster_subscriptions.ClusterSubscriptionReads`` | the subscriptions a Kafka cluster keeps (made when the mode's settings say so), read now and every refresh, and their series |
| ``node_metrics`` | the node's own Prometheus series (connection limits, authentication) |
| ``data_dir`` | the data directory: the cluster id kept in it, and where the node keeps each kind of state |

A part imports nothing of the node, its modes or the CLI (an import-linter contract).
"""
