"""Time the check of Kafka's own logs (checkers/kafka_errors.py) on synthetic node logs of a given size, in one
process against Spark tasks, side by side in one sitting; print seconds, MB/s and whether both agree.

    .venv/bin/python bench/kafka_logs.py --mb 100 800

Each of three nodes gets a server.log of INFO lines with, every 200 lines, an ERROR event with a stack trace
(NotEnoughReplicas, a refused connection), and one metadata publishing fault on n2: the shape of the exactly-once
copy run whose 712 MB server.log motivated the checker. Without a history every fault is unknown, so the errors
come out unexplained or internal; what is timed is the reading and grouping, which is all that grows with the logs.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from kchaos.checkers.kafka_errors import kafka_errors
from kchaos.checkers.spark import spark_context

INFO = ("[2026-11-26 16:{m:02d}:{s:02d},{ms:03d}] INFO [ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] "
        "Truncating partition kchaos-{p} with TruncationState(offset={o}, completed=true) due to local high "
        "watermark {o} (kafka.server.ReplicaFetcherThread)\n")
ERRORS = (
    "[2026-11-26 16:{m:02d}:{s:02d},{ms:03d}] ERROR [ReplicaManager broker=1] Error processing append operation on "
    "partition kchaos-{p} (kafka.server.ReplicaManager)\n"
    "org.apache.kafka.common.errors.NotEnoughReplicasException: The size of the current ISR Set(1) is insufficient "
    "to satisfy the min.isr requirement of 2 for partition kchaos-{p}\n",
    "[2026-11-26 16:{m:02d}:{s:02d},{ms:03d}] ERROR [BrokerToControllerChannelManager id=2 name=heartbeat] Request "
    "to node 1 failed (org.apache.kafka.clients.NetworkClient)\n"
    "java.net.ConnectException: Connection refused\n\tat java.base/sun.nio.ch.Net.pollConnect(Native Method)\n"
    "\tat org.apache.kafka.common.network.Selector.poll(Selector.java:481)\n",
)
FAULT = ("[2026-11-26 16:57:32,983] ERROR Encountered metadata publishing fault: Error applying topics delta in "
         "MetadataDelta up to 301 (org.apache.kafka.server.fault.LoggingFaultHandler)\n"
         "java.lang.IllegalStateException: failed transition\n\tat kafka.server.metadata.BrokerMetadataPublisher\n")


def write_logs(run: Path, mb: float) -> int:
    """Three nodes' server.log, `mb` MB in all; return the bytes written."""
    per = int(mb * 1e6 / 3)
    for node in ("n1", "n2", "n3"):
        path = run / "nodes" / node / "server.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        size = i = 0
        with open(path, "w") as fh:
            while size < per:
                t = {"m": i // 60000 % 60, "s": i // 1000 % 60, "ms": i % 1000, "p": i % 3, "o": i}
                text = ERRORS[i // 200 % 2].format(**t) if i % 200 == 199 else INFO.format(**t)
                if node == "n2" and i == 1000:
                    text += FAULT
                fh.write(text)
                size += len(text)
                i += 1
    return sum(p.stat().st_size for p in run.glob("nodes/*/server.log"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, nargs="+", default=[100.0], help="sizes of the three logs together, MB")
    ap.add_argument("--spark-master", default="local[2]")
    args = ap.parse_args()
    spark_context(args.spark_master).parallelize([0], 1).count()  # the session's start is no part of a check
    print(f"{'MB':>6} {'one process s':>14} {'Spark s':>8} {'MB/s one':>9} {'MB/s Spark':>10} agree")
    for mb in args.mb:
        with tempfile.TemporaryDirectory() as d:
            run = Path(d)
            size = write_logs(run, mb) / 1e6
            t0 = time.perf_counter()
            here = kafka_errors(run, args.spark_master, local_bytes=1 << 62)
            t1 = time.perf_counter()
            spread = kafka_errors(run, args.spark_master, local_bytes=0)
            t2 = time.perf_counter()
            print(f"{size:6.0f} {t1 - t0:14.2f} {t2 - t1:8.2f} {size / (t1 - t0):9.0f} {size / (t2 - t1):10.0f} "
                  f"{here == spread}")


if __name__ == "__main__":
    main()
