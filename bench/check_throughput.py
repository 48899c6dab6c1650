"""Benchmark: history lines checked per second by the Spark queue checker, from JSON and from columns.

    python bench/check_throughput.py [--data DIR] [--reference-max N] [OPS ...]
        (default sizes: 1000000 10000000 30000000; reference checker up to 10000000)

For each size, a labelled corpus history (checkers.corpus.write_large, 10 plants of every
kind) is written to DIR/h<OPS> (reused when there: generating 30M lines takes minutes),
then on that one file, `local[2]`:

- from JSON: convert history.jsonl -> history.parquet and its bucket layout, validating
  (checkers/parquet.py), then `check_path` on the run (which reuses them): end to end as
  `kchaos check` on a history from an older run or another tool;
- from columns: the same lines handed over as an Arrow table (as the harness has them for
  a run it recorded in columnar form; read back from Parquet beforehand, not timed),
  `write_from_lines`, then `check_path`;
- the single-process reference checker (checkers/queue/reference.py, JSON parsing included) in a
  fresh interpreter, up to --reference-max lines, for its counts and as a speed baseline.

Spark's start and a first check of a tiny history are timed apart, before the first size.
Prints every figure as a ratio measured in this one run: end to end against the 60 s target,
columns against JSON, Spark against the reference, and cost growth between sizes (time
ratio over size ratio: 1.00 is linear). Load averages are printed before and after.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from reference_throughput import check_in_child  # bench/ is on sys.path when run as a script

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/corpora: the labelled histories

MASTER = "local[2]"
TARGET_S = 60.0


def warm_up(tmp: Path) -> float:
    """Start Spark and run one check of a tiny history; the seconds it took."""
    from corpora.queue import generate, write

    from kchaos.checkers import check_path

    start = time.perf_counter()
    check_path(write(generate(0, sends=200), tmp / "warm-up"), spark_master=MASTER)
    return time.perf_counter() - start


def corpus(data: Path, ops: int) -> tuple[Path, dict, dict, int, float]:
    """(history, test, labels, lines, seconds spent generating) of the size-`ops` corpus in `data`."""
    from corpora.queue import write_large

    run = data / f"h{ops}"
    meta = run / "labels.json"
    if meta.exists():
        m = json.loads(meta.read_text())
        return run / "history.jsonl", m["test"], m["planted"], m["lines"], 0.0
    start = time.perf_counter()
    c = write_large(run, seed=0, ops=ops)
    took = time.perf_counter() - start
    planted = {k: len(v) for k, v in c.planted.items()}
    meta.write_text(json.dumps({"test": c.test, "planted": planted, "lines": c.lines}))
    return c.path, c.test, planted, c.lines, took


def fresh(history: Path) -> None:
    """Remove the converted forms beside `history`."""
    from kchaos.checkers.buckets import bucket_dir
    from kchaos.checkers.parquet import parquet_path

    parquet_path(history).unlink(missing_ok=True)
    shutil.rmtree(bucket_dir(parquet_path(history)), ignore_errors=True)
    (history.parent / "results.json").unlink(missing_ok=True)


def lines_table(history: Path):
    """The history's lines as the Arrow table the harness would hand over (from its Parquet form)."""
    import pyarrow.parquet as pq

    from kchaos.checkers.history_lines import LINE_SCHEMA
    from kchaos.checkers.parquet import convert

    return pq.read_table(convert(history), columns=[n for n in LINE_SCHEMA.names if n != "_corrupt_record"])


def measure(history: Path, test: dict, planted: dict, lines: int, reference: bool) -> dict:
    """One size: seconds for each path, counts and whether they agree."""
    from kchaos.checkers import check_path
    from kchaos.checkers.parquet import convert
    from kchaos.checkers.parquet_lines import write_from_lines

    out: dict = {"lines": lines}
    fresh(history)
    start = time.perf_counter()
    convert(history)
    out["convert"] = time.perf_counter() - start
    start = time.perf_counter()
    counts = check_path(history.parent, spark_master=MASTER)["counts"]
    out["check"] = time.perf_counter() - start
    table = lines_table(history)
    fresh(history)
    start = time.perf_counter()
    write_from_lines(table, history)
    out["write"] = time.perf_counter() - start
    del table
    start = time.perf_counter()
    col_counts = check_path(history.parent, spark_master=MASTER)["counts"]
    out["col_check"] = time.perf_counter() - start
    out["labels"] = all(counts[k] == n for k, n in planted.items()) and col_counts == counts
    if reference:
        out["ref"], _, base = check_in_child(history, test)
        out["same"] = base["counts"] == counts
    return out


def main() -> None:
    """Run the benchmark for each size given (history lines, approximately)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("sizes", nargs="*", type=int, default=[1_000_000, 10_000_000, 30_000_000])
    ap.add_argument("--data", type=Path, default=None, help="where corpora are kept (default: a temporary dir)")
    ap.add_argument("--reference-max", type=int, default=10_000_000)
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    data = args.data or Path(tmp.name)
    data.mkdir(parents=True, exist_ok=True)
    histories = []
    for size in args.sizes:
        history, test, planted, lines, took = corpus(data, size)
        if took:
            print(f"generated {lines:,} lines in {took:.1f} s", flush=True)
        histories.append((history, test, planted, lines, size <= args.reference_max))
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    print(f"Spark start-up and warm-up ({MASTER}): {warm_up(Path(tmp.name)):.1f} s", flush=True)
    print(f"{'lines':>11} {'convert':>8} {'check':>7} {'JSON e2e':>8} {'lines/s':>9} {'/60 s':>6}"
          f" {'write':>6} {'check':>7} {'cols e2e':>8} {'cols/JSON':>9} {'ref':>7} {'e2e/ref':>7}  counts")
    rows = []
    for history, test, planted, lines, reference in histories:
        r = measure(history, test, planted, lines, reference)
        rows.append(r)
        e2e, col = r["convert"] + r["check"], r["write"] + r["col_check"]
        ref = f"{r['ref']:>7.1f} {e2e / r['ref']:>7.2f}" if "ref" in r else f"{'-':>7} {'-':>7}"
        agree = ("same as reference, " if r.get("same") else "DIFFER from reference, " if "same" in r else "")
        print(f"{lines:>11,} {r['convert']:>8.1f} {r['check']:>7.1f} {e2e:>8.1f} {lines / e2e:>9,.0f}"
              f" {e2e / TARGET_S:>6.2f} {r['write']:>6.1f} {r['col_check']:>7.1f} {col:>8.1f} {col / e2e:>9.2f}"
              f" {ref}  {agree}{'labels match' if r['labels'] else 'labels DIFFER'}", flush=True)
    for a, b in zip(rows, rows[1:]):
        size = b["lines"] / a["lines"]
        growth = [((b[x] + b[y]) / (a[x] + a[y])) / size for x, y in (("convert", "check"), ("write", "col_check"))]
        print(f"growth {a['lines']:,} -> {b['lines']:,} lines (x{size:.1f}): JSON e2e {growth[0]:.2f}, "
              f"columns e2e {growth[1]:.2f}, check alone {(b['check'] / a['check']) / size:.2f} "
              f"(time ratio / size ratio; 1.00 is linear)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    tmp.cleanup()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
