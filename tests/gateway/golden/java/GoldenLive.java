// Golden lines for the responses captured from a real Kafka 4.4.0 cluster (../live/*.bin,
// written by ../capture_live.py): each file is one whole answer as the broker sent it
// (response header and body, no size prefix), named <api key>-v<version>-<case>.bin.
//
// For each file it prints, in the format of responses.txt:
//
//   <api key> <version> live-<case> <upstream body hex> <expected body hex>
//
// "upstream" is the captured body, byte for byte (this program checks that Kafka's classes
// read it to its end and serialize it back to the same bytes); "expected" is the same
// message, parsed by Kafka's classes, with every broker address replaced the way the gateway
// must replace it (node n -> gateway.test:(19000 + n); node id -1 and DescribeCluster's
// controller endpoints untouched), serialized by Kafka's classes.
//
// Run: java -cp 'kafka-clients-4.4.0.jar:slf4j-api.jar' GoldenLive.java > ../live.txt
// (capture_live.py runs it; tests/gateway/test_wire_golden.py re-runs it and compares.)

import org.apache.kafka.common.message.DescribeClusterResponseData;
import org.apache.kafka.common.message.DescribeQuorumResponseData;
import org.apache.kafka.common.message.FindCoordinatorResponseData;
import org.apache.kafka.common.message.MetadataResponseData;
import org.apache.kafka.common.message.ResponseHeaderData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.MessageUtil;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

public class GoldenLive {
    static String host(int node) {
        return "gateway.test";
    }

    static int port(int node) {
        return 19000 + node;
    }

    static byte[] bytes(ApiMessage message, short version) {
        ByteBuffer buffer = MessageUtil.toByteBufferAccessor(message, version).buffer();
        byte[] out = new byte[buffer.remaining()];
        buffer.get(out);
        return out;
    }

    static String hex(byte[] data) {
        StringBuilder out = new StringBuilder();
        for (byte b : data) out.append(String.format("%02x", b));
        return out.toString();
    }

    static ApiMessage parse(ApiKeys api, ByteBuffer body, short v) {
        ByteBufferAccessor in = new ByteBufferAccessor(body);
        switch (api) {
            case METADATA: return new MetadataResponseData(in, v);
            case FIND_COORDINATOR: return new FindCoordinatorResponseData(in, v);
            case DESCRIBE_CLUSTER: return new DescribeClusterResponseData(in, v);
            case DESCRIBE_QUORUM: return new DescribeQuorumResponseData(in, v);
            default: throw new IllegalArgumentException("not an address-bearing capture: " + api);
        }
    }

    static void rewrite(ApiMessage message, short v) {
        if (message instanceof MetadataResponseData data) {
            for (MetadataResponseData.MetadataResponseBroker b : data.brokers()) {
                b.setHost(host(b.nodeId())).setPort(port(b.nodeId()));
            }
        } else if (message instanceof FindCoordinatorResponseData data) {
            if (v <= 3) {
                if (data.nodeId() != -1) data.setHost(host(data.nodeId())).setPort(port(data.nodeId()));
            } else {
                for (FindCoordinatorResponseData.Coordinator c : data.coordinators()) {
                    if (c.nodeId() != -1) c.setHost(host(c.nodeId())).setPort(port(c.nodeId()));
                }
            }
        } else if (message instanceof DescribeClusterResponseData data) {
            if (v == 0 || data.endpointType() == 1) {
                for (DescribeClusterResponseData.DescribeClusterBroker b : data.brokers()) {
                    b.setHost(host(b.brokerId())).setPort(port(b.brokerId()));
                }
            }
        } else if (message instanceof DescribeQuorumResponseData data) {
            for (DescribeQuorumResponseData.Node node : data.nodes()) {
                for (DescribeQuorumResponseData.Listener l : node.listeners()) {
                    l.setHost(host(node.nodeId())).setPort(port(node.nodeId()));
                }
            }
        }
    }

    static Path liveDirectory() {
        // Single-file source mode: the program's own path is the last launcher argument.
        List<String> args = Arrays.asList(ProcessHandle.current().info().arguments().orElse(new String[0]));
        for (String arg : args) {
            if (arg.endsWith("GoldenLive.java")) {
                return Paths.get(arg).toAbsolutePath().getParent().getParent().resolve("live");
            }
        }
        return Paths.get("tests/gateway/golden/live");
    }

    static int[] key(Path file) {
        String[] parts = file.getFileName().toString().split("-", 3);
        return new int[] {Integer.parseInt(parts[0]), Integer.parseInt(parts[1].substring(1))};
    }

    public static void main(String[] args) throws IOException {
        List<Path> files = new ArrayList<>();
        try (Stream<Path> listing = Files.list(liveDirectory())) {
            listing.filter(p -> p.toString().endsWith(".bin")).forEach(files::add);
        }
        files.sort(Comparator.<Path>comparingInt(p -> key(p)[0])
            .thenComparingInt(p -> key(p)[1])
            .thenComparing(p -> p.getFileName().toString()));
        for (Path file : files) {
            String name = file.getFileName().toString();
            int[] k = key(file);
            ApiKeys api = ApiKeys.forId(k[0]);
            short v = (short) k[1];
            String kase = name.substring(name.indexOf('-', name.indexOf('-') + 1) + 1, name.length() - 4);
            ByteBuffer frame = ByteBuffer.wrap(Files.readAllBytes(file));
            new ResponseHeaderData(new ByteBufferAccessor(frame), api.responseHeaderVersion(v));
            byte[] body = new byte[frame.remaining()];
            frame.get(body);
            ByteBuffer in = ByteBuffer.wrap(body);
            ApiMessage message = parse(api, in, v);
            if (in.hasRemaining()) throw new IllegalStateException(name + ": bytes after the body");
            if (!Arrays.equals(bytes(message, v), body)) {
                throw new IllegalStateException(name + ": Kafka does not serialize it back the same");
            }
            rewrite(message, v);
            System.out.println(api.id + " " + v + " live-" + kase + " " + hex(body) + " " + hex(bytes(message, v)));
        }
    }
}
