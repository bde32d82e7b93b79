// Golden bodies of the ACL APIs (DescribeAcls 29, CreateAcls 30, DeleteAcls 31), every
// version Kafka 4.4.0 defines, serialized by Apache Kafka's own message classes
// (kafka-clients 4.4.0 and slf4j-api on the classpath). One line each:
//   <message> <version> <hex>
// The content is fixed (tests/security/test_acl_golden.py builds the same messages).
//
// Run: java -cp "kafka-clients-4.4.0.jar:slf4j-api.jar" GoldenAcls.java > ../golden_acls.txt

import org.apache.kafka.common.message.CreateAclsRequestData;
import org.apache.kafka.common.message.CreateAclsResponseData;
import org.apache.kafka.common.message.DeleteAclsRequestData;
import org.apache.kafka.common.message.DeleteAclsResponseData;
import org.apache.kafka.common.message.DescribeAclsRequestData;
import org.apache.kafka.common.message.DescribeAclsResponseData;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.MessageUtil;

import java.nio.ByteBuffer;
import java.util.List;

public class GoldenAcls {
    static void print(String name, ApiMessage message) {
        for (short version = message.lowestSupportedVersion(); version <= message.highestSupportedVersion(); version++) {
            ByteBuffer buffer = MessageUtil.toByteBufferAccessor(message, version).buffer();
            StringBuilder out = new StringBuilder();
            while (buffer.hasRemaining()) out.append(String.format("%02x", buffer.get()));
            System.out.println(name + " " + version + " " + out);
        }
    }

    public static void main(String[] args) {
        print("DescribeAclsRequest", new DescribeAclsRequestData()
            .setResourceTypeFilter((byte) 4).setResourceNameFilter(null).setPatternTypeFilter((byte) 2)
            .setPrincipalFilter("User:CN=alice").setHostFilter(null)
            .setOperation((byte) 1).setPermissionType((byte) 3));
        print("DescribeAclsResponse", new DescribeAclsResponseData()
            .setThrottleTimeMs(7).setErrorCode((short) 0).setErrorMessage(null)
            .setResources(List.of(new DescribeAclsResponseData.DescribeAclsResource()
                .setResourceType((byte) 4).setResourceName("kafka-cluster").setPatternType((byte) 3)
                .setAcls(List.of(
                    new DescribeAclsResponseData.AclDescription().setPrincipal("User:CN=alice")
                        .setHost("*").setOperation((byte) 11).setPermissionType((byte) 3),
                    new DescribeAclsResponseData.AclDescription().setPrincipal("User:*")
                        .setHost("10.0.0.1").setOperation((byte) 7).setPermissionType((byte) 2))))));
        print("CreateAclsRequest", new CreateAclsRequestData().setCreations(List.of(
            new CreateAclsRequestData.AclCreation().setResourceType((byte) 4)
                .setResourceName("kafka-cluster").setResourcePatternType((byte) 3)
                .setPrincipal("User:CN=alice").setHost("*").setOperation((byte) 11)
                .setPermissionType((byte) 3))));
        print("CreateAclsResponse", new CreateAclsResponseData().setThrottleTimeMs(0)
            .setResults(List.of(
                new CreateAclsResponseData.AclCreationResult().setErrorCode((short) 0).setErrorMessage(null),
                new CreateAclsResponseData.AclCreationResult().setErrorCode((short) 42)
                    .setErrorMessage("The only valid name for the CLUSTER resource is kafka-cluster"))));
        print("DeleteAclsRequest", new DeleteAclsRequestData().setFilters(List.of(
            new DeleteAclsRequestData.DeleteAclsFilter().setResourceTypeFilter((byte) 4)
                .setResourceNameFilter("kafka-cluster").setPatternTypeFilter((byte) 1)
                .setPrincipalFilter("User:CN=alice").setHostFilter(null)
                .setOperation((byte) 1).setPermissionType((byte) 1))));
        print("DeleteAclsResponse", new DeleteAclsResponseData().setThrottleTimeMs(3)
            .setFilterResults(List.of(new DeleteAclsResponseData.DeleteAclsFilterResult()
                .setErrorCode((short) 0).setErrorMessage(null)
                .setMatchingAcls(List.of(new DeleteAclsResponseData.DeleteAclsMatchingAcl()
                    .setErrorCode((short) 0).setErrorMessage(null).setResourceType((byte) 4)
                    .setResourceName("kafka-cluster").setPatternType((byte) 3)
                    .setPrincipal("User:CN=alice").setHost("*").setOperation((byte) 11)
                    .setPermissionType((byte) 3))))));
    }
}
