"""Every broker's own view of the partitions at the end of a run: what the agreement checks compare.

`sample_views(cluster, topic, within_s)` asks each broker of the cluster (each member: a spare not yet added, or a
decommissioned broker, is not asked) alone (a Metadata request, which a broker answers from its
own metadata cache) for the leader, replicas and ISR of every partition of the run's topic and of Kafka's internal
topics, in rounds, until two rounds in a row find every broker agreeing, or `within_s` has passed since the first:
a difference that outlasts it is what the metadata check reports. It also asks the high watermark of each of the
topic's partitions (the replica check compares the in-sync replicas below it). The answer is the JSON that
`evidence/views.json` holds (docs/evidence.md). librdkafka's answer carries no leader epoch and no ELR, so
neither is compared.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec

from kchaos.clusters import admin
from kchaos.core.protocols import Topology

__all__ = ["INTERNAL_TOPICS", "POLL_S", "sample_views", "broker_view"]

# The internal topics whose partitions the metadata check compares besides the run's own.
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")
POLL_S = 0.5
ASK_TIMEOUT_S = 5.0

View = list[dict[str, Any]]  # one row per partition: topic, partition, leader, replicas, isr


def broker_view(listener: str, topics: tuple[str, ...]) -> View:
    """The partitions of `topics` as the broker at `listener` alone knows them, sorted; KafkaException when it
    does not answer."""
    md = admin.admin_client(listener, reconnect_max_ms=admin.STARTING_RECONNECT_MS).list_topics(
        timeout=ASK_TIMEOUT_S)
    rows = []
    for name in topics:
        t = md.topics.get(name)
        if t is None or t.error is not None:
            continue
        rows += [{"topic": name, "partition": p.id, "leader": p.leader, "replicas": list(p.replicas),
                  "isr": sorted(p.isrs)} for p in t.partitions.values()]
    return sorted(rows, key=lambda r: (r["topic"], r["partition"]))


def _round(cluster: Topology, topics: tuple[str, ...]) -> tuple[dict[str, View], dict[str, str]]:
    views: dict[str, View] = {}
    errors: dict[str, str] = {}
    for node in (n for n in cluster.nodes if n in cluster.members):
        try:
            views[node] = broker_view(cluster.listener(node), topics)
        except Exception as e:  # a broker that does not answer is recorded, and its view is not compared
            errors[node] = f"{type(e).__name__}: {e}"
    return views, errors


def _agree(views: dict[str, View]) -> bool:
    return len({repr(v) for v in views.values()}) <= 1


def high_watermarks(bootstrap: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """Each partition's high watermark (a read_uncommitted ListOffsets for the latest offset, answered by its
    leader); a partition whose leader does not answer is left out."""
    if not partitions:
        return {}
    client = admin.admin_client(bootstrap)
    futures = client.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in partitions},
                                  isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=ASK_TIMEOUT_S)
    out = {}
    for tp, f in futures.items():
        try:
            out[tp.partition] = f.result(timeout=admin.settle(ASK_TIMEOUT_S)).offset
        except Exception:
            continue
    return out


def sample_views(cluster: Topology, topic: str, within_s: float, *, poll_s: float = POLL_S,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep
                 ) -> dict[str, Any]:
    """Rounds of every broker's view (`broker_view`) until two rounds in a row agree everywhere, or `within_s`
    after the first round; then the topic's high watermarks. Returns views.json's object: the last round's
    `time_ms` (when it began, unix ms), `first_ms`, `rounds`, `within_s`, `agreed` (the last two rounds were one
    view, held by every broker that answered), `brokers` (node -> its view), `errors` (node -> why it did not answer),
    `ids` (node -> its Kafka id) and `high_watermarks` (partition -> offset)."""
    topics = (topic, *INTERNAL_TOPICS)
    first = clock()
    previous: dict[str, View] | None = None
    rounds = 0
    while True:
        began = clock()
        views, errors = _round(cluster, topics)
        rounds += 1
        agreed = bool(views) and _agree(views) and views == previous  # a broker that does not answer is not awaited
        if agreed or clock() - first >= within_s:
            break
        previous = views
        sleep(poll_s)
    own = sorted({r["partition"] for v in views.values() for r in v if r["topic"] == topic})
    return {"time_ms": round(began * 1000, 3), "first_ms": round(first * 1000, 3), "rounds": rounds,
            "within_s": within_s, "agreed": agreed, "brokers": views, "errors": errors,
            "ids": {n: cluster.id_of(n) for n in cluster.nodes if n in cluster.members},
            "high_watermarks": high_watermarks(cluster.bootstrap(), topic, own)}

