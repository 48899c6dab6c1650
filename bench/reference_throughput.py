"""Benchmark: history lines checked per second by the single-process reference checker.

    python bench/reference_throughput.py [LINES ...]      (default: 1000000 10000000)

For each size, streams a labelled corpus history (checkers.corpus.write_large,
10 plants of every kind) to a temporary directory, then checks it in a fresh
interpreter: JSON lines parsed one at a time and fed to check_reference.
Prints the lines, the seconds to generate and to check (parsing included),
lines per second, the checker process's peak RSS, and whether the counts and
examples match the labels.
"""
from __future__ import annotations

import json
import multiprocessing
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/corpora: the labelled histories


def _records(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line)


def _check(path: Path, test: dict[str, Any], out: Any) -> None:
    """Child process: check `path`, send back (seconds, peak RSS in MiB, result)."""
    from kchaos.checkers.queue.reference import check_reference

    start = time.perf_counter()
    result = check_reference(_records(path), test)
    seconds = time.perf_counter() - start
    out.put((seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, result))


def check_in_child(path: Path, test: dict[str, Any]) -> tuple[float, float, dict[str, Any]]:
    """Seconds, peak RSS (MiB) and result of check_reference on `path`, run in a fresh interpreter
    (so its peak RSS is the checker's alone)."""
    spawn = multiprocessing.get_context("spawn")
    queue = spawn.Queue()
    child = spawn.Process(target=_check, args=(path, test, queue))
    child.start()
    seconds, rss, result = queue.get()
    child.join()
    return seconds, rss, result


def main(sizes: list[int]) -> None:
    """Run the benchmark for each target size (in history lines, approximately)."""
    from corpora.queue import write_large

    print(f"{'lines':>11} {'generate s':>10} {'check s':>8} {'lines/s':>9} {'peak RSS MiB':>12}  labels")
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            corpus = write_large(Path(tmp), seed=0, ops=size)
            generated = time.perf_counter() - start
            seconds, rss, result = check_in_child(corpus.path, corpus.test)
            agree = all(result["counts"][k] == len(keys) and
                        result["examples"].get(k, []) == [list(x) if isinstance(x, tuple) else x
                                                          for x in sorted(keys)[:10]]
                        for k, keys in corpus.planted.items())
            print(f"{corpus.lines:>11,} {generated:>10.1f} {seconds:>8.1f} {corpus.lines / seconds:>9,.0f}"
                  f" {rss:>12,.0f}  {'match' if agree else 'DIFFER'} (valid={result['valid']})",
                  flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1_000_000, 10_000_000])
