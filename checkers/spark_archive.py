"""Making Spark's class archive (`checkers.spark_cds`): a Spark JVM of its own checks a small history and writes the
classes it loaded when it exits."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kchaos.checkers.spark_cds import DUMP_ENV, PREFIX, archive_path
from kchaos.core.cache import cache_lock

MAKE_TIMEOUT_S = 600.0


def make_archive(say: Callable[[str], None] = lambda _m: None) -> Path | None:
    """Make the archive for this machine (`spark_cds.archive_path`) unless it is made (another process making it
    is waited for); return its path, or None (said) when it cannot be made: no java, or a JVM that wrote none.
    Older archives in the same folder are removed (each holds a few hundred MB)."""
    path = archive_path()
    if path is None:
        say("Spark's classes: no java on PATH, so no archive")
        return None
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with cache_lock(path.name):
        if path.is_file():
            return path
        began = time.monotonic()
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            dump = Path(tmp) / path.name
            done = subprocess.run([sys.executable, "-m", __name__, str(dump)], capture_output=True, text=True,
                                  timeout=MAKE_TIMEOUT_S)
            if done.returncode != 0 or not dump.is_file():
                tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
                say(f"Spark's classes: not archived (exit {done.returncode}: {tail or 'no archive written'})")
                return None
            os.replace(dump, path)
        for old in path.parent.glob(f"{PREFIX}*.jsa"):
            if old != path:
                old.unlink(missing_ok=True)
        say(f"Spark's classes archived in {time.monotonic() - began:.0f} s: {path}")
        return path


def _dump(to: Path) -> None:
    """In a process of its own: start Spark with the dump option, check a small queue history as a run's check
    does, stop Spark, and wait for its JVM to exit (it writes the archive then)."""
    from pyspark import SparkContext

    from kchaos.checkers import check_path

    os.environ[DUMP_ENV] = str(to)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        _small_history(run)
        check_path(run, "local[2]")
    gateway = SparkContext._gateway
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    if gateway is not None:
        gateway.shutdown()
        proc = getattr(gateway, "proc", None)
        if proc is not None:
            proc.stdin.close()  # Spark's gateway exits once its stdin closes
            proc.wait(MAKE_TIMEOUT_S)


def _small_history(run: Path) -> None:
    """A queue run of a few acknowledged sends, read back by polls and a drain: what a check of any queue run
    loads."""
    lines: list[dict[str, object]] = []
    t = 1_000_000

    def op(**fields: object) -> None:
        nonlocal t
        t += 1_000_000
        lines.append({"index": len(lines), "time": t, **fields})

    for v in range(1, 7):
        op(process=0, type="invoke", f="send", topic="kchaos", partition=v % 2, value=v, producer=0)
        op(process=0, type="ok", f="send", topic="kchaos", partition=v % 2, value=v, offset=v // 2, producer=0)
    for p in (0, 1):
        records = [[p, v // 2, v] for v in range(1, 7) if v % 2 == p]
        op(process=1, type="invoke", f="poll", topic="kchaos")
        op(process=1, type="ok", f="poll", topic="kchaos", records=records)
        op(process=2, type="invoke", f="drain", topic="kchaos", partition=p)
        op(process=2, type="ok", f="drain", topic="kchaos", partition=p, records=records, complete=True)
    (run / "history.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    (run / "test.json").write_text(json.dumps({"workload": {"kind": "queue"}}), encoding="utf-8")


if __name__ == "__main__":
    _dump(Path(sys.argv[1]))
