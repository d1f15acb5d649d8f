package io.staticfleet.examples.streams;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * A Kafka Streams application for a StaticConsumerGroup: counts the records of each key of the input topics
 * (the example producer's {@code order-N} keys) in a RocksDB store and writes every new count to the output
 * topic, at least once.
 *
 * <p>The topology reads and groups by the key the records already have, so it has no repartition topic: its
 * only internal topic is the store's changelog. Each stream thread is one member of the group
 * ({@code KAFKA_GROUP_ID}) with the static id {@code KAFKA_GROUP_INSTANCE_ID + "-" + thread index}.
 *
 * <p>Lifecycle: READY_FILE exists while the instance is RUNNING (an exec readiness probe tests it), and so
 * long {@code GET /ready} on READY_PORT, when set, answers 200 (an httpGet readiness probe asks it). SIGTERM
 * closes the instance without LeaveGroup (static members stay in the group for their session timeout, so a
 * restart within it costs no rebalance) and exits. A stream thread's fatal error shuts the instance down and
 * exits non-zero so that Kubernetes restarts the pod; FENCED_INSTANCE_ID (another process took a thread's
 * instance id) exits with 82, the Kafka error code, and writes it to /dev/termination-log.
 */
public final class OrderCounts {
    static final String STORE = "order-counts";
    static final int FENCED_EXIT_CODE = 82;
    static final int CONFIG_EXIT_CODE = 2;

    private OrderCounts() {
    }

    static Topology topology(List<String> topics, String outputTopic, Watch watch) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(topics, Consumed.with(Serdes.String(), Serdes.String()))
            .peek((key, value) -> watch.recordProcessed())
            .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(STORE)
                .withKeySerde(Serdes.String())
                .withValueSerde(Serdes.Long()))
            .toStream()
            .mapValues(count -> Long.toString(count))
            .to(outputTopic, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    public static void main(String[] args) {
        System.exit(run(System.getenv()));
    }

    static int run(Map<String, String> env) {
        Settings settings;
        try {
            settings = Settings.fromEnvironment(env);
        } catch (Settings.Invalid e) {
            Events.log("config_error", "message", e.getMessage());
            return CONFIG_EXIT_CODE;
        }
        Watch watch = new Watch(settings.instanceId, settings.readyFile);
        watch.clearReady();
        // Serving from the start: a probe that finds the port closed counts as a failure too, but a 503
        // says the process is up and not yet RUNNING.
        ReadyEndpoint endpoint = null;
        if (settings.readyPort != 0) {
            try {
                endpoint = ReadyEndpoint.start(settings.readyPort, watch::ready);
            } catch (IOException e) {
                Events.log("config_error", "message", "READY_PORT " + settings.readyPort + " cannot be served: " + e);
                return CONFIG_EXIT_CODE;
            }
        }
        try {
            return runStreams(settings, watch);
        } finally {
            if (endpoint != null) {
                endpoint.close();
            }
        }
    }

    private static int runStreams(Settings settings, Watch watch) {
        Properties props = settings.streams;
        try {
            ensureOutputTopic(props, settings.topics, settings.outputTopic);
        } catch (Exception e) {
            Events.log("output_topic_error", "topic", settings.outputTopic, "message", e.toString());
        }

        Topology topology = topology(settings.topics, settings.outputTopic, watch);
        KafkaStreams streams;
        try {
            streams = new KafkaStreams(topology, props);
        } catch (KafkaException e) {
            // A setting Kafka Streams refuses, or a state directory it cannot create.
            Events.log("fatal", "error", e.getClass().getSimpleName(), "message", String.valueOf(e.getMessage()),
                "cause", rootCause(e).toString(), "exit_code", 1);
            return 1;
        }
        watch.attach(streams);
        streams.setStateListener(watch);
        streams.setGlobalStateRestoreListener(watch);

        AtomicInteger exitCode = new AtomicInteger(0);
        CountDownLatch stop = new CountDownLatch(1);
        streams.setUncaughtExceptionHandler(error -> {
            Optional<FencedInstanceIdException> fenced = causeOf(error, FencedInstanceIdException.class);
            int code = fenced.isPresent() ? FENCED_EXIT_CODE : 1;
            exitCode.compareAndSet(0, code);
            Events.log("fatal", "error", error.getClass().getSimpleName(), "message", String.valueOf(error.getMessage()),
                "cause", rootCause(error).toString(), "exit_code", code);
            terminationMessage((fenced.isPresent() ? "FENCED_INSTANCE_ID: " : "") + rootCause(error));
            stop.countDown();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });

        CountDownLatch closed = new CountDownLatch(1);
        Thread hook = new Thread(() -> {
            stop.countDown();
            try {
                closed.await(settings.closeTimeoutMs + 5_000, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "shutdown");
        Runtime.getRuntime().addShutdownHook(hook);

        Events.log("started", "instance", settings.instanceId, "group", props.get(StreamsConfig.APPLICATION_ID_CONFIG),
            "topics", settings.topics, "output_topic", settings.outputTopic,
            "threads", String.valueOf(props.get(StreamsConfig.NUM_STREAM_THREADS_CONFIG)),
            "state_dir", settings.stateDir.toString(), "store", STORE);
        try {
            streams.start();
            while (!stop.await(settings.progressIntervalMs, TimeUnit.MILLISECONDS)) {
                watch.logProgress();
                if (watch.state() == KafkaStreams.State.ERROR || watch.state() == KafkaStreams.State.NOT_RUNNING) {
                    exitCode.compareAndSet(0, 1);
                    break;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            // No LeaveGroup: a static member keeps its tasks while it restarts within the session timeout.
            boolean done = streams.close(Duration.ofMillis(settings.closeTimeoutMs));
            watch.clearReady();
            watch.logProgress();
            Events.log("stopped", "instance", settings.instanceId, "exit_code", exitCode.get(), "closed", done);
            closed.countDown();
        }
        return exitCode.get();
    }

    /**
     * Creates the output topic with as many partitions as the first input topic when it does not exist:
     * Kafka Streams creates its internal topics but not the topics it writes to.
     */
    static void ensureOutputTopic(Properties streamsProps, List<String> inputs, String output) throws Exception {
        Properties props = new Properties();
        for (Map.Entry<Object, Object> entry : streamsProps.entrySet()) {
            if (AdminClientConfig.configNames().contains(String.valueOf(entry.getKey()))) {
                props.put(entry.getKey(), entry.getValue());
            }
        }
        props.remove(AdminClientConfig.CLIENT_ID_CONFIG);
        try (Admin admin = Admin.create(props)) {
            if (admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(output)) {
                return;
            }
            TopicDescription input = admin.describeTopics(List.of(inputs.get(0)))
                .allTopicNames().get(30, TimeUnit.SECONDS).get(inputs.get(0));
            int partitions = input.partitions().size();
            try {
                admin.createTopics(List.of(new NewTopic(output, Optional.of(partitions), Optional.empty())))
                    .all().get(30, TimeUnit.SECONDS);
                Events.log("output_topic_created", "topic", output, "partitions", partitions);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
        }
    }

    private static <T extends Throwable> Optional<T> causeOf(Throwable error, Class<T> type) {
        for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (type.isInstance(t)) {
                return Optional.of(type.cast(t));
            }
        }
        return Optional.empty();
    }

    private static Throwable rootCause(Throwable error) {
        Throwable t = error;
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t;
    }

    /** Kubernetes shows /dev/termination-log as the container's termination message. */
    private static void terminationMessage(String message) {
        Path log = Path.of("/dev/termination-log");
        if (Files.exists(log)) {
            try {
                Files.writeString(log, message + "\n", StandardOpenOption.APPEND);
            } catch (IOException e) {
                Events.log("termination_log_error", "message", e.toString());
            }
        }
    }
}
