// kchaos's share-group members (KIP-932) on the Kafka Java client: the share workload's consumers, compiled only
// against kafka-clients 4.2 or later (workloads/java_build.py), whose KafkaShareConsumer is production-ready.
//
// The harness (workloads/share/members.py) starts it and writes one JSON line on stdin:
//   {"consumer":{..settings..},"topic":"t","group":"g","members":[40000,40001],"drainers":[40002],
//    "mix":{"accept":90,"release":6,"reject":2,"none":2},"lock_ms":15000,"commit":"sync","seed":42,"t0_ns":..,
//    "path":".."}
// Each member process is a KafkaShareConsumer of the group, on a thread of its own. It polls (share-poll). With
// "commit" sync or async (explicit acknowledgement mode) it acknowledges each record as its generator (seeded from
// the seed and the process) draws from the mix and commits with commitSync or commitAsync (share-ack). A record
// drawn `none` is left unacknowledged while the member waits past its acquisition lock (the member acknowledges
// and commits the others first); then it is acknowledged ACCEPT, a commit that should fail, since the lock is gone
// and the record may be another's. With "commit" implicit (implicit acknowledgement mode) the next poll accepts
// what the last one returned: a share-ack of them is invoked just before that poll. An asynchronous share-ack
// (async, implicit) completes when Kafka's acknowledgement commit callback has reported each of its records, which
// Kafka calls inside a later poll (or commit, or close) of the member: such a share-ack may complete while a poll
// is outstanding, and a member may have several open. Drainers always acknowledge explicitly with commitSync.
// Every op is a line of `path` in the history's own form, on the history's clock (KchaosQueueClients.Lines).
// A line "crash PROCESS MS" on stdin (crash-client): that member, after its next poll and before acknowledging what
// it returned, records a share-leave of type info and leaves its consumer unclosed, then starts a new one as the
// same process MS later.
// A line "stop" on stdin: the members finish their current step, close what crashes abandoned and their own
// consumers (share-leave), and the JVM prints
// {"stopped":true}. Then a line "drain TIMEOUT_MS": the drainer processes join the group, poll and ACCEPT
// everything until the group's lag is 0 on every partition with nothing more delivered (or, where the lag is
// unknown and none is above 0, with nothing delivered for a lock's length), or the timeout; the first
// drainer records the group's state (share-state: each partition's start offset, high watermark and lag, from
// the Admin API), the JVM prints {"done":true,"partitions":STATE} and exits. End of stdin (the harness is gone):
// write out what was recorded and exit.
// Before the members join it sets the group's configuration (share.auto.offset.reset=earliest, the spec's lock_ms
// and, where the line has that group config ("group_delivery_limit"), delivery_limit) and prints {"ready":true},
// or {"error":".."} and exits 2. Every 200 ms it prints the deliveries so far as the queue clients print their
// counts ("polled").
import com.fasterxml.jackson.databind.JsonNode;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidRecordStateException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class KchaosShareMembers {
    static final String[] KINDS = {"accept", "release", "reject", "none"};

    public static void main(String[] args) throws Exception {
        PrintStream harness = KchaosQueueClients.OUT;  // made from System.out as its class loads: before the swap
        System.setOut(System.err);  // nothing but the JSON lines below may reach the harness's pipe
        harness.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String first = in.readLine();
        if (first == null) return;
        JsonNode spec = KchaosQueueClients.JSON.readTree(first);
        String topic = spec.get("topic").asText();
        KchaosQueueClients.Lines lines = new KchaosQueueClients.Lines(spec.get("path").asText(), topic,
                                                                       spec.get("t0_ns").asLong());
        Runtime.getRuntime().addShutdownHook(new Thread(lines::flush, "flush-at-exit"));
        Thread flusher = new Thread(() -> lines.flushEvery(KchaosQueueClients.FLUSH_NS), "flush");
        flusher.setDaemon(true);
        flusher.start();
        Map<String, Object> adminProps = new HashMap<>();
        adminProps.put("bootstrap.servers", spec.get("consumer").get("bootstrap.servers").asText());
        String group = spec.get("group").asText();
        try (Admin admin = Admin.create(adminProps)) {
            // The group's own settings, before any member joins: reads from the start, the run's lock and limit (a
            // line without the group config share.delivery.count.limit has the brokers' limit, as kchaos checked).
            List<org.apache.kafka.clients.admin.AlterConfigOp> settings = new ArrayList<>(List.of(
                set("share.auto.offset.reset", "earliest"),
                set("share.record.lock.duration.ms", spec.get("lock_ms").asText())));
            if (spec.path("group_delivery_limit").asBoolean(true)) {
                settings.add(set("share.delivery.count.limit", spec.get("delivery_limit").asText()));
            }
            admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group), settings))
                .all().get(60, TimeUnit.SECONDS);
        } catch (Exception e) {
            say("{\"error\":" + KchaosQueueClients.JSON.writeValueAsString("the share group's configuration: " + e) + "}");
            System.exit(2);
        }
        List<Member> members = new ArrayList<>();
        for (JsonNode p : spec.get("members")) members.add(new Member(spec, p.asLong(), lines, false));
        for (Member m : members) m.thread.start();
        Thread counter = new Thread(() -> {
            while (!lines.closed) {
                KchaosQueueClients.printCounts(lines, false);
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(200));
            }
        }, "counts");
        counter.setDaemon(true);
        counter.start();
        say("{\"ready\":true}");

        String line;  // "crash PROCESS MS" lines until "stop"
        while ((line = waitFor(in, "")) != null && !line.startsWith("stop")) {
            String[] w = line.split("\\s+");
            if (w[0].equals("crash") && w.length == 3) {
                for (Member m : members) {
                    if (m.process == Long.parseLong(w[1])) m.restartAfterMs = Long.parseLong(w[2]);
                }
            }
        }
        for (Member m : members) m.stopping = true;
        if (line == null) {  // the harness is gone
            lines.flush();
            Runtime.getRuntime().halt(1);
        }
        for (Member m : members) m.thread.join();
        lines.flush();
        say("{\"stopped\":true}");
        line = waitFor(in, "drain");
        if (line == null) {
            lines.flush();
            Runtime.getRuntime().halt(1);
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Long.parseLong(line.split("\\s+")[1]));
        List<Member> drainers = new ArrayList<>();
        for (JsonNode p : spec.get("drainers")) drainers.add(new Member(spec, p.asLong(), lines, true));
        for (Member d : drainers) d.thread.start();
        try (Admin admin = Admin.create(adminProps)) {
            long process = spec.get("drainers").get(0).asLong();
            String state = null;
            long lockNs = TimeUnit.MILLISECONDS.toNanos(spec.get("lock_ms").asLong());
            while (System.nanoTime() < deadline) {
                LockSupport.parkNanos(TimeUnit.SECONDS.toNanos(1));
                long quiet = System.nanoTime() - TimeUnit.SECONDS.toNanos(3);
                boolean idle = drainers.stream().allMatch(d -> d.lastDelivery.get() < quiet);
                // Nothing delivered for a lock's length: every record acquired before has come back or stays put.
                boolean settled = drainers.stream().allMatch(d -> d.lastDelivery.get() < quiet - lockNs);
                String now = groupState(admin, group, topic);
                if (now != null) state = now;
                if (idle && now != null && drained(now)) break;
                // Where the brokers report no lag (before 4.2) and no partition shows any, waiting longer cannot
                // make it known: the partitions stay undrained in the state recorded. (A lag that is unknown only
                // because the group's state cannot be read yet is waited for.)
                if (settled && now != null && NO_LAG.get() && !now.matches(".*\"lag\":[1-9].*")) break;
            }
            for (Member d : drainers) d.stopping = true;
            for (Member d : drainers) d.thread.join();
            lines.op(process, "invoke", "share-state", "");
            String last = groupState(admin, group, topic);
            if (last != null) state = last;
            if (state != null) lines.op(process, "ok", "share-state", ",\"partitions\":" + state);
            else lines.op(process, "info", "share-state", ",\"error\":\"the group's state could not be read\"");
            lines.close();
            say("{\"done\":true,\"partitions\":" + (state == null ? "null" : state) + "}");
        }
        System.exit(0);
    }

    static org.apache.kafka.clients.admin.AlterConfigOp set(String name, String value) {
        return new org.apache.kafka.clients.admin.AlterConfigOp(new org.apache.kafka.clients.admin.ConfigEntry(name, value),
                                                                org.apache.kafka.clients.admin.AlterConfigOp.OpType.SET);
    }

    static String waitFor(BufferedReader in, String word) throws IOException {
        for (String line; (line = in.readLine()) != null; ) {
            if (line.strip().startsWith(word)) return line.strip();
        }
        return null;
    }

    static void say(String line) {
        synchronized (KchaosQueueClients.OUT) {
            KchaosQueueClients.OUT.println(line);
            KchaosQueueClients.OUT.flush();
        }
    }

    /** Whether `groupState`'s answer has every partition's lag at 0 (none unknown, none above). */
    static boolean drained(String state) {
        return !state.matches(".*\"lag\":(-|[1-9]).*");
    }

    /** Set once the brokers answered a partition's state without its lag (brokers before 4.2). */
    static final AtomicBoolean NO_LAG = new AtomicBoolean();

    /** {"0":{"start":S,"end":HW,"lag":L},..}: the group's share-partition start offsets and lag (Admin), with each
     *  partition's high watermark; null when either could not be read. A partition the group has no state for yet
     *  has start -1 and lag -1, and so has one whose brokers report no lag while its start offset is below HW. */
    static String groupState(Admin admin, String group, String topic) {
        try {
            Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin
                .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group)
                .get(30, TimeUnit.SECONDS);
            int partitions = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS)
                .get(topic).partitions().size();
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (int p = 0; p < partitions; p++) latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> ends = admin.listOffsets(latest).all()
                .get(30, TimeUnit.SECONDS);
            StringBuilder b = new StringBuilder("{");
            for (int p = 0; p < partitions; p++) {
                TopicPartition tp = new TopicPartition(topic, p);
                SharePartitionOffsetInfo info = offsets.get(tp);
                long start = info == null ? -1 : info.startOffset();
                long end = ends.get(tp).offset();
                // Brokers before 4.2 report no lag. Every record below the start offset is acknowledged or archived,
                // so a start offset at the high watermark is a lag of 0; below it, the lag is unknown.
                if (info != null && info.lag().isEmpty()) NO_LAG.set(true);
                long lag = info == null ? -1 : info.lag().orElse(start >= 0 && start == end ? 0L : -1L);
                b.append(p == 0 ? "" : ",").append('"').append(p).append("\":{\"start\":").append(start)
                    .append(",\"end\":").append(end).append(",\"lag\":").append(lag).append('}');
            }
            return b.append('}').toString();
        } catch (Exception e) {
            System.err.println("share group state: " + e);
            return null;
        }
    }

    /** An asynchronous share-ack's records (partition, offset, kind) and the outcome of each, null until known. */
    static final class Pending {
        final List<long[]> records = new ArrayList<>();
        final List<String> kinds = new ArrayList<>();
        final List<String> outcomes = new ArrayList<>();

        void add(int partition, long offset, String kind, String outcome) {
            records.add(new long[] {partition, offset});
            kinds.add(kind);
            outcomes.add(outcome);
        }

        /** Gives the first record of (partition, offset) without an outcome this one; false when there is none. */
        boolean settle(int partition, long offset, String outcome) {
            for (int i = 0; i < records.size(); i++) {
                if (records.get(i)[0] == partition && records.get(i)[1] == offset && outcomes.get(i) == null) {
                    outcomes.set(i, outcome);
                    return true;
                }
            }
            return false;
        }

        boolean settled() {
            return !outcomes.contains(null);
        }

        /** `,"acks":[[p,o,kind,outcome],..]` (outcome "info" where none is known), then `tail`. */
        String acks(String tail) {
            StringBuilder b = new StringBuilder(",\"acks\":[");
            for (int i = 0; i < records.size(); i++) {
                b.append(i == 0 ? "[" : ",[").append(records.get(i)[0]).append(',').append(records.get(i)[1])
                    .append(",\"").append(kinds.get(i)).append("\",\"")
                    .append(outcomes.get(i) == null ? "info" : outcomes.get(i)).append("\"]");
            }
            return b.append(']').append(tail).toString();
        }
    }

    /** One member (or drainer) process: a KafkaShareConsumer on a thread of its own. */
    static final class Member {
        final long process;
        final boolean drainer;
        final String topic;
        final KchaosQueueClients.Lines lines;
        final Map<String, Object> props = new HashMap<>();
        final int[] mix = new int[KINDS.length];
        final int total;
        final long lockMs;
        final SplittableRandom random;
        final Thread thread;
        final AtomicLong lastDelivery = new AtomicLong(System.nanoTime());
        final List<KafkaShareConsumer<byte[], byte[]>> abandoned = new ArrayList<>();
        final String commit;  // sync, async or implicit (drainers: sync)
        // Asynchronous share-acks not yet completed, oldest first: their records' partitions, offsets, kinds and the
        // outcomes the callback reported so far. Only the member's own thread touches it (Kafka calls the callback
        // there).
        final List<Pending> pending = new ArrayList<>();
        List<ConsumerRecord<byte[], byte[]>> unacknowledged = List.of();  // implicit: what the next poll accepts
        volatile boolean stopping;
        volatile long restartAfterMs = -1;  // >= 0: crash at the next step, a new consumer that many ms later

        Member(JsonNode spec, long process, KchaosQueueClients.Lines lines, boolean drainer) {
            this.process = process;
            this.drainer = drainer;
            this.topic = spec.get("topic").asText();
            this.lines = lines;
            for (Map.Entry<String, JsonNode> e : spec.get("consumer").properties()) {
                props.put(e.getKey(), e.getValue().asText());
            }
            props.put("client.id", "s" + process);
            props.put("group.id", spec.get("group").asText());
            this.commit = drainer ? "sync" : spec.path("commit").asText("sync");
            props.put("share.acknowledgement.mode", commit.equals("implicit") ? "implicit" : "explicit");
            props.put("key.deserializer", ByteArrayDeserializer.class.getName());
            props.put("value.deserializer", ByteArrayDeserializer.class.getName());
            int sum = 0;
            for (int k = 0; k < KINDS.length; k++) {
                mix[k] = drainer ? (k == 0 ? 1 : 0) : spec.get("mix").path(KINDS[k]).asInt(0);
                sum += mix[k];
            }
            this.total = sum;
            this.lockMs = spec.get("lock_ms").asLong();
            this.random = new SplittableRandom(spec.get("seed").asLong() * 1_000_003L + process);
            this.thread = new Thread(this::run, (drainer ? "drainer-" : "member-") + process);
        }

        String draw() {
            int x = random.nextInt(total);
            for (int k = 0; k < KINDS.length; k++) {
                if (x < mix[k]) return KINDS[k];
                x -= mix[k];
            }
            return KINDS[0];
        }

        void run() {
            KafkaShareConsumer<byte[], byte[]> consumer = null;
            try {
                consumer = open();
                while (!stopping) {
                    if (!step(consumer)) {
                        // A crash, between a poll and its acknowledgements: the consumer is left as it is, unclosed,
                        // holding what the poll acquired until the locks run out.
                        long restart = restartAfterMs;
                        restartAfterMs = -1;
                        lines.op(process, "invoke", "share-leave", "");
                        lines.op(process, "info", "share-leave", ",\"error\":\"crashed (crash-client)\"");
                        abandoned.add(consumer);
                        consumer = null;
                        pending.clear();  // never completed: what the abandoned consumer's acks did is unknown
                        unacknowledged = List.of();
                        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(restart);
                        while (System.nanoTime() < until && !stopping) LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50));
                        if (stopping) break;
                        consumer = open();
                    }
                }
            } catch (RuntimeException e) {
                System.err.println("share member " + process + " died: " + e);
            } finally {
                // What crashes abandoned keeps its membership (its heartbeats run on), and the partitions assigned to
                // it: let go of it before the drain, as the other workloads let go of their abandoned consumers.
                for (KafkaShareConsumer<byte[], byte[]> c : abandoned) {
                    try {
                        c.close(Duration.ofSeconds(5));
                    } catch (RuntimeException e) {
                        System.err.println("share member " + process + ": closing an abandoned consumer: " + e);
                    }
                }
                if (consumer != null) {
                    if (!unacknowledged.isEmpty()) invokeAck(unacknowledged, accepts(unacknowledged.size()), Map.of());
                    lines.op(process, "invoke", "share-leave", "");
                    try {
                        consumer.close(Duration.ofSeconds(10));  // commits what is acknowledged; calls the callback
                        lines.op(process, "ok", "share-leave", "");
                    } catch (RuntimeException e) {
                        lines.op(process, "info", "share-leave", error(e));
                    }
                    for (Pending q : pending) {
                        lines.op(process, "info", "share-ack", q.acks(",\"error\":\"no acknowledgement callback by the close\""));
                    }
                    pending.clear();
                }
            }
        }

        /** One poll and its acknowledgements; false when a crash is due after the poll (nothing acknowledged). */
        KafkaShareConsumer<byte[], byte[]> open() {
            KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props);
            if (!commit.equals("sync")) consumer.setAcknowledgementCommitCallback(this::committed);
            consumer.subscribe(List.of(topic));
            return consumer;
        }

        boolean step(KafkaShareConsumer<byte[], byte[]> consumer) {
            if (!unacknowledged.isEmpty()) {  // implicit: this poll accepts what the last one returned
                invokeAck(unacknowledged, accepts(unacknowledged.size()), Map.of());
                unacknowledged = List.of();
            }
            lines.op(process, "invoke", "share-poll", "");
            ConsumerRecords<byte[], byte[]> polled;
            try {
                polled = consumer.poll(Duration.ofSeconds(1));
            } catch (KafkaException | IllegalStateException e) {
                lines.op(process, "info", "share-poll", error(e));
                return restartAfterMs < 0;
            }
            StringBuilder records = new StringBuilder(32 + 32 * polled.count()).append(",\"records\":[");
            boolean first = true;
            for (ConsumerRecord<byte[], byte[]> r : polled) {
                records.append(first ? "[" : ",[").append(r.partition()).append(',').append(r.offset()).append(',')
                    .append(KchaosQueueClients.Reader.decode(r.value())).append(',')
                    .append(r.deliveryCount().orElse((short) -1)).append(']');
                first = false;
            }
            lines.op(process, "ok", "share-poll", records.append(']'));
            lines.counts[4].addAndGet(polled.count());
            if (restartAfterMs >= 0) return false;
            if (polled.isEmpty()) return true;
            lastDelivery.set(System.nanoTime());
            if (commit.equals("implicit")) {
                List<ConsumerRecord<byte[], byte[]>> all = new ArrayList<>();
                polled.forEach(all::add);
                unacknowledged = all;
                return true;
            }
            List<ConsumerRecord<byte[], byte[]>> now = new ArrayList<>(), later = new ArrayList<>();
            List<String> kinds = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : polled) {
                String kind = draw();
                if (kind.equals("none")) {
                    later.add(r);
                } else {
                    now.add(r);
                    kinds.add(kind);
                }
            }
            acknowledge(consumer, now, kinds);
            if (later.isEmpty()) return true;
            // Held past the acquisition lock, unacknowledged: the broker may give them to another member meanwhile.
            long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(lockMs + 1000);
            while (System.nanoTime() < until && !stopping) LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(100));
            acknowledge(consumer, later, accepts(later.size()));
            return true;
        }

        static List<String> accepts(int n) {
            List<String> out = new ArrayList<>();
            for (int i = 0; i < n; i++) out.add("accept");
            return out;
        }

        void acknowledge(KafkaShareConsumer<byte[], byte[]> consumer, List<ConsumerRecord<byte[], byte[]>> rs,
                         List<String> kinds) {
            if (rs.isEmpty()) return;
            StringBuilder acks = new StringBuilder(",\"acks\":[");
            Map<TopicPartition, String> refused = new HashMap<>();
            for (int i = 0; i < rs.size(); i++) {
                ConsumerRecord<byte[], byte[]> r = rs.get(i);
                acks.append(i == 0 ? "[" : ",[").append(r.partition()).append(',').append(r.offset()).append(",\"")
                    .append(kinds.get(i)).append("\"]");
                try {
                    consumer.acknowledge(r, switch (kinds.get(i)) {
                        case "release" -> AcknowledgeType.RELEASE;
                        case "reject" -> AcknowledgeType.REJECT;
                        default -> AcknowledgeType.ACCEPT;
                    });
                } catch (IllegalStateException | KafkaException e) {
                    // The client refused it (a record whose lock it knows has expired): never sent.
                    refused.put(new TopicPartition(r.topic(), r.partition()), "fail");
                }
            }
            if (!commit.equals("sync")) {
                Pending q = invokeAck(rs, kinds, refused);
                try {
                    consumer.commitAsync();
                } catch (KafkaException | IllegalStateException e) {
                    pending.remove(q);
                    lines.op(process, "info", "share-ack", q.acks(error(e)));
                }
                return;
            }
            lines.op(process, "invoke", "share-ack", acks.append(']'));
            Map<TopicPartition, String> outcome = new HashMap<>();
            try {
                Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync(Duration.ofSeconds(30));
                for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : result.entrySet()) {
                    TopicPartition tp = e.getKey().topicPartition();
                    outcome.put(tp, e.getValue().isEmpty() ? "ok"
                        : e.getValue().get() instanceof InvalidRecordStateException ? "fail" : "info");
                }
            } catch (KafkaException | IllegalStateException e) {
                lines.op(process, "info", "share-ack", error(e));
                return;
            }
            StringBuilder done = new StringBuilder(",\"acks\":[");
            for (int i = 0; i < rs.size(); i++) {
                ConsumerRecord<byte[], byte[]> r = rs.get(i);
                TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                String o = refused.getOrDefault(tp, outcome.getOrDefault(tp, "info"));
                done.append(i == 0 ? "[" : ",[").append(r.partition()).append(',').append(r.offset()).append(",\"")
                    .append(kinds.get(i)).append("\",\"").append(o).append("\"]");
            }
            lines.op(process, "ok", "share-ack", done.append(']'));
        }

        /** Records the invocation of an asynchronous share-ack of `rs` and keeps it pending; `refused` partitions'
         *  records are already known to fail (the client refused to acknowledge them). */
        Pending invokeAck(List<ConsumerRecord<byte[], byte[]>> rs, List<String> kinds, Map<TopicPartition, String> refused) {
            Pending q = new Pending();
            StringBuilder acks = new StringBuilder(",\"acks\":[");
            for (int i = 0; i < rs.size(); i++) {
                ConsumerRecord<byte[], byte[]> r = rs.get(i);
                q.add(r.partition(), r.offset(), kinds.get(i),
                      refused.get(new TopicPartition(r.topic(), r.partition())));
                acks.append(i == 0 ? "[" : ",[").append(r.partition()).append(',').append(r.offset()).append(",\"")
                    .append(kinds.get(i)).append("\"]");
            }
            lines.op(process, "invoke", "share-ack", acks.append(']'));
            pending.add(q);
            complete();
            return q;
        }

        /** Kafka's acknowledgement commit callback: the outcome of the acknowledgements of `offsets`. */
        void committed(Map<TopicIdPartition, Set<Long>> offsets, Exception e) {
            String outcome = e == null ? "ok" : e instanceof InvalidRecordStateException ? "fail" : "info";
            for (Map.Entry<TopicIdPartition, Set<Long>> o : offsets.entrySet()) {
                int partition = o.getKey().partition();
                for (long offset : o.getValue()) {
                    for (Pending q : pending) {
                        if (q.settle(partition, offset, outcome)) break;
                    }
                }
            }
            complete();
        }

        /** Records the completion of every pending share-ack whose records all have an outcome. */
        void complete() {
            for (Iterator<Pending> it = pending.iterator(); it.hasNext(); ) {
                Pending q = it.next();
                if (q.settled()) {
                    lines.op(process, "ok", "share-ack", q.acks(""));
                    it.remove();
                }
            }
        }

        static String error(Exception e) {
            try {
                return ",\"error\":" + KchaosQueueClients.JSON.writeValueAsString(KchaosQueueClients.errorName(e));
            } catch (IOException never) {
                throw new IllegalStateException(never);
            }
        }
    }
}
