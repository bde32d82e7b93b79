// Golden bodies of ApiVersions (18), SaslHandshake (17) and SaslAuthenticate (36), every
// version Kafka 4.4.0 defines, serialized by Apache Kafka's own message classes
// (kafka-clients 4.4.0 and slf4j-api on the classpath). One line each:
//   <message> <version> <hex>
// The content is fixed (tests/security/test_sasl_golden.py builds the same messages; the
// SASL responses are what the collector answers to the requests here: a PLAIN login of
// alice with her password and with a wrong one, a handshake for GSSAPI, which it does not
// serve). A success carries ErrorMessage "" (the schema default), as Kafka's
// SaslServerAuthenticator leaves it.
//
// Run: java -cp "kafka-clients-4.4.0.jar:slf4j-api.jar" GoldenSasl.java > ../golden_sasl.txt

import org.apache.kafka.common.message.ApiVersionsRequestData;
import org.apache.kafka.common.message.ApiVersionsResponseData;
import org.apache.kafka.common.message.SaslAuthenticateRequestData;
import org.apache.kafka.common.message.SaslAuthenticateResponseData;
import org.apache.kafka.common.message.SaslHandshakeRequestData;
import org.apache.kafka.common.message.SaslHandshakeResponseData;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.MessageUtil;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;

public class GoldenSasl {
    static void print(String name, ApiMessage message) {
        for (short version = message.lowestSupportedVersion(); version <= message.highestSupportedVersion(); version++) {
            ByteBuffer buffer = MessageUtil.toByteBufferAccessor(message, version).buffer();
            StringBuilder out = new StringBuilder();
            while (buffer.hasRemaining()) out.append(String.format("%02x", buffer.get()));
            System.out.println(name + " " + version + " " + out);
        }
    }

    static ApiVersionsResponseData.ApiVersion api(int key, int min, int max) {
        return new ApiVersionsResponseData.ApiVersion()
            .setApiKey((short) key).setMinVersion((short) min).setMaxVersion((short) max);
    }

    public static void main(String[] args) {
        print("ApiVersionsRequest", new ApiVersionsRequestData()
            .setClientSoftwareName("librdkafka").setClientSoftwareVersion("2.16.0"));
        ApiVersionsResponseData.ApiVersionCollection keys = new ApiVersionsResponseData.ApiVersionCollection();
        keys.add(api(17, 1, 1));
        keys.add(api(18, 0, 4));
        keys.add(api(36, 0, 2));
        keys.add(api(71, 0, 0));
        keys.add(api(72, 0, 0));
        print("ApiVersionsResponse", new ApiVersionsResponseData()
            .setErrorCode((short) 0).setApiKeys(keys).setThrottleTimeMs(0));
        print("SaslHandshakeRequestPlain", new SaslHandshakeRequestData().setMechanism("PLAIN"));
        print("SaslHandshakeRequestGssapi", new SaslHandshakeRequestData().setMechanism("GSSAPI"));
        print("SaslHandshakeResponse", new SaslHandshakeResponseData()
            .setErrorCode((short) 0).setMechanisms(List.of("PLAIN", "SCRAM-SHA-512")));
        print("SaslHandshakeResponseUnsupported", new SaslHandshakeResponseData()
            .setErrorCode((short) 33).setMechanisms(List.of("PLAIN", "SCRAM-SHA-512")));
        print("SaslAuthenticateRequest", new SaslAuthenticateRequestData()
            .setAuthBytes("\0alice\0golden-pw".getBytes(StandardCharsets.UTF_8)));
        print("SaslAuthenticateRequestWrong", new SaslAuthenticateRequestData()
            .setAuthBytes("\0alice\0not-it".getBytes(StandardCharsets.UTF_8)));
        print("SaslAuthenticateResponse", new SaslAuthenticateResponseData()
            .setErrorCode((short) 0).setAuthBytes(new byte[0])
            .setSessionLifetimeMs(60000L));
        print("SaslAuthenticateResponseFailed", new SaslAuthenticateResponseData()
            .setErrorCode((short) 58).setErrorMessage("Authentication failed: Invalid username or password")
            .setAuthBytes(new byte[0]).setSessionLifetimeMs(0L));
    }
}
