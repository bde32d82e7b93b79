// A Kafka Streams application (kafka-streams 4.4.0) at metrics.recording.level=DEBUG that
// pushes client telemetry (KIP-714, with Streams' own metrics: KIP-1076) until its stdin
// closes: a word count (source, flatMapValues, groupBy: a repartition topic, count: a
// RocksDB store and its changelog, to) over an input topic it also fills with records, so
// every task processes and every sensor records.  Prints "KTC running" once the instance
// is RUNNING, or "KTC error ...".  Each line read from stdin is one more input record.
// With --fail-on WORD, the first record holding WORD makes its stream thread throw, and the
// uncaught exception handler replaces the thread (REPLACE_THREAD): Streams counts it in
// failed.stream.threads and the process keeps its thread count; it prints "KTC thread
// failed NAME".
// Used by tests/prometheus/measure_streams_series.py (the default of
// prometheus.clients.max.series.per.instance, docs/prometheus.md),
// tests/gateway/test_streams_application.py and tests/gateway/test_streams_alerts.py.
//
// Run: java -cp "<kafka-streams 4.4.0 and its dependencies>" TelemetryStreams.java \
//     --bootstrap H:P --application-id ID --input TOPIC --output TOPIC --threads N \
//     [--recording-level INFO|DEBUG|TRACE] [--fail-on WORD]

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Produced;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

public class TelemetryStreams {
    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) opts.put(args[i], args[i + 1]);
        String bootstrap = opts.get("--bootstrap");
        String input = opts.get("--input");
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, opts.get("--application-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, opts.getOrDefault("--threads", "1"));
        props.put(StreamsConfig.METRICS_RECORDING_LEVEL_CONFIG,
                opts.getOrDefault("--recording-level", "DEBUG"));
        props.put(StreamsConfig.STATE_DIR_CONFIG,
                Files.createTempDirectory("ktc-streams").toString());
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "1000");
        props.put("enable.metrics.push", "true");

        String failOn = opts.get("--fail-on");
        AtomicBoolean failed = new AtomicBoolean();
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(input)
                .flatMapValues(line -> Arrays.asList(line.toLowerCase().split("\\W+")))
                .peek((key, word) -> {
                    // Once: the replacing thread reprocesses the record (its offset was
                    // not committed) and must not fail again.
                    if (word.equals(failOn) && failed.compareAndSet(false, true)) {
                        throw new IllegalStateException("KTC fails on " + word);
                    }
                })
                .groupBy((key, word) -> word)
                .count()
                .toStream()
                .to(opts.get("--output"), Produced.with(Serdes.String(), Serdes.Long()));

        Properties producerProps = new Properties();
        producerProps.put("bootstrap.servers", bootstrap);
        producerProps.put("key.serializer", StringSerializer.class.getName());
        producerProps.put("value.serializer", StringSerializer.class.getName());
        producerProps.put("enable.metrics.push", "false");  // only the application's clients

        CountDownLatch running = new CountDownLatch(1);
        try (KafkaStreams streams = new KafkaStreams(builder.build(), props);
             KafkaProducer<String, String> feeder = new KafkaProducer<>(producerProps)) {
            streams.setStateListener((now, before) -> {
                if (now == KafkaStreams.State.RUNNING) running.countDown();
            });
            if (failOn != null) {
                streams.setUncaughtExceptionHandler(exception -> {
                    System.out.println("KTC thread failed " + Thread.currentThread().getName());
                    System.out.flush();
                    return StreamThreadExceptionResponse.REPLACE_THREAD;
                });
            }
            streams.start();
            if (!running.await(120, TimeUnit.SECONDS)) {
                System.out.println("KTC error not RUNNING within 120 s: " + streams.state());
                System.out.flush();
                return;
            }
            System.out.println("KTC running");
            System.out.flush();
            // Records to every partition until stdin closes.
            Thread feeding = new Thread(() -> {
                long n = 0;
                try {
                    while (!Thread.currentThread().isInterrupted()) {
                        feeder.send(new ProducerRecord<>(input, "k" + (n % 64),
                                "the quick brown fox " + (n % 997) + " jumps"));
                        if (++n % 200 == 0) {
                            feeder.flush();
                            Thread.sleep(50);
                        }
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            feeding.setDaemon(true);
            feeding.start();
            BufferedReader lines = new BufferedReader(new InputStreamReader(System.in));
            for (String line = lines.readLine(); line != null; line = lines.readLine()) {
                if (!line.isEmpty()) feeder.send(new ProducerRecord<>(input, "stdin", line));
            }
            feeding.interrupt();
        } catch (Exception e) {
            System.out.println("KTC error " + e);
            System.out.flush();
        }
    }
}
