"""Cluster metadata through Kafka's admin API: brokers, topics, leaders and ISRs."""
from __future__ import annotations

import base64
import logging
import struct
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_fixed

from kchaos.core.config import TopicConfig


@dataclass(frozen=True)
class PartitionState:
    """One partition as the metadata says: leader broker id (-1 if none), replicas and ISR."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def admin_client(bootstrap: str, timeout_ms: int = 5000, *, reconnect_max_ms: int = 1000) -> AdminClient:
    """An AdminClient that gives up quickly, so callers can retry on their own schedule; it tries a refused
    connection again after at most `reconnect_max_ms` (librdkafka doubles the wait from 100 ms up to that)."""
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": timeout_ms,
                        "socket.connection.setup.timeout.ms": timeout_ms,
                        "reconnect.backoff.ms": min(100, reconnect_max_ms),
                        "reconnect.backoff.max.ms": reconnect_max_ms}, logger=CLIENT_LOG)


STARTING_RECONNECT_MS = 100
# librdkafka's connection-refused chatter while brokers are down goes to harness.log, not the terminal.
CLIENT_LOG = logging.getLogger("kchaos.rdkafka")


def registered_brokers(bootstrap: str, timeout: float = 5.0) -> set[int]:
    """Broker ids that a broker of `bootstrap` reports as registered and unfenced.

    Read from a Metadata response, which lists only unfenced brokers in KRaft
    and which the broker asked answers itself. Not DescribeCluster: librdkafka
    sends that to the metadata's "controller", in KRaft a random unfenced
    broker (a paused one until it is fenced), and librdkafka 2.16 aborted the
    whole process parsing one of its answers while a cluster started
    (assertion `rko_result` in rd_kafka_admin_response_parse, twice in CI).
    """
    # A starting broker opens its listener any moment: asked again within STARTING_RECONNECT_MS of a refusal, it
    # is seen soon after, not up to a second later.
    return set(admin_client(bootstrap, reconnect_max_ms=STARTING_RECONNECT_MS).list_topics(timeout=timeout).brokers)


def settle(request_timeout: float) -> float:
    """How long to wait on the future of an admin request made with `request_timeout`.

    librdkafka completes the future itself once the request times out, but its
    timers run late on a loaded machine (JVMs starting on two cores). Giving
    up first would destroy the client with the request still in flight.
    """
    return request_timeout * 3 + 30


def _transient(e: BaseException) -> bool:
    """A client-side or retriable error: the request may be sent again."""
    if not isinstance(e, KafkaException) or not isinstance(e.args[0], KafkaError):
        return False
    err = e.args[0]
    return err.retriable() or err.code() in (KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT,
                                             KafkaError._TIMED_OUT)


def create_topic(bootstrap: str, topic: TopicConfig, timeout: float = 30.0, attempts: int = 4) -> None:
    """Create the test topic with its durability settings; an existing topic is an error.

    Transient errors are retried: on a cluster that has just come up,
    librdkafka can drop the request with its bootstrap connection
    (_DESTROY_BROKER). If a retry finds the topic there, an earlier attempt
    made it, and that counts as success.
    """
    new = NewTopic(topic.name, num_partitions=topic.partitions, replication_factor=topic.replication_factor,
                   config={"min.insync.replicas": str(topic.min_insync),
                           "unclean.leader.election.enable": str(topic.unclean).lower(),
                           **({"flush.messages": str(topic.flush_messages)} if topic.flush_messages else {}),
                           **({"segment.ms": str(topic.segment_ms)} if topic.segment_ms else {})})
    for attempt in Retrying(stop=stop_after_attempt(attempts), wait=wait_fixed(2),
                            retry=retry_if_exception(_transient), reraise=True):
        with attempt:
            client = admin_client(bootstrap)
            futs = client.create_topics([new], request_timeout=timeout, operation_timeout=timeout)
            try:
                futs[topic.name].result(timeout=settle(timeout))
            except KafkaException as e:
                retried = attempt.retry_state.attempt_number > 1
                if not (retried and e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS):
                    raise


def topic_id(bootstrap: str, topic: str, timeout: float = 5.0) -> str:
    """The id of `topic` as Kafka writes it (URL-safe base64 of its 16 bytes, without padding)."""
    client = admin_client(bootstrap)  # held until the answer: a client collected early fails its futures
    future = client.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic]
    return kafka_uuid(future.result(timeout=timeout).topic_id)


def kafka_uuid(uuid: Any) -> str:  # a confluent_kafka.Uuid, whose stubs lack its bit getters
    """`uuid` as Kafka's Uuid.toString writes it: URL-safe base64 of its 16 bytes, without padding (librdkafka's
    own text uses the standard alphabet, "/" and "+")."""
    raw = struct.pack(">qq", uuid.get_most_significant_bits(), uuid.get_least_significant_bits())
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def partitions(bootstrap: str, topic: str, timeout: float = 5.0,
               client: AdminClient | None = None) -> dict[int, PartitionState]:
    """Leader, replicas and ISR of every partition of `topic`, from cluster metadata (via `client` if given)."""
    md = (client or admin_client(bootstrap)).list_topics(topic, timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        raise KafkaException(t.error if t is not None else f"topic {topic} missing")
    return {p.id: PartitionState(p.id, p.leader, tuple(p.replicas), tuple(p.isrs)) for p in t.partitions.values()}
