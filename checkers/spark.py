"""The one SparkSession checkers share, and the history read with an explicit schema.

The history is read from its Parquet form, converted
once beside history.jsonl.

Spark binds to loopback only and runs without its UI: a checker is an offline
computation over a file and must not open ports on other interfaces. On a
remote Spark cluster (`--spark-master spark://...`) the executors must reach
the driver: `KCHAOS_SPARK_DRIVER_HOST` (the CLI's `--spark-driver-host`) names
the local address to bind and advertise instead.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from pyspark import SparkConf, SparkContext, java_gateway
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from kchaos.checkers.spark_cds import driver_java_options
from kchaos.checkers.spark_jvm import ensure_quiet_jvm

if TYPE_CHECKING:
    from py4j.java_gateway import JVMView

# py4j says at INFO each time a Python thread's gateway connection closes: noise in a run's harness.log
logging.getLogger("py4j").setLevel(logging.WARNING)

APP_NAME = "kchaos-check"
LOOPBACK = "127.0.0.1"
DRIVER_HOST_ENV = "KCHAOS_SPARK_DRIVER_HOST"
DRIVER_MEMORY_ENV = "KCHAOS_SPARK_DRIVER_MEMORY"
CORRUPT = "_corrupt_record"
# Its workers start with the checkers' modules already imported (checkers/spark_daemon.py); local masters only.
DAEMON_MODULE = "kchaos.checkers.spark_daemon"
_LOCAL = re.compile(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?")

# The columns of history.parquet (`parquet.ARROW_SCHEMA`): a line's own
# fields, the nemesis name and the rest of a nemesis line as JSON (`detail`),
# and what the converter derived from history order (`Pairing`).
HISTORY_SCHEMA = T.StructType([
    T.StructField("index", T.LongType()),
    T.StructField("time", T.LongType()),
    T.StructField("process", T.StringType()),
    T.StructField("type", T.StringType()),
    T.StructField("f", T.StringType()),
    T.StructField("topic", T.StringType()),
    T.StructField("partition", T.LongType()),
    T.StructField("value", T.LongType()),
    T.StructField("offset", T.LongType()),
    T.StructField("records", T.ArrayType(T.ArrayType(T.LongType()))),
    T.StructField("complete", T.BooleanType()),
    T.StructField("node", T.StringType()),
    T.StructField("error", T.StringType()),
    T.StructField("producer", T.LongType()),
    T.StructField("generation", T.LongType()),
    T.StructField("nemesis", T.StringType()),
    T.StructField("detail", T.StringType()),
    T.StructField(CORRUPT, T.StringType()),
    T.StructField("latency_ns", T.LongType()),
    T.StructField("stream", T.LongType()),
    T.StructField("epoch", T.LongType()),
    T.StructField("acked_before", T.LongType()),
])


def spawn_jvm(args: Any, **kwargs: Any) -> subprocess.Popen:
    """`subprocess.Popen` as pyspark's JVM launch calls it, but started in a session of its own instead of
    through pyspark's `preexec_fn`, so the child runs no Python before its exec.

    pyspark passes a `preexec_fn` that ignores SIGINT in the JVM. With one, Python forks and runs Python code in
    the child before the exec, which Python's documentation says may deadlock when the process has threads.
    kchaos starts Spark from a thread while others work (the history's conversion, a run's clients): a lock one
    of them held at the fork stays held in the child, which then never execs, and the check waits for the JVM
    for ever. Without it, the child execs straight from C. Its own session keeps a terminal's Ctrl-C (and
    hangup) from the JVM, as the ignored SIGINT did; it still exits when its stdin, a pipe from this process,
    closes."""
    kwargs.pop("preexec_fn", None)
    return subprocess.Popen(args, start_new_session=True, **kwargs)


java_gateway.Popen = spawn_jvm  # type: ignore[assignment, misc]  # see spawn_jvm

_session: SparkSession | None = None
_context: SparkContext | None = None
_lock = threading.RLock()


def _alive(sc: SparkContext | None) -> TypeGuard[SparkContext]:
    return sc is not None and sc._jsc is not None


def spark_context(master: str = "local[*]") -> SparkContext:
    """The process-wide SparkContext, created on first call (or by `prestart`) and reused after.

    Loopback-only, no UI, WARN logging, Python tasks in this interpreter. The
    first call's `master` wins: later calls return the same context whatever
    they pass. A context stopped by someone else is replaced by a new one.
    Creating it also starts Spark's Python workers in the background.
    """
    global _context
    with _lock:
        if _session is not None and _alive(_session.sparkContext):
            return _session.sparkContext
        if _alive(_context):
            return _context
        if _alive(SparkContext._active_spark_context):
            _context = SparkContext._active_spark_context
            return _context
        conf = _conf(master)
        ensure_quiet_jvm(conf)
        _context = SparkContext(conf=conf)
        _context.setLogLevel("WARN")
        threading.Thread(target=_start_workers, args=(_context,), name="spark-workers", daemon=True).start()
        return _context


def prestart(master: str = "local[*]", niceness: int = 0) -> None:
    """Start creating the process's SparkContext in a background thread, unless it exists; return at once.

    A caller about to convert a history lets the JVM start meanwhile;
    `spark_context` then waits for it. An error is raised by that later call.
    With `niceness`, the JVM and the Python workers it forks run at that
    niceness for their lives, yielding the CPU to the rest of this process.
    """
    if _alive(_context) or (_session is not None and _alive(_session.sparkContext)):
        return

    def start() -> None:
        try:
            if niceness:
                # Linux keeps a niceness per thread, and a process forked from this thread inherits it.
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)
            spark_context(master)
        except Exception:
            pass

    threading.Thread(target=start, name="spark-start", daemon=True).start()


def _start_workers(sc: SparkContext) -> None:
    # The first job starts Spark's Python daemon and workers (seconds): do it before one is needed.
    try:
        n = sc.defaultParallelism
        sc.parallelize(range(n), n).foreach(_nothing)
    except Exception:
        pass


def _nothing(_: object) -> None:
    return None


def spark_session(master: str = "local[*]") -> SparkSession:
    """The process-wide SparkSession on `spark_context(master)`, created on first call and reused after.

    At most 8 shuffle partitions (fewer on a local master with fewer
    threads). The first call's `master` wins. A session stopped by someone
    else is replaced by a new one.
    """
    global _session
    with _lock:
        if _session is not None and _alive(_session.sparkContext):
            return _session
        sc = spark_context(master)
        _session = SparkSession.builder.config(conf=_conf(master)).getOrCreate()
        # A single run's `run` column is a constant, which Spark folds out of window partitions and then
        # warns, once per query, about windows "without partition": noise on every check's console.
        jvm = cast("JVMView", sc._jvm)  # cast: a live context's JVM gateway is up (None only before it starts)
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            "org.apache.spark.sql.execution.window.WindowExec", jvm.org.apache.logging.log4j.Level.ERROR)
        return _session


def _conf(master: str) -> SparkConf:
    host = os.environ.get(DRIVER_HOST_ENV) or LOOPBACK
    # Read by the JVM at startup, so it must be set before the gateway launches.
    os.environ["SPARK_LOCAL_IP"] = host
    # The checker's tasks run Python (numpy, pyarrow): this interpreter's, not whatever
    # `python3` is on the PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return SparkConf().setMaster(master).setAppName(APP_NAME).setAll([
        ("spark.driver.host", host),
        ("spark.driver.bindAddress", host),
        ("spark.ui.enabled", "false"),
        ("spark.ui.showConsoleProgress", "false"),
        ("spark.log.level", "WARN"),
        ("spark.sql.shuffle.partitions", str(shuffle_partitions(master))),
        # In local mode the tasks run inside the driver: Spark's 1 GB default spills a
        # 10M-line history to disk. Ignored once a JVM is running.
        ("spark.driver.memory", os.environ.get(DRIVER_MEMORY_ENV) or "4g"),
        ("spark.driver.extraJavaOptions", driver_java_options()),
        # Splits of 16 MB let both cores read a history of a few hundred MB.
        ("spark.sql.files.maxPartitionBytes", str(16 << 20)),
        ("spark.pyspark.python", os.environ["PYSPARK_PYTHON"]),
        *daemon_settings(master, os.environ["PYSPARK_PYTHON"]),
    ])


def daemon_settings(master: str, python: str) -> list[tuple[str, str]]:
    """The Python daemon setting for `master` with workers running `python`: kchaos's own
    (`checkers/spark_daemon.py`) where the workers are this interpreter on this machine, else none (pyspark's)."""
    return [("spark.python.daemon.module", DAEMON_MODULE)] if is_local(master) and python == sys.executable else []


def is_local(master: str) -> bool:
    """Whether `master` runs the executor in this process's JVM: `local`, `local[N]`, `local[*]`, `local[N, F]`."""
    return _LOCAL.fullmatch(master.strip()) is not None


def shuffle_partitions(master: str) -> int:
    """8, or the thread count of a `local`, `local[N]` or `local[*]` master if smaller."""
    # More partitions than local threads only add per-task overhead: on 2 cores,
    # 2 partitions checked both a 20-op and a 400k-op history ~30% faster than 8.
    m = _LOCAL.fullmatch(master.strip())
    if not m:
        return 8
    spec = m.group(1)
    threads = 1 if spec is None else (os.cpu_count() or 1) if spec == "*" else int(spec)
    return max(1, min(8, threads))


# Hadoop paths cannot hold ':' and treat '[', '*', '?', '{' as globs; leaf names
# starting with '.' or '_' are silently skipped as hidden (0 rows, no error).
_SAFE_PATH = re.compile(r"[A-Za-z0-9._/-]+")


@contextlib.contextmanager
def readable_path(path: Path) -> Iterator[str]:
    """A path string Spark reads as exactly the file `path`, valid inside the `with`.

    Paths Hadoop would misread are reached through a symlink in a temporary
    directory, removed on exit.
    """
    path = Path(path).resolve()
    if _SAFE_PATH.fullmatch(str(path)) and not path.name.startswith((".", "_")):
        yield str(path)
        return
    with tempfile.TemporaryDirectory(prefix="kchaos-") as tmp:
        link = Path(tmp) / f"history{path.suffix}"
        link.symlink_to(path)
        yield str(link)


def read_history_df(spark: SparkSession, path: str) -> DataFrame:
    """Every line of the history at `path` (from `readable_path`) as a row of HISTORY_SCHEMA.

    Reads the Parquet form of the history, converting it first (without
    validation) unless an up-to-date one is beside the real file. Lines that
    were not JSON objects matching the schema (a truncated last line, a field
    of an unexpected type) keep whatever parsed and carry the raw line in
    `_corrupt_record`; nothing is dropped.
    """
    from kchaos.checkers.parquet import convert, parquet_path

    given = Path(path)
    real = given.resolve()
    target = convert(real, validate=False)
    if given.is_symlink():
        # A link made by readable_path: link the Parquet file beside it, which lives as long.
        link = parquet_path(given)
        if not link.is_symlink():
            link.symlink_to(target)
        target = link
    return spark.read.schema(HISTORY_SCHEMA).parquet(str(target))


def run_tasks(sc: SparkContext, what: str, fn: Any, jobs: list[Any]) -> list[Any]:
    """`fn` of each job as one Spark task (a job per task, in order), under the job description `what`; the
    results in the jobs' order."""
    sc.setJobDescription(what)
    try:
        return sc.parallelize(jobs, max(1, len(jobs))).map(fn).collect()
    finally:
        sc.setJobDescription(None)  # type: ignore[arg-type]  # pyspark types it str; None (Java's null) clears it
