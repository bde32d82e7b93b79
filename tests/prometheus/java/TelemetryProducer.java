// A Java producer (kafka-clients 4.4.0) that pushes client telemetry (KIP-714) over
// PLAINTEXT and keeps pushing until its stdin closes; closing it sends the terminating push.
// Prints "KTC instance <uuid>" once it has its subscription, or "KTC error ...".
// With --app-metric N it also registers an application metric for the subscription
// (KIP-1076, Producer.registerMetricForSubscription): a CumulativeSum "orders-sent" in group
// "app-feeder-metrics" tagged region=eu, recorded N times with the value 1.
// Used by tests/prometheus/test_client_metrics_endpoint.py and test_kip1076_app_metrics.py.
//
// Run: java -cp "<kafka-clients and slf4j jars>" TelemetryProducer.java --bootstrap H:P --client-id ID [--app-metric N]

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.Sensor;
import org.apache.kafka.common.metrics.stats.CumulativeSum;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

public class TelemetryProducer {
    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) opts.put(args[i], args[i + 1]);
        Properties props = new Properties();
        props.put("bootstrap.servers", opts.get("--bootstrap"));
        props.put("client.id", opts.get("--client-id"));
        props.put("enable.metrics.push", "true");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        try (Producer<byte[], byte[]> producer = new KafkaProducer<>(props);
             Metrics appMetrics = new Metrics()) {
            if (opts.containsKey("--app-metric")) {
                MetricName name = appMetrics.metricName(
                    "orders-sent", "app-feeder-metrics", "Orders sent", Map.of("region", "eu"));
                Sensor sensor = appMetrics.sensor("orders-sent");
                sensor.add(name, new CumulativeSum());
                producer.registerMetricForSubscription(appMetrics.metric(name));
                for (int i = Integer.parseInt(opts.get("--app-metric")); i > 0; i--) sensor.record(1.0);
            }
            System.out.println("KTC instance " + producer.clientInstanceId(Duration.ofSeconds(30)));
            System.out.flush();
            while (System.in.read() != -1) { }
        } catch (Exception e) {
            System.out.println("KTC error " + e);
            System.out.flush();
        }
    }
}
