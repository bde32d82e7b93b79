// Golden bodies of DescribeUserScramCredentials (50) and AlterUserScramCredentials (51),
// every version Kafka 4.4.0 defines (v0), serialized by Apache Kafka's own message classes
// (kafka-clients 4.4.0 and slf4j-api on the classpath). One line each:
//   <message> <version> <hex>
// The content is fixed (tests/security/test_scram_golden.py builds the same messages; the
// responses are what the collector answers for the requests it describes there).
//
// Run: java -cp "kafka-clients-4.4.0.jar:slf4j-api.jar" GoldenScram.java > ../golden_scram.txt

import org.apache.kafka.common.message.AlterUserScramCredentialsRequestData;
import org.apache.kafka.common.message.AlterUserScramCredentialsResponseData;
import org.apache.kafka.common.message.DescribeUserScramCredentialsRequestData;
import org.apache.kafka.common.message.DescribeUserScramCredentialsResponseData;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.MessageUtil;

import java.nio.ByteBuffer;
import java.util.List;

public class GoldenScram {
    static void print(String name, ApiMessage message) {
        for (short version = message.lowestSupportedVersion(); version <= message.highestSupportedVersion(); version++) {
            ByteBuffer buffer = MessageUtil.toByteBufferAccessor(message, version).buffer();
            StringBuilder out = new StringBuilder();
            while (buffer.hasRemaining()) out.append(String.format("%02x", buffer.get()));
            System.out.println(name + " " + version + " " + out);
        }
    }

    static byte[] bytes(int n, int start) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) b[i] = (byte) (start + i);
        return b;
    }

    public static void main(String[] args) {
        print("DescribeUserScramCredentialsRequest", new DescribeUserScramCredentialsRequestData()
            .setUsers(List.of(
                new DescribeUserScramCredentialsRequestData.UserName().setName("alice"),
                new DescribeUserScramCredentialsRequestData.UserName().setName("nobody"))));
        print("DescribeUserScramCredentialsRequestAll", new DescribeUserScramCredentialsRequestData()
            .setUsers(null));
        print("DescribeUserScramCredentialsResponse", new DescribeUserScramCredentialsResponseData()
            // A 4.4.0 broker words success as "" (ApiError.NONE), tests/compat checks it.
            .setThrottleTimeMs(0).setErrorCode((short) 0).setErrorMessage("")
            .setResults(List.of(
                new DescribeUserScramCredentialsResponseData.DescribeUserScramCredentialsResult()
                    .setUser("alice").setErrorCode((short) 0).setErrorMessage("")
                    .setCredentialInfos(List.of(
                        new DescribeUserScramCredentialsResponseData.CredentialInfo()
                            .setMechanism((byte) 1).setIterations(4096),
                        new DescribeUserScramCredentialsResponseData.CredentialInfo()
                            .setMechanism((byte) 2).setIterations(8192))),
                new DescribeUserScramCredentialsResponseData.DescribeUserScramCredentialsResult()
                    .setUser("nobody").setErrorCode((short) 91)
                    .setErrorMessage("Attempt to describe a user credential that does not exist: nobody")
                    .setCredentialInfos(List.of()))));
        print("AlterUserScramCredentialsRequest", new AlterUserScramCredentialsRequestData()
            .setDeletions(List.of(new AlterUserScramCredentialsRequestData.ScramCredentialDeletion()
                .setName("ghost").setMechanism((byte) 1)))
            .setUpsertions(List.of(
                new AlterUserScramCredentialsRequestData.ScramCredentialUpsertion()
                    .setName("alice").setMechanism((byte) 2).setIterations(8192)
                    .setSalt(bytes(16, 1)).setSaltedPassword(bytes(64, 100)),
                new AlterUserScramCredentialsRequestData.ScramCredentialUpsertion()
                    .setName("weak").setMechanism((byte) 1).setIterations(1024)
                    .setSalt(bytes(16, 1)).setSaltedPassword(bytes(32, 100)))));
        print("AlterUserScramCredentialsResponse", new AlterUserScramCredentialsResponseData()
            .setThrottleTimeMs(0).setResults(List.of(
                new AlterUserScramCredentialsResponseData.AlterUserScramCredentialsResult()
                    .setUser("alice").setErrorCode((short) 0).setErrorMessage(null),
                new AlterUserScramCredentialsResponseData.AlterUserScramCredentialsResult()
                    .setUser("ghost").setErrorCode((short) 91)
                    .setErrorMessage("Attempt to delete a user credential that does not exist"),
                new AlterUserScramCredentialsResponseData.AlterUserScramCredentialsResult()
                    .setUser("weak").setErrorCode((short) 93).setErrorMessage("Too few iterations"))));
    }
}
