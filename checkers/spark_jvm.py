"""Spark's JVM without its console banner: the driver JVM's stderr goes to Python logging.

spark-submit prints a start-up banner on stderr ("Using Spark's default log4j
profile", "Setting default log level", the JVM's incubator-module warning, the
native-hadoop warning) and Spark logs WARN lines there for the life of the
process. kchaos starts the JVM with its stderr in a file and forwards each
line to the `kchaos.spark.jvm` logger: the banner and known noise at DEBUG,
everything else at WARNING, so a real warning lands in the run's harness.log
(and on the console only where no log file is set up, as for `kchaos check`).
"""
from __future__ import annotations

import atexit
import logging
import os
import re
import tempfile
import threading
import time
from typing import IO

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway

log = logging.getLogger("kchaos.spark.jvm")
NOISE = re.compile(
    r"Using incubator modules|Using Spark's default log4j profile|Setting default log level|"
    r"To adjust logging level|Setting Spark log level|NativeCodeLoader|"
    r"Truncated the string representation of a plan|already exists on this machine; not re-adding it")
TAIL_LINES = 20  # of the JVM's stderr, in the error when it exits before answering


def ensure_quiet_jvm(conf: SparkConf) -> None:
    """Start this process's Spark JVM with `conf` and its stderr forwarded to logging, unless one runs.

    Later SparkContexts reuse the JVM. A JVM that exits before answering
    raises RuntimeError with the last lines it printed.
    """
    with SparkContext._lock:
        if SparkContext._gateway is not None:
            return
        fd, path = tempfile.mkstemp(prefix="kchaos-spark-jvm-", suffix=".log")
        atexit.register(_unlink, path)
        with os.fdopen(fd, "w") as err:
            try:
                gateway = launch_gateway(conf, popen_kwargs={"stderr": err})
            except Exception as e:
                raise RuntimeError(f"Spark's JVM did not start: {e}; it printed: {_tail(path)}") from None
        SparkContext._gateway, SparkContext._jvm = gateway, gateway.jvm
    reader = open(path, encoding="utf-8", errors="replace")
    threading.Thread(target=_forward, args=(reader,), name="spark-jvm-stderr", daemon=True).start()


def _forward(reader: IO[str]) -> None:
    partial = ""
    while True:
        chunk = reader.readline()
        if not chunk:
            time.sleep(0.2)
            continue
        partial += chunk
        if not partial.endswith("\n"):
            continue
        line, partial = partial.rstrip("\n"), ""
        if line.strip():
            log.log(logging.DEBUG if NOISE.search(line) else logging.WARNING, "%s", line)


def _tail(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [ln.rstrip() for ln in f if ln.strip()]
    except OSError:
        return "(nothing)"
    return " | ".join(lines[-TAIL_LINES:]) or "(nothing)"


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
