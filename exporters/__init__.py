"""Where accepted pushes go, and how they travel on.

| module | what it is |
|---|---|
| ``exporters.base`` | the ``Exporter`` interface: ``export(context, payload)`` once per accepted push, an ``ExportResult`` back (a failure becomes Kafka's INVALID_RECORD, never an exception in the pipeline) |
| ``exporters.context`` | ``TelemetryContext``: who pushed, on which listener, when, under which subscription (what Kafka hands a ``ClientTelemetryReceiver``) |
| ``exporters.landing`` | the landing log: every accepted push, durable before it is acknowledged (``LandingLog`` is the collector's exporter, ``LandingOptions`` its settings); readers and consumer positions for what follows it |
| ``exporters.kafka_topic`` | the landing destination on a Kafka topic, beside the landing log (``TopicLanding``), and where the forwarder reads it back (``TopicSource``) |
| ``exporters.otlp`` | the OTLP/gRPC forwarder: tails the landing logs, enriches with the client's identity, sends to an OpenTelemetry Collector with retries |
| ``exporters.lakehouse`` | the Spark ingest: landing logs to partitioned lakehouse tables, exactly once; ``ktc sql``, compaction, retention |

Imports nothing of the collector: the collector hands each push to an exporter, the
forwarder and the ingest read what the landing log holds.  Time comes from an injected
``clock.Clock``.  See docs/landing-log.md, docs/otlp-forwarder.md, docs/lakehouse.md.
"""
