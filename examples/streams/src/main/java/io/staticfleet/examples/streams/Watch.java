package io.staticfleet.examples.streams;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.processor.StateRestoreListener;

/**
 * What users of Kafka Streams watch, as JSON lines: state transitions (every entry into REBALANCING counted),
 * records restored per store (the cost of a rebalance for a stateful app), records processed, and the tasks
 * each stream thread's member holds once the instance is RUNNING. It also keeps the readiness: the readiness
 * file present, and {@link #ready()} true, while the instance is RUNNING.
 */
final class Watch implements KafkaStreams.StateListener, StateRestoreListener {
    private static final Pattern THREAD_INDEX = Pattern.compile("-StreamThread-(\\d+)$");

    private final String instanceId;
    private final Path readyFile;
    private final LongAdder processed = new LongAdder();
    private final AtomicLong processedReported = new AtomicLong();
    private final AtomicInteger rebalances = new AtomicInteger();
    private final Map<String, LongAdder> restored = new ConcurrentHashMap<>();
    private volatile KafkaStreams streams;
    private volatile KafkaStreams.State state = KafkaStreams.State.CREATED;

    Watch(String instanceId, Path readyFile) {
        this.instanceId = instanceId;
        this.readyFile = readyFile;
    }

    void attach(KafkaStreams streams) {
        this.streams = streams;
    }

    void recordProcessed() {
        processed.increment();
    }

    KafkaStreams.State state() {
        return state;
    }

    /** Whether the instance is RUNNING, as the readiness file says; what the HTTP endpoint answers. */
    boolean ready() {
        return state == KafkaStreams.State.RUNNING;
    }

    @Override
    public void onChange(KafkaStreams.State newState, KafkaStreams.State oldState) {
        state = newState;
        if (newState == KafkaStreams.State.REBALANCING) {
            rebalances.incrementAndGet();
        }
        Events.log("state", "from", oldState.name(), "to", newState.name(), "rebalances", rebalances.get());
        if (newState == KafkaStreams.State.RUNNING) {
            logTasks();
            markReady(true);
        } else {
            markReady(false);
        }
    }

    private void logTasks() {
        KafkaStreams current = streams;
        if (current == null) {
            return;
        }
        List<Map<String, Object>> threads = new ArrayList<>();
        for (ThreadMetadata thread : current.metadataForLocalThreads()) {
            Map<String, Object> entry = new TreeMap<>();
            entry.put("thread", thread.threadName());
            entry.put("member", memberInstanceId(thread.threadName()));
            entry.put("active", taskIds(thread.activeTasks()));
            entry.put("standby", taskIds(thread.standbyTasks()));
            List<String> partitions = new ArrayList<>();
            for (TaskMetadata task : thread.activeTasks()) {
                for (TopicPartition partition : task.topicPartitions()) {
                    partitions.add(partition.topic() + "-" + partition.partition());
                }
            }
            partitions.sort(null);
            entry.put("partitions", partitions);
            threads.add(entry);
        }
        threads.sort((a, b) -> String.valueOf(a.get("thread")).compareTo(String.valueOf(b.get("thread"))));
        Events.log("tasks", "instance", instanceId, "threads", threads);
    }

    /** The thread's group.instance.id: Kafka Streams appends "-" and the thread index to the base id. */
    private Object memberInstanceId(String threadName) {
        Matcher match = THREAD_INDEX.matcher(threadName);
        if (instanceId.isEmpty() || !match.find()) {
            return null;
        }
        return instanceId + "-" + match.group(1);
    }

    private static List<String> taskIds(Iterable<TaskMetadata> tasks) {
        List<String> ids = new ArrayList<>();
        for (TaskMetadata task : tasks) {
            ids.add(task.taskId().toString());
        }
        ids.sort(null);
        return ids;
    }

    private void markReady(boolean ready) {
        try {
            if (ready) {
                Files.createDirectories(readyFile.toAbsolutePath().getParent());
                if (!Files.exists(readyFile)) {
                    Files.createFile(readyFile);
                }
            } else {
                Files.deleteIfExists(readyFile);
            }
        } catch (IOException e) {
            Events.log("ready_file_error", "path", readyFile.toString(), "message", e.toString());
        }
    }

    void clearReady() {
        markReady(false);
    }

    @Override
    public void onRestoreStart(TopicPartition partition, String store, long startOffset, long endOffset) {
        Events.log("restore_started", "store", store, "partition", partition.toString(),
            "start_offset", startOffset, "end_offset", endOffset);
    }

    @Override
    public void onBatchRestored(TopicPartition partition, String store, long batchEndOffset, long numRestored) {
        restored.computeIfAbsent(store, s -> new LongAdder()).add(numRestored);
    }

    @Override
    public void onRestoreEnd(TopicPartition partition, String store, long totalRestored) {
        Events.log("restore_ended", "store", store, "partition", partition.toString(), "restored", totalRestored);
    }

    @Override
    public void onRestoreSuspended(TopicPartition partition, String store, long totalRestored) {
        Events.log("restore_suspended", "store", store, "partition", partition.toString(),
            "restored", totalRestored);
    }

    /** Records processed since the last report and in all, records restored per store, and the state. */
    void logProgress() {
        long total = processed.sum();
        long since = total - processedReported.getAndSet(total);
        Events.log("progress", "processed", since, "processed_total", total, "restored", restoredByStore(),
            "state", state.name(), "rebalances", rebalances.get());
    }

    Map<String, Long> restoredByStore() {
        Map<String, Long> totals = new TreeMap<>();
        restored.forEach((store, count) -> totals.put(store, count.sum()));
        return totals;
    }

    long processedTotal() {
        return processed.sum();
    }

    int rebalances() {
        return rebalances.get();
    }
}
