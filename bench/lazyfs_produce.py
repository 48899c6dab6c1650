"""Benchmark: Kafka produce throughput with the log directories on lazyfs vs on plain container storage.

    python bench/lazyfs_produce.py [SECONDS] [RECORD_BYTES] [ROUNDS]     (default: 10 1024 2)

In each round, for each storage in turn (plain, then lazyfs), brings up the
same 3-node cluster, creates a topic (3 partitions, RF 3, min.insync 2), and
lets one producer (acks=all, linger 5 ms) send as fast as it can, three
windows of SECONDS. Prints acknowledged records/s and MB/s of every window,
the median per storage, and the lazyfs/plain ratio of the medians (target:
>= 0.5). The producer shares the 2 cores with the brokers, so single windows
are noisy; the rounds interleave the storages so drift hits both. Not a test.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from kchaos.clusters import admin
from kchaos.clusters.docker import DockerCluster, cleanup
from kchaos.core.config import ClusterConfig, TopicConfig
from kchaos.harness.runner import prepare

TOPIC = TopicConfig(name="bench", partitions=3, replication_factor=3, min_insync=2)


def produce_for(bootstrap: str, seconds: float, size: int) -> tuple[int, float]:
    """Send `size`-byte records for `seconds`; return (records acknowledged, seconds including the final flush)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 262144,
                  "queue.buffering.max.kbytes": 65536, "logger": admin.CLIENT_LOG})
    acked = 0

    def done(err, msg):
        nonlocal acked
        acked += err is None

    payload = b"x" * size
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < seconds:
        try:
            p.produce(TOPIC.name, payload, partition=i % TOPIC.partitions, on_delivery=done)
            i += 1
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.flush(60)
    return acked, time.monotonic() - t0


def measure(storage: str, image: str, seconds: float, size: int) -> list[float]:
    """Records/s acknowledged in each of three windows on a fresh cluster with `storage`."""
    with tempfile.TemporaryDirectory() as run:
        cluster = DockerCluster(ClusterConfig(storage=storage), image, Path(run), say=lambda m: None)
        try:
            cluster.setup()
            admin.create_topic(cluster.bootstrap(), TOPIC)
            cluster.wait_topic(TOPIC.name, 3)
            produce_for(cluster.bootstrap(), 3, size)  # warm up JIT and connections
            windows = [produce_for(cluster.bootstrap(), seconds, size) for _ in range(3)]
        finally:
            cluster.teardown()
    return [acked / took for acked, took in windows]


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    cleanup()
    image = prepare("3.7.2")
    got: dict[str, list[float]] = {"plain": [], "lazyfs": []}
    print(f"produce, acks=all, RF 3, {size}-byte records, windows of {seconds:g} s")
    for r in range(rounds):
        for storage in got:
            windows = measure(storage, image, seconds, size)
            got[storage] += windows
            print(f"round {r + 1} {storage:<7} records/s: " + " ".join(f"{w:.0f}" for w in windows), flush=True)
    med = {s: statistics.median(v) for s, v in got.items()}
    for s, m in med.items():
        print(f"median {s:<7} {m:>9.0f} records/s {m * size / 1e6:>7.2f} MB/s")
    print(f"lazyfs/plain: {med['lazyfs'] / med['plain']:.2f}")


if __name__ == "__main__":
    main()
