// kchaos's txn workload on the Kafka Java client (KIP-890 transactions with kafka-clients 4.x on 4.x brokers).
//
// The Python harness drives it (workloads/java_txn.py): it draws every transaction from --seed, records the
// history, and sends one JSON request per line on stdin; this program executes each and prints one JSON reply per
// line on stdout. Each logical process ("p") has its own producer, consumer and thread, so processes run
// concurrently and each runs one request at a time, in order. The outcome rules are workloads/txn.py's.
//
// Requests and replies:
//   {"p":0,"op":"open","producer":{..},"topic":"t","partitions":3,"timeout_ms":10000}
//                                                  -> {"p":0,"ok":true}   the process's settings; no client yet
//   {"p":0,"op":"assign","consumer":{..},"partitions":[0,2],"from_start":false}
//   {"p":0,"op":"subscribe","consumer":{..}}       -> {"p":0,"ok":true,"events":[..]}   the consumer replaced
//                                                     (KchaosTxnConsumer.java: the events are its rebalances)
//   {"p":0,"op":"init"}                            -> {"p":0,"ok":true} | {"p":0,"ok":false,"error":".."}
//   {"p":0,"op":"txn","mops":[["send",4,0],["poll"]],"abort":false,"offsets":true}
//        -> {"p":0,"type":"ok|fail|info","value":[completed micro-ops],"error":..,"polled":n,"producer":bool,
//            "events":[..],"crashed":true?}   ("offsets": send the consumer's positions to the transaction)
//   {"p":0,"op":"crash"}                           -> no reply: read at once, not queued behind the process's
//                                                     request in progress; its transaction is cut at the next
//                                                     return from the client ("crashed")
//   {"p":0,"op":"abandon"}                         -> {"p":0,"ok":true}   the producer and consumer left unclosed
//                                                     until exit (no abort, no LeaveGroup), the crash cleared
//   {"p":0,"op":"close"}                           -> {"p":0,"ok":true,"events":[..]}
//   {"p":-1,"op":"features","bootstrap":".."}      -> {"p":-1,"ok":true,"finalized":{"transaction.version":2,..}}
//   {"p":0,"op":"copier.<step>",..}                -> the copy workload's copier steps: KchaosCopier.java
// End of stdin closes every process's clients (and the copiers' abandoned ones) and exits. Kafka's own logging
// goes to stderr.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class KchaosTxnClient {
    static final ObjectMapper JSON = new ObjectMapper();
    static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    static final long UNDECODABLE = -1;  // workloads/clients.py: a record no kchaos producer could have written

    public static void main(String[] args) throws Exception {
        System.setOut(System.err);  // nothing but replies may reach the harness's pipe
        Map<Integer, Proc> procs = new HashMap<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isBlank()) continue;
            JsonNode req;
            try {
                req = JSON.readTree(line);
            } catch (IOException e) {
                System.err.println("not a request: " + describe(e));
                continue;
            }
            Proc proc = procs.computeIfAbsent(req.get("p").asInt(), Proc::new);
            if ("crash".equals(req.path("op").asText())) proc.crashed = true;
            else proc.thread.submit(() -> reply(proc.handle(req)));
        }
        for (Proc proc : procs.values()) proc.thread.submit(proc::closeAll);
        for (Proc proc : procs.values()) {
            proc.thread.shutdown();
            proc.thread.awaitTermination(60, TimeUnit.SECONDS);
        }
        OUT.flush();
        System.exit(0);
    }

    static void reply(ObjectNode r) {
        synchronized (OUT) {
            OUT.println(r.toString());
            OUT.flush();
        }
    }

    static String describe(Throwable e) {
        String text = e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) root = root.getCause();
        // A client that could not be built says only that; the cause says why.
        return root == e ? text : text + " (caused by " + root.getClass().getSimpleName()
                + (root.getMessage() == null ? "" : ": " + root.getMessage()) + ")";
    }

    /** A transactional producer with `props` (its transactional.id) after initTransactions, which fences every
     *  earlier producer of that id; the exception of a failed init, the producer closed. */
    static KafkaProducer<String, String> initialized(Map<String, Object> props) {
        KafkaProducer<String, String> fresh = new KafkaProducer<>(props);
        try {
            fresh.initTransactions();
            return fresh;
        } catch (RuntimeException e) {
            fresh.close(Duration.ZERO);
            throw e;
        }
    }

    /** Abort the transaction of `producer` after `e` when `e` allows it; true if the abort was confirmed. False
     *  means the caller must drop the producer: the next one with its transactional.id fences it. */
    static boolean abort(KafkaProducer<String, String> producer, RuntimeException e, String who) {
        if (producer == null) return false;
        boolean fatal = e instanceof ProducerFencedException || e instanceof OutOfOrderSequenceException
            || e instanceof AuthorizationException || e instanceof UnsupportedVersionException;
        // A timed-out call must be retried before any other (abortTransaction then fails, or waits out its own
        // timeout against the same unreachable coordinator): as librdkafka's retriable errors, it drops the producer.
        boolean retriable = e instanceof RetriableException || e instanceof IllegalStateException;
        if (!fatal && !retriable) {
            try {
                producer.abortTransaction();
                return true;
            } catch (RuntimeException again) {
                System.err.println(who + ": abort failed: " + describe(again));
            }
        }
        return false;
    }

    /** At exit: close what crashes abandoned, each given little time (the run is over). */
    @SuppressWarnings("unchecked")
    static void closeAbandoned(List<AutoCloseable> abandoned) {
        for (AutoCloseable c : abandoned) {
            if (c instanceof KafkaConsumer) closeConsumer((KafkaConsumer<byte[], byte[]>) c, Duration.ofSeconds(1));
            else ((KafkaProducer<String, String>) c).close(Duration.ZERO);
        }
        abandoned.clear();
    }

    /** Close `consumer` (null: nothing) within `timeout`, its errors only logged. */
    @SuppressWarnings("deprecation")  // close(CloseOptions) replaces it only from kafka-clients 4.1
    static void closeConsumer(KafkaConsumer<byte[], byte[]> consumer, Duration timeout) {
        if (consumer == null) return;
        try {
            consumer.close(timeout);
        } catch (RuntimeException e) {
            System.err.println("closing a consumer: " + describe(e));
        }
    }

    /** The Java client's settings from a request's JSON object of strings. */
    static Map<String, Object> props(JsonNode obj) {
        Map<String, Object> m = new HashMap<>();
        for (Map.Entry<String, JsonNode> e : obj.properties()) m.put(e.getKey(), e.getValue().asText());
        return m;
    }

    /** A producer's settings from a request's JSON object, with the serializers of the values kchaos writes. */
    static Map<String, Object> producerProps(JsonNode obj) {
        Map<String, Object> m = props(obj);
        m.put("key.serializer", StringSerializer.class.getName());
        m.put("value.serializer", StringSerializer.class.getName());
        return m;
    }

    /** A consumer with the settings of a request's JSON object, reading raw bytes (decode makes them values). */
    static KafkaConsumer<byte[], byte[]> consumer(JsonNode obj) {
        Map<String, Object> m = props(obj);
        m.put("key.deserializer", ByteArrayDeserializer.class.getName());
        m.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(m);
    }

    /** Thrown at a crash point of a transaction the process's crash cut. */
    static final class Crashed extends RuntimeException {
        Crashed() {
            super("crashed (crash-client)", null, false, false);
        }
    }

    /** One logical process of the workload: its own producer (transactional.id) and consumer. */
    static final class Proc {
        final int p;
        final ExecutorService thread = Executors.newSingleThreadExecutor();
        final List<AutoCloseable> abandoned = new ArrayList<>();  // what crashes left, closed at exit
        volatile boolean crashed;  // set by a "crash" request as it is read, cleared by "abandon"
        Map<String, Object> producerProps;
        KafkaProducer<String, String> producer;
        KchaosTxnConsumer reader;
        KchaosCopier copier;  // the copy workload's copier slot p, made by its first copier.* request
        String topic;
        int partitions;
        long timeoutMs;

        Proc(int p) {
            this.p = p;
        }

        ObjectNode handle(JsonNode req) {
            ObjectNode r = JSON.createObjectNode().put("p", p);
            try {
                String op = req.get("op").asText();
                if (op.startsWith("copier.")) {
                    if (copier == null) copier = new KchaosCopier(p);
                    return copier.handle(op.substring("copier.".length()), req, r);
                }
                switch (op) {
                    case "open": open(req); return r.put("ok", true);
                    case "assign":
                        reader.assign(req.get("consumer"), req.get("partitions"), req.path("from_start").asBoolean());
                        return reader.reply(r.put("ok", true));
                    case "subscribe": reader.subscribe(req.get("consumer")); return reader.reply(r.put("ok", true));
                    case "init": return init(r);
                    case "txn": return reader.reply(transact(req, r));
                    case "abandon": abandon(); return r.put("ok", true);
                    case "close": close(); return (reader != null ? reader.reply(r) : r).put("ok", true);
                    case "features": return features(req, r);
                    default: return r.put("ok", false).put("error", "unknown op " + req.get("op"));
                }
            } catch (RuntimeException e) {  // a reply for every request: the harness waits for it
                return r.put("ok", false).put("error", describe(e));
            }
        }

        /** The cluster's finalized feature levels: transaction.version 2 is KIP-890's protocol. */
        static ObjectNode features(JsonNode req, ObjectNode r) {
            Map<String, Object> props = new HashMap<>();
            props.put("bootstrap.servers", req.get("bootstrap").asText());
            props.put("request.timeout.ms", "5000");
            try (Admin admin = Admin.create(props)) {
                FeatureMetadata meta = admin.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS);
                ObjectNode finalized = r.putObject("finalized");
                meta.finalizedFeatures().forEach((name, range) -> finalized.put(name, range.maxVersionLevel()));
                return r.put("ok", true);
            } catch (Exception e) {
                return r.put("ok", false).put("error", describe(e));
            }
        }

        void open(JsonNode req) {
            topic = req.get("topic").asText();
            partitions = req.get("partitions").asInt();
            timeoutMs = req.get("timeout_ms").asLong();
            producerProps = producerProps(req.get("producer"));
            reader = new KchaosTxnConsumer(topic);
        }

        /** A fresh producer with this process's transactional.id; initTransactions fences any earlier one. */
        ObjectNode init(ObjectNode r) {
            drop();
            try {
                producer = initialized(producerProps);
                return r.put("ok", true);
            } catch (RuntimeException e) {
                return r.put("ok", false).put("error", describe(e));
            }
        }

        void drop() {
            if (producer != null) {
                producer.close(Duration.ZERO);
                producer = null;
            }
        }

        /** A crash: the producer and consumer left as they are (no abort, no LeaveGroup; the producer never used
         *  again, fenced by the next one's initTransactions) until the JVM exits. */
        void abandon() {
            if (producer != null) abandoned.add(producer);
            producer = null;
            if (reader != null && reader.consumer != null) abandoned.add(reader.abandon());
            crashed = false;
        }

        void close() {
            drop();
            if (reader != null) reader.close();
        }

        /** At exit: the process's clients, what its crashes abandoned, and its copier's. */
        void closeAll() {
            close();
            closeAbandoned(abandoned);
            if (copier != null) copier.closeAll();
        }

        void crashPoint() {
            if (crashed) throw new Crashed();
        }

        /** Run the micro-ops in one transaction: workloads/txn.py's TxnClient.transact, on the Java client. */
        ObjectNode transact(JsonNode req, ObjectNode r) {
            JsonNode mops = req.get("mops");
            boolean abort = req.get("abort").asBoolean();
            boolean sendOffsets = req.path("offsets").asBoolean(true);
            KafkaConsumer<byte[], byte[]> consumer = reader.consumer;
            ArrayNode done = JSON.createArrayNode();
            Map<Integer, Long> offsets = new ConcurrentHashMap<>();  // written by the producer's I/O thread
            boolean anyPoll = false;
            for (JsonNode m : mops) {
                if (m.get(0).asText().equals("send")) {
                    done.addArray().add("send").add(m.get(1).asLong()).add(m.get(2).asLong())
                        .add(Math.floorMod(m.get(1).asLong(), (long) partitions)).addNull();
                } else {
                    done.addArray().add("poll").addNull();
                    anyPoll = true;
                }
            }
            int polled = 0;
            boolean committing = false;
            r.put("polled", 0);
            try {
                if (producer == null) throw new IllegalStateException("no producer");
                producer.beginTransaction();
                for (int i = 0; i < mops.size(); i++) {
                    crashPoint();
                    JsonNode m = mops.get(i);
                    if (m.get(0).asText().equals("send")) {
                        final int at = i;
                        int partition = done.get(i).get(3).asInt();
                        producer.send(new ProducerRecord<>(topic, partition, m.get(1).asText(), m.get(2).asText()),
                            (meta, err) -> {
                                if (err == null && meta != null && meta.hasOffset() && meta.offset() >= 0)
                                    offsets.put(at, meta.offset());
                            });
                    } else {
                        ArrayNode records = JSON.createArrayNode();
                        for (ConsumerRecord<byte[], byte[]> rec : consumer.poll(Duration.ofMillis(100))) {
                            records.addArray().add(rec.partition()).add(rec.offset()).add(decode(rec.value()));
                        }
                        ((ArrayNode) done.get(i)).set(1, records);
                        polled += records.size();
                        r.put("polled", polled);
                    }
                }
                crashPoint();
                if (anyPoll && sendOffsets) {
                    Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
                    for (TopicPartition tp : consumer.assignment()) {
                        long pos = consumer.position(tp, Duration.ofMillis(timeoutMs));
                        if (pos >= 0) positions.put(tp, new OffsetAndMetadata(pos));
                    }
                    if (!positions.isEmpty()) producer.sendOffsetsToTransaction(positions, consumer.groupMetadata());
                }
                if (abort) {
                    producer.abortTransaction();
                    return finish(r, "fail", done, offsets, "aborted on purpose");
                }
                producer.flush();  // every send's delivery report, hence its offset
                crashPoint();
                committing = true;
                producer.commitTransaction();
                if (crashed)  // it died as the commit returned, never learning the outcome
                    return finish(r.put("crashed", true), "info", done, offsets,
                                  "crashed (crash-client) during the commit");
                return finish(r, "ok", done, offsets, null);
            } catch (Crashed c) {
                // The commit was never asked for: the next producer's initTransactions aborts the transaction.
                return finish(r.put("crashed", true), "fail", done, offsets, "crashed (crash-client) before the commit");
            } catch (RuntimeException e) {
                boolean aborted = abortAfter(e);
                // Without a commit request the transaction can never commit: the abort, the coordinator's timeout
                // or the next producer's fencing ends it.
                String type = !committing || aborted ? "fail" : "info";
                return finish(r, type, done, offsets, describe(e));
            }
        }

        /** Abort after an error that requires it (KchaosTxnClient.abort); true if the abort was confirmed.
         *  Otherwise the producer is dropped, and the next op's producer (same transactional.id) fences it. */
        boolean abortAfter(RuntimeException e) {
            if (abort(producer, e, "process " + p)) return true;
            drop();
            return false;
        }

        ObjectNode finish(ObjectNode r, String type, ArrayNode done, Map<Integer, Long> offsets, String error) {
            for (Map.Entry<Integer, Long> o : offsets.entrySet()) ((ArrayNode) done.get(o.getKey())).set(4, JSON.getNodeFactory().numberNode(o.getValue()));
            r.put("type", type).set("value", done);
            if (error != null) r.put("error", error);
            return r.put("producer", producer != null);
        }
    }

    /** The integer value a kchaos producer wrote, or UNDECODABLE. */
    static long decode(byte[] raw) {
        if (raw == null) return UNDECODABLE;
        try {
            return Long.parseLong(new String(raw, StandardCharsets.UTF_8).strip());
        } catch (NumberFormatException e) {
            return UNDECODABLE;
        }
    }
}
