"""Spark's Python daemon for a local master, with what every checker task needs loaded once, before it forks.

Spark starts one daemon per executor (`python -m <spark.python.daemon.module> pyspark.worker`), which forks
a worker for each Python task slot and keeps it for later tasks. Started as `pyspark.daemon`, each worker
then imports pyspark's worker, numpy, pyarrow and pandas (pyarrow imports pandas the first time it builds an
array) on its own, and the first import of pyspark comes from the zip archive Spark puts first on the
workers' path, which Python compiles again in every process because it keeps no bytecode for a zip. Each
worker paid seconds of CPU for that before its first task (docs/benchmarks.md).

`main` puts those archives behind the interpreter's own site-packages, where the same pyspark is installed
with its bytecode, imports the modules once, and then runs pyspark's daemon, whose forked workers inherit
them. It is used only on a local master (`checkers.spark`), where the executor is this installation;
a remote cluster's workers need not have kchaos installed and keep pyspark's own daemon.
"""
from __future__ import annotations

import sys
from pathlib import Path

# The modules a checker task uses (it travels by value: numpy and pyarrow, never kchaos) and pyspark's worker.
PRELOAD = ("pyspark.worker", "numpy", "pyarrow", "pyarrow.compute", "pyarrow.parquet", "pyarrow.dataset",
           "pandas")


def archives_last(path: list[str]) -> list[str]:
    """`path` with the zip archives last, in their order: an installed package wins over Spark's copy of it,
    which is still found when nothing else has it."""
    zips = [p for p in path if Path(p).suffix == ".zip"]
    return [p for p in path if p not in zips] + zips


def main() -> None:
    """Reorder the path, import PRELOAD, then run pyspark's daemon with this process's arguments."""
    sys.path[:] = archives_last(sys.path)
    for entry in [p for p in sys.path_importer_cache if Path(p).suffix == ".zip"]:
        # A zip's importer re-reads the archive's directory whenever a worker invalidates the import caches.
        del sys.path_importer_cache[entry]
    for name in PRELOAD:
        __import__(name)
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
