package io.staticfleet.examples.streams;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.config.SslConfigs;
import org.apache.kafka.streams.StreamsConfig;

/**
 * The operator's environment contract (docs/operator.md, "The consumer contract") as Kafka Streams settings.
 *
 * <p>{@code KAFKA_GROUP_ID} is the {@code application.id}; {@code KAFKA_GROUP_INSTANCE_ID} is the base
 * {@code group.instance.id}, which Kafka Streams suffixes with "-" and the thread index for each stream
 * thread's consumer. Any Streams, consumer or producer setting can be given as {@code STREAMS_} and its name
 * in capitals with dots as underscores ({@code STREAMS_COMMIT_INTERVAL_MS=1000}); those come last and win.
 */
final class Settings {
    static final String STREAMS_PREFIX = "STREAMS_";
    static final int DEFAULT_THREADS = 2;

    /** A setting the application cannot start without, or one it cannot read. */
    static final class Invalid extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Invalid(String message) {
            super(message);
        }
    }

    final Properties streams;
    final List<String> topics;
    final String outputTopic;
    final String instanceId;
    final Path stateDir;
    final Path readyFile;
    /** The port of the HTTP readiness endpoint; 0: none (READY_PORT not set). */
    final int readyPort;
    final long progressIntervalMs;
    final long closeTimeoutMs;

    private Settings(
        Properties streams, List<String> topics, String outputTopic, String instanceId, Path stateDir,
        Path readyFile, int readyPort, long progressIntervalMs, long closeTimeoutMs
    ) {
        this.streams = streams;
        this.topics = topics;
        this.outputTopic = outputTopic;
        this.instanceId = instanceId;
        this.stateDir = stateDir;
        this.readyFile = readyFile;
        this.readyPort = readyPort;
        this.progressIntervalMs = progressIntervalMs;
        this.closeTimeoutMs = closeTimeoutMs;
    }

    static Settings fromEnvironment(Map<String, String> env) {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, required(env, "KAFKA_BOOTSTRAP_SERVERS"));
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, required(env, "KAFKA_GROUP_ID"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, DEFAULT_THREADS);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        Path stateDir = Path.of(env.getOrDefault("STATE_DIR", "./state")).toAbsolutePath();
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, env.getOrDefault("AUTO_OFFSET_RESET", "earliest"));

        // Static membership unless KAFKA_MEMBERSHIP=dynamic (the baseline the benchmarks compare with).
        String membership = env.getOrDefault("KAFKA_MEMBERSHIP", "static").trim().toLowerCase(Locale.ROOT);
        if (!membership.equals("static") && !membership.equals("dynamic") && !membership.isEmpty()) {
            throw new Invalid("KAFKA_MEMBERSHIP must be static or dynamic, not '" + membership + "'");
        }
        String instanceId = env.getOrDefault("KAFKA_GROUP_INSTANCE_ID", "");
        if (!membership.equals("dynamic")) {
            instanceId = required(env, "KAFKA_GROUP_INSTANCE_ID");
            props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }
        if (!instanceId.isEmpty()) {
            props.put(StreamsConfig.CLIENT_ID_CONFIG, instanceId);
        }
        copyMilliseconds(env, "KAFKA_SESSION_TIMEOUT_MS", ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, props);
        copyMilliseconds(env, "KAFKA_HEARTBEAT_INTERVAL_MS", ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, props);
        // The rebalance timeout a classic consumer sends is its max.poll.interval.ms.
        copyMilliseconds(env, "KAFKA_REBALANCE_TIMEOUT_MS", ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, props);
        props.putAll(security(env));

        for (Map.Entry<String, String> entry : env.entrySet()) {
            String name = entry.getKey();
            if (name.startsWith(STREAMS_PREFIX) && name.length() > STREAMS_PREFIX.length()) {
                props.put(propertyName(name.substring(STREAMS_PREFIX.length())), entry.getValue());
            }
        }

        List<String> topics = new ArrayList<>();
        for (String topic : required(env, "KAFKA_TOPICS").split(",")) {
            if (!topic.isBlank()) {
                topics.add(topic.strip());
            }
        }
        if (topics.isEmpty()) {
            throw new Invalid("KAFKA_TOPICS names no topic");
        }
        return new Settings(
            props,
            List.copyOf(topics),
            env.getOrDefault("OUTPUT_TOPIC", "order-counts"),
            instanceId,
            stateDir,
            Path.of(env.getOrDefault("READY_FILE", "./ready")).toAbsolutePath(),
            port(env, "READY_PORT"),
            milliseconds(env, "PROGRESS_INTERVAL_MS", 10_000),
            milliseconds(env, "CLOSE_TIMEOUT_MS", 30_000)
        );
    }

    /** {@code COMMIT_INTERVAL_MS} is {@code commit.interval.ms}. */
    static String propertyName(String envSuffix) {
        return envSuffix.toLowerCase(Locale.ROOT).replace('_', '.');
    }

    /**
     * KAFKA_SECURITY_PROTOCOL, KAFKA_SASL_MECHANISM/USERNAME/PASSWORD and the PEM files named by
     * KAFKA_SSL_CA_LOCATION, KAFKA_SSL_CERTIFICATE_LOCATION and KAFKA_SSL_KEY_LOCATION (a PKCS#8 key).
     */
    static Properties security(Map<String, String> env) {
        Properties props = new Properties();
        String protocol = env.getOrDefault("KAFKA_SECURITY_PROTOCOL", "PLAINTEXT").trim().toUpperCase(Locale.ROOT);
        if (protocol.isEmpty()) {
            protocol = "PLAINTEXT";
        }
        props.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, protocol);
        String mechanism = env.getOrDefault("KAFKA_SASL_MECHANISM", "");
        if (protocol.startsWith("SASL_")) {
            if (mechanism.isEmpty()) {
                throw new Invalid("KAFKA_SECURITY_PROTOCOL is " + protocol + " but KAFKA_SASL_MECHANISM is not set");
            }
            String module = switch (mechanism) {
                case "PLAIN" -> "org.apache.kafka.common.security.plain.PlainLoginModule";
                case "SCRAM-SHA-256", "SCRAM-SHA-512" -> "org.apache.kafka.common.security.scram.ScramLoginModule";
                default -> throw new Invalid("KAFKA_SASL_MECHANISM " + mechanism + " is not PLAIN, SCRAM-SHA-256 "
                    + "or SCRAM-SHA-512");
            };
            props.put(SaslConfigs.SASL_MECHANISM, mechanism);
            props.put(SaslConfigs.SASL_JAAS_CONFIG, module + " required username=\""
                + jaasEscape(required(env, "KAFKA_SASL_USERNAME")) + "\" password=\""
                + jaasEscape(required(env, "KAFKA_SASL_PASSWORD")) + "\";");
        }
        if (protocol.endsWith("SSL")) {
            String ca = env.getOrDefault("KAFKA_SSL_CA_LOCATION", "");
            if (!ca.isEmpty()) {
                props.put(SslConfigs.SSL_TRUSTSTORE_TYPE_CONFIG, "PEM");
                props.put(SslConfigs.SSL_TRUSTSTORE_LOCATION_CONFIG, ca);
            }
            String cert = env.getOrDefault("KAFKA_SSL_CERTIFICATE_LOCATION", "");
            String key = env.getOrDefault("KAFKA_SSL_KEY_LOCATION", "");
            if (!cert.isEmpty() && !key.isEmpty()) {
                props.put(SslConfigs.SSL_KEYSTORE_TYPE_CONFIG, "PEM");
                props.put(SslConfigs.SSL_KEYSTORE_CERTIFICATE_CHAIN_CONFIG, read(cert, "KAFKA_SSL_CERTIFICATE_LOCATION"));
                props.put(SslConfigs.SSL_KEYSTORE_KEY_CONFIG, read(key, "KAFKA_SSL_KEY_LOCATION"));
            }
        }
        return props;
    }

    private static String jaasEscape(String value) {
        return value.replace("\\", "\\\\").replace("\"", "\\\"");
    }

    private static String read(String path, String variable) {
        try {
            return Files.readString(Path.of(path));
        } catch (IOException e) {
            throw new Invalid(variable + " names " + path + ", which cannot be read: " + e.getMessage());
        }
    }

    private static String required(Map<String, String> env, String name) {
        String value = env.get(name);
        if (value == null || value.isBlank()) {
            throw new Invalid("environment variable " + name + " is not set");
        }
        return value.strip();
    }

    private static long milliseconds(Map<String, String> env, String name, long fallback) {
        String value = env.get(name);
        if (value == null || value.isBlank()) {
            return fallback;
        }
        try {
            long parsed = Long.parseLong(value.strip());
            if (parsed < 0) {
                throw new NumberFormatException("negative");
            }
            return parsed;
        } catch (NumberFormatException e) {
            throw new Invalid(name + " must be a number of milliseconds, not '" + value + "'");
        }
    }

    /** A TCP port, 1 to 65535; 0 when the variable is not set. */
    private static int port(Map<String, String> env, String name) {
        String value = env.get(name);
        if (value == null || value.isBlank()) {
            return 0;
        }
        try {
            int parsed = Integer.parseInt(value.strip());
            if (parsed < 1 || parsed > 65_535) {
                throw new NumberFormatException("out of range");
            }
            return parsed;
        } catch (NumberFormatException e) {
            throw new Invalid(name + " must be a port number from 1 to 65535, not '" + value + "'");
        }
    }

    private static void copyMilliseconds(Map<String, String> env, String name, String property, Properties props) {
        if (env.get(name) != null && !env.get(name).isBlank()) {
            props.put(property, Long.toString(milliseconds(env, name, 0)));
        }
    }
}
