"""A labelled corpus: synthetic queue-workload histories with anomalies planted at known places.

`generate` returns a history (in memory) with its test.json and, for every
anomaly kind of docs/checkers.md, the exact set of keys the definitions say
are anomalous; `write_large` streams a big one to disk. Both are
deterministic by seed. How the run is simulated and how each plant is built
so that it causes exactly its own key: tests/corpora/sim.py.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpora.sim import ANOMALIES, NEMESIS, PLANTS, TOPIC, Simulation
from kchaos import nemesis
from kchaos.core.faults import write_faults

__all__ = ["ANOMALIES", "PLANTS", "Corpus", "LargeCorpus", "generate", "write", "write_large"]

# write_large: history lines per main-phase send, measured on the defaults below.
LINES_PER_SEND = 2.17
# faults.json as the runner writes it for the simulation's nemesis.
FAULTS = (nemesis.fault_kind(NEMESIS),)


@dataclass(frozen=True)
class Corpus:
    """A history (`ops`, in history order), its test.json (`test`) and its labels.

    `planted[kind]` is, for every kind in ANOMALIES, the set of keys the
    definitions make anomalous: values (ints), (partition, offset) for
    inconsistent_offset, committed_unconsumed and double_consumed,
    (process, partition, from_offset, to_offset) for
    poll_skip and nonmonotonic_poll.
    """

    ops: list[dict[str, Any]]
    test: dict[str, Any]
    planted: dict[str, set[Any]]


@dataclass(frozen=True)
class LargeCorpus:
    """A history written to `path` (`lines` lines), its test.json and its labels, as in Corpus."""

    path: Path
    lines: int
    test: dict[str, Any]
    planted: dict[str, set[Any]]


def _test(seed: int, partitions: int, producers: int, consumers: int, idempotent: bool,
          acks: str) -> dict[str, Any]:
    return {"name": "corpus", "seed": seed,
            "topic": {"name": TOPIC, "partitions": partitions, "replication_factor": 3,
                      "min_insync": 2, "unclean": False},
            "producer": {"acks": acks, "idempotence": idempotent},
            "workload": {"producers": producers, "consumers": consumers}}


def generate(seed: int, *, sends: int, partitions: int = 3, producers: int = 4, consumers: int = 2,
             plant: dict[str, int] | None = None, idempotent: bool = False, acks: str = "all",
             empty_partitions: int = 0, info_rate: float = 0.05, fail_rate: float = 0.02,
             drain_complete: bool = True, in_flight: int = 1) -> Corpus:
    """A realistic history of `sends` sends (plus those the plants and the tail add).

    Producers are processes 0..producers*in_flight-1: `in_flight` slots (processes) per
    producer instance, each slot one send outstanding, so an instance has up to
    in_flight overlapping sends (with in_flight > 1 sends carry `producer`, and an
    instance's sends to a partition are written in invocation order; a planted
    nonmonotonic_send then spans two slots of one instance),
    consumers the next `consumers` (assign, then poll; now and then reassign,
    or a poll ends `info`), the drainer the next one. `partitions` partitions
    get traffic; `empty_partitions` more exist with none. Sends end `info`
    (then written or not, half each) at `info_rate` and `fail` (not written)
    at `fail_rate`; with acks="0" ok sends carry no offset. `plant[kind]` (a
    kind of PLANTS: every anomaly, plus "lost_read_bound", a loss only the
    read bound shows) plants that many of each. With drain_complete=False no
    partition's final read completes (so acked values at the end of a
    partition are unseen, and labelled so); otherwise only one partition's
    does not, when lost_read_bound or unseen is planted. Raises ValueError
    for plants the shape cannot host (e.g. poll plants without consumers).
    """
    sim = Simulation(seed, sends=sends, partitions=partitions, producers=producers,
                     consumers=consumers, plant=dict(plant or {}), acks=acks,
                     empty_partitions=empty_partitions, info_rate=info_rate,
                     fail_rate=fail_rate, drain_complete=drain_complete, in_flight=in_flight)
    ops = list(sim.ops())
    test = _test(seed, sim.total, producers, consumers, idempotent, acks)
    if in_flight > 1:
        test["workload"]["in_flight"] = in_flight
    return Corpus(ops=ops, test=test, planted=sim.labels)


def write(corpus: Corpus, run_dir: Path) -> Path:
    """Write `corpus` as run_dir/history.jsonl, run_dir/test.json and run_dir/faults.json; return run_dir."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "history.jsonl", "w", encoding="utf-8") as fh:
        for op in corpus.ops:
            fh.write(json.dumps(op, separators=(",", ":")) + "\n")
    (run_dir / "test.json").write_text(json.dumps(corpus.test, indent=2) + "\n", encoding="utf-8")
    write_faults(run_dir, FAULTS)
    return run_dir


def write_large(run_dir: Path, seed: int, ops: int, *, per_kind: int = 10,
                partitions: int = 6) -> LargeCorpus:
    """Stream a history of about `ops` lines to run_dir/history.jsonl (and test.json, faults.json).

    Never holds the history in memory (only the simulated log, 8 bytes a
    record). Plants `per_kind` of every kind in PLANTS, so the labels hold
    per_kind keys of each anomaly (2 * per_kind for lost) plus the few
    unseen values of the incomplete partition's tail.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    sim = Simulation(seed, sends=max(0, int(ops / LINES_PER_SEND)), partitions=partitions,
                     producers=4, consumers=2, plant=dict.fromkeys(PLANTS, per_kind), acks="all",
                     empty_partitions=1, info_rate=0.05, fail_rate=0.02, drain_complete=True)
    path = run_dir / "history.jsonl"
    lines = 0
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    with open(path, "w", encoding="utf-8") as fh:
        for op in sim.ops():
            fh.write(dumps(op) + "\n")
            lines += 1
    test = _test(seed, sim.total, 4, 2, False, "all")
    (run_dir / "test.json").write_text(json.dumps(test, indent=2) + "\n", encoding="utf-8")
    write_faults(run_dir, FAULTS)
    return LargeCorpus(path=path, lines=lines, test=test, planted=sim.labels)
