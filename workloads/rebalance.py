"""A consumer group's rebalance callbacks as events: which partitions were assigned or revoked, under which
generation. The queue workload's group members and the txn workload's subscribe-mode
consumers subscribe through `subscribe` and record the events each its own way
(docs/history.md).

The generation is read from librdkafka's serialized group metadata (`consumer_group_metadata()`, the
CGMDv2 format: a 7-byte magic, then the generation id as a native int32): the group's generation under
the classic protocol, the member's epoch under KIP-848's consumer protocol.
"""
from __future__ import annotations

import gc
import logging
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

_MAGIC = b"CGMDv2:"
log = logging.getLogger("kchaos.group")


def group_id(seed: int) -> str:
    """The group every member of a run joins."""
    return f"kchaos-{seed}-group"


def generation_of(consumer: Consumer) -> int | None:
    """The consumer's current generation (member epoch under KIP-848), or None if librdkafka's metadata
    is not in the format this reads."""
    return parse_generation(consumer.consumer_group_metadata())


def parse_generation(meta: object) -> int | None:
    """The generation id in librdkafka's serialized group metadata (CGMDv2), or None for another format."""
    if not isinstance(meta, bytes) or not meta.startswith(_MAGIC) or len(meta) < len(_MAGIC) + 4:
        return None
    return struct.unpack_from("=i", meta, len(_MAGIC))[0]


@dataclass(frozen=True)
class Rebalance:
    """One callback: `f` "assign" (partitions added) or "revoke" (partitions taken; `lost` when the assignment
    was lost, so it cannot be committed), the partitions sorted, and the generation read in the callback."""

    f: str
    partitions: list[int]
    generation: int | None
    lost: bool = False


def subscribe(consumer: Consumer, topic: str, handle: Callable[[Rebalance], None], live: Callable[[], bool]) -> None:
    """Subscribe `consumer` to `topic`; each rebalance callback (served inside the consumer's poll, consume or
    close, on the calling thread) becomes one `handle(Rebalance)` while `live()`, and nothing after: a crashed
    client's consumer records nothing, and its group metadata is not asked for (librdkafka's
    `consumer_group_metadata` can block for good, holding the GIL, on a consumer its group evicted)."""
    def callback(f: str, lost: bool = False) -> Callable[[Consumer, list[TopicPartition]], None]:
        def run(c: Consumer, partitions: list[TopicPartition]) -> None:
            if live():
                handle(Rebalance(f, sorted(tp.partition for tp in partitions), generation_of(c), lost))
        return run
    consumer.subscribe([topic], on_assign=callback("assign"), on_revoke=callback("revoke"),
                       on_lost=callback("revoke", lost=True))


def leave(consumer: Consumer, timeout: float = 10.0) -> None:
    """Close a member that may hold partitions, serving its revocation first: pause what it holds (nothing more is
    returned, so nothing unrecorded is stored or committed), unsubscribe, and consume until the revocation has
    been served (at most `timeout` seconds), then close it with nothing left to revoke.

    Closing a member that still holds partitions runs the revoke callback inside `rd_kafka_consumer_close`, where
    confluent-kafka's fallback asks `rd_kafka_rebalance_protocol` of a group being torn down, which can block for
    good (librdkafka #4041) holding the GIL: every thread of the harness stops with it. Served by consume, the
    callback runs while the group is still alive."""
    try:
        held = consumer.assignment()
        if held:
            consumer.pause(held)
        consumer.unsubscribe()
        deadline = time.monotonic() + timeout
        while consumer.assignment() and time.monotonic() < deadline:
            consumer.consume(num_messages=1, timeout=0.1)
        consumer.consume(num_messages=1, timeout=0.1)  # a revocation of nothing may still be queued behind it
    except (KafkaException, RuntimeError, SystemError):  # SystemError: a lost membership, raised inside librdkafka
        pass
    try:
        consumer.close()
    except (KafkaException, RuntimeError, SystemError):
        pass


def drop(consumers: list[Any], timeout: float = 10.0) -> bool:
    """Let go of crashed clients' consumers as a killed process's are gone: clear the list and collect them, on a
    thread of their own; True when that finished within `timeout` seconds. confluent-kafka destroys a consumer it
    frees without closing it (no revocation callback, no commit, no LeaveGroup) and releases the GIL while it
    does; closing one instead serves the revocation its group queued when it was evicted, inside the close, where
    librdkafka can block for good (see `leave`). Destroying one of KIP-848's consumer protocol can block for good
    as well (librdkafka 2.16, seen in rebalance-loss on 4.4.0): the thread is then left blocked, the run goes on."""
    if not consumers:
        return True
    doomed, count = consumers[:], len(consumers)
    consumers.clear()
    done = threading.Event()

    def collect() -> None:
        doomed.clear()  # frees them here, unless a reference cycle holds them (then the collection below does)
        gc.collect()
        done.set()
    threading.Thread(target=collect, name="drop-consumers", daemon=True).start()
    if done.wait(timeout):
        return True
    log.warning("librdkafka did not destroy %d crashed consumer(s) within %g s; left blocked, the run goes on",
                count, timeout)
    return False
