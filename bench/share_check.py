"""Time the share checker on Spark (checkers/share/check.py) against its reference (checkers/share/reference.py) on
labelled share histories of growing size, side by side in one sitting; print seconds, the ratio of the two and
the growth per unit of size, and whether each result equals the corpus's labels.

    .venv/bin/python bench/share_check.py 1000000
    .venv/bin/python bench/share_check.py --data /tmp/sc-corpus 100000 1000000   # reuse the corpora written there

A history is tests/corpora/share.py's `write_large`: a correct share group's deliveries (records acquired one
member at a time, acknowledged from the mix, released ones delivered again, some held past their lock), 10
records of every anomaly kind planted, and a final drain; about 2.4 history lines per delivery. Spark runs on
`local[2]`; its start and a first check of a small history are timed apart, before the first size.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/corpora: the labelled histories
from corpora.share import write_large

from kchaos.checkers.history_scan import read_ops
from kchaos.checkers.share.check import check_share_spark
from kchaos.checkers.share.reference import check_share_ops
from kchaos.checkers.spark import spark_context

MASTER = "local[2]"
TARGET_S = 20.0  # for 1M deliveries


def corpus(data: Path, deliveries: int) -> tuple[Path, dict[str, Any], int, int]:
    """(history, labels, limit, lock ms) of the corpus of about `deliveries` deliveries in `data` (written once)."""
    run = data / f"s{deliveries}"
    if not (run / "labels.json").exists():
        t0 = time.perf_counter()
        write_large(run, seed=deliveries, deliveries=deliveries)
        print(f"  wrote {run} in {time.perf_counter() - t0:.1f} s", flush=True)
    test = json.loads((run / "test.json").read_text())
    options = test["workload"]["options"]
    return run / "history.jsonl", json.loads((run / "labels.json").read_text()), options["delivery_limit"], \
        options["lock_ms"]


def agrees(result: dict[str, Any], labels: dict[str, Any]) -> bool:
    """Whether `result` finds every planted kind's count and the labelled redeliveries."""
    planted = labels["planted"]
    return (all(result["counts"][k] == len(v) for k, v in planted.items())
            and result["redeliveries"] == labels["causes"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("deliveries", nargs="*", type=int, default=[1_000_000])
    ap.add_argument("--data", type=Path, default=None, help="where the corpora are written and reused")
    ap.add_argument("--no-reference", action="store_true", help="time Spark only")
    a = ap.parse_args()
    data = a.data or Path(tempfile.mkdtemp(prefix="share-bench-"))
    data.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    t0 = time.perf_counter()
    sc = spark_context(MASTER)
    small, _, limit, lock_ms = corpus(data, 2000)
    check_share_spark(sc, small, limit, lock_ms)
    print(f"Spark start and a first check: {time.perf_counter() - t0:.1f} s", flush=True)
    rows = []
    for n in a.deliveries:
        history, labels, limit, lock_ms = corpus(data, n)
        size = history.stat().st_size
        t0 = time.perf_counter()
        spark = check_share_spark(sc, history, limit, lock_ms)
        spark_s = time.perf_counter() - t0
        ref_s, same = None, None
        if not a.no_reference:
            t0 = time.perf_counter()
            ref = check_share_ops(read_ops(history), limit, lock_ms)
            ref_s = time.perf_counter() - t0
            same = ref == spark
        rows.append((n, labels["lines"], size, spark_s, ref_s, same, agrees(spark, labels)))
        print(f"  {n:,} deliveries ({labels['lines']:,} lines, {size / 1e6:.0f} MB): Spark {spark_s:.1f} s"
              + ("" if ref_s is None else f", reference {ref_s:.1f} s, Spark/reference {spark_s / ref_s:.2f}, "
                 f"equal {same}") + f", labels {agrees(spark, labels)}", flush=True)
    print("\n| deliveries | lines | Spark | reference | Spark/reference | equal | labels | Spark / 20 s target |")
    print("|---:|---:|---:|---:|---:|---|---|---:|")
    for n, lines, _, s, r, same, ok in rows:
        print(f"| {n:,} | {lines:,} | {s:.1f} s | {'-' if r is None else f'{r:.1f} s'} | "
              f"{'-' if r is None else f'{s / r:.2f}'} | {same} | {ok} | {s / TARGET_S:.2f} |")
    for (n1, _, _, s1, *_), (n2, _, _, s2, *_) in zip(rows, rows[1:]):
        print(f"growth {n1:,} -> {n2:,}: {(s2 / s1) / (n2 / n1):.2f} (1.00 is linear)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
