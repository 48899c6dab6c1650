"""Benchmark: Kafka produce throughput with the log directories on lazyfs vs on plain container storage.

    python bench/lazyfs_produce.py [SECONDS] [RECORD_BYTES]     (default: 20 1024)

For each storage in turn, brings up the same 3-node cluster, creates a topic
(3 partitions, RF 3, min.insync 2), and lets one producer (acks=all,
linger 5 ms) send as fast as it can for SECONDS. Prints acknowledged
records/s and MB/s per storage and the lazyfs/plain ratio (target: >= 0.5).
Runs side by side on the same machine; not a test.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from clusters import admin
from clusters.docker import DockerCluster, cleanup
from harness.config import ClusterConfig, TopicConfig
from harness.runner import prepare

TOPIC = TopicConfig(name="bench", partitions=3, replication_factor=3, min_insync=2)


def produce_for(bootstrap: str, seconds: float, size: int) -> tuple[int, float]:
    """Send `size`-byte records for `seconds`; return (records acknowledged, seconds including the final flush)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 262144,
                  "queue.buffering.max.kbytes": 65536, "logger": admin.CLIENT_LOG})
    acked = 0

    def done(err, msg):  # noqa: ANN001
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


def measure(storage: str, image: str, seconds: float, size: int) -> tuple[float, float]:
    """Records/s and MB/s acknowledged on a fresh cluster with `storage`."""
    with tempfile.TemporaryDirectory() as run:
        cluster = DockerCluster(ClusterConfig(storage=storage), image, Path(run), say=lambda m: None)
        try:
            cluster.setup()
            admin.create_topic(cluster.bootstrap(), TOPIC)
            cluster.wait_topic(TOPIC.name, 3)
            produce_for(cluster.bootstrap(), 3, size)  # warm up JIT and connections
            acked, took = produce_for(cluster.bootstrap(), seconds, size)
        finally:
            cluster.teardown()
    return acked / took, acked * size / took / 1e6


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    cleanup()
    image = prepare("3.7.2")
    rows = {s: measure(s, image, seconds, size) for s in ("plain", "lazyfs")}
    print(f"produce, acks=all, RF 3, {size}-byte records, {seconds:g} s per storage")
    print(f"{'storage':<8} {'records/s':>10} {'MB/s':>8}")
    for s, (rps, mbps) in rows.items():
        print(f"{s:<8} {rps:>10.0f} {mbps:>8.2f}")
    print(f"lazyfs/plain: {rows['lazyfs'][0] / rows['plain'][0]:.2f}")


if __name__ == "__main__":
    main()
