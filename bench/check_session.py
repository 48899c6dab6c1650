"""Benchmark: a 100k-operation run checked in a fresh process, JVM start included; then more runs in it.

    python bench/check_session.py [OPS] [RUNS]      (default: 100000 3)

Writes RUNS labelled corpus histories of about OPS lines each (checkers.corpus.write_large,
different seeds), then starts one fresh interpreter that does what `kchaos check RUN` (and,
for every later run, a suite or scenario in one harness process) does: `check_path` on each
run in turn, sharing the process's one Spark session. Prints, from the parent's clock, the
wall time from spawning the interpreter to the first run's results.json, its parts (Python
start and imports, then check_path: the JVM starting while the history converts, and the
check) and each later run's time, the
ratio of the first to the 10 s target, and whether the counts match the corpus labels.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/corpora: the labelled histories

TARGET_S = 10.0
MASTER = "local[2]"

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from kchaos.checkers import check_path
t1 = time.perf_counter()
out = []
for run in sys.argv[2:]:
    a = time.perf_counter()
    r = check_path(run, sys.argv[1])  # as `kchaos check`: the JVM starts while the history converts
    b = time.perf_counter()
    out.append({"check": b - a, "counts": r["counts"], "done": time.time()})
print(json.dumps({"imports": t1 - t0, "runs": out}))
"""


def main(ops: int, runs: int) -> None:
    """Run the benchmark: `runs` histories of about `ops` lines, checked in one fresh process."""
    from corpora.queue import write_large

    with tempfile.TemporaryDirectory() as tmp:
        dirs, labels = [], []
        for seed in range(runs):
            corpus = write_large(Path(tmp) / f"run{seed}", seed=seed, ops=ops)
            dirs.append(str(corpus.path.parent))
            labels.append(({k: len(v) for k, v in corpus.planted.items()}, corpus.lines))
        print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
        start = time.time()
        proc = subprocess.run([sys.executable, "-c", CHILD, MASTER, *dirs], capture_output=True, text=True)
        if proc.returncode:
            sys.exit(proc.stderr[-3000:])
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        first = res["runs"][0]["done"] - start
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        print(f"first run ({labels[0][1]:,} lines), fresh process to results.json: {first:.1f} s "
              f"= {first / TARGET_S:.2f} of the {TARGET_S:.0f} s target")
        one = res["runs"][0]
        print(f"  interpreter start and imports {first - one['check']:.1f} s (imports {res['imports']:.1f} s), "
              f"check_path (JVM start overlapping the conversion, then the check) {one['check']:.1f} s")
        for i, r in enumerate(res["runs"]):
            planted, lines = labels[i]
            ok = all(r["counts"][k] == n for k, n in planted.items())
            print(f"run {i + 1}: {lines:,} lines, check_path {r['check']:.1f} s"
                  f"{' (JVM start included)' if i == 0 else ' in the shared session'}; "
                  f"labels {'match' if ok else 'DIFFER'}")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*(args + [100_000, 3][len(args):]))
