// kchaos's queue-workload clients on the Kafka Java client (`--client java`): the producers, the same pipeline as
// workloads/queue/producer_loop.py past the GIL and librdkafka's delivery-report path, and the consumers of
// `--consumer-mode assign`, as workloads/queue/workload.py's.
//
// The harness (workloads/queue/java_clients.py) starts it and writes one JSON line on stdin:
//   {"producer":{..settings..},"topic":"t","partitions":3,"instances":[0,1],"total":2,"in_flight":20000,
//    "rate":0 (unthrottled) or sends/s of all instances together,"seed":42,"t0_ns":..,"path":"..",
//    "retries":N,"delivery_timeout_ms":N,"consumer":{..settings..},"consumers":[40000,40001]}
// Producer instance p runs on its own thread with `in_flight` slots; slot s is the logical process
// p*in_flight+s, with at most one send outstanding. Its values are p+1, p+1+total, p+1+2*total, ...; the
// partition of each send is drawn from the instance's own generator, seeded from the seed and p.
// Each consumer process is assigned every partition from offset 0 and polls (at most 500 records, 1 s) until the
// stop.
// Every invocation and completion is a line of `path` in the history's own form (without "index"), on the
// history's clock (System.nanoTime, CLOCK_MONOTONIC on Linux, minus t0_ns); the lines are written out at least
// every 50 ms, so a killed JVM loses at most the last 50 ms and a torn last line.
// Every 200 ms it prints its counts on stdout: {"send":n,"ok":n,"fail":n,"info":n,"polled":n}.
// A line "stop" on stdin: stop sending, wait up to the delivery timeout for outstanding sends (those still
// unanswered complete as info, "no delivery report"), close the consumers, write everything out, print
// {"done":true,..counts} and exit. End of stdin without "stop" (the harness is gone): write out what was recorded and exit at once.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ClusterAuthorizationException;
import org.apache.kafka.common.errors.InvalidRequiredAcksException;
import org.apache.kafka.common.errors.NotEnoughReplicasException;
import org.apache.kafka.common.errors.RecordBatchTooLargeException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KchaosQueueClients {
    static final ObjectMapper JSON = new ObjectMapper();
    static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    static final long FLUSH_NS = TimeUnit.MILLISECONDS.toNanos(50);
    static final String[] KEYS = {"send", "ok", "fail", "info", "polled"};
    static final long UNDECODABLE = -1;  // workloads/clients.py: a record no kchaos producer could have written

    public static void main(String[] args) throws Exception {
        System.setOut(System.err);  // nothing but counts may reach the harness's pipe
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String first = in.readLine();
        if (first == null) return;
        JsonNode spec = JSON.readTree(first);
        Lines lines = new Lines(spec.get("path").asText(), spec.get("topic").asText(), spec.get("t0_ns").asLong());
        List<Instance> instances = new ArrayList<>();
        for (JsonNode p : spec.get("instances")) instances.add(new Instance(spec, p.asInt(), lines));
        List<Reader> readers = new ArrayList<>();
        for (JsonNode p : spec.get("consumers")) readers.add(new Reader(spec, p.asLong(), lines));
        // A harness that gives up waiting sends SIGTERM: what was recorded is written out before the JVM ends.
        Runtime.getRuntime().addShutdownHook(new Thread(lines::flush, "flush-at-exit"));
        Thread flusher = new Thread(() -> lines.flushEvery(FLUSH_NS), "flush");
        flusher.setDaemon(true);
        flusher.start();
        Thread counter = new Thread(() -> {
            while (!lines.closed) {
                printCounts(lines, false);
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(200));
            }
        }, "counts");
        counter.setDaemon(true);
        counter.start();
        for (Instance i : instances) i.thread.start();
        for (Reader r : readers) r.thread.start();

        boolean stop = false;
        for (String line; (line = in.readLine()) != null; ) {
            if (line.strip().equals("stop")) {
                stop = true;
                break;
            }
        }
        for (Instance i : instances) i.stopping = true;
        for (Reader r : readers) r.stopping = true;
        if (!stop) {  // the harness is gone: keep what was recorded, send nothing more
            lines.flush();
            Runtime.getRuntime().halt(1);
        }
        for (Instance i : instances) i.thread.join();
        for (Reader r : readers) r.thread.join();
        lines.close();
        printCounts(lines, true);
        System.exit(0);
    }

    static void printCounts(Lines lines, boolean done) {
        StringBuilder b = new StringBuilder("{");
        if (done) b.append("\"done\":true,");
        for (int k = 0; k < KEYS.length; k++) {
            b.append(k == 0 ? "" : ",").append('"').append(KEYS[k]).append("\":").append(lines.counts[k].get());
        }
        synchronized (OUT) {
            OUT.println(b.append('}'));
            OUT.flush();
        }
    }

    /** "fail" when `e` proves the record was not written, else "info": workloads/clients.py's send_outcome. */
    static String outcome(Exception e, int retries) {
        boolean definite = e instanceof RecordTooLargeException || e instanceof RecordBatchTooLargeException
            || e instanceof InvalidRecordException || e instanceof TopicAuthorizationException
            || e instanceof ClusterAuthorizationException || e instanceof InvalidRequiredAcksException
            || (e instanceof NotEnoughReplicasException && retries == 0);
        return definite ? "fail" : "info";
    }

    /** Kafka's name of the error (NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ...), else the exception's class. */
    static String errorName(Exception e) {
        Errors error = Errors.forException(e);
        return error == Errors.UNKNOWN_SERVER_ERROR ? e.getClass().getSimpleName() : error.name();
    }

    /** The run's lines, appended by every instance and delivery report, written out by the flusher. */
    static final class Lines {
        final FileOutputStream out;
        final String head;  // ,"f":"send","topic":"t","partition":
        final long t0;
        final String topic;
        final AtomicLong[] counts = {new AtomicLong(), new AtomicLong(), new AtomicLong(), new AtomicLong(),
                                     new AtomicLong()};
        StringBuilder buffer = new StringBuilder(1 << 20);
        volatile boolean closed;

        Lines(String path, String topic, long t0) throws IOException {
            this.out = new FileOutputStream(path);
            this.topic = JSON.writeValueAsString(topic);
            this.head = ",\"f\":\"send\",\"topic\":" + this.topic + ",\"partition\":";
            this.t0 = t0;
        }

        void sent(long process, int producer, int partition, long value) {
            synchronized (this) {  // the time is read under the lock: the lines are in time order
                long t = System.nanoTime() - t0;
                buffer.append("{\"time\":").append(t).append(",\"process\":").append(process)
                    .append(",\"type\":\"invoke\"").append(head).append(partition).append(",\"value\":").append(value)
                    .append(",\"producer\":").append(producer).append("}\n");
            }
            counts[0].incrementAndGet();
        }

        void done(long process, int producer, int partition, long value, String type, long offset, String error) {
            synchronized (this) {  // the time is read under the lock: the lines are in time order
                long t = System.nanoTime() - t0;
                buffer.append("{\"time\":").append(t).append(",\"process\":").append(process)
                    .append(",\"type\":\"").append(type).append('"').append(head).append(partition)
                    .append(",\"value\":").append(value).append(",\"producer\":").append(producer);
                if (offset >= 0) buffer.append(",\"offset\":").append(offset);
                if (error != null) {
                    try {
                        buffer.append(",\"error\":").append(JSON.writeValueAsString(error));
                    } catch (IOException e) {
                        throw new IllegalStateException(e);
                    }
                }
                buffer.append("}\n");
            }
            counts[switch (type) {
                case "ok" -> 1;
                case "fail" -> 2;
                default -> 3;
            }].incrementAndGet();
        }

        /** A consumer's op `f` (assign, poll) of `type`, its other fields `rest` (",\"records\":[..]" or ""). */
        void op(long process, String type, String f, CharSequence rest) {
            synchronized (this) {  // the time is read under the lock: the lines are in time order
                long t = System.nanoTime() - t0;
                buffer.append("{\"time\":").append(t).append(",\"process\":").append(process)
                    .append(",\"type\":\"").append(type).append("\",\"f\":\"").append(f).append("\",\"topic\":")
                    .append(topic).append(rest).append("}\n");
            }
        }

        /** Write out what was appended since the last call. */
        void flush() {
            StringBuilder taken;
            synchronized (this) {
                if (buffer.length() == 0) return;
                taken = buffer;
                buffer = new StringBuilder(Math.max(1 << 16, taken.length() + (taken.length() >> 2)));
            }
            try {
                synchronized (out) {
                    if (closed && !out.getChannel().isOpen()) return;
                    out.write(taken.toString().getBytes(StandardCharsets.UTF_8));
                    out.flush();
                }
            } catch (IOException e) {
                System.err.println("writing the send lines: " + e);
                Runtime.getRuntime().halt(2);
            }
        }

        void flushEvery(long ns) {
            while (!closed) {
                LockSupport.parkNanos(ns);
                flush();
            }
        }

        void close() throws IOException {
            closed = true;
            flush();
            synchronized (out) {
                out.close();
            }
        }
    }

    /** One producer instance: a KafkaProducer, `in_flight` slots and its own thread. */
    static final class Instance {
        final int producer;
        final long base;
        final long total;
        final int partitions;
        final String topic;
        final int retries;
        final long deliveryTimeoutMs;
        final double periodNs;  // 0: unthrottled
        final SplittableRandom rng;
        final Lines lines;
        final KafkaProducer<byte[], byte[]> client;
        final ArrayBlockingQueue<Integer> free;
        final ConcurrentHashMap<Long, int[]> outstanding = new ConcurrentHashMap<>();  // value -> {slot, partition}
        final Thread thread;
        volatile boolean stopping;
        long nextValue;

        Instance(JsonNode spec, int producer, Lines lines) {
            this.producer = producer;
            int inFlight = spec.get("in_flight").asInt();
            this.base = (long) producer * inFlight;
            this.total = spec.get("total").asLong();
            this.partitions = spec.get("partitions").asInt();
            this.topic = spec.get("topic").asText();
            this.retries = spec.get("retries").asInt();
            this.deliveryTimeoutMs = spec.get("delivery_timeout_ms").asLong();
            double rate = spec.get("rate").asDouble();
            this.periodNs = rate > 0 ? 1e9 * total / rate : 0;
            this.rng = new SplittableRandom(spec.get("seed").asLong() * 1_000_003L + producer);
            this.lines = lines;
            Map<String, Object> props = new HashMap<>();
            for (Map.Entry<String, JsonNode> e : spec.get("producer").properties()) {
                props.put(e.getKey(), e.getValue().asText());
            }
            props.put("client.id", "p" + producer);
            props.put("key.serializer", ByteArraySerializer.class.getName());
            props.put("value.serializer", ByteArraySerializer.class.getName());
            this.client = new KafkaProducer<>(props);
            this.free = new ArrayBlockingQueue<>(inFlight);
            for (int s = 0; s < inFlight; s++) free.add(s);
            this.nextValue = producer + 1;
            this.thread = new Thread(this::run, "producer-" + producer);
        }

        void run() {
            long nextAt = System.nanoTime();
            try {
                while (!stopping) {
                    Integer slot = free.poll(50, TimeUnit.MILLISECONDS);
                    if (slot == null) continue;
                    if (periodNs > 0) {
                        long now = System.nanoTime();
                        // After a long stall (leader failover), resume the rate instead of bursting to catch up.
                        nextAt = Math.max(nextAt, now - 1_000_000_000L);
                        while (!stopping && (now = System.nanoTime()) < nextAt) {
                            LockSupport.parkNanos(Math.min(nextAt - now, 50_000_000L));
                        }
                        if (stopping) {
                            free.add(slot);
                            break;
                        }
                        nextAt += (long) periodNs;
                    }
                    send(slot);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                finish();
            }
        }

        void send(int slot) {
            long value = nextValue;
            nextValue += total;
            int partition = rng.nextInt(partitions);
            long process = base + slot;
            lines.sent(process, producer, partition, value);
            outstanding.put(value, new int[] {slot, partition});
            Callback report = (RecordMetadata md, Exception e) -> {
                if (outstanding.remove(value) == null) return;  // already completed as info by finish()
                if (e == null) {
                    lines.done(process, producer, partition, value, "ok", md.hasOffset() ? md.offset() : -1, null);
                } else {
                    // Reported on this instance's own thread, inside send(): the record never reached the
                    // client's buffer. Every other report comes from the client's I/O thread.
                    boolean refused = Thread.currentThread() == thread;
                    lines.done(process, producer, partition, value, refused ? "fail" : outcome(e, retries), -1,
                               (refused ? "produce: " : "") + errorName(e));
                }
                free.add(slot);
            };
            try {
                client.send(new ProducerRecord<>(topic, partition, null,
                                                 Long.toString(value).getBytes(StandardCharsets.US_ASCII)), report);
            } catch (RuntimeException e) {
                if (outstanding.remove(value) != null) {
                    lines.done(process, producer, partition, value, "fail", -1, "produce: " + errorName(e));
                    free.add(slot);
                }
            }
        }

        void finish() {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(deliveryTimeoutMs + 5000);
            while (!outstanding.isEmpty() && System.nanoTime() < deadline) {
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50));
            }
            for (Long value : List.copyOf(outstanding.keySet())) {
                int[] entry = outstanding.remove(value);
                if (entry != null) {
                    lines.done(base + entry[0], producer, entry[1], value, "info", -1, "no delivery report");
                }
            }
            client.close(Duration.ZERO);
        }
    }

    /** One consumer process of --consumer-mode assign: every partition from offset 0, polled until the stop. */
    static final class Reader {
        final long process;
        final String topic;
        final int partitions;
        final Lines lines;
        final Map<String, Object> props = new HashMap<>();
        final Thread thread;
        volatile boolean stopping;

        Reader(JsonNode spec, long process, Lines lines) {
            this.process = process;
            this.topic = spec.get("topic").asText();
            this.partitions = spec.get("partitions").asInt();
            this.lines = lines;
            for (Map.Entry<String, JsonNode> e : spec.get("consumer").properties()) {
                props.put(e.getKey(), e.getValue().asText());
            }
            props.put("client.id", "c" + process);
            props.put("group.id", "kchaos-c" + process);
            props.put("key.deserializer", ByteArrayDeserializer.class.getName());
            props.put("value.deserializer", ByteArrayDeserializer.class.getName());
            this.thread = new Thread(this::run, "consumer-" + process);
        }

        @SuppressWarnings("deprecation")  // close(CloseOptions) replaces close(Duration) only from kafka-clients 4.1
        void run() {
            KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
            try {
                List<TopicPartition> tps = new ArrayList<>();
                StringBuilder parts = new StringBuilder(",\"partitions\":[");
                for (int p = 0; p < partitions; p++) {
                    tps.add(new TopicPartition(topic, p));
                    parts.append(p == 0 ? "" : ",").append(p);
                }
                parts.append(']');
                lines.op(process, "invoke", "assign", parts);
                consumer.assign(tps);
                for (TopicPartition tp : tps) consumer.seek(tp, 0);
                lines.op(process, "ok", "assign", parts);
                while (!stopping) poll(consumer);
            } catch (RuntimeException e) {
                System.err.println("consumer " + process + " died: " + e);
            } finally {
                consumer.close(Duration.ofSeconds(2));  // nothing to commit: a broker that is gone is not waited for
            }
        }

        void poll(KafkaConsumer<byte[], byte[]> consumer) {
            lines.op(process, "invoke", "poll", "");
            ConsumerRecords<byte[], byte[]> polled;
            try {
                polled = consumer.poll(Duration.ofSeconds(1));
            } catch (KafkaException e) {
                try {
                    lines.op(process, "info", "poll", ",\"error\":" + JSON.writeValueAsString(errorName(e)));
                } catch (IOException never) {
                    throw new IllegalStateException(never);
                }
                return;
            }
            StringBuilder records = new StringBuilder(32 + 24 * polled.count()).append(",\"records\":[");
            boolean first = true;
            for (ConsumerRecord<byte[], byte[]> r : polled) {
                records.append(first ? "[" : ",[").append(r.partition()).append(',').append(r.offset()).append(',')
                    .append(decode(r.value())).append(']');
                first = false;
            }
            lines.op(process, "ok", "poll", records.append(']'));
            lines.counts[4].addAndGet(polled.count());
        }

        /** The integer a kchaos producer wrote (its decimal digits), else UNDECODABLE: decode_value's rule, read
         *  from the bytes without making a String of each record. */
        static long decode(byte[] value) {
            if (value == null || value.length == 0 || value.length > 18) {
                return value == null || value.length <= 18 ? UNDECODABLE : slowDecode(value);
            }
            long n = 0;
            for (byte b : value) {
                if (b < '0' || b > '9') return slowDecode(value);
                n = n * 10 + (b - '0');
            }
            return n;
        }

        static long slowDecode(byte[] value) {
            try {
                return Long.parseLong(new String(value, StandardCharsets.US_ASCII).strip());
            } catch (NumberFormatException e) {
                return UNDECODABLE;
            }
        }
    }
}
