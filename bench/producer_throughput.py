"""Benchmark: kchaos's recorded ok sends per second vs Kafka's ProducerPerformance and VerifiableProducer.

    python bench/producer_throughput.py [--seconds 30] [--records 2000000] [--rounds 2] [--rate max]
        [--client python|java] [--consumers 0,2] [--acks 1,all] [--in-flight 5000] [--producers 2] [--processes 2]
        [--linger-ms 5] [--long 0] [--kill-leader 60] [--kafka-jit c1|tiered]

With `--rate max` the kchaos workload takes what `kchaos run --rate max` picks on this machine
(harness/full_load.py: the Java client when there is a JDK); any of --client, --in-flight, --producers,
--processes and --linger-ms given wins, as in `kchaos run`. Without it those default to python, 5000, 2, 2
and 5.

On one 3-node cluster (Docker, plain storage), for acks=1 and acks=all, on a fresh topic each
(3 partitions, RF 3, min.insync 2), after one short warm-up run of each (not counted), `--rounds`
rounds of the three, one after the other:

- ProducerPerformance (`kafka-producer-perf-test`), inside node n1, `--records` 8-byte records,
  unthrottled: the ceiling;
- VerifiableProducer, inside node n1, `--records / 2` records: the recording producer of Kafka's own
  system tests, which prints a JSON line per acknowledgement;
- the kchaos queue workload (workloads/queue/workload.py) for `--seconds`, 8-byte values, once with each
  number of `--consumers` (assigned every partition, recording every poll), recording every send into the
  history: ok sends recorded in the merged history, per second of the whole time from its start until
  every send is answered, as a user of `kchaos run` counts them.

Prints records per second for each, per round and the median over rounds, the ratios
kchaos/ProducerPerformance and kchaos/VerifiableProducer, and the peak resident memory of the
harness process and of its child processes (producer processes, or the Java client's JVM) together.
With `--long S` it then runs the acks=all workload for S seconds, printing the resident memory every
minute. With `--kill-leader S` (after the
cluster is gone) it runs
`kchaos run --nemesis kill-leader` for S seconds with the same workload options and prints ok sends
per second over the run and inside fault windows (a leader's kill to its restart).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

from kchaos.clusters import admin
from kchaos.clusters.docker import DockerCluster
from kchaos.core.config import (
    CLIENTS,
    KAFKA_JITS,
    ClusterConfig,
    ProducerConfig,
    TestConfig,
    TopicConfig,
    WorkloadConfig,
    java_clients_version,
)
from kchaos.core.history import History
from kchaos.core.kafka_versions import DEFAULT as KAFKA
from kchaos.core.kafka_versions import perf_command
from kchaos.core.send_stream import merge_streams
from kchaos.harness import full_load
from kchaos.harness.build import java_client
from kchaos.harness.runner import prepare
from kchaos.workloads.java_build import JavaProgram, jdk_problem
from kchaos.workloads.queue.workload import QueueWorkload

REPO = Path(__file__).resolve().parents[1]
TOOL = ["kafka-ctl", "tool"]
OK_SEND = '"type":"ok","f":"send"'  # as History and the stream merge write every ok send
TIME = re.compile(r'"time":(\d+)')


def rss_mb(pids: list[int]) -> float:
    """Resident memory of these processes together, in MB (pid 0: this process; one that is gone: 0)."""
    total = 0
    for pid in (p or os.getpid() for p in pids):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        m = re.search(r"VmRSS:\s+(\d+) kB", status)
        total += int(m.group(1)) if m else 0
    return total / 1024


def children() -> list[int]:
    """The pids of this process's children (producer processes, the Java client's JVM)."""
    pids = []
    for f in Path("/proc/self/task").glob("*/children"):
        try:
            pids += [int(x) for x in f.read_text().split()]
        except OSError:
            pass
    return pids


class RssSampler:
    """Samples (harness MB, child processes MB) every `every` seconds: this process, and its children."""

    def __init__(self, every: float = 1.0):
        self.every, self.samples, self._stop = every, [], threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> RssSampler:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.samples.append((rss_mb([0]), rss_mb(children())))

    def peak(self) -> tuple[float, float]:
        """The highest harness and producer-process figures sampled."""
        return (max((h for h, _ in self.samples), default=0.0), max((w for _, w in self.samples), default=0.0))


def topic_for(acks: str) -> TopicConfig:
    """The fresh topic of one acks setting."""
    return TopicConfig(name=f"bench-acks-{acks}", partitions=3, replication_factor=3, min_insync=2)


def producer_performance(cluster, topic: str, acks: str, records: int) -> float:
    """ProducerPerformance's records/s for `records` 8-byte records, run inside node n1."""
    _, out = cluster.exec("n1", TOOL + perf_command(KAFKA, topic, records, f"{cluster.address('n1')}:9092", acks))
    m = re.search(r"records sent, ([\d.]+) records/sec", out)
    if not m:
        raise RuntimeError(f"ProducerPerformance printed no summary: {out[-500:]}")
    return float(m.group(1))


def verifiable_producer(cluster, topic: str, acks: str, records: int) -> float:
    """VerifiableProducer's acknowledged records/s (its own tool_data summary), stdout kept in the node."""
    script = (f"kafka-ctl tool org.apache.kafka.tools.VerifiableProducer --topic {topic} --max-messages {records} "
              f"--throughput -1 --acks {'-1' if acks == 'all' else acks} "
              f"--bootstrap-server {cluster.address('n1')}:9092 > /tmp/verifiable.out; "
              "grep tool_data /tmp/verifiable.out | tail -1")
    _, out = cluster.exec("n1", ["bash", "-c", script])
    data = json.loads(out.strip().splitlines()[-1])
    if data["acked"] != records:
        raise RuntimeError(f"VerifiableProducer acknowledged {data['acked']} of {records}")
    return float(data["avg_throughput"])


def kchaos_workload(cluster, cfg: TestConfig, seconds: float, java: JavaProgram | None, sampler_every: float = 1.0,
                    report_every: float = 0.0) -> tuple[float, tuple[float, float], int]:
    """(recorded ok sends/s, peak (harness, child processes) RSS MB, history lines) of the queue workload
    run for `seconds`, on the Java client with `java`; ok sends are counted in the merged history.jsonl, per
    second from the start until the workload stopped with every send answered."""
    with tempfile.TemporaryDirectory() as run:
        history = History(Path(run) / "history.jsonl")
        workload = QueueWorkload(cfg, java=java)
        with RssSampler(sampler_every) as rss:
            start = time.monotonic()
            workload.start(cluster, history)
            next_report = start + report_every
            while (now := time.monotonic()) < start + seconds:
                time.sleep(min(1.0, start + seconds - now))
                if report_every and time.monotonic() >= next_report and rss.samples:
                    next_report += report_every
                    harness, workers = rss.samples[-1]
                    print(f"  {time.monotonic() - start:6.0f} s  RSS harness {harness:6.1f} MB, producer processes "
                          f"{workers:6.1f} MB  ok {workload.counts['ok']:,}", flush=True)
            workload.stop()
            elapsed = time.monotonic() - start
        history.close()
        merging = time.monotonic()
        merge_streams(Path(run))
        merge_s = time.monotonic() - merging
        ok = lines = 0
        with open(Path(run) / "history.jsonl", encoding="utf-8") as fh:
            for line in fh:  # a substring test: parsing millions of lines would take longer than the run
                lines += 1
                ok += OK_SEND in line
    if report_every:
        print(f"  merged the producer streams into {lines:,} history lines in {merge_s:.0f} s "
              f"({lines / merge_s:,.0f} lines/s)", flush=True)
    return ok / elapsed, rss.peak(), lines


def fault_window_rates(run: Path) -> tuple[float, float, int]:
    """(ok sends/s over the run, ok sends/s inside kill-to-restart windows, windows) of a run directory.

    One streaming pass: only nemesis lines are parsed; an ok send's time is read from its text.
    """
    oks, windows, opened, first, last = [], [], None, None, None
    with open(run / "history.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if OK_SEND in line or '"type":"invoke","f":"send"' in line:
                t = int(TIME.search(line).group(1))
                first = t if first is None else first
                last = t
                if OK_SEND in line:
                    oks.append(t)
            elif '"process":"nemesis"' in line:
                o = json.loads(line)
                if o["f"] == "kill" and o["type"] == "invoke":
                    opened = o["time"]
                elif o["f"] in ("start", "heal") and o["type"] != "invoke" and opened is not None:
                    windows.append((opened, o["time"]))
                    opened = None
    span = (last - first) / 1e9 if oks else 1.0
    inside = sum(1 for t in oks if any(a <= t <= b for a, b in windows))
    width = sum(b - a for a, b in windows) / 1e9
    return len(oks) / span, inside / width if width else 0.0, len(windows)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rate", choices=("max",), default=None,
                    help="the kchaos workload as `kchaos run --rate max` picks it on this machine")
    ap.add_argument("--client", choices=CLIENTS, default=None, help="the producers' client, as `kchaos run --client`")
    ap.add_argument("--consumers", default="0,2", help="comma-separated numbers of consumers, a kchaos run each")
    ap.add_argument("--acks", default="1,all", help="comma-separated acks settings, a fresh topic each")
    ap.add_argument("--in-flight", type=int, default=None)
    ap.add_argument("--producers", type=int, default=None)
    ap.add_argument("--processes", type=int, default=None)
    ap.add_argument("--linger-ms", type=int, default=None)
    ap.add_argument("--kafka-jit", choices=KAFKA_JITS, default=ClusterConfig().kafka_jit,
                    help="how the brokers' JVMs compile, as `kchaos run --kafka-jit`")
    ap.add_argument("--long", type=float, default=0.0, help="then run acks=all this long, printing memory")
    ap.add_argument("--kill-leader", type=float, default=0.0, help="then a kchaos run under kill-leader this long")
    a = ap.parse_args(argv)
    given = {"client": a.client, "in_flight": a.in_flight, "producers": a.producers, "producer_processes": a.processes,
             "linger_ms": a.linger_ms}
    if a.rate == "max":
        picked = full_load.pick(full_load.usable_cores(), given, java=jdk_problem() is None)
        print(picked["why"], flush=True)
        given = picked["picked"]
    defaults = {"client": "python", "in_flight": 5000, "producers": 2,
                "producer_processes": 2 if given["client"] != "java" else 0, "linger_ms": 5}
    given = {k: defaults[k] if v is None else v for k, v in given.items()}
    a.client, a.in_flight, a.producers, a.processes, a.linger_ms = (
        given[k] for k in ("client", "in_flight", "producers", "producer_processes", "linger_ms"))
    a.consumers = [int(c) for c in a.consumers.split(",")]
    a.acks = a.acks.split(",")
    if a.rounds or a.long:
        compare(a)
    if a.kill_leader:
        under_kill_leader(a)


def compare(a: argparse.Namespace) -> None:
    """The rounds of the three producers on one cluster, then the long run (see the module docstring)."""
    image = prepare(KAFKA)  # no `cleanup()`: it would remove any kchaos cluster on the machine, not only ours
    version = java_clients_version(KAFKA) if a.client == "java" else None
    java = java_client(version) if version else None
    base = TestConfig(seed=1, workload=WorkloadConfig(producers=a.producers, consumers=0, rate="max",
                                                      in_flight=a.in_flight, producer_processes=a.processes,
                                                      client=a.client, client_version=version))
    where = (f"on the Java client (kafka-clients {version})" if java else
             f"in {a.processes or 'no'} worker processes")
    print(f"3 nodes, 3 partitions, RF 3, min.insync 2, 8-byte values; kchaos: {a.producers} producers {where}, "
          f"{a.in_flight} in flight each, linger.ms {a.linger_ms}, {a.seconds:g} s; brokers' JIT {a.kafka_jit}; "
          f"load average {open('/proc/loadavg').read().split()[0]}", flush=True)
    print(f"{'acks':>4} {'cons':>4} {'round':>5} {'ProducerPerf/s':>14} {'Verifiable/s':>12} {'kchaos ok/s':>11} "
          f"{'kchaos/PP':>9} {'kchaos/VP':>9} {'RSS MB harness+procs':>20} {'lines':>10}", flush=True)
    with tempfile.TemporaryDirectory() as run:
        cluster = DockerCluster(ClusterConfig(storage="plain", kafka_jit=a.kafka_jit), image, Path(run),
                                say=lambda m: None)
        try:
            cluster.setup()
            for acks in a.acks:
                topic = topic_for(acks)
                admin.create_topic(cluster.bootstrap(), topic)
                cluster.wait_topic(topic.name, 3)
                cfg = replace(base, topic=topic, producer=ProducerConfig(acks=acks, linger_ms=a.linger_ms))
                producer_performance(cluster, topic.name, acks, a.records // 10)  # warm-ups: JIT, connections
                verifiable_producer(cluster, topic.name, acks, a.records // 20)
                kchaos_workload(cluster, cfg, 5, java)
                for consumers in a.consumers:
                    cfg = replace(cfg, workload=replace(cfg.workload, consumers=consumers))
                    rows = []
                    for r in range(1, a.rounds + 1):
                        pp = producer_performance(cluster, topic.name, acks, a.records)
                        vp = verifiable_producer(cluster, topic.name, acks, a.records // 2)
                        ours, (harness, workers), lines = kchaos_workload(cluster, cfg, a.seconds, java)
                        rows.append((pp, vp, ours))
                        print(f"{acks:>4} {consumers:>4} {r:>5} {pp:>14,.0f} {vp:>12,.0f} {ours:>11,.0f} "
                              f"{ours / pp:>9.2f} {ours / vp:>9.2f} {harness:>9.0f} + {workers:>8.0f} {lines:>10,}",
                              flush=True)
                    pp, vp, ours = (statistics.median(col) for col in zip(*rows))
                    print(f"{acks:>4} {consumers:>4} {'med':>5} {pp:>14,.0f} {vp:>12,.0f} {ours:>11,.0f} "
                          f"{ours / pp:>9.2f} {ours / vp:>9.2f}", flush=True)
            if a.long:
                print(f"acks=all for {a.long:g} s, resident memory of the harness and its producer processes:")
                cfg = replace(base, topic=topic_for("all"), producer=ProducerConfig(acks="all", linger_ms=a.linger_ms))
                ours, (harness, workers), lines = kchaos_workload(cluster, cfg, a.long, java, sampler_every=5.0,
                                                                  report_every=60.0)
                print(f"  {ours:,.0f} ok/s; peak RSS harness {harness:.0f} MB, producer processes {workers:.0f} MB; "
                      f"{lines:,} history lines", flush=True)
        finally:
            cluster.teardown()


def under_kill_leader(a: argparse.Namespace) -> None:
    """`kchaos run --nemesis kill-leader` with the workload options; ok sends/s over it and in fault windows."""
    with tempfile.TemporaryDirectory() as store:
        cmd = [str(REPO / ".venv/bin/kchaos"), "run", "--nemesis", "kill-leader", "--time-limit", str(a.kill_leader),
               "--interval", "15", "--acks", "all", "--linger-ms", str(a.linger_ms), "--in-flight", str(a.in_flight),
               "--producers", str(a.producers), "--client", a.client,
               *(["--producer-processes", str(a.processes)] if a.client != "java" else []), "--consumers", "1",
               "--rate", "max", "--seed", "1", "--store", store, "--kafka-jit", a.kafka_jit,
               "--spark-master", "local[2]"]
        subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run_dir = max(Path(store).glob("*/*/history.jsonl"), key=lambda p: p.stat().st_mtime).parent
        whole, inside, windows = fault_window_rates(run_dir)
        results = json.loads((run_dir / "results.json").read_text())
        print(f"kill-leader, acks=all, {a.kill_leader:g} s: {whole:,.0f} ok/s over the run, {inside:,.0f} ok/s "
              f"inside {windows} kill-to-restart windows (ratio {inside / whole:.2f}); valid={results['valid']}, "
              f"lost {results['counts']['lost']} of {results['counts']['acked']:,}", flush=True)


if __name__ == "__main__":
    main()
