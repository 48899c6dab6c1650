// A txn process's consumer on the Kafka Java client: workloads/txn_consumer.py's TxnConsumer in the JVM, driven by
// workloads/java_txn_consumer.py through KchaosTxnClient's "assign", "subscribe", "abandon" and "close" requests.
//
// One consumer at a time: assigned partitions by hand (from offset 0, or from the offsets its group committed), or
// a member of a group subscribed to the topic with a rebalance listener. Each callback of the current member
// (inside poll, unsubscribe or close, on the process's thread) becomes one event, {"f":"assign|revoke",
// "partitions":[..],"generation":g,"lost":true?}, that the next reply carries ("events") and the harness records as
// a rebalance line. An abandoned consumer (a crash) is no longer current: its callbacks record nothing, and it
// stays unclosed, unpolled, until the JVM exits.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/** The consumer of one txn process, and the rebalance events not yet replied. Used on the process's thread only. */
final class KchaosTxnConsumer {
    final String topic;
    KafkaConsumer<byte[], byte[]> consumer;
    private ArrayNode events = KchaosTxnClient.JSON.createArrayNode();

    KchaosTxnConsumer(String topic) {
        this.topic = topic;
    }

    /** Replace the consumer by one with `props` assigned `partitions` by hand: from offset 0 if `fromStart`, else
     *  from its group's committed offsets (the log start where there are none: auto.offset.reset). */
    void assign(JsonNode props, JsonNode partitions, boolean fromStart) {
        close();
        List<TopicPartition> tps = new ArrayList<>();
        for (JsonNode p : partitions) tps.add(new TopicPartition(topic, p.asInt()));
        consumer = KchaosTxnClient.consumer(props);
        consumer.assign(tps);
        if (fromStart) for (TopicPartition tp : tps) consumer.seek(tp, 0);
    }

    /** Replace the consumer by a group member with `props`, subscribed to the topic with the rebalance listener. */
    void subscribe(JsonNode props) {
        close();
        KafkaConsumer<byte[], byte[]> member = KchaosTxnClient.consumer(props);
        consumer = member;
        member.subscribe(List.of(topic), new Listener(member));
    }

    /** The consumer as a crash leaves it (no commit, no LeaveGroup), no longer this process's; null if none. */
    KafkaConsumer<byte[], byte[]> abandon() {
        KafkaConsumer<byte[], byte[]> left = consumer;
        consumer = null;
        return left;
    }

    /** Close the consumer (a member's revocation becomes an event). */
    void close() {
        KchaosTxnClient.closeConsumer(consumer, Duration.ofSeconds(5));
        consumer = null;
    }

    /** The events since the last call, in order, put into reply `r` as "events". */
    ObjectNode reply(ObjectNode r) {
        r.set("events", events);
        events = KchaosTxnClient.JSON.createArrayNode();
        return r;
    }

    /** The rebalance callbacks of one member: events while it is the process's consumer, nothing after. */
    private final class Listener extends KchaosRebalances {
        final KafkaConsumer<byte[], byte[]> member;

        Listener(KafkaConsumer<byte[], byte[]> member) {
            this.member = member;
        }

        @Override
        ArrayNode sink() {
            return member == consumer ? events : null;
        }

        @Override
        KafkaConsumer<byte[], byte[]> member() {
            return member;
        }
    }
}
