/*
 * A metrics reporter that turns on a Kafka 4.4.0 broker's client telemetry (KIP-714) and
 * drops every push: a broker serves GetTelemetrySubscriptions and PushTelemetry only when a
 * reporter in `metric.reporters` provides a ClientTelemetryExporter (KIP-1217). The broker
 * validates and decompresses a push before the exporter sees it, so doing nothing here leaves
 * every answer the broker's own. Compiled by tests/compat/kafka_reference.py.
 */
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;

public final class NoopClientTelemetry implements MetricsReporter, ClientTelemetryExporterProvider {
    @Override public void configure(Map<String, ?> configs) { }
    @Override public void init(List<KafkaMetric> metrics) { }
    @Override public void metricChange(KafkaMetric metric) { }
    @Override public void metricRemoval(KafkaMetric metric) { }
    @Override public void close() { }

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return (ClientTelemetryContext context, ClientTelemetryPayload payload) -> { };
    }
}
