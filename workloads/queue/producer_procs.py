"""Producer instances in worker OS processes, past the GIL, each process recording its own send stream.

`ProducerProcesses.start` spawns K processes; producer instance p runs in
process p mod K, one thread per instance, and records into that process's
`history.parts/producers-<k>.arrows` (a `SendStream`) on the
history's clock. The harness merges the streams into history.jsonl after the
run. A worker whose harness died (SIGKILL) flushes what it has and exits
within a flush interval; `kchaos cleanup` finds any left by their command line.
"""
from __future__ import annotations

import dataclasses
import logging
import multiprocessing as mp
import os
import threading
from multiprocessing.sharedctypes import SynchronizedArray
from pathlib import Path
from typing import Any

from kchaos.core.config import ProducerConfig
from kchaos.core.send_stream import FLUSH_S, PARTS_DIR, SendStream

log = logging.getLogger("kchaos.workload")
COUNT_KEYS = ("send", "ok", "fail", "info")


@dataclasses.dataclass(frozen=True)
class LoopSpec:
    """What every producer loop of a run shares (picklable, for the worker processes)."""

    bootstrap: str
    producer: dict[str, Any]  # ProducerConfig as a dict
    topic: str
    partitions: int
    instances: int  # producer instances in the whole run
    in_flight: int
    rate: float  # sends per second, all instances together; infinite: unthrottled (--rate max)
    seed: int

    def loop(self, instance: int, recorder):
        """The ProducerLoop of producer instance `instance`; its values are instance+1 + instances*i."""
        import itertools

        from kchaos.workloads.queue.producer_loop import ProducerLoop

        return ProducerLoop(self.bootstrap, ProducerConfig(**self.producer), topic=self.topic,
                            partitions=self.partitions, producer=instance, in_flight=self.in_flight,
                            rate=self.rate / self.instances, seed=self.seed,
                            values=itertools.count(instance + 1, self.instances).__next__, recorder=recorder)


class ProducerProcesses:
    """K worker processes running the run's producer instances; see the module docstring."""

    def __init__(self, spec: LoopSpec, processes: int, run_dir: Path, t0_ns: int):
        self.spec = spec
        self.k = processes
        self.parts = Path(run_dir) / PARTS_DIR
        self.t0 = t0_ns
        self._ctx = mp.get_context("spawn")
        self._stop = self._ctx.Event()
        self._procs: list[mp.process.BaseProcess] = []
        self._counts: list[SynchronizedArray] = []

    def start(self) -> None:
        """Spawn the workers; they start sending at once."""
        self.parts.mkdir(exist_ok=True)
        for k in range(self.k):
            counts = self._ctx.Array("q", len(COUNT_KEYS), lock=False)
            instances = list(range(k, self.spec.instances, self.k))
            p = self._ctx.Process(target=_worker, name=f"kchaos-producers-{k}", daemon=True,
                                  args=(self.spec, instances, self.parts / f"producers-{k}.arrows",
                                        self.t0, self._stop, counts, os.getpid()))
            p.start()
            self._procs.append(p)
            self._counts.append(counts)

    def counts(self) -> dict[str, int]:
        """Sends invoked and completed so far, summed over the workers (at most a flush interval old)."""
        return {key: sum(c[i] for c in self._counts) for i, key in enumerate(COUNT_KEYS)}

    def stop(self, timeout: float) -> None:
        """Ask every worker to stop, wait for each to record its outstanding sends, kill any that do not."""
        self._stop.set()
        for p in self._procs:
            p.join(timeout)
            if p.is_alive():
                log.warning("producer process %s did not stop; killing it", p.name)
                p.kill()
                p.join(5)
        self._procs = []


def _worker(spec: LoopSpec, instances: list[int], path: Path, t0: int, stop, counts, parent: int) -> None:
    # librdkafka's chatter and any crash go to the run's harness.log, as they do in the harness itself.
    handler = logging.FileHandler(path.parent.parent / "harness.log")
    handler.setFormatter(logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s [%(processName)s/%(threadName)s] %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    stream = SendStream(path, topic=spec.topic, t0_ns=t0)
    stopping = threading.Event()

    def run(instance: int) -> None:
        try:
            spec.loop(instance, stream).run(stopping.is_set)
        except Exception:
            log.exception("producer %d died", instance)

    threads = [threading.Thread(target=run, args=(i,), name=f"producer-{i}") for i in instances]
    for t in threads:
        t.start()
    while not stop.wait(FLUSH_S):
        for i, key in enumerate(COUNT_KEYS):
            counts[i] = stream.counts[key]
        if os.getppid() != parent:  # the harness is gone: keep what was recorded, send nothing more
            stream.flush()
            os._exit(1)
    stopping.set()
    for t in threads:
        t.join()
    stream.close()
    for i, key in enumerate(COUNT_KEYS):
        counts[i] = stream.counts[key]
