// A Java producer (kafka-clients 4.4.0) that pushes client telemetry (KIP-714) to a collector
// over SASL_PLAINTEXT with OAUTHBEARER, and keeps pushing until its stdin closes. Its token
// is the signed JWT the test made (environment variable KTC_TEST_JWT), handed to Kafka's
// OAuthBearerLoginModule by TokenHandler below (Kafka's own unsecured login handler only
// makes unsigned tokens). Prints "KTC instance <uuid>" once connected, "KTC done ok" at the
// end, or "KTC error <exception>" when the collector refuses it.
// Used by tests/integration/test_oauthbearer_real_clients.py.
//
// Run: KTC_TEST_JWT=... java -cp "kafka-clients-4.4.0.jar:..." OAuthTelemetryClient.java \
//        --bootstrap H:P --client-id ID

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerTokenCallback;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;

public class OAuthTelemetryClient {
    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) opts.put(args[i], args[i + 1]);
        Properties props = new Properties();
        props.put("bootstrap.servers", opts.get("--bootstrap"));
        props.put("client.id", opts.get("--client-id"));
        props.put("enable.metrics.push", "true");
        props.put("max.block.ms", "20000");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        props.put("security.protocol", "SASL_PLAINTEXT");
        props.put("sasl.mechanism", "OAUTHBEARER");
        props.put("sasl.jaas.config",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;");
        // The class itself, not its name: the source launcher's class loader holds it.
        props.put("sasl.login.callback.handler.class", TokenHandler.class);
        try (Producer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            try {
                // null: no subscription came (a refused token gets no answer here).
                Object instance = producer.clientInstanceId(Duration.ofSeconds(20));
                if (instance == null) throw new IllegalStateException("no client instance id");
                System.out.println("KTC instance " + instance);
                System.out.flush();
            } catch (Exception e) {
                // A refused token: the metadata path reports the authentication error itself.
                Exception reported = e;
                try {
                    producer.partitionsFor("ktc-probe");
                } catch (Exception metadata) {
                    reported = metadata;
                }
                System.out.println("KTC error " + reported);
                System.out.flush();
                return;
            }
            while (System.in.read() != -1) { }
        }
        System.out.println("KTC done ok");
    }

    /** Returns the test's signed JWT to OAuthBearerLoginModule. */
    public static class TokenHandler implements AuthenticateCallbackHandler {
        private static final Pattern EXP = Pattern.compile("\"exp\"\\s*:\\s*(\\d+)");
        private static final Pattern SUB = Pattern.compile("\"sub\"\\s*:\\s*\"([^\"]+)\"");

        @Override
        public void configure(Map<String, ?> configs, String mechanism, List<AppConfigurationEntry> entries) { }

        @Override
        public void handle(Callback[] callbacks) throws UnsupportedCallbackException {
            for (Callback callback : callbacks) {
                if (!(callback instanceof OAuthBearerTokenCallback))
                    throw new UnsupportedCallbackException(callback);
                String jwt = System.getenv("KTC_TEST_JWT");
                String payload = new String(Base64.getUrlDecoder().decode(jwt.split("\\.")[1]),
                    StandardCharsets.UTF_8);
                Matcher exp = EXP.matcher(payload);
                Matcher sub = SUB.matcher(payload);
                exp.find();
                sub.find();
                long lifetimeMs = Long.parseLong(exp.group(1)) * 1000;
                String principal = sub.group(1);
                ((OAuthBearerTokenCallback) callback).token(new OAuthBearerToken() {
                    public String value() { return jwt; }
                    public Set<String> scope() { return Set.of("telemetry"); }
                    public long lifetimeMs() { return lifetimeMs; }
                    public String principalName() { return principal; }
                    public Long startTimeMs() { return null; }
                });
            }
        }

        @Override
        public void close() { }
    }
}
