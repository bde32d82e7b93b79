// A KIP-932 share consumer (kafka-clients 4.4.0, KafkaShareConsumer) in share group GROUP that
// pushes client telemetry (KIP-714) until its stdin closes, with a producer in the same JVM
// writing a record to TOPIC before each poll (a share group starts at the latest offset by
// default, so records written before it joined are not delivered).  Prints "KTC consumed N"
// once it received its first records, or "KTC error ...".
// Used by tests/gateway/test_share_group_application.py.
//
// Run: java -cp "<kafka-clients 4.4.0 and its dependencies>" TelemetryShareConsumer.java \
//     --bootstrap H:P --group GROUP --topic TOPIC

import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

public class TelemetryShareConsumer {
    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) opts.put(args[i], args[i + 1]);
        String bootstrap = opts.get("--bootstrap");
        String topic = opts.get("--topic");

        Properties consumerProps = new Properties();
        consumerProps.put("bootstrap.servers", bootstrap);
        consumerProps.put("group.id", opts.get("--group"));
        consumerProps.put("client.id", opts.get("--group") + "-share-1");
        consumerProps.put("enable.metrics.push", "true");
        Properties producerProps = new Properties();
        producerProps.put("bootstrap.servers", bootstrap);
        producerProps.put("client.id", opts.get("--group") + "-feeder");
        producerProps.put("linger.ms", "0");

        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) { }
            } catch (Exception ignored) { }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        long consumed = 0;
        try (KafkaProducer<String, String> producer =
                     new KafkaProducer<>(producerProps, new StringSerializer(), new StringSerializer());
             KafkaShareConsumer<String, String> consumer =
                     new KafkaShareConsumer<>(consumerProps, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            long n = 0;
            while (!stop.get()) {
                producer.send(new ProducerRecord<>(topic, "k" + (n % 4), "record " + n++));
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.count() > 0 && consumed == 0) {
                    System.out.println("KTC consumed " + records.count());
                    System.out.flush();
                }
                consumed += records.count();
            }
        } catch (Exception e) {
            System.out.println("KTC error " + e);
            System.out.flush();
            System.exit(1);
        }
    }
}
