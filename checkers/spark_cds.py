"""Spark's start-up classes, archived once (class data sharing): every Spark JVM of the checker starts sooner.

A Spark driver spends most of its start reading, parsing and verifying a few thousand classes from Spark's jars.
`checkers.spark_archive.make_archive` (run by `kchaos prepare`) checks a small history in a Spark JVM that writes
the classes it loaded to an archive when it exits (`-XX:ArchiveClassesAtExit`, JDK 13 and later); later JVMs map
that archive (`-XX:SharedArchiveFile`) instead. The archive is named after what it is valid for: the `java` that
Spark's launcher runs, Spark's jars (names, sizes, times), and the driver's JVM options. A JVM that finds no
archive for itself starts as before, and one whose archive no longer matches (a jar replaced since) ignores it:
the JVM checks each jar again when it maps the archive.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from kchaos.core.cache import cache_dir
from kchaos.core.jvm import SHORT_LIVED

# The JVM only schedules the checker's Python tasks and carries their results: its start-up
# (class loading, JIT warm-up) dominates.
DRIVER_JAVA_OPTIONS = " ".join(SHORT_LIVED)
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # a stale archive is ignored without a word on stderr
PREFIX = "spark-classes-"
DUMP_ENV = "KCHAOS_SPARK_CLASSES_TO"  # set in `spark_archive`'s own process: write the archive there instead


def spark_home() -> Path:
    """The Spark that PySpark launches: $SPARK_HOME, else the one inside the pyspark package."""
    if home := os.environ.get("SPARK_HOME"):
        return Path(home)
    import pyspark
    return Path(pyspark.__file__).parent


def _java() -> Path | None:
    """The java Spark's launcher runs: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path() -> Path | None:
    """Where the archive for this machine's java, Spark jars and driver options is, made or not; None without a
    java."""
    java = _java()
    if java is None:
        return None
    jars = sorted((spark_home() / "jars").glob("*.jar"))
    facts = [str(java), java.stat().st_size, java.stat().st_mtime_ns, DRIVER_JAVA_OPTIONS,
             [(j.name, j.stat().st_size, j.stat().st_mtime_ns) for j in jars]]
    key = hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:20]
    return cache_dir() / "spark" / f"{PREFIX}{key}.jsa"


def driver_java_options() -> str:
    """The driver JVM's options: DRIVER_JAVA_OPTIONS, with the archive to map when one is made (in
    `make_archive`'s own process, the file to write the classes to at exit instead)."""
    if dump_to := os.environ.get(DUMP_ENV):
        return f"{DRIVER_JAVA_OPTIONS} -XX:ArchiveClassesAtExit={dump_to} {QUIET}"
    path = archive_path()
    if path is None or not path.is_file():
        return DRIVER_JAVA_OPTIONS
    return f"{DRIVER_JAVA_OPTIONS} -XX:SharedArchiveFile={path} {QUIET}"
