// Every response of Kafka 4.4.0, at every version, with ThrottleTimeMs = 4321 where the version
// has the field: Kafka's own bytes for the gateway's throttle tests. One line each:
//
//   <api key> <version> <has throttle: 1/0> <body hex>
//
// Bodies are the message's defaults (empty arrays), except where the throttle field follows
// variable-size fields (Produce, ApiVersions, Create/DescribeDelegationToken), which get
// entries so that the walk to it is exercised.
// Run: java -cp "kafka-clients-4.4.0.jar:slf4j-api.jar" GoldenThrottle.java > ../throttle.txt

import org.apache.kafka.common.message.ApiVersionsResponseData;
import org.apache.kafka.common.message.CreateDelegationTokenResponseData;
import org.apache.kafka.common.message.DescribeDelegationTokenResponseData;
import org.apache.kafka.common.message.ProduceResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.MessageUtil;

import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.util.Arrays;

public class GoldenThrottle {
    static String hex(ApiMessage message, short version) {
        ByteBuffer buffer = MessageUtil.toByteBufferAccessor(message, version).buffer();
        StringBuilder out = new StringBuilder();
        while (buffer.hasRemaining()) {
            out.append(String.format("%02x", buffer.get()));
        }
        return out.toString();
    }

    static ApiMessage filled(ApiKeys key, short v) {
        ApiMessage message = key.messageType.newResponse();
        if (message instanceof ProduceResponseData produce) {
            ProduceResponseData.TopicProduceResponse topic = new ProduceResponseData.TopicProduceResponse()
                .setName(v <= 12 ? "orders" : "");
            topic.partitionResponses().add(new ProduceResponseData.PartitionProduceResponse().setIndex(3)
                .setErrorMessage(v >= 8 ? "message" : null));
            produce.responses().add(topic);
        } else if (message instanceof ApiVersionsResponseData versions) {
            for (short api = 0; api < 3; api++) {
                versions.apiKeys().add(new ApiVersionsResponseData.ApiVersion().setApiKey(api).setMaxVersion((short) 9));
            }
        } else if (message instanceof CreateDelegationTokenResponseData token) {
            token.setPrincipalType("User").setPrincipalName("alice").setTokenId("token-1")
                .setHmac(new byte[] {1, 2, 3});
            if (v >= 3) token.setTokenRequesterPrincipalType("User").setTokenRequesterPrincipalName("bob");
        } else if (message instanceof DescribeDelegationTokenResponseData tokens) {
            DescribeDelegationTokenResponseData.DescribedDelegationToken token =
                new DescribeDelegationTokenResponseData.DescribedDelegationToken()
                    .setPrincipalType("User").setPrincipalName("alice").setTokenId("t").setHmac(new byte[] {7})
                    .setRenewers(Arrays.asList(new DescribeDelegationTokenResponseData.DescribedDelegationTokenRenewer()
                        .setPrincipalType("User").setPrincipalName("carol")));
            if (v >= 3) token.setTokenRequesterPrincipalType("User").setTokenRequesterPrincipalName("bob");
            tokens.tokens().add(token);
        }
        return message;
    }

    public static void main(String[] args) throws Exception {
        for (ApiKeys key : ApiKeys.values()) {
            if (!key.hasValidVersion()) continue;
            for (short v = key.oldestVersion(); v <= key.latestVersion(true); v++) {
                ApiMessage message = filled(key, v);
                boolean has = false;
                try {
                    Method setter = message.getClass().getMethod("setThrottleTimeMs", int.class);
                    String plain = hex(message, v);
                    setter.invoke(message, 4321);
                    has = !hex(message, v).equals(plain);  // the field exists in this version
                    if (!has) setter.invoke(message, 0);
                } catch (NoSuchMethodException e) {
                    has = false;
                }
                System.out.println(key.id + " " + v + " " + (has ? 1 : 0) + " " + hex(message, v));
            }
        }
    }
}
