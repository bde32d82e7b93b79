// Golden response bodies for the gateway's wire tests, serialized by Apache Kafka's own
// generated message classes (the kafka-clients jar on the classpath, 4.4.0).
//
// For every response that carries broker addresses, at every version Kafka 4.4.0 defines,
// it prints one line:
//
//   <api key> <version> <case> <upstream body hex> <expected body hex>
//
// "upstream" is the body as a broker sends it (after the response header); "expected" is
// the same message with every broker address replaced the way the gateway must replace it:
// node n -> gateway.test:(19000 + n); node id -1, controller endpoints of DescribeCluster
// (EndpointType 2) and every non-address field (rack, keys, error messages, topic names that
// look like host names) untouched. Flexible versions carry an unknown tagged field (tag 42) at
// the top level and inside the address structs, which must survive byte for byte.
//
// Run: java -cp kafka-clients-4.4.0.jar GoldenResponses.java > ../responses.txt
// (tests/gateway/test_wire_golden.py regenerates it and compares when java is available.)

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.message.DescribeClusterResponseData;
import org.apache.kafka.common.message.DescribeQuorumResponseData;
import org.apache.kafka.common.message.FetchResponseData;
import org.apache.kafka.common.message.FindCoordinatorResponseData;
import org.apache.kafka.common.message.MetadataResponseData;
import org.apache.kafka.common.message.ProduceResponseData;
import org.apache.kafka.common.message.ShareAcknowledgeResponseData;
import org.apache.kafka.common.message.ShareFetchResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.protocol.types.RawTaggedField;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.SimpleRecord;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.function.BiFunction;

public class GoldenResponses {
    static final Uuid TOPIC_ID = new Uuid(0x0123456789abcdefL, 0x0fedcba987654321L);
    static final byte[] UNKNOWN = {0x0a, 0x0b, 0x0c};

    // The address the gateway must put in place of node n's, when `gateway` is true.
    static String host(int node, boolean gateway) {
        return gateway ? "gateway.test" : "kafka-" + node + ".upstream.internal";
    }

    static int port(int node, boolean gateway) {
        return gateway ? 19000 + node : 9092 + node;
    }

    static String hex(ApiMessage message, short version) {
        ByteBuffer buffer = MessageUtil.toByteBufferAccessor(message, version).buffer();
        StringBuilder out = new StringBuilder();
        while (buffer.hasRemaining()) {
            out.append(String.format("%02x", buffer.get()));
        }
        return out.toString();
    }

    static void emit(ApiKeys api, String name, BiFunction<Short, Boolean, ApiMessage> build) {
        emit(api, name, api.oldestVersion(), build);
    }

    static void emit(ApiKeys api, String name, int from, BiFunction<Short, Boolean, ApiMessage> build) {
        for (short v = (short) from; v <= api.latestVersion(true); v++) {
            System.out.println(api.id + " " + v + " " + name + " "
                + hex(build.apply(v, false), v) + " " + hex(build.apply(v, true), v));
        }
    }

    static MemoryRecords records(int base) {
        return MemoryRecords.withRecords(base, Compression.NONE,
            new SimpleRecord(1700000000000L + base, "key".getBytes(StandardCharsets.UTF_8),
                ("value-" + base).getBytes(StandardCharsets.UTF_8)),
            new SimpleRecord(1700000000001L + base, null, "second".getBytes(StandardCharsets.UTF_8)));
    }

    static void unknown(List<RawTaggedField> fields, short v, int flexibleFrom) {
        if (v >= flexibleFrom) {
            fields.add(new RawTaggedField(42, UNKNOWN));
        }
    }

    static ApiMessage metadata(short v, boolean gw) {
        MetadataResponseData data = new MetadataResponseData().setThrottleTimeMs(v >= 3 ? 7 : 0);
        for (int node = 1; node <= 3; node++) {
            MetadataResponseData.MetadataResponseBroker broker =
                new MetadataResponseData.MetadataResponseBroker()
                    .setNodeId(node).setHost(host(node, gw)).setPort(port(node, gw))
                    .setRack(v >= 1 ? "rack-" + node + ".upstream.internal" : null);
            unknown(broker.unknownTaggedFields(), v, 9);
            data.brokers().add(broker);
        }
        if (v >= 2) data.setClusterId("cluster-abc");
        if (v >= 1) data.setControllerId(2);
        MetadataResponseData.MetadataResponseTopic topic = new MetadataResponseData.MetadataResponseTopic()
            .setName("kafka-1.upstream.internal").setIsInternal(false);
        if (v >= 10) topic.setTopicId(TOPIC_ID);
        for (int p = 0; p < 3; p++) {
            topic.partitions().add(new MetadataResponseData.MetadataResponsePartition()
                .setPartitionIndex(p).setLeaderId(p + 1).setLeaderEpoch(v >= 7 ? 5 : -1)
                .setReplicaNodes(Arrays.asList(1, 2, 3)).setIsrNodes(Arrays.asList(p + 1))
                .setOfflineReplicas(v >= 5 ? Arrays.asList(3) : Arrays.asList()));
        }
        if (v >= 8) topic.setTopicAuthorizedOperations(0x0ff8);
        data.topics().add(topic);
        if (v >= 8 && v <= 10) data.setClusterAuthorizedOperations(0x0fff);
        unknown(data.unknownTaggedFields(), v, 9);
        return data;
    }

    static ApiMessage findCoordinator(short v, boolean gw, boolean available) {
        FindCoordinatorResponseData data = new FindCoordinatorResponseData().setThrottleTimeMs(v >= 1 ? 3 : 0);
        if (v <= 3) {
            if (available) {
                data.setNodeId(2).setHost(host(2, gw)).setPort(port(2, gw));
                if (v >= 1) data.setErrorMessage(null);
            } else {
                data.setErrorCode((short) 15).setNodeId(-1).setHost("").setPort(-1);
                if (v >= 1) data.setErrorMessage("The coordinator is not available.");
            }
        } else {
            data.coordinators().add(new FindCoordinatorResponseData.Coordinator()
                .setKey("kafka-3.upstream.internal:9095").setNodeId(2)
                .setHost(host(2, gw)).setPort(port(2, gw)));
            FindCoordinatorResponseData.Coordinator none = new FindCoordinatorResponseData.Coordinator()
                .setKey("group-b").setNodeId(-1).setHost("").setPort(-1)
                .setErrorCode((short) 15).setErrorMessage("The coordinator is not available.");
            unknown(none.unknownTaggedFields(), v, 3);
            data.coordinators().add(none);
            if (available) {
                data.coordinators().add(new FindCoordinatorResponseData.Coordinator()
                    .setKey("txn-c").setNodeId(3).setHost(host(3, gw)).setPort(port(3, gw)));
            }
        }
        unknown(data.unknownTaggedFields(), v, 3);
        return data;
    }

    static ApiMessage describeCluster(short v, boolean gw, boolean controllers) {
        DescribeClusterResponseData data = new DescribeClusterResponseData()
            .setThrottleTimeMs(1).setClusterId("cluster-abc").setControllerId(1)
            .setClusterAuthorizedOperations(0x0fff);
        if (controllers) {
            data.setEndpointType((byte) 2);
            gw = false;  // controller endpoints are not rewritten
        }
        for (int node = 1; node <= 3; node++) {
            DescribeClusterResponseData.DescribeClusterBroker broker =
                new DescribeClusterResponseData.DescribeClusterBroker()
                    .setBrokerId(node).setHost(host(node, gw)).setPort(port(node, gw))
                    .setRack(node == 2 ? null : "rack-" + node);
            if (v >= 2) broker.setIsFenced(node == 3);
            unknown(broker.unknownTaggedFields(), v, 0);
            data.brokers().add(broker);
        }
        unknown(data.unknownTaggedFields(), v, 0);
        return data;
    }

    static ApiMessage produce(short v, boolean gw, boolean endpoints) {
        ProduceResponseData data = new ProduceResponseData().setThrottleTimeMs(11);
        ProduceResponseData.TopicProduceResponse topic = new ProduceResponseData.TopicProduceResponse();
        if (v >= 13) topic.setTopicId(TOPIC_ID); else topic.setName("kafka-2.upstream.internal");
        ProduceResponseData.PartitionProduceResponse ok = new ProduceResponseData.PartitionProduceResponse()
            .setIndex(0).setBaseOffset(1234).setLogAppendTimeMs(1700000000000L)
            .setLogStartOffset(v >= 5 ? 17 : -1);
        topic.partitionResponses().add(ok);
        ProduceResponseData.PartitionProduceResponse moved = new ProduceResponseData.PartitionProduceResponse()
            .setIndex(1).setErrorCode((short) 6).setBaseOffset(-1).setLogAppendTimeMs(-1);
        if (v >= 8) {
            moved.setErrorMessage("kafka-1.upstream.internal is not the leader")
                .setRecordErrors(Arrays.asList(new ProduceResponseData.BatchIndexAndErrorMessage()
                    .setBatchIndex(0).setBatchIndexErrorMessage("kafka-1.upstream.internal")));
        }
        if (v >= 10 && endpoints) {
            moved.setCurrentLeader(new ProduceResponseData.LeaderIdAndEpoch().setLeaderId(3).setLeaderEpoch(9));
        }
        topic.partitionResponses().add(moved);
        data.responses().add(topic);
        if (v >= 10 && endpoints) {
            for (int node : new int[] {3, 1}) {
                ProduceResponseData.NodeEndpoint endpoint = new ProduceResponseData.NodeEndpoint()
                    .setNodeId(node).setHost(host(node, gw)).setPort(port(node, gw))
                    .setRack(node == 3 ? "rack-3" : null);
                unknown(endpoint.unknownTaggedFields(), v, 9);
                data.nodeEndpoints().add(endpoint);
            }
        }
        unknown(data.unknownTaggedFields(), v, 9);
        return data;
    }

    static ApiMessage fetch(short v, boolean gw, boolean endpoints) {
        FetchResponseData data = new FetchResponseData().setThrottleTimeMs(5);
        if (v >= 7) data.setSessionId(77);
        FetchResponseData.FetchableTopicResponse topic = new FetchResponseData.FetchableTopicResponse();
        if (v >= 13) topic.setTopicId(TOPIC_ID); else topic.setTopic("kafka-3.upstream.internal");
        for (int p = 0; p < 2; p++) {
            FetchResponseData.PartitionData partition = new FetchResponseData.PartitionData()
                .setPartitionIndex(p).setHighWatermark(100 + p).setLastStableOffset(90 + p)
                .setLogStartOffset(v >= 5 ? 3 : -1)
                .setAbortedTransactions(p == 0 ? Arrays.asList(new FetchResponseData.AbortedTransaction()
                    .setProducerId(4000).setFirstOffset(12)) : null)
                .setRecords(records(10 * p));
            if (v >= 11) partition.setPreferredReadReplica(p == 1 ? 2 : -1);
            if (v >= 12 && p == 1) {
                partition.setErrorCode((short) 6).setRecords(MemoryRecords.EMPTY)
                    .setCurrentLeader(new FetchResponseData.LeaderIdAndEpoch().setLeaderId(2).setLeaderEpoch(4));
            }
            topic.partitions().add(partition);
        }
        data.responses().add(topic);
        if (v >= 16 && endpoints) {
            FetchResponseData.NodeEndpoint endpoint = new FetchResponseData.NodeEndpoint()
                .setNodeId(2).setHost(host(2, gw)).setPort(port(2, gw)).setRack("rack-2");
            unknown(endpoint.unknownTaggedFields(), v, 12);
            data.nodeEndpoints().add(endpoint);
        }
        unknown(data.unknownTaggedFields(), v, 12);
        return data;
    }

    static ApiMessage shareFetch(short v, boolean gw) {
        ShareFetchResponseData data = new ShareFetchResponseData().setThrottleTimeMs(2)
            .setAcquisitionLockTimeoutMs(30000);
        ShareFetchResponseData.ShareFetchableTopicResponse topic =
            new ShareFetchResponseData.ShareFetchableTopicResponse().setTopicId(TOPIC_ID);
        topic.partitions().add(new ShareFetchResponseData.PartitionData().setPartitionIndex(0)
            .setCurrentLeader(new ShareFetchResponseData.LeaderIdAndEpoch().setLeaderId(1).setLeaderEpoch(2))
            .setRecords(records(0))
            .setAcquiredRecords(Arrays.asList(new ShareFetchResponseData.AcquiredRecords()
                .setFirstOffset(0).setLastOffset(1).setDeliveryCount((short) 1))));
        topic.partitions().add(new ShareFetchResponseData.PartitionData().setPartitionIndex(1)
            .setErrorCode((short) 6).setErrorMessage("kafka-1.upstream.internal")
            .setCurrentLeader(new ShareFetchResponseData.LeaderIdAndEpoch().setLeaderId(3).setLeaderEpoch(1))
            .setRecords(MemoryRecords.EMPTY));
        data.responses().add(topic);
        for (int node : new int[] {3, 1}) {
            ShareFetchResponseData.NodeEndpoint endpoint = new ShareFetchResponseData.NodeEndpoint()
                .setNodeId(node).setHost(host(node, gw)).setPort(port(node, gw));
            unknown(endpoint.unknownTaggedFields(), v, 0);
            data.nodeEndpoints().add(endpoint);
        }
        unknown(data.unknownTaggedFields(), v, 0);
        return data;
    }

    static ApiMessage shareAcknowledge(short v, boolean gw) {
        ShareAcknowledgeResponseData data = new ShareAcknowledgeResponseData().setThrottleTimeMs(2);
        if (v >= 2) data.setAcquisitionLockTimeoutMs(30000);
        ShareAcknowledgeResponseData.ShareAcknowledgeTopicResponse topic =
            new ShareAcknowledgeResponseData.ShareAcknowledgeTopicResponse().setTopicId(TOPIC_ID);
        topic.partitions().add(new ShareAcknowledgeResponseData.PartitionData().setPartitionIndex(1)
            .setErrorCode((short) 6)
            .setCurrentLeader(new ShareAcknowledgeResponseData.LeaderIdAndEpoch().setLeaderId(2).setLeaderEpoch(3)));
        data.responses().add(topic);
        data.nodeEndpoints().add(new ShareAcknowledgeResponseData.NodeEndpoint()
            .setNodeId(2).setHost(host(2, gw)).setPort(port(2, gw)).setRack("rack-2"));
        unknown(data.unknownTaggedFields(), v, 0);
        return data;
    }

    static ApiMessage describeQuorum(short v, boolean gw) {
        DescribeQuorumResponseData data = new DescribeQuorumResponseData();
        DescribeQuorumResponseData.PartitionData partition = new DescribeQuorumResponseData.PartitionData()
            .setPartitionIndex(0).setLeaderId(1).setLeaderEpoch(3).setHighWatermark(500);
        for (int node = 1; node <= 3; node++) {
            DescribeQuorumResponseData.ReplicaState replica = new DescribeQuorumResponseData.ReplicaState()
                .setReplicaId(node).setLogEndOffset(500);
            if (v >= 2) replica.setReplicaDirectoryId(TOPIC_ID);
            partition.currentVoters().add(replica);
        }
        partition.observers().add(new DescribeQuorumResponseData.ReplicaState().setReplicaId(4).setLogEndOffset(499));
        data.topics().add(new DescribeQuorumResponseData.TopicData().setTopicName("__cluster_metadata")
            .setPartitions(Arrays.asList(partition)));
        if (v >= 2) {
            for (int node = 1; node <= 3; node++) {
                DescribeQuorumResponseData.Node entry = new DescribeQuorumResponseData.Node().setNodeId(node);
                entry.listeners().add(new DescribeQuorumResponseData.Listener()
                    .setName("CONTROLLER").setHost(host(node, gw))
                    .setPort(gw ? port(node, true) : port(node, false) + 100));  // a controller port
                unknown(entry.unknownTaggedFields(), v, 0);
                data.nodes().add(entry);
            }
        }
        unknown(data.unknownTaggedFields(), v, 0);
        return data;
    }

    public static void main(String[] args) {
        emit(ApiKeys.METADATA, "brokers", GoldenResponses::metadata);
        emit(ApiKeys.FIND_COORDINATOR, "available", (v, gw) -> findCoordinator(v, gw, true));
        emit(ApiKeys.FIND_COORDINATOR, "unavailable", (v, gw) -> findCoordinator(v, gw, false));
        emit(ApiKeys.DESCRIBE_CLUSTER, "brokers", (v, gw) -> describeCluster(v, gw, false));
        emit(ApiKeys.DESCRIBE_CLUSTER, "controllers", 1, (v, gw) -> describeCluster(v, gw, true));
        emit(ApiKeys.PRODUCE, "endpoints", (v, gw) -> produce(v, gw, true));
        emit(ApiKeys.PRODUCE, "plain", (v, gw) -> produce(v, gw, false));
        emit(ApiKeys.FETCH, "endpoints", (v, gw) -> fetch(v, gw, true));
        emit(ApiKeys.FETCH, "plain", (v, gw) -> fetch(v, gw, false));
        emit(ApiKeys.SHARE_FETCH, "endpoints", GoldenResponses::shareFetch);
        emit(ApiKeys.SHARE_ACKNOWLEDGE, "endpoints", GoldenResponses::shareAcknowledge);
        emit(ApiKeys.DESCRIBE_QUORUM, "listeners", GoldenResponses::describeQuorum);
    }
}
