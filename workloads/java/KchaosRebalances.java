// The rebalance callbacks of a group member as the harness records them, shared by the txn consumer and the copier:
// each callback becomes one event {"f":"assign|revoke","partitions":[..],"generation":g,"lost":true?} in the array
// `sink()` gives at that moment (none: the callback is not recorded).
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.util.Collection;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/** A rebalance listener writing each callback as an event; runs inside poll, unsubscribe or close. */
abstract class KchaosRebalances implements ConsumerRebalanceListener {
    /** Where the callback running now is recorded; null when it is not. */
    abstract ArrayNode sink();

    /** The member whose generation an event carries. */
    abstract KafkaConsumer<byte[], byte[]> member();

    void event(String f, Collection<TopicPartition> parts, boolean lost) {
        ArrayNode events = sink();
        if (events == null) return;
        ObjectNode ev = events.addObject().put("f", f);
        ArrayNode ps = ev.putArray("partitions");
        parts.stream().map(TopicPartition::partition).sorted().forEach(ps::add);
        try {
            ev.put("generation", member().groupMetadata().generationId());
        } catch (RuntimeException e) {  // thrown here, it would fail the poll the callback runs in
            System.err.println("a rebalance's generation: " + KchaosTxnClient.describe(e));
            ev.putNull("generation");
        }
        if (lost) ev.put("lost", true);
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
        event("assign", parts, false);
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
        event("revoke", parts, false);
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> parts) {
        event("revoke", parts, true);
    }
}
