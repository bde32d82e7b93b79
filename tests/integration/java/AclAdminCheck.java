// The Java Admin (kafka-clients 4.4.0) against a collector with an authorizer, over an SSL
// listener with client certificates: a non-super user (--user-props) and a super user
// (--admin-props), each a properties file. Prints one "KTC <step> <outcome>" line per step
// for tests/integration/test_java_acls.py; an exception is printed as its class and message.
//
// Run: java -cp "kafka-clients-4.4.0.jar:..." AclAdminCheck.java --bootstrap H:P \
//        --user-props user.properties --admin-props admin.properties --principal User:CN=alice

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

import java.io.FileReader;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;

public class AclAdminCheck {
    static void step(String name, Callable<Object> action) {
        try {
            Object result = action.call();
            System.out.println("KTC " + name + " ok " + (result == null ? "" : result));
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            System.out.println("KTC " + name + " error " + cause.getClass().getName() + ": " + cause.getMessage());
        } catch (Exception e) {
            System.out.println("KTC " + name + " error " + e.getClass().getName() + ": " + e.getMessage());
        }
        System.out.flush();
    }

    static Admin admin(String bootstrap, String propsFile) throws Exception {
        Properties props = new Properties();
        try (FileReader reader = new FileReader(propsFile)) { props.load(reader); }
        props.put("bootstrap.servers", bootstrap);
        props.put("request.timeout.ms", "15000");
        props.put("default.api.timeout.ms", "30000");
        return Admin.create(props);
    }

    static Object alterSubscription(Admin admin, String value) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.CLIENT_METRICS, "java-acl-sub");
        admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
            new ConfigEntry("metrics", value), AlterConfigOp.OpType.SET)))).all().get();
        return null;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = null, userProps = null, adminProps = null, principal = null;
        for (int i = 0; i < args.length; i += 2) {
            switch (args[i]) {
                case "--bootstrap": bootstrap = args[i + 1]; break;
                case "--user-props": userProps = args[i + 1]; break;
                case "--admin-props": adminProps = args[i + 1]; break;
                case "--principal": principal = args[i + 1]; break;
                default: throw new IllegalArgumentException(args[i]);
            }
        }
        AclBinding grant = new AclBinding(
            new ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL),
            new AccessControlEntry(principal, "*", AclOperation.ALTER_CONFIGS, AclPermissionType.ALLOW));
        AclBindingFilter all = new AclBindingFilter(ResourcePatternFilter.ANY, AccessControlEntryFilter.ANY);
        AclBindingFilter ofPrincipal = new AclBindingFilter(ResourcePatternFilter.ANY,
            new AccessControlEntryFilter(principal, null, AclOperation.ANY, AclPermissionType.ANY));
        try (Admin user = admin(bootstrap, userProps); Admin superUser = admin(bootstrap, adminProps)) {
            step("user-alter-before", () -> alterSubscription(user, "org.apache.kafka.producer."));
            step("user-describe-acls", () -> user.describeAcls(all).values().get());
            step("admin-create-acls", () -> { superUser.createAcls(List.of(grant)).all().get(); return null; });
            step("admin-describe-acls", () -> {
                Collection<AclBinding> acls = superUser.describeAcls(all).values().get();
                return acls.size() + " " + acls;
            });
            step("user-alter-granted", () -> alterSubscription(user, "org.apache.kafka.consumer."));
            step("user-describe-configs", () -> user.describeConfigs(List.of(new ConfigResource(
                ConfigResource.Type.CLIENT_METRICS, "java-acl-sub"))).all().get().values().iterator().next()
                .get("metrics").value());
            step("admin-delete-acls", () -> {
                Collection<AclBinding> deleted = superUser.deleteAcls(List.of(ofPrincipal)).all().get();
                return deleted.size() + " " + deleted;
            });
            step("admin-describe-after-delete", () -> superUser.describeAcls(all).values().get().size());
            step("user-alter-after-delete", () -> alterSubscription(user, "*"));
            step("admin-alter", () -> alterSubscription(superUser, "org.apache.kafka."));
            step("admin-alter-quotas", () -> {
                superUser.alterClientQuotas(List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration(
                    new org.apache.kafka.common.quota.ClientQuotaEntity(Map.of("user", "alice")),
                    List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("request_percentage", 50.0)))))
                    .all().get();
                return null;
            });
            step("user-alter-quotas", () -> {
                user.alterClientQuotas(List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration(
                    new org.apache.kafka.common.quota.ClientQuotaEntity(Map.of("user", "bob")),
                    List.of(new org.apache.kafka.common.quota.ClientQuotaAlteration.Op("request_percentage", 50.0)))))
                    .all().get();
                return null;
            });
        }
        System.out.println("KTC done");
    }
}
