"""Benchmark: operations checked per second by the Spark queue checker vs the single-process baseline.

    python bench/check_throughput.py [OPS ...]      (default: 1000000 10000000)

For each size, streams a labelled corpus history (checkers.corpus.write_large,
10 plants of every kind) to a temporary directory, then on that one file:

- convert: history.jsonl -> history.parquet, validating (checkers/parquet.py);
- spark:   check_path on the run directory, `local[2]` (reuses the Parquet);
- baseline: the reference checker (checkers/reference.py) in a fresh
  interpreter, JSON lines parsed one at a time (as bench/reference_throughput.py).

Spark's JVM is started (and warmed up on a tiny history) before the first
size, and its start-up reported apart. Prints seconds for each step, history
lines per second end to end (Spark: convert + check; baseline: parse + check),
the ratio Spark/baseline, and whether both found the same counts for every
kind both compute (and whether those match the corpus labels).
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from reference_throughput import check_in_child  # bench/ is on sys.path when run as a script

MASTER = "local[2]"


def warm_up(tmp: Path) -> float:
    """Start Spark and run one check of a tiny history; the seconds it took."""
    from checkers import check_path
    from checkers.corpus import generate, write

    start = time.perf_counter()
    check_path(write(generate(0, sends=200), tmp / "warm-up"), spark_master=MASTER)
    return time.perf_counter() - start


def main(sizes: list[int]) -> None:
    """Run the benchmark for each target size (in history lines, approximately)."""
    from checkers import check_path
    from checkers.corpus import write_large
    from checkers.parquet import convert

    with tempfile.TemporaryDirectory() as tmp:
        print(f"Spark start-up and warm-up ({MASTER}): {warm_up(Path(tmp)):.1f} s", flush=True)
    print(f"{'lines':>11} {'gen s':>6} {'convert s':>9} {'spark s':>8} {'total s':>8} {'spark ops/s':>11}"
          f" {'baseline s':>10} {'base ops/s':>10} {'ratio':>6}  counts")
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            corpus = write_large(Path(tmp), seed=0, ops=size)
            generated = time.perf_counter() - start

            start = time.perf_counter()
            convert(corpus.path)
            converted = time.perf_counter() - start
            start = time.perf_counter()
            spark = check_path(Path(tmp), spark_master=MASTER)
            checked = time.perf_counter() - start
            total = converted + checked

            base_secs, _, base = check_in_child(corpus.path, corpus.test)
            base_counts = base["counts"]

            both = sorted(set(spark["counts"]) & set(base_counts))
            same = all(spark["counts"][k] == base_counts[k] for k in both)
            labelled = all(base_counts[k] == len(keys) for k, keys in corpus.planted.items())
            differ = [f"{k}: spark {spark['counts'][k]} baseline {base_counts[k]}"
                      for k in both if spark["counts"][k] != base_counts[k]]
            spark_rate, base_rate = corpus.lines / total, corpus.lines / base_secs
            print(f"{corpus.lines:>11,} {generated:>6.1f} {converted:>9.1f} {checked:>8.1f} {total:>8.1f}"
                  f" {spark_rate:>11,.0f} {base_secs:>10.1f} {base_rate:>10,.0f} {spark_rate / base_rate:>6.2f}"
                  f"  {'same' if same else 'DIFFER'} on {len(both)} kinds"
                  f" ({'labels match' if labelled else 'labels DIFFER'}; valid={spark['valid']})"
                  + (f" {differ}" if differ else ""), flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1_000_000, 10_000_000])
