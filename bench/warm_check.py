"""Benchmark: `kchaos check RUN` in a fresh process against the same command answered by `kchaos serve
--warm-check`, side by side in one sitting.

    python bench/warm_check.py RUN [ROUNDS]      (default: 5 rounds)

RUN is a checked run directory (a demo run: `kchaos run --time-limit 60 --rate 200 --producers 4`). It is copied
twice into a temporary directory: one copy below a store that a `kchaos serve --warm-check` holds, one below a
store without. Each round times the command on both, in turns, and the lines say the median wall seconds of
each and their ratio (warm / cold). The first warm answer is timed too and shown apart: it is the service's
first job.
"""
from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kchaos.harness.warm_check import SOCKET

KCHAOS = [sys.executable, "-m", "kchaos"]
WARM = "checked by kchaos serve --warm-check"
TARGET_S = 2.0  # a warm check of a demo run


def _timed(run: Path) -> tuple[float, bool]:
    start = time.perf_counter()
    out = subprocess.run([*KCHAOS, "check", str(run)], capture_output=True, text=True)
    if out.returncode not in (0, 1, 2):
        raise SystemExit(f"kchaos check {run}: exit {out.returncode}: {out.stderr[-2000:]}")
    return time.perf_counter() - start, WARM in out.stderr


def main(run: Path, rounds: int) -> None:
    """Print the cold and warm medians over `rounds` interleaved rounds, and their ratio."""
    with tempfile.TemporaryDirectory() as tmp:
        cold_run = Path(tmp) / "cold" / run.name
        warm_store = Path(tmp) / "warm"
        warm_run = warm_store / run.name
        shutil.copytree(run, cold_run, symlinks=True)
        shutil.copytree(run, warm_run, symlinks=True)
        serve = subprocess.Popen([*KCHAOS, "serve", "--warm-check", "--store", str(warm_store), "--port", "0"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            while not (warm_store / SOCKET).is_socket():
                if serve.poll() is not None:
                    raise SystemExit("kchaos serve --warm-check did not start")
                time.sleep(0.1)
            first, served = _timed(warm_run)
            assert served, "the warm store's check was not answered by the service"
            cold, warm = [], []
            for _ in range(rounds):
                cold.append(_timed(cold_run)[0])
                seconds, served = _timed(warm_run)
                assert served, "the warm store's check was not answered by the service"
                warm.append(seconds)
        finally:
            os.killpg(serve.pid, signal.SIGTERM)
            serve.wait(30)
    c, w = statistics.median(cold), statistics.median(warm)
    print(f"run: {run} ({sum(1 for _ in open(run / 'history.jsonl'))} history lines), {rounds} rounds")
    print(f"cold check (own Spark)   median {c:5.2f} s  ({', '.join(f'{x:.2f}' for x in cold)})")
    print(f"warm check (serve)       median {w:5.2f} s  ({', '.join(f'{x:.2f}' for x in warm)}); first {first:.2f} s")
    print(f"warm / cold              {w / c:.2f}")
    print(f"warm / {TARGET_S:g} s target       {w / TARGET_S:.2f}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]).resolve(), int(sys.argv[2]) if len(sys.argv) > 2 else 5)
