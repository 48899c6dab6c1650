// One copier slot of kchaos's copy workload on the Kafka Java client: a group consumer of the input and a
// transactional producer of the output. workloads/java_copier.py drives it step by step, so the harness records the
// history and checks for a crash between the steps (workloads/copier.py holds the rules); each step runs here, on
// the slot's own thread (KchaosTxnClient.Proc), one at a time.
//
// Requests ("op" is "copier.<step>") and replies, each reply with "p" and "ok":
//   open {"consumer":{..},"input":"t-in","timeout_ms":10000}  -> a new session's consumer (the last one's closed)
//   init {"producer":{..}}        -> a fresh producer after initTransactions, or "error"
//   subscribe                     -> the consumer subscribed to the input, with the rebalance listener
//   poll {"timeout_ms":1000}      -> "records":[[partition,offset,value],..], "events":[{"f":"assign|revoke",
//                                    "partitions":[..],"generation":g,"lost":true?},..] (the rebalances of this
//                                    poll, in order), "error" when the poll threw
//   produce {"topic":"t","sent":[[partition,value],..]}   -> begin, send each, flush
//   commit                        -> the consumer's positions sent to the transaction, commit: "offsets":[[p,o],..]
//   rewind                        -> seek to the group's committed offsets: "offsets":[[p,o],..] (-2: the start)
//   abandon                       -> the session's clients left as they are: no abort, no LeaveGroup (a crash)
//   close                         -> the session's consumer (LeaveGroup) and producer closed
// A failed produce or commit replies "ok":false, "error", "committing" (the commit was asked) and "aborted" (the
// transaction's abort was confirmed; else the producer is dropped).
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.HashSet;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/** A copier slot's session (its consumer and producer) and the sessions crashes abandoned, closed only at exit. */
final class KchaosCopier {
    static final long FROM_START = -2;  // librdkafka's OFFSET_BEGINNING, what workloads/copier.py records
    final int p;
    final List<AutoCloseable> abandoned = new ArrayList<>();
    KafkaProducer<String, String> producer;
    KafkaConsumer<byte[], byte[]> consumer;
    String input;
    long timeoutMs;
    ArrayNode events;  // the rebalances of the poll in progress; null outside a poll (close's revoke is not one)
    // Runs inside poll (and close), on this slot's thread.
    final KchaosRebalances listener = new KchaosRebalances() {
        @Override
        ArrayNode sink() {
            return events;
        }

        @Override
        KafkaConsumer<byte[], byte[]> member() {
            return consumer;
        }
    };

    KchaosCopier(int p) {
        this.p = p;
    }

    /** Run one step of the session; RuntimeExceptions other than a transaction's become the caller's error. */
    ObjectNode handle(String step, JsonNode req, ObjectNode r) {
        switch (step) {
            case "open": open(req); return r.put("ok", true);
            case "init": return init(req, r);
            case "subscribe": consumer.subscribe(List.of(input), listener); return r.put("ok", true);
            case "poll": return poll(req, r);
            case "produce": return produce(req, r);
            case "commit": return commit(r);
            case "rewind": return rewind(r);
            case "abandon": abandon(); return r.put("ok", true);
            case "close": close(); return r.put("ok", true);
            default: return r.put("ok", false).put("error", "unknown copier step " + step);
        }
    }

    void open(JsonNode req) {
        close();
        input = req.get("input").asText();
        timeoutMs = req.get("timeout_ms").asLong();
        consumer = KchaosTxnClient.consumer(req.get("consumer"));
    }

    ObjectNode init(JsonNode req, ObjectNode r) {
        dropProducer();
        try {
            producer = KchaosTxnClient.initialized(KchaosTxnClient.producerProps(req.get("producer")));
            return r.put("ok", true);
        } catch (RuntimeException e) {
            return r.put("ok", false).put("error", KchaosTxnClient.describe(e));
        }
    }

    /** One poll of at most max.poll.records (--txn-size) records, as Kafka's TransactionalMessageCopier polls. */
    ObjectNode poll(JsonNode req, ObjectNode r) {
        events = r.putArray("events");
        ArrayNode records = r.putArray("records");
        try {
            for (ConsumerRecord<byte[], byte[]> rec : consumer.poll(Duration.ofMillis(req.get("timeout_ms").asLong())))
                records.addArray().add(rec.partition()).add(rec.offset()).add(KchaosTxnClient.decode(rec.value()));
        } catch (RuntimeException e) {
            r.put("error", KchaosTxnClient.describe(e));
        } finally {
            events = null;
        }
        return r.put("ok", true);
    }

    ObjectNode produce(JsonNode req, ObjectNode r) {
        String topic = req.get("topic").asText();
        try {
            if (producer == null) throw new IllegalStateException("no producer");
            producer.beginTransaction();
            for (JsonNode s : req.get("sent"))
                producer.send(new ProducerRecord<>(topic, s.get(0).asInt(), null, s.get(1).asText()));
            producer.flush();
            return r.put("ok", true);
        } catch (RuntimeException e) {
            return failed(r, e, false);
        }
    }

    ObjectNode commit(ObjectNode r) {
        boolean committing = false;
        try {
            Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
            ArrayNode offsets = KchaosTxnClient.JSON.createArrayNode();
            for (TopicPartition tp : sorted(consumer.assignment())) {
                long pos = consumer.position(tp, Duration.ofMillis(timeoutMs));
                positions.put(tp, new OffsetAndMetadata(pos));
                offsets.addArray().add(tp.partition()).add(pos);
            }
            producer.sendOffsetsToTransaction(positions, consumer.groupMetadata());
            committing = true;
            producer.commitTransaction();
            r.set("offsets", offsets);
            return r.put("ok", true);
        } catch (RuntimeException e) {
            return failed(r, e, committing);
        }
    }

    ObjectNode failed(ObjectNode r, RuntimeException e, boolean committing) {
        boolean aborted = KchaosTxnClient.abort(producer, e, "copier " + p);
        if (!aborted) dropProducer();
        return r.put("ok", false).put("error", KchaosTxnClient.describe(e)).put("committing", committing)
            .put("aborted", aborted);
    }

    ObjectNode rewind(ObjectNode r) {
        ArrayNode offsets = r.putArray("offsets");
        List<TopicPartition> assigned = sorted(consumer.assignment());
        Map<TopicPartition, OffsetAndMetadata> committed =
            consumer.committed(new HashSet<>(assigned), Duration.ofMillis(timeoutMs));
        for (TopicPartition tp : assigned) {
            OffsetAndMetadata at = committed.get(tp);
            if (at != null) consumer.seek(tp, at.offset());
            else consumer.seekToBeginning(List.of(tp));
            offsets.addArray().add(tp.partition()).add(at != null ? at.offset() : FROM_START);
        }
        return r.put("ok", true);
    }

    /** A crash: the clients are kept unclosed (the consumer unpolled, so it leaves the group only when its
     *  max.poll.interval.ms runs out, as a librdkafka one does) until the JVM exits. */
    void abandon() {
        if (consumer != null) abandoned.add(consumer);
        if (producer != null) abandoned.add(producer);
        consumer = null;
        producer = null;
    }

    void dropProducer() {
        if (producer != null) producer.close(Duration.ZERO);
        producer = null;
    }

    void close() {
        dropProducer();
        KchaosTxnClient.closeConsumer(consumer, Duration.ofSeconds(5));
        consumer = null;
    }

    /** At exit: the session, then what crashes abandoned, each given little time (the run is over). */
    void closeAll() {
        close();
        KchaosTxnClient.closeAbandoned(abandoned);
    }

    static List<TopicPartition> sorted(Collection<TopicPartition> tps) {
        List<TopicPartition> l = new ArrayList<>(tps);
        l.sort((a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(), b.partition())
                                                     : a.topic().compareTo(b.topic()));
        return l;
    }
}
