package io.staticfleet.conformance;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One Java KafkaConsumer (the classic group protocol, or with {@code --group-protocol consumer} Kafka 4's
 * consumer group protocol of KIP-848) in its own process, for the real-client tests:
 *
 * <pre>
 *   java -jar staticfleet-java-consumer.jar --bootstrap HOST:PORT --group G --topic T [--instance ID]
 *       [--session-ms 10000] [--heartbeat-ms 500] [--exit-after-records N] [--group-protocol consumer]
 * </pre>
 *
 * <p>With {@code --instance} it is a static member ({@code group.instance.id}, also its client id); without,
 * a dynamic one. It commits after every batch and prints one JSON object per line on stdout:
 * {@code started}, {@code assigned} (partitions, the group generation and member id the assignment came
 * with), {@code revoked}, {@code lost}, {@code records} (count), {@code committed} (offsets), {@code fatal}
 * (the exception's class and message) and {@code stopped}. SIGTERM closes the consumer (a static member sends
 * no LeaveGroup; on the consumer protocol it leaves with epoch -2, keeping its partitions for its return),
 * SIGKILL is a crash; {@code --exit-after-records} closes once that many records were
 * consumed and committed.
 */
public final class ConsumerDriver {
    private ConsumerDriver() {
    }

    public static void main(String[] args) throws InterruptedException {
        Map<String, String> options = options(args);
        String instance = options.get("instance");
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, require(options, "bootstrap"));
        props.put(ConsumerConfig.GROUP_ID_CONFIG, require(options, "group"));
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        String protocol = options.getOrDefault("group-protocol", "classic");
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (protocol.equals("classic")) {
            // The consumer protocol's session and heartbeat are the coordinator's to set (KIP-848).
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, options.getOrDefault("session-ms", "10000"));
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, options.getOrDefault("heartbeat-ms", "500"));
        }
        if (instance != null) {
            props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance);
            props.put(ConsumerConfig.CLIENT_ID_CONFIG, instance);
        }
        String topic = require(options, "topic");
        long exitAfter = Long.parseLong(options.getOrDefault("exit-after-records", "-1"));

        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                closed.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "shutdown"));

        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                emit("revoked", "partitions", numbers(partitions));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                ConsumerGroupMetadata group = consumer.groupMetadata();
                emit("assigned", "partitions", numbers(consumer.assignment()), "added", numbers(partitions),
                    "generation", group.generationId(), "member_id", group.memberId());
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                emit("lost", "partitions", numbers(partitions));
            }
        });
        emit("started", "instance", instance, "group", props.get(ConsumerConfig.GROUP_ID_CONFIG));
        long consumed = 0;
        int status = 0;
        try {
            while (exitAfter < 0 || consumed < exitAfter) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> record : records) {
                    offsets.put(new TopicPartition(record.topic(), record.partition()),
                        new OffsetAndMetadata(record.offset() + 1));
                }
                consumed += records.count();
                emit("records", "count", records.count());
                consumer.commitSync(offsets);
                Map<String, Object> committed = new TreeMap<>();
                offsets.forEach((tp, offset) -> committed.put(Integer.toString(tp.partition()), offset.offset()));
                emit("committed", "offsets", committed);
            }
        } catch (WakeupException e) {
            // SIGTERM: close below.
        } catch (KafkaException e) {
            emit("fatal", "name", e.getClass().getSimpleName(), "error", String.valueOf(e.getMessage()));
            status = 3;
        } finally {
            consumer.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(20)));
            emit("stopped", "status", status);
            closed.countDown();
        }
        System.exit(status);
    }

    private static List<Integer> numbers(Collection<TopicPartition> partitions) {
        List<Integer> out = new ArrayList<>();
        for (TopicPartition partition : partitions) {
            out.add(partition.partition());
        }
        out.sort(null);
        return out;
    }

    private static Map<String, String> options(String[] args) {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --name value, got " + args[i]);
            }
            options.put(args[i].substring(2), args[++i]);
        }
        return options;
    }

    private static String require(Map<String, String> options, String name) {
        String value = options.get(name);
        if (value == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return value;
    }

    private static void emit(String event, Object... fields) {
        StringBuilder line = new StringBuilder("{\"event\": ").append(quote(event));
        for (int i = 0; i < fields.length; i += 2) {
            line.append(", ").append(quote((String) fields[i])).append(": ").append(value(fields[i + 1]));
        }
        System.out.println(line.append('}'));
        System.out.flush();
    }

    private static String value(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof Number) {
            return value.toString();
        }
        if (value instanceof Collection<?> items) {
            List<String> parts = new ArrayList<>();
            for (Object item : items) {
                parts.add(value(item));
            }
            return "[" + String.join(", ", parts) + "]";
        }
        if (value instanceof Map<?, ?> map) {
            List<String> parts = new ArrayList<>();
            map.forEach((k, v) -> parts.add(quote(String.valueOf(k)) + ": " + value(v)));
            return "{" + String.join(", ", parts) + "}";
        }
        return quote(value.toString());
    }

    private static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
