"""Time the txn checkers, reference (checkers/txn/reference.py) against Spark (checkers/txn/check.py), on
synthetic txn histories of growing size; print seconds and the growth per unit size.

    .venv/bin/python bench/txn_check.py --ops 1000000 2000000
    .venv/bin/python bench/txn_check.py --ops 1000000 10000000   # from 1M to 10M ops

A history is a correct Kafka's (processes running one transaction at a time, 1-4 sends and polls each, some
aborted, some info; every consumer assigned every partition, polls of up to 100 records; final reads of every
partition), written as it is generated, with a few anomalies of every kind planted by tests/corpora/txn.py's
blocks at the end. Both checkers must agree on every count; the script says whether they do.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kchaos.checkers.spark import spark_context

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/corpora: the labelled histories
from corpora.txn import PLANTS, Builder, plant_block

from kchaos.checkers.txn.check import check_txn_spark
from kchaos.checkers.txn.reference import check_txn_file

POLL_MAX = 100


class StreamBuilder(Builder):
    """tests/corpora/txn.py's builder, writing each op to a file instead of keeping it."""

    def __init__(self, fh: Any):
        super().__init__()
        self.fh, self.n = fh, 0
        self.dumps = json.JSONEncoder(separators=(",", ":")).encode

    def add(self, **op: Any) -> int:
        self.fh.write(self.dumps({"index": self.n, "time": self.n * 1000, **op}) + "\n")
        self.n += 1
        return self.n - 1


def write_history(run: Path, ops: int, seed: int = 1, processes: int = 4, partitions: int = 6,
                  per_kind: int = 10) -> dict[str, Any]:
    """Write run/history.jsonl of about `ops` lines (and test.json); return test.json."""
    run.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    logs: list[list[list[int]]] = [[] for _ in range(partitions)]  # [offset, value, state] 0 open 1 ok 2 aborted
    ends = [0] * partitions
    at = [[0] * partitions for _ in range(processes)]  # each consumer's place in each log
    with open(run / "history.jsonl", "w", encoding="utf-8") as fh:
        b = StreamBuilder(fh)
        while b.n < ops:
            proc = rng.randrange(processes)
            type_ = rng.choice(["ok", "ok", "ok", "ok", "fail", "info"])
            visible = type_ == "ok" or (type_ == "info" and rng.random() < 0.5)
            mops: list[list[Any]] = []
            mine: list[list[int]] = []
            for _ in range(rng.randint(1, 4)):
                if rng.random() < 0.5:
                    k = rng.randrange(2 * partitions)
                    p, v = k % partitions, b.fresh()
                    entry = [ends[p], v, 0]
                    logs[p].append(entry)
                    mine.append(entry)
                    mops.append(["send", k, v, p, ends[p]])
                    ends[p] += 1
                else:
                    records: list[list[int]] = []
                    for p in range(partitions):
                        log, i = logs[p], at[proc][p]
                        while i < len(log) and len(records) < POLL_MAX and log[i][2] != 0:
                            if log[i][2] == 1:
                                records.append([p, log[i][0], log[i][1]])
                            i += 1
                        at[proc][p] = i
                    mops.append(["poll", records])
            for entry in mine:
                entry[2] = 1 if visible else 2
            for p in {m[3] for m in mops if m[0] == "send"}:
                ends[p] += 1  # the commit or abort marker
            if type_ == "info" and not visible:
                mops = [m[:4] + [None] if m[0] == "send" else m for m in mops]
            b.txn(proc, type_, mops)
        q, drainer = partitions, processes
        nxt = processes + 1
        for kind in PLANTS:
            if kind == "aborted_read":
                continue  # read_committed polls: it would be a G1a
            for _ in range(per_kind):
                plant_block(kind, b, [q, q + 1], [nxt, nxt + 1, nxt + 2], drainer)
                q, nxt = q + 2, nxt + 3
        for p in range(partitions):
            b.drain(drainer, p, [[p, o, v] for o, v, s in logs[p] if s == 1])
    test = {"workload": {"kind": "txn", "options": {"isolation": "read_committed"}}, "topic": {"partitions": q}}
    (run / "test.json").write_text(json.dumps(test))
    return test


def main(argv: list[str] | None = None) -> int:
    """Generate, check with both checkers, print a table; exit 1 if they disagree."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, nargs="+", default=[1_000_000], help="history sizes in lines")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--skip-reference", action="store_true", help="time Spark only (the reference is slow at 10M)")
    ap.add_argument("--data", type=Path, help="keep each history in DATA/h<ops> and reuse it when there (generating "
                                              "10M lines takes minutes); default: a temporary directory")
    a = ap.parse_args(argv)
    t = time.perf_counter()
    sc = spark_context(a.master)
    sc.parallelize([0], 1).count()
    print(f"spark up in {time.perf_counter() - t:.1f} s (not counted below)")
    rows, agree = [], True
    with tempfile.TemporaryDirectory(prefix="kchaos-txn-bench-") as tmp:
        for ops in a.ops:
            run = (a.data or Path(tmp)) / f"h{ops}"
            t = time.perf_counter()
            kept = a.data is not None and (run / "test.json").exists() and (run / "history.jsonl").exists()
            test = json.loads((run / "test.json").read_text()) if kept else write_history(run, ops)
            gen = 0.0 if kept else time.perf_counter() - t
            size = (run / "history.jsonl").stat().st_size
            ref_s, ref = None, None
            if not a.skip_reference:
                t = time.perf_counter()
                ref = check_txn_file(run / "history.jsonl", test)
                ref_s = time.perf_counter() - t
            t = time.perf_counter()
            got = check_txn_spark(sc, run / "history.jsonl", test)
            spark_s = time.perf_counter() - t
            same = ref is None or got == ref
            agree &= same
            rows.append((ops, size, gen, ref_s, spark_s, same, got["counts"]))
            if a.data is None:
                (run / "history.jsonl").unlink()
    print(f"{'ops':>10} {'MB':>7} {'gen s':>7} {'reference s':>12} {'spark s':>8} {'equal':>6}")
    for ops, size, gen, ref_s, spark_s, same, _ in rows:
        ref_t = f"{ref_s:12.1f}" if ref_s is not None else f"{'-':>12}"
        print(f"{ops:>10} {size / 1e6:7.0f} {gen:7.1f} {ref_t} {spark_s:8.1f} {str(same):>6}")
    base = rows[0]
    for ops, _, _, ref_s, spark_s, _, _ in rows[1:]:
        k = ops / base[0]
        ref_g = f"{(ref_s / base[3]) / k:.2f}" if ref_s and base[3] else "-"
        print(f"growth per unit size {base[0]} -> {ops}: reference {ref_g}, spark {(spark_s / base[4]) / k:.2f}")
    print("counts:", json.dumps({k: v for k, v in rows[-1][6].items() if v}))
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
