// Prints Kafka's own view of every API key (org.apache.kafka.common.protocol.ApiKeys in the
// kafka-clients jar on the classpath), one tab-separated line each, for
// tests/proto/test_api_table.py to compare with proto/api_table.py:
//   id  name  oldest  latest(stable)  latest(with unstable)  listeners  request header versions
//   response header versions  (header versions as comma-separated, one per valid version)
// Run: java -cp kafka-clients-4.4.0.jar ApiKeysTable.java

import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.protocol.ApiKeys;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

public class ApiKeysTable {
    public static void main(String[] args) {
        for (ApiKeys key : ApiKeys.values()) {
            List<String> request = new ArrayList<>();
            List<String> response = new ArrayList<>();
            String oldest = "-";
            String latest = "-";
            String latestUnstable = "-";
            if (key.hasValidVersion()) {
                oldest = Short.toString(key.oldestVersion());
                latest = Short.toString(key.latestVersion(false));
                latestUnstable = Short.toString(key.latestVersion(true));
                for (short v = key.oldestVersion(); v <= key.latestVersion(true); v++) {
                    request.add(Short.toString(key.requestHeaderVersion(v)));
                    response.add(Short.toString(key.responseHeaderVersion(v)));
                }
            }
            TreeSet<String> listeners = new TreeSet<>();
            for (ApiMessageType.ListenerType listener : key.messageType.listeners()) {
                listeners.add(listener.name().toLowerCase());
            }
            System.out.println(String.join("\t",
                Short.toString(key.id),
                key.name,
                oldest,
                latest,
                latestUnstable,
                String.join(",", listeners),
                String.join(",", request),
                String.join(",", response)));
        }
    }
}
