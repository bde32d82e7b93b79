// Golden request bodies (and Kafka's own answers to some) for the gateway's wire tests,
// serialized by Apache Kafka's classes (kafka-clients 4.4.0 and slf4j-api on the classpath).
// One line each: <case> <api key> <version> <hex> [<hex>]
//
//   produce          request body (TransactionalId "txn-1" or null, acks, records), acks
//   create_topics    request body, then getErrorResponse(1234, ThrottlingQuotaExceeded) body
//   create_partitions, delete_topics: the same
//   sasl_handshake   request body (Mechanism SCRAM-SHA-512)
//   sasl_plain       SaslAuthenticate request body carrying a PLAIN token
//   api_versions     an upstream's ApiVersionsResponse body: every 4.4.0 API key at its
//                    stable range, Produce and Fetch one version newer than 4.4.0, an API key
//                    4.4.0 does not have (1000), SupportedFeatures, FinalizedFeatures, an
//                    unknown tagged field (flexible versions)
//
// Run: java -cp "kafka-clients-4.4.0.jar:slf4j-api.jar" GoldenRequests.java > ../requests.txt

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.errors.ThrottlingQuotaExceededException;
import org.apache.kafka.common.message.ApiVersionsResponseData;
import org.apache.kafka.common.message.CreatePartitionsRequestData;
import org.apache.kafka.common.message.CreateTopicsRequestData;
import org.apache.kafka.common.message.DeleteTopicsRequestData;
import org.apache.kafka.common.message.ProduceRequestData;
import org.apache.kafka.common.message.SaslAuthenticateRequestData;
import org.apache.kafka.common.message.SaslHandshakeRequestData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.protocol.types.RawTaggedField;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.SimpleRecord;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.CreatePartitionsRequest;
import org.apache.kafka.common.requests.CreateTopicsRequest;
import org.apache.kafka.common.requests.DeleteTopicsRequest;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

public class GoldenRequests {
    static final Uuid TOPIC_ID = new Uuid(0x0123456789abcdefL, 0x0fedcba987654321L);

    static String hex(ApiMessage message, short version) {
        ByteBuffer buffer = MessageUtil.toByteBufferAccessor(message, version).buffer();
        StringBuilder out = new StringBuilder();
        while (buffer.hasRemaining()) {
            out.append(String.format("%02x", buffer.get()));
        }
        return out.toString();
    }

    static void line(String name, ApiKeys api, short v, String... hexes) {
        System.out.println(name + " " + api.id + " " + v + " " + String.join(" ", hexes));
    }

    static void withErrorResponse(String name, ApiKeys api, AbstractRequest request, short v) {
        ThrottlingQuotaExceededException error =
            new ThrottlingQuotaExceededException(1234, Errors.THROTTLING_QUOTA_EXCEEDED.message());
        line(name, api, v, hex(request.data(), v), hex(request.getErrorResponse(1234, error).data(), v));
    }

    public static void main(String[] args) {
        for (short v = ApiKeys.PRODUCE.oldestVersion(); v <= ApiKeys.PRODUCE.latestVersion(true); v++) {
            for (short acks : new short[] {-1, 0, 1}) {
                ProduceRequestData data = new ProduceRequestData()
                    .setTransactionalId(acks == -1 ? "txn-1" : null).setAcks(acks).setTimeoutMs(30000);
                ProduceRequestData.TopicProduceData topic = new ProduceRequestData.TopicProduceData();
                if (v >= 13) topic.setTopicId(TOPIC_ID); else topic.setName("orders");
                topic.partitionData().add(new ProduceRequestData.PartitionProduceData().setIndex(0)
                    .setRecords(MemoryRecords.withRecords(Compression.NONE,
                        new SimpleRecord(1700000000000L, null, "v".getBytes(StandardCharsets.UTF_8)))));
                data.topicData().add(topic);
                line("produce", ApiKeys.PRODUCE, v, hex(data, v), Short.toString(acks));
            }
        }
        for (short v = ApiKeys.CREATE_TOPICS.oldestVersion(); v <= ApiKeys.CREATE_TOPICS.latestVersion(true); v++) {
            CreateTopicsRequestData data = new CreateTopicsRequestData().setTimeoutMs(30000);
            data.topics().add(new CreateTopicsRequestData.CreatableTopic().setName("three")
                .setNumPartitions(3).setReplicationFactor((short) 2));
            if (v >= 4) {  // the broker's defaults (-1) exist from v4 (KIP-464)
                data.topics().add(new CreateTopicsRequestData.CreatableTopic().setName("default")
                    .setNumPartitions(-1).setReplicationFactor((short) -1));
            }
            CreateTopicsRequestData.CreatableTopic manual = new CreateTopicsRequestData.CreatableTopic()
                .setName("manual").setNumPartitions(-1).setReplicationFactor((short) -1);
            manual.assignments().add(new CreateTopicsRequestData.CreatableReplicaAssignment()
                .setPartitionIndex(0).setBrokerIds(Arrays.asList(1, 2)));
            manual.assignments().add(new CreateTopicsRequestData.CreatableReplicaAssignment()
                .setPartitionIndex(1).setBrokerIds(Arrays.asList(2, 3)));
            data.topics().add(manual);
            data.topics().add(new CreateTopicsRequestData.CreatableTopic().setName("zero")
                .setNumPartitions(0).setReplicationFactor((short) 1));
            withErrorResponse("create_topics", ApiKeys.CREATE_TOPICS, new CreateTopicsRequest.Builder(data).build(v), v);
        }
        for (short v = ApiKeys.CREATE_PARTITIONS.oldestVersion(); v <= ApiKeys.CREATE_PARTITIONS.latestVersion(true); v++) {
            CreatePartitionsRequestData data = new CreatePartitionsRequestData().setTimeoutMs(30000);
            data.topics().add(new CreatePartitionsRequestData.CreatePartitionsTopic()
                .setName("grow").setCount(6).setAssignments(null));
            data.topics().add(new CreatePartitionsRequestData.CreatePartitionsTopic()
                .setName("assigned").setCount(4).setAssignments(Arrays.asList(
                    new CreatePartitionsRequestData.CreatePartitionsAssignment().setBrokerIds(Arrays.asList(1)),
                    new CreatePartitionsRequestData.CreatePartitionsAssignment().setBrokerIds(Arrays.asList(2)))));
            withErrorResponse("create_partitions", ApiKeys.CREATE_PARTITIONS, new CreatePartitionsRequest.Builder(data).build(v), v);
        }
        for (short v = ApiKeys.DELETE_TOPICS.oldestVersion(); v <= ApiKeys.DELETE_TOPICS.latestVersion(true); v++) {
            DeleteTopicsRequestData data = new DeleteTopicsRequestData().setTimeoutMs(30000);
            if (v >= 6) {
                data.topics().add(new DeleteTopicsRequestData.DeleteTopicState().setName("three"));
                data.topics().add(new DeleteTopicsRequestData.DeleteTopicState().setName(null).setTopicId(TOPIC_ID));
            } else {
                data.setTopicNames(Arrays.asList("three", "manual"));
            }
            withErrorResponse("delete_topics", ApiKeys.DELETE_TOPICS, new DeleteTopicsRequest.Builder(data).build(v), v);
        }
        for (short v = 0; v <= 1; v++) {
            line("sasl_handshake", ApiKeys.SASL_HANDSHAKE, v,
                hex(new SaslHandshakeRequestData().setMechanism("SCRAM-SHA-512"), v));
        }
        for (short v = 0; v <= 2; v++) {
            byte[] plain = "\u0000alice\u0000alice-secret".getBytes(StandardCharsets.UTF_8);
            line("sasl_plain", ApiKeys.SASL_AUTHENTICATE, v,
                hex(new SaslAuthenticateRequestData().setAuthBytes(plain), v));
        }
        for (short v = 0; v <= 4; v++) {
            ApiVersionsResponseData data = new ApiVersionsResponseData().setThrottleTimeMs(v >= 1 ? 9 : 0);
            for (ApiKeys key : ApiKeys.values()) {
                if (!key.hasValidVersion()) continue;
                short max = key.latestVersion(false);
                if (key == ApiKeys.PRODUCE || key == ApiKeys.FETCH) max++;  // newer than 4.4.0
                data.apiKeys().add(new ApiVersionsResponseData.ApiVersion()
                    .setApiKey(key.id).setMinVersion(key.oldestVersion()).setMaxVersion(max));
            }
            data.apiKeys().add(new ApiVersionsResponseData.ApiVersion()
                .setApiKey((short) 1000).setMinVersion((short) 0).setMaxVersion((short) 3));
            if (v >= 3) {
                data.supportedFeatures().add(new ApiVersionsResponseData.SupportedFeatureKey()
                    .setName("metadata.version").setMinVersion((short) 7).setMaxVersion((short) 29));
                data.finalizedFeatures().add(new ApiVersionsResponseData.FinalizedFeatureKey()
                    .setName("metadata.version").setMinVersionLevel((short) 29).setMaxVersionLevel((short) 29));
                data.setFinalizedFeaturesEpoch(4711);
                data.unknownTaggedFields().add(new RawTaggedField(42, new byte[] {1, 2, 3}));
                data.apiKeys().find(ApiKeys.METADATA.id).unknownTaggedFields()
                    .add(new RawTaggedField(7, new byte[] {9}));
            }
            line("api_versions", ApiKeys.API_VERSIONS, v, hex(data, v));
        }
    }
}
