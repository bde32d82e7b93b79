// A Java producer (kafka-clients 4.4.0) that pushes client telemetry (KIP-714) to a collector
// over SASL, and keeps pushing until its stdin closes. clientInstanceId() makes it fetch its
// subscription at once (a connection, the SASL exchange, GetTelemetrySubscriptions); after
// that the producer's own network thread pushes every interval.ms and, when the server gives
// the session a lifetime (connections.max.reauth.ms), re-authenticates per KIP-368.
// Prints "KTC instance <uuid>" once connected, "KTC done ok" at the end, or "KTC error ...".
// Used by tests/integration/test_sasl_ssl_real_clients.py.
//
// Run: java -cp "kafka-clients-4.4.0.jar:..." SaslTelemetryClient.java --bootstrap H:P \
//        --protocol SASL_SSL --mechanism SCRAM-SHA-512 --user U --password PW \
//        --client-id ID [--truststore ca.pem]

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

public class SaslTelemetryClient {
    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) opts.put(args[i], args[i + 1]);
        String mechanism = opts.get("--mechanism");
        String module = mechanism.equals("PLAIN")
            ? "org.apache.kafka.common.security.plain.PlainLoginModule"
            : "org.apache.kafka.common.security.scram.ScramLoginModule";
        Properties props = new Properties();
        props.put("bootstrap.servers", opts.get("--bootstrap"));
        props.put("client.id", opts.get("--client-id"));
        props.put("enable.metrics.push", "true");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        props.put("security.protocol", opts.get("--protocol"));
        props.put("sasl.mechanism", mechanism);
        props.put("sasl.jaas.config", module + " required username=\"" + opts.get("--user")
            + "\" password=\"" + opts.get("--password") + "\";");
        if (opts.containsKey("--truststore")) {
            props.put("ssl.truststore.type", "PEM");
            props.put("ssl.truststore.location", opts.get("--truststore"));
        }
        try (Producer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            System.out.println("KTC instance " + producer.clientInstanceId(Duration.ofSeconds(30)));
            System.out.flush();
            while (System.in.read() != -1) { }
        } catch (Exception e) {
            System.out.println("KTC error " + e);
            System.out.flush();
            return;
        }
        System.out.println("KTC done ok");
    }
}
