// Ground truth for the subscription-id port: the JDK's own collections and CRC32C.
//
// Reads one case per line from stdin:
//   <msb> <lsb> <nSubs> then per subscription: <name> <intervalMs> <matched 0|1> <nMetrics> <metric>...
// every string written as "x" + hex(UTF-8 bytes). For each case prints one line:
//   x<hex(UTF-8 of metrics.toString() + interval)> <crc32c as signed int> <subscriptionId>
// building the merged set exactly like Kafka's ClientMetricsManager.createClientInstance:
// a ConcurrentHashMap of subscriptions (inserted in the given order), each holding
// new HashSet<>(metricsList), merged into new HashSet<>() with addAll, interval starting at
// 300000 taking the min, "*" collapsing the set; id = (int) crc32c ^ Uuid.hashCode().
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.zip.CRC32C;

public class SubscriptionIdOracle {
    static final class Info {
        final Set<String> metrics;
        final int intervalMs;
        final boolean matched;

        Info(List<String> metrics, int intervalMs, boolean matched) {
            this.metrics = new HashSet<>(metrics);
            this.intervalMs = intervalMs;
            this.matched = matched;
        }
    }

    static String decode(String token) {
        byte[] bytes = new byte[(token.length() - 1) / 2];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) ((Character.digit(token.charAt(1 + 2 * i), 16) << 4)
                | Character.digit(token.charAt(2 + 2 * i), 16));
        }
        return new String(bytes, StandardCharsets.UTF_8);
    }

    static String encode(String text) {
        byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
        StringBuilder out = new StringBuilder(1 + 2 * bytes.length).append('x');
        for (byte b : bytes) {
            out.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
        }
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            String[] t = line.split(" ");
            int p = 0;
            long msb = Long.parseLong(t[p++]);
            long lsb = Long.parseLong(t[p++]);
            int nSubs = Integer.parseInt(t[p++]);
            Map<String, Info> subscriptionMap = new ConcurrentHashMap<>();
            for (int s = 0; s < nSubs; s++) {
                String name = decode(t[p++]);
                int intervalMs = Integer.parseInt(t[p++]);
                boolean matched = t[p++].equals("1");
                int nMetrics = Integer.parseInt(t[p++]);
                List<String> metrics = new ArrayList<>();
                for (int m = 0; m < nMetrics; m++) metrics.add(decode(t[p++]));
                subscriptionMap.put(name, new Info(metrics, intervalMs, matched));
            }
            int pushIntervalMs = 300000;
            Set<String> subscribedMetrics = new HashSet<>();
            boolean all = false;
            for (Info info : subscriptionMap.values()) {
                if (info.matched) {
                    all = all || info.metrics.contains("*");
                    subscribedMetrics.addAll(info.metrics);
                    pushIntervalMs = Math.min(pushIntervalMs, info.intervalMs);
                }
            }
            if (all) {
                subscribedMetrics.clear();
                subscribedMetrics.add("*");
            }
            String hashed = subscribedMetrics.toString() + pushIntervalMs;
            byte[] bytes = hashed.getBytes(StandardCharsets.UTF_8);
            CRC32C crc = new CRC32C();
            crc.update(bytes, 0, bytes.length);
            long x = msb ^ lsb;
            int uuidHash = ((int) (x >> 32)) ^ (int) x;  // org.apache.kafka.common.Uuid.hashCode
            int id = (int) crc.getValue() ^ uuidHash;
            out.append(encode(hashed)).append(' ').append((int) crc.getValue()).append(' ').append(id).append('\n');
        }
        System.out.print(out);
    }
}
