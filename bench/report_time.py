"""Benchmark: seconds and peak memory to write a run's report.html, by history size.

    python bench/report_time.py [LINES ...]      (default: 100000 1000000 10000000)

For each size, streams a labelled corpus history (checkers.corpus.write_large)
to a temporary run directory, converts it to Parquet (as `kchaos check` does
first, timed apart), then times `write_report` in a fresh interpreter and
prints its wall time, CPU time, peak resident memory and the page size. The
run has no results.json, so the report also recomputes fault windows,
availability and latency from the history: the slower of its two paths.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import json, resource, sys, time
from pathlib import Path
from kchaos.reports.run.report import write_report
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/corpora: the labelled histories
t0, c0 = time.perf_counter(), time.process_time()
page = write_report(Path(sys.argv[1]))
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "page_kb": page.stat().st_size / 1024}))
"""


def main(sizes: list[int]) -> None:
    """Print one line per size: lines, convert s, report wall s, cpu s, peak RSS, page KB."""
    from corpora.queue import write_large

    from kchaos.checkers.parquet import convert

    print(f"{'lines':>11} {'convert s':>9} {'report s':>8} {'cpu s':>6} {'peak MB':>8} {'page KB':>8}")
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            corpus = write_large(Path(tmp), seed=0, ops=size)
            start = time.perf_counter()
            convert(corpus.path)
            converted = time.perf_counter() - start
            out = subprocess.run([sys.executable, "-c", CHILD, tmp], capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{corpus.lines:>11,} {converted:>9.1f} {r['wall']:>8.1f} {r['cpu']:>6.1f} {r['rss_mb']:>8.0f}"
                  f" {r['page_kb']:>8.0f}", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100_000, 1_000_000, 10_000_000])
