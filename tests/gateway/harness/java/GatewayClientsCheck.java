// The gateway tests' Java client run (kafka-clients 4.4.0): against one bootstrap address,
// Admin creates a topic and describes the cluster, an idempotent producer (acks=all) sends
// distinct keys, a transactional producer commits one transaction, a consumer group reads
// everything (read_committed) and commits its offsets. Telemetry stays on (the default
// enable.metrics.push=true). Prints ONE line, "KTC-RESULT {json}", and exits 0 when every
// count is right, 1 otherwise (2 on a usage error).
//
// Arguments (--name value):
//   --bootstrap HOST:PORT[,...]   required
//   --topic NAME                  required
//   --records N                   idempotent-producer records (10000)
//   --txn-records N               records in the committed transaction (100)
//   --partitions N                (6)
//   --replication-factor N        (0: min(3, brokers in describeCluster))
//   --group ID                    (<topic>-group)
//   --group-protocol classic|consumer   (classic)
//   --instance-id-timeout-ms N    clientInstanceId(Duration) wait (10000; 0 skips the call)
//   --timeout-ms N                budget for each phase (120000)
//   --sasl-username U --sasl-password P [--sasl-mechanism SCRAM-SHA-512|SCRAM-SHA-256|PLAIN]
//   --prop key=value              client config for every client, over this runner's (repeatable)
//   --allow-existing-topic true   reuse the topic if it exists (false)

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class GatewayClientsCheck {
    private static final Map<String, Object> result = new LinkedHashMap<>();
    private static final List<String> errors = new ArrayList<>();
    // --prop settings: applied last to every client, over this runner's own choices.
    private static final Properties overrides = new Properties();

    public static void main(String[] argv) {
        Map<String, String> opts = new HashMap<>();
        List<String> props = new ArrayList<>();
        for (int i = 0; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                System.err.println("usage: GatewayClientsCheck --bootstrap HOST:PORT --topic NAME [--name value]...");
                System.exit(2);
            }
            String name = argv[i].substring(2);
            if (name.equals("prop")) props.add(argv[i + 1]); else opts.put(name, argv[i + 1]);
        }
        if (!opts.containsKey("bootstrap") || !opts.containsKey("topic")) {
            System.err.println("--bootstrap and --topic are required");
            System.exit(2);
        }
        long started = System.nanoTime();
        boolean ok;
        try {
            ok = run(opts, props);
        } catch (Throwable error) {
            errors.add("fatal: " + describe(error));
            ok = false;
        }
        result.put("elapsed_ms", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started));
        result.put("errors", errors);
        result.put("ok", ok && errors.isEmpty());
        System.out.println("KTC-RESULT " + toJson(result));
        System.out.flush();
        System.exit(ok && errors.isEmpty() ? 0 : 1);
    }

    private static boolean run(Map<String, String> opts, List<String> extraProps) throws Exception {
        String topic = opts.get("topic");
        int records = Integer.parseInt(opts.getOrDefault("records", "10000"));
        int txnRecords = Integer.parseInt(opts.getOrDefault("txn-records", "100"));
        int partitions = Integer.parseInt(opts.getOrDefault("partitions", "6"));
        int replication = Integer.parseInt(opts.getOrDefault("replication-factor", "0"));
        String group = opts.getOrDefault("group", topic + "-group");
        long idTimeoutMs = Long.parseLong(opts.getOrDefault("instance-id-timeout-ms", "10000"));
        long timeoutMs = Long.parseLong(opts.getOrDefault("timeout-ms", "120000"));
        boolean allowExisting = Boolean.parseBoolean(opts.getOrDefault("allow-existing-topic", "false"));

        Properties common = new Properties();
        common.put("bootstrap.servers", opts.get("bootstrap"));
        if (opts.containsKey("sasl-username")) {
            String mechanism = opts.getOrDefault("sasl-mechanism", "SCRAM-SHA-512");
            String module = mechanism.equals("PLAIN")
                ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                : "org.apache.kafka.common.security.scram.ScramLoginModule";
            common.put("security.protocol", "SASL_PLAINTEXT");
            common.put("sasl.mechanism", mechanism);
            common.put("sasl.jaas.config", module + " required username=\"" + opts.get("sasl-username")
                + "\" password=\"" + opts.getOrDefault("sasl-password", "") + "\";");
        }
        for (String prop : extraProps) {
            int eq = prop.indexOf('=');
            overrides.put(prop.substring(0, eq), prop.substring(eq + 1));
        }
        result.put("topic", topic);
        result.put("group", group);

        // ---- Admin: describeCluster, create the topic, wait for its leaders.
        Properties adminProps = copy(common);
        adminProps.put("client.id", "ktc-java-admin");
        try (Admin admin = Admin.create(withOverrides(adminProps))) {
            DescribeClusterResult cluster = admin.describeCluster();
            Collection<Node> nodes = cluster.nodes().get(timeoutMs, TimeUnit.MILLISECONDS);
            Map<String, String> nodeMap = new TreeMap<>();
            for (Node node : nodes) nodeMap.put(String.valueOf(node.id()), node.host() + ":" + node.port());
            result.put("cluster_id", cluster.clusterId().get(timeoutMs, TimeUnit.MILLISECONDS));
            Node controller = cluster.controller().get(timeoutMs, TimeUnit.MILLISECONDS);
            result.put("controller", controller == null || controller.isEmpty() ? null : controller.id());
            result.put("nodes", nodeMap);
            if (replication <= 0) replication = Math.min(3, nodes.size());
            result.put("replication_factor", replication);
            result.put("partitions", partitions);
            try {
                admin.createTopics(List.of(new NewTopic(topic, partitions, (short) replication)))
                    .all().get(timeoutMs, TimeUnit.MILLISECONDS);
                result.put("topic_created", true);
            } catch (ExecutionException error) {
                if (!(error.getCause() instanceof TopicExistsException) || !allowExisting) throw error;
                result.put("topic_created", false);
            }
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (true) {
                try {
                    TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames()
                        .get(timeoutMs, TimeUnit.MILLISECONDS).get(topic);
                    boolean leaders = description.partitions().size() == partitions;
                    List<Map<String, Object>> layout = new ArrayList<>();
                    for (TopicPartitionInfo info : description.partitions()) {
                        leaders &= info.leader() != null && !info.leader().isEmpty();
                        Map<String, Object> entry = new LinkedHashMap<>();
                        entry.put("partition", info.partition());
                        entry.put("leader", info.leader() == null ? null : info.leader().id());
                        entry.put("replicas", info.replicas().stream().map(Node::id).toList());
                        entry.put("isr", info.isr().stream().map(Node::id).toList());
                        layout.add(entry);
                    }
                    if (leaders) {
                        result.put("topic_layout", layout);
                        break;
                    }
                } catch (ExecutionException error) {
                    if (System.currentTimeMillis() > deadline) throw error;
                }
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("no leaders for " + topic);
                Thread.sleep(100);  // polling the cluster for the topic's leaders, with a deadline
            }
        }

        // ---- Idempotent producer, acks=all, distinct keys.
        Properties producerProps = copy(common);
        producerProps.put("client.id", "ktc-java-producer");
        producerProps.put("acks", "all");
        producerProps.put("enable.idempotence", "true");
        producerProps.put("linger.ms", "5");
        producerProps.put("delivery.timeout.ms", String.valueOf(Math.max(timeoutMs, 30000)));
        producerProps.put("key.serializer", StringSerializer.class.getName());
        producerProps.put("value.serializer", StringSerializer.class.getName());
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        AtomicReference<String> firstFailure = new AtomicReference<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(withOverrides(producerProps))) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, "k-" + i, "value-" + i), (metadata, error) -> {
                    if (error == null) acked.incrementAndGet();
                    else {
                        failed.incrementAndGet();
                        firstFailure.compareAndSet(null, describe(error));
                    }
                });
            }
            producer.flush();
            Map<String, String> leaders = new TreeMap<>();
            for (PartitionInfo info : producer.partitionsFor(topic)) {
                Node leader = info.leader();
                leaders.put(String.valueOf(info.partition()), leader == null ? null : leader.host() + ":" + leader.port());
            }
            result.put("producer_partition_leaders", leaders);
            result.put("producer_instance_id", instanceId(() -> producer.clientInstanceId(Duration.ofMillis(idTimeoutMs)), idTimeoutMs));
            result.put("producer_node_ids", nodeIds(producer.metrics(), "producer-node-metrics"));
            result.put("producer_client_id", clientId(producer.metrics()));
            result.put("producer_metrics", pick(producer.metrics(), "producer-metrics",
                "record-send-total", "record-error-total", "connection-creation-total", "connection-count"));
        }
        result.put("produced", records);
        result.put("acked", acked.get());
        result.put("produce_errors", failed.get());
        if (firstFailure.get() != null) errors.add("produce: " + firstFailure.get());

        // ---- One committed transaction.
        Properties txnProps = copy(producerProps);
        txnProps.put("client.id", "ktc-java-txn-producer");
        txnProps.put("transactional.id", topic + "-txn");
        long txnAcked = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(withOverrides(txnProps))) {
            producer.initTransactions();
            producer.beginTransaction();
            List<java.util.concurrent.Future<org.apache.kafka.clients.producer.RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < txnRecords; i++) sent.add(producer.send(new ProducerRecord<>(topic, "t-" + i, "txn-" + i)));
            producer.commitTransaction();
            for (var future : sent) {
                future.get(timeoutMs, TimeUnit.MILLISECONDS);
                txnAcked++;
            }
            result.put("txn_producer_node_ids", nodeIds(producer.metrics(), "producer-node-metrics"));
        }
        result.put("txn_records", txnRecords);
        result.put("txn_committed", txnAcked);

        // ---- Consumer group, read_committed, commitSync.
        Properties consumerProps = copy(common);
        consumerProps.put("client.id", "ktc-java-consumer");
        consumerProps.put("group.id", group);
        consumerProps.put("group.protocol", opts.getOrDefault("group-protocol", "classic"));
        consumerProps.put("auto.offset.reset", "earliest");
        consumerProps.put("enable.auto.commit", "false");
        consumerProps.put("isolation.level", "read_committed");
        consumerProps.put("key.deserializer", StringDeserializer.class.getName());
        consumerProps.put("value.deserializer", StringDeserializer.class.getName());
        long expected = acked.get() + txnAcked;
        Set<String> keys = new HashSet<>();
        long consumed = 0;
        Map<String, Long> perPartition = new TreeMap<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(withOverrides(consumerProps))) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (keys.size() < expected && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> record : batch) {
                    consumed++;
                    keys.add(record.key());
                    perPartition.merge(String.valueOf(record.partition()), 1L, Long::sum);
                }
            }
            Set<TopicPartition> all = new HashSet<>();
            for (int p = 0; p < partitions; p++) all.add(new TopicPartition(topic, p));
            // Every record seen; read on past the transaction markers so the committed
            // positions are the partitions' ends.
            Map<TopicPartition, Long> ends = consumer.endOffsets(all, Duration.ofMillis(timeoutMs));
            while (System.currentTimeMillis() < deadline && !atEnd(consumer, ends)) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    consumed++;
                    keys.add(record.key());
                    perPartition.merge(String.valueOf(record.partition()), 1L, Long::sum);
                }
            }
            consumer.commitSync(Duration.ofMillis(timeoutMs));
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(all, Duration.ofMillis(timeoutMs));
            Map<String, Long> committedOffsets = new TreeMap<>();
            long committedTotal = 0;
            for (var entry : committed.entrySet()) {
                if (entry.getValue() == null) continue;
                committedOffsets.put(String.valueOf(entry.getKey().partition()), entry.getValue().offset());
                committedTotal += entry.getValue().offset();
            }
            result.put("committed_offsets", committedOffsets);
            result.put("committed_total", committedTotal);
            Map<String, Long> endOffsets = new TreeMap<>();
            long endTotal = 0;
            for (var entry : consumer.endOffsets(all, Duration.ofMillis(timeoutMs)).entrySet()) {
                endOffsets.put(String.valueOf(entry.getKey().partition()), entry.getValue());
                endTotal += entry.getValue();
            }
            result.put("end_offsets", endOffsets);
            result.put("end_total", endTotal);
            result.put("consumer_instance_id", instanceId(() -> consumer.clientInstanceId(Duration.ofMillis(idTimeoutMs)), idTimeoutMs));
            result.put("consumer_node_ids", nodeIds(consumer.metrics(), "consumer-node-metrics"));
            result.put("consumer_client_id", clientId(consumer.metrics()));
            result.put("consumer_group_metadata_member", consumer.groupMetadata().memberId());
        }
        result.put("expected", expected);
        result.put("consumed", consumed);
        result.put("consumed_distinct_keys", keys.size());
        result.put("consumed_per_partition", perPartition);

        boolean ok = acked.get() == records && failed.get() == 0 && txnAcked == txnRecords
            && keys.size() == expected && consumed == expected;
        long committedTotal = (Long) result.get("committed_total");
        ok &= committedTotal == (Long) result.get("end_total");
        if (!ok) errors.add("counts: acked=" + acked.get() + "/" + records + " txn=" + txnAcked + "/" + txnRecords
            + " consumed=" + consumed + " distinct=" + keys.size() + "/" + expected
            + " committed=" + committedTotal + " end=" + result.get("end_total"));
        return ok;
    }

    private static boolean atEnd(KafkaConsumer<?, ?> consumer, Map<TopicPartition, Long> ends) {
        if (!consumer.assignment().containsAll(ends.keySet())) return false;
        for (var entry : ends.entrySet()) {
            if (consumer.position(entry.getKey()) < entry.getValue()) return false;
        }
        return true;
    }

    interface IdCall { Uuid call() throws Exception; }

    private static Object instanceId(IdCall call, long timeoutMs) {
        if (timeoutMs <= 0) return null;
        try {
            Uuid id = call.call();
            return id == null ? null : id.toString();
        } catch (Exception error) {
            return "error: " + describe(error);
        }
    }

    private static List<String> nodeIds(Map<MetricName, ? extends Metric> metrics, String group) {
        Set<String> ids = new TreeSet<>();
        for (MetricName name : metrics.keySet()) {
            if (!name.group().equals(group)) continue;
            String node = name.tags().get("node-id");
            if (node != null) ids.add(node);  // "node-<id>"; bootstrap entries are negative ids
        }
        return new ArrayList<>(ids);
    }

    private static String clientId(Map<MetricName, ? extends Metric> metrics) {
        for (MetricName name : metrics.keySet()) {
            String id = name.tags().get("client-id");
            if (id != null) return id;
        }
        return null;
    }

    private static Map<String, Object> pick(Map<MetricName, ? extends Metric> metrics, String group, String... names) {
        Map<String, Object> picked = new TreeMap<>();
        Set<String> wanted = Set.of(names);
        for (var entry : metrics.entrySet()) {
            MetricName name = entry.getKey();
            if (name.group().equals(group) && wanted.contains(name.name())) picked.put(name.name(), entry.getValue().metricValue());
        }
        return picked;
    }

    private static Properties withOverrides(Properties props) {
        Properties merged = copy(props);
        merged.putAll(overrides);
        return merged;
    }

    private static Properties copy(Properties source) {
        Properties target = new Properties();
        target.putAll(source);
        return target;
    }

    private static String describe(Throwable error) {
        Throwable cause = error;
        while ((cause instanceof ExecutionException || cause.getClass().getName().endsWith("CompletionException"))
            && cause.getCause() != null) cause = cause.getCause();
        return cause.getClass().getSimpleName() + ": " + cause.getMessage();
    }

    private static String toJson(Object value) {
        if (value == null) return "null";
        if (value instanceof Boolean || value instanceof Integer || value instanceof Long) return value.toString();
        if (value instanceof Double || value instanceof Float) {
            double number = ((Number) value).doubleValue();
            return Double.isFinite(number) ? String.valueOf(number) : "null";
        }
        if (value instanceof Map<?, ?> map) {
            StringBuilder out = new StringBuilder("{");
            boolean first = true;
            for (var entry : map.entrySet()) {
                if (!first) out.append(',');
                first = false;
                out.append(toJson(String.valueOf(entry.getKey()))).append(':').append(toJson(entry.getValue()));
            }
            return out.append('}').toString();
        }
        if (value instanceof Collection<?> items) {
            StringBuilder out = new StringBuilder("[");
            boolean first = true;
            for (Object item : items) {
                if (!first) out.append(',');
                first = false;
                out.append(toJson(item));
            }
            return out.append(']').toString();
        }
        String text = value.toString();
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
                    else out.append(c);
                }
            }
        }
        return out.append('"').toString();
    }
}
