/*
 * Interop checks with Apache Kafka's own tools, run against any bootstrap server (Kafka or staticfleet).
 *
 *   java -cp '<kafka lib>/*' GroupTool.java describe-members <bootstrap> <group>
 *       runs the consumer-group command: --describe --members --verbose
 *   java -cp '<kafka lib>/*' GroupTool.java remove-members <bootstrap> <group> <instance id>...
 *       calls Admin.removeMembersFromConsumerGroup for the given group.instance.ids and prints one line per
 *       instance id: "<instance id> NONE" or "<instance id> <exception class>"; exits 0 when all were removed,
 *       1 when any was not, 2 on a usage error.
 */

import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupResult;
import org.apache.kafka.tools.consumer.group.ConsumerGroupCommand;

public final class GroupTool {
    private GroupTool() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: GroupTool describe-members|remove-members <bootstrap> <group> [instance id...]");
            System.exit(2);
        }
        String command = args[0];
        String bootstrap = args[1];
        String group = args[2];
        switch (command) {
            case "describe-members":
                ConsumerGroupCommand.main(new String[] {
                    "--bootstrap-server", bootstrap, "--describe", "--group", group, "--members", "--verbose"
                });
                break;
            case "remove-members":
                System.exit(removeMembers(bootstrap, group, List.of(args).subList(3, args.length)));
                break;
            default:
                System.err.println("unknown command " + command);
                System.exit(2);
        }
    }

    private static int removeMembers(String bootstrap, String group, List<String> instanceIds) throws Exception {
        if (instanceIds.isEmpty()) {
            System.err.println("remove-members needs at least one group.instance.id");
            return 2;
        }
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        List<MemberToRemove> members = new ArrayList<>();
        for (String id : instanceIds) {
            members.add(new MemberToRemove(id));
        }
        int status = 0;
        try (Admin admin = Admin.create(props)) {
            RemoveMembersFromConsumerGroupResult result =
                admin.removeMembersFromConsumerGroup(group, new RemoveMembersFromConsumerGroupOptions(members));
            for (MemberToRemove member : members) {
                String outcome = "NONE";
                try {
                    result.memberResult(member).get(30, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    outcome = e.getCause().getClass().getSimpleName();
                    status = 1;
                }
                System.out.println(member.groupInstanceId() + " " + outcome);
            }
        }
        return status;
    }
}
