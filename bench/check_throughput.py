"""Benchmark: operations checked per second by the Spark queue checker on a synthetic clean history.

    python bench/check_throughput.py [OPS ...]      (default: 100000 1000000)

Prints one line per size: history lines, seconds end to end (including Spark
start-up for the first size), lines per second and the verdict.
"""
from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from pathlib import Path

from checkers import check_path


def write_history(path: Path, sends: int, partitions: int = 6, producers: int = 8, seed: int = 0) -> int:
    """A clean history: `sends` acked sends, one poll per 50 sends, a complete drain; returns its line count."""
    rng = random.Random(seed)
    next_offset = [0] * partitions
    logs: list[list[int]] = [[] for _ in range(partitions)]
    n = 0
    t = 0
    with open(path, "w") as fh:
        def emit(**rec):
            nonlocal n, t
            t += 1000
            fh.write(json.dumps({"index": n, "time": t, **rec}, separators=(",", ":")) + "\n")
            n += 1
        for v in range(1, sends + 1):
            proc, p = v % producers, rng.randrange(partitions)
            emit(process=proc, type="invoke", f="send", topic="t", partition=p, value=v)
            emit(process=proc, type="ok", f="send", topic="t", partition=p, value=v, offset=next_offset[p])
            logs[p].append(v)
            next_offset[p] += 1
            if v % 50 == 0:
                q = rng.randrange(partitions)
                recs = [[q, o, logs[q][o]] for o in range(max(0, len(logs[q]) - 20), len(logs[q]))]
                emit(process=producers, type="invoke", f="poll")
                emit(process=producers, type="ok", f="poll", records=recs)
        for p in range(partitions):
            for start in range(0, max(1, len(logs[p])), 1000):
                recs = [[p, o, logs[p][o]] for o in range(start, min(start + 1000, len(logs[p])))]
                done = start + 1000 >= len(logs[p])
                emit(process=producers + 1, type="invoke", f="drain", partition=p)
                emit(process=producers + 1, type="ok", f="drain", partition=p, records=recs, complete=done)
    return n


def main(sizes: list[int]) -> None:
    """Run the benchmark for each target size (in history lines, approximately)."""
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            hist = Path(tmp) / "history.jsonl"
            lines = write_history(hist, sends=size // 2)
            start = time.perf_counter()
            res = check_path(hist)
            secs = time.perf_counter() - start
            print(f"{lines:>10} ops  {secs:7.1f} s  {lines / secs:>10.0f} ops/s  valid={res['valid']}", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100_000, 1_000_000])
