// The Java Admin (kafka-clients 4.4.0) managing SCRAM credentials on a collector: over the
// PLAINTEXT listener (--bootstrap) alterUserScramCredentials creates alice (SCRAM-SHA-512)
// and bob (SCRAM-SHA-256), describeUserScramCredentials lists them, Kafka's errors come back
// for too few iterations and for deleting what does not exist; then alice logs in with
// SCRAM-SHA-512 over the SASL_PLAINTEXT listener (--sasl-bootstrap) with the new password,
// and once with a wrong one. Prints one "KTC <step> <outcome>" line per step for
// tests/integration/test_java_scram_admin.py.
//
// Run: java -cp "kafka-clients-4.4.0.jar:..." ScramAdminCheck.java --bootstrap H:P \
//        --sasl-bootstrap H:P --password PW

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;

import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;

public class ScramAdminCheck {
    static void step(String name, Callable<Object> action) {
        try {
            Object result = action.call();
            System.out.println("KTC " + name + " ok" + (result == null ? "" : " " + result));
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            System.out.println("KTC " + name + " error " + cause.getClass().getName() + ": " + cause.getMessage());
        } catch (Exception e) {
            System.out.println("KTC " + name + " error " + e.getClass().getName() + ": " + e.getMessage());
        }
        System.out.flush();
    }

    static Admin admin(String bootstrap, Map<String, String> extra) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("request.timeout.ms", "15000");
        props.put("default.api.timeout.ms", "20000");
        props.putAll(extra);
        return Admin.create(props);
    }

    static Map<String, String> sasl(String user, String password) {
        return Map.of(
            "security.protocol", "SASL_PLAINTEXT",
            "sasl.mechanism", "SCRAM-SHA-512",
            "sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required"
                + " username=\"" + user + "\" password=\"" + password + "\";");
    }

    static String describe(Admin admin, List<String> users) throws Exception {
        Map<String, UserScramCredentialsDescription> found = users.isEmpty()
            ? admin.describeUserScramCredentials().all().get()
            : admin.describeUserScramCredentials(users).all().get();
        Map<String, String> sorted = new TreeMap<>();
        for (var entry : found.entrySet()) {
            StringBuilder infos = new StringBuilder();
            for (ScramCredentialInfo info : entry.getValue().credentialInfos()) {
                infos.append(info.mechanism()).append('/').append(info.iterations()).append(';');
            }
            sorted.put(entry.getKey(), infos.toString());
        }
        return sorted.toString();
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new java.util.HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) opts.put(args[i], args[i + 1]);
        String password = opts.get("--password");
        try (Admin admin = admin(opts.get("--bootstrap"), Map.of())) {
            step("alter", () -> {
                admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialUpsertion("alice",
                        new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password),
                    new UserScramCredentialUpsertion("bob",
                        new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password)
                )).all().get();
                return null;
            });
            step("describe-all", () -> describe(admin, List.of()));
            step("describe-alice", () -> describe(admin, List.of("alice")));
            // all() leaves out users without credentials; description(user) fails for them.
            step("describe-unknown-all", () -> describe(admin, List.of("nobody")));
            step("describe-unknown", () -> admin.describeUserScramCredentials(List.of("nobody"))
                .description("nobody").get());
            step("alter-few-iterations", () -> {
                admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion("carol",
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1024), password))).all().get();
                return null;
            });
            step("delete-unknown", () -> {
                admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion("bob",
                    ScramMechanism.SCRAM_SHA_512))).all().get();
                return null;
            });
            step("delete-bob", () -> {
                admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion("bob",
                    ScramMechanism.SCRAM_SHA_256))).all().get();
                return describe(admin, List.of());
            });
        }
        try (Admin alice = admin(opts.get("--sasl-bootstrap"), sasl("alice", password))) {
            step("sasl-login", () -> describe(alice, List.of("alice")));
        }
        try (Admin wrong = admin(opts.get("--sasl-bootstrap"), sasl("alice", password + "-wrong"))) {
            step("sasl-wrong-password", () -> describe(wrong, List.of("alice")));
        }
        System.out.println("KTC done ok");
    }
}
